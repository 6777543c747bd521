"""tune_kernels end to end: same seed same result, budgets respected, tuned no worse than the
simulator's default heuristic, warm start, input errors."""

import numpy as np
import pytest

import sim
from tuner import AnalyticalMeasurer, CostModel, Task, TaskError, TileMeasurer, tune_kernels
from tuner.search.policy import ModelPolicy
from tuner.timing import TimeAccount

HW = sim.load_hw("edge-npu")
TASKS = [Task(sim.Workload.conv2d(1, 32, 28, 28, 32, 3, 3, pad=1, epilogue=("relu",)), weight=3),
         Task(sim.Workload.gemm(128, 256, 64))]


def test_same_seed_same_result():
    a = tune_kernels(TASKS, HW, trials=32, seed=5, progress=False)
    b = tune_kernels(TASKS, HW, trials=32, seed=5, progress=False)
    assert a.to_dict() == b.to_dict()
    assert [t.trace for t in a.tasks] == [t.trace for t in b.tasks]


def test_budget_legality_and_bookkeeping():
    r = tune_kernels(TASKS, HW, trials=40, seed=0, progress=False, per_round=8)
    assert r.measurements == 40 == sum(len(t.trace) for t in r.tasks)
    assert all(t.measurements >= 8 for t in r.tasks)          # warm-up: every task gets a round
    for t in r.tasks:
        t.schedule.check(t.task.workload, HW)
        assert t.cycles == min(t.trace)
        assert t.cycles == sim.simulate(t.task.workload, HW, t.schedule, fidelity="tile").total_cycles
    assert r.weighted_cycles == pytest.approx(sum(t.task.weight * t.cycles for t in r.tasks))
    assert set(r.schedules()) == {t.key for t in TASKS}


def test_tuned_is_no_worse_than_the_default_heuristic():
    m = AnalyticalMeasurer()
    r = tune_kernels(TASKS, HW, trials=32, seed=1, measurer=m, progress=False)
    for t in r.tasks:
        default = m.measure(t.task.workload, HW, sim.default_schedule(t.task.workload, HW))
        assert t.cycles <= default


@pytest.mark.parametrize("strategy", ["random", "measured-evolution"])
def test_baseline_strategies_run_without_a_model(strategy):
    r = tune_kernels(TASKS, HW, trials=16, seed=0, progress=False, strategy=strategy)
    assert r.measurements == 16 and r.cost_model.n_rows == 0


def test_model_is_trained_online_and_warm_starts(tmp_path):
    r = tune_kernels(TASKS, HW, trials=24, seed=0, progress=False, model_use="always")
    assert r.cost_model.trained and r.cost_model.n_rows == 24
    assert r.timing.fits == r.learned_model["fits"] == 3  # one per round (3 rounds of 8)
    p = tmp_path / "m.npz"
    r.cost_model.save(p)
    cloud = tune_kernels(TASKS[:1], "cloud-npu", trials=8, seed=0, progress=False, cost_model=CostModel.load(p),
                         model_use="always")
    assert cloud.cost_model.n_rows == 32          # knowledge from edge-npu carried over


def test_rows_are_kept_for_later_even_when_the_model_does_not_train():
    r = tune_kernels(TASKS, HW, trials=24, seed=0, progress=False, model_use="never")
    assert r.timing.fits == 0 and not r.cost_model.trained
    assert r.cost_model.n_rows == 24              # a warm-started run or a later fit has them
    assert sorted(r.cost_model.log_cycles) == pytest.approx(sorted(np.log([c for t in r.tasks for c in t.trace])))


def test_input_errors():
    with pytest.raises(TaskError, match="unique workloads"):
        tune_kernels([TASKS[0], TASKS[0]], HW, trials=4, progress=False)
    with pytest.raises(TaskError, match="trials must be an integer >= 0"):
        tune_kernels(TASKS, HW, trials=-1, progress=False)
    with pytest.raises(ValueError, match="no hardware preset or file named 'tpu-v9'"):
        tune_kernels(TASKS, "tpu-v9", trials=4, progress=False)


