"""``tune_kernels``: the tuning loop over the tasks of a model on one accelerator.

Each round the task scheduler picks a task; its search strategy proposes ``per_round`` schedules
not measured before, ranked by the analytical prior or by the learned cost model; each is measured
and appended to the log at once; the strategy is told the results; then the model-use policy
(``tuner.search.policy``) decides from the run's own evidence (how well the prior ranks what was
measured, what training and measuring cost so far) whether the shared cost model trains now and
whether the next rounds rank with it. ``trials`` counts measurements per run including those
already in the log for these tasks, hardware and measurer, so rerunning with the same log resumes
(a finished run measures nothing more). The wall time of every phase (candidate generation,
scoring, training, measurement) is accounted per task (``tuner.timing``). Same seed, same tasks,
same log: same result, as long as the policy takes the same decisions (always so with
``model_use="always"`` or ``"never"``; under ``"auto"`` they depend on measured time).

On a machine with a storage hierarchy a MAC kernel's space is the mapspace: such tasks are tuned by
``tuner.tune_mappings.tune_mapping`` (the evolutionary mapper, for the ``objective``'s metric,
``map_budget`` mapping evaluations each, its measurements counted in ``trials``; the log is
appended, not reused) and the rest by the loop above; the results come back in the tasks' order.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from sim import HardwareConfig, Schedule, Workload, load_hw

from .search.cost_model import CostModel, CostModelConfig, group_id
from .search.learner import Learner
from .search.measure import Measurer, TileMeasurer
from .search.policy import ModelPolicy
from .records import Record, append_record, load_records, select
from .search.scoring import ModelScorer, TimedScorer
from .search.strategies import Trial, make_strategy
from .search.space import ScheduleSpace
from .tasks import SchedulerConfig, Task, TaskError, TaskScheduler
from .timing import Stopwatch, TimeAccount
from .tune_mappings import DEFAULT_MAPPING_BUDGET, DEFAULT_MEASURE_TOP, mapping_task, tune_mapping

DEFAULT_TRIALS_PER_TASK = 16
DEFAULT_PER_ROUND = 8


@dataclass(frozen=True)
class TaskResult:
    task: Task
    schedule: Schedule | None     # fastest measured (None: the budget never reached this task)
    cycles: float                 # its measured cycles (inf when none)
    measurements: int             # new measurements in this run
    reused: int                   # records taken from the log
    trace: tuple[float, ...] = () # cycles of each new measurement, in order
    space_size: int = 0
    trace_s: tuple[float, ...] = ()  # wall seconds since the run started, at each new measurement
    timing: TimeAccount = TimeAccount()

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.task.key, "weight": self.task.weight,
                "schedule": self.schedule.to_dict() if self.schedule else None,
                "cycles": self.cycles if math.isfinite(self.cycles) else None,
                "measurements": self.measurements, "reused": self.reused, "space_size": self.space_size}


@dataclass(frozen=True, eq=False)
class TuneResult:
    tasks: tuple[TaskResult, ...]
    hardware: str
    hw_fingerprint: str
    measurer: str
    seed: int
    cost_model: CostModel = field(repr=False)
    timing: TimeAccount = TimeAccount()   # all tasks
    wall_s: float = 0.0                   # the whole call (phases + bookkeeping)
    learned_model: dict = field(default_factory=dict)  # the policy's decisions and evidence

    @property
    def measurements(self) -> int:
        return sum(t.measurements for t in self.tasks)

    @property
    def reused(self) -> int:
        return sum(t.reused for t in self.tasks)

    @property
    def weighted_cycles(self) -> float:
        """Sum over tasks of weight x best cycles: the kernels' share of end-to-end latency."""
        return sum(t.task.weight * t.cycles for t in self.tasks)

    def schedules(self) -> dict[str, Schedule]:
        """Best schedule per workload key (tasks never measured are left out)."""
        return {t.task.key: t.schedule for t in self.tasks if t.schedule is not None}

    def schedule_for(self, workload: Workload) -> Schedule | None:
        return self.schedules().get(workload.key)

    def to_dict(self) -> dict[str, Any]:
        return {"hardware": self.hardware, "hw_fingerprint": self.hw_fingerprint, "measurer": self.measurer,
                "seed": self.seed, "measurements": self.measurements, "reused": self.reused,
                "weighted_cycles": self.weighted_cycles if math.isfinite(self.weighted_cycles) else None,
                "tasks": [t.to_dict() for t in self.tasks]}

    def timing_dict(self) -> dict[str, Any]:
        """Where the time went (not in ``to_dict``: it differs from run to run)."""
        return {"wall_s": self.wall_s, **self.timing.to_dict(),
                "tasks": {t.task.key: t.timing.to_dict() for t in self.tasks},
                "learned_model": self.learned_model}


