"""tuner.Plan: the packed archive it writes (read back with partition.read_packed and the standalone
reader), its predicted figures recomputed from the archive with the simulator, and its summary."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sim
from partition import interpret, read_packed
from partition.builder import GraphBuilder
from tuner import tune

ROOT = Path(__file__).resolve().parents[2]


def small_cnn(seed=0):
    b = GraphBuilder("small_cnn", seed)
    x = b.input("x", (1, 3, 16, 16))
    y = b.relu(b.conv_bn(x, 8, 3, name="c1"), name="r1")
    y = b.relu(b.conv_bn(y, 16, 3, name="c2"), name="r2")
    y = b.max_pool2d(y, kernel=(2, 2), strides=(2, 2), name="p")
    y = b.dense(b.flatten(y, name="f"), 10, name="fc")
    return b.finish([b.softmax(y, name="s")])


def fast_link_hw():
    """edge-npu with a link fast enough that offloading pays, so the plan has external functions."""
    return sim.HardwareConfig.from_dict({"base": "edge-npu", "name": "edge-fast-link",
                                         "link": {"bytes_per_s": 1e11, "launch_latency_s": 1e-7}})


@pytest.fixture(scope="module")
def plan():
    return tune(small_cnn(), fast_link_hw(), trials=8, progress=False, model_name="small_cnn")


@pytest.fixture(scope="module")
def archive(plan, tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "plan.zip"
    plan.save(path)
    return path


def test_plan_offloads_and_is_complete(plan):
    assert plan.cost.functions, "fast link: something must be offloaded"
    assert plan.target == "edge-npu" and plan.objective == "latency"
    for sym, fc in plan.cost.functions.items():
        body = plan.graph.functions[sym].graph
        assert set(plan.schedules[sym]) == {n.name for n in body.nodes}
        assert fc.calls >= 1
    b = plan.cost.total
    assert plan.latency_s == pytest.approx(b.host_s + b.link_s + b.launch_s + b.device_s)


def test_archive_round_trip(plan, archive):
    pm = read_packed(archive)
    m = pm.manifest
    assert m["model"]["name"] == "small_cnn"
    assert m["objective"] == "latency"
    assert m["hardware"] == plan.hw.to_dict()
    assert m["predicted"]["latency_s"] == pytest.approx(plan.latency_s)
    assert m["predicted"]["energy_j"] == pytest.approx(plan.energy_j)
    assert set(m["externals"]) == set(plan.cost.functions)
    assert set(m["baselines"]) == {"greedy_byoc", "all_host", "default_schedules"}
    for sym, doc in pm.externals.items():
        got = {k: sim.Schedule.from_dict(v) for k, v in doc["schedules"].items()}
        assert got == dict(plan.schedules[sym])
        body = pm.function(sym).graph
        values = [*body.inputs, *(o for n in body.nodes for o in n.outputs)]
        assert set(doc["buffer_plan"]) == {v.name for v in values}
        # fp32 activations live on the int8 device (and cross the link) as one-byte words
        assert {k: v["bytes"] for k, v in doc["buffer_plan"].items()} == {v.name: v.type.size for v in values}
        assert doc["codegen"]["target"] == "edge-npu"
        fc = plan.cost.functions[sym]
        assert doc["predicted"]["calls"] == fc.calls == m["predicted"]["functions"][sym]["calls"]
        assert doc["predicted"]["cycles"] == sum(k["cycles"] for k in doc["predicted"]["kernels"].values())
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(interpret(pm.host_graph, [x])[0], interpret(small_cnn(), [x])[0], rtol=1e-5, atol=1e-6)


def test_predicted_function_cost_recomputed_from_archive(plan, archive):
    """Launch + link transfers of the function's parameters and results + its kernels' simulated
    cycles under the archived schedules, all read back from the archive alone."""
    pm = read_packed(archive)
    hw = sim.HardwareConfig.from_dict(pm.manifest["hardware"])
    for sym, doc in pm.externals.items():
        body = pm.function(sym).graph
        scope = {**pm.host_graph.functions, **body.functions}
        crossing = [v.type for v in [*body.inputs, *body.outputs]]
        assert all(t.dtype == "float32" for t in crossing)
        # On the link in device words; the host converts each fp32 tensor (read 4 B, write a word).
        wb = hw.array.word_bytes
        nbytes = sum(t.size * wb for t in crossing)
        h = hw.host
        convert = sum(h.op_overhead_s + max(t.size / h.peak_flops, t.size * (4 + wb) / h.mem_bytes_per_s)
                      for t in crossing) if wb != 4 else 0.0
        cycles = 0
        for n in body.nodes:
            fn = scope[n.attrs["callee"]] if n.op == "call" else None
            if fn is not None:
                ops = fn.graph.nodes
                wl = sim.workload_of(ops[0], epilogue=tuple(o.op for o in ops[1:]))
            else:
                wl = sim.workload_of(n)
            s = sim.Schedule.from_dict(doc["schedules"][n.name])
            cycles += sim.simulate(wl, hw, s, fidelity="tile").total_cycles
        want = hw.link.launch_latency_s + nbytes / hw.link.bytes_per_s + convert + cycles / hw.clock_hz
        got = pm.manifest["predicted"]["functions"][sym]
        assert got["latency_s"] == pytest.approx(want, rel=1e-9)
        assert got["cycles"] == cycles


def test_summary_is_strict_json(plan):
    s = plan.summary()
    text = json.dumps(s, allow_nan=False)
    back = json.loads(text)
    assert back["latency_s"] == pytest.approx(plan.latency_s)
    assert set(back["baselines"]) == {"greedy_byoc", "all_host", "default_schedules"}
    for v in back["baselines"].values():
        assert v["latency_s"] > 0 and v["energy_j"] > 0
    assert back["partition"]["offloaded"] == len(plan.decision.offloaded)


def test_same_plan_same_bytes(plan, archive, tmp_path):
    again = tmp_path / "again.zip"
    plan.save(again)
    assert again.read_bytes() == archive.read_bytes()


def test_standalone_reader_lists_the_functions(plan, archive):
    out = subprocess.run([sys.executable, str(ROOT / "experiments" / "read_packed.py"), str(archive)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for sym in plan.cost.functions:
        assert sym in out.stdout


def test_predicted_latency_equals_the_simulator_on_the_plan_graph(plan):
    """sim.cost_graph walks the partitioned graph on its own (host model, link, launch and
    simulate_function per call); with the plan's schedules it must give the plan's latency."""
    by_key = {k.workload: sim.Schedule.from_dict(k.schedule) for f in plan.cost.functions.values()
              for k in f.kernels}
    ref = sim.cost_graph(plan.graph, plan.hw, schedules=by_key, fidelity="tile")
    assert plan.latency_s == pytest.approx(ref.latency_s, rel=1e-12)
    assert plan.cost.total.link_s == pytest.approx(ref.link_s, rel=1e-12)
    assert plan.cost.total.device_s == pytest.approx(ref.device_s, rel=1e-12)
