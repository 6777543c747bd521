"""The tile-level walk of a multi-level mapping: the loop nest is followed step by step at the
outer levels, so the timing sees what the closed form (``sim.cost.movement``) averages away: the
pipeline fill before the first compute and the drain after the last, bursts when an outer index
changes and several tensors reload at once, and levels too small to double-buffer.

**Steps.** The temporal loops of the whole nest, outermost first (DRAM's, then each inner
level's, as ``sim.cost.movement.step_loops`` orders them), are walked from the outside in while the
number of steps stays under ``max_steps``: those loops are the *walked* loops and each step one
*block*. The loops inside (deeper levels) run as a steady block: their transfers are costed by
the closed form's counting and spread over the block, which computes for ``t_block`` cycles
(the product of the unwalked temporal factors) unless a level's bandwidth makes it longer.

**Counts per step, exactly the closed form's totals.** Every storage level keeping a data space
receives the *arrivals* of its tile: the first whole tile, then what changes when an outer loop
advances. Timeloop evaluates each loop at iterations 0 and 1 and extrapolates iteration 1 to the
rest, with a delta that resets when the tile's stride changes (``sim.cost.movement.delta_sum``). The
walk charges every literal step the delta of the evaluated step that stands for it (each index
clipped to 1), so it knows per step which tiles change at which level and its totals are the
closed form's, word for word: fills = arrivals (outputs: less the first touch of a fresh partial
sum), reads at the parent = the child's arrivals (outputs: its read-backs) times the distinct
child tiles (multicast, spatial reduction), updates at the parent = the child's drained partial
sums, written back when the child's tile next changes (or after the last step), and the
innermost keeper's operand reads and partial-sum updates inside each block.

**Timing: a max-plus pipeline** as in ``sim.cost.tile``, with one transfer engine per storage level
(one instance stands for all, as every instance moves the same words) and the MACs:

    start[x] = max(C[x-1], max over engines j with a job at x of D_j[x])
    D_j[x]   = max(E_j, W_j[x], D_f[x] for the feeders f of j with a job at x) + step_j[x]
    C[x]     = start[x] + block[x]
    E_j      = the end of engine j's last job (start[x] + block_j[x] while block x runs)

``step_j[x]`` is the time level j's ports take for the step's fills, parent reads and drains
(words / read or write bandwidth, the larger), ``block_j[x]`` the same for the traffic inside the
block, which shares the ports with the next step's prefetch. ``W_j[x]``: the buffer the transfer
fills must be free. Double-buffered (the level's capacity holds two of each tile it keeps, and
so does every level it fills), the tile it replaces is the one before the previous load: W =
C[p-1] with p the engine's previous job step, so the load overlaps the compute on the current
tile. Single-buffered: W = C[x-1], it waits until that compute is done. Each level states its
buffering per tensor (``StorageLevel.buffering``): ``double`` and ``single`` as above, ``auto``
double exactly when the capacity holds two of each tile (the rule before levels stated it), and
``stream`` (a FIFO or line buffer): the tensor's fills, the parent reads feeding them and the
partial sums it drains are the traffic of the blocks that use the tile, spread evenly over the
walked steps it stays resident, so they lengthen a block only where its ports need longer than
its compute and never hold one up before it starts. The feeders of level j
are the levels its tensors come from (each one's next outer keeper): a scratchpad fills from the
buffer above only once that buffer has the data, which is the serial pipeline fill; sibling
scratchpads fed by the same buffer fill side by side. A block lasts
``t_block`` or longer where a level's ports need longer (the closed form's throttling), and
single-buffered levels refill inside it before the compute, as between steps (``walk``). After
the last block the partial sums still resident drain from the inside out.

Bounds (tests/sim/test_walk.py checks both): every engine's jobs are disjoint intervals and the
blocks run one after the other, so the walk's cycles are never fewer than the closed form's
(``max(t_all, reads_j / read_bw_j, writes_j / write_bw_j)``). With unbounded bandwidths every
job takes 0 and the walk's cycles equal the closed form's ``t_all``.

Energy: the same counts give the same access energy as the closed form; leakage is charged over
the walk's cycles.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from ..hw.hierarchy import Hierarchy
from ..mapping.mapping import Mapping
from .movement import (Evaluation, LevelResult, _diff, _translation, distinct_tiles, evaluate, level_results,
                       spatial_loops, step_loops)
from ..workload.nest import DataSpace, Nest
from .walk_pipeline import pipeline

DEFAULT_MAX_STEPS = 1 << 14   # walked steps: a VGG layer on eyeriss walks in milliseconds


@dataclass(frozen=True)
class WalkResult:
    """The walk's counts (in an ``Evaluation``, the closed form's shape: per instance, levels
    outermost first; ``cycles`` the walk's), and what the walk adds: the cycles before the first
    compute (``fill_cycles``), after the last (``drain_cycles``), the steps walked and the
    analytical cycles of the same mapping for comparison."""
    evaluation: Evaluation
    steps: int
    walked_loops: tuple[tuple[str, str, int], ...]   # (level, dim, factor), outermost first
    block_cycles: int                                 # compute cycles of one block (unthrottled)
    fill_cycles: float
    drain_cycles: float
    pipeline_cycles: float                            # the pipeline's end, unrounded
    analytical_cycles: int

    @property
    def cycles(self) -> int:
        return self.evaluation.cycles

    @property
    def energy_pj(self) -> float:
        return self.evaluation.energy_pj

    def to_json(self) -> dict[str, Any]:
        return self.evaluation.to_json()


# ---------------------------------------------------------------------------- per-step deltas
def _taus(ds: DataSpace, loops: list[tuple[str, int, int]]) -> list[tuple[int, ...]]:
    """Translation of the tile when loop k advances from 0 to 1 and every inner loop wraps."""
    out = []
    for k, (d, _, s) in enumerate(loops):
        move = {d: s}
        for d2, _, s2 in loops[k + 1:]:
            move[d2] = move.get(d2, 0) - s2
        out.append(_translation(ds, move))
    return out


def _step_deltas(ds: DataSpace, extents: tuple[int, ...], loops: list[tuple[str, int, int]], walked: int,
                 idx: np.ndarray) -> np.ndarray:
    """Words fetched into one instance at each walked step (the first whole tile at step 0).

    ``loops`` are this tile's step loops (a prefix of the nest's temporal loops); the first
    ``min(walked, len(loops))`` are walked, the rest run inside each block, whose fetches the
    step carries (weighted as Timeloop extrapolates them). ``idx`` [walked, steps] holds every
    step's index of each walked loop. Timeloop's reset-on-stride-change state machine runs over
    the evaluated steps ({0, 1} per loop) exactly as ``sim.cost.movement.delta_sum`` runs it; the
    literal step x gets the delta of evaluated step min(x, 1)."""
    m = min(walked, len(loops))
    full = math.prod(extents)
    taus = _taus(ds, loops)

    def advance(k: int, state):
        t = taus[k]
        if state is None or t == state:
            return _diff(extents, t), t
        return full, None

    @lru_cache(maxsize=None)
    def inner(k: int, state) -> tuple[int, Any]:
        """(weighted fetches of the sub-walk over unwalked loops k.., state after)."""
        if k == len(loops):
            return 0, state
        a1, s1 = inner(k + 1, state)
        d, s2 = advance(k, s1)
        a2, s3 = inner(k + 1, s2)
        return a1 + (loops[k][1] - 1) * (d + a2), s3

    @lru_cache(maxsize=None)
    def evaluated(k: int, state) -> tuple[np.ndarray, Any]:
        """(fetches at each of the 2**(m-k) evaluated steps of walked loops k..m-1, state after)."""
        if k == m:
            w, s = inner(m, state)
            return np.array([w], dtype=np.int64), s
        a, s1 = evaluated(k + 1, state)
        d, s2 = advance(k, s1)
        b, s3 = evaluated(k + 1, s2)
        b = b.copy()
        b[0] += d
        return np.concatenate([a, b]), s3

    arr = evaluated(0, None)[0].copy()
    arr[0] += full
    ev_index = np.zeros(idx.shape[1], dtype=np.int64)
    for k in range(m):
        ev_index = ev_index * 2 + np.minimum(idx[k], 1)
    out = arr[ev_index]
    if m < idx.shape[0]:
        # walked loops inside this level leave its tile in place: it arrives when they are all 0
        out = np.where((idx[m:] == 0).all(axis=0), out, 0)
    return out


def _first_touch(arrivals: np.ndarray, part: int, loops: list[tuple[str, int, int]], walked: int,
                 idx: np.ndarray, ds: DataSpace, block_words: int | None) -> np.ndarray:
    """Words of a partial-sum tile touched for the first time at each step (not read back).

    An output element is fresh where no earlier step touched it: at a step whose walked loops
    over dims that do not index the output are all at 0 (the tiles of different output indices
    are disjoint), the whole arrival (or, for a level inside the block, the block's words) is
    fresh. That accounts exactly for ``part`` words on nests whose output ranks are plain dims;
    any other projection falls back to the first ``part`` words in step order."""
    m = min(walked, len(loops))
    fresh = np.ones(idx.shape[1], dtype=bool)
    for k in range(m):
        if loops[k][0] not in ds.dims:
            fresh &= idx[k] == 0
    words = arrivals if block_words is None else np.full(idx.shape[1], block_words, dtype=np.int64)
    first = np.minimum(np.where(fresh, words, 0), arrivals)
    if int(first.sum()) != part:
        before = np.cumsum(arrivals) - arrivals
        first = np.minimum(arrivals, np.maximum(0, part - before))
    return first


# ---------------------------------------------------------------------------- the walk
@dataclass
class _Ports:
    """Words one instance of a level moves: at step boundaries, inside blocks, after the end."""
    step_rd: np.ndarray
    step_wr: np.ndarray
    block_rd: np.ndarray
    block_wr: np.ndarray
    block_fill: np.ndarray    # the part of block_wr refilling the level's own tiles
    block_feed: np.ndarray    # the part of block_rd feeding those refills of single-buffered children
    final_wr: int = 0


def _buffers(hier: Hierarchy, nest: Nest, mapping: Mapping, i: int) -> int:
    """Level i's buffers for the tensors it refills between blocks (its stated buffering; a
    streaming tensor is refilled inside the block and does not count): 1 when one is ``single``
    or an ``auto`` one is left without room for a second tile set, else 2. ``auto``: the
    capacity must hold two of each tile the level keeps (the rule before levels stated it)."""
    lv = hier.levels[i]
    kept = [ds.name for ds in nest.data_spaces if mapping.keeps(hier, i, ds.name)]
    modes = {name: lv.buffering_of(name) for name in kept}
    modes = {name: m for name, m in modes.items() if m != "stream"}
    if "single" in modes.values():
        return 1
    if "auto" not in modes.values() or lv.capacity_words is None:
        return 2
    words = sum(mapping.tile_words(nest, i, name) for name in kept)
    return 2 if 2 * words <= lv.capacity_words else 1


def _job(rd: np.ndarray, wr: np.ndarray, rbw: float | None, wbw: float | None) -> np.ndarray:
    t = np.zeros(len(rd), dtype=np.float64)
    if rbw is not None:
        t = np.maximum(t, rd / rbw)
    if wbw is not None:
        t = np.maximum(t, wr / wbw)
    return t


@dataclass(frozen=True)
class _Counted:
    """The counting pass: per level and data space the reads, fills and updates of one instance
    at each step, the words each level's ports move (``_Ports``) and its buffering."""
    steps: int
    loops: tuple[tuple[str, int, int], ...]    # the walked loops (dim, factor, stride), outermost first
    t_block: int
    counts: tuple[dict[str, list[np.ndarray]], ...]   # per level: name -> [reads, fills, updates]
    tiles: tuple[dict[str, tuple[int, int]], ...]      # per level: name -> (tile words, partition words)
    ports: tuple[_Ports, ...]
    bufs: tuple[int, ...]                 # 2 = double-buffered
    fills_to: tuple[frozenset[int], ...]  # the levels each level fills


