"""The multi-level data-movement model: (hierarchy, nest, mapping) -> per-level, per-data-space
reads, fills and updates, then cycles, energy and area. Closed form, no loop is walked.

Counting rules (Timeloop's, so that its statistics are reproduced access for access; see
docs/SIMULATOR.md "Multi-level model" and ../shared/oracle/timeloop/README.md):

- **Tile** of data space d at level L: the bounding box of the projection of the iteration box
  one instance of L spans (L's temporal and spatial loops and everything inside).
- **Steps** of L: the temporal loops of the levels outside L, outermost first, seen by one
  instance (spatial loops outside only pick the instance). Timeloop evaluates each such loop at
  iteration 0 and iteration 1 and extrapolates iteration 1 to the rest (its
  ``gExtrapolateUniformTemporal``), and fetches at each evaluated step the difference with the
  previous tile only while the tile keeps moving by the same translation; when the translation
  changes it fetches the whole tile and forgets the stride (``SaveAndSubtractIfSameStride``).
  ``_delta_sum`` follows that state machine over the 2**n evaluated steps in closed form (a
  recursion over loops, memoised on the stride state), so it costs O(loops x strides).
- **Arrivals** of d at L = that weighted delta sum (the first tile included).
  Input-like d: fills = arrivals, except at the outermost keeper (preloaded, 0).
  Output d: fills = arrivals - partition (the first arrival of an element is not a read-back).
- **Reads** at the innermost keeper of an input-like d: one per MAC operand, MACs that differ
  only along spatial loops not indexing d share it (multicast). Above it: the fills of the next
  inner keeper times the number of *distinct* child tiles (identical tiles are multicast).
- **Updates** (outputs): at the innermost keeper one per MAC after spatial reduction; above it
  the drains (arrivals) of the child keeper times the distinct child tiles. Output reads: at the
  innermost keeper updates - partition (the first write of a fresh sum is not read-modify-write),
  above it the read-backs (fills) of the child keeper times distinct children.
- **Cycles**: temporal iterations, slowed by any level whose summed read (or fill+update) words
  per instance exceed its bandwidth x cycles (Timeloop's slowdown).
- **Energy** per data space and instance: ceil(count / block) x energy per block access for
  reads, fills and updates, divided by the instances sharing one cluster access; times utilized
  instances; plus leakage x cycles x utilized instances; plus MACs x MAC energy.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..hw.hierarchy import Hierarchy
from ..mapping.mapping import Mapping
from ..workload.nest import DataSpace, Nest

SPREAD_ENUMERATION_CAP = 1 << 16   # spatial grids larger than this are assumed free of diagonals


@dataclass(frozen=True)
class TensorCounts:
    """Per-instance counts of one data space at one level (words)."""
    reads: int
    fills: int
    updates: int
    tile_words: int        # utilized capacity
    partition_words: int   # distinct words one instance holds over the run
    energy_pj: float       # per instance


@dataclass(frozen=True)
class LevelResult:
    name: str
    instances: int
    utilized_instances: int
    spatial_only: bool
    tensors: tuple[tuple[str, TensorCounts], ...]   # kept data spaces only, in nest order
    access_energy_pj: float       # all utilized instances, all data spaces
    leak_energy_pj: float
    cycles: int                   # compute cycles slowed by this level's bandwidth

    @property
    def energy_pj(self) -> float:
        return self.access_energy_pj + self.leak_energy_pj

    def tensor(self, name: str) -> TensorCounts:
        return dict(self.tensors)[name]


@dataclass(frozen=True)
class Evaluation:
    computes: int
    compute_cycles: int
    cycles: int
    utilized_macs: int
    mac_energy_pj: float
    area_um2: float
    levels: tuple[LevelResult, ...]   # outermost first, as the hierarchy

    @property
    def energy_pj(self) -> float:
        return self.mac_energy_pj + sum(lv.energy_pj for lv in self.levels)

    def to_json(self) -> dict[str, Any]:
        """The ``simulate --timeloop --json`` object: levels innermost first, spatial-only
        levels left out, counts totalled over utilized instances, energy with leakage."""
        out = []
        for lv in reversed(self.levels):
            if lv.spatial_only:
                continue
            u = lv.utilized_instances
            out.append({"name": lv.name, "instances": lv.instances, "utilized_instances": u,
                        "energy_pj": lv.energy_pj,
                        "tensors": {n: {"reads": c.reads * u, "fills": c.fills * u, "updates": c.updates * u}
                                    for n, c in lv.tensors}})
        return {"cycles": self.cycles, "computes": self.computes, "energy_pj": self.energy_pj, "levels": out}


# ---------------------------------------------------------------------------- building blocks
def step_loops(mapping: Mapping, nest: Nest, i: int) -> list[tuple[str, int, int]]:
    """(dim, factor, stride) of the temporal loops outside level i, outermost first, factor > 1.
    The stride is the loop's step in its dim: the product of that dim's factors inside it
    (including spatial loops, which scale the index even though instance 0 sits at 0)."""
    dims = nest.dim_names
    seq: list[tuple[str, int, str]] = []   # (dim, factor, kind) over the whole nest, outermost first
    for lm in mapping.levels:
        for d in lm.loop_order(dims):
            seq.append((d, lm.t(d), "t"))
        for d, f in lm.spatial_x + lm.spatial_y:
            if f > 1:
                seq.append((d, f, "s"))
    # the loops outside level i are those of levels 0..i-1
    n_outer = sum(len(lm.loop_order(dims)) + sum(1 for _, f in lm.spatial_x + lm.spatial_y if f > 1)
                  for lm in mapping.levels[:i])
    out = []
    for k in range(n_outer):
        d, f, kind = seq[k]
        if kind != "t":
            continue
        stride = math.prod(f2 for d2, f2, _ in seq[k + 1:] if d2 == d)
        out.append((d, f, stride))
    return out


def _translation(ds: DataSpace, move: dict[str, int]) -> tuple[int, ...]:
    return tuple(sum(c * move.get(d, 0) for d, c in rank) for rank in ds.projection)


def _diff(extents: tuple[int, ...], t: tuple[int, ...]) -> int:
    """Words of a box not covered by the same box translated by -t."""
    full = math.prod(extents)
    return full - math.prod(max(0, e - abs(x)) for e, x in zip(extents, t))


def delta_sum(ds: DataSpace, extents: tuple[int, ...], loops: list[tuple[str, int, int]]) -> int:
    """Words fetched into one instance over all steps (the first whole tile included), by
    Timeloop's extrapolated walk with reset on stride change (see the module docstring)."""
    n = len(loops)
    full = math.prod(extents)
    # translation when loop k advances from 0 to 1 and every inner loop wraps from 1 to 0
    taus = []
    for k in range(n):
        move: dict[str, int] = {}
        d, _, s = loops[k]
        move[d] = move.get(d, 0) + s
        for d2, _, s2 in loops[k + 1:]:
            move[d2] = move.get(d2, 0) - s2
        taus.append(_translation(ds, move))

    @lru_cache(maxsize=None)
    def walk(k: int, state: tuple[int, ...] | None) -> tuple[int, tuple[int, ...] | None]:
        """(weighted fetches of the steps inside the sub-walk over loops k.., state after)."""
        if k == n:
            return 0, state
        a1, s1 = walk(k + 1, state)
        t = taus[k]
        if s1 is None:
            d, s2 = _diff(extents, t), t
        elif t == s1:
            d, s2 = _diff(extents, t), s1
        else:
            d, s2 = full, None
        a2, s3 = walk(k + 1, s2)
        return a1 + (loops[k][1] - 1) * (d + a2), s3

    return full + walk(0, None)[0]


