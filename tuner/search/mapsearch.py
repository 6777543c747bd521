"""Search of a multi-level mapspace: evolution with the batched cost model as fitness, then a
local search around the best.

The measurer here is ``sim``'s closed-form data-movement model evaluated over a whole population
at once (about 0.1 ms per mapping, batched), so every candidate is measured rather than
predicted: a learned model cannot rank a candidate faster or better than the model it would
learn from (``tuner.search.policy`` decides the same way: when measuring is cheap, it never
trains). An expensive external measurer re-measures only the best few (``tuner.search.map_measure``).

Metrics (``METRICS``) rank (cycles, energy) lexicographically, as Timeloop's mapper does with its
list of ``optimization_metrics``: ``delay`` = cycles then energy, ``energy`` = energy then
cycles, ``edp`` = cycles x energy then cycles.

The search is deterministic for a seed and an evaluation budget; a time limit (``time_limit_s``)
stops it earlier on a slow machine, and is the only source of run-to-run difference.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from sim.cost.engines.batch import MappingArrays

from sim.mapping.policy import METRICS, rank_keys
from sim.mapping.mapspace import MapCrossover, MapMutation, MapMutationMix, Mapspace, MapUniformCrossover, neighbours
from .evolution import Breeding, Loop, evolve, plus_tournament

class MapSearchError(ValueError):
    pass


@dataclass(frozen=True)
class Costs:
    """Per mapping: cycles and energy (pJ); ``inf`` marks a mapping the evaluator rejects."""
    cycles: np.ndarray
    energy_pj: np.ndarray


Evaluator = Callable[[MappingArrays], Costs]


def metric_keys(metric: str, c: Costs) -> tuple[np.ndarray, np.ndarray]:
    """(primary, secondary) per mapping, lower is better (``sim.mapping.policy.rank_keys``)."""
    try:
        return rank_keys(metric, c.cycles, c.energy_pj)
    except ValueError as e:
        raise MapSearchError(str(e)) from None


def _rank(metric: str, c: Costs) -> np.ndarray:
    """Rank of each mapping (0 = best), ties on both keys sharing the order of appearance."""
    p, s = metric_keys(metric, c)
    order = np.lexsort((s, p))
    r = np.empty(len(order), dtype=np.int64)
    r[order] = np.arange(len(order))
    return r


@dataclass(frozen=True)
class MapSearchConfig:
    evaluations: int = 60_000     # evaluation budget (the search is deterministic within it)
    time_limit_s: float | None = None
    population: int = 1024
    elite_frac: float = 0.25
    crossover_prob: float = 0.25
    restart_after: int = 12       # generations without improvement before fresh blood
    local_search: bool = True
    keep_top: int = 0             # the result also holds this many best rows (to re-measure them)
    seed: int = 0
    mutation: MapMutation = field(default_factory=MapMutationMix)
    crossover: MapCrossover = field(default_factory=MapUniformCrossover)

    def __post_init__(self):
        if self.evaluations < 1 or self.population < 2:
            raise MapSearchError("mapping search needs evaluations >= 1 and population >= 2")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise MapSearchError(f"time limit must be > 0 seconds, got {self.time_limit_s!r}")


@dataclass(frozen=True)
class MapSearchResult:
    genes: np.ndarray             # the best row
    cycles: float
    energy_pj: float
    evaluations: int
    seconds: float
    generations: int
    history: tuple[tuple[int, float], ...]   # (evaluations, best primary key) at each improvement
    top: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))  # best rows, best first

    @property
    def edp(self) -> float:
        return self.cycles * self.energy_pj


class _Archive:
    """Every evaluated mapping by key: nothing is evaluated twice."""

    def __init__(self, space: Mapspace, evaluate: Evaluator, metric: str, keep_top: int = 0):
        self.space, self.evaluate, self.metric, self.keep_top = space, evaluate, metric, keep_top
        self.seen: dict[bytes, tuple[float, float]] = {}
        self.n = 0
        self.top = (np.zeros((0, space.n_genes), dtype=np.int64), Costs(np.zeros(0), np.zeros(0)))
        self.best: tuple[np.ndarray, float, float] | None = None
        self.history: list[tuple[int, float]] = []

    def fresh(self, genes: np.ndarray, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The rows not evaluated before, each mapping once, at most ``limit``, with their keys."""
        keys = self.space.keys(genes)
        _, first = np.unique(keys, return_index=True)
        pick = [i for i in np.sort(first) if keys[i].tobytes() not in self.seen][:limit]
        return genes[pick], keys[pick]

    def run(self, genes: np.ndarray, keys: np.ndarray) -> Costs:
        c = self.evaluate(self.space.arrays(genes))
        cyc = np.asarray(c.cycles, dtype=float)
        en = np.asarray(c.energy_pj, dtype=float)
        for k, a, b in zip(keys, cyc, en):
            self.seen[k.tobytes()] = (a, b)
        self.n += len(genes)
        if self.keep_top and len(genes):
            g = np.concatenate([self.top[0], genes])
            c = Costs(np.concatenate([self.top[1].cycles, cyc]), np.concatenate([self.top[1].energy_pj, en]))
            fin = np.isfinite(c.cycles) & np.isfinite(c.energy_pj)
            order = np.argsort(_rank(self.metric, c))
            order = order[fin[order]][:self.keep_top]
            self.top = (g[order], Costs(c.cycles[order], c.energy_pj[order]))
        if len(genes):
            i = int(np.argmin(_rank(self.metric, Costs(cyc, en))))
            if np.isfinite(cyc[i]) and np.isfinite(en[i]):
                if self.best is None or _better(self.metric, (cyc[i], en[i]), self.best[1:]):
                    self.best = (genes[i].copy(), float(cyc[i]), float(en[i]))
                    self.history.append((self.n, float(metric_keys(self.metric, Costs(cyc[i:i + 1], en[i:i + 1]))[0][0])))
        return Costs(cyc, en)