def walk(hier: Hierarchy, nest: Nest, mapping: Mapping, max_steps: int = DEFAULT_MAX_STEPS,
         check: bool = True) -> WalkResult:
    """Walk ``mapping`` of ``nest`` on ``hier`` (see the module docstring); ``max_steps`` caps
    the walked steps (>= 1; the loops inside run as steady blocks)."""
    if check:
        mapping.check(hier, nest)
    if not (isinstance(max_steps, int) and not isinstance(max_steps, bool) and max_steps >= 1):
        raise ValueError(f"max_steps must be an integer >= 1, got {max_steps!r}")
    c = _count(hier, nest, mapping, max_steps)
    engines, block = _engines(hier, c)
    end, first_start, last_c = pipeline(engines, block, tuple(f for _, f, _ in c.loops))
    ana = evaluate(hier, nest, mapping, check=False)
    # the closed form rounds its slowdown in floating point (36 / (0.5 / (102 / 36)) -> 205, not
    # 204): where that puts it a cycle above the walk's exact bound, the walk reports its figure
    cycles = max(int(math.ceil(end - 1e-9)), ana.cycles)
    ev = replace(ana, cycles=cycles, levels=_levels(hier, nest, mapping, c, cycles))
    owners = [hier.levels[i].name for i, lm in enumerate(mapping.levels) for _ in lm.loop_order(nest.dim_names)]
    return WalkResult(evaluation=ev, steps=c.steps,
                      walked_loops=tuple((owners[k], d, f) for k, (d, f, _) in enumerate(c.loops)),
                      block_cycles=c.t_block, fill_cycles=first_start, drain_cycles=max(0.0, end - last_c),
                      pipeline_cycles=end, analytical_cycles=ana.cycles)


