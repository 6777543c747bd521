"""partition.onnx.export: a packed plan as ONNX (regions as model-local functions) and back.
Plans here are greedy BYOC partitions for the built-in target npu-full (regions everywhere,
inside Loop and If bodies too) with a stand-in hardware object, as tests/partition/test_packed.py
writes them; tests/tuner/test_cli_export.py covers tuned plans on hardware presets."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from partition import graph_hash, graph_to_json, interpret, load_onnx, models, partition_for, read_packed
from partition.onnx import export
from partition.packed import write_packed

ZOO = Path(__file__).resolve().parents[1] / "data" / "zoo"
ZOO_FILES = sorted(p.name for p in ZOO.glob("*.onnx"))
# one of each kind: convolutions and resize, recurrent, attention, data-dependent sizes (NMS,
# NonZero, TopK), 3-D convolutions, pixel shuffle
FAST_ZOO = ["yolo_neck.ts.onnx", "gru_tagger.dynamo.onnx", "hf_gpt2.ts.onnx", "det_ssd.ts.onnx",
            "c3d_clip.ts.onnx", "espcn.dynamo.onnx"]


def greedy_plan(graph, path, target="npu-full"):
    """A packed plan of ``graph`` partitioned greedily for ``target``, with plan facts to carry."""
    pg = partition_for(graph, target)
    syms = [s for s, f in pg.functions.items() if "Compiler" in f.attrs]
    fields = {"model": {"name": graph.name, "source_graph_hash": graph_hash(graph)},
              "hardware": {"name": "npu-16x16", "pe_rows": 16}, "objective": "latency",
              "predicted": {"latency_s": 1e-3, "energy_j": 1e-6,
                            "functions": {s: {"latency_s": 1e-4, "energy_j": 1e-7, "cycles": 1000 + i}
                                          for i, s in enumerate(syms)}}}
    sched = {"dataflow": "ws", "spatial": ["k", "n"], "tile_m": 16, "tile_n": 16, "tile_k": 16,
             "loop_order": "mnk", "double_buffer": True, "epilogue": []}
    externals = {s: {"schedules": {pg.functions[s].graph.nodes[0].name: sched}} for s in syms}
    write_packed(path, manifest_fields=fields, host_graph=pg, externals=externals)
    return read_packed(path)


def zoo_inputs(fname, g):
    data = np.load(ZOO / (fname.split(".")[0] + ".npz"))
    return [data[f"in_{i}"].astype(v.dtype) for i, v in enumerate(g.inputs)]


def ort_run(model, graph, xs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {v.name: x for v, x in zip(graph.inputs, xs)})


def assert_close(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(a, b)


def check_exported(fname, tmp_path):
    g = load_onnx(ZOO / fname)
    mod = greedy_plan(g, tmp_path / "plan.zip")
    m = export.to_onnx(mod)  # check_model(full_check=True) inside
    xs = zoo_inputs(fname, g)
    assert_close(ort_run(m, mod.host_graph, xs), interpret(g, xs))
    return m, mod


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """byoc_demo: regions at top level and inside a Loop body and both branches of an If."""
    g = models.get("byoc_demo")
    mod = greedy_plan(g, tmp_path_factory.mktemp("demo") / "plan.zip")
    return g, mod, export.to_onnx(mod, hardware_fingerprint="f" * 64)


def test_regions_are_function_calls_with_plan_facts(demo):
    g, mod, m = demo
    onnx.checker.check_model(m, full_check=True)
    assert m.opset_import[0].version == export.OPSET and m.ir_version == export.IR_VERSION
    funcs = {f.name: f for f in m.functions}
    assert set(funcs) == set(mod.externals)
    calls = []

    def walk(graph):
        for n in graph.node:
            if n.domain.startswith("accel_tune."):
                calls.append(n)
            for a in n.attribute:
                if a.HasField("g"):
                    walk(a.g)
    walk(m.graph)
    assert {n.op_type for n in calls} == set(mod.externals)  # the Loop body and If branches too
    for n in calls:
        assert n.domain == "accel_tune.npu_full" == funcs[n.op_type].domain
        facts = {p.key: p.value for p in n.metadata_props}
        want = mod.manifest["predicted"]["functions"][n.op_type]
        assert facts["accel_tune.symbol"] == n.op_type
        assert int(facts["accel_tune.predicted.cycles"]) == want["cycles"]
        assert float(facts["accel_tune.predicted.energy_j"]) == want["energy_j"]
        assert json.loads(facts["accel_tune.schedules"]) == mod.externals[n.op_type]["schedules"]
        assert facts["accel_tune.hardware_fingerprint"] == "f" * 64
        ffacts = {p.key: p.value for p in funcs[n.op_type].metadata_props}
        assert {k: v for k, v in ffacts.items() if k != "accel_tune.external"} == facts
    # function bodies and the host part are standard ops only
    for f in m.functions:
        assert all(n.domain == "" for n in f.node)
    assert all(n.domain == "" for n in m.graph.node if n.op_type not in funcs)


def test_control_flow_runs_in_onnxruntime(demo):
    g, mod, m = demo
    x = np.random.default_rng(0).standard_normal((1, 512)).astype(np.float32)
    assert_close(ort_run(m, mod.host_graph, [x]), interpret(g, [x]))


def test_back_to_the_same_packed_plan(demo, tmp_path):
    g, mod, m = demo
    onnx.save(m, tmp_path / "demo.onnx")
    manifest = export.packed_from_onnx(tmp_path / "demo.onnx", tmp_path / "back.zip")
    back = read_packed(tmp_path / "back.zip")
    assert manifest["predicted"] == mod.manifest["predicted"]
    assert back.manifest["model"] == mod.manifest["model"]
    assert back.externals == mod.externals
    assert graph_to_json(back.host_graph)[0] == graph_to_json(mod.host_graph)[0]
    assert back.params.keys() == mod.params.keys()
    for k in mod.params:
        np.testing.assert_array_equal(back.params[k], mod.params[k])


def test_reimport_inlines_the_functions(demo, tmp_path):
    g, mod, m = demo
    onnx.save(m, tmp_path / "demo.onnx")
    back = load_onnx(tmp_path / "demo.onnx")
    assert not back.functions
    x = np.random.default_rng(1).standard_normal((1, 512)).astype(np.float32)
    assert_close(interpret(back, [x]), interpret(g, [x]))


def test_op_without_standard_form_is_refused_naming_region(demo, monkeypatch):
    g, mod, m = demo
    monkeypatch.setattr(export, "WRITERS", {k: v for k, v in export.WRITERS.items() if k != "mul"})
    with pytest.raises(export.ExportError) as e:
        export.to_onnx(mod)
    msg = str(e.value)
    assert "\n" not in msg and "region @npu-full_main_" in msg and "op 'mul'" in msg


def test_every_canonical_op_with_a_writer_is_real():
    from partition.ops import OPS
    assert set(export.WRITERS) <= set(OPS)


def test_write_is_atomic_and_names_the_path(demo, tmp_path):
    g, mod, m = demo
    target = tmp_path / "no-such-dir" / "x.onnx"
    with pytest.raises(export.ExportError, match="cannot write the ONNX file"):
        export.write_onnx(mod, target)
    out = tmp_path / "ok.onnx"
    export.write_onnx(mod, out)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".partial-")] == []
    assert onnx.load(out).functions


def test_bad_exported_files_are_one_line(demo, tmp_path):
    g, mod, m = demo
    newer = onnx.ModelProto()
    newer.CopyFrom(m)
    for p in newer.metadata_props:
        if p.key == "accel_tune.format_version":
            p.value = "2.0"
    onnx.save(newer, tmp_path / "newer.onnx")
    with pytest.raises(export.ExportError, match=r"format version 2\.0 is newer than this reader supports"):
        export.packed_from_onnx(tmp_path / "newer.onnx", tmp_path / "x.zip")
    plain = onnx.ModelProto()
    plain.CopyFrom(m)
    del plain.metadata_props[:]
    onnx.save(plain, tmp_path / "plain.onnx")
    with pytest.raises(export.ExportError, match="not one exported by accel-tune export"):
        export.packed_from_onnx(tmp_path / "plain.onnx", tmp_path / "x.zip")
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07garbage" * 10)
    with pytest.raises(export.ExportError, match="not a readable ONNX file"):
        export.packed_from_onnx(tmp_path / "junk.onnx", tmp_path / "x.zip")
    assert not (tmp_path / "x.zip").exists()


@pytest.mark.parametrize("fname", FAST_ZOO)
def test_zoo_subset_matches_in_onnxruntime(fname, tmp_path):
    m, mod = check_exported(fname, tmp_path)
    assert len(m.functions) == len(mod.externals)


@pytest.mark.slow
def test_every_zoo_file_exports_and_runs_in_onnxruntime(tmp_path):
    """All 48 zoo files (about 40 s on 2 busy cores)."""
    t0 = time.perf_counter()
    regions = 0
    for i, fname in enumerate(ZOO_FILES):
        m, _ = check_exported(fname, tmp_path / str(i) if (tmp_path / str(i)).mkdir() is None else tmp_path)
        regions += len(m.functions)
    assert regions > len(ZOO_FILES)
    print(f"{len(ZOO_FILES)} zoo files, {regions} regions, {time.perf_counter() - t0:.1f} s")


def test_control_nodes_are_named_after_their_own_ir_nodes():
    """A Loop or If is named ``<its IR name>/<OpType>`` like every other node, not after the last
    node of its body (a profiler's kernel events are matched to IR nodes by these names), and a
    body's output Identities after the body."""
    m = export.graph_to_onnx(models.get("byoc_demo"))
    names = {}

    def walk(graph):
        for n in graph.node:
            names[n.name] = n.op_type
            for a in n.attribute:
                if a.HasField("g"):
                    walk(a.g)
    walk(m.graph)
    assert names["loop/Loop"] == "Loop" and names["choose/If"] == "If"
    ident = sorted(k for k, v in names.items() if v == "Identity")
    assert ident and all(k.split("/")[0] in ("loop_body", "choose_then", "choose_else") for k in ident), ident


@pytest.mark.parametrize("name", ["resnet18", "bert_tiny", "byoc_demo", "mobilenet_v3_small", "ssd_detector"])
def test_shape_inference_without_the_weights_declares_what_it_does_with_them(name):
    """``_declare_outputs`` infers the outputs' shapes on the model with its large initializers
    turned into typed graph inputs (``_weightless``): the same outputs, inferred alike, from a
    model a fraction of the size (onnx's inference copies the model on both sides of C++)."""
    from onnx import shape_inference
    m = export.graph_to_onnx(models.get(name))
    light = export._weightless(m)
    assert all(t.ByteSize() <= export.WEIGHTLESS_BYTES for t in light.graph.initializer)
    heavy_out, light_out = (shape_inference.infer_shapes(x).graph.output for x in (m, light))
    assert [o.SerializeToString() for o in heavy_out] == [o.SerializeToString() for o in light_out]
    big = [t for t in m.graph.initializer if t.ByteSize() > export.WEIGHTLESS_BYTES]
    assert {t.name for t in big} <= {i.name for i in light.graph.input}
    if big:
        assert light.ByteSize() < m.ByteSize() / 2


def test_the_exported_model_holds_each_weight_once():
    """The initializers are in the model's graph, once each, with their values."""
    g = models.get("resnet18")
    m = export.graph_to_onnx(g)
    names = [t.name for t in m.graph.initializer]
    assert len(names) == len(set(names)) > 0
    consts = {v.name: v.data for n in g.nodes for v in n.inputs if v.is_const and v.data is not None}
    from onnx import numpy_helper
    hit = [t for t in m.graph.initializer if t.name in consts]
    assert hit and all(np.array_equal(numpy_helper.to_array(t), np.asarray(consts[t.name])) for t in hit)
