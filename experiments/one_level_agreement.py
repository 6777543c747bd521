"""How far the one-level systolic model and the multi-level data-movement model agree on a
one-level config (issue 21, item 3: "cost a one-level config as the hierarchy it converts to
wherever the two models agree").

    python experiments/one_level_agreement.py [--models resnet18,...] [--hw edge-npu,...] [--json]

For every built-in model's kernels (tasks of the model partitioned for the preset) on every preset
without storage levels, it costs each kernel two ways and counts, per quantity, the kernels on
which the two agree exactly (and the worst ratio where they do not):

- the one-level model (``sim.cost.analytical``) under the kernel's default schedule, or when its
  tiles are not whole boxes of the nest's dims (a K tile of 128 of C*R*S = 64*3*3) or fold the
  array raggedly, under the best of the default search's candidates that are (``exact_schedule``);
- the data-movement model (``sim.cost.movement.evaluate``) on the hierarchy the config converts to
  (``sim.hw.config_hierarchy.hierarchy_of``: DRAM -> Buffer -> PE array) under the SAME schedule
  written as a mapping (``mapping_of_schedule`` below: the schedule's DRAM tile loops in its loop
  order, the folds and the temporal dim at the buffer, the row dim on the mesh's Y and the column
  dim on X). A schedule whose tiles do not factor a dim exactly has no such mapping; those kernels
  are counted apart ("no mapping").

Quantities (each named as the report calls it):
  macs             MACs (workload vs nest);
  compute_bound    the roofline's compute term: ceil(MACs / PEs) + epilogue vector cycles;
  compulsory       the roofline's traffic: every operand word once (one-level: the real input
                   patch; nest: the projection's bounding box);
  roofline         the roofline cycles as each model states it (one DRAM port shared by reads
                   and writes vs Timeloop's separate read and write bandwidths);
  array_steady     the array's busy cycles without fill and drain (folds x temporal length) vs the
                   mapping's temporal iterations;
  array            the array cycles with SCALE-Sim's fill/drain (and fold overlap) vs the same
                   temporal iterations;
  dram_<operand>   DRAM words per operand (ifmap/Inputs reads, weight/Weights reads,
                   output/Outputs updates + read-backs);
  sram_<operand>   the words the array exchanges with the buffer;
  total            the kernel's cycles (one-level: DMA prologue + compute + stalls + epilogue with
                   a shared DRAM port; data movement: bandwidth-throttled iterations);
  e_mac, e_dram, e_sram, e_leak   energy terms (pJ).
Vector kernels (pooling, softmax, elementwise) have no loop nest: the hierarchy cannot cost them.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _split(tile: int, bounds: list[tuple[str, int]]) -> dict[str, int] | None:
    """Factor a tile of a flattened dim (nest dims outermost first) into per-dim factors that each
    divide their bound, or None when the tile is not such a box."""
    out = {}
    t = tile
    for d, b in reversed(bounds):
        if t >= b:
            if t % b:
                return None
            out[d], t = b, t // b
        else:
            if b % t:
                return None
            out[d], t = t, 1
    return out if t == 1 else None


def _fit(tile: dict[str, int], order: list[str], extent: int) -> dict[str, int] | None:
    """Spatial factors of a tile box that fill at most ``extent`` PEs and leave a whole number of
    folds: the whole tile when it fits, else exactly ``extent`` PEs (innermost dims first, each
    dividing), so that the folds are the one-level model's ceil(tile / extent); None otherwise."""
    if math.prod(tile.values()) <= extent:
        return dict(tile)
    out, room = {}, extent
    for d in reversed(order):
        f = tile[d]
        if f <= room:
            if room % f:
                return None
            out[d], room = f, room // f
        else:
            if f % room:
                return None
            out[d], room = room, 1
        if room == 1:
            return out
    return None


def gemm_dims(wl) -> dict[str, list[tuple[str, int]]]:
    """The nest dims (outermost first, with bounds) behind each GEMM-view dim (g, m, n, k)."""
    from sim.workload.nest import nest_from_workload
    b = nest_from_workload(wl).bounds
    if wl.kind == "conv2d":
        g = [("G", b["G"])] if "G" in b else []
        return {"g": g, "m": [("N", b["N"]), ("P", b["P"]), ("Q", b["Q"])], "n": [("M", b["M"])],
                "k": [("C", b["C"]), ("R", b["R"]), ("S", b["S"])]}
    g = [("B", b["B"])] if "B" in b else []
    return {"g": g, "m": [("M", b["M"])], "n": [("N", b["N"])], "k": [("K", b["K"])]}


