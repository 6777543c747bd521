"""Tuning the mapping of a MAC kernel on a machine with a storage hierarchy (``hw.levels``).

There a MAC kernel's cost is its mapping's (``sim.cost.multilevel``), and its tuning space is the
mapspace (``sim.mapping.mapspace``: factorisations across levels, spatial X/Y, loop orders, keep bits),
not the one-buffer ``ScheduleSpace``. ``tune_mapping`` searches it with the evolutionary mapper
(``tuner.search.mapper.search_mapping``, every candidate costed by the batched data-movement model)
for the metric of the plan's objective (latency -> delay, energy -> energy, edp -> edp), seeded
with the default mapping (``sim.mapping.policy``; for energy and EDP the policy's pick for that
metric when it ranks better), so the result is never worse than the default for that metric. The chosen mapping travels in the kernel's ``Schedule.mapping``.

The measurer (default the tile-level walk, ``sim.cost.walk``, which adds to the model's cycles what
its averages hide) then measures the best ``measure_top`` distinct mappings the search found, each
as a ``Schedule`` with its mapping (a command measurer gets it in the ``"schedule"`` object of its
JSON request, ``tuner.search.measure.request_json``); for the latency objective the default mapping is
measured too and the fewest measured cycles win (so a tuned kernel never measures slower than an
untuned one); for energy and EDP (a measurer reports cycles only) the search's best stays. Every
measurement is appended to the tuning log when one is given.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from sim import HardwareConfig, Schedule
from sim.hw.config_hierarchy import hierarchy_of
from sim.mapping.policy import default_mapping, rank_keys
from sim.mapping.mapspace_sim import to_mapping
from sim.cost.movement import evaluate
from sim.cost.multilevel import kernel_mapping, kernel_nest

from .search.mapper import search_mapping
from .search.measure import Measurer, TileMeasurer
from .tasks import Task
from sim import default_schedule

OBJECTIVE_METRIC = {"latency": "delay", "energy": "energy", "edp": "edp"}
DEFAULT_MAPPING_BUDGET = 6000     # mapping evaluations per kernel: about 0.6 s on one core
DEFAULT_MEASURE_TOP = 4           # mappings an external measurer measures per kernel


class MappingTuneError(ValueError):
    """A mapping tuning request that cannot run (one line)."""


@dataclass(frozen=True)
class MappingTuneResult:
    schedule: Schedule            # the default schedule's fields, with the chosen mapping
    cycles: float                 # the measurer's cycles of it
    energy_pj: float              # the model's energy of it
    evaluations: int              # mappings the search costed
    measured: tuple[float, ...]   # the measurer's cycles of every mapping it measured, in order
    seconds: float


def mapping_task(task: Task, hw: HardwareConfig) -> bool:
    """Whether the task's tuning space is the mapspace (a MAC kernel on a storage hierarchy)."""
    return bool(hw.levels) and task.workload.is_mac


def tune_mapping(task: Task, hw: HardwareConfig, objective: str = "latency",
                 budget: int = DEFAULT_MAPPING_BUDGET, seed: int = 0, measurer: Measurer | None = None,
                 measure_top: int = DEFAULT_MEASURE_TOP) -> MappingTuneResult:
    """Search the mapping of ``task`` on ``hw`` for ``objective`` (see the module docstring)."""
    if objective not in OBJECTIVE_METRIC:
        raise MappingTuneError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVE_METRIC)}")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise MappingTuneError(f"mapping budget must be an integer >= 1, got {budget!r}")
    if not mapping_task(task, hw):
        raise MappingTuneError(f"{task.key} on {hw.name} is not a MAC kernel on a storage hierarchy")
    t0 = time.perf_counter()
    wl = task.workload
    measurer = measurer if measurer is not None else TileMeasurer()
    top = max(1, measure_top)
    hier, nest = hierarchy_of(hw), kernel_nest(wl, hw)  # padded for waves where hw says so
    # the seed: the default mapping (what an untuned plan runs), or for energy and EDP the default
    # policy's pick for that metric when it ranks better there
    start, _, ev0 = kernel_mapping(wl, hw)
    metric = OBJECTIVE_METRIC[objective]
    if metric != "delay":
        alt, st = default_mapping(hier, nest, metric)
        def key(c, e):
            return tuple(float(k[0]) for k in rank_keys(metric, [c], [e]))
        if key(st.cycles, st.energy_pj) < key(ev0.cycles, ev0.energy_pj):
            start = alt
    space, res = search_mapping(hier, nest, metric, budget, seed=seed, start=start,
                                keep_top=top)
    base = default_schedule(wl, hw)
    rows = res.top if len(res.top) else res.genes[None, :]
    cands = [base.replace(mapping=to_mapping(space, r)) for r in rows[:top]]
    if objective == "latency" and all(c.mapping != start for c in cands):
        # the measurer (the tile-level walk by default) adds what the model's averages hide: the
        # default mapping is measured too, so a tuned kernel never measures slower than untuned
        cands.append(base.replace(mapping=start))
    measured = tuple(float(measurer.measure(wl, hw, s)) for s in cands)
    pick = min(range(len(cands)), key=lambda i: (measured[i], i)) if objective == "latency" else 0
    energy = float(evaluate(hier, nest, cands[pick].mapping).energy_pj)
    return MappingTuneResult(cands[pick], measured[pick], energy, res.evaluations, measured,
                             time.perf_counter() - t0)


__all__ = ["DEFAULT_MAPPING_BUDGET", "DEFAULT_MEASURE_TOP", "MappingTuneError", "MappingTuneResult",
           "OBJECTIVE_METRIC", "mapping_task", "tune_mapping"]
