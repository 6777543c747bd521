"""A fast heuristic search for a good mapping of one loop nest on a storage hierarchy.

``best_mapping(hierarchy, nest, metric)`` is the function boundary the whole-network costing
uses (``sim.multilevel``): it returns the best ``Mapping`` it found and a ``SearchStats``. The
full multi-level mapper (issue 13) can replace it behind the same signature.

Candidates are legal by construction (perfect factorisations, fan-outs within the mesh, every
level's tiles within its capacity), so no evaluation is wasted on an illegal mapping:

1. **Spatial**: at every level that fans out, the prime factors of the dims (in a random order,
   dims that reuse no operand first half the time) are packed onto the X and then the Y fan-out
   while the product stays within it.
2. **Temporal, inside out**: the prime factors left are offered, in a random order, to the
   innermost level first and then outwards; a level takes a factor when every level's tiles
   still fit (a factor at an inner level grows the tiles of every level above it). What no level
   takes stays at the outermost (unbounded) level.
3. **Order**: each level's loops in a random permutation, or the one that keeps the output
   stationary (reduction dims innermost), or the one that keeps the weights stationary.

A round of random candidates is followed by rounds of mutations of the best few (move one prime
factor between two levels, or reorder one level); all candidates of a round are evaluated at
once (``sim.movement_batch`` when it can, else one by one). Same inputs and seed, same mapping.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .hierarchy import Hierarchy
from .mapping import LevelMapping, Mapping
from .mapping import prime_factors as _primes
from .nest import Nest

METRICS = ("delay", "energy", "edp")


class SearchError(ValueError):
    """No legal mapping: one line naming the problem."""


@dataclass(frozen=True)
class SearchStats:
    evaluations: int
    seconds: float
    metric: str
    cycles: float
    energy_pj: float


@dataclass(frozen=True)
class SearchConfig:
    """``random``: candidates of the first round; ``rounds`` x ``mutants``: mutation rounds of the
    ``elite`` best so far. For ``delay`` only the ``keep`` fraction of each round with the fewest
    temporal iterations (the cycles of a mapping no bandwidth slows down; counted without the
    model) is evaluated: the model is the expensive part."""
    random: int = 128
    rounds: int = 4
    mutants: int = 48
    elite: int = 6
    keep: float = 0.5
    seed: int = 0
    # Rounds added (up to this many) while the best cycles stay above the MAC bound by more than
    # ``slack``: an easy layer stops at ``rounds``, a hard one (bandwidth-bound) searches on.
    extra_rounds: int = 4
    slack: float = 0.02
    fresh: float = 0.25  # share of each mutation round that is new random candidates (diversity)


# ---------------------------------------------------------------------------- genome
# A candidate as plain arrays: per level and dim, the temporal and the X / Y spatial factor, and
# per level a permutation (dim indices, outermost first). Tiles are computed from these directly.
@dataclass
class _Genome:
    t: np.ndarray      # (levels, dims) temporal factors
    sx: np.ndarray     # (levels, dims)
    sy: np.ndarray     # (levels, dims)
    perm: list[tuple[int, ...]]

    def copy(self) -> "_Genome":
        return _Genome(self.t.copy(), self.sx.copy(), self.sy.copy(), list(self.perm))

    def key(self) -> tuple:
        return (self.t.tobytes(), self.sx.tobytes(), self.sy.tobytes(), tuple(self.perm))


class _Problem:
    """The nest and hierarchy as arrays: what the candidate generator checks against."""

    def __init__(self, hier: Hierarchy, nest: Nest):
        self.hier, self.nest = hier, nest
        self.dims = nest.dim_names
        self.bounds = np.array([nest.bounds[d] for d in self.dims], dtype=np.int64)
        self.n_levels = len(hier.levels)
        self.fanout = [hier.fanout(i) for i in range(self.n_levels)]
        out = nest.output
        self.reduction = [i for i, d in enumerate(self.dims) if d not in out.dims]
        w = next((ds for ds in nest.data_spaces if ds.name == "Weights"), None)
        self.weight_free = [i for i, d in enumerate(self.dims) if w is not None and d not in w.dims]
        # Per bounded level, the projections of the data spaces it may keep as (dim index,
        # coefficient) terms per rank: the capacity check runs on plain ints (it is the hot loop).
        index = {d: j for j, d in enumerate(self.dims)}
        self.caps = [lv.capacity_words for lv in hier.levels]
        self.kept = [[tuple(tuple((index[d], c) for d, c in rank) for rank in ds.projection)
                      for ds in nest.data_spaces if lv.may_keep(ds.name)] for lv in hier.levels]

    def fits(self, g: _Genome, upto: int | None = None) -> bool:
        """Every bounded level (outer ones down to ``upto``) holds its tiles."""
        span = [1] * len(self.dims)
        f = (g.t * g.sx * g.sy).tolist()
        for i in range(self.n_levels - 1, -1, -1):
            row = f[i]
            span = [a * b for a, b in zip(span, row)]
            cap = self.caps[i]
            if cap is None or (upto is not None and i > upto):
                continue
            if _words(self.kept[i], span) > cap:
                return False
        return True


def _pack(left: np.ndarray, fan: int, rng: np.random.Generator) -> dict[int, int]:
    """Prime factors of the dims left (in a random order) whose product is the largest that fits
    ``fan``: a subset-product search over at most ``fan`` reachable products, so a 12-wide axis
    gets 4 x 3 from two dims when no dim alone has 12. Returns {dim index: factor}."""
    pool = [(d, f) for d in range(len(left)) for f in _primes(int(left[d]))]
    order = rng.permutation(len(pool))
    reach: dict[int, tuple[int, ...]] = {1: ()}
    for k in order:
        f = pool[k][1]
        for prod, used in list(reach.items()):
            q = prod * f
            if q <= fan and q not in reach:
                reach[q] = used + (int(k),)
    best = max(reach) if rng.random() < 0.85 else int(rng.choice(list(reach)))
    out: dict[int, int] = {}
    for k in reach[best]:
        d, f = pool[k]
        out[d] = out.get(d, 1) * f
    return out


def _spatial(p: _Problem, g: _Genome, rng: np.random.Generator, left: np.ndarray) -> None:
    for i, (fx, fy) in enumerate(p.fanout):
        for axis, fan in ((g.sx, fx), (g.sy, fy)):
            if fan <= 1:
                continue
            for d, f in _pack(left, fan, rng).items():
                axis[i, d] *= f
                left[d] //= f
            if not p.fits(g):  # a fan-out whose tiles overflow a level: undo it
                for d in range(len(p.dims)):
                    left[d] *= axis[i, d]
                    axis[i, d] = 1


def _order(p: _Problem, g: _Genome, i: int, rng: np.random.Generator) -> tuple[int, ...]:
    r = rng.random()
    dims = list(rng.permutation(len(p.dims)))
    if r < 0.25:    # output stationary: reductions innermost
        dims.sort(key=lambda d: d in p.reduction)
    elif r < 0.5:   # weights stationary: dims that do not index the weights innermost
        dims.sort(key=lambda d: d in p.weight_free)
    return tuple(int(d) for d in dims)


def _words(kept: list, span: list[int]) -> int:
    """Words of the tiles of ``kept`` (projections as (dim index, coefficient) terms per rank)
    over an iteration box spanning ``span``."""
    words = 0
    for ranks in kept:
        w = 1
        for rank in ranks:
            w *= sum(c * (span[j] - 1) for j, c in rank) + 1
        words += w
    return words


def _random_genome(p: _Problem, rng: np.random.Generator) -> _Genome:
    L, D = p.n_levels, len(p.dims)
    g = _Genome(np.ones((L, D), np.int64), np.ones((L, D), np.int64), np.ones((L, D), np.int64), [])
    left = p.bounds.copy()
    _spatial(p, g, rng, left)
    pool = [(d, f) for d in range(D) for f in _primes(int(left[d]))]
    rng.shuffle(pool)
    # Inside out: a level takes what fits; the outermost (unbounded) takes the rest. While level
    # i fills, the levels inside it are final and those outside hold only spatial factors, so the
    # span of level j <= i is (levels > i) x (level i's factors) x (spatial of levels j..i-1):
    # plain-int products kept here instead of recomputing every level per factor (the hot loop).
    t = [[1] * D for _ in range(L)]
    sp = (g.sx * g.sy).tolist()
    below = [1] * D
    for i in range(L - 1, 0, -1):
        outer = []   # (level j, its capacity, spatial product of levels j..i-1) for bounded j <= i
        acc = [1] * D
        for j in range(i, -1, -1):
            if j < i:
                acc = [a * b for a, b in zip(acc, sp[j])]
            if p.caps[j] is not None and p.kept[j]:
                outer.append((p.kept[j], p.caps[j], acc))
        rest = []
        for d, f in pool:
            t[i][d] *= f
            lvl = [b * x * s for b, x, s in zip(below, t[i], sp[i])]
            if all(_words(kept, [a * b for a, b in zip(lvl, acc)]) <= cap for kept, cap, acc in outer):
                continue
            t[i][d] //= f
            rest.append((d, f))
        pool = rest
        below = [b * x * s for b, x, s in zip(below, t[i], sp[i])]
    for d, f in pool:
        t[0][d] *= f
    g.t = np.array(t, dtype=np.int64)
    g.perm = [_order(p, g, i, rng) for i in range(L)]
    return g


def _mutate(p: _Problem, g: _Genome, rng: np.random.Generator) -> _Genome:
    h = g.copy()
    L, D = p.n_levels, len(p.dims)
    for _ in range(8):
        kind = rng.random()
        if kind < 0.3:
            i = int(rng.integers(L))
            h.perm[i] = _order(p, h, i, rng)
            return h
        src, dst = (int(x) for x in rng.integers(L, size=2))
        d = int(rng.integers(D))
        if src == dst or h.t[src, d] == 1:
            continue
        f = int(rng.choice(_primes(int(h.t[src, d]))))
        h.t[src, d] //= f
        h.t[dst, d] *= f
        if p.fits(h):
            return h
        h.t[dst, d] //= f
        h.t[src, d] *= f
    return h


def _mapping(p: _Problem, g: _Genome) -> Mapping:
    lms = []
    for i in range(p.n_levels):
        def fs(row):
            return tuple((p.dims[d], int(row[d])) for d in range(len(p.dims)) if row[d] > 1)
        perm = tuple(p.dims[d] for d in g.perm[i] if g.t[i, d] > 1)
        lms.append(LevelMapping(temporal=fs(g.t[i]), permutation=perm, spatial_x=fs(g.sx[i]), spatial_y=fs(g.sy[i])))
    return Mapping(tuple(lms))


def _evaluate_batch(p: _Problem, gs: list[_Genome]) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, energy_pj) of every genome through ``sim.movement_batch`` (the genome's arrays
    are its ``MappingArrays``; every level keeps what it may)."""
    from .movement_batch import MappingArrays, evaluate_batch
    keep = np.array([[ds.name in (lv.keeps if lv.keeps is not None else (ds.name,)) and not lv.spatial_only
                      for ds in p.nest.data_spaces] for lv in p.hier.levels], dtype=bool)
    m = MappingArrays(np.stack([g.t for g in gs]), np.stack([g.sx for g in gs]), np.stack([g.sy for g in gs]),
                      np.array([g.perm for g in gs], dtype=np.int64), np.broadcast_to(keep, (len(gs), *keep.shape)).copy())
    r = evaluate_batch(p.hier, p.nest, m)
    return np.asarray(r.cycles, dtype=np.float64), np.asarray(r.energy_pj, dtype=np.float64)