def distinct_tiles(ds: DataSpace, spatial: list[tuple[str, int, int]]) -> int:
    """How many different tiles of ``ds`` the instances fanned out by ``spatial`` loops
    ``(dim, factor, step)`` of one level hold. Instances differing only along dims that do not
    index ``ds`` share a tile (multicast / spatial reduction); so do instances whose offsets
    project to the same point (a diagonal such as q + s fed by two spatial loops)."""
    rel = [(d, f, st) for d, f, st in spatial if f > 1 and d in ds.dims]
    if not rel:
        return 1
    total = math.prod(f for _, f, _ in rel)
    dims = [d for d, _, _ in rel]
    shared_rank = len(set(dims)) < len(dims) or any(
        sum(1 for d, _ in rank if d in dims) > 1 for rank in ds.projection)
    if not shared_rank or total > SPREAD_ENUMERATION_CAP:
        return total
    seen = set()
    for idx in itertools.product(*(range(f) for _, f, _ in rel)):
        move: dict[str, int] = {}
        for (d, _, st), x in zip(rel, idx):
            move[d] = move.get(d, 0) + x * st
        seen.add(_translation(ds, move))
    return len(seen)


def spatial_loops(mapping: Mapping, nest: Nest, j: int) -> list[tuple[str, int, int]]:
    """(dim, factor, step) of level j's spatial loops, X before Y (X outer): the step is the
    product of the dim's factors inside the loop (later spatial loops of j, every inner level)."""
    lm = mapping.levels[j]
    sp = [(d, f) for d, f in lm.spatial_x + lm.spatial_y if f > 1]
    out = []
    for k, (d, f) in enumerate(sp):
        step = math.prod(f2 for d2, f2 in sp[k + 1:] if d2 == d)
        step *= math.prod(lm2.t(d) * lm2.s(d) for lm2 in mapping.levels[j + 1:])
        out.append((d, f, step))
    return out


