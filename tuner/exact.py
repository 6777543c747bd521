"""Exact optima of the partition problem, to verify the search.

- ``exhaustive``: every subset of the offloadable units, each costed by the full evaluator
  (``Problem.cost``). 2^n evaluations: for graphs with at most ``MAX_EXHAUSTIVE`` offloadable units.
- ``optimum``: the same answer for larger graphs when the objective is latency or energy. A
  function never spans two clusters (connected groups of offloadable units), so the cost is a sum of
  one term per cluster (``Problem.cluster_cost``) and each cluster is enumerated alone: sum of 2^|c|
  evaluations, for graphs whose every cluster has at most ``MAX_CLUSTER`` units. The sum is checked
  against the full evaluator on the combined set (``certified``); it differs only when functions of
  different clusters would close a cycle, which the full evaluator resolves by a different merge.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from .costing import Cost, objective_value
from .partition_problem import PartitionSearchError, Problem

MAX_EXHAUSTIVE = 16
MAX_CLUSTER = 16


@dataclass(frozen=True)
class ExactResult:
    device: frozenset[int]
    cost: Cost
    score: float
    evaluations: int
    certified: bool


def _subsets(items: tuple[int, ...]):
    for r in range(len(items) + 1):
        for c in combinations(items, r):
            yield frozenset(c)


def exhaustive(problem: Problem, objective: str = "latency", limit: int = MAX_EXHAUSTIVE) -> ExactResult:
    off = tuple(i for i in range(len(problem.units)) if problem.offloadable[i])
    if len(off) > limit:
        raise PartitionSearchError(f"exhaustive search needs at most {limit} offloadable units, "
                                   f"the graph has {len(off)}")
    best, best_s, n = frozenset(), None, 0
    for s in _subsets(off):
        v = problem.score(s, objective)
        n += 1
        if best_s is None or v < best_s:
            best, best_s = s, v
    return ExactResult(best, problem.cost(best), best_s, n, True)


def optimum(problem: Problem, objective: str = "latency", limit: int = MAX_CLUSTER) -> ExactResult:
    if objective == "edp":
        return exhaustive(problem, objective)  # EDP is a product: clusters do not separate
    objective_value(objective, 0.0, 0.0)
    big = [len(c) for c in problem.clusters if len(c) > limit]
    if big:
        raise PartitionSearchError(f"exact optimum needs clusters of at most {limit} offloadable units, "
                                   f"the graph has one of {max(big)}")
    chosen: list[frozenset[int]] = []
    total = problem.fixed_cost()
    n = 0
    for k, members in enumerate(problem.clusters):
        best, best_s, best_c = frozenset(), None, None
        for s in _subsets(members):
            c = problem.cluster_cost(k, s)
            v = objective_value(objective, c.latency_s, c.energy_j)
            n += 1
            if best_s is None or v < best_s:
                best, best_s, best_c = s, v, c
        chosen.append(best)
        total = total + best_c
    device = frozenset().union(*chosen) if chosen else frozenset()
    cost = problem.cost(device)
    want = objective_value(objective, total.latency_s, total.energy_j)
    got = objective_value(objective, cost.latency_s, cost.energy_j)
    return ExactResult(device, cost, got, n, abs(got - want) <= 1e-9 * max(abs(want), 1e-30))


__all__ = ["ExactResult", "exhaustive", "optimum", "MAX_EXHAUSTIVE", "MAX_CLUSTER"]
