"""Partition search: which units to offload (and so which functions form) to minimise latency,
energy or EDP, from the kernels' simulated costs, the host model, the link and launch overheads.

The search is a deterministic local search over the offload set (``Problem``): it starts from
greedy BYOC (every supported unit offloaded, maximal merge), from all-on-host and from the set of
units worth offloading on their own, and applies the best improving move until none is left. Moves
flip one unit, or one unit together with its offloadable neighbours (so a chain can enter or leave
the device in one step), or a whole greedy region. Functions form from the set by merging connected
device units while no cycle forms (``Problem.groups``), so every plan it returns is acyclic.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .costing import Cost, objective_value
from .partition_problem import Problem

_EPS = 1e-12


@dataclass(frozen=True)
class SearchResult:
    device: frozenset[int]
    cost: Cost
    score: float
    evaluations: int
    start: str            # which starting point led to it


def greedy_set(problem: Problem) -> frozenset[int]:
    """What plain BYOC offloads: every unit in a region the pipeline keeps (prune policy applied)."""
    return problem.greedy_set


def standalone_set(problem: Problem, objective: str) -> frozenset[int]:
    """Units that gain when offloaded alone (one call each)."""
    out = set()
    for i, u in enumerate(problem.units):
        if problem.offloadable[i] and problem.score({i}, objective) < problem.score(set(), objective) - _EPS:
            out.add(i)
    return frozenset(out)


def _neighbours(problem: Problem, i: int) -> set[int]:
    out = set(problem._preds[i])
    out.update(problem._succs[i])
    return {j for j in out if problem.offloadable[j]}


class _ClusterScorer:
    """Scores the choices of one cluster with the rest of the plan fixed (memoised)."""

    def __init__(self, problem: Problem, k: int, rest: Cost, objective: str):
        self.problem, self.k, self.rest, self.objective = problem, k, rest, objective
        self.memo: dict[frozenset[int], float] = {}

    def __call__(self, subset: frozenset[int]) -> float:
        s = self.memo.get(subset)
        if s is None:
            c = self.rest + self.problem.cluster_cost(self.k, subset)
            s = objective_value(self.objective, c.latency_s, c.energy_j)
            self.memo[subset] = s
        return s


def _frontier(problem: Problem, members: tuple[int, ...], current: frozenset[int]) -> tuple[int, ...]:
    """Units next to a unit in the other place (or to the host side: graph inputs and outputs,
    units no target runs): the only flips that can pay in a large cluster, since flipping a unit
    deep inside a function only splits it."""
    out = []
    for i in members:
        here = i in current
        nb = (*problem._preds[i], *problem._succs[i])
        if problem._boundary[i] or any((j in current) != here for j in nb):
            out.append(i)
    return tuple(out)


def _moves(problem: Problem, members: tuple[int, ...], current: frozenset[int],
           regions: list[frozenset[int]], frontier: bool = False) -> Iterable[frozenset[int]]:
    if frontier:
        members = _frontier(problem, members, current)
    for i in members:
        yield current ^ {i}
    for i in members:
        nb = _neighbours(problem, i)
        if nb:
            yield (current - nb - {i}) if i in current else (current | nb | {i})
    for r in regions:
        yield (current - r) if r <= current else (current | r)


def _descend(problem: Problem, members: tuple[int, ...], start: frozenset[int], score: _ClusterScorer,
             regions: list[frozenset[int]], max_rounds: int) -> frozenset[int]:
    """Best-improvement descent; ties keep the earlier move, so it is deterministic."""
    cur, best = start, score(start)
    big = len(members) > BIG_CLUSTER
    for _ in range(max_rounds):
        move, move_score = None, best
        # A large cluster tries the frontier first and the full move set only when that is stuck.
        for frontier in ((True, False) if big else (False,)):
            for cand in _moves(problem, members, cur, regions, frontier):
                s = score(cand)
                if s < move_score - _EPS * abs(move_score):
                    move, move_score = cand, s
            if move is not None:
                break
        if move is None:
            break
        cur, best = move, move_score
    return cur


# Clusters with more units than this start only from the current choice and greedy BYOC (a full
# descent from all-on-host would take one round per unit).
BIG_CLUSTER = 32


def search(problem: Problem, objective: str = "latency", max_rounds: int = 200,
           max_passes: int = 8) -> SearchResult:
    """Coordinate descent over clusters, each cluster by local search from several starting
    points. A function never spans two clusters, so for latency and energy the clusters separate
    and one pass suffices. EDP (a product) couples them: it runs the descent from greedy BYOC, all
    on host, and the latency- and energy-optimal plans, and keeps the best."""
    objective_value(objective, 0.0, 0.0)  # validates the name
    greedy = greedy_set(problem)
    if objective != "edp":
        return _descent(problem, objective, greedy, max_rounds, 1)
    starts = [greedy, frozenset()]
    starts += [_descent(problem, o, greedy, max_rounds, 1).device for o in ("latency", "energy")]
    best, evals = None, 0
    for s in dict.fromkeys(starts):
        r = _descent(problem, objective, s, max_rounds, max_passes)
        evals += r.evaluations
        if best is None or r.score < best.score * (1 - 1e-12):
            best = r
    return SearchResult(best.device, best.cost, best.score, evals, best.start)


def _descent(problem: Problem, objective: str, start: frozenset[int], max_rounds: int,
             max_passes: int) -> SearchResult:
    greedy = greedy_set(problem)
    chosen = [frozenset(i for i in c if i in start) for c in problem.clusters]
    parts = [problem.cluster_cost(k, chosen[k]) for k in range(len(problem.clusters))]
    evals = 0
    greedy_regions = [frozenset(g) for g in problem.groups(greedy) if len(g) > 1]
    for _ in range(max_passes):
        changed = False
        for k, members in enumerate(problem.clusters):
            total = problem.fixed_cost()
            for j, c in enumerate(parts):
                if j != k:
                    total = total + c
            score = _ClusterScorer(problem, k, total, objective)
            regions = [r for r in greedy_regions if r <= set(members)]
            starts = [chosen[k], frozenset(i for i in members if i in greedy)]
            if len(members) <= BIG_CLUSTER:
                empty = score(frozenset())
                alone = frozenset(i for i in members if score(frozenset({i})) < empty - _EPS * abs(empty))
                starts += [frozenset(), alone]
            best = chosen[k]
            for s in dict.fromkeys(starts):
                got = _descend(problem, members, s, score, regions, max_rounds)
                if score(got) < score(best) - _EPS * abs(score(best)):
                    best = got
            evals += len(score.memo)
            if best != chosen[k]:
                chosen[k] = best
                parts[k] = problem.cluster_cost(k, best)
                changed = True
        if not changed:
            break
    device = frozenset().union(*chosen) if chosen else frozenset()
    cost = problem.cost(device)
    return SearchResult(device, cost, objective_value(objective, cost.latency_s, cost.energy_j), evals,
                        "clusters")


__all__ = ["SearchResult", "search", "greedy_set", "standalone_set", "BIG_CLUSTER"]