def _count(hier: Hierarchy, nest: Nest, mapping: Mapping, max_steps: int) -> _Counted:
    """Every step's counts per level and data space, and the words each level's ports move at
    step boundaries, inside blocks and after the end (see the module docstring)."""
    n = len(hier.levels)
    dims = nest.dim_names
    all_t = step_loops(mapping, nest, n)      # every temporal loop, outermost first
    walked, steps = 0, 1
    while walked < len(all_t) and steps * all_t[walked][1] <= max_steps:
        steps *= all_t[walked][1]
        walked += 1
    idx = np.indices([f for _, f, _ in all_t[:walked]], dtype=np.int64).reshape(walked, -1) if walked \
        else np.zeros((0, 1), dtype=np.int64)
    t_block = math.prod(f for _, f, _ in all_t[walked:])
    level_loops = [step_loops(mapping, nest, i) for i in range(n)]
    spans = [mapping.span_below(i, dims) for i in range(n)]
    full_span = {d: math.prod(lm.t(d) for lm in mapping.levels) for d in dims}
    unwalked = {d: math.prod(f for d2, f, _ in all_t[walked:] if d2 == d) for d in dims}

    zeros = lambda: np.zeros(steps, dtype=np.int64)  # noqa: E731
    fzeros = lambda: np.zeros(steps, dtype=np.float64)  # noqa: E731  (port words: a stream spreads them)
    ports = [_Ports(fzeros(), fzeros(), fzeros(), fzeros(), fzeros(), fzeros()) for _ in range(n)]
    bufs = [_buffers(hier, nest, mapping, i) for i in range(n)]
    counts: list[dict[str, list[np.ndarray]]] = [dict() for _ in range(n)]   # name -> [reads, fills, updates]
    tiles: list[dict[str, tuple[int, int]]] = [dict() for _ in range(n)]
    fills_to: list[set[int]] = [set() for _ in range(n)]      # levels each level fills

    def distinct(ds, lo, hi):
        return math.prod(distinct_tiles(ds, spatial_loops(mapping, nest, j)) for j in range(lo, hi))

    def drain_steps(arr: np.ndarray) -> tuple[np.ndarray, int]:
        """Words written back at each step when a tile arriving at step x leaves at the next
        step its level's tile changes; what is resident after the last step drains at the end."""
        out = np.zeros_like(arr)
        nz = np.flatnonzero(arr)
        if len(nz) == 0:
            return out, 0
        out[nz[1:]] = arr[nz[:-1]]
        return out, int(arr[nz[-1]])

    for ds in nest.data_spaces:
        keepers = [i for i in range(n) if mapping.keeps(hier, i, ds.name)]
        # a streaming tensor's refills (and the parent reads and drains that go with them) flow
        # during the block that uses them, as a block's own traffic, never as a step's transfer
        stream = {i: hier.levels[i].buffering_of(ds.name) == "stream" for i in keepers}

        def flow(arr: np.ndarray, i: int) -> np.ndarray:
            """A streaming tile's words spread evenly over the walked steps it stays resident
            (the walked loops inside its level: consecutive steps), as a FIFO delivers them
            while the compute consumes them; other traffic as it comes."""
            inside = all_t[len(level_loops[i]):walked]
            if not (stream[i] and inside):
                return arr
            life = math.prod(f for _, f, _ in inside)
            return np.repeat(arr.reshape(-1, life).sum(axis=1) / life, life)
        arrivals, first, part, above = {}, {}, {}, {}
        for i in keepers:
            ext = ds.extents(spans[i])
            loops = level_loops[i]
            above[i] = len(loops) <= walked
            arrivals[i] = _step_deltas(ds, ext, loops, walked, idx)
            pspan = {d: full_span[d] * math.prod(lm.s(d) for lm in mapping.levels[i:]) for d in dims}
            part[i] = ds.tile_words(pspan)
            tiles[i][ds.name] = (math.prod(ext), part[i])
            if ds.read_write:
                block = None if above[i] else ds.tile_words({d: spans[i][d] * unwalked[d] for d in dims})
                first[i] = _first_touch(arrivals[i], part[i], loops, walked, idx, ds, block)
        # the innermost keeper's exchange with the MACs, block by block
        inner = keepers[-1]
        lm_last = mapping.levels[-1]
        if not any(f > 1 for _, f in lm_last.spatial_x + lm_last.spatial_y):
            to_macs = np.full(steps, t_block * distinct(ds, inner, n), dtype=np.int64)
        else:
            box = ds.extents({d: lm_last.s(d) for d in dims})
            to_macs = _step_deltas(ds, box, all_t, walked, idx) * distinct(ds, inner, n - 1)
        if ds.read_write:
            mac_block = ds.tile_words({d: unwalked[d] * math.prod(lm.s(d) for lm in mapping.levels[inner:])
                                       for d in dims})
            mac_first = _first_touch(to_macs, part[inner], all_t, walked, idx, ds, mac_block)
        for pos, i in enumerate(keepers):
            child = keepers[pos + 1] if pos + 1 < len(keepers) else None
            a = arrivals[i]
            if pos == 0:
                fills = zeros()
            else:
                fills = a - first[i] if ds.read_write else a
            p = ports[i]
            if pos > 0:
                if above[i] and not stream[i]:
                    p.step_wr[:] += fills
                else:
                    p.block_wr[:] += flow(fills, i)
                    if not stream[i]:
                        p.block_fill[:] += fills
            if child is None:
                if ds.read_write:
                    reads, updates = to_macs - mac_first, to_macs
                else:
                    reads, updates = to_macs, zeros()
                p.block_rd[:] += reads
                p.block_wr[:] += updates
            else:
                k = distinct(ds, i, child)
                fills_to[i].add(child)
                if ds.read_write:
                    reads = (arrivals[child] - first[child]) * k
                    updates = arrivals[child] * k
                else:
                    reads, updates = arrivals[child] * k, zeros()
                if above[child] and not stream[child]:
                    p.step_rd[:] += reads
                    if ds.read_write:
                        back, last = drain_steps(updates)
                        p.step_wr[:] += back
                        p.final_wr += last
                else:
                    p.block_rd[:] += flow(reads, child)
                    p.block_wr[:] += flow(updates, child)
                    if bufs[child] == 1 and not stream[child]:
                        p.block_feed[:] += reads
            counts[i][ds.name] = [reads, fills, updates]

    return _Counted(steps, tuple(all_t[:walked]), t_block, tuple(counts), tuple(tiles), tuple(ports), tuple(bufs),
                    tuple(frozenset(f) for f in fills_to))