def _score(metric: str, cycles: np.ndarray, energy: np.ndarray) -> np.ndarray:
    """Lower is better; ``delay`` breaks ties by energy (cycles are often equal between mappings
    that use the same MACs)."""
    if metric == "energy":
        return energy + 1e-9 * cycles
    if metric == "edp":
        return cycles * energy
    return cycles + energy / (1.0 + energy.max(initial=0.0)) * 0.5  # < 1 cycle: only breaks ties


Evaluator = Callable[[Hierarchy, Nest, Sequence[Mapping]], "tuple[np.ndarray, np.ndarray]"]


def best_mapping(hier: Hierarchy, nest: Nest, metric: str = "delay", config: SearchConfig = SearchConfig(),
                 evaluate: Evaluator | None = None) -> tuple[Mapping, SearchStats]:
    """The best mapping found of ``nest`` on ``hier`` for ``metric`` (delay, energy or edp);
    ``evaluate(hier, nest, mappings) -> (cycles, energy_pj)`` arrays (default: the movement
    model over the whole round at once, ``sim.movement_batch``)."""
    if metric not in METRICS:
        raise SearchError(f"mapping metric must be one of {', '.join(METRICS)}, got {metric!r}")
    start = time.perf_counter()
    p = _Problem(hier, nest)
    for i, cap in enumerate(p.caps):   # the smallest tiles (every loop at the outermost level) must fit
        words = _words(p.kept[i], [1] * len(p.dims))
        if cap is not None and words > cap:
            raise SearchError(f"no mapping of {nest.name} fits {hier.levels[i].name}: its smallest tiles "
                              f"take {words} words, beyond its capacity of {cap}")
    if evaluate is None:
        run = functools.partial(_evaluate_batch, p)
    else:
        def run(gs: list[_Genome]) -> tuple[np.ndarray, np.ndarray]:
            return evaluate(hier, nest, [_mapping(p, g) for g in gs])
    rng = np.random.default_rng([config.seed, len(p.dims), int(p.bounds.prod() % (2**31))])
    seen: set[tuple] = set()   # candidates made before (evaluated, or dropped by the prefilter)
    pool: list[_Genome] = []

    def add(gs: list[_Genome]) -> list[_Genome]:
        new = []
        for g in gs:
            k = g.key()
            if k not in seen:
                seen.add(k)
                new.append(g)
        if metric == "delay" and len(new) > 4:
            iters = [int(np.prod(g.t, dtype=np.float64)) for g in new]
            order = np.argsort(iters, kind="stable")[:max(4, int(len(new) * config.keep))]
            new = [new[i] for i in sorted(order)]
        return new

    scores: list[float] = []
    cyc: list[float] = []
    en: list[float] = []
    batch = add([_random_genome(p, rng) for _ in range(config.random)])
    bound = math.ceil(nest.macs / hier.arithmetic.instances)
    rounds = config.rounds
    for r in range(config.rounds + config.extra_rounds + 1):
        if batch:
            c, e = run(batch)
            c, e = np.asarray(c, dtype=np.float64), np.asarray(e, dtype=np.float64)
            pool.extend(batch)
            cyc.extend(c.tolist())
            en.extend(e.tolist())
            scores = _score(metric, np.array(cyc), np.array(en)).tolist()
        if r == rounds and r < config.rounds + config.extra_rounds and min(cyc) > bound * (1 + config.slack):
            rounds += 1
        if r >= rounds:
            break
        elite = np.argsort(scores, kind="stable")[:config.elite]
        n_fresh = int(config.mutants * config.fresh)
        batch = add([_mutate(p, pool[int(elite[j % len(elite)])], rng) for j in range(config.mutants - n_fresh)]
                    + [_random_genome(p, rng) for _ in range(n_fresh)])
    if not pool:
        raise SearchError(f"no mapping of {nest.name} fits {', '.join(hier.names)}")
    b = int(np.argmin(scores))
    return _mapping(p, pool[b]), SearchStats(len(pool), time.perf_counter() - start, metric, cyc[b], en[b])
