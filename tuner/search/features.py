"""Fixed-length feature vectors of (workload, schedule, hardware), a whole batch at once (numpy).

Every feature is a ratio, a log size relative to the hardware, a fraction or a one-hot flag, so one
cost model learns across workloads and accelerators (a warm start transfers). The analytical
simulator runs on the whole batch and its cost terms are features; its log total cycles is also
returned on its own, as the prior the cost model corrects (``analytical_log_cycles``).
"""
from __future__ import annotations

import numpy as np

from sim import LOOP_ORDERS
from sim.cost.analytical import evaluate, spatial_dims
from sim.cost.kernel import roofline_for
from sim.mapping.footprint import Geometry, cdiv, ifmap_tile_words
from sim.hw.config import DATAFLOWS

from .space import ScheduleSpace

FEATURE_NAMES: tuple[str, ...] = (
    # analytical cost terms, relative to the roofline bound
    "log_total_over_roofline", "compute_frac", "stall_frac", "prologue_frac", "epilogue_frac",
    "log_array_over_roofline", "log_roofline_cycles",
    # traffic and reuse
    "log_dram_over_compulsory", "log_dram_bytes_per_mac", "intensity_over_balance",
    "ifmap_share", "weight_share", "output_share", "log_output_traffic",
    # utilisation
    "pe_utilization", "row_fill", "col_fill", "log_tiles", "log_tiles_per_group_pass",
    # tiles relative to dims and array
    "tile_m_frac", "tile_n_frac", "tile_k_frac", "log_tile_row_over_array", "log_tile_col_over_array",
    "log_tile_tmp", "pad_waste_m", "pad_waste_n", "pad_waste_k",
    "ifmap_buf_frac", "weight_buf_frac", "output_buf_frac",
    # schedule choices
    "df_ws", "df_os", "df_is", "transposed", *(f"order_{o}" for o in LOOP_ORDERS), "double_buffer",
    "k_innermost",
    # workload and hardware
    "is_conv", "is_vector", "log_m_over_rows", "log_n_over_cols", "log_k", "log_groups",
    "log_pes", "log_aspect", "log_balance", "fold_overlap", "log_dram_latency",
)
N_FEATURES = len(FEATURE_NAMES)


def _log2(x) -> np.ndarray:
    return np.log2(np.maximum(np.asarray(x, dtype=float), 1e-12))


def _waste(dim: int, t) -> np.ndarray:
    t = np.minimum(t, dim)
    return cdiv(dim, t) * t / dim - 1.0


def analytical_log_cycles(space: ScheduleSpace, genes: np.ndarray) -> np.ndarray:
    """Natural log of the analytical simulator's total cycles per gene row."""
    r = evaluate(space.workload, space.hw, space.arrays(genes))
    return np.log(np.maximum(r["total_cycles"], 1.0))


