"""The multi-level mapper: the best ``sim.mapping.mapping.Mapping`` of a nest on a hierarchy.

    best_mapping(hierarchy, nest, metric="edp", budget=20000) -> (Mapping, stats)

searches the mapspace (``sim.mapping.mapspace``: factorisations across levels, spatial X/Y, loop
orders, bypass, within the constraints) with ``tuner.search.mapsearch`` and measures every candidate
with ``sim``'s data-movement model. ``stats`` holds the best mapping's cycles, energy_pj, edp,
the evaluations spent and the seconds taken. Whole-network costing calls it once per unique
layer; a mapping search is deterministic for a seed and a budget.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable

import numpy as np


from sim.hw.hierarchy import Hierarchy
from sim.mapping.mapping import Mapping
from sim.workload.nest import Nest

from .mapsearch import Costs, MapSearchConfig, MapSearchResult, evaluate_all, search
from sim.cost.engines.batch import MappingArrays

from sim.mapping.mapspace import LevelConstraint, Mapspace, MapspaceError
from sim.mapping.mapspace_sim import build_space, from_mapping, to_mapping
from sim.mapping.policy import row_stationary_rows


def movement_evaluator(hier: Hierarchy, nest: Nest, space: Mapspace) -> Callable[[MappingArrays], Costs]:
    """Cycles and energy of many mappings at once from ``sim``'s batched data-movement model;
    a row ``sim``'s own check refuses costs ``inf`` (it never wins)."""
    from sim.mapping.policy import evaluate_arrays

    def run(a: MappingArrays) -> Costs:
        return Costs(*evaluate_arrays(hier, nest, a))
    return run


def search_mapping(hier: Hierarchy, nest: Nest, metric: str = "edp", budget: int = 20000,
                   constraints: Iterable[LevelConstraint] = (), seed: int = 0, time_limit_s: float | None = None,
                   start: Mapping | None = None, evaluator: Callable[[MappingArrays], Costs] | None = None,
                   progress: Callable[[int, float | None], None] | None = None,
                   keep_top: int = 0, spatial_one_axis: bool = False) -> tuple[Mapspace, MapSearchResult]:
    """The space and the search result (``tuner.search.mapsearch``); ``start``: a mapping put in the first
    population (ignored when it lies outside the constraints); ``spatial_one_axis``: Timeloop's
    space (each dim's spatial factor at a level along X or Y, not both), for mappings written as
    Timeloop files."""
    constraints = tuple(constraints)
    space = build_space(hier, nest, constraints, spatial_one_axis)
    evaluate = evaluator or movement_evaluator(hier, nest, space)
    seeds = None
    if start is not None:
        try:
            seeds = from_mapping(space, hier, start)[None, :]
            seeds = seeds[space.valid(seeds)]
        except MapspaceError:
            seeds = None
    # Eyeriss's own dataflow where it applies, on a preset's space (a Timeloop file's search
    # keeps Timeloop's mapper's space and seeds)
    rs = row_stationary_rows(space, hier, nest) if not (constraints or spatial_one_axis) else ()
    if hier.family == "row_stationary" and len(rs):
        # the hardware runs only the RS family (its compiler's), a few dozen rows: every one is
        # evaluated, and nothing outside it is a candidate
        return space, evaluate_all(space, evaluate, metric, rs, keep_top=keep_top)
    if len(rs):
        seeds = rs if seeds is None else np.concatenate([seeds, rs])
    cfg = MapSearchConfig(evaluations=budget, time_limit_s=time_limit_s, seed=seed, keep_top=keep_top,
                          population=min(1024, max(64, budget // 8)))
    return space, search(space, evaluate, metric, cfg, seeds=seeds, progress=progress)


def best_mapping(hierarchy: Hierarchy, nest: Nest, metric: str = "edp", budget: int = 20000,
                 constraints: Iterable[LevelConstraint] = (), seed: int = 0,
                 time_limit_s: float | None = None, spatial_one_axis: bool = False) -> tuple[Mapping, dict[str, Any]]:
    """The best mapping found for ``metric`` (edp, energy or delay) within ``budget`` evaluations
    (and ``time_limit_s`` seconds when given), and its statistics: cycles, energy_pj, edp,
    evaluations, seconds, generations."""
    t0 = time.perf_counter()
    space, res = search_mapping(hierarchy, nest, metric, budget, constraints, seed, time_limit_s,
                                spatial_one_axis=spatial_one_axis)
    return to_mapping(space, res.genes), {
        "cycles": int(round(res.cycles)), "energy_pj": res.energy_pj, "edp": res.cycles * res.energy_pj,
        "evaluations": res.evaluations, "seconds": time.perf_counter() - t0, "generations": res.generations,
        "metric": metric}


__all__ = ["best_mapping", "search_mapping", "movement_evaluator"]
