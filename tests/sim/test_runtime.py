"""sim.graph.runtime: a packed module loads back and runs on the simulated device. Outputs equal the
reference interpreter on the source model; the latency breakdown follows what actually ran
(host ops of the taken If branch, one device call per Loop trip), uses the archive's schedules and
hardware config, and its host/link/launch terms match hand-computed figures."""
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

import sim
from partition import Function, Graph, PackedFormatError, graph_hash, interpret, load_onnx, models, partition_for, write_packed
from sim.graph.runtime import RunInputError, RuntimeLoadError, example_inputs, load
from sim.graph.subgraph import kernel_workload

HW = sim.load_hw("edge-npu")
SHARED = Path(__file__).resolve().parents[3] / "shared" / "models"  # ../shared beside the checkout
RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)
WD = RNG.standard_normal((10, 64)).astype(np.float32)
X = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)


# ----------------------------------------------------------------------------- archives
def manifest_fields(g: Graph, externals, hw=HW, name="m"):
    return {"model": {"name": name, "source_graph_hash": graph_hash(g)}, "hardware": hw.to_dict(),
            "objective": "latency",
            "predicted": {"latency_s": 0.0, "energy_j": 0.0,
                          "functions": {s: {"latency_s": 0.0, "energy_j": 0.0} for s in externals}}}


def export_default(g: Graph, path, hw=HW) -> Graph:
    """BYOC-partition ``g`` for ``hw`` and write it with every kernel at sim.default_schedule."""
    part = partition_for(g, hw.partition_target())
    ext = {}
    for sym, fn in part.functions.items():
        if "Compiler" in fn.attrs:
            ext[sym] = {"schedules": {n.name: sim.default_schedule(kernel_workload(n, fn.graph.functions), hw).to_dict()
                                      for n in fn.graph.nodes}}
    write_packed(path, manifest_fields=manifest_fields(g, ext, hw, g.name), host_graph=part, externals=ext)
    return part


def tinynet() -> Graph:
    g = Graph("tinynet")
    x = g.add_input("x", (1, 3, 8, 8))
    y = g.add_node("conv2d", [x, g.add_const(W, "w")], {"pads": (1, 1, 1, 1)}).output
    y = g.add_node("bias_add", [y, g.add_const(B, "b")], {"axis": 1}).output
    y = g.add_node("relu", [y]).output
    y = g.add_node("flatten", [y]).output
    y = g.add_node("dense", [y, g.add_const(WD[:, :64].repeat(4, axis=1), "wd")]).output
    g.set_outputs([g.add_node("softmax", [y], {"axis": -1}).output])
    return g


def tinynet_partitioned() -> Graph:
    """By hand: one external function with one kernel (the conv+bias+relu composite), so its device
    cycles are exactly that kernel's simulated cycles (no intermediates to keep on chip)."""
    comp = Graph("comp")
    a, w, b = comp.add_input("a", (1, 3, 8, 8)), comp.add_input("w", W.shape), comp.add_input("b", B.shape)
    y = comp.add_node("conv2d", [a, w], {"pads": (1, 1, 1, 1)}).output
    y = comp.add_node("bias_add", [y, b], {"axis": 1}).output
    comp.set_outputs([comp.add_node("relu", [y]).output])
    ext = Graph("npu_main_0")
    xa = ext.add_input("x", (1, 3, 8, 8))
    ext.functions["npu.conv2d_bias_relu_0"] = Function(comp, {"Composite": "edge-npu.conv2d_bias_relu",
                                                              "PartitionedFromPattern": "conv2d_bias_add_relu_"})
    ext.set_outputs([ext.add_node("call", [xa, ext.add_const(W, "w"), ext.add_const(B, "b")],
                                  {"callee": "npu.conv2d_bias_relu_0"}, name="k0").output])
    g = Graph("tinynet")
    g.functions["npu_main_0"] = Function(ext, {"Compiler": "edge-npu", "global_symbol": "npu_main_0", "Primitive": 1})
    x = g.add_input("x", (1, 3, 8, 8))
    y = g.add_node("call", [x], {"callee": "npu_main_0"}).output
    y = g.add_node("flatten", [y]).output
    y = g.add_node("dense", [y, g.add_const(WD[:, :64].repeat(4, axis=1), "wd")]).output
    g.set_outputs([g.add_node("softmax", [y], {"axis": -1}).output])
    return g


