"""tuner.tune: kernel tuning and partition search together; determinism, resumption, baselines,
objectives and the errors of inputs that cannot be tuned."""
from __future__ import annotations

import pytest

import sim
from partition.builder import GraphBuilder
from tuner import TuneError, tune
from tuner.costing import KernelCoster
from tuner.exact import optimum
from tuner.partition_problem import Problem


def mlp(seed=0):
    """dense layers between host ops: some worth offloading, some not, depending on the link."""
    b = GraphBuilder("mlp", seed)
    x = b.input("x", (64, 256))
    y = b.dense(x, 256, name="d0")
    y = b.dense(b.relu(y, name="r0"), 256, name="d1")
    y = b.tanh(y, name="t1")
    y = b.dense(y, 16, name="d2")
    y = b.softmax(b.dense(b.tanh(y, name="t2"), 256, name="d3"), name="s")
    return b.finish([y])


def hw(link=350e6):
    return sim.HardwareConfig.from_dict({"base": "edge-npu", "link": {"bytes_per_s": link}})


@pytest.fixture(scope="module")
def plan():
    return tune(mlp(), hw(), trials=16, progress=False, seed=3)


def test_same_seed_same_plan(plan):
    again = tune(mlp(), hw(), trials=16, progress=False, seed=3)
    a, b = plan.summary(), again.summary()
    assert a == b


def test_never_slower_than_baselines(plan):
    assert set(plan.baselines) == {"greedy_byoc", "all_host", "default_schedules"}
    for name in ("greedy_byoc", "all_host", "default_schedules"):
        assert plan.latency_s <= plan.baselines[name].latency_s * (1 + 1e-12), name


def test_partition_is_the_exact_optimum_under_tuned_costs(plan):
    """Rebuild the problem with the plan's kernel schedules and check against exhaustive search."""
    tuned = {k.workload: sim.Schedule.from_dict(k.schedule) for f in plan.cost.functions.values()
             for k in f.kernels}
    p = Problem(mlp(), plan.hw, KernelCoster(plan.hw, tuned))
    ex = optimum(p, "latency")
    assert ex.certified
    assert plan.latency_s == pytest.approx(ex.cost.latency_s, rel=1e-9)


def test_log_resumes_without_new_measurements(tmp_path):
    log = tmp_path / "records.jsonl"
    first = tune(mlp(), hw(), trials=12, log=log, progress=False)
    lines = log.read_text().splitlines()
    assert len(lines) == 12
    second = tune(mlp(), hw(), trials=12, log=log, progress=False)
    assert log.read_text().splitlines() == lines
    assert second.latency_s == pytest.approx(first.latency_s)


def test_energy_objective_minimises_energy():
    p = tune(mlp(), hw(), trials=0, objective="energy", progress=False)
    assert p.objective == "energy"
    for c in p.baselines.values():
        assert p.energy_j <= c.energy_j * (1 + 1e-12)


def test_link_speed_moves_the_partition():
    slow = tune(mlp(), hw(link=1e6), trials=0, progress=False)
    fast = tune(mlp(), hw(link=1e12), trials=0, progress=False)
    assert len(slow.decision.offloaded) < len(fast.decision.offloaded)
    assert slow.latency_s == pytest.approx(slow.baselines["all_host"].latency_s)


def test_bad_inputs_raise_one_clear_error():
    with pytest.raises(TuneError, match="unknown objective"):
        tune(mlp(), hw(), objective="speed", progress=False)
    with pytest.raises(TuneError, match="trials"):
        tune(mlp(), hw(), trials=-1, progress=False)
    conv_only = sim.HardwareConfig.from_dict({"base": "edge-npu", "support": {"ops": ["conv2d"], "patterns": []}})
    with pytest.raises(TuneError, match="offloads none of the ops"):
        tune(mlp(), conv_only, progress=False)
    # 2-byte words in 1-byte buffers: not even a 1x1x1 tile fits.
    tiny = sim.HardwareConfig.from_dict({"base": "edge-npu", "array": {"word_bytes": 2}, "buffers": {
        "ifmap_bytes": 1, "weight_bytes": 1, "output_bytes": 1}})
    with pytest.raises(TuneError, match="cannot run any kernel"):
        tune(mlp(), tiny, progress=False)
    with pytest.raises(ValueError, match="no hardware preset"):
        tune(mlp(), "no-such-preset", progress=False)
