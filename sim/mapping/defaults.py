"""Schedules that need no search: a sound default, and SCALE-Sim's own mapping."""
from __future__ import annotations

import functools

import numpy as np

from ..cost.analytical import ScheduleArrays, buffer_fits, evaluate
from .footprint import Geometry
from ..hw.config import DATAFLOWS, HardwareConfig
from .schedule import LOOP_ORDERS, STANDARD_SPATIAL, Schedule, ScheduleError
from ..workload.workload import Workload


def fused_epilogue(wl: Workload, hw: HardwareConfig) -> tuple[str, ...]:
    """The epilogue ops the vector unit can apply on the fly."""
    return tuple(op for op in wl.epilogue if op in hw.vector.ops)


def tile_candidates(dim: int, extent: int, limit: int = 8) -> list[int]:
    """Array-aligned tile sizes for one dim: the whole dim, and extent * 2^i below it (plus a few
    powers of two below the extent for dims smaller than the array), at most ``limit`` values."""
    cands = {dim}
    t = extent
    while t < dim:
        cands.add(t)
        t *= 2
    t = extent // 2
    while t >= 1 and len(cands) < limit + 2:
        if t < dim:
            cands.add(t)
        t //= 2
    out = sorted(cands, reverse=True)
    if len(out) > limit:  # keep the spread: the whole dim, the smallest, evenly spaced between
        idx = np.unique(np.linspace(0, len(out) - 1, limit).round().astype(int))
        out = [out[i] for i in idx]
    return out


def _candidate_arrays(wl: Workload, hw: HardwareConfig, double_buffer: bool) -> ScheduleArrays:
    geo = Geometry.of(wl)
    ext = max(hw.array.rows, hw.array.cols)
    tms = tile_candidates(geo.m, ext)
    tns = tile_candidates(geo.n, ext)
    tks = tile_candidates(geo.k, ext)
    dfs = [DATAFLOWS.index(d) for d in hw.array.dataflows]
    grid = np.array(np.meshgrid(dfs, [0, 1], tms, tns, tks, range(len(LOOP_ORDERS)), indexing="ij"))
    cols = grid.reshape(6, -1)
    return ScheduleArrays(cols[0], cols[1].astype(bool), cols[2], cols[3], cols[4], cols[5],
                          np.full(cols.shape[1], double_buffer), np.zeros(cols.shape[1], dtype=np.int64))


# The search, the partition problem and the costing of a plan all ask for the default schedule of
# the same kernels (three times per kernel in one ``tune``), and each answer takes a vectorised
# sweep of ~10^4 candidates. It is a pure function of two frozen values: memoise it.
@functools.lru_cache(maxsize=4096)
def default_schedule(wl: Workload, hw: HardwareConfig) -> Schedule:
    epi = fused_epilogue(wl, hw)
    if not wl.is_mac:
        return _default_vector(wl, hw)
    if hw.levels:  # costed on the hierarchy (sim.cost.multilevel): the one-buffer tiles are moot, the
        # smallest fits any buffer, and the epilogue is all that matters
        df = hw.array.dataflows[0]
        return Schedule(df, STANDARD_SPATIAL[df], 1, 1, 1, LOOP_ORDERS[0], False, epi)
    for db in (True, False):
        cand = _candidate_arrays(wl, hw, db)
        ok = buffer_fits(wl, hw, cand)
        if not ok.any():
            continue
        idx = np.flatnonzero(ok)
        sub = ScheduleArrays(*(getattr(cand, f)[idx] for f in cand.__dataclass_fields__))
        r = evaluate(wl, hw, sub)
        best = np.lexsort((r["energy_pj"], r["total_cycles"]))[0]
        s = sub.schedule(int(best), wl)
        return s.replace(epilogue=epi)
    raise ScheduleError(f"no tile of {wl.key} fits the buffers of {hw.name}")


def _default_vector(wl: Workload, hw: HardwareConfig) -> Schedule:
    d = wl.d
    big = max(1, d["in_elems"], d["out_elems"])
    for db in (True, False):
        t = big
        while t >= 1:
            s = Schedule(tile_m=t, double_buffer=db)
            if s.fits(wl, hw):
                return s
            t = t // 2 if t > 1 else 0
    raise ScheduleError(f"not one element of {wl.key} fits the buffers of {hw.name}")


# SCALE-Sim walks row folds outside column folds, the temporal dim inside a fold.
_SCALESIM_ORDER = {"os": "mnk", "ws": "knm", "is": "kmn"}


def scalesim_schedule(wl: Workload, hw: HardwareConfig, dataflow: str | None = None) -> Schedule:
    """SCALE-Sim's mapping: the whole layer folded on the array in its dataflow (default: the
    array's first), standard orientation, double buffers; when an operand does not fit half its
    buffer the tile is cut to whole array folds (SCALE-Sim streams it through a sliding window
    instead)."""
    dataflow = dataflow or hw.array.dataflows[0]
    if not wl.is_mac:
        return _default_vector(wl, hw)
    if dataflow not in DATAFLOWS:
        raise ScheduleError(f"dataflow must be one of {', '.join(DATAFLOWS)}, got {dataflow!r}")
    g, m, n, k = wl.gemm_view()
    dims = {"m": m, "n": n, "k": k}
    row, col = STANDARD_SPATIAL[dataflow]
    tmp = ({"m", "n", "k"} - {row, col}).pop()
    ext = {row: hw.array.rows, col: hw.array.cols, tmp: 1}
    tiles = dict(dims)
    base = Schedule(dataflow, (row, col), m, n, k, _SCALESIM_ORDER[dataflow], True, fused_epilogue(wl, hw))
    while True:
        s = base.replace(tile_m=tiles["m"], tile_n=tiles["n"], tile_k=tiles["k"])
        if s.fits(wl, hw):
            return s
        # Halve the spatial dim holding more folds (in whole folds), then the temporal dim.
        nf = {d: -(-tiles[d] // ext[d]) for d in (row, col)}
        d = max((row, col), key=lambda x: nf[x])
        if nf[d] > 1:
            tiles[d] = -(-nf[d] // 2) * ext[d] if nf[d] > 2 else ext[d]
            tiles[d] = min(tiles[d], dims[d])
        elif tiles[tmp] > 1:
            tiles[tmp] = -(-tiles[tmp] // 2)
        else:
            s.check(wl, hw)  # raises, naming the buffer that overflows