def conv_workload():
    fn = tinynet_partitioned().functions["npu_main_0"]
    return kernel_workload(fn.graph.nodes[0], fn.graph.functions)


def write_tinynet(path, schedule=None, hw=HW, **over):
    wl = conv_workload()
    s = schedule or sim.default_schedule(wl, hw)
    ext = {"npu_main_0": {"schedules": {"k0": s.to_dict()}}}
    kw = dict(manifest_fields=manifest_fields(tinynet(), ext, hw, "tinynet"), host_graph=tinynet_partitioned(),
              externals=ext)
    kw.update(over)
    write_packed(path, **kw)
    return path


def exact_or_close(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- numerics and timing
def test_tinynet_outputs_and_hand_computed_breakdown(tmp_path):
    mod = load(write_tinynet(tmp_path / "t.zip"))
    res = mod.run({"x": X})
    assert list(res.outputs) == ["softmax_1"] or len(res.outputs) == 1
    exact_or_close(next(iter(res.outputs.values())), interpret(tinynet(), [X])[0])
    b = res.breakdown
    # Host: flatten, dense, softmax executed; the call is not a host op.
    assert b.host_ops == 3
    # Link: only activations cross per call (weights are loaded once): 1x3x8x8 in, 1x4x8x8 out, fp32
    # in the graph, one-byte words on the int8 device (the host quantizes and dequantizes them).
    (f,) = b.functions
    assert f.symbol == "npu_main_0" and f.calls == 1
    assert HW.array.word_bytes == 1
    assert f.per_call.link_bytes == 3 * 64 + 4 * 64 == 448
    assert b.link_s == pytest.approx(448 / 350e6, rel=1e-12)
    h = HW.host
    conv_s = sum(h.op_overhead_s + max(n / h.peak_flops, n * (4 + 1) / h.mem_bytes_per_s) for n in (192, 256))
    conv_pj = sum(n * HW.energy.host_pj_per_flop + n * 5 * HW.energy.dram_pj_per_byte for n in (192, 256))
    assert b.launch_s == pytest.approx(100e-6, rel=1e-12)
    # Device: the one kernel's tile-level cycles under the archive's schedule, at 500 MHz.
    rep = sim.simulate(conv_workload(), HW, sim.default_schedule(conv_workload(), HW), fidelity="tile")
    assert f.cycles == rep.total_cycles
    assert b.device_s == pytest.approx(rep.total_cycles / 500e6, rel=1e-12)
    assert b.latency_s == pytest.approx(b.host_s + b.link_s + b.launch_s + b.device_s)
    # Energy: host ops at host_pj_per_flop per FLOP plus their bytes at DRAM energy, the link's bytes,
    # and the kernel's own energy.
    from partition.ops import op_cost
    host_nodes = [n for n in tinynet_partitioned().nodes if n.op != "call"]
    host_pj = sum(op_cost(n).flops * HW.energy.host_pj_per_flop
                  + (op_cost(n).bytes_in + op_cost(n).bytes_out) * HW.energy.dram_pj_per_byte for n in host_nodes)
    assert host_pj > 0 and b.host_j == pytest.approx((host_pj + conv_pj) * 1e-12, rel=1e-12)
    assert b.host_s == pytest.approx(sum(sim.graph.subgraph.host_op_seconds(n, HW) for n in host_nodes) + conv_s, rel=1e-12)
    assert b.energy_j == pytest.approx(rep.energy_j + 448 * HW.energy.link_pj_per_byte * 1e-12
                                       + (host_pj + conv_pj) * 1e-12, rel=1e-9)
    d = b.to_dict()
    assert d["functions"]["npu_main_0"]["cycles"] == rep.total_cycles and d["calls"] == 1


def test_archive_schedule_is_the_one_simulated(tmp_path):
    wl = conv_workload()
    dflt = sim.default_schedule(wl, HW)
    other = sim.Schedule(dataflow="os", spatial=("m", "n"), tile_m=8, tile_n=4, tile_k=9,
                         loop_order="kmn", double_buffer=False).check(wl, HW)
    cycles = {}
    for name, s in (("dflt", dflt), ("other", other)):
        mod = load(write_tinynet(tmp_path / f"{name}.zip", s))
        assert mod.schedules["npu_main_0"]["k0"] == s
        cycles[name] = mod.run({"x": X}).breakdown.functions[0].cycles
        assert cycles[name] == sim.simulate(wl, HW, s, fidelity="tile").total_cycles
    assert cycles["dflt"] != cycles["other"]
    # The analytical fidelity is the simulator's closed form under the same schedule.
    mod = load(tmp_path / "other.zip", fidelity="analytical")
    assert mod.reports["npu_main_0"].device_cycles == sim.simulate(wl, HW, other, fidelity="analytical").total_cycles


def test_hardware_config_comes_from_the_archive(tmp_path):
    fast = HW.with_overrides({"link.bytes_per_s": 700e6, "clock.freq_mhz": 1000.0})
    slow = load(write_tinynet(tmp_path / "slow.zip")).run({"x": X}).breakdown
    quick = load(write_tinynet(tmp_path / "fast.zip", hw=fast)).run({"x": X}).breakdown
    assert quick.link_s == pytest.approx(slow.link_s / 2)
    wl = conv_workload()
    assert quick.functions[0].cycles == sim.simulate(wl, fast, sim.default_schedule(wl, HW), "tile").total_cycles


def if_model() -> Graph:
    """x[1000] -> if cond: neg(neg(neg(x))) else: neg(x). Host timing per op is bytes-bound on
    edge-npu (8000 B / 4 GB/s = 2 us > 1000 FLOP / 10 GFLOP/s) plus 5 us overhead."""
    def branch(n):
        b = Graph(f"neg{n}")
        y = b.add_input("x", (1000,))
        for _ in range(n):
            y = b.add_node("neg", [y]).output
        b.set_outputs([y])
        return b
    g = Graph("ifnet")
    c, x = g.add_input("cond", (), "bool"), g.add_input("x", (1000,))
    g.set_outputs([g.add_node("if", [c, x], {"then_branch": branch(3), "else_branch": branch(1)}).output])
    return g


def test_host_time_follows_the_branch_taken(tmp_path):
    g = if_model()
    write_packed(tmp_path / "if.zip", manifest_fields=manifest_fields(g, {}), host_graph=g, externals={})
    mod = load(tmp_path / "if.zip")
    x = np.arange(1000, dtype=np.float32)
    if_node = 5e-6   # control flow costs its dispatch; the ops of the branch taken cost the rest
    neg = 5e-6 + 8000 / 4e9
    neg_j = (1000 * HW.energy.host_pj_per_flop + 8000 * HW.energy.dram_pj_per_byte) * 1e-12
    for cond, n, sign in ((True, 3, -1), (False, 1, -1)):
        res = mod.run({"cond": np.array(cond), "x": x})
        np.testing.assert_array_equal(next(iter(res.outputs.values())), sign * x)
        assert res.breakdown.host_ops == 1 + n
        assert res.breakdown.host_s == pytest.approx(if_node + n * neg, rel=1e-12)
        assert res.breakdown.functions == () and res.energy_j == pytest.approx(n * neg_j, rel=1e-12)


def test_loop_calls_the_device_once_per_trip(tmp_path):
    g = models.get("byoc_demo")
    part = export_default(g, tmp_path / "demo.zip")
    (loop,) = [n for n in part.nodes if n.op == "loop"]
    trips = int(loop.inputs[0].data)
    mod = load(tmp_path / "demo.zip")
    x = example_inputs(mod, seed=3)
    res = mod.run(x)
    for got, want in zip(res.outputs.values(), interpret(g, x)):
        exact_or_close(got, want)
    (f,) = res.breakdown.functions
    assert trips > 1 and f.calls == trips
    assert f.latency_s == pytest.approx(trips * mod.reports[f.symbol].latency_s)


# ----------------------------------------------------------------------------- round trips
def _round_trip(g: Graph, path, seed=0):
    export_default(g, path)
    mod = load(path)
    x = example_inputs(mod, seed)
    res = mod.run(x)
    want = interpret(g, x)
    assert len(res.outputs) == len(dict.fromkeys(v.name for v in g.outputs))
    names = list(dict.fromkeys(v.name for v in mod.graph.outputs))
    first = {}
    for v, a in zip(mod.graph.outputs, want):
        first.setdefault(v.name, a)
    for n in names:
        exact_or_close(res.outputs[n], first[n])
    assert res.latency_s > 0 and np.isfinite(res.latency_s) and res.energy_j >= 0
    return mod, res


FAST_BUILTIN = ["byoc_demo", "bert_tiny"]
SLOW_BUILTIN = ["resnet18", "ssd_detector", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
                "efficientnet_b0", "resnet50", "bert_base"]


def test_builtin_list_is_covered():
    assert {m.name for m in models.list_models()} == set(FAST_BUILTIN + SLOW_BUILTIN)


@pytest.mark.parametrize("name", FAST_BUILTIN)
def test_builtin_model_round_trip(name, tmp_path):
    mod, res = _round_trip(models.get(name), tmp_path / f"{name}.zip")
    assert res.breakdown.functions, "something must be offloaded"


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_BUILTIN)
def test_large_builtin_model_round_trip(name, tmp_path):
    _round_trip(models.get(name), tmp_path / f"{name}.zip")


