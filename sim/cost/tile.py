"""Tile-level kernel simulation: walks the tile loop nest with a DMA engine and a compute engine.

Per tile the walk knows exactly which operand tiles change (and are loaded), when an output tile
is finished (stored, after its fused epilogue on the vector unit), and when a partial sum must be
read back. The two engines form a max-plus pipeline:

    D[i] = max(D[i-1], C[i-S]) + dma[i]          DMA job i: loads of tile i + stores finished S tiles ago
    C[i] = max(C[i-1], D[i] + latency) + comp[i] compute of tile i once its data has landed

with S = 2 buffer halves when double-buffered (DMA of tile i+1 overlaps compute of tile i), else 1.
One DRAM port carries reads and writes. Written with prefix sums P (DMA) and Q (compute), each
unknown is a running maximum given the other:

    D[i] = P[i] + max(0, max_{j<=i} C[j-S] - P[j-1])
    C[i] = Q[i] + max_{j<=i} D[j] + latency - Q[j-1]

and since C[i] needs only C[j <= i-S], one pass in tile order solves both exactly, in time linear
in the number of tiles. Alternating whole-array running maxima until they stop changing (as this
module first did) converges in one or two rounds when one engine dominates throughout, but needs
about n/S rounds when the pipeline keeps switching between DMA- and compute-bound, which made it
quadratic; so a few rounds are tried and the pass finishes what they leave. Identical group repeats (grouped convolution, batched GEMM)
are simulated three times and extrapolated by the steady period.
"""
from __future__ import annotations

import numpy as np

from .analytical import group_repeats, spatial_dims, vector_cycles, vector_work_cycles, BINARY_EPILOGUE
from ..mapping.footprint import Geometry, cdiv, ifmap_channels, ifmap_pixels
from ..hw.config import DATAFLOWS, HardwareConfig
from ..mapping.schedule import Schedule
from ..workload.workload import Workload

_REPEATS_SIMULATED = 3
_TILES_PER_SOLVE = 2048  # simulate at least this many tiles of identical repeats before extrapolating
_SCAN_BELOW = 24  # tiles: below this one pass over the tiles beats even one whole-array round
_VECTOR_ROUNDS = 4  # whole-array rounds tried before the pass (together they cost about half a pass)