def mapping_of_schedule(wl, hw, s):
    """The one-level schedule ``s`` as a mapping on ``hierarchy_of(hw)``, or None (see docstring)."""
    from sim.cost.analytical import spatial_dims
    from sim.hw.config import DATAFLOWS
    from sim.mapping.mapping import LevelMapping, Mapping
    dims = gemm_dims(wl)
    tiles = {}
    for gd, t in (("m", s.tile_m), ("n", s.tile_n), ("k", s.tile_k)):
        sp = _split(min(t, math.prod(b for _, b in dims[gd])), dims[gd])
        if sp is None:
            return None
        tiles[gd] = sp
    row, col, tmp = ("mnk"[i] for i in spatial_dims(DATAFLOWS.index(s.dataflow), s.transposed))
    sy = _fit(tiles[row], [d for d, _ in dims[row]], hw.array.rows)
    sx = _fit(tiles[col], [d for d, _ in dims[col]], hw.array.cols)
    if sy is None or sx is None:
        return None
    buf_t, dram_t = {}, {}
    for gd in "mnk":
        for d, b in dims[gd]:
            sp = (sy if gd == row else sx if gd == col else {}).get(d, 1)
            buf_t[d] = tiles[gd][d] // sp
            dram_t[d] = b // tiles[gd][d]
    for d, b in dims["g"]:
        dram_t[d] = b
    perm = [d for gd in s.loop_order for d, _ in dims[gd]]
    g_names = [d for d, _ in dims["g"]]
    top = LevelMapping(temporal={d: f for d, f in dram_t.items() if f > 1}, permutation=tuple(g_names + perm))
    buf = LevelMapping(temporal={d: f for d, f in buf_t.items() if f > 1},
                       permutation=tuple(d for gd in (row, col, tmp) for d, _ in dims[gd]),
                       spatial_x={d: f for d, f in sx.items() if f > 1},
                       spatial_y={d: f for d, f in sy.items() if f > 1})
    return Mapping((top, buf))


def exact_schedule(wl, hw):
    """The kernel's default schedule when it has an exact mapping, else the best (by the one-level
    model) of the default search's candidates that has one; None when none does."""
    import numpy as np
    from sim import default_schedule
    from sim.cost.analytical import ScheduleArrays, buffer_fits, evaluate
    from sim.mapping.defaults import _candidate_arrays, fused_epilogue
    s = default_schedule(wl, hw)
    if mapping_of_schedule(wl, hw, s) is not None:
        return s
    for db in (True, False):
        cand = _candidate_arrays(wl, hw, db)
        idx = np.flatnonzero(buffer_fits(wl, hw, cand))
        sub = ScheduleArrays(*(getattr(cand, f)[idx] for f in cand.__dataclass_fields__))
        r = evaluate(wl, hw, sub)
        for i in np.lexsort((r["energy_pj"], r["total_cycles"])):
            c = sub.schedule(int(i), wl).replace(epilogue=fused_epilogue(wl, hw))
            if mapping_of_schedule(wl, hw, c) is not None:
                return c
    return None