def _better(metric: str, a: tuple[float, float], b: tuple[float, float]) -> bool:
    pa, sa = metric_keys(metric, Costs(np.array([a[0]]), np.array([a[1]])))
    pb, sb = metric_keys(metric, Costs(np.array([b[0]]), np.array([b[1]])))
    return (pa[0], sa[0]) < (pb[0], sb[0])


def search(space: Mapspace, evaluate: Evaluator, metric: str = "edp", config: MapSearchConfig = MapSearchConfig(),
           seeds: np.ndarray | None = None,
           progress: Callable[[int, float | None], None] | None = None) -> MapSearchResult:
    """Evolve a population of legal mappings (tournament selection on rank, mutation and
    crossover, elitism, restarts from fresh samples when stuck), then descend from the best by
    trying every single change (a prime to each other slot, each swap of two loops, each keep
    flip) until none improves. ``seeds``: gene rows put in the first population (e.g. a given
    mapping). ``progress(evaluations, best primary key)`` is called after every batch."""
    metric_keys(metric, Costs(np.ones(1), np.ones(1)))   # validates the metric
    cfg = config
    rng = np.random.default_rng(cfg.seed)
    t0 = time.perf_counter()
    arch = _Archive(space, evaluate, metric, cfg.keep_top)

    def out_of_time() -> bool:
        return cfg.time_limit_s is not None and time.perf_counter() - t0 > cfg.time_limit_s

    def budget() -> int:
        if progress is not None:
            progress(arch.n, arch.history[-1][1] if arch.history else None)
        return cfg.evaluations - arch.n

    pop = space.sample(cfg.population, rng)
    if seeds is not None and len(seeds):
        pop = np.concatenate([np.atleast_2d(seeds), pop])
    pop, keys = arch.fresh(pop, max(budget(), 1))
    cost = arch.run(pop, keys)
    ls_share = 0.15 if cfg.local_search else 0.0
    # the shared loop (tuner.search.evolution) with measurement as fitness, (mu + lambda)
    # survival, and what only this search has: an archive (a mapping is measured once), a budget
    # and a clock, and fresh blood after ``restart_after`` generations without improvement
    state = {"stale": 0, "empty": 0, "last_best": arch.best, "stop": False, "keys": None}

    def keep_going(_gens: int) -> bool:
        return not state["stop"] and budget() > ls_share * cfg.evaluations and not out_of_time()

    def n_children(_pop: np.ndarray) -> int:
        return min(cfg.population, max(budget() - int(ls_share * cfg.evaluations), 1))

    def prepare(kids: np.ndarray) -> np.ndarray:
        if state["stale"] >= cfg.restart_after:
            kids[: len(kids) // 2] = space.sample(len(kids) // 2, rng)
            state["stale"] = 0
        kids, state["keys"] = arch.fresh(kids)
        if len(kids) == 0:
            # every child was seen before: the space is (nearly) exhausted around the population
            state["stale"] += 1
            state["empty"] += 1
            state["stop"] = state["empty"] > 3 * cfg.restart_after
        else:
            state["empty"] = 0
        return kids

    def on_generation(_pop: np.ndarray, _cost: Costs) -> None:
        state["stale"] = 0 if arch.best is not state["last_best"] else state["stale"] + 1
        state["last_best"] = arch.best

    loop = Loop(rank=lambda c: _rank(metric, c), fitness_of=lambda kids: arch.run(kids, state["keys"]),
                concat=lambda a, b: Costs(np.concatenate([a.cycles, b.cycles]), np.concatenate([a.energy_pj, b.energy_pj])),
                take=lambda c, idx: Costs(c.cycles[idx], c.energy_pj[idx]), n_children=n_children,
                keep_going=keep_going, prepare=prepare, on_generation=on_generation,
                survive=plus_tournament(cfg.population, max(1, int(cfg.elite_frac * cfg.population))))
    pop, cost, gens = evolve(space, pop, cost, loop, Breeding(cfg.mutation, cfg.crossover, cfg.crossover_prob), rng)
    if cfg.local_search and arch.best is not None:
        _descend(space, arch, budget, out_of_time)
    if arch.best is None:
        raise MapSearchError("the cost model rejected every mapping it was given")
    g, cyc, en = arch.best
    return MapSearchResult(g, cyc, en, arch.n, time.perf_counter() - t0, gens, tuple(arch.history), arch.top[0])


def evaluate_all(space: Mapspace, evaluate: Evaluator, metric: str, rows: np.ndarray,
                 keep_top: int = 0) -> MapSearchResult:
    """The best of a given finite set of rows, every one evaluated (no evolution): for a
    hardware whose mapping space is a small family, e.g. an Eyeriss chip's row-stationary
    mappings."""
    metric_keys(metric, Costs(np.ones(1), np.ones(1)))   # validates the metric
    t0 = time.perf_counter()
    arch = _Archive(space, evaluate, metric, keep_top)
    genes, keys = arch.fresh(np.atleast_2d(rows))
    arch.run(genes, keys)
    if arch.best is None:
        raise MapSearchError("the cost model rejected every mapping it was given")
    g, cyc, en = arch.best
    return MapSearchResult(g, cyc, en, arch.n, time.perf_counter() - t0, 0, tuple(arch.history), arch.top[0])


def _descend(space: Mapspace, arch: _Archive, budget, out_of_time) -> None:
    """First the best row's neighbours, then the neighbours of the best of those, until no
    neighbour improves, the budget is spent or the time is up."""
    while budget() > 0 and not out_of_time():
        before = arch.best
        nb, keys = arch.fresh(neighbours(space, before[0]), budget())
        if len(nb) == 0:
            break
        arch.run(nb, keys)
        if arch.best is before:
            break


__all__ = ["METRICS", "Costs", "Evaluator", "MapSearchConfig", "MapSearchResult", "MapSearchError", "evaluate_all",
           "search",
           "metric_keys"]