def _shared(slow: bool):
    if not SHARED.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason="shared models not present"))]
    big = ("bert_base", "bert_small", "resnet50", "mobilenet_v2")
    files = sorted(p.name for p in SHARED.glob("*.onnx"))
    return [f for f in files if any(b in f for b in big) == slow]


@pytest.mark.parametrize("fname", _shared(slow=False))
def test_shared_onnx_round_trip(fname, tmp_path):
    _round_trip(load_onnx(SHARED / fname), tmp_path / "m.zip")


@pytest.mark.slow
@pytest.mark.parametrize("fname", _shared(slow=True))
def test_large_shared_onnx_round_trip(fname, tmp_path):
    _round_trip(load_onnx(SHARED / fname), tmp_path / "m.zip")


# ----------------------------------------------------------------------------- inputs
def test_example_inputs_respect_index_ranges_and_masks():
    g = models.get("bert_tiny")
    a, b = example_inputs(g, seed=1), example_inputs(g, seed=1)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    vocab = next(n.inputs[0].shape[0] for n in g.nodes if n.op == "gather" and n.inputs[1].name == "input_ids")
    ids = a["input_ids"]
    assert ids.dtype == np.int64 and ids.shape == (1, 128)
    assert ids.min() >= 0 and ids.max() < vocab and ids.max() > 10 * 128  # spread over the vocabulary
    assert np.array_equal(a["attention_mask"], np.ones((1, 128), np.int64))
    img = example_inputs(models.get("byoc_demo"))["x"]
    assert img.dtype == np.float32 and img.shape == (1, 512) and 0.5 < img.std() < 1.5
    assert not np.array_equal(example_inputs(g, seed=2)["input_ids"], ids)