def compare_kernel(wl, hw) -> dict | None:
    """Each quantity of the module docstring as (one-level value, data-movement value)."""
    from sim import default_schedule, simulate
    from sim.cost.analytical import Geometry, roofline_parts, tiling, vector_cycles
    from sim.cost.kernel import roofline_for
    from sim.cost.movement import evaluate
    from sim.cost.multilevel import traffic_cycles
    from sim.hw.config import DATAFLOWS
    from sim.hw.config_hierarchy import hierarchy_of
    from sim.mapping.mapping import MappingError
    from sim.workload.nest import nest_from_workload
    hier, nest = hierarchy_of(hw), nest_from_workload(wl)
    s = exact_schedule(wl, hw) or default_schedule(wl, hw)
    a = simulate(wl, hw, s)
    geo = Geometry.of(wl)
    wb = hw.array.word_bytes
    g, m, n, _ = wl.gemm_view()
    epi = vector_cycles(hw, g * m * n, wl.epilogue)
    comp_a, bytes_a = roofline_parts(wl, hw, epi)
    words_h = sum(nest.size(ds.name) for ds in nest.data_spaces)
    out = {"macs": (wl.macs, nest.macs),
           "compute_bound": (comp_a, math.ceil(nest.macs / hier.arithmetic.instances) + epi),
           "compulsory": (bytes_a // wb, words_h)}
    out["roofline"] = (roofline_for(wl, hw), max(out["compute_bound"][1], traffic_cycles(wl, hw)))
    mp = mapping_of_schedule(wl, hw, s)
    if mp is None:
        return out
    try:
        mp.check(hier, nest)
    except MappingError as e:
        if "capacity" not in str(e):
            raise
    ev = evaluate(hier, nest, mp, check=False)
    tl = tiling(geo, hw, DATAFLOWS.index(s.dataflow), s.transposed, s.tile_m, s.tile_n, s.tile_k)
    out["array_steady"] = (float(tl.reps * tl.f_row * tl.f_col * tl.d_tmp), ev.compute_cycles)
    out["array"] = (a.array_cycles, ev.compute_cycles)
    dram, buf = ev.levels[0], ev.levels[1]
    for op, ds in (("ifmap", "Inputs"), ("weight", "Weights"), ("output", "Outputs")):
        c = dram.tensor(ds)
        out["dram_" + op] = (a.bytes_by_operand["dram"][op] // wb, c.reads + c.updates)
        cb = buf.tensor(ds)
        out["sram_" + op] = (a.bytes_by_operand["sram"][op] // wb, cb.reads + (cb.updates if ds == "Outputs" else 0))
    out["total"] = (a.total_cycles, ev.cycles + epi)
    out["e_mac"] = (a.energy_pj["mac"], ev.mac_energy_pj)
    out["e_dram"] = (a.energy_pj["dram"], dram.access_energy_pj)
    out["e_sram"] = (a.energy_pj["sram"], buf.access_energy_pj)
    out["e_leak"] = (a.energy_pj["leakage"], sum(lv.leak_energy_pj for lv in ev.levels))
    return out


def run(models: list[str], presets: list[str]) -> dict:
    import partition.models
    import sim
    from partition import partition_for
    from tuner.tasks import extract_tasks
    table: dict = {}
    for hw_name in presets:
        hw = sim.load_hw(hw_name)
        agree = defaultdict(int)
        seen = defaultdict(int)
        worst: dict[str, float] = {}
        kernels = vector = unmapped = 0
        for model in models:
            graph = partition_for(partition.models.get(model), hw.partition_target())
            for task in extract_tasks(graph, include_vector=True):
                wl = task.workload
                if not wl.is_mac:
                    vector += 1
                    continue
                kernels += 1
                r = compare_kernel(wl, hw)
                unmapped += "array" not in r
                for q, (x, y) in r.items():
                    seen[q] += 1
                    if math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-6):
                        agree[q] += 1
                    else:
                        ratio = (float(x) / float(y)) if y else math.inf
                        if q not in worst or abs(math.log(max(ratio, 1e-12))) > abs(math.log(max(worst[q], 1e-12))):
                            worst[q] = ratio
        table[hw_name] = {"mac_kernels": kernels, "vector_kernels": vector, "no_mapping": unmapped,
                          "quantities": {q: {"agree": agree[q], "of": seen[q], "worst_ratio": worst.get(q)}
                                         for q in seen}}
    return table


def main(argv=None) -> int:
    import partition.models
    import sim
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(m.name for m in partition.models.list_models()))
    ap.add_argument("--hw", default=",".join(n for n in sim.presets.names() if not sim.load_hw(n).levels))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    table = run(a.models.split(","), a.hw.split(","))
    if a.json:
        print(json.dumps({"config": {"models": a.models.split(","), "hw": a.hw.split(",")}, "results": table},
                         indent=2))
        return 0
    print(f"one-level model vs data-movement model on the converted hierarchy, same schedule "
          f"({time.perf_counter() - t0:.0f} s)")
    for hw_name, t in table.items():
        print(f"\n{hw_name}: {t['mac_kernels']} MAC kernels ({t['no_mapping']} without an exact mapping), "
              f"{t['vector_kernels']} vector kernels (one-level only)")
        for q, v in t["quantities"].items():
            w = "" if v["worst_ratio"] is None else f"   worst one-level/hierarchy = {v['worst_ratio']:.4g}"
            print(f"  {q:14s} agree {v['agree']:4d}/{v['of']:<4d}{w}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
