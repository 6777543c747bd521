"""Search strategies over one task's schedule space, through ask/tell.

A strategy proposes schedules with ``ask(n, model)`` (never one it has been told about, never the
same one twice in one answer) and learns results through ``tell(trials)``, where a ``Trial`` is a
frozen (schedule, cycles) record. It never measures anything itself. Each strategy owns a
``numpy.random.Generator`` made from its seed, so the same seed and the same told results give the
same proposals.

- ``EvolutionarySearch`` (Ansor-like, the default): an initial population of uniform samples plus
  the best measured schedules; a few generations of mutation and crossover with a scorer as fitness
  (``tuner.search.scoring``: the analytical prior, or the learned model's prediction); then the
  best-scored unmeasured candidates, with an epsilon share of uniform random ones (exploration).
  ``ask(n, model)`` takes a ``CostModel`` (untrained: the prior), a scorer, or ``None`` (the prior).
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
from .scoring import Scorer, scorer_for
from .evolution import Breeding, Loop, breed, elitist, evolve, tournament
from .space import Crossover, Mutation, MutationMix, ScheduleSpace, UniformCrossover
from sim import default_schedule


@dataclass(frozen=True)
class Trial:
    schedule: Schedule
    cycles: float


class SearchStrategy(Protocol):
    space: ScheduleSpace

    def ask(self, n: int, model: "CostModel | Scorer | None" = None) -> list[Schedule]: ...

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
    continue_generations: int = 1  # generations added per ask while the scorer is unchanged
    mutation: Mutation = field(default_factory=MutationMix)
    crossover: Crossover = field(default_factory=UniformCrossover)


_tournament = tournament   # the names this module gave them before the loop moved to ``evolution``


class EvolutionarySearch(_Strategy):
    """Evolution with a scorer as the fitness. While the scorer stays the same from one ``ask`` to
    the next (the analytical prior, or a model not retrained since), scores cannot change, so the
    search keeps every candidate it has scored (the pool) and continues the last population for
    ``continue_generations`` instead of starting over; a new scorer starts a fresh evolution."""

    def __init__(self, space: ScheduleSpace, seed: int = 0, config: EvolutionConfig = EvolutionConfig()):
        super().__init__(space, seed)
        self.config = config
        self._default: np.ndarray | None = None
        self._scorer: Scorer | None = None
        self._pool: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None   # codes, genes, scores
        self._pop: tuple[np.ndarray, np.ndarray] | None = None                # last population, scores

    def _heuristic(self) -> np.ndarray:
        """The simulator's default schedule, when it lies in the space (a strong starting point)."""
        if self._default is None:
            try:
                g = self.space.genes_of(default_schedule(self.space.workload, self.space.hw))
            except ValueError:
                g = None
            self._default = np.zeros((0, 7), dtype=np.int64) if g is None else g[None, :]
        return self._default

    def _evolve(self, pop: np.ndarray, scores: np.ndarray, generations: int, scorer: Scorer):
        """Run ``generations`` of the shared loop (``tuner.search.evolution``: elitist survival,
        the scorer as fitness) from a scored population; every population seen, and the last."""
        cfg, sp = self.config, self.space
        seen = [(pop, scores)]
        n_elite = lambda n: max(1, int(cfg.elite_frac * n))  # noqa: E731
        loop = Loop(rank=lambda f: f, fitness_of=lambda kids: scorer(sp, kids), concat=lambda a, b: np.concatenate([a, b]),
                    take=lambda f, idx: f[idx], n_children=lambda p: cfg.population - n_elite(len(p)),
                    keep_going=lambda g: g < generations, survive=elitist(n_elite),
                    on_generation=lambda p, f: seen.append((p, f)))
        pop, scores, _ = evolve(sp, pop, scores, loop, Breeding(cfg.mutation, cfg.crossover, cfg.crossover_prob),
                                self.rng)
        return seen, (pop, scores)

    def ask(self, n: int, model: "CostModel | Scorer | None" = None) -> list[Schedule]:
        if n <= 0:
            return []
        cfg, sp, rng = self.config, self.space, self.rng
        scorer = scorer_for(model)
        if self._pool is not None and scorer == self._scorer:
            seen, last = self._evolve(*self._pop, cfg.continue_generations, scorer)
            seen = [(self._pool[1], self._pool[2])] + seen[1:]
        else:
            best = np.concatenate([self._best_genes(cfg.seed_best), self._heuristic()])
            pop = np.concatenate([sp.sample(max(cfg.population - len(best), 1), rng), best])
            seen, last = self._evolve(pop, scorer(sp, pop), cfg.generations, scorer)
        genes = np.concatenate([g for g, _ in seen])
        sc = np.concatenate([s for _, s in seen])
        codes = sp.encode(genes)
        order = np.lexsort((codes, sc))  # best predicted first; ties broken by code, not by chance
        # The pool keeps each candidate once, in rank order (what the next ask starts from).
        _, first = np.unique(codes[order], return_index=True)
        keep = order[np.sort(first)]
        self._scorer, self._pool, self._pop = scorer, (codes[keep], genes[keep], sc[keep]), last
        n_eps = int(round(cfg.epsilon * n)) if n > 1 else int(rng.random() < cfg.epsilon)
        taken: set[int] = set()
        chosen = self._fresh(genes[keep], n - n_eps, taken)
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
            children = breed(sp, parents, pscores, 4 * want, cfg.mutation, cfg.crossover, cfg.crossover_prob, rng)
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