def solve_pipeline(dma: np.ndarray, comp: np.ndarray, latency: float, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Finish times (D, C) of the DMA and compute engines for each tile (see module docstring).

    A few rounds of whole-array running maxima first (starting from no back-pressure, each round
    fixes at least the next S tiles and often all of them: then it is several times faster than
    a tile-by-tile pass); if they have not reached the fixed point, one pass over the tiles
    finishes from the first tile still changing. Both give the same floats."""
    n = len(comp)
    P = np.cumsum(dma)
    Pprev = P - dma
    Q = np.cumsum(comp)
    Qprev = Q - comp
    if n <= _SCAN_BELOW:
        D, C = _scan(P.tolist(), Pprev.tolist(), Q.tolist(), Qprev.tolist(), float(latency), slots)
        return np.array(D, dtype=np.float64), np.array(C, dtype=np.float64)
    D = P
    C = Q + np.maximum.accumulate(D + latency - Qprev)
    for _ in range(_VECTOR_ROUNDS):
        Cs = np.zeros(n)
        if n > slots:
            Cs[slots:] = C[:-slots]
        run_d = np.maximum.accumulate(Cs - Pprev)
        D = P + np.maximum(0.0, run_d)
        run_c = np.maximum.accumulate(D + latency - Qprev)
        Cn = Q + run_c
        changed = np.flatnonzero(Cn != C)
        if not len(changed):
            return D, C
        # C (and so D) is final before the first tile that changed: C[i] needs only C[:i-S+1].
        start = int(changed[0])
        C = Cn
    D, C = _scan(P.tolist(), Pprev.tolist(), Q.tolist(), Qprev.tolist(), float(latency), slots,
                 start, D.tolist(), C.tolist(), float(run_d[start - 1]), float(run_c[start - 1]))
    return np.array(D, dtype=np.float64), np.array(C, dtype=np.float64)


def _scan(P: list, Pprev: list, Q: list, Qprev: list, latency: float, slots: int, start: int = 0,
          D: list | None = None, C: list | None = None, max_d: float = -np.inf,
          max_c: float = -np.inf) -> tuple[list, list]:
    """The running-maximum form of the recurrence, one tile at a time from tile ``start`` (given
    D, C before it and both running maxima up to it). Python floats are the same IEEE doubles as
    numpy's and each step is the same operation in the same order, so the result is bit for bit
    what the whole-array rounds converge to; a plain loop over lists is several times faster per
    tile than numpy on one element."""
    n = len(P)
    D = D if D is not None else [0.0] * n
    C = C if C is not None else [0.0] * n
    for i in range(start, n):
        x = (C[i - slots] if i >= slots else 0.0) - Pprev[i]
        if x > max_d:
            max_d = x
        d = P[i] + (max_d if max_d > 0.0 else 0.0)
        D[i] = d
        y = d + latency - Qprev[i]
        if y > max_c:
            max_c = y
        C[i] = Q[i] + max_c
    return D, C


def _finish(D, C, stores, bw, lat, slots):
    """End time once the last ``slots`` tiles' output stores (queued after them) have landed."""
    n = len(C)
    t = D[-1]
    stored = False
    for j in range(max(0, n - slots), n):
        if stores[j] > 0:
            t = max(t, C[j]) + stores[j] / bw
            stored = True
    return max(C[-1], t + lat if stored else 0.0)


def tile_sequence(geo: Geometry, s: Schedule):
    """Per-tile arrays in loop order: tile sizes (sm, sn, sk) and indices (im, in, ik)."""
    tm, tn, tk = min(s.tile_m, geo.m), min(s.tile_n, geo.n), min(s.tile_k, geo.k)
    nt = {"m": cdiv(geo.m, tm), "n": cdiv(geo.n, tn), "k": cdiv(geo.k, tk)}
    order = s.loop_order
    idx = np.indices([nt[d] for d in order]).reshape(3, -1)
    by = {d: idx[i] for i, d in enumerate(order)}
    im, in_, ik = by["m"], by["n"], by["k"]

    def size(i, nt_, t, dim):
        return np.where(i == nt_ - 1, dim - (nt_ - 1) * t, t)
    return (size(im, nt["m"], tm, geo.m), size(in_, nt["n"], tn, geo.n), size(ik, nt["k"], tk, geo.k),
            im, in_, ik, nt)


def simulate_mac(wl: Workload, hw: HardwareConfig, s: Schedule) -> dict:
    geo = Geometry.of(wl)
    wb = hw.array.word_bytes
    bw, lat = hw.dram.bytes_per_cycle, float(hw.dram.latency_cycles)
    ra, ca = hw.array.rows, hw.array.cols
    sm, sn, sk, im, in_, ik, nt = tile_sequence(geo, s)
    n = len(sm)
    df = DATAFLOWS.index(s.dataflow)
    row, col, tmp = (int(x) for x in spatial_dims(np.int64(df), np.bool_(s.transposed)))
    sizes = (sm, sn, sk)
    s_row, s_col, s_tmp = sizes[row], sizes[col], sizes[tmp]
    f = cdiv(s_row, ra) * cdiv(s_col, ca)
    ovh = (ra + ca - 2) if s.dataflow == "os" else (2 * ra + ca - 2)
    # Tiles of one fold whose stationary tile equals the previous one stream on (no new fill).
    idx = (im, in_, ik)
    same_stationary = np.zeros(n, dtype=bool)
    if n > 1:
        dims = (geo.m, geo.n, geo.k)
        one_fold = min(s.tiles[row], dims[row]) <= ra and min(s.tiles[col], dims[col]) <= ca
        same_stationary[1:] = (idx[row][1:] == idx[row][:-1]) & (idx[col][1:] == idx[col][:-1]) & one_fold
    fills = np.where(same_stationary, 0, 1 if hw.array.fold_overlap else f)
    comp = f * s_tmp + fills * ovh
    repeats = int(group_repeats(geo, hw, np.int64(df), np.bool_(s.transposed), s.tile_m, s.tile_n, s.tile_k))
    gpr = geo.g / repeats  # groups per repeat (the data each tile moves)
    slow = max(1.0, (ra + ca) * wb / hw.buffers.sram_bytes_per_cycle)
    comp = np.ceil(comp * slow).astype(np.float64)

    first = np.zeros(n, dtype=bool)
    first[0] = True
    a_new = first.copy()
    b_new = first.copy()
    c_new = first.copy()
    if n > 1:
        a_new[1:] = (im[1:] != im[:-1]) | (ik[1:] != ik[:-1])
        b_new[1:] = (ik[1:] != ik[:-1]) | (in_[1:] != in_[:-1])
        c_new[1:] = (im[1:] != im[:-1]) | (in_[1:] != in_[:-1])
    c_end = np.ones(n, dtype=bool)
    c_end[:-1] = c_new[1:]
    final = c_end & (ik == nt["k"] - 1)
    a_words = np.where(a_new, ifmap_channels(geo, sk) * ifmap_pixels(geo, sm), 0)
    b_words = np.where(b_new, sk * sn, 0)
    out_words = sm * sn
    psum_words = np.where(c_new & (ik > 0), out_words, 0)
    binary = sum(op in BINARY_EPILOGUE for op in wl.epilogue)
    epi_words = np.where(final, out_words * binary, 0)
    store_words = np.where(c_end, out_words, 0)
    epi_ops = wl.epilogue
    if epi_ops:
        per_elem = vector_cycles(hw, 1_000_000, epi_ops) / 1_000_000
        comp = comp + np.where(final, np.ceil(out_words * gpr * per_elem), 0)

    load_b = (a_words + b_words + psum_words + epi_words) * wb * gpr
    store_b = store_words * wb * gpr
    slots = 2 if s.double_buffer else 1
    # Identical group repeats: simulate enough of them to reach the steady period, extrapolate the rest.
    reps = min(repeats, max(_REPEATS_SIMULATED, _TILES_PER_SOLVE // max(n, 1)))
    load_r = np.tile(load_b, reps)
    store_r = np.tile(store_b, reps)
    comp_r = np.tile(comp, reps)
    dma = load_r / bw
    if len(dma) > slots:
        dma[slots:] += store_r[:-slots] / bw
    D, C = solve_pipeline(dma, comp_r, lat, slots)
    end = _finish(D, C, store_r, bw, lat, slots)
    if repeats > reps:
        period = C[-1] - C[-1 - n]
        end += (repeats - reps) * period
        C = C + (repeats - reps) * period
    compute = float(comp.sum()) * repeats
    prologue = float(D[0] + lat)
    tail = float(end - C[-1]) if end > C[-1] else 0.0
    total = float(np.ceil(end))
    unfused = len(set(wl.epilogue) - set(s.epilogue))
    out_total = geo.g * geo.m * geo.n
    if unfused:
        # Unfused epilogue ops: one extra vector pass each, output read and written again.
        extra_b = 2 * out_total * wb * unfused
        total += max(np.ceil(extra_b / bw), 0)
    stall = max(0.0, total - prologue - compute - tail)
    reads = float((load_b.sum()) * repeats) + (out_total * wb * unfused if unfused else 0)
    writes = float(store_b.sum() * repeats) + (out_total * wb * unfused if unfused else 0)
    return {"total_cycles": total, "compute_cycles": compute, "stall_cycles": stall,
            "prologue_cycles": prologue, "epilogue_cycles": tail,
            "dram_read_bytes": reads, "dram_write_bytes": writes,
            "dram_ifmap_bytes": float(a_words.sum() * wb * gpr * repeats),
            "dram_weight_bytes": float(b_words.sum() * wb * gpr * repeats),
            "dram_output_bytes": float((store_words.sum() + psum_words.sum()) * wb * gpr * repeats),
            "n_tiles": n * repeats}


def simulate_vector(wl: Workload, hw: HardwareConfig, s: Schedule) -> dict:
    d = wl.d
    wb = hw.array.word_bytes
    bw, lat = hw.dram.bytes_per_cycle, float(hw.dram.latency_cycles)
    big = max(1, d["in_elems"], d["out_elems"])
    tm = min(s.tile_m, big)
    n = cdiv(big, tm)
    work = vector_work_cycles(wl, hw)
    rd, wr = d["in_elems"] * wb, d["out_elems"] * wb
    if rd + wr == 0 and work == 0:
        return {"total_cycles": 0.0, "compute_cycles": 0.0, "stall_cycles": 0.0, "prologue_cycles": 0.0,
                "epilogue_cycles": 0.0, "dram_read_bytes": 0.0, "dram_write_bytes": 0.0,
                "dram_ifmap_bytes": 0.0, "dram_weight_bytes": 0.0, "dram_output_bytes": 0.0, "n_tiles": 1}
    elems = np.full(n, tm, dtype=np.float64)
    elems[-1] = big - (n - 1) * tm
    frac = elems / big
    comp = np.ceil(frac * work)
    load_b = np.ceil(frac * rd)
    store_b = np.ceil(frac * wr)
    slots = 2 if s.double_buffer else 1
    dma = load_b / bw
    if n > slots:
        dma[slots:] += store_b[:-slots] / bw
    D, C = solve_pipeline(dma, comp, lat, slots)
    end = _finish(D, C, store_b, bw, lat, slots)
    compute = float(comp.sum())
    prologue = float(D[0] + lat)
    tail = float(end - C[-1]) if end > C[-1] else 0.0
    total = float(np.ceil(end))
    return {"total_cycles": total, "compute_cycles": compute,
            "stall_cycles": max(0.0, total - prologue - compute - tail), "prologue_cycles": prologue,
            "epilogue_cycles": tail, "dram_read_bytes": float(load_b.sum()), "dram_write_bytes": float(store_b.sum()),
            "dram_ifmap_bytes": float(load_b.sum()), "dram_weight_bytes": 0.0,
            "dram_output_bytes": float(store_b.sum()), "n_tiles": n}


def simulate_tiles(wl: Workload, hw: HardwareConfig, s: Schedule) -> dict:
    return simulate_mac(wl, hw, s) if wl.is_mac else simulate_vector(wl, hw, s)
