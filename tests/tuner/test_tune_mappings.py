"""The tuner tunes mappings of MAC kernels on storage hierarchies: the objective reaches the
mapping, the schedule carries it (JSON, plans, packed modules, the runtime), an external measurer
receives it, and a broken mapping is one line."""
from __future__ import annotations

import json
import shlex
import sys

import numpy as np
import pytest

import sim
from sim.hw.config_hierarchy import hierarchy_of
from sim.mapping.mapping import MappingError, mapping_from_dict
from sim.cost.movement import evaluate
from sim.cost.multilevel import kernel_mapping
from sim.workload.nest import nest_from_workload
from tuner.search.measure import CommandMeasurer
from tuner.tasks import Task
from tuner.tune_mappings import MappingTuneError, tune_mapping

WL = sim.Workload.conv2d(1, 32, 14, 14, 48, 3, 3, pad=1)


@pytest.mark.parametrize("preset", ["eyeriss", "simba-like"])
def test_the_objective_reaches_the_mapping(preset):
    """Latency: no more cycles than the default policy's mapping; energy: no more energy; each
    result recomputed by the movement model from the mapping alone."""
    hw = sim.load_hw(preset)
    hier, nest = hierarchy_of(hw), nest_from_workload(WL)
    _, _, dflt = kernel_mapping(WL, hw)
    fast = tune_mapping(Task(WL), hw, "latency", budget=1500)
    frugal = tune_mapping(Task(WL), hw, "energy", budget=1500)
    ev_fast = evaluate(hier, nest, fast.schedule.mapping)           # checks legality too
    ev_frugal = evaluate(hier, nest, frugal.schedule.mapping)
    # latency: the measurer's (the tile-level walk's) fewest cycles, never more than the default's
    walked = sim.simulate(WL, hw, fast.schedule, fidelity="tile").total_cycles
    assert fast.cycles == walked <= sim.simulate(WL, hw, fidelity="tile").total_cycles
    assert ev_fast.cycles <= walked
    assert ev_frugal.energy_pj <= dflt.energy_pj * (1 + 1e-12)
    assert ev_frugal.energy_pj <= ev_fast.energy_pj * (1 + 1e-12)
    assert frugal.energy_pj == pytest.approx(ev_frugal.energy_pj)
    # the simulator costs the schedule under its mapping, not the default one
    assert sim.simulate(WL, hw, frugal.schedule).energy_j == pytest.approx(ev_frugal.energy_pj * 1e-12)


def test_schedule_mapping_round_trips_and_is_checked():
    hw = sim.load_hw("eyeriss")
    r = tune_mapping(Task(WL), hw, "edp", budget=500)
    s = r.schedule
    again = sim.Schedule.from_json(s.to_json())
    assert again == s and again.mapping == s.mapping
    assert "mapping" not in sim.default_schedule(WL, sim.load_hw("edge-npu")).to_dict()   # one-buffer JSON unchanged
    # a mapping whose factors do not multiply to the problem: MappingError naming it
    d = s.to_dict()
    d["mapping"][0]["temporal"] = [["C", 3]] + [f for f in d["mapping"][0]["temporal"] if f[0] != "C"]
    with pytest.raises(MappingError, match="mapping factors of C multiply to"):
        sim.simulate(WL, hw, sim.Schedule.from_dict(d))
    with pytest.raises(MappingError, match="mapping level 0: unknown field"):
        mapping_from_dict([{"tiles": 3}])
    with pytest.raises(MappingError, match="non-empty list of levels"):
        sim.Schedule.from_dict({**d, "mapping": {"a": 1}})
    # a mapping on a machine without levels, or on a vector kernel, is refused
    with pytest.raises(sim.ScheduleError, match="mapping applies to MAC kernels on a machine with storage levels"):
        sim.simulate(WL, sim.load_hw("edge-npu"), sim.default_schedule(WL, sim.load_hw("edge-npu")).replace(
            mapping=s.mapping))
    with pytest.raises(MappingTuneError, match="not a MAC kernel on a storage hierarchy"):
        tune_mapping(Task(WL), sim.load_hw("edge-npu"))


MEASURER = r'''
import json, sys
req = json.load(sys.stdin)
m = req["schedule"]["mapping"]
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(m) + "\n")
# an "external" cost: the product of each level's temporal factors, weighted by depth
cycles = sum((i + 1) * f for i, lv in enumerate(m) for _, f in lv["temporal"])
print(json.dumps({"cycles": cycles}))
'''


def test_a_command_measurer_receives_the_mappings_and_the_best_measured_wins(tmp_path):
    script = tmp_path / "measure.py"
    script.write_text(MEASURER)
    seen = tmp_path / "seen.jsonl"
    meas = CommandMeasurer(shlex.join([sys.executable, str(script), str(seen)]))
    hw = sim.load_hw("simba-like")
    r = tune_mapping(Task(WL), hw, "latency", budget=800, measurer=meas, measure_top=3)
    got = [mapping_from_dict(json.loads(line)) for line in seen.read_text().splitlines()]
    # the search's best 3, and the default mapping unless it is one of them (for latency)
    assert len(got) == len(r.measured) in (3, 4) and len(set(got)) == len(got)
    assert kernel_mapping(WL, hw)[0] in got
    for m in got:
        m.check(hierarchy_of(hw), nest_from_workload(WL))
    expect = [sum((i + 1) * f for i, lm in enumerate(m.levels) for _, f in lm.temporal) for m in got]
    assert list(r.measured) == expect
    assert r.cycles == min(expect) and r.schedule.mapping == got[int(np.argmin(expect))]


def test_tune_end_to_end_carries_mappings_into_the_packed_plan(tmp_path):
    """tune on eyeriss for latency and for energy: the plan's MAC schedules hold mappings, the
    packed module keeps them, and running it reproduces the predicted latency; each plan is no
    worse in its objective than the same partition with default mappings."""
    from test_tune_hierarchy import fast_link, small_net
    from tuner import tune
    hw = fast_link("eyeriss")
    lat = tune(small_net(), hw, trials=8, progress=False, model_name="small_net", map_budget=800)
    en = tune(small_net(), hw, trials=8, progress=False, model_name="small_net", map_budget=800,
              objective="energy")
    assert lat.latency_s <= lat.baselines["default_schedules"].latency_s * (1 + 1e-12)
    assert en.energy_j <= en.baselines["default_schedules"].energy_j * (1 + 1e-12)
    for plan in (lat, en):
        mapped = [s for f in plan.schedules.values() for s in f.values() if s.mapping is not None]
        assert mapped, "the offloaded convs carry their mappings"
        p = tmp_path / f"{plan.objective}.zip"
        plan.save(p)
        x = np.random.default_rng(0).standard_normal((1, 8, 16, 16)).astype(np.float32)
        assert sim.load(p).run({"x": x}).latency_s == pytest.approx(plan.latency_s, rel=1e-12)
