"""How a loop nest runs on a hierarchy: per storage level, temporal loops in an order, spatial
loops fanning out to the next inner level, and which data spaces the level keeps.

``Mapping.levels`` is parallel to ``Hierarchy.levels``: **outermost first**. At each level:

- ``temporal``: ``{dim: factor}`` (a missing dim has factor 1);
- ``permutation``: the temporal loops' order, **outermost first** (dims with factor 1 may be left
  out; dims with factor > 1 that are left out go innermost, in nest order);
- ``spatial_x`` / ``spatial_y``: spatial factors along the mesh X / Y to the next inner level
  (or the MACs). Spatial loops sit *inside* the level's temporal loops (Timeloop's convention);
- ``keep`` / ``bypass``: a data space is held at the level iff the level may keep it
  (``StorageLevel.keeps``), it is in ``keep`` (when given) and not in ``bypass``.

The nest of level i (one instance) is: its temporal loops, then its spatial loops, then level
i+1's. The product of every factor of a dim over all levels equals the dim's bound (perfect
factorisation). ``check(hierarchy, nest)`` raises ``MappingError`` with one line naming the
first problem: an unknown dim or level, factors whose product is not the bound, a fan-out beyond
the instances, a tile that overflows a level, a keep the level cannot hold, a backing store that
does not keep every data space.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Mapping as TMapping

from ..hw.hierarchy import Hierarchy
from ..workload.nest import Nest


class MappingError(ValueError):
    """An illegal mapping; one line naming what is wrong."""


def _check(cond: Any, msg: str) -> None:
    if not cond:
        raise MappingError(msg)


def _factors(v: Any, where: str) -> tuple[tuple[str, int], ...]:
    items = v.items() if isinstance(v, TMapping) else v
    _check(isinstance(items, (tuple, list)) or isinstance(v, TMapping),
           f"{where}: expected a mapping or list of (dim, factor), got {v!r}")
    out = []
    for item in items:
        _check(isinstance(item, (tuple, list)) and len(item) == 2, f"{where}: expected (dim, factor), got {item!r}")
        d, f = item
        _check(isinstance(f, int) and not isinstance(f, bool) and f >= 1,
               f"{where}: factor of {d} must be an integer >= 1, got {f!r}")
        out.append((str(d), f))
    names = [d for d, _ in out]
    _check(len(set(names)) == len(names), f"{where}: a dim appears twice in {names}")
    return tuple(out)


@dataclass(frozen=True)
class LevelMapping:
    temporal: tuple[tuple[str, int], ...] = ()
    permutation: tuple[str, ...] = ()          # outermost first
    spatial_x: tuple[tuple[str, int], ...] = ()
    spatial_y: tuple[tuple[str, int], ...] = ()
    keep: frozenset[str] | None = None
    bypass: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self):
        object.__setattr__(self, "temporal", _factors(self.temporal, "mapping temporal"))
        object.__setattr__(self, "spatial_x", _factors(self.spatial_x, "mapping spatial_x"))
        object.__setattr__(self, "spatial_y", _factors(self.spatial_y, "mapping spatial_y"))
        perm = tuple(str(d) for d in self.permutation)
        _check(len(set(perm)) == len(perm), f"mapping permutation names a dim twice: {list(perm)}")
        object.__setattr__(self, "permutation", perm)
        if self.keep is not None:
            object.__setattr__(self, "keep", frozenset(self.keep))
        object.__setattr__(self, "bypass", frozenset(self.bypass))
        both = sorted((self.keep or frozenset()) & self.bypass)
        _check(not both, f"mapping: data space {both[0] if both else ''} is both kept and bypassed")

    # factor look-ups as dicts, built once (cached_property writes the instance dict directly,
    # so it works on a frozen dataclass and stays out of equality and hashing)
    @cached_property
    def _t(self) -> dict[str, int]:
        return dict(self.temporal)

    @cached_property
    def _s(self) -> dict[str, int]:
        sx, sy = dict(self.spatial_x), dict(self.spatial_y)
        return {d: sx.get(d, 1) * sy.get(d, 1) for d in set(sx) | set(sy)}

    def t(self, dim: str) -> int:
        return self._t.get(dim, 1)

    def sx(self, dim: str) -> int:
        return dict(self.spatial_x).get(dim, 1)

    def sy(self, dim: str) -> int:
        return dict(self.spatial_y).get(dim, 1)

    def s(self, dim: str) -> int:
        return self._s.get(dim, 1)

    def loop_order(self, dims: Iterable[str]) -> tuple[str, ...]:
        """Temporal dims with factor > 1, outermost first (unlisted ones innermost, in ``dims`` order)."""
        listed = [d for d in self.permutation if self.t(d) > 1]
        rest = [d for d in dims if self.t(d) > 1 and d not in self.permutation]
        return tuple(listed + rest)


@dataclass(frozen=True)
class Mapping:
    levels: tuple[LevelMapping, ...]

    def __post_init__(self):
        _check(isinstance(self.levels, (tuple, list)), f"mapping levels must be a list of LevelMapping, got {self.levels!r}")
        object.__setattr__(self, "levels", tuple(self.levels))
        _check(all(isinstance(lm, LevelMapping) for lm in self.levels), "mapping levels must be LevelMapping values")

    def to_dict(self) -> list[dict[str, Any]]:
        """JSON: one object per level, outermost first (``mapping_from_dict`` reads it back);
        factors as [dim, factor] pairs, so their order survives a JSON writer that sorts keys."""
        return [{"temporal": [list(f) for f in lm.temporal], "permutation": list(lm.permutation),
                 "spatial_x": [list(f) for f in lm.spatial_x], "spatial_y": [list(f) for f in lm.spatial_y],
                 "keep": sorted(lm.keep) if lm.keep is not None else None, "bypass": sorted(lm.bypass)}
                for lm in self.levels]

    def keeps(self, hier: Hierarchy, i: int, ds: str) -> bool:
        lm, lv = self.levels[i], hier.levels[i]
        if not lv.may_keep(ds) or ds in lm.bypass:
            return False
        return lm.keep is None or ds in lm.keep

    def span_below(self, i: int, dims: Iterable[str], include_temporal: bool = True) -> dict[str, int]:
        """Per dim, product of the factors of level i's spatial loops (and temporal ones when
        asked) and of every inner level: the iteration box one instance of level i covers."""
        out = {}
        for d in dims:
            f = self.levels[i].s(d) * (self.levels[i].t(d) if include_temporal else 1)
            for lm in self.levels[i + 1:]:
                f *= lm.t(d) * lm.s(d)
            out[d] = f
        return out

    def tile_words(self, nest: Nest, i: int, ds: str) -> int:
        return nest.data_space(ds).tile_words(self.span_below(i, nest.dim_names))

    def utilized_instances(self, i: int) -> int:
        """Instances of level i in use: the product of the spatial factors of every outer level."""
        return math.prod(f for lm in self.levels[:i] for _, f in lm.spatial_x + lm.spatial_y)

    def utilized_macs(self) -> int:
        return math.prod(f for lm in self.levels for _, f in lm.spatial_x + lm.spatial_y)

    def check(self, hier: Hierarchy, nest: Nest) -> None:
        """Raise ``MappingError`` naming the first problem; return None for a legal mapping."""
        n = len(hier.levels)
        _check(len(self.levels) == n, f"mapping has {len(self.levels)} levels, the hierarchy has {n} "
                                      f"({', '.join(hier.names)})")
        dims = set(nest.dim_names)
        ds_names = {ds.name for ds in nest.data_spaces}
        for i, (lm, lv) in enumerate(zip(self.levels, hier.levels)):
            w = f"mapping level {lv.name}"
            for kind, fs in (("temporal", lm.temporal), ("spatial_x", lm.spatial_x), ("spatial_y", lm.spatial_y)):
                bad = [d for d, _ in fs if d not in dims]
                _check(not bad, f"{w}: {kind} names dim {bad[0] if bad else ''} the problem does not have "
                                f"(dims: {', '.join(nest.dim_names)})")
            bad = [d for d in lm.permutation if d not in dims]
            _check(not bad, f"{w}: permutation names dim {bad[0] if bad else ''} the problem does not have")
            for s in (lm.keep or frozenset()) | lm.bypass:
                _check(s in ds_names, f"{w}: keep/bypass names data space {s} the problem does not have "
                                      f"({', '.join(sorted(ds_names))})")
            for s in sorted(lm.keep or ()):
                _check(lv.may_keep(s), f"{w}: keeps {s} but the level may only keep "
                                       f"{', '.join(sorted(lv.keeps or ())) or 'nothing'}")
            fx, fy = hier.fanout(i)
            px = math.prod(f for _, f in lm.spatial_x)
            py = math.prod(f for _, f in lm.spatial_y)
            inner = hier.levels[i + 1].name if i + 1 < n else hier.arithmetic.name
            _check(px <= fx, f"{w}: spatial X factors multiply to {px}, beyond the fan-out of {fx} to {inner}")
            _check(py <= fy, f"{w}: spatial Y factors multiply to {py}, beyond the fan-out of {fy} to {inner}")
        for d in nest.dim_names:
            prod = math.prod(lm.t(d) * lm.s(d) for lm in self.levels)
            _check(prod == nest.bounds[d], f"mapping factors of {d} multiply to {prod}, the problem's {d} is "
                                           f"{nest.bounds[d]}")
        for ds in nest.data_spaces:
            _check(self.keeps(hier, 0, ds.name), f"mapping level {hier.levels[0].name}: the outermost level is the "
                                                 f"backing store and must keep {ds.name}")
        for i, lv in enumerate(hier.levels):
            if lv.capacity_words is None:
                continue
            kept = [ds.name for ds in nest.data_spaces if self.keeps(hier, i, ds.name)]
            words = sum(self.tile_words(nest, i, s) for s in kept)
            _check(words <= lv.capacity_words,
                   f"mapping level {lv.name}: tiles of {', '.join(kept)} take {words} words, beyond its "
                   f"capacity of {lv.capacity_words}")


def prime_factors(n: int) -> list[int]:
    """The prime factors of ``n`` with multiplicity, ascending: the units a perfect factorisation
    of a dim over loops is built from (12 -> [2, 2, 3])."""
    out, p = [], 2
    while n > 1 and p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


_LEVEL_KEYS = ("temporal", "permutation", "spatial_x", "spatial_y", "keep", "bypass")


def mapping_from_dict(doc: Any) -> Mapping:
    """The mapping of ``Mapping.to_dict``'s JSON; ``MappingError`` (one line) when it is not one."""
    _check(isinstance(doc, list) and doc, f"a mapping must be a non-empty list of levels, got {str(doc)[:60]!r}")
    levels = []
    for i, lv in enumerate(doc):
        _check(isinstance(lv, dict), f"mapping level {i} must be an object, got {str(lv)[:60]!r}")
        extra = sorted(set(lv) - set(_LEVEL_KEYS))
        _check(not extra, f"mapping level {i}: unknown field(s) {', '.join(extra)}")
        for key in ("permutation", "bypass"):
            _check(isinstance(lv.get(key, []), list) and all(isinstance(x, str) for x in lv.get(key, [])),
                   f"mapping level {i}: {key} must be a list of names")
        keep = lv.get("keep")
        _check(keep is None or (isinstance(keep, list) and all(isinstance(x, str) for x in keep)),
               f"mapping level {i}: keep must be null or a list of names")
        levels.append(LevelMapping(temporal=lv.get("temporal", []), permutation=tuple(lv.get("permutation", [])),
                                   spatial_x=lv.get("spatial_x", []), spatial_y=lv.get("spatial_y", []),
                                   keep=None if keep is None else frozenset(keep),
                                   bypass=frozenset(lv.get("bypass", []))))
    return Mapping(tuple(levels))


def mapping_from_loops(levels: Iterable[TMapping[str, Any]]) -> Mapping:
    """A mapping from plain dicts (outermost level first): keys ``temporal``, ``permutation``,
    ``spatial_x``, ``spatial_y``, ``keep``, ``bypass`` as ``LevelMapping`` has them."""
    return Mapping(tuple(LevelMapping(**dict(lm)) for lm in levels))