def _distinct_between(mapping: Mapping, nest: Nest, ds: DataSpace, lo: int, hi: int) -> int:
    """Distinct child tiles under one instance of level ``lo`` at level ``hi`` (spatial loops of
    levels lo..hi-1)."""
    return math.prod(distinct_tiles(ds, spatial_loops(mapping, nest, j)) for j in range(lo, hi))


def mac_side_accesses(mapping: Mapping, nest: Nest, ds: DataSpace, inner: int, t_all: int) -> int:
    """Words of ``ds`` the innermost keeper (level ``inner``) exchanges with the MACs under one
    instance: operands read, or partial sums written.

    Timeloop counts these at the innermost loop of the whole nest. When that loop is temporal
    (the innermost storage level has no spatial fan-out to the MACs), every MAC cycle is one
    access per distinct operand among the MACs: ``t_all`` x distinct. When it is spatial (the
    innermost storage level, often a spatial-only container level, fans out to the MACs and has
    no temporal loop inside it), the operands reach the MACs as the deltas of that spatial box
    over all temporal loops, with the same reset-on-stride-change rule as any tile: an operand
    that stays put while a temporal loop runs is not read again.
    """
    last = len(mapping.levels) - 1
    lm = mapping.levels[last]
    if not any(f > 1 for _, f in lm.spatial_x + lm.spatial_y):
        return t_all * _distinct_between(mapping, nest, ds, inner, last + 1)
    box = ds.extents({d: lm.s(d) for d in nest.dim_names})
    per_box = delta_sum(ds, box, step_loops(mapping, nest, last + 1))
    # spatial loops between the keeper and the innermost level multiply the boxes it serves
    return per_box * _distinct_between(mapping, nest, ds, inner, last)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------- the model
