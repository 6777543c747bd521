"""Whole networks on hierarchical hardware (the eyeriss and simba-like presets): tune, the packed
plan, its runtime, and the plan's figures recomputed independently from the archive."""
from __future__ import annotations

import numpy as np
import pytest

import sim
from partition import interpret, read_packed
from partition.builder import GraphBuilder
from sim.hw.config_hierarchy import hierarchy_of
from sim.cost.movement import evaluate
from sim.cost.multilevel import kernel_mapping
from sim.workload.nest import nest_from_workload
from tuner import tune


def small_net(seed=0):
    b = GraphBuilder("small_net", seed)
    x = b.input("x", (1, 8, 16, 16))
    y = b.relu(b.conv_bn(x, 16, 3, name="c1"), name="r1")
    y = b.relu(b.conv_bn(y, 16, 3, name="c2"), name="r2")
    y = b.dense(b.flatten(y, name="f"), 10, name="fc")
    return b.finish([b.softmax(y, name="s")])


def fast_link(preset):
    """The preset with a link fast enough that offloading pays, so the plan has external functions."""
    return sim.HardwareConfig.from_dict({"base": preset, "name": f"{preset}-fast-link",
                                         "link": {"bytes_per_s": 1e12, "launch_latency_s": 1e-8},
                                         "host": {"peak_flops": 1e8}})


@pytest.fixture(scope="module", params=["eyeriss", "simba-like"])
def plan(request):
    return tune(small_net(), fast_link(request.param), trials=16, progress=False, model_name="small_net")


def test_offloaded_mac_kernels_cost_their_tuned_mapping(plan):
    """Every offloaded conv/dense kernel carries its tuned mapping in its schedule and costs the
    tile-level walk's cycles of it (the tuner costs plans at ``tile`` fidelity; the walk never
    beats the movement model) plus its epilogue on the vector unit, recomputed here from the nest
    (an intermediate kept on chip may take off DRAM stall, never compute); the tuned mapping is
    no slower in the model than the default policy's."""
    from sim.cost.walk import walk
    from sim.cost.analytical import vector_cycles
    from sim.graph.subgraph import kernel_workload
    hw = plan.hw
    mac = 0
    for sym, f in plan.cost.functions.items():
        fn = plan.graph.functions[sym]
        by_name = {k.name: k for k in f.kernels}
        for node in fn.graph.nodes:
            wl = kernel_workload(node, fn.graph.functions)
            if not wl.is_mac:
                continue
            m = sim.Schedule.from_dict(by_name[node.name].schedule).mapping
            assert m is not None
            ev = evaluate(hierarchy_of(hw), nest_from_workload(wl), m)      # checks it, too
            assert ev.cycles <= kernel_mapping(wl, hw)[2].cycles
            w = walk(hierarchy_of(hw), nest_from_workload(wl), m)
            assert w.cycles >= ev.cycles
            g, mm, n, _ = wl.gemm_view()
            vec = vector_cycles(hw, g * mm * n, wl.epilogue)
            assert ev.compute_cycles + vec <= by_name[node.name].cycles <= w.cycles + vec
            assert ev.compute_cycles >= -(-wl.macs // hw.pes)
            mac += 1
    assert mac >= 2, "both convs (and the dense layer) are offloaded"


def test_packed_plan_runs_and_matches_the_model(plan, tmp_path):
    p = tmp_path / "plan.zip"
    plan.save(p)
    pm = read_packed(p)
    assert pm.manifest["hardware"] == plan.hw.to_dict() and "levels" in pm.manifest["hardware"]
    hw = sim.HardwareConfig.from_dict(pm.manifest["hardware"], complete=True)
    assert hw.fingerprint() == plan.hw.fingerprint()
    x = np.random.default_rng(0).standard_normal((1, 8, 16, 16)).astype(np.float32)
    res = sim.load(p).run({"x": x})
    np.testing.assert_allclose(list(res.outputs.values())[0], interpret(small_net(), [x])[0], rtol=1e-4, atol=1e-5)
    assert res.latency_s == pytest.approx(plan.latency_s, rel=1e-9)


def test_predicted_latency_equals_the_simulator_on_the_plan_graph(plan):
    by_key = {k.workload: sim.Schedule.from_dict(k.schedule) for f in plan.cost.functions.values()
              for k in f.kernels}
    ref = sim.cost_graph(plan.graph, plan.hw, schedules=by_key, fidelity="tile")
    assert plan.latency_s == pytest.approx(ref.latency_s, rel=1e-12)
    assert plan.energy_j == pytest.approx(ref.energy_j, rel=1e-9)
