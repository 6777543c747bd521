"""The default mapping of a loop nest on a storage hierarchy: a short, deterministic search of the
one space of mappings (``sim.mapping.mapspace``) that ``sim`` uses when nobody gives it a mapping.

    default_mapping(hierarchy, nest, metric="delay") -> (Mapping, PolicyStats)

Whole-network costing asks for one mapping per MAC layer (``sim.cost.multilevel``), so this must cost
milliseconds, not the seconds a real mapper spends (``tuner.search.mapsearch`` searches the same space
with evolution when the user tunes):

1. **Samples**: ``samples`` legal rows, a quarter drawn by ``Mapspace.sample`` (perfect
   factorisations, fan-outs and capacities respected, constraints built in) and the rest *packed*
   (``packed_rows``: primes taken in a random order per row fill every fan-out, outermost level
   first, while the row stays legal, then every level's temporal loops, innermost first, as a
   hand mapper fills an array and then its buffers; every level keeps what it may), evaluated at
   once by the batched data-movement model (``sim.cost.engines.batch``). Random samples alone rarely
   fill a 14 x 12 array: a full array needs several primes in the right spatial slots at once.
2. **Descent**: from each of the ``starts`` best rows, every single change
   (``sim.mapping.mapspace.neighbours``: one prime to another slot, two loops of a level swapped, one keep
   bit flipped) is evaluated at once; the best neighbour is taken while it improves, up to
   ``steps`` times; the best end wins. The descents run one after the other (a later one skips
   what an earlier one evaluated), but their steps are evaluated side by side ahead of them, one
   batch per step for all of them (``_lockstep``): a batch costs little more than one row.

A hierarchy whose ``family`` is ``row_stationary`` (a chip that runs only its compiler's RS
mappings, e.g. the ``eyeriss-chip`` preset) has no samples and no descent: its RS candidates
(``sim.mapping.row_stationary``), a few dozen, are all walked tile by tile (``sim.cost.walk``)
and the best walk wins; a nest RS does not cover (not a convolution) keeps the whole space.

For ``delay`` a row whose temporal iterations (the cycles of its MACs alone, a lower bound of the
model's cycles) exceed the best cycles so far cannot win and is not evaluated. Metrics rank
(cycles, energy) lexicographically (``rank_keys``). Same inputs and seed, same mapping.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..cost.engines import batch as mb
from ..hw.hierarchy import Hierarchy
from .mapping import Mapping
from .mapspace import Mapspace, MapspaceError, neighbours
from .mapspace_sim import build_space, from_mapping, to_mapping
from .row_stationary import row_stationary_candidates
from ..workload.nest import Nest

METRICS = ("delay", "energy", "edp")


class MappingPolicyError(ValueError):
    """No legal mapping, or an unknown metric: one line naming the problem."""


@dataclass(frozen=True)
class PolicyStats:
    evaluations: int
    seconds: float
    metric: str
    cycles: float
    energy_pj: float


@dataclass(frozen=True)
class PolicyConfig:
    """``samples`` legal rows drawn first (the ``packed`` share of them packed); then at most
    ``steps`` descent steps."""
    samples: int = 192
    steps: int = 8
    seed: int = 0
    packed: float = 0.75
    starts: int = 3

    def __post_init__(self):
        if self.samples < 1 or self.steps < 0 or not 0 <= self.packed <= 1 or self.starts < 1:
            raise MappingPolicyError("mapping policy needs samples >= 1, steps >= 0, 0 <= packed <= 1, starts >= 1")


def rank_keys(metric: str, cycles, energy_pj) -> tuple[np.ndarray, np.ndarray]:
    """(primary, secondary) key per mapping, lower is better: delay = (cycles, energy), energy =
    (energy, cycles), edp = (cycles x energy, cycles)."""
    cyc, en = np.asarray(cycles, dtype=float), np.asarray(energy_pj, dtype=float)
    if metric == "delay":
        return cyc, en
    if metric == "energy":
        return en, cyc
    if metric == "edp":
        return cyc * en, cyc
    raise MappingPolicyError(f"mapping metric must be one of {', '.join(METRICS)}, got {metric!r}")


def evaluate_arrays(hier: Hierarchy, nest: Nest, a: mb.MappingArrays) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, energy_pj) of a batch of mappings by the batched movement model; a row ``sim``'s
    own check refuses costs ``inf`` (it never wins). ``tuner.search.mapper`` ranks with it too."""
    cyc = np.full(len(a), np.inf)
    en = np.full(len(a), np.inf)
    ok = np.flatnonzero(mb.check_batch(hier, nest, a) == mb.OK)
    if len(ok):
        ev = mb.evaluate_batch(hier, nest, a.take(ok))
        cyc[ok], en[ok] = ev.cycles, ev.energy_pj
    return cyc, en


