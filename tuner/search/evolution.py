"""The one evolutionary loop of the search, shared by kernel schedules and multi-level mappings.

A generation: rank the population (lower is fitter), ``breed`` children (two binary tournaments
pick each child's parents, every child is the first parent mutated, a ``crossover_prob`` share is
the crossover of both instead), let the caller ``prepare`` them (drop what it has seen, inject
fresh samples), give them their fitness, and choose the next population with a survival rule:

- ``elitist``: the best ``n_elite`` parents and every child (the schedule search, whose fitness
  is a scorer's prediction: ``tuner.search.strategies.EvolutionarySearch``);
- ``plus_tournament``: (mu + lambda) over parents and children, the best ``n_elite`` first, the
  rest by tournament so the population keeps some diversity (the mapping search, whose fitness
  is the batched data-movement model: ``tuner.search.mapsearch``).

The space is any object the mutation and crossover understand (``ScheduleSpace``, ``Mapspace``);
a population is a 2-D array of gene rows. Fitness is the caller's value per population (scores,
or cycles and energy); ``rank`` turns it into one number per row. All random draws come from the
one generator the caller passes, in a fixed order, so a seed gives one result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

import numpy as np

F = TypeVar("F")   # a population's fitness, as the caller keeps it


def tournament(scores: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` winners (indices) of binary tournaments on ``scores`` (lower wins, ties to the first)."""
    a = rng.integers(0, len(scores), n)
    b = rng.integers(0, len(scores), n)
    return np.where(scores[a] <= scores[b], a, b)


@dataclass(frozen=True)
class Breeding:
    """How children are made: the mutation and crossover operators of the space and the share of
    children that are crossovers."""
    mutation: Any
    crossover: Any
    crossover_prob: float


def breed(space, pop: np.ndarray, scores: np.ndarray, n: int, mutation, crossover, crossover_prob: float,
          rng: np.random.Generator) -> np.ndarray:
    """``n`` children of ``pop`` (gene rows; lower ``scores`` are fitter): see the module docstring."""
    pa = pop[tournament(scores, n, rng)]
    pb = pop[tournament(scores, n, rng)]
    kids = mutation(space, pa, rng)
    cross = rng.random(n) < crossover_prob
    if cross.any():
        kids[cross] = crossover(space, pa[cross], pb[cross], rng)
    return kids


@dataclass(frozen=True)
class Loop(Generic[F]):
    """What the caller decides in the loop: ``rank(fitness)`` (one number per row, lower
    fitter), ``fitness_of(kids)``, ``concat(a, b)`` and ``take(fitness, idx)`` on fitness values,
    ``n_children(pop)``, ``keep_going(generation)`` (asked before each generation), ``prepare(kids)``
    (None: as bred; may return no rows, which skips the generation) and ``survive`` (``elitist`` or
    ``plus_tournament``, below)."""
    rank: Callable[[F], np.ndarray]
    fitness_of: Callable[[np.ndarray], F]
    concat: Callable[[F, F], F]
    take: Callable[[F, np.ndarray], F]
    n_children: Callable[[np.ndarray], int]
    keep_going: Callable[[int], bool]
    survive: Callable[["Loop", np.ndarray, F, np.ndarray, F, np.random.Generator], tuple[np.ndarray, F]]
    prepare: Callable[[np.ndarray], np.ndarray] | None = None
    on_generation: Callable[[np.ndarray, F], None] | None = None


def elitist(n_elite: Callable[[int], int]):
    """Survival: the best ``n_elite(len(parents))`` parents (stable order), then every child."""
    def survive(loop: Loop, pop, fit, kids, kfit, rng):
        keep = np.argsort(loop.rank(fit), kind="stable")[:n_elite(len(pop))]
        return np.concatenate([pop[keep], kids]), loop.concat(loop.take(fit, keep), kfit)
    return survive


def plus_tournament(population: int, n_elite: int):
    """Survival (mu + lambda): of parents and children, the ``n_elite`` best, then up to
    ``population - n_elite`` tournament winners among the others (each row once)."""
    def survive(loop: Loop, pop, fit, kids, kfit, rng):
        allg = np.concatenate([pop, kids])
        allf = loop.concat(fit, kfit)
        r = loop.rank(allf)
        order = np.argsort(r)
        keep = order[:n_elite]
        rest = order[n_elite:]
        if len(rest) and population > n_elite:
            pick = rest[tournament(r[rest], min(population - n_elite, len(rest)), rng)]
            keep = np.concatenate([keep, np.unique(pick)])
        return allg[keep], loop.take(allf, keep)
    return survive


def evolve(space, pop: np.ndarray, fit: F, loop: Loop[F], breeding: Breeding,
           rng: np.random.Generator) -> tuple[np.ndarray, F, int]:
    """Run generations from a population with its fitness while ``loop.keep_going``; the last
    population, its fitness and the number of generations run."""
    gens = 0
    while loop.keep_going(gens):
        gens += 1
        kids = breed(space, pop, loop.rank(fit), loop.n_children(pop), breeding.mutation, breeding.crossover,
                     breeding.crossover_prob, rng)
        if loop.prepare is not None:
            kids = loop.prepare(kids)
            if len(kids) == 0:
                continue
        pop, fit = loop.survive(loop, pop, fit, kids, loop.fitness_of(kids), rng)
        if loop.on_generation is not None:
            loop.on_generation(pop, fit)
    return pop, fit, gens


__all__ = ["Breeding", "Loop", "breed", "elitist", "evolve", "plus_tournament", "tournament"]