def evaluate(hier: Hierarchy, nest: Nest, mapping: Mapping, check: bool = True) -> Evaluation:
    """Counts, cycles, energy and area of ``mapping`` (checked first unless ``check=False``)."""
    if check:
        mapping.check(hier, nest)
    n = len(hier.levels)
    dims = nest.dim_names
    t_all = math.prod(lm.t(d) for lm in mapping.levels for d in dims)
    util_macs = mapping.utilized_macs()
    computes = nest.macs
    counts: list[dict[str, list[int]]] = [dict() for _ in range(n)]   # name -> [reads, fills, updates, tile, part]
    # per level, shared by every data space: the iteration box, the step loops, the box of
    # distinct words over the run
    full_span = {d: math.prod(lm.t(d) for lm in mapping.levels) for d in dims}
    spans = [mapping.span_below(i, dims) for i in range(n)]
    steps = [step_loops(mapping, nest, i) for i in range(n)]
    pspans = [{d: full_span[d] * math.prod(lm.s(d) for lm in mapping.levels[i:]) for d in dims} for i in range(n)]
    for ds in nest.data_spaces:
        keepers = [i for i in range(n) if mapping.keeps(hier, i, ds.name)]
        arrivals, tile, part = {}, {}, {}
        for i in keepers:
            ext = ds.extents(spans[i])
            tile[i] = math.prod(ext)
            arrivals[i] = delta_sum(ds, ext, steps[i])
            part[i] = ds.tile_words(pspans[i])
        inner = keepers[-1]
        to_macs = mac_side_accesses(mapping, nest, ds, inner, t_all)
        for pos, i in enumerate(keepers):
            child = keepers[pos + 1] if pos + 1 < len(keepers) else None
            outermost = pos == 0
            if ds.read_write:
                fills = 0 if outermost else arrivals[i] - part[i]
                if child is None:
                    updates, reads = to_macs, to_macs - part[i]
                else:
                    k = _distinct_between(mapping, nest, ds, i, child)
                    updates = arrivals[child] * k
                    reads = (arrivals[child] - part[child]) * k
            else:
                fills = 0 if outermost else arrivals[i]
                updates = 0
                if child is None:
                    reads = to_macs
                else:
                    reads = arrivals[child] * _distinct_between(mapping, nest, ds, i, child)
            counts[i][ds.name] = [reads, fills, updates, tile[i], part[i]]

    # cycles: Timeloop's per-level slowdown from summed scalar reads / writes per instance
    cycles = t_all
    level_cycles = []
    for i, lv in enumerate(hier.levels):
        slow = 1.0
        rd = sum(c[0] for c in counts[i].values())
        wr = sum(c[1] + c[2] for c in counts[i].values())
        if lv.read_bandwidth is not None and t_all and rd / t_all > lv.read_bandwidth:
            slow = min(slow, lv.read_bandwidth / (rd / t_all))
        if lv.write_bandwidth is not None and t_all and wr / t_all > lv.write_bandwidth:
            slow = min(slow, lv.write_bandwidth / (wr / t_all))
        lc = math.ceil(t_all / slow) if slow < 1.0 else t_all
        level_cycles.append(lc)
        cycles = max(cycles, lc)

    levels = level_results(hier, nest, mapping, counts, cycles, level_cycles)
    return Evaluation(computes=computes, compute_cycles=t_all, cycles=cycles, utilized_macs=util_macs,
                      mac_energy_pj=computes * hier.arithmetic.mac_pj, area_um2=hier.area_um2(),
                      levels=tuple(levels))


def level_results(hier: Hierarchy, nest: Nest, mapping: Mapping, counts, cycles: int,
                  level_cycles) -> tuple[LevelResult, ...]:
    """Every level's result from its per data space (reads, fills, updates, tile words, parent
    words) ``counts[i][name]`` (totals per instance): access energy per block access, shared by a
    cluster, over the utilized instances; leakage over ``cycles``; ``level_cycles[i]`` reported.
    The tile-level walk charges its own counts through this too."""
    levels = []
    for i, lv in enumerate(hier.levels):
        u = mapping.utilized_instances(i)
        clusters = min(u, max(1, lv.instances // lv.cluster_size))
        share = u / clusters
        tensors = []
        access = 0.0
        for ds in nest.data_spaces:
            if ds.name not in counts[i]:
                continue
            r, f, up, tw, pw = counts[i][ds.name]
            b = lv.block_size
            e = (_cdiv(r, b) * lv.read_pj + _cdiv(f, b) * lv.fill_pj + _cdiv(up, b) * lv.update_pj) / share
            tensors.append((ds.name, TensorCounts(r, f, up, tw, pw, e)))
            access += e * u
        leak = 0.0 if lv.spatial_only else lv.leak_pj_per_cycle * cycles * u
        levels.append(LevelResult(lv.name, lv.instances, u, lv.spatial_only, tuple(tensors), access, leak,
                                  level_cycles[i]))
    return tuple(levels)
