"""Search strategies over one task's schedule space, through ask/tell.

A strategy proposes schedules with ``ask(n, model)`` (never one it has been told about, never the
same one twice in one answer) and learns results through ``tell(trials)``, where a ``Trial`` is a
frozen (schedule, cycles) record. It never measures anything itself. Each strategy owns a
``numpy.random.Generator`` made from its seed, so the same seed and the same told results give the
same proposals.

- ``EvolutionarySearch`` (Ansor-like, the default): an initial population of uniform samples plus
  the best measured schedules; a few generations of mutation and crossover with the cost model's
  prediction as fitness; then the best-predicted unmeasured candidates, with an epsilon share of
  uniform random ones (exploration).
- ``RandomSearch``: uniform samples of the legal space.
- ``MeasuredEvolution``: a genetic algorithm whose fitness is measurement itself ("evolution without
  the model"; the benchmark's baseline).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from sim import Schedule

from .cost_model import CostModel
from .features import featurize
from .space import Crossover, Mutation, MutationMix, ScheduleSpace, UniformCrossover


@dataclass(frozen=True)
class Trial:
    schedule: Schedule
    cycles: float


class SearchStrategy(Protocol):
    space: ScheduleSpace

    def ask(self, n: int, model: CostModel | None = None) -> list[Schedule]: ...

    def tell(self, trials: Sequence[Trial]) -> None: ...


class _Strategy:
    """What every strategy keeps: the space, its generator and what it has been told."""

    def __init__(self, space: ScheduleSpace, seed: int = 0):
        self.space = space
        self.rng = np.random.default_rng(seed)
        self._measured: set[int] = set()
        self._genes: list[np.ndarray] = []
        self._cycles: list[float] = []

    def tell(self, trials: Sequence[Trial]) -> None:
        for t in trials:
            g = self.space.genes_of(t.schedule)
            if g is None:
                continue  # a record from outside this space (other tile candidates): nothing to learn here
            code = int(self.space.encode(g)[0])
            if code in self._measured:
                continue
            self._measured.add(code)
            self._genes.append(g)
            self._cycles.append(float(t.cycles))

    @property
    def n_told(self) -> int:
        return len(self._cycles)

    def _remaining(self) -> int:
        return self.space.size - len(self._measured)

    def _fresh(self, genes: np.ndarray, limit: int, taken: set[int]) -> list[np.ndarray]:
        """Up to ``limit`` rows of ``genes`` (in order) neither measured nor already ``taken``."""
        out = []
        for row, code in zip(genes, self.space.encode(genes)):
            c = int(code)
            if len(out) >= limit:
                break
            if c in self._measured or c in taken:
                continue
            taken.add(c)
            out.append(row)
        return out

    def _random_fresh(self, n: int, taken: set[int]) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for _ in range(8):
            want = n - len(out)
            if want <= 0 or self._remaining() - len(taken) <= 0:
                break
            out += self._fresh(self.space.sample(4 * want + 16, self.rng), want, taken)
        if len(out) < n and self.space.size - len(self._measured) - len(taken) > 0 and self.space.size <= 1 << 20:
            # A nearly exhausted small space: take what is left in enumeration order.
            for chunk in self.space.enumerate():
                out += self._fresh(chunk, n - len(out), taken)
                if len(out) >= n:
                    break
        return out

    def _best_genes(self, k: int) -> np.ndarray:
        if not self._cycles:
            return np.zeros((0, 7), dtype=np.int64)
        order = np.argsort(np.asarray(self._cycles), kind="stable")[:k]
        return np.stack([self._genes[i] for i in order])


class RandomSearch(_Strategy):
    def ask(self, n: int, model: CostModel | None = None) -> list[Schedule]:
        chosen = self._random_fresh(n, set()) if n > 0 else []
        return self.space.schedules(np.array(chosen)) if chosen else []


@dataclass(frozen=True)
class EvolutionConfig:
    # The analytical simulator's cost per call hardly depends on the batch size, so a large
    # population over few generations is cheaper than the reverse for the same search.
    population: int = 768
    generations: int = 3
    seed_best: int = 16          # best measured schedules put in the initial population
    crossover_prob: float = 0.2  # the rest of the offspring are mutants
    elite_frac: float = 0.1
    epsilon: float = 0.1         # share of each batch drawn uniformly (exploration)
    mutation: Mutation = field(default_factory=MutationMix)
    crossover: Crossover = field(default_factory=UniformCrossover)


def _tournament(scores: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    a = rng.integers(0, len(scores), n)
    b = rng.integers(0, len(scores), n)
    return np.where(scores[a] <= scores[b], a, b)


class EvolutionarySearch(_Strategy):
    def __init__(self, space: ScheduleSpace, seed: int = 0, config: EvolutionConfig = EvolutionConfig()):
        super().__init__(space, seed)
        self.config = config
        self._default: np.ndarray | None = None

    def _heuristic(self) -> np.ndarray:
        """The simulator's default schedule, when it lies in the space (a strong starting point)."""
        if self._default is None:
            try:
                g = self.space.genes_of(Schedule.default(self.space.workload, self.space.hw))
            except ValueError:
                g = None
            self._default = np.zeros((0, 7), dtype=np.int64) if g is None else g[None, :]
        return self._default

    def _score(self, genes: np.ndarray, model: CostModel | None) -> np.ndarray:
        X, prior = featurize(self.space, genes)
        return model.predict(X, prior) if model is not None else prior

    def ask(self, n: int, model: CostModel | None = None) -> list[Schedule]:
        if n <= 0:
            return []
        cfg, sp, rng = self.config, self.space, self.rng
        best = np.concatenate([self._best_genes(cfg.seed_best), self._heuristic()])
        pop = np.concatenate([sp.sample(max(cfg.population - len(best), 1), rng), best])
        seen_codes, seen_genes, seen_scores = [], [], []
        scores = self._score(pop, model)
        for gen in range(cfg.generations + 1):
            seen_codes.append(sp.encode(pop))
            seen_genes.append(pop)
            seen_scores.append(scores)
            if gen == cfg.generations:
                break
            n_elite = max(1, int(cfg.elite_frac * len(pop)))
            elite = pop[np.argsort(scores, kind="stable")[:n_elite]]
            n_child = cfg.population - n_elite
            pa = pop[_tournament(scores, n_child, rng)]
            pb = pop[_tournament(scores, n_child, rng)]
            cross = rng.random(n_child) < cfg.crossover_prob
            children = cfg.mutation(sp, pa, rng)
            if cross.any():
                children[cross] = cfg.crossover(sp, pa[cross], pb[cross], rng)
            pop = np.concatenate([elite, children])
            scores = self._score(pop, model)
        codes = np.concatenate(seen_codes)
        genes = np.concatenate(seen_genes)
        sc = np.concatenate(seen_scores)
        order = np.lexsort((codes, sc))  # best predicted first; ties broken by code, not by chance
        n_eps = int(round(cfg.epsilon * n)) if n > 1 else int(rng.random() < cfg.epsilon)
        taken: set[int] = set()
        chosen = self._fresh(genes[order], n - n_eps, taken)
        chosen += self._random_fresh(n - len(chosen), taken)
        return sp.schedules(np.array(chosen)) if chosen else []


