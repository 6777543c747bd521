import json

import numpy as np
import pytest

import sim
from partition import Graph, partition_for
from partition.models import get
from sim import Schedule, Workload, cost_graph, load_hw, simulate, simulate_function
from tuner.cli import main
from sim import default_schedule, workload_of


def _two_conv_graph(c=16, hw_=28):
    g = Graph("two")
    x = g.add_input("x", (1, c, hw_, hw_))
    w1 = g.add_const(np.zeros((c, c, 3, 3), "float32"), "w1")
    w2 = g.add_const(np.zeros((c, c, 3, 3), "float32"), "w2")
    a = g.add_node("conv2d", [x, w1], {"pads": (1, 1, 1, 1)}).output
    r = g.add_node("relu", [a]).output
    b = g.add_node("conv2d", [r, w2], {"pads": (1, 1, 1, 1)}).output
    g.set_outputs([g.add_node("relu", [b]).output])
    return g


def _external(g, hw):
    pg = partition_for(g, hw.partition_target())
    ext = [f for f in pg.functions.values() if "Compiler" in f.attrs]
    assert len(ext) == 1
    return pg, ext[0]


def test_function_keeps_intermediate_on_chip_and_fuses_epilogue():
    hw = load_hw("cloud-npu")
    g = _two_conv_graph()
    pg, fn = _external(g, hw)
    rep = simulate_function(fn, hw)
    assert len(rep.kernels) == 2
    assert all(k.op.endswith("conv2d_relu") for k in rep.kernels)
    assert rep.spilled_bytes == 0
    # each kernel alone would write/read the 16x28x28 intermediate through DRAM
    wl = Workload.conv2d(1, 16, 28, 28, 16, 3, 3, pad=1, epilogue=("relu",))
    alone = simulate(wl, hw, default_schedule(wl, hw))
    # the 16x28x28 intermediate (bf16 words) is neither written by the first nor read by the second
    inter = 16 * 28 * 28 * 2
    assert sum(k.report.dram_bytes for k in rep.kernels) == 2 * alone.dram_bytes - 2 * inter
    assert rep.device_cycles < 2 * alone.total_cycles                            # the on-chip hand-off saves time
    # link: the float32 input and output of the call as bf16 words; weights counted once, as words
    assert hw.array.word_bytes == 2
    assert rep.link_bytes == 2 * 16 * 28 * 28 * 2
    assert rep.weight_bytes == 2 * 16 * 16 * 9 * 2
    assert rep.link_s == pytest.approx(rep.link_bytes / hw.link.bytes_per_s)
    assert rep.latency_s == pytest.approx(rep.device_s + rep.link_s + hw.link.launch_latency_s)
    # the host converts each fp32 tensor to bf16 and back: read 4 B, write 2 B per element
    n, h = 16 * 28 * 28, hw.host
    assert rep.convert_s == pytest.approx(2 * (h.op_overhead_s + max(n / h.peak_flops, n * 6 / h.mem_bytes_per_s)))


def test_intermediate_spills_when_buffer_too_small():
    hw = load_hw("cloud-npu").with_overrides({"buffers.unified_bytes": 64 * 1024})
    pg, fn = _external(_two_conv_graph(c=32, hw_=56), hw)
    rep = simulate_function(fn, hw)
    assert rep.spilled_bytes == 32 * 56 * 56 * hw.array.word_bytes


def test_cost_graph_splits_host_link_device():
    hw = load_hw("edge-npu")
    g = get("resnet18")
    c = cost_graph(partition_for(g, hw.partition_target()), hw)
    assert c.calls and c.host_ops
    assert c.latency_s == pytest.approx(c.host_s + c.link_s + c.launch_s + c.device_s)
    assert c.launch_s == pytest.approx(len(c.calls) * hw.link.launch_latency_s)
    # edge-npu offloads only conv/GEMM: pooling and the residual adds stay on the host
    assert {"max_pool2d", "add"} & {h.op for h in c.host_ops}
    d = c.to_dict()
    assert d["latency_s"] == pytest.approx(c.latency_s)