@pytest.mark.slow
def test_resnet50_on_edge_npu_default_trials_fast_and_near_roofline():
    import statistics
    from partition import models
    from partition.byoc.pipeline import partition_for
    from tuner import extract_tasks
    hw = sim.load_hw("edge-npu")
    tasks = extract_tasks(partition_for(models.get("resnet50"), hw.partition_target()))
    r = tune_kernels(tasks, hw, seed=0, progress=False, measurer=TileMeasurer())
    fracs = []
    for t in r.tasks:
        rep = sim.simulate(t.task.workload, hw, t.schedule, fidelity="tile")
        wl = t.task.workload
        memory_bound = sum(wl.operand_elems().values()) * hw.array.word_bytes / hw.dram.bytes_per_cycle
        if wl.macs / hw.pes >= memory_bound:       # compute bound
            fracs.append(rep.roofline_fraction)
    assert fracs and statistics.median(fracs) >= 0.85


class SlowOutputStationary:
    """The analytical cycles, 1.5x in the output-stationary dataflow: a device whose OS mode is
    slower than the analytical model says (as an RTL simulation may disagree with it). The prior's
    favourites mix both dataflows, so it misranks them; the features can learn it."""
    name = "slow-os"

    def measure(self, wl, hw, s):
        c = sim.simulate(wl, hw, s, fidelity="analytical").total_cycles
        return float(c * (1.5 if s.dataflow == "os" else 1.0))


GENEROUS = ModelPolicy(model_share=1e9)        # training always fits the time budget


def test_policy_trains_when_the_prior_misranks_and_training_is_affordable():
    r = tune_kernels(TASKS, HW, trials=48, seed=0, progress=False, measurer=SlowOutputStationary(), model_use=GENEROUS)
    lm = r.learned_model
    assert lm["prior_agreement"]["value"] < GENEROUS.trust_prior and lm["prior_agreement"]["pairs"] >= 16
    assert lm["prior_pick_regret"] > GENEROUS.max_prior_regret
    assert r.timing.fits >= 1 and lm["rounds_ranked_by_model"] >= 1 and r.cost_model.trained


def test_policy_does_not_train_when_training_would_cost_more_than_its_share():
    r = tune_kernels(TASKS, HW, trials=48, seed=0, progress=False, measurer=SlowOutputStationary(),
                     model_use=ModelPolicy(model_share=0.0))
    assert r.timing.fits == 0 and r.learned_model["rounds_ranked_by_model"] == 0
    assert "training would take" in r.learned_model["last_decision"]


def test_policy_does_not_train_when_the_prior_ranks_the_measurements():
    r = tune_kernels(TASKS, HW, trials=48, seed=0, progress=False, measurer=AnalyticalMeasurer(), model_use=GENEROUS)
    assert r.learned_model["prior_agreement"]["value"] == 1.0 and r.learned_model["prior_pick_regret"] == 0.0
    assert r.timing.fits == 0 and "prior ranks" in r.learned_model["last_decision"]


def test_model_learns_what_the_prior_misses_out_of_sample():
    task = [Task(sim.Workload.conv2d(1, 32, 28, 28, 32, 3, 3, pad=1))]
    r = tune_kernels(task, HW, trials=96, seed=0, progress=False, measurer=SlowOutputStationary(), model_use="always")
    lm = r.learned_model
    assert lm["model_agreement"]["pairs"] >= 50
    assert lm["model_agreement"]["value"] > lm["prior_agreement_on_model_rows"]["value"]


def test_time_is_accounted_per_task_and_in_total():
    r = tune_kernels(TASKS, HW, trials=40, seed=0, progress=False)
    assert r.timing == sum((t.timing for t in r.tasks), TimeAccount())
    assert r.timing.measurements == r.measurements == 40
    assert 0 < r.timing.total_s <= r.wall_s
    for t in r.tasks:
        assert len(t.trace_s) == len(t.trace) and list(t.trace_s) == sorted(t.trace_s)
        assert t.timing.measurements == t.measurements and t.timing.scored > 0
    d = r.timing_dict()
    assert d["measurements"] == 40 and set(d["tasks"]) == {t.key for t in TASKS} and d["learned_model"]["rounds"] == 5
