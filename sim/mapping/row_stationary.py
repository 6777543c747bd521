"""Row-stationary (RS) mappings of a convolution, as Eyeriss runs them, in the mapping space.

Eyeriss (Chen et al., ISCA 2016; JSSC 52(1) 2017, Sec. IV and Table III) maps a conv layer with
seven parameters: a *PE set* of R filter rows (along the array's rows) by ``e`` ofmap rows (along
its columns); ``t`` sets side by side for different filters and ``r`` for different channels;
each PE runs a 1-D convolution of one filter row over an ifmap row, for ``p`` filters and ``q``
channels at once (its filter spad holds p x q x S weights, its ifmap spad a q x S window, its psum
spad p partial sums); the global buffer holds the psums of ``m`` ofmap channels for ``n``
ifmaps, and the channels run pass by pass through it.

``row_stationary(hier, nest, rs)`` writes such a mapping on a hierarchy with one fan-out level
(the buffer feeding the PEs; it may have levels above it and per-PE levels below it):

- per-PE levels: the innermost holds the loops S, C (q), M (p); the others hold none;
- the fan-out level: spatial Y = R x M (t) x C (r), X = P (e); temporal, outermost first,
  M (m / (p t)), N (n), Q (the whole ofmap row width);
- the backing store and any level between: what is left, outermost first G, M, N, P, C, so the
  channel passes are innermost and the psums stay in the buffer across them.

Factors are perfect (each the largest divisor of what is left of its dim at or below the asked
value), so a parameter that does not divide its dim (AlexNet CONV1's e = 7 of 55 rows) becomes
the nearest divisor below it. ``None`` when the nest is not a convolution or the hierarchy has
not that shape, or when R exceeds the rows. ``row_stationary_candidates`` lists the legal RS
mappings over a small grid of the parameters: the default mapping policy and the tuner's mapper
start from them, so the mapper's space holds the chip's own dataflow.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from ..hw.hierarchy import Hierarchy
from ..workload.nest import Nest
from .mapping import LevelMapping, Mapping, prime_factors

CONV_DIMS = ("N", "C", "M", "R", "S", "P", "Q")


@dataclass(frozen=True)
class RowStationary:
    """Eyeriss's per-layer mapping parameters (JSSC 2017 Table III): ``m`` ofmap channels whose
    psums the buffer holds, ``n`` ifmaps per pass, ``e`` ofmap rows per PE set (its width), ``p``
    filters and ``q`` channels per PE, ``r`` PE sets for different channels, ``t`` for different
    filters."""
    m: int
    n: int
    e: int
    p: int
    q: int
    r: int
    t: int

    def __post_init__(self):
        for k in ("m", "n", "e", "p", "q", "r", "t"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"row-stationary parameter {k} must be an integer >= 1, got {v!r}")


def _fanout_level(hier: Hierarchy) -> int | None:
    """The one level that fans out (to per-PE levels or the MACs), else None."""
    fan = [i for i in range(len(hier.levels)) if hier.fanout(i) != (1, 1)]
    return fan[0] if len(fan) == 1 else None


@functools.lru_cache(maxsize=4096)
def _all_divisors(x: int) -> tuple[int, ...]:
    """Every divisor of ``x``, ascending, from its prime factors (a dim may be large)."""
    out = {1}
    for p in prime_factors(x):
        out |= {d * p for d in out}
    return tuple(sorted(out))


def _divisors(x: int, at_most: int) -> list[int]:
    """The divisors of ``x`` not above ``at_most``, ascending."""
    return [d for d in _all_divisors(x) if d <= at_most]


def _divisor(size: int, at_most: int) -> int:
    """The largest divisor of ``size`` not above ``at_most`` (at least 1)."""
    return max(_divisors(size, max(1, at_most)))


def row_stationary(hier: Hierarchy, nest: Nest, rs: RowStationary) -> Mapping | None:
    """The RS mapping of ``nest`` on ``hier`` for ``rs`` (module docstring), or None."""
    bounds = dict(nest.bounds)
    if not all(d in bounds for d in CONV_DIMS) or set(bounds) - set(CONV_DIMS) - {"G"}:
        return None
    g = _fanout_level(hier)
    if g is None or g == len(hier.levels) - 1:     # RS needs per-PE levels below the fan-out
        return None
    fx, fy = hier.fanout(g)
    if bounds["R"] > fy:
        return None
    left = dict(bounds)

    def take(d: str, want: int) -> int:
        f = _divisor(left[d], want)
        left[d] //= f
        return f

    R = take("R", bounds["R"])
    t = take("M", max(1, min(rs.t, fy // R)))
    r = take("C", max(1, min(rs.r, fy // (R * t))))
    e = take("P", min(rs.e, fx))
    S, q, p = take("S", bounds["S"]), take("C", rs.q), take("M", rs.p)
    mm = take("M", max(1, rs.m // (p * t)))
    n = take("N", rs.n)
    Q = take("Q", bounds["Q"])
    levels = []
    n_levels = len(hier.levels)
    for i in range(n_levels):
        if i == n_levels - 1:
            lm = LevelMapping(temporal=_units((("M", p), ("C", q), ("S", S))), permutation=("M", "C", "S"))
        elif i == g:
            lm = LevelMapping(temporal=_units((("M", mm), ("N", n), ("Q", Q))), permutation=("M", "N", "Q"),
                              spatial_x=_units((("P", e),)), spatial_y=_units((("R", R), ("M", t), ("C", r))))
        elif i == 0:
            rest = tuple((d, left[d]) for d in ("G", "M", "N", "P", "C") if left.get(d, 1) > 1)
            lm = LevelMapping(temporal=rest, permutation=tuple(d for d, _ in rest))
        else:
            lm = LevelMapping()
        levels.append(lm)
    return Mapping(tuple(levels))


def _units(factors: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """The factors without the units."""
    return tuple((d, f) for d, f in factors if f > 1)


def row_stationary_candidates(hier: Hierarchy, nest: Nest, limit: int = 128) -> list[Mapping]:
    """Legal RS mappings of ``nest`` on ``hier``, the fullest PEs first: for every p, the largest
    q whose per-PE tiles fit (more reuse per spad fill); t = 1 or as many filter sets as the rows
    hold, r filling the rows left; the widest PE set e; n = 1 or all; the largest m the buffer
    holds. At most ``limit`` of them; [] when RS does not apply."""
    return list(_candidates(hier, nest, limit))


def _fits(hier: Hierarchy, nest: Nest, m: Mapping) -> bool:
    """Whether every level holds its tiles (the capacity rule of ``Mapping.check``; the rest of
    that check holds by construction)."""
    for i, lv in enumerate(hier.levels):
        if lv.capacity_words is None:
            continue
        words = sum(m.tile_words(nest, i, ds.name) for ds in nest.data_spaces if m.keeps(hier, i, ds.name))
        if words > lv.capacity_words:
            return False
    return True


@functools.lru_cache(maxsize=512)   # pure in frozen values; the default policy and the tuner both ask
def _candidates(hier: Hierarchy, nest: Nest, limit: int) -> tuple[Mapping, ...]:
    bounds = dict(nest.bounds)
    if not all(d in bounds for d in CONV_DIMS):
        return ()
    g = _fanout_level(hier)
    if g is None or g == len(hier.levels) - 1:
        return ()
    fx, fy = hier.fanout(g)
    R, M, C, N, P = (bounds[d] for d in ("R", "M", "C", "N", "P"))
    if R > fy:
        return ()
    e = _divisor(P, fx)

    def rs(mm, n, p, q, r, t):
        return row_stationary(hier, nest, RowStationary(m=mm * p * t, n=n, e=e, p=p, q=q, r=r, t=t))

    def largest(options: list[int], ok) -> int | None:
        """The largest option passing ``ok``, which holds for every option below one that does."""
        if not options or not ok(options[0]):
            return None
        lo, hi = 0, len(options) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if ok(options[mid]) else (lo, mid - 1)
        return options[lo]

    out: list[Mapping] = []
    # the per-PE tiles grow with p and q, the buffer's with m: bisect for the largest that fit, and
    # try the 12 largest p that fit at all (a dim may have hundreds of divisors)
    ps = _divisors(M, M)
    p_max = largest(ps, lambda p: _fits(hier, nest, rs(1, 1, p, 1, 1, 1)))
    for p in ([] if p_max is None else [x for x in ps if x <= p_max][-12:][::-1]):
        q = largest(_divisors(C, C), lambda q: _fits(hier, nest, rs(1, 1, p, q, 1, 1)))
        if q is None:
            continue
        for t, r in sorted({(t, _divisor(C // q, fy // (R * t))) for t in (1, _divisor(M // p, fy // R))}):
            for n in sorted({1, N}):
                mm = largest(_divisors(M // (p * t), M), lambda mm: _fits(hier, nest, rs(mm, n, p, q, r, t)))
                if mm is None:
                    continue
                out.append(rs(mm, n, p, q, r, t))
                if len(out) >= limit:
                    return tuple(out)
    return tuple(out)


__all__ = ["RowStationary", "row_stationary", "row_stationary_candidates"]