def test_schedules_override_defaults():
    hw = load_hw("cloud-npu")
    pg, fn = _external(_two_conv_graph(), hw)
    base = simulate_function(fn, hw)
    wl = Workload.conv2d(1, 16, 28, 28, 16, 3, 3, pad=1, epilogue=("relu",))
    slow = Schedule("os", ("m", "n"), 16, 16, 16, "kmn", False, ("relu",))
    rep = simulate_function(fn, hw, {wl.key: slow})
    assert rep.kernels[0].report.schedule == slow.to_dict()
    assert rep.device_cycles > base.device_cycles


@pytest.mark.parametrize("preset", ["edge-npu", "cloud-npu"])
def test_cli_simulate_json(capsys, preset):
    assert main(["simulate", "--model", "bert_tiny", "--hw", preset, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["latency_s"] == pytest.approx(d["host_s"] + d["link_s"] + d["launch_s"] + d["device_s"])
    assert d["calls"] and all(k["total_cycles"] >= k["roofline_cycles"] - 1 for c in d["calls"] for k in c["kernels"])


def test_cli_hw_list_show_and_errors(capsys, tmp_path):
    assert main(["hw", "list", "--json"]) == 0
    names = {r["name"] for r in json.loads(capsys.readouterr().out)}
    assert names == set(sim.hw.presets.names())
    assert main(["hw", "show", "tpu-v1-like", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["array"]["rows"] == 256 and len(d["fingerprint"]) == 64
    bad = tmp_path / "bad.toml"
    bad.write_text('base = "edge-npu"\n[dram]\nbytes_per_cycle = -1\n')
    assert main(["simulate", "--model", "resnet18", "--hw", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"accel-tune: error: hardware config {bad}: hardware.dram.bytes_per_cycle must be a number "
                   f"from 0.001 to 1e+06 bytes/cycle, got -1")


def test_vector_ops_from_onnx_exports_offload_and_cost():
    """Activations, log-softmax, reductions and layout ops that exporters emit can be listed in a
    config's support.ops: they are offloaded and costed on the vector unit (transcendentals at
    special_op_cycles each), and the partitioned graph still computes the source model's numbers."""
    from partition import interpret
    hw = load_hw("edge-npu").with_overrides(
        {"support.ops": ["dense", "mish", "log_softmax", "reduce_l2", "depth_to_space", "min", "prelu"],
         "support.patterns": []})
    g = Graph("vec")
    x = g.add_input("x", (1, 16, 8, 8))
    y = g.add_node("mish", [x]).output
    y = g.add_node("prelu", [y, g.add_const(np.full((16, 1, 1), 0.1, np.float32), "slope")]).output
    y = g.add_node("depth_to_space", [y], {"blocksize": 2, "mode": "DCR"}).output
    y = g.add_node("min", [y, g.add_const(np.float32(2.0), "cap")]).output
    y = g.add_node("reduce_l2", [y], {"axes": (2, 3), "keepdims": False}).output
    g.set_outputs([g.add_node("log_softmax", [y], {"axis": -1}).output])
    part = partition_for(g, hw.partition_target())
    c = cost_graph(part, hw)
    assert len(c.calls) == 1 and not c.host_ops
    xin = np.random.default_rng(0).standard_normal((1, 16, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(interpret(part, [xin])[0], interpret(g, [xin])[0], rtol=1e-6)
    w = workload_of(next(n for n in g.nodes if n.op == "mish"))
    assert w.kind == "elementwise" and dict(w.dims)["special_ops"] == 16 * 8 * 8
    assert workload_of(g.nodes[-1]).kind == "softmax"
    assert workload_of(next(n for n in g.nodes if n.op == "reduce_l2")).kind == "reduce"
