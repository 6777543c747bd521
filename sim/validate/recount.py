"""A brute-force recount of the data-movement counts, for checking ``sim.cost.movement`` on small
problems. It shares no formula with the closed form: tiles are explicit sets of data-space
points built by enumerating every iteration point, deltas are set differences, strides are
differences of the sets' lowest corners, multicast is found by comparing the delta *sets* that
sibling instances need at each step (identical sets cost the parent one read), MAC operands and
spatial reductions are counted per MAC per cycle. Siblings are the instances one level fans out
to: as in Timeloop, a parent whose data reaches its keepers through several fanning-out levels
(bypassed or spatial-only containers) multicasts identical tiles only among the siblings of each
container, level by level, never across containers (a diagonal such as q + s spread over two
containers is not shared; the same diagonal inside one mesh is).

It follows the same evaluation order as Timeloop (and ``sim.cost.movement``): each temporal loop
outside a level is evaluated at iterations 0 and 1 and iteration 1 is weighted by factor - 1
(``extrapolate=True``); ``extrapolate=False`` walks every iteration instead, the literal
machine, which differs from Timeloop only where the extrapolation is inexact (documented in
docs/SIMULATOR.md). Cost grows with the problem: use it for at most a few thousand MACs.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterator

from ..hw.hierarchy import Hierarchy
from ..mapping.mapping import Mapping
from ..workload.nest import DataSpace, Nest


@dataclass(frozen=True)
class _Loop:
    level: int
    spatial: bool
    dim: str
    factor: int


def _loops(mapping: Mapping, nest: Nest) -> list[_Loop]:
    """Every loop with factor > 1, outermost first; a level's spatial loops inside its temporal ones."""
    out = []
    for i, lm in enumerate(mapping.levels):
        for d in lm.loop_order(nest.dim_names):
            out.append(_Loop(i, False, d, lm.t(d)))
        for d, f in lm.spatial_x + lm.spatial_y:
            if f > 1:
                out.append(_Loop(i, True, d, f))
    return out


def _weights(loops: list[_Loop], extrapolate: bool) -> Iterator[tuple[tuple[int, ...], int]]:
    """(index per loop, weight) in evaluation order."""
    ranges = [((0, 1) if extrapolate and lp.factor > 1 else range(lp.factor)) for lp in loops]
    for idx in itertools.product(*ranges):
        w = 1
        if extrapolate:
            for lp, x in zip(loops, idx):
                w *= (lp.factor - 1) if x == 1 else 1
        yield idx, w


class _Walker:
    def __init__(self, mapping: Mapping, nest: Nest):
        self.nest = nest
        self.loops = _loops(mapping, nest)
        # a loop's weight in its dim's index: product of that dim's factors of loops inside it
        self.scale = [math.prod(l2.factor for l2 in self.loops[k + 1:] if l2.dim == lp.dim)
                      for k, lp in enumerate(self.loops)]

    def point(self, fixed: dict[int, int]) -> dict[str, int]:
        p = {d: 0 for d in self.nest.dim_names}
        for k, x in fixed.items():
            p[self.loops[k].dim] += x * self.scale[k]
        return p

    def touched(self, ds: DataSpace, fixed: dict[int, int], inside: list[int]) -> frozenset:
        """Data-space points touched by the loops ``inside`` with the others at ``fixed``."""
        pts = set()
        for idx in itertools.product(*(range(self.loops[k].factor) for k in inside)):
            p = self.point({**fixed, **dict(zip(inside, idx))})
            pts.add(tuple(sum(c * p[d] for d, c in rank) for rank in ds.projection))
        return frozenset(pts)

    def tile(self, ds: DataSpace, fixed: dict[int, int], inside: list[int]) -> frozenset:
        """The hyper-rectangle a level holds: every point between the lowest and highest touched
        point on each rank (Timeloop keeps tiles as axis-aligned boxes, so a strided tile's
        holes are held and moved too)."""
        pts = self.touched(ds, fixed, inside)
        lo = [min(x[r] for x in pts) for r in range(len(ds.projection))]
        hi = [max(x[r] for x in pts) for r in range(len(ds.projection))]
        return frozenset(itertools.product(*(range(a, b + 1) for a, b in zip(lo, hi))))


def _corner(s: frozenset) -> tuple[int, ...]:
    return tuple(min(x[r] for x in s) for r in range(len(next(iter(s)))))


class _StrideState:
    """Timeloop's reset-on-stride-change delta, on explicit sets."""

    def __init__(self):
        self.prev: frozenset | None = None
        self.stride: tuple[int, ...] | None = None

    def delta(self, cur: frozenset) -> frozenset:
        if self.prev is None:
            self.prev = cur
            return cur
        t = tuple(a - b for a, b in zip(_corner(cur), _corner(self.prev)))
        if self.stride is None or t == self.stride:
            out = cur - self.prev
            self.stride = t
        else:
            out = cur
            self.stride = None
        self.prev = cur
        return out


def _by_container(items: list[tuple[tuple[int, ...], object]], levels: list[int]):
    """The distinct requests of siblings ``items`` = (spatial index per loop, leaf), grouped
    container by container (``levels[k]`` is the level of loop k): a nest of frozensets in which
    identical sub-trees of one container's siblings merge, outermost container first."""
    order = sorted(set(levels))

    def build(group, depth):
        if depth == len(order):
            return group[0][1]
        pos = [k for k, lv in enumerate(levels) if lv == order[depth]]
        sub: dict[tuple[int, ...], list] = {}
        for idx, leaf in group:
            sub.setdefault(tuple(idx[k] for k in pos), []).append((idx, leaf))
        return frozenset(build(g, depth + 1) for g in sub.values())

    return build(items, 0), len(order)