def _as_tasks(tasks: Sequence[Task | Workload]) -> tuple[Task, ...]:
    out = []
    for t in tasks:
        if isinstance(t, Workload):
            t = Task(t)
        if not isinstance(t, Task):
            raise TaskError(f"tasks must be Task or Workload objects, got {type(t).__name__}")
        out.append(t)
    keys = [t.key for t in out]
    if len(set(keys)) != len(keys):
        raise TaskError("tasks must be unique workloads (merge repeats into one task with a weight)")
    if not out:
        raise TaskError("no tasks to tune")
    return tuple(out)


def tune_kernels(tasks: Sequence[Task | Workload], hw: HardwareConfig | str, trials: int | None = None,
                 log: str | Path | None = None, seed: int = 0, measurer: Measurer | None = None,
                 cost_model: CostModel | None = None, progress: bool = True, per_round: int = DEFAULT_PER_ROUND,
                 strategy: str = "evolution", scheduler: SchedulerConfig = SchedulerConfig(),
                 model_use: ModelPolicy | str = "auto", objective: str = "latency",
                 map_budget: int = DEFAULT_MAPPING_BUDGET, measure_top: int = DEFAULT_MEASURE_TOP) -> TuneResult:
    """Tune every task's schedule on ``hw``. ``trials``: measurements in all (default
    ``16 x tasks``), counting records reused from ``log``; ``measurer``: default ``TileMeasurer``;
    ``cost_model``: a (possibly pre-trained) model to start from, default an untrained
    ``CostModel`` (the analytical prior); ``strategy``: evolution, random or measured-evolution;
    ``model_use``: when the learned model trains and ranks (``auto``, ``always``, ``never`` or a
    ``ModelPolicy``; see ``tuner.search.policy``); ``objective``, ``map_budget``, ``measure_top``:
    for the mapping tasks of a storage hierarchy (see the module docstring)."""
    hw = load_hw(hw)
    tasks = _as_tasks(tasks)
    if trials is None:
        trials = DEFAULT_TRIALS_PER_TASK * len(tasks)
    if not isinstance(trials, int) or trials < 0:
        raise TaskError(f"trials must be an integer >= 0, got {trials!r}")
    if not isinstance(per_round, int) or per_round < 1:
        raise TaskError(f"per_round must be an integer >= 1, got {per_round!r}")
    policy = model_use if isinstance(model_use, ModelPolicy) else ModelPolicy(use=model_use)
    measurer = measurer if measurer is not None else TileMeasurer()
    if any(mapping_task(t, hw) for t in tasks):
        return _with_mappings(tasks, hw, trials, log, seed, measurer, cost_model, progress, per_round, strategy,
                              scheduler, policy, objective, map_budget, measure_top)
    fp = hw.fingerprint()
    uses_model = strategy == "evolution"
    start = time.perf_counter()
    watch = Stopwatch(len(tasks))

    spaces = [ScheduleSpace.build(t.workload, hw) for t in tasks]
    strategies = [make_strategy(strategy, sp, np.random.SeedSequence([seed, i]).generate_state(1)[0])
                  for i, sp in enumerate(spaces)]
    groups = [group_id(t.key, fp) for t in tasks]
    learner = Learner(cost_model if cost_model is not None else CostModel(CostModelConfig()), spaces, groups,
                       policy, watch)
    sched = TaskScheduler(tasks, scheduler)
    old = select(load_records(log), hw_fingerprint=fp, measurer=measurer.name) if log is not None else []
    best: list[Record | None] = [None] * len(tasks)
    reused = [0] * len(tasks)
    seen: set[tuple[str, str, str]] = set()
    for i, t in enumerate(tasks):
        recs = []
        for r in old:
            if r.workload_key == t.key and r.key not in seen:
                seen.add(r.key)
                recs.append(r)
        reused[i] = len(recs)
        if not recs:
            continue
        strategies[i].tell([Trial(r.schedule, r.cycles) for r in recs])
        best[i] = min(recs, key=lambda r: r.cycles)
        sched.record(i, best[i].cycles)
        learner.add(i, [r.schedule for r in recs], [r.cycles for r in recs], False)
    if any(reused):
        learner.step(0, uses_model)

    budget = max(0, trials - sum(reused))
    counts = [0] * len(tasks)
    traces: list[list[float]] = [[] for _ in tasks]
    times: list[list[float]] = [[] for _ in tasks]
    bar = _progress(budget, progress)
    try:
        done = 0
        while done < budget:
            i = sched.next_task()
            if i is None:
                break
            n = min(per_round, budget - done)
            scorer = learner.scorer() if uses_model else None
            with watch.phase("generate", i):
                timed = TimedScorer(scorer, lambda k, i=i: watch.phase("score", i, k)) if scorer else None
                cands = strategies[i].ask(n, timed)
            if not cands:
                sched.mark_done(i)  # the whole space is measured
                continue
            trials_i = []
            for s in cands:
                with watch.phase("measure", i):
                    cycles = measurer.measure(tasks[i].workload, hw, s)
                rec = Record(tasks[i].key, fp, s, cycles, measurer.name)
                if log is not None:
                    append_record(log, rec)  # before the next measurement: a failure loses nothing
                trials_i.append(Trial(s, cycles))
                traces[i].append(cycles)
                times[i].append(time.perf_counter() - start)
                if best[i] is None or cycles < best[i].cycles:
                    best[i] = rec
                bar.update(1)
            done += len(trials_i)
            counts[i] += len(trials_i)
            strategies[i].tell(trials_i)
            sched.record(i, best[i].cycles)
            if uses_model:
                learner.add(i, cands, [t.cycles for t in trials_i], isinstance(scorer, ModelScorer))
            learner.step(i, uses_model)
            bar.set_postfix_str(f"task {i + 1}/{len(tasks)}", refresh=False)
    finally:
        bar.close()
    model = learner.final_model() if uses_model else learner.model
    results = tuple(
        TaskResult(t, best[i].schedule if best[i] else None, best[i].cycles if best[i] else float("inf"),
                   counts[i], reused[i], tuple(traces[i]), spaces[i].size, tuple(times[i]), watch.account(i))
        for i, t in enumerate(tasks))
    return TuneResult(results, hw.name, fp, measurer.name, seed, model, watch.total(),
                      time.perf_counter() - start, learner.summary(uses_model))


