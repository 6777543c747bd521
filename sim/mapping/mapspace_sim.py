"""The mapspace of ``sim``'s three values: a ``Hierarchy`` and a ``Nest`` (plus user constraints)
give a ``MapspaceSpec``; a gene row gives a ``sim.mapping.mapping.Mapping`` and back.

``sim`` lists levels outermost first with permutations outermost first; the mapspace lists them
innermost first (tiles grow outwards), so both are reversed here and nowhere else.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ..hw.hierarchy import Hierarchy
from .mapping import LevelMapping, Mapping, prime_factors
from ..workload.nest import Nest

from ..cost.engines.batch import MappingArrays

from .mapspace import LevelConstraint, LevelSpec, Mapspace, MapspaceError, MapspaceSpec, TensorSpec, T, X, Y


def spec_for(hier: Hierarchy, nest: Nest, constraints: Iterable[LevelConstraint] = (),
             spatial_one_axis: bool = False) -> MapspaceSpec:
    dims = nest.dim_names
    ix = {d: i for i, d in enumerate(dims)}
    tensors = tuple(TensorSpec(ds.name, tuple(tuple((ix[d], c) for d, c in rank) for rank in ds.projection),
                               ds.read_write) for ds in nest.data_spaces)
    n = len(hier.levels)
    levels = []
    for i in range(n - 1, -1, -1):          # innermost first
        lv = hier.levels[i]
        fx, fy = hier.fanout(i)
        keep = tuple(None if (lv.may_keep(ds.name) and not lv.spatial_only) else False for ds in nest.data_spaces)
        levels.append(LevelSpec(lv.name, lv.capacity_words, fx, fy, keep, temporal_loops=not lv.spatial_only))
    return MapspaceSpec(dims, tuple(nest.bounds[d] for d in dims), tensors, tuple(levels), tuple(constraints),
                        spatial_one_axis)


def build_space(hier: Hierarchy, nest: Nest, constraints: Iterable[LevelConstraint] = (),
                spatial_one_axis: bool = False) -> Mapspace:
    """The mapspace of ``nest`` on ``hier``; ``spatial_one_axis``: Timeloop's space, where each
    dim's spatial factor at a level lies along X or along Y (what a Timeloop mapping file says)."""
    return Mapspace.build(spec_for(hier, nest, constraints, spatial_one_axis))


def to_mapping(space: Mapspace, row: np.ndarray) -> Mapping:
    """The ``sim`` mapping of one gene row."""
    return mapping_at(space, space.arrays(np.asarray(row)[None, :]), 0)


def mapping_at(space: Mapspace, a: MappingArrays, k: int) -> Mapping:
    """The ``sim`` mapping of row ``k`` of ``a`` (every dim in every permutation, so the order is
    explicit; every data space not kept listed as bypassed)."""
    dims = space.spec.dims
    tn = [t.name for t in space.spec.tensors]
    out = []
    for lv in range(space.n_levels):
        def nonunit(F):
            return tuple((dims[d], int(F[k, lv, d])) for d in range(len(dims)) if F[k, lv, d] > 1)
        keep = frozenset(t for kb, t in zip(a.keep[k, lv], tn) if kb)
        out.append(LevelMapping(temporal=nonunit(a.temporal), spatial_x=nonunit(a.spatial_x),
                                spatial_y=nonunit(a.spatial_y), permutation=tuple(dims[d] for d in a.perm[k, lv]),
                                keep=keep, bypass=frozenset(t for t in tn if t not in keep)))
    return Mapping(tuple(out))


def from_mapping(space: Mapspace, hier: Hierarchy, m: Mapping) -> np.ndarray:
    """The gene row of a ``sim`` mapping (e.g. a given Timeloop mapping, to seed the search or
    to check it against the constraints). Raises ``MapspaceError`` when it lies outside the space."""
    dims = space.spec.dims
    L = space.n_levels
    if len(m.levels) != L:
        raise MapspaceError(f"mapping has {len(m.levels)} levels, the space {L}")
    slots = np.full(space.n_primes, -1, dtype=np.int64)
    perms = np.zeros((L, space.n_dims), dtype=np.int64)
    keep = np.zeros((L, space.n_tensors), dtype=np.int64)
    tn = [t.name for t in space.spec.tensors]
    flex = space.allowed.sum(axis=1)
    for lv in range(L):
        lm = m.levels[L - 1 - lv]
        for k, get in ((X, lm.sx), (Y, lm.sy), (T, lm.t)):
            s = 3 * lv + k
            for d, name in enumerate(dims):
                for p in prime_factors(get(name)):
                    cand = [j for j in np.flatnonzero((space.prime_dim == d) & (space.prime_val == p) & (slots < 0))
                            if space.allowed[j, s]]
                    if not cand:
                        raise MapspaceError(f"mapping level {space.spec.levels[lv].name}: factor {p} of {name} "
                                            f"is not allowed there by the constraints")
                    slots[min(cand, key=lambda j: flex[j])] = s
        order = list(lm.loop_order(dims))[::-1]          # innermost first, non-unit loops
        fixed = [dims[i] for i in space.perm_fixed[lv]]
        rest = [d for d in order if d not in fixed] + [d for d in dims if d not in order and d not in fixed]
        perms[lv] = [dims.index(d) for d in fixed] + [dims.index(d) for d in rest]
        for t, name in enumerate(tn):
            keep[lv, t] = int(m.keeps(hier, L - 1 - lv, name))
    if (slots < 0).any():
        raise MapspaceError("mapping factors do not multiply to the problem's dims")
    return space.join(slots[None], perms[None], keep[None])[0]
