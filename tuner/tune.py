"""``tuner.tune``: kernel tuning and partition search together, for one model on one accelerator.

1. Partition with default schedules (``partition_search.search``): a first guess of what runs on
   the device.
2. Tune the kernels the partition decides on first: the tasks are the unique workloads of every
   unit the first partition offloads, then those greedy BYOC offloads (the baseline must be fair),
   then any other offloadable unit, weighted by how often each runs (``tune_kernels``; its
   scheduler spends the budget where the weighted cycles drop most).
3. Partition again with the tuned kernel costs (a kernel made faster may now be worth offloading),
   outline the chosen functions and cost the partitioned graph (``costing.graph_cost``).

With ``offload="all"`` steps 1 and 3 keep greedy BYOC's partition instead of searching one
(every supported unit on the device, functions as greedy BYOC forms them): only its kernels are
tuned, and the plan's cost equals the ``greedy_byoc`` baseline's.

Baselines, all on the same hardware: ``greedy_byoc`` (plain BYOC: every supported unit offloaded,
maximal merge of producer-consumer chains, no merge of functions that share an input) and ``all_host`` with the same tuned kernels, and ``default_schedules`` (the chosen
partition with every kernel at ``default_schedule``: what tuning gained).
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import sim
from partition import Graph

from .costing import OBJECTIVES, CostOptions, KernelCoster, graph_cost
from .partition_problem import Problem
from .partition_search import search
from .plan import Decision, Plan, TaskSummary


class TuneError(ValueError):
    """A model and hardware pair that cannot be tuned (nothing can run on the device)."""


# What decides the partition: "cost" searches it with the simulated costs (partition_search),
# "all" keeps greedy BYOC's (every supported unit offloaded, no merge of functions sharing an input).
OFFLOAD_POLICIES = ("cost", "all")


def _partition(problem: Problem, objective: str, offload: str) -> tuple[frozenset[int], int, bool | None]:
    """The offloaded units, the partition evaluations spent, and how functions form (``siblings``
    of ``Problem.groups``) under the ``offload`` policy."""
    if offload == "all":
        return problem.greedy_set, 0, False
    found = search(problem, objective)
    return found.device, found.evaluations, None


def _tasks(problem: Problem, order: list[frozenset[int]]):
    from .tasks import Task
    weights: dict[str, float] = {}
    first: dict[str, sim.Workload] = {}
    for group in order:
        for i in sorted(group):
            wl = problem.workloads[i]
            if wl is None or not wl.is_mac:
                continue  # vector kernels have a one-dimensional space: the default is tuned enough
            weights[wl.key] = weights.get(wl.key, 0) + problem.units[i].weight
            first.setdefault(wl.key, wl)
    return [Task(first[k], max(1, int(round(weights[k])))) for k in first]


def tune(graph: Graph, hw: "sim.HardwareConfig | str", trials: int | None = None,
         log: str | Path | None = None, objective: str = "latency", seed: int = 0,
         progress: bool = True, cost_model: Any = None, measurer: Any = None,
         model_name: str | None = None, options: CostOptions = CostOptions(),
         model_use: str = "auto", map_budget: int | None = None, measure_top: int | None = None,
         offload: str = "cost", calibration: Any = None) -> Plan:
    """Tune ``graph`` for ``hw`` (a config, preset name or file). ``trials``: kernel measurements
    in all (default: ``tune_kernels``'s, 16 per task); ``log``: tuning records (JSON lines) read
    and appended, so a rerun resumes; ``cost_model``: a shared ``tuner.CostModel`` to start from
    (sweeps pass one across hardware points); ``objective``: latency, energy or edp;
    ``model_use``: when the learned model trains (``auto``, ``always``, ``never``: ``tuner.search.policy``).
    On a machine with a storage hierarchy each MAC kernel's mapping is searched for the objective
    (``tuner.tune_mappings``; ``map_budget`` mapping evaluations per kernel, ``measure_top``
    mappings measured by an external measurer) and the plan's schedules carry the mappings.
    ``offload``: what decides the partition (``OFFLOAD_POLICIES``): ``cost`` (default) searches
    it, ``all`` keeps greedy BYOC's and tunes its kernels. ``calibration``: a learned calibration
    (``tuner.calibration.load_calibration``) every cost of the plan and its baselines uses (kernel
    tuning itself ranks schedules uncalibrated). ``Plan.timing`` says where the wall time went."""
    from .tune_kernels import tune_kernels

    t0 = time.perf_counter()
    hw = sim.load_hw(hw)
    if objective not in OBJECTIVES:
        raise TuneError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if offload not in OFFLOAD_POLICIES:
        raise TuneError(f"unknown offload policy {offload!r}; choose one of {', '.join(OFFLOAD_POLICIES)}")
    if trials is not None and (not isinstance(trials, int) or isinstance(trials, bool) or trials < 0):
        raise TuneError(f"trials must be an integer >= 0, got {trials!r}")
    name = model_name or str(graph.meta.get("model") or graph.name)
    if calibration is not None:
        options = replace(options, calibration=calibration)
    if options.calibration is not None:  # a host op's cost depends on the bytes its whole model touches
        options = replace(options, calibration=options.calibration.for_graph(graph))
    default_coster = KernelCoster(hw, opts=options)
    problem = Problem(graph, hw, default_coster, options)
    _check_runnable(problem, hw, name)

    first, first_evaluations, siblings = _partition(problem, objective, offload)
    t1 = time.perf_counter()
    greedy = problem.greedy_set
    every = frozenset(i for i in range(len(problem.units)) if problem.offloadable[i])
    # with a fixed partition only its kernels matter
    tasks = _tasks(problem, [first] if offload == "all" else [first, greedy - first, every - first - greedy])
    tuned: dict[str, sim.Schedule] = {}
    measured: dict[str, int] = {}
    model = cost_model
    kernels_timing: dict = {}
    if tasks and (trials is None or trials > 0):
        extra = {k: v for k, v in (("map_budget", map_budget), ("measure_top", measure_top)) if v is not None}
        res = tune_kernels(tasks, hw, trials=trials, log=log, seed=seed, measurer=measurer,
                           cost_model=cost_model, progress=progress, model_use=model_use, objective=objective,
                           **extra)
        tuned = res.schedules()
        measured = {t.task.key: t.measurements + t.reused for t in res.tasks}
        model = res.cost_model
        kernels_timing = res.timing_dict()
    t2 = time.perf_counter()

    coster = KernelCoster(hw, tuned, options)
    final_problem = problem.with_coster(coster)
    device, final_evaluations, _ = _partition(final_problem, objective, offload)
    part = final_problem.materialize(device, siblings)
    cost = graph_cost(part, coster, options)

    schedules = {sym: {k.name: sim.Schedule.from_dict(k.schedule) for k in fc.kernels}
                 for sym, fc in cost.functions.items()}
    baselines = {"greedy_byoc": final_problem.cost(greedy, siblings=False), "all_host": final_problem.cost(frozenset()),
                 "default_schedules": problem.cost(device, siblings)}
    summaries = []
    for t in tasks:
        best, dflt = coster(t.workload), default_coster(t.workload)
        summaries.append(TaskSummary(t.key, t.workload.op, float(t.weight), best.cycles, dflt.cycles,
                                     best.roofline_fraction, measured.get(t.key, 0)))
    decision = Decision(
        offloaded=tuple((problem.units[i].graph, problem.units[i].name) for i in sorted(device)),
        functions=tuple(tuple((problem.units[i].graph, problem.units[i].name) for i in grp)
                        for grp in final_problem.groups(device, siblings)),
        units=len(problem.units), offloadable=int(problem.offloadable.sum()),
        candidate_regions=len(problem.groups(greedy, siblings=False)))
    stats = {"evaluations": first_evaluations + final_evaluations, "clusters": len(problem.clusters),
             "largest_cluster": max((len(c) for c in problem.clusters), default=0),
             "first_partition_offloaded": len(first), "tasks": len(tasks)}
    t3 = time.perf_counter()
    timing = {"wall_s": t3 - t0, "partition_s": t1 - t0, "kernels_s": t2 - t1, "final_s": t3 - t2,
              "kernels": kernels_timing}
    return Plan(model=name, source=graph, graph=part, hw=hw, target=problem.target.name,
                objective=objective, offload=offload, decision=decision, schedules=schedules, cost=cost,
                baselines=baselines, tasks=tuple(summaries), seed=seed,
                trials=int(sum(measured.values())), search=stats, cost_model=model, timing=timing,
                calibration=options.calibration.describe() if options.calibration is not None else None)


def _check_runnable(problem: Problem, hw: sim.HardwareConfig, name: str) -> None:
    if problem.offloadable.any():
        return
    marked = problem.target.name
    candidates = sum(1 for g in problem.graphs.values() for n in g.nodes if n.meta.get("target") == marked)
    if candidates:
        raise TuneError(f"hardware {hw.name} cannot run any kernel of {name}: no schedule of its "
                        f"{candidates} supported op(s) fits the buffers")
    raise TuneError(f"hardware {hw.name} offloads none of the ops of {name} "
                    f"(support.ops: {', '.join(hw.support.ops) or 'none'})")


__all__ = ["tune", "TuneError", "OFFLOAD_POLICIES"]