def _with_mappings(tasks, hw, trials, log, seed, measurer, cost_model, progress, per_round, strategy, scheduler,
                   policy, objective, map_budget, measure_top) -> TuneResult:
    """The mapping tasks by the mapper, the others by ``tune_kernels``; results in task order."""
    start = time.perf_counter()
    fp = hw.fingerprint()
    out: dict[int, TaskResult] = {}
    mapped = [i for i, t in enumerate(tasks) if mapping_task(t, hw)]
    bar = _progress(len(mapped), progress)
    try:
        for k, i in enumerate(mapped):
            r = tune_mapping(tasks[i], hw, objective, map_budget, seed + k, measurer, measure_top)
            if log is not None:
                for c in r.measured:
                    append_record(log, Record(tasks[i].key, fp, r.schedule, c, measurer.name))
            acc = TimeAccount(generate_s=r.seconds, measurements=len(r.measured))
            out[i] = TaskResult(tasks[i], r.schedule, r.cycles, len(r.measured), 0, r.measured, 0,
                                (time.perf_counter() - start,) * len(r.measured), acc)
            bar.update(1)
    finally:
        bar.close()
    rest = [i for i in range(len(tasks)) if i not in out]
    used = sum(t.measurements for t in out.values())
    model, account, learned = cost_model, TimeAccount(), {}
    if rest:
        sub = tune_kernels([tasks[i] for i in rest], hw, None if trials is None else max(0, trials - used), log,
                           seed, measurer, cost_model, progress, per_round, strategy, scheduler, policy)
        out.update(zip(rest, sub.tasks))
        model, account, learned = sub.cost_model, sub.timing, sub.learned_model
    for i in mapped:
        account = account + out[i].timing
    return TuneResult(tuple(out[i] for i in range(len(tasks))), hw.name, fp, measurer.name, seed,
                      model if model is not None else CostModel(CostModelConfig()), account,
                      time.perf_counter() - start, learned)


class _NoProgress:
    def update(self, n: int = 1) -> None: ...

    def set_postfix_str(self, s: str, refresh: bool = True) -> None: ...

    def close(self) -> None: ...


def _progress(total: int, enabled: bool):
    if not enabled:
        return _NoProgress()  # not even importing tqdm (a tenth of a second)
    from tqdm.auto import tqdm
    return tqdm(total=total, desc="tuning kernels", unit="trial", leave=False)