def evaluate_rows(hier: Hierarchy, nest: Nest, space: Mapspace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``evaluate_arrays`` of gene rows of ``space``."""
    return evaluate_arrays(hier, nest, space.arrays(rows))


def _pack(primes: list[tuple[int, int]], fan: int, rng: np.random.Generator) -> list[int]:
    """Gene indices of a subset of ``primes`` ((gene, prime) pairs, taken in a random order)
    whose product is the largest within ``fan`` (now and then a random reachable one, for
    variety): a subset-product search over at most ``fan`` reachable products, so a 12-wide axis
    gets 4 x 3 from two dims when no dim alone has 12."""
    # product -> (the product it was reached from, the gene that multiplied it): the genes of a
    # product follow from its chain, so no tuple of genes is built per product
    order = rng.permutation(len(primes)).tolist()
    usable = {f for _, f in primes if f <= fan}     # a prime above the fan-out never adds a product
    reach: dict[int, tuple[int, int]] = {1: (0, -1)}
    spent: dict[int, int] = {}     # prime value -> the size of reach when that value last added nothing
    stuck, size = 0, 1             # values that added nothing since reach last grew; len(reach)
    for k in order:
        g, f = primes[k]
        if f > fan or spent.get(f) == size:
            continue               # reach has not grown since a prime of this value added nothing
        lim = fan // f
        # one prime maps distinct products to distinct products: the new ones of this step, in
        # the order they were reached, are added at once (as one insertion at a time adds them)
        new = [prod for prod in reach if prod <= lim and prod * f not in reach]
        if new:
            for prod in new:
                reach[prod * f] = (prod, g)
            stuck, size = 0, size + len(new)
        else:
            spent[f] = size
            stuck += 1
            if stuck == len(usable):
                break              # every value is spent: the primes left would all be skipped
    best = max(reach) if rng.random() < 0.85 else int(rng.choice(list(reach)))
    used = []
    while best != 1:
        best, g = reach[best]
        used.append(g)
    return used[::-1]


def _random_perms(space: Mapspace, n: int, rng: np.random.Generator) -> np.ndarray:
    """[n, L, D] loop orders, each level's a random order of the dims its constraint leaves free
    after the pinned ones. One draw of n x L x D doubles is the n draws of L x D a row at a time
    (the same numbers in the same order)."""
    perms = np.argsort(rng.random((n, space.n_levels, space.n_dims)), axis=2)
    for lv, fixed in enumerate(space.perm_fixed):
        if fixed:
            perms[:, lv] = [space._perm_fill(lv, o) for o in perms[:, lv]]
    return perms


def packed_rows(space: Mapspace, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` legal rows built greedily (see the module docstring). Fan-outs, outermost level
    first: per row the subset of the primes still outermost with the largest product within the
    fan-out (``_pack``), undone where the row would overflow a level. Then temporal loops,
    innermost level first, vectorised over rows: each row's primes in its own random order try
    the slot one by one and stay where the row remains legal (``Mapspace.valid``)."""
    P, S = space.allowed.shape
    L, D = space.n_levels, space.n_dims
    outer = S - 1 - np.argmax(space.allowed[:, ::-1], axis=1)        # every prime starts outermost
    slots = np.tile(outer, (n, 1))
    perms = _random_perms(space, n, rng)
    keep = np.broadcast_to(np.where(space.keep_forced >= 0, space.keep_forced, 1), (n, L, space.n_tensors))
    rows = np.arange(n)
    # Moves go only to allowed slots and perms and keep never change, so a row's structural
    # legality (``Mapspace.valid`` less capacity and fan-outs) is fixed: every prime starts at
    # its outermost allowed slot. Each trial then checks capacity and fan-outs of the rows it
    # changes only (the same answer as ``valid`` of every row, at a fraction of its passes).
    sound = space.valid(space.join(slots, perms, keep), limits=False)

    def fits(trial: np.ndarray, moved: np.ndarray) -> np.ndarray:
        ok = sound & moved
        at = np.flatnonzero(ok)
        if len(at):
            cap, fan = space.violations(space.join(trial[at], perms[at], keep[at]))
            ok[at] = ~cap.any(axis=1) & ~fan.any(axis=(1, 2))
        return ok

    for lv in range(L - 1, -1, -1):
        for k in (0, 1):
            s, fan = 3 * lv + k, int(space.fanout[lv, k])
            free = np.flatnonzero(space.allowed[:, s] & (outer != s))
            if fan <= 1 or not len(free):
                continue
            trial = slots.copy()
            pairs = list(zip(free.tolist(), space.prime_val[free].tolist()))
            still = (slots[:, free] == outer[free]).tolist()       # [n, free] primes still outermost
            for r in range(n):
                at_outer = [p for p, m in zip(pairs, still[r]) if m]
                trial[r, _pack(at_outer, fan, rng)] = s
            ok = fits(trial, (trial != slots).any(axis=1))
            slots[ok] = trial[ok]
    order = np.argsort(rng.random((n, P)), axis=1)
    # one prime moves per row and trial: its factors follow from the row's by one division and
    # one multiplication, so only capacities and fan-outs are computed again
    F = space.factors(space.join(slots, perms, keep))
    for lv in range(L):
        s = 3 * lv + 2
        if not space.allowed[:, s].any():
            continue
        for step in range(P):
            j = order[:, step]
            cand = space.allowed[j, s] & (slots[rows, j] == outer[j]) & (outer[j] != s)
            at = np.flatnonzero(cand & sound)
            if not len(at):
                continue
            ja = j[at]
            d, v, k = space.prime_dim[ja], space.prime_val[ja], np.arange(len(at))
            Ft = F[at]
            Ft[k, outer[ja], d] //= v
            Ft[k, s, d] *= v
            cap, fan = space.limits(Ft, keep[at])
            ok = ~cap.any(axis=1) & ~fan.any(axis=(1, 2))
            slots[at[ok], ja[ok]] = s
            F[at[ok]] = Ft[ok]
    out = space.join(slots, perms, keep)
    return out[space.valid(out)]


_Rows = tuple  # (gene rows [n, G], their factors [n, S, D], their keys as bytes): ``_rows``


def _rows(space: Mapspace, rows: np.ndarray) -> _Rows:
    """Rows with the factors and keys ``_Best`` needs, computed once (``neighbours`` of a row are
    offered both side by side and one descent at a time: ``_lockstep``)."""
    F = space.factors(rows)
    return rows, F, [k.tobytes() for k in space.keys(rows, F)]


class _Costs:
    """(cycles, energy) of every row evaluated in one search: ``at`` (key -> index) into ``cyc``
    and ``en``, which grow by one batch at a time."""

    def __init__(self):
        self.at: dict[bytes, int] = {}
        self.cyc = np.zeros(0)
        self.en = np.zeros(0)


class _Best:
    """The rows evaluated so far (by key, so nothing is evaluated twice) and the best of them.
    ``costs`` holds rows evaluated ahead (``_lockstep``): a row's cost
    does not depend on what it is evaluated with, so taking it from there changes nothing."""

    def __init__(self, hier: Hierarchy, nest: Nest, space: Mapspace, metric: str,
                 costs: "_Costs | None" = None):
        self.hier, self.nest, self.space, self.metric = hier, nest, space, metric
        self.seen: set[bytes] = set()
        self.costs = _Costs() if costs is None else costs
        self.n = 0
        self.row: np.ndarray | None = None
        self.cost = (np.inf, np.inf)
        self._last: tuple = (np.zeros((0, 0), dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64))

    def offer(self, rows: np.ndarray | "_Rows") -> bool:
        """Evaluate the rows not seen before; True when one of them is the new best."""
        rows, F, keys = self.select(rows)
        if not len(rows):
            return False
        self.evaluate_ahead([(rows, F, keys)])
        return self.take(rows, keys)

    def select(self, rows: np.ndarray | "_Rows") -> "_Rows":
        """The rows not seen before (now seen) and, for ``delay``, not beaten by the best's cycles
        before they are evaluated, with their factors and keys."""
        rows, F, keys = rows if isinstance(rows, tuple) else _rows(self.space, rows)
        seen, pick = self.seen, []
        for i, b in enumerate(keys):
            if b not in seen:          # a key twice in ``rows``: its first row only
                seen.add(b)
                pick.append(i)
        if len(pick) < len(keys):
            rows, F, keys = rows[pick], F[pick], [keys[i] for i in pick]
        if self.metric == "delay" and self.row is not None and len(rows):
            ok = F[:, 2::3, :].reshape(len(rows), -1).prod(axis=1).astype(float) <= self.cost[0]
            if not ok.all():
                rows, F, keys = rows[ok], F[ok], [b for b, o in zip(keys, ok) if o]
        return rows, F, keys

    def evaluate_ahead(self, parts: Sequence["_Rows"]) -> None:
        """Evaluate, in one batch, the rows of ``parts`` (``select``'s) not in ``costs`` yet."""
        rows, F = [], []
        at = self.costs.at
        for r, f, k in parts:
            idx = []
            for i, b in enumerate(k):
                if b not in at:
                    at[b] = len(at)                  # one evaluation per key
                    idx.append(i)
            if idx:
                rows.append(r[idx])
                F.append(f[idx])
        if rows:
            cyc, en = evaluate_arrays(self.hier, self.nest, self.space.arrays(np.concatenate(rows), np.concatenate(F)))
            self.costs.cyc = np.concatenate([self.costs.cyc, cyc])
            self.costs.en = np.concatenate([self.costs.en, en])

    def take(self, rows: np.ndarray, keys: list[bytes]) -> bool:
        """Count the evaluated ``rows`` and move to the best of them when it beats the best so far."""
        at = self.costs.at
        idx = np.fromiter((at[b] for b in keys), np.int64, len(keys))
        cyc, en = self.costs.cyc[idx], self.costs.en[idx]
        self.n += len(rows)
        p, s = rank_keys(self.metric, cyc, en)
        order = np.lexsort((s, p))
        order = order[np.isfinite(cyc[order]) & np.isfinite(en[order])]
        self._last = (rows, cyc, en, order)
        return bool(len(order)) and self.consider(rows[order[0]], (float(cyc[order[0]]), float(en[order[0]])))

    def last(self, k: int) -> list[tuple[np.ndarray, float, float]]:
        """The ``k`` best rows of the last offer, best first, with their (cycles, energy)."""
        rows, cyc, en, order = self._last
        return [(rows[i], float(cyc[i]), float(en[i])) for i in order[:k]]

    def descent(self, row: np.ndarray, cost: tuple[float, float], seen: set[bytes]) -> "_Best":
        """A descent from ``row`` that shares this search's evaluated costs and skips ``seen``."""
        d = _Best(self.hier, self.nest, self.space, self.metric, self.costs)
        d.seen, d.row, d.cost = seen, row, cost
        return d

    def consider(self, row: np.ndarray | None, cost: tuple[float, float]) -> bool:
        """Take ``row`` when it ranks before the best so far; True when taken."""
        if row is None:
            return False
        new = tuple(float(k[0]) for k in rank_keys(self.metric, [cost[0]], [cost[1]]))
        old = tuple(float(k[0]) for k in rank_keys(self.metric, [self.cost[0]], [self.cost[1]]))
        if self.row is None or new < old:
            self.row, self.cost = row.copy(), cost
            return True
        return False


def row_stationary_rows(space: Mapspace, hier: Hierarchy, nest: Nest) -> np.ndarray:
    """The gene rows of the legal row-stationary mappings (``sim.mapping.row_stationary``) that
    lie in ``space``: a convolution on a hierarchy with one fan-out level always has Eyeriss's
    own dataflow among its candidates, however few samples a search draws."""
    return _row_stationary_rows(hier, nest, space.spec).copy()


@functools.lru_cache(maxsize=512)   # pure in frozen values; the default policy and the tuner's mapper both ask
def _row_stationary_rows(hier: Hierarchy, nest: Nest, spec) -> np.ndarray:
    space = Mapspace.build(spec)
    rows = []
    for m in row_stationary_candidates(hier, nest):
        try:
            rows.append(from_mapping(space, hier, m))
        except MapspaceError:
            continue                    # outside the space's constraints
    if not rows:
        return np.zeros((0, space.n_genes), dtype=np.int64)
    rows = np.array(rows)
    return rows[space.valid(rows)]


def _walked_best(hier: Hierarchy, nest: Nest, space: Mapspace, metric: str, rows: np.ndarray,
                 start: float) -> tuple[Mapping, PolicyStats]:
    """The best of a hardware's whole (small) mapping family ranked by the tile-level walk, the
    cost `tune` and `run` report: a family of a few dozen rows is walked in full, no descent (a
    neighbour leaves the family). The statistics keep the closed form's cycles and energy, as the
    unrestricted policy reports them."""
    from ..cost.walk import walk        # here: the walk imports sim.mapping
    maps = [to_mapping(space, r) for r in rows]
    walked = [walk(hier, nest, m) for m in maps]
    p, s = rank_keys(metric, [w.cycles for w in walked], [w.energy_pj for w in walked])
    i = int(np.lexsort((s, p))[0])
    cyc, en = evaluate_rows(hier, nest, space, rows[i:i + 1])
    return maps[i], PolicyStats(len(rows), time.perf_counter() - start, metric, float(cyc[0]), float(en[0]))


def _lockstep(best: _Best, starts: Sequence[tuple[np.ndarray, float, float]], steps: int) -> dict[bytes, _Rows]:
    """The descents from ``starts`` run side by side, each step's new rows evaluated in one batch
    into ``best.costs``; returns the neighbours of every row it visited (by the row's bytes).
    Why: the descents run one after the other (a later one skips the rows an earlier one
    evaluated), so their paths are only known one at a time, yet they mostly take the same steps
    side by side. Evaluated ahead here, those steps cost one batch each instead of one per descent
    (a batch costs little more than a row); where a descent's path differs, its own offer
    evaluates what is missing. The answer is the same, as each row's cost is."""
    near: dict[bytes, _Rows] = {}
    if len(starts) < 2:
        return near
    seen = set(best.seen)
    walkers = [best.descent(row, (c, e), seen) for row, c, e in starts]
    for _ in range(steps):
        parts = []
        for w in walkers:
            key = w.row.tobytes()
            if key not in near:
                near[key] = _rows(best.space, neighbours(best.space, w.row))
            parts.append(w.select(near[key]))
        best.evaluate_ahead(parts)
        walkers = [w for w, (rows, _, keys) in zip(walkers, parts) if len(rows) and w.take(rows, keys)]
        if not walkers:
            break
    return near


def default_mapping(hier: Hierarchy, nest: Nest, metric: str = "delay",
                    config: PolicyConfig = PolicyConfig()) -> tuple[Mapping, PolicyStats]:
    """The default mapping of ``nest`` on ``hier`` for ``metric`` (delay, energy or edp) and the
    policy's statistics (see the module docstring)."""
    rank_keys(metric, [1.0], [1.0])          # validates the metric before any work
    start = time.perf_counter()
    try:
        space = build_space(hier, nest)
        rng = np.random.default_rng([config.seed, len(nest.dim_names), int(nest.macs % (2**31))])
        n_packed = int(round(config.samples * config.packed))
        rows = space.sample(config.samples - n_packed, rng) if n_packed < config.samples else None
        packed = packed_rows(space, n_packed, rng)
        rows = packed if rows is None else np.concatenate([packed, rows])
        rs = row_stationary_rows(space, hier, nest)
        only_rs = hier.family == "row_stationary" and len(rs) > 0
        if only_rs:
            rows = rs            # the hardware runs only its compiler's family: nothing else is a candidate
        elif len(rs):
            rows = np.concatenate([rows, rs])
    except MapspaceError as e:
        raise MappingPolicyError(f"no mapping of {nest.name} on {', '.join(hier.names)}: {e}") from None
    if only_rs:
        return _walked_best(hier, nest, space, metric, rows, start)
    best = _Best(hier, nest, space, metric)
    best.offer(rows)
    starts = best.last(config.starts)
    near = _lockstep(best, starts, config.steps)
    for row, c, e in starts:
        here = best.descent(row, (c, e), best.seen)       # a descent of its own from each start ...
        for _ in range(config.steps):
            nb = near.get(here.row.tobytes())
            if not here.offer(neighbours(space, here.row) if nb is None else nb):
                break
        best.n += here.n
        best.consider(here.row, here.cost)              # ... the best end wins
    if best.row is None:
        raise MappingPolicyError(f"no mapping of {nest.name} on {', '.join(hier.names)}: the model refused "
                                 f"every sampled mapping")
    return to_mapping(space, best.row), PolicyStats(best.n, time.perf_counter() - start, metric, *best.cost)


__all__ = ["METRICS", "MappingPolicyError", "PolicyConfig", "PolicyStats", "default_mapping", "evaluate_arrays",
           "evaluate_rows", "packed_rows", "rank_keys", "row_stationary_rows"]