def _cost(tree, depth: int, leaf_cost) -> int:
    if depth == 0:
        return leaf_cost(tree)
    return sum(_cost(t, depth - 1, leaf_cost) for t in tree)


def _multicast(items, levels, leaf_cost=len) -> int:
    """What the parent serves to ``items``: each distinct request of each container once."""
    tree, depth = _by_container(items, levels)
    return _cost(tree, depth, leaf_cost)


def recount(hier: Hierarchy, nest: Nest, mapping: Mapping, extrapolate: bool = True) -> dict[int, dict[str, tuple[int, int, int]]]:
    """{level index (outermost first): {data space: (reads, fills, updates) per instance}} for the
    kept data spaces of each level."""
    w = _Walker(mapping, nest)
    loops = w.loops
    n = len(hier.levels)
    result: dict[int, dict[str, tuple[int, int, int]]] = {i: {} for i in range(n)}
    temporal_all = [k for k, lp in enumerate(loops) if not lp.spatial]
    for ds in nest.data_spaces:
        keepers = [i for i in range(n) if mapping.keeps(hier, i, ds.name)]

        def outer_t(i):   # temporal loops outside level i
            return [k for k in temporal_all if loops[k].level < i]

        def inside(i):    # loops of level i and below
            return [k for k, lp in enumerate(loops) if lp.level >= i]

        def spatial_between(lo, hi):
            return [k for k, lp in enumerate(loops) if lp.spatial and lo <= lp.level < hi]

        def walk_deltas(i, inst: dict[int, int]) -> list[tuple[frozenset, int]]:
            """(delta set, weight) per evaluated step for the instance of level i at ``inst``."""
            st = _StrideState()
            ks = outer_t(i)
            out = []
            for idx, wt in _weights([loops[k] for k in ks], extrapolate):
                out.append((st.delta(w.tile(ds, {**inst, **dict(zip(ks, idx))}, inside(i))), wt))
            return out

        def partition(i) -> int:
            seen = set()
            ks = outer_t(i)
            for idx in itertools.product(*(range(loops[k].factor) for k in ks)):
                seen |= w.tile(ds, dict(zip(ks, idx)), inside(i))
            return len(seen)

        def mac_accesses(i) -> int:
            """Words the MACs under instance 0 of level i exchange with it. Without spatial loops
            at the innermost level: per cycle, the distinct operand points among those MACs.
            With them: the deltas (stride-reset rule) of the box those loops span, walked over
            every temporal loop, per distinct box among the boxes under instance 0 of i."""
            last_sp = [k for k, lp in enumerate(loops) if lp.spatial and lp.level == n - 1]
            if not last_sp:
                sp = spatial_between(i, n)
                lv = [loops[k].level for k in sp]
                total = 0
                for idx, _ in _weights([loops[k] for k in temporal_all], False):
                    fixed = dict(zip(temporal_all, idx))
                    total += _multicast([(sidx, w.touched(ds, {**fixed, **dict(zip(sp, sidx))}, []))
                                         for sidx in itertools.product(*(range(loops[k].factor) for k in sp))], lv)
                return total
            outer_sp = spatial_between(i, n - 1)
            walks, idxs = [], []
            for sidx in itertools.product(*(range(loops[k].factor) for k in outer_sp)):
                idxs.append(sidx)
                st = _StrideState()
                seq = []
                for idx, wt in _weights([loops[k] for k in temporal_all], extrapolate):
                    fixed = {**dict(zip(outer_sp, sidx)), **dict(zip(temporal_all, idx))}
                    seq.append((st.delta(w.tile(ds, fixed, last_sp)), wt))
                walks.append(seq)
            lv = [loops[k].level for k in outer_sp]
            return sum(_multicast([(ix, wk[s][0]) for ix, wk in zip(idxs, walks)], lv) * walks[0][s][1]
                       for s in range(len(walks[0])))

        arrivals, part = {}, {}
        for i in keepers:
            arrivals[i] = sum(len(s) * wt for s, wt in walk_deltas(i, {}))
            part[i] = partition(i)
        for pos, i in enumerate(keepers):
            child = keepers[pos + 1] if pos + 1 < len(keepers) else None
            outermost = pos == 0
            if child is None:
                macs = mac_accesses(i)
                child_reads = child_arrivals = None
            else:
                # each sibling child under instance 0 of i, walked separately; identical delta
                # sets at a step are one parent read (multicast / spatial reduction)
                sp = spatial_between(i, child)
                lv = [loops[k].level for k in sp]
                per_child, idxs = [], list(itertools.product(*(range(loops[k].factor) for k in sp)))
                for idx in idxs:
                    per_child.append(walk_deltas(child, dict(zip(sp, idx))))
                steps = len(per_child[0])
                child_arrivals = 0
                for s in range(steps):
                    child_arrivals += _multicast([(ix, pc[s][0]) for ix, pc in zip(idxs, per_child)], lv) \
                        * per_child[0][s][1]
                # read-backs: the part of the arrivals that is not a first touch, per distinct child
                distinct_children = _multicast(
                    [(ix, frozenset().union(*(x for x, _ in pc))) for ix, pc in zip(idxs, per_child)], lv,
                    leaf_cost=lambda _: 1)
                child_reads = child_arrivals - part[child] * distinct_children
            if ds.read_write:
                fills = 0 if outermost else arrivals[i] - part[i]
                if child is None:
                    result[i][ds.name] = (macs - part[i], fills, macs)
                else:
                    result[i][ds.name] = (child_reads, fills, child_arrivals)
            else:
                fills = 0 if outermost else arrivals[i]
                result[i][ds.name] = (macs if child is None else child_arrivals, fills, 0)
    return result
