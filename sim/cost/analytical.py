"""Closed-form kernel cost, vectorised over a batch of schedules (numpy; this is what search uses).

Every cost term is a small function of the workload geometry, the hardware and schedule columns
(arrays of equal length, or scalars):

- ``compute_cycles``: array folds x (temporal length + fill/drain), SCALE-Sim's formula when
  ``hw.array.fold_overlap`` is false (every fold pays its own fill and drain), one fill/drain per
  tile when it is true; independent groups are packed block-diagonally on the array when a
  group's tile is smaller than the array.
- ``dram_words``: per operand, the compulsory footprint times the reload factor the loop order gives.
- ``sram_words``: what the array reads and writes in the buffers (SCALE-Sim's counts generalised to tiles).
- ``vector_cycles``: fused epilogue ops on the vector unit.
- ``timing``: first load (prologue) + steady state (compute overlapped with DMA when double-buffered,
  serialised otherwise) + last store (epilogue); DRAM is one port shared by reads and writes.
- ``energy_pj``: MAC, register, SRAM, DRAM, vector and leakage.
- ``roofline_cycles``: max(MACs / PEs + vector work, compulsory bytes / bandwidth), the bound no
  schedule can beat; ``fused_roofline_cycles`` the same for a kernel whose operands partly stay on
  chip inside an external function.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NamedTuple

import numpy as np

from ..mapping.footprint import Geometry, cdiv, fdiv, ifmap_tile_words, ifmap_words_all_tiles
from ..hw.config import DATAFLOWS, HardwareConfig
from ..mapping.schedule import LOOP_ORDERS, STANDARD_SPATIAL, Schedule
from ..workload.workload import SPECIAL_OPS, Workload

DIMS = "mnk"
# Position of each dim (m, n, k) in each loop order, outer = 0.
_POS = np.array([[order.index(d) for d in DIMS] for order in LOOP_ORDERS], dtype=np.int64)
# (row dim, col dim) index per dataflow index (DATAFLOWS order) in the standard orientation.
_STD = np.array([[DIMS.index(STANDARD_SPATIAL[df][0]), DIMS.index(STANDARD_SPATIAL[df][1])]
                 for df in DATAFLOWS], dtype=np.int64)
_OS = DATAFLOWS.index("os")
BINARY_EPILOGUE = frozenset({"add", "sub", "mul", "div"})  # read a second full-size tensor


# ---------------------------------------------------------------------------- schedule columns
@dataclass(frozen=True)
class ScheduleArrays:
    """A batch of schedules as columns. ``dataflow`` indexes ``hw.DATAFLOWS`` (ws, os, is);
    ``order`` indexes ``LOOP_ORDERS``; ``transposed`` flips the spatial orientation; ``unfused``
    counts epilogue ops run as a separate vector pass (0 = all fused)."""
    dataflow: np.ndarray
    transposed: np.ndarray
    tile_m: np.ndarray
    tile_n: np.ndarray
    tile_k: np.ndarray
    order: np.ndarray
    double_buffer: np.ndarray
    unfused: np.ndarray

    @classmethod
    def of(cls, schedules: Iterable[Schedule], wl: Workload | None = None) -> "ScheduleArrays":
        ss = list(schedules)
        epi = set(wl.epilogue) if wl is not None else set()
        return cls(
            np.array([DATAFLOWS.index(s.dataflow) for s in ss], dtype=np.int64),
            np.array([s.transposed for s in ss], dtype=bool),
            np.array([s.tile_m for s in ss], dtype=np.int64),
            np.array([s.tile_n for s in ss], dtype=np.int64),
            np.array([s.tile_k for s in ss], dtype=np.int64),
            np.array([LOOP_ORDERS.index(s.loop_order) for s in ss], dtype=np.int64),
            np.array([s.double_buffer for s in ss], dtype=bool),
            np.array([len(epi - set(s.epilogue)) for s in ss], dtype=np.int64))

    @classmethod
    def from_mapping(cls, cols: Mapping[str, Any]) -> "ScheduleArrays":
        n = len(np.atleast_1d(cols["tile_m"]))

        def col(name, default, dtype):
            v = cols.get(name, default)
            return np.broadcast_to(np.asarray(v, dtype=dtype), (n,)).copy()
        return cls(col("dataflow", 0, np.int64), col("transposed", False, bool),
                   col("tile_m", 1, np.int64), col("tile_n", 1, np.int64), col("tile_k", 1, np.int64),
                   col("order", 0, np.int64), col("double_buffer", True, bool), col("unfused", 0, np.int64))

    def __len__(self) -> int:
        return len(self.tile_m)

    def schedule(self, i: int, wl: Workload) -> Schedule:
        df = DATAFLOWS[int(self.dataflow[i])]
        sp = STANDARD_SPATIAL[df][::-1] if self.transposed[i] else STANDARD_SPATIAL[df]
        return Schedule(df, sp, int(self.tile_m[i]), int(self.tile_n[i]), int(self.tile_k[i]),
                        LOOP_ORDERS[int(self.order[i])], bool(self.double_buffer[i]),
                        wl.epilogue if self.unfused[i] == 0 else ())


# (row, col, temporal) dim per (dataflow index * 2 + transposed).
_RCT = np.array([[*(_STD[d][::-1] if t else _STD[d]), 3 - _STD[d].sum()] for d in range(3) for t in (0, 1)],
                dtype=np.int64)


def spatial_dims(df, transposed):
    """(row dim, col dim, temporal dim) indices into (m, n, k) per schedule (ints for one
    dataflow/orientation, arrays for many)."""
    if np.ndim(df) == 0 and np.ndim(transposed) == 0:
        r, c, t = _RCT[int(df) * 2 + int(bool(transposed))]
        return int(r), int(c), int(t)
    rct = _RCT[np.asarray(df) * 2 + np.asarray(transposed, dtype=np.int64)]
    return rct[..., 0], rct[..., 1], rct[..., 2]


def _clip(x, lo, hi):
    """``np.clip`` for the scalar bounds used here, without its Python-level dispatch (a
    noticeable part of a small batch's cost)."""
    return np.minimum(np.maximum(x, lo), hi)


def _pick(idx, a, b, c):
    """Per element: a where idx == 0, b where 1, c where 2 (or just one of them for an int idx)."""
    if isinstance(idx, int):
        return (a, b, c)[idx]
    return np.where(idx == 0, a, np.where(idx == 1, b, c))


# ---------------------------------------------------------------------------- cost terms
class Tiling(NamedTuple):
    """What most cost terms share about a batch of tilings, computed once per evaluation: the
    (row, col, temporal) dims, tiles clipped to the dims, tiles per dim, the row/col/temporal
    dim and tile, array folds summed over the tiles of the row and col dims, group repeats.
    Each term below also has a public form taking raw schedule columns (built with ``tiling``)."""
    row: Any
    col: Any
    tmp: Any
    tiles: tuple
    nt: tuple
    d_row: Any
    d_col: Any
    d_tmp: Any
    t_row: Any
    t_col: Any
    t_tmp: Any
    f_row: Any
    f_col: Any
    reps: Any


def tiling(geo: Geometry, hw: HardwareConfig, df, transposed, tm, tn, tk) -> Tiling:
    ra, ca = hw.array.rows, hw.array.cols
    row, col, tmp = spatial_dims(df, transposed)
    dims = (geo.m, geo.n, geo.k)
    tiles = (np.minimum(tm, geo.m), np.minimum(tn, geo.n), np.minimum(tk, geo.k))
    nt = (cdiv(geo.m, tiles[0]), cdiv(geo.n, tiles[1]), cdiv(geo.k, tiles[2]))
    d_row, t_row = _pick(row, *dims), _pick(row, *tiles)
    d_col, t_col = _pick(col, *dims), _pick(col, *tiles)
    d_tmp, t_tmp = _pick(tmp, *dims), _pick(tmp, *tiles)
    # When a group's tile is smaller than the array, several groups run side by side
    # (block-diagonal) on it.
    pack = np.where((t_row <= ra) & (t_col <= ca), np.minimum(fdiv(ra, t_row), fdiv(ca, t_col)), 1)
    reps = cdiv(geo.g, _clip(pack, 1, geo.g))
    return Tiling(row, col, tmp, tiles, nt, d_row, d_col, d_tmp, t_row, t_col, t_tmp,
                  folds_v(d_row, t_row, ra), folds_v(d_col, t_col, ca), reps)


def compute_cycles(geo: Geometry, hw: HardwareConfig, df, transposed, tm, tn, tk, order=0):
    """Cycles the PE array is busy, all groups. A fold (one set of stationary data in the PEs)
    costs its temporal length plus a fill/drain: rows+cols-2 for os, 2*rows+cols-2 for ws and is
    (the stationary operand is first preloaded through the rows). Without ``fold_overlap`` every
    fold pays its own fill/drain (SCALE-Sim); with it, one per tile. When a tile is a single fold
    and the temporal loop is the innermost tile loop, consecutive tiles keep the same stationary
    data and stream on without a new fill/drain."""
    return compute_cycles_of(tiling(geo, hw, df, transposed, tm, tn, tk), hw, df, order)


def compute_cycles_of(tl: Tiling, hw: HardwareConfig, df, order=0):
    ra, ca = hw.array.rows, hw.array.cols
    scalar = isinstance(tl.row, int)
    nt_row = tl.nt[tl.row] if scalar else cdiv(tl.d_row, tl.t_row)
    nt_col = tl.nt[tl.col] if scalar else cdiv(tl.d_col, tl.t_col)
    nt_tmp = tl.nt[tl.tmp] if scalar else cdiv(tl.d_tmp, tl.t_tmp)
    if np.ndim(df) == 0:
        ovh = ra + ca - 2 if int(df) == _OS else 2 * ra + ca - 2
    else:
        ovh = np.where(np.asarray(df) == _OS, ra + ca - 2, 2 * ra + ca - 2)
    streams = streams_on(order, tl.row, tl.col, tl.tmp, nt_row, nt_col, nt_tmp, tl.t_row <= ra, tl.t_col <= ca)
    f_row, f_col = tl.f_row, tl.f_col
    if hw.array.fold_overlap:
        fills = np.where(streams, nt_row * nt_col, nt_row * nt_col * nt_tmp)
    else:
        fills = np.where(streams, f_row * f_col, f_row * f_col * nt_tmp)
    per_group = f_row * f_col * tl.d_tmp + fills * ovh
    cycles = tl.reps * per_group
    # The array reads rows + cols words a cycle from SRAM; a narrower SRAM port slows it down.
    slow = max(1.0, (ra + ca) * hw.array.word_bytes / hw.buffers.sram_bytes_per_cycle)
    return np.ceil(cycles * slow) if slow > 1.0 else cycles


def streams_on(order, row, col, tmp, nt_row, nt_col, nt_tmp, row_fits, col_fits):
    """True where consecutive temporal tiles reuse the stationary data already in the array: each
    tile is one fold and no loop with more than one trip runs inside the temporal loop."""
    pos = _POS[order]
    at = lambda d: _pick(d, pos[..., 0], pos[..., 1], pos[..., 2])  # noqa: E731
    p_row = np.where(nt_row > 1, at(row), -1)
    p_col = np.where(nt_col > 1, at(col), -1)
    inner = (np.maximum(p_row, p_col) < at(tmp)) | (nt_tmp == 1)
    return row_fits & col_fits & inner


def group_repeats(geo: Geometry, hw: HardwareConfig, df, transposed, tm, tn, tk):
    """Passes over the groups: when a group's tile is smaller than the array, several groups run
    side by side (block-diagonal) on it."""
    return tiling(geo, hw, df, transposed, tm, tn, tk).reps


def folds_v(dim, t, extent):
    """``footprint.folds`` for array-valued dims (the spatial dim differs per schedule)."""
    t = np.minimum(t, dim)
    q = fdiv(dim, t)
    return q * cdiv(t, extent) + cdiv(dim - q * t, extent)


def reload_factor(order, n_tiles, rel_a: int, rel_b: int, other: int):
    """How many times an operand indexed by dims ``rel_a``, ``rel_b`` is loaded: once per trip of
    the loop ``other`` if that loop runs outside the innermost loop (with more than one trip) that
    indexes the operand; otherwise its tile stays resident across ``other``."""
    pos = _POS[order]
    pa = np.where(n_tiles[rel_a] > 1, pos[..., rel_a], -1)
    pb = np.where(n_tiles[rel_b] > 1, pos[..., rel_b], -1)
    inner = np.maximum(pa, pb)
    return np.where(pos[..., other] < inner, n_tiles[other], 1)


def tile_counts(geo: Geometry, tm, tn, tk):
    return (cdiv(geo.m, np.minimum(tm, geo.m)), cdiv(geo.n, np.minimum(tn, geo.n)),
            cdiv(geo.k, np.minimum(tk, geo.k)))


def dram_words(geo: Geometry, order, tm, tn, tk, epilogue_reads: int = 0) -> dict[str, Any]:
    """DRAM words moved per operand, all groups: ifmap and weight reads, output writes and
    partial-sum read-backs (when K is not the innermost tile loop), and epilogue operand reads."""
    return dram_words_of(geo, order, (tm, tn, tk), tile_counts(geo, tm, tn, tk), epilogue_reads)


def dram_words_of(geo: Geometry, order, tiles, nt, epilogue_reads: int = 0) -> dict[str, Any]:
    f_a = reload_factor(order, nt, 0, 2, 1)
    f_b = reload_factor(order, nt, 2, 1, 0)
    f_c = reload_factor(order, nt, 0, 1, 2)
    a = geo.g * ifmap_words_all_tiles(geo, tiles[0], tiles[2]) * f_a
    b = geo.g * geo.k * geo.n * f_b
    c = geo.g * geo.m * geo.n
    return {"ifmap": a, "weight": b, "output": c * f_c, "psum_read": c * (f_c - 1),
            "epilogue": np.full_like(f_c, epilogue_reads * c)}


def sram_words(geo: Geometry, hw: HardwareConfig, df, transposed, tm, tn, tk) -> dict[str, Any]:
    """Words the array reads/writes in the buffers. An operand whose third dim is spatial is read
    once per fold of that dim; one whose third dim is temporal once per tile of it."""
    return sram_words_of(geo, tiling(geo, hw, df, transposed, tm, tn, tk))


def sram_words_of(geo: Geometry, tl: Tiling) -> dict[str, Any]:
    row, col = tl.row, tl.col

    def per_dim(x):
        if isinstance(row, int):
            return tl.f_row if row == x else tl.f_col if col == x else tl.nt[x]
        return np.where(row == x, tl.f_row, np.where(col == x, tl.f_col, tl.nt[x]))
    g = geo.g
    return {"ifmap": g * geo.m * geo.k * per_dim(1), "weight": g * geo.k * geo.n * per_dim(0),
            "output": g * geo.m * geo.n * per_dim(2)}


def first_load_words(geo: Geometry, tm, tn, tk):
    return first_load_words_of(geo, (np.minimum(tm, geo.m), np.minimum(tn, geo.n), np.minimum(tk, geo.k)))


def first_load_words_of(geo: Geometry, tiles):
    """The first tile's operands (``tiles`` clipped to the dims)."""
    tm, tn, tk = tiles
    return ifmap_tile_words(geo, tm, tk) + tk * tn


def last_store_words(geo: Geometry, tm, tn):
    """The last output tile (short when the dim does not divide)."""
    tiles = (np.minimum(tm, geo.m), np.minimum(tn, geo.n))
    return last_store_words_of(geo, tiles, (cdiv(geo.m, tiles[0]), cdiv(geo.n, tiles[1])))


def last_store_words_of(geo: Geometry, tiles, nt):
    return (geo.m - (nt[0] - 1) * tiles[0]) * (geo.n - (nt[1] - 1) * tiles[1])


def vector_cycles(hw: HardwareConfig, elems: int, ops: tuple[str, ...]) -> int:
    """Vector-unit cycles to apply ``ops`` to ``elems`` elements."""
    v = hw.vector
    work = sum(v.special_op_cycles if op in SPECIAL_OPS else 1.0 for op in ops) * elems
    return int(np.ceil(work / v.lanes))


def timing(compute, dram_bytes, first_bytes, last_bytes, n_tiles, double_buffer, hw: HardwareConfig):
    """(prologue, stall, epilogue) cycles. Prologue: the first tile's load; epilogue: the last
    output tile's store; stall: the steady-state DMA time and DRAM latency compute does not hide
    (all of it without double buffering, where every tile pays the latency in full)."""
    bw, lat = hw.dram.bytes_per_cycle, hw.dram.latency_cycles
    pro = np.ceil(first_bytes / bw) + lat
    epi = np.ceil(last_bytes / bw) + lat
    mid = np.maximum(np.ceil((dram_bytes - first_bytes - last_bytes) / bw), 0)
    # Two buffer halves: a tile's load can start only when the tile two back has computed, so the
    # steady period per tile is max(compute, dma, (compute + dma + latency) / 2).
    lat_bound = (compute + mid + (n_tiles - 1) * lat) / 2
    stall = np.where(double_buffer, np.ceil(np.maximum(np.maximum(mid, lat_bound) - compute, 0)),
                     mid + (n_tiles - 1) * lat)
    return pro, stall, epi


def roofline_parts(wl: Workload, hw: HardwareConfig, vector_work: float = 0.0) -> tuple[float, int]:
    """(compute cycles, compulsory DRAM bytes): the PE array (MACs / PEs) plus the vector work,
    and every operand moved once (the real input patch, each weight, each output)."""
    wb = hw.array.word_bytes
    if wl.is_mac:
        geo = Geometry.of(wl)
        compulsory = geo.g * (ifmap_tile_words(geo, geo.m, geo.k) + geo.k * geo.n + geo.m * geo.n)
        compute = cdiv(wl.macs, hw.pes) + vector_work
    else:
        e = wl.operand_elems()
        compulsory = e["ifmap"] + e["output"]
        compute = vector_work
    return float(compute), int(compulsory) * wb


def traffic_cycles(wl: Workload, hw: HardwareConfig, on_chip_bytes: float | None = None) -> float:
    """The roofline's traffic term on the one-buffer machine: the compulsory bytes through its one
    DRAM port (reads and writes share it), rounded up. Inside an external function that keeps
    ``on_chip_bytes`` of the kernel's DRAM traffic on chip (``sim.graph.subgraph``) the bytes less
    those, floored as the costing floors: the kernel is costed as max(compute, total - on_chip /
    bandwidth) and its total is never below its DRAM bytes over the bandwidth, which are never
    below the compulsory bytes, so the bound stays a lower bound."""
    _, nbytes = roofline_parts(wl, hw)
    if on_chip_bytes is None:
        return float(np.ceil(nbytes / hw.dram.bytes_per_cycle))
    return float(np.floor(max(0.0, nbytes - on_chip_bytes) / hw.dram.bytes_per_cycle))


def roofline_cycles(wl: Workload, hw: HardwareConfig, vector_work: float = 0.0):
    """The fastest any schedule can run: PEs all busy, or DRAM moving only compulsory bytes."""
    return max(roofline_parts(wl, hw, vector_work)[0], traffic_cycles(wl, hw))


def fused_roofline_cycles(wl: Workload, hw: HardwareConfig, vector_work: float, on_chip_bytes: float) -> float:
    """The bound of a kernel inside an external function that keeps ``on_chip_bytes`` of its DRAM
    traffic on chip (``sim.graph.subgraph``): the compute bound, or the compulsory bytes less those
    kept on chip over the bandwidth (``traffic_cycles``)."""
    return max(roofline_parts(wl, hw, vector_work)[0], traffic_cycles(wl, hw, on_chip_bytes))


def leakage_pj(hw: HardwareConfig, cycles):
    return hw.energy.leakage_mw_per_mm2 * hw.area_mm2() * 1e-3 * (cycles / hw.clock_hz) * 1e12


# ---------------------------------------------------------------------------- evaluation
def evaluate_mac(wl: Workload, hw: HardwareConfig, s: ScheduleArrays) -> dict[str, np.ndarray]:
    """One vectorised pass over the whole batch. When every schedule has the same dataflow,
    orientation and loop order these are Python ints, so which dim sits on rows, columns and time
    needs no per-element selection; otherwise they are arrays and each term selects per element
    (``np.where``), and every result is float64. (Evaluating each (dataflow, orientation, order)
    group apart, as this function once did, costs up to 36 fixed per-call overheads: ~25-40 ms
    whatever the batch size, while per-element selection is no slower on large batches.)"""
    code = (s.dataflow * 2 + s.transposed) * len(LOOP_ORDERS) + s.order
    if len(code) and (code == code[0]).all():
        return _evaluate_mac(wl, hw, s, int(s.dataflow[0]), bool(s.transposed[0]), int(s.order[0]))
    r = _evaluate_mac(wl, hw, s, s.dataflow, s.transposed, s.order)
    n = len(s)
    out: dict[str, Any] = {k: _f64(v, n) for k, v in r.items() if k != "energy"}
    out["energy"] = {k: _f64(v, n) for k, v in r["energy"].items()}
    return out


def _f64(v, n: int) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v if v.shape == (n,) else np.array(np.broadcast_to(v, (n,)))


def _evaluate_mac(wl: Workload, hw: HardwareConfig, s: ScheduleArrays, df: int, tr: bool,
                  order: int) -> dict[str, np.ndarray]:
    geo = Geometry.of(wl)
    wb = hw.array.word_bytes
    tl = tiling(geo, hw, df, tr, s.tile_m, s.tile_n, s.tile_k)
    comp = compute_cycles_of(tl, hw, df, order)
    out_elems = geo.g * geo.m * geo.n
    vec = vector_cycles(hw, out_elems, wl.epilogue)
    # An unfused epilogue op is a separate vector pass: it reads and writes the output again.
    unfused_words = 2 * out_elems * s.unfused
    binary = sum(op in BINARY_EPILOGUE for op in wl.epilogue)
    dw = dram_words_of(geo, order, tl.tiles, tl.nt, binary)
    words = dw["ifmap"] + dw["weight"] + dw["output"] + dw["psum_read"] + dw["epilogue"] + unfused_words
    nt, reps = tl.nt, tl.reps
    n_tiles = reps * nt[0] * nt[1] * nt[2]
    groups_per_tile = geo.g / reps
    first = first_load_words_of(geo, tl.tiles) * wb * groups_per_tile
    last = last_store_words_of(geo, tl.tiles, nt) * wb * groups_per_tile
    compute = comp + vec
    pro, stall, epi = timing(compute, words * wb, first, last, n_tiles, s.double_buffer, hw)
    total = pro + compute + stall + epi
    sw = sram_words_of(geo, tl)
    e = hw.energy
    macs = wl.macs
    sram_bytes = (sw["ifmap"] + sw["weight"] + sw["output"]) * wb + words * wb  # array side + DMA side
    energy = {
        "mac": np.full(len(s), macs * e.mac_pj, dtype=float),
        "register": np.full(len(s), macs * 3 * wb * e.reg_pj_per_byte, dtype=float),
        "sram": sram_bytes * e.sram_pj_per_byte,
        "dram": words * wb * e.dram_pj_per_byte,
        "vector": np.full(len(s), out_elems * len(wl.epilogue) * e.vector_op_pj, dtype=float),
        "leakage": leakage_pj(hw, total),
    }
    return {"total_cycles": total, "compute_cycles": compute, "stall_cycles": stall,
            "prologue_cycles": pro, "epilogue_cycles": epi, "array_cycles": comp, "vector_cycles": np.full(len(s), vec),
            "dram_read_bytes": (dw["ifmap"] + dw["weight"] + dw["psum_read"] + dw["epilogue"] + unfused_words // 2) * wb,
            "dram_write_bytes": (dw["output"] + unfused_words // 2) * wb,
            "dram_ifmap_bytes": dw["ifmap"] * wb, "dram_weight_bytes": dw["weight"] * wb,
            "dram_output_bytes": (dw["output"] + dw["psum_read"]) * wb,
            "sram_ifmap_bytes": sw["ifmap"] * wb, "sram_weight_bytes": sw["weight"] * wb,
            "sram_output_bytes": sw["output"] * wb, "n_tiles": n_tiles,
            "energy": energy, "energy_pj": sum(energy.values())}


def vector_work_cycles(wl: Workload, hw: HardwareConfig) -> int:
    d = wl.d
    v = hw.vector
    work = d["ops"] + d["special_ops"] * (v.special_op_cycles - 1.0)
    return int(np.ceil(work / v.lanes))


def evaluate_vector(wl: Workload, hw: HardwareConfig, s: ScheduleArrays) -> dict[str, np.ndarray]:
    """Vector-unit kernels: elements stream DRAM -> buffer -> vector unit -> buffer -> DRAM in
    tiles of ``tile_m`` elements."""
    d = wl.d
    wb = hw.array.word_bytes
    n = len(s)
    big = max(1, d["in_elems"], d["out_elems"])
    tm = np.minimum(s.tile_m, big)
    n_tiles = cdiv(big, tm)
    comp = np.full(n, vector_work_cycles(wl, hw), dtype=np.int64)
    rd, wr = d["in_elems"] * wb, d["out_elems"] * wb
    first = cdiv(tm * d["in_elems"], big) * wb
    last_elems = big - (n_tiles - 1) * tm
    last = cdiv(last_elems * d["out_elems"], big) * wb
    if rd + wr == 0 and comp[0] == 0:  # a view (reshape, squeeze): no work at all
        z = np.zeros(n)
        pro = stall = epi = z
    else:
        pro, stall, epi = timing(comp, rd + wr, first, last, n_tiles, s.double_buffer, hw)
    total = pro + comp + stall + epi
    e = hw.energy
    energy = {"mac": np.zeros(n), "register": np.zeros(n), "sram": np.full(n, 2.0 * (rd + wr) * e.sram_pj_per_byte),
              "dram": np.full(n, (rd + wr) * e.dram_pj_per_byte),
              "vector": np.full(n, (d["ops"] + d["special_ops"]) * e.vector_op_pj), "leakage": leakage_pj(hw, total)}
    return {"total_cycles": total, "compute_cycles": comp, "stall_cycles": stall,
            "prologue_cycles": pro, "epilogue_cycles": epi, "array_cycles": np.zeros(n, dtype=np.int64),
            "vector_cycles": comp, "dram_read_bytes": np.full(n, rd), "dram_write_bytes": np.full(n, wr),
            "dram_ifmap_bytes": np.full(n, rd), "dram_weight_bytes": np.zeros(n, dtype=np.int64),
            "dram_output_bytes": np.full(n, wr), "sram_ifmap_bytes": np.full(n, rd),
            "sram_weight_bytes": np.zeros(n, dtype=np.int64), "sram_output_bytes": np.full(n, wr),
            "n_tiles": n_tiles, "energy": energy, "energy_pj": sum(energy.values())}


def buffer_fits(wl: Workload, hw: HardwareConfig, s: ScheduleArrays) -> np.ndarray:
    """Vectorised ``Schedule.check``: True where the tiles fit the buffers and the dataflow is supported."""
    wb = hw.array.word_bytes
    mult = np.where(s.double_buffer, 2, 1) * wb
    b = hw.buffers
    if wl.is_mac:
        geo = Geometry.of(wl)
        tm, tn, tk = s.tile_m, s.tile_n, s.tile_k
        ok = (tm >= 1) & (tn >= 1) & (tk >= 1) & (tm <= geo.m) & (tn <= geo.n) & (tk <= geo.k)
        tm, tn, tk = _clip(tm, 1, geo.m), _clip(tn, 1, geo.n), _clip(tk, 1, geo.k)
        need = (ifmap_tile_words(geo, tm, tk) * mult, tk * tn * mult, tm * tn * mult)
        for i, name in enumerate(DATAFLOWS):
            if name not in hw.array.dataflows:
                ok &= s.dataflow != i
        ok &= (s.dataflow >= 0) & (s.dataflow < len(DATAFLOWS))
    else:
        d = wl.d
        big = max(1, d["in_elems"], d["out_elems"])
        tm = _clip(s.tile_m, 1, big)
        ok = (s.tile_m >= 1) & (s.tile_m <= big)
        need = (cdiv(tm * d["in_elems"], big) * mult, np.zeros_like(tm), cdiv(tm * d["out_elems"], big) * mult)
    if b.unified:
        return ok & (need[0] + need[1] + need[2] <= b.unified_bytes)
    return ok & (need[0] <= b.ifmap_bytes) & (need[1] <= b.weight_bytes) & (need[2] <= b.output_bytes)


def evaluate(wl: Workload, hw: HardwareConfig, s: ScheduleArrays) -> dict[str, np.ndarray]:
    """All cost terms for every schedule in ``s`` (no legality check; see ``buffer_fits``)."""
    return evaluate_mac(wl, hw, s) if wl.is_mac else evaluate_vector(wl, hw, s)