def test_index_bound_follows_casts_into_onnx_bert():
    if not (SHARED / "bert_small.shapes.onnx").exists():
        pytest.skip("shared models not present")
    g = load_onnx(SHARED / "bert_small.shapes.onnx")
    x = example_inputs(g)
    assert x["input_ids"].max() < 30522 and x["token_type_ids"].max() < 2
    assert (x["attention_mask"] == 1).all()


@pytest.mark.parametrize("inputs,msg", [
    ({"x": X, "y": X}, "unknown input(s) 'y'; the module takes x"),
    ({}, "missing input(s) 'x'; the module takes x"),
    ({"x": X[:, :2]}, "input 'x': expected shape [1, 3, 8, 8], got [1, 2, 8, 8]"),
    ({"x": X.astype(np.complex64)}, "input 'x': expected dtype float32, got complex64"),
    ([X, X], "the module takes 1 input(s) (x), got 2"),
])
def test_wrong_inputs_give_one_line(tmp_path, inputs, msg):
    mod = load(write_tinynet(tmp_path / "t.zip"))
    with pytest.raises(RunInputError) as e:
        mod.run(inputs)
    assert str(e.value) == msg


def embed_model() -> Graph:
    g = Graph("embed")
    ids = g.add_input("ids", (1, 6), "int64")
    e = g.add_node("gather", [g.add_const(RNG.standard_normal((50, 16)).astype(np.float32), "table"), ids],
                   {"axis": 0}).output
    e = g.add_node("reshape", [e], {"shape": (6, 16)}).output
    g.set_outputs([g.add_node("dense", [e, g.add_const(RNG.standard_normal((8, 16)).astype(np.float32), "w")]).output])
    return g