def featurize(space: ScheduleSpace, genes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(features [n, N_FEATURES] float32, analytical natural-log total cycles [n])."""
    wl, hw = space.workload, space.hw
    genes = np.atleast_2d(genes)
    n = len(genes)
    s = space.arrays(genes)
    r = evaluate(wl, hw, s)
    total = np.maximum(np.asarray(r["total_cycles"], dtype=float), 1.0)
    wb = hw.array.word_bytes
    ra, ca = hw.array.rows, hw.array.cols
    pes = ra * ca
    bw = hw.dram.bytes_per_cycle
    F = np.zeros((n, N_FEATURES), dtype=np.float64)
    col = {name: i for i, name in enumerate(FEATURE_NAMES)}

    def put(name, v):
        F[:, col[name]] = v

    if wl.is_mac:
        geo = Geometry.of(wl)
        compulsory = geo.g * (ifmap_tile_words(geo, geo.m, geo.k) + geo.k * geo.n + geo.m * geo.n) * wb
        macs = wl.macs
        tm, tn, tk = (np.minimum(x, d) for x, d in ((s.tile_m, geo.m), (s.tile_n, geo.n), (s.tile_k, geo.k)))
        row, colv, tmp = spatial_dims(s.dataflow, s.transposed)
        tiles = np.stack([tm, tn, tk])
        pick = lambda idx, a: np.take_along_axis(a, idx[None, :], axis=0)[0]  # noqa: E731
        t_row, t_col, t_tmp = pick(row, tiles), pick(colv, tiles), pick(tmp, tiles)
        put("row_fill", t_row / (cdiv(t_row, ra) * ra))
        put("col_fill", t_col / (cdiv(t_col, ca) * ca))
        put("log_tile_row_over_array", _log2(t_row / ra))
        put("log_tile_col_over_array", _log2(t_col / ca))
        put("log_tile_tmp", _log2(t_tmp))
        put("tile_m_frac", tm / geo.m)
        put("tile_n_frac", tn / geo.n)
        put("tile_k_frac", tk / geo.k)
        put("pad_waste_m", _waste(geo.m, tm))
        put("pad_waste_n", _waste(geo.n, tn))
        put("pad_waste_k", _waste(geo.k, tk))
        mult = np.where(s.double_buffer, 2, 1) * wb
        need = (ifmap_tile_words(geo, tm, tk) * mult, tk * tn * mult, tm * tn * mult)
        b = hw.buffers
        caps = (b.unified_bytes,) * 3 if b.unified else (b.ifmap_bytes, b.weight_bytes, b.output_bytes)
        for name, nd, cap in zip(("ifmap_buf_frac", "weight_buf_frac", "output_buf_frac"), need, caps):
            put(name, nd / cap)
        pos_k = np.array([o.index("k") for o in LOOP_ORDERS])[s.order]
        put("k_innermost", (pos_k == 2) | (tk >= geo.k))
        put("is_conv", float(geo.conv))
        put("log_m_over_rows", _log2(geo.m / ra))
        put("log_n_over_cols", _log2(geo.n / ca))
        put("log_k", _log2(geo.k))
        put("log_groups", _log2(geo.g))
        n_tiles = np.asarray(r["n_tiles"], dtype=float)
        put("log_tiles_per_group_pass", _log2(cdiv(geo.m, tm) * cdiv(geo.n, tn) * cdiv(geo.k, tk)))
        put("pe_utilization", macs / (pes * total))
        for d in DATAFLOWS:
            put(f"df_{d}", s.dataflow == DATAFLOWS.index(d))
        put("transposed", s.transposed)
        for i, o in enumerate(LOOP_ORDERS):
            put(f"order_{o}", s.order == i)
    else:
        e = wl.operand_elems()
        compulsory = (e["ifmap"] + e["output"]) * wb
        macs = max(1, wl.d["ops"])
        n_tiles = np.asarray(r["n_tiles"], dtype=float)
        big = max(1, wl.d["in_elems"], wl.d["out_elems"])
        put("tile_m_frac", np.minimum(s.tile_m, big) / big)
        put("pad_waste_m", _waste(big, s.tile_m))
        put("is_vector", 1.0)
        put("log_tiles_per_group_pass", _log2(n_tiles))
    roof = max(float(roofline_for(wl, hw)), 1.0)
    dram = np.asarray(r["dram_read_bytes"], dtype=float) + np.asarray(r["dram_write_bytes"], dtype=float)
    put("log_total_over_roofline", _log2(total / roof))
    put("compute_frac", np.asarray(r["compute_cycles"]) / total)
    put("stall_frac", np.asarray(r["stall_cycles"]) / total)
    put("prologue_frac", np.asarray(r["prologue_cycles"]) / total)
    put("epilogue_frac", np.asarray(r["epilogue_cycles"]) / total)
    put("log_array_over_roofline", _log2(np.asarray(r["array_cycles"]) / roof + 1e-3))
    put("log_roofline_cycles", np.log2(roof))
    put("log_dram_over_compulsory", _log2(dram / max(compulsory, 1)))
    put("log_dram_bytes_per_mac", _log2(dram / macs))
    put("intensity_over_balance", _log2((macs / np.maximum(dram, 1.0)) / (pes / bw)))
    dsum = np.maximum(dram, 1.0)
    put("ifmap_share", np.asarray(r["dram_ifmap_bytes"]) / dsum)
    put("weight_share", np.asarray(r["dram_weight_bytes"]) / dsum)
    put("output_share", np.asarray(r["dram_output_bytes"]) / dsum)
    put("log_output_traffic", _log2(np.asarray(r["dram_output_bytes"]) / max(compulsory, 1) + 1e-3))
    put("log_tiles", _log2(n_tiles))
    put("double_buffer", s.double_buffer)
    put("log_pes", np.log2(pes))
    put("log_aspect", np.log2(ra / ca))
    put("log_balance", np.log2(pes / bw))
    put("fold_overlap", float(hw.array.fold_overlap))
    put("log_dram_latency", np.log2(1.0 + hw.dram.latency_cycles))
    return F.astype(np.float32), np.log(total)