def _engines(hier: Hierarchy, c: _Counted) -> tuple[list, np.ndarray]:
    """The pipeline's transfer engines (outermost first: step jobs, block jobs, final drain,
    slots, the engines of the levels feeding it) and every block's duration.

    Inside a block a level's port time overlaps the MACs (the closed form's steady state), except
    the refills of single-buffered levels and the parent reads that feed them: they wait for the
    compute using the tile and hold it up in turn, as between walked steps, where a level's
    transfer follows its feeders'. A block is then a refill phase (per single-buffered level, its
    feeders' reads then its fills) plus a compute phase; every port's words still fit in it (each
    port's time is split between the two phases)."""
    steps, ports, bufs = c.steps, c.ports, c.bufs
    n = len(hier.levels)
    parents = [[i for i in range(n) if j in c.fills_to[i]] for j in range(n)]
    engines, index = [], {}
    feed_t = [np.zeros(steps)] * n
    serve = np.full(steps, float(c.t_block))   # the compute phase
    refill = np.zeros(steps)                    # the refill phase
    for j, lv in enumerate(hier.levels):
        if lv.spatial_only:
            continue
        p = ports[j]
        rbw, wbw = lv.read_bandwidth, lv.write_bandwidth
        step = _job(p.step_rd, p.step_wr, rbw, wbw)
        block = _job(p.block_rd, p.block_wr, rbw, wbw)
        fill = p.block_fill if bufs[j] == 1 else np.zeros(steps, dtype=np.int64)
        feed_t[j] = _job(p.block_feed, np.zeros(steps), rbw, None)
        fed = np.max([feed_t[i] for i in parents[j]], axis=0) if parents[j] else np.zeros(steps)
        refill = np.maximum(refill, fed + _job(np.zeros(steps), fill, None, wbw))
        serve = np.maximum(serve, _job(p.block_rd - p.block_feed, p.block_wr - fill, rbw, wbw))
        final = p.final_wr / wbw if wbw is not None else 0.0
        if not (step.any() or block.any() or final):
            continue
        slots = min([bufs[j]] + [bufs[k] for k in c.fills_to[j]])
        index[j] = len(engines)
        engines.append((step, block, final, slots, tuple(index[i] for i in parents[j] if i in index)))
    return engines, refill + serve


def _levels(hier: Hierarchy, nest: Nest, mapping: Mapping, c: _Counted, cycles: int) -> tuple[LevelResult, ...]:
    """Per level the walk's totals and their energy, charged as the closed form charges them
    (``movement.level_results``), leakage over the walk's cycles."""
    counts = [{name: (*(int(x.sum()) for x in rfu), *c.tiles[i][name]) for name, rfu in c.counts[i].items()}
              for i in range(len(hier.levels))]
    return level_results(hier, nest, mapping, counts, cycles, (cycles,) * len(hier.levels))