def test_inputs_of_another_dtype_are_cast_only_when_exact(tmp_path):
    g = embed_model()
    export_default(g, tmp_path / "b.zip")
    mod = load(tmp_path / "b.zip")
    x = example_inputs(mod)
    assert x["ids"].max() < 50
    want = interpret(g, x)[0]
    for exact in (x["ids"].astype(np.int32), x["ids"].astype(np.float32), x["ids"].astype(np.uint8)):
        with pytest.warns(UserWarning, match=f"input 'ids': cast from {exact.dtype.name} to int64 "
                                             r"\(every value is exact\)"):
            got = mod.run({"ids": exact}).outputs
        np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-5)
    frac = x["ids"].astype(np.float32) + 0.5
    with pytest.raises(RunInputError, match="input 'ids': expected dtype int64, got float32, and 6 of 6 values "
                                            "would change in the cast"):
        mod.run({"ids": frac})
    with pytest.raises(RunInputError, match="got float64, and 1 of 6 values"):
        mod.run({"ids": np.where(np.arange(6) == 2, np.nan, x["ids"]).reshape(1, 6)})
    # A list in input order works too and gives the same outputs.
    y = example_inputs(mod)
    by_name = mod.run(y).outputs
    by_pos = mod.run([y[s.name] for s in mod.inputs]).outputs
    assert all(np.array_equal(by_name[k], by_pos[k]) for k in by_name)


# ----------------------------------------------------------------------------- bad archives
def test_malformed_archive_is_the_packed_format_error(tmp_path):
    p = write_tinynet(tmp_path / "t.zip")
    data = p.read_bytes()
    (tmp_path / "trunc.zip").write_bytes(data[: len(data) // 2])
    with pytest.raises(PackedFormatError, match=r"^trunc.zip: not a readable zip archive"):
        load(tmp_path / "trunc.zip")
    with pytest.raises(PackedFormatError, match="no such file"):
        load(tmp_path / "nope.zip")


def test_hardware_that_is_not_a_config_is_one_line(tmp_path):
    ext = {"npu_main_0": {"schedules": {}}}
    f = manifest_fields(tinynet(), ext)
    f["hardware"] = {"name": "x", "pe_rows": 16}
    write_tinynet(tmp_path / "t.zip", manifest_fields=f, externals=ext)
    with pytest.raises(RuntimeLoadError, match=r"^manifest.json: hardware is not a valid hardware config: "
                                               r"hardware.pe_rows is not a known section"):
        load(tmp_path / "t.zip")


def test_hardware_may_not_point_at_a_local_file(tmp_path):
    ext = {"npu_main_0": {"schedules": {}}}
    f = manifest_fields(tinynet(), ext)
    f["hardware"] = {**f["hardware"], "base": "/etc/passwd"}
    write_tinynet(tmp_path / "t.zip", manifest_fields=f, externals=ext)
    with pytest.raises(RuntimeLoadError, match=r"^manifest.json: hardware must be a complete config, without 'base'$"):
        load(tmp_path / "t.zip")


def test_bad_schedules_are_one_line(tmp_path):
    bad = {"dataflow": "xs", "spatial": ["k", "n"], "tile_m": 1, "tile_n": 1, "tile_k": 1,
           "loop_order": "mnk", "double_buffer": True, "epilogue": []}
    ext = {"npu_main_0": {"schedules": {"k0": bad}}}
    write_tinynet(tmp_path / "a.zip", externals=ext)
    with pytest.raises(RuntimeLoadError, match=r"^external/npu_main_0.json: schedule of kernel 'k0': "
                                               r"schedule dataflow must be one of"):
        load(tmp_path / "a.zip")
    # Legal in itself but its tiles overflow edge-npu's buffers.
    huge = sim.Schedule(dataflow="ws", spatial=("k", "n"), tile_m=64, tile_n=4, tile_k=27, double_buffer=True)
    tight = HW.with_overrides({"buffers.output_bytes": 64})
    write_tinynet(tmp_path / "b.zip", schedule=huge, hw=tight)
    with pytest.raises(RuntimeLoadError, match=r"^external/npu_main_0.json: schedule of kernel 'k0' cannot run on edge-npu"):
        load(tmp_path / "b.zip")


def test_load_reads_no_code(tmp_path):
    """The archive is plain data: a module that loads has only JSON and npy members."""
    p = write_tinynet(tmp_path / "t.zip")
    with zipfile.ZipFile(p) as zf:
        names = zf.namelist()
    assert sorted(names) == ["external/npu_main_0.json", "graph.json", "manifest.json", "params.npz"]
    assert load(p).path == os.fspath(p)