@dataclass(frozen=True)
class MeasuredEvolutionConfig:
    initial: int = 16            # uniform samples before evolving
    parents: int = 32            # the best measured schedules breed
    crossover_prob: float = 0.2
    mutation: Mutation = field(default_factory=MutationMix)
    crossover: Crossover = field(default_factory=UniformCrossover)


class MeasuredEvolution(_Strategy):
    """Evolution with measurement as the fitness (no cost model)."""

    def __init__(self, space: ScheduleSpace, seed: int = 0, config: MeasuredEvolutionConfig = MeasuredEvolutionConfig()):
        super().__init__(space, seed)
        self.config = config

    def ask(self, n: int, model: CostModel | None = None) -> list[Schedule]:
        if n <= 0:
            return []
        cfg, sp, rng = self.config, self.space, self.rng
        taken: set[int] = set()
        if self.n_told < cfg.initial:
            chosen = self._random_fresh(n, taken)
            return sp.schedules(np.array(chosen)) if chosen else []
        parents = self._best_genes(cfg.parents)
        pscores = np.arange(len(parents), dtype=float)  # already sorted: rank is the fitness
        chosen: list[np.ndarray] = []
        for _ in range(8):
            want = n - len(chosen)
            if want <= 0:
                break
            m = 4 * want
            pa = parents[_tournament(pscores, m, rng)]
            pb = parents[_tournament(pscores, m, rng)]
            children = cfg.mutation(sp, pa, rng)
            cross = rng.random(m) < cfg.crossover_prob
            if cross.any():
                children[cross] = cfg.crossover(sp, pa[cross], pb[cross], rng)
            chosen += self._fresh(children, want, taken)
        chosen += self._random_fresh(n - len(chosen), taken)
        return sp.schedules(np.array(chosen)) if chosen else []


STRATEGIES = {"evolution": EvolutionarySearch, "random": RandomSearch, "measured-evolution": MeasuredEvolution}


def make_strategy(name: str, space: ScheduleSpace, seed: int = 0) -> SearchStrategy:
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"search strategy must be one of {', '.join(STRATEGIES)}, got {name!r}") from None
    return cls(space, seed)
