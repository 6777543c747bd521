"""Built-in models: they build, lint and run; weights are deterministic; MACs and parameter counts
match the published figures; the small ones match onnxruntime on an ONNX rendering of the same graph;
``accel-tune models`` reports them."""
from __future__ import annotations

import hashlib
import io
import itertools
import json
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from partition import interpret, models
from partition.builder import GraphBuilder
from partition.ir import Graph
from partition.models import count_macs, count_params, model_stats

NAMES = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0",
         "bert_base", "bert_tiny", "ssd_detector", "byoc_demo"]


def _inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for v in graph.inputs:
        if v.name == "input_ids":
            out[v.name] = rng.integers(0, 30522, v.shape).astype(np.int64)
        elif v.name == "attention_mask":
            out[v.name] = np.ones(v.shape, np.int64)
        else:
            out[v.name] = rng.standard_normal(v.shape).astype(np.float32)
    return out


def _graphs(graph: Graph):
    yield graph
    for n in graph.nodes:
        for sg in n.subgraphs():
            yield from _graphs(sg)


def _weights_digest(graph: Graph) -> str:
    h = hashlib.sha256()
    for g in _graphs(graph):
        for c in g.constants:
            h.update(c.name.encode())
            h.update(np.ascontiguousarray(c.data).tobytes())
    return h.hexdigest()


def test_list_models_and_unknown_name():
    assert [m.name for m in models.list_models()] == NAMES
    with pytest.raises(models.UnknownModelError) as ei:
        models.get("resnet1000")
    msg = str(ei.value)
    assert isinstance(ei.value, ValueError) and "\n" not in msg
    assert msg.startswith("unknown model 'resnet1000'; known models: ") and all(n in msg for n in NAMES)


# BERT-base builds 110M weights twice: ~30 s on a shared CPU.
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "bert_base" else n for n in NAMES])
def test_builds_lints_runs_and_is_deterministic(name):
    g = models.get(name)
    g.lint()
    info = models.info(name)
    assert [(v.name, v.shape, v.dtype) for v in g.inputs] == list(info.inputs)
    assert all(c.dtype == "float32" for c in g.constants if np.dtype(c.dtype).kind == "f")
    digest = _weights_digest(g)
    outs = interpret(g, _inputs(g))
    for o in outs:
        if o.dtype.kind == "f":  # non-degenerate: finite, not collapsed, not exploding
            assert np.all(np.isfinite(o))
            assert 1e-2 < float(np.std(o)) < 1e2, (name, float(np.std(o)))
    del g, outs
    assert _weights_digest(models.get(name)) == digest


def test_seed_changes_weights_but_not_structure():
    a, b = models.get("bert_tiny", seed=0), models.get("bert_tiny", seed=1)
    assert str(a).count("\n") == str(b).count("\n")
    assert _weights_digest(a) != _weights_digest(b)
    # two models never share a weight stream even with the same seed
    r18 = {c.name: c.data for c in models.get("resnet18").constants}
    r50 = {c.name: c.data for c in models.get("resnet50").constants}
    assert r18["stem.conv.weight"].shape == r50["stem.conv.weight"].shape
    assert not np.array_equal(r18["stem.conv.weight"], r50["stem.conv.weight"])


# Published figures: torchvision model zoo (GMACs, params), Sandler et al. 2018 (MobileNetV2:
# 300M MACs, 3.4M params without BN buffers), Devlin et al. / HF BertModel (110M params) and
# the shared README's 11.17 GMACs for BERT-base at seq 128. Parameter counts here include
# batch-norm running statistics, hence the small excess over the published ones.
PUBLISHED = {
    "resnet18": (1.82, 11.69e6),
    "resnet50": (4.09, 25.56e6),
    "mobilenet_v2": (0.300, 3.505e6),
    "bert_base": (11.17, 109.48e6),
}


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_macs_and_params_match_published(name):
    gmacs, params = PUBLISHED[name]
    g = models.get(name)
    assert count_macs(g) / 1e9 == pytest.approx(gmacs, rel=0.006)
    assert count_params(g) == pytest.approx(params, rel=0.012)


# torchvision's documented parameter counts (weights and biases, no batch-norm buffers) and the
# papers' multiply-adds: MobileNetV3 (Howard et al. 2019, table 3: Small 56M, Large 219M) and
# EfficientNet-B0 (Tan & Le 2019, table 2: 0.39B).
TORCHVISION_PARAMS = {"mobilenet_v3_small": (2_542_856, 0.056), "mobilenet_v3_large": (5_483_032, 0.219),
                      "efficientnet_b0": (5_288_548, 0.39)}


@pytest.mark.parametrize("name", list(TORCHVISION_PARAMS))
def test_squeeze_excite_models_match_torchvision_exactly(name):
    params, gmacs = TORCHVISION_PARAMS[name]
    g = models.get(name)
    trainable = sum(int(np.asarray(c.data).size) for c in g.constants
                    if not c.name.endswith((".running_mean", ".running_var")))
    assert trainable == params
    assert count_macs(g) / 1e9 == pytest.approx(gmacs, rel=0.015)
    se = [n for n in g.nodes if n.op == "mul" and n.name.endswith(".se.scale")]
    assert len(se) == {"mobilenet_v3_small": 9, "mobilenet_v3_large": 8, "efficientnet_b0": 16}[name]
    gate = "sigmoid" if name == "efficientnet_b0" else "hard_sigmoid"
    assert all(n.inputs[1].producer.op == gate for n in se)


def test_hard_sigmoid_gate_is_torchs():
    """torch's Hardsigmoid is relu6(x + 3) / 6, not ONNX HardSigmoid's default alpha 0.2."""
    g = models.get("mobilenet_v3_small")
    hs = next(n for n in g.nodes if n.op == "hard_sigmoid")
    x = np.linspace(-4, 4, 17, dtype=np.float32)
    from partition.ops import OPS
    np.testing.assert_allclose(OPS["hard_sigmoid"].compute([x], hs.attrs)[0], np.clip(x + 3, 0, 6) / 6, rtol=1e-6)


def test_bert_tiny_macs_by_hand():
    s, h, f, layers = 128, 128, 512, 2
    per_layer = 4 * s * h * h + 2 * s * h * f + 2 * s * s * h  # q,k,v,o + FFN + QK^T and PV
    assert count_macs(models.get("bert_tiny")) == layers * per_layer + h * h  # + pooler


def test_structure_of_each_family():
    mb = models.get("mobilenet_v2")
    dw = [n for n in mb.nodes if n.op == "conv2d" and n.attrs["groups"] > 1]
    assert len(dw) == 17 and all(n.attrs["groups"] == n.inputs[0].shape[1] == n.outputs[0].shape[1] for n in dw)
    assert sum(n.op == "relu6" for n in mb.nodes) == 35 and not any(n.op == "relu" for n in mb.nodes)
    bert = models.get("bert_tiny")
    assert sum(n.op == "softmax" for n in bert.nodes) == 2 and sum(n.op == "layer_norm" for n in bert.nodes) == 5
    assert [o.shape for o in bert.outputs] == [(1, 128, 128), (1, 128)]
    ssd = models.get("ssd_detector")
    assert ssd.nodes[-1].op == "non_max_suppression" and ssd.outputs[2] is ssd.nodes[-1].output
    demo = models.get("byoc_demo")
    assert [n.op for n in demo.nodes] == ["reshape", "add", "loop", "reshape", "add"]
    body = demo.nodes[2].attrs["body"]
    assert [n.op for n in body.nodes][:3] == ["conv2d", "bias_add", "relu"]
    assert any(n.op == "if" for n in body.nodes)


def test_stats_count_loop_bodies_per_iteration():
    from partition.models import byoc_demo
    demo = models.get("byoc_demo")
    conv_macs = byoc_demo.C * byoc_demo.C * 9 * byoc_demo.H * byoc_demo.W
    assert count_macs(demo) == byoc_demo.TRIPS * conv_macs
    s = model_stats(demo)
    assert s.nodes == 5 + 5 + 1 + 1  # main, body (conv, bias, relu, less, if), then, else
    # offset, conv weight and bias, the 0.5 in else; the int/bool trip, condition and iteration consts excluded
    assert s.params == 8 + 576 + 8 + 1


# ----------------------------------------------------------------------------- semantics

def _conv_nchw(x, w, b, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k = w.shape[2]
    out = np.zeros((x.shape[0], w.shape[0], x.shape[2], x.shape[3]), np.float64)
    for r in range(k):
        for s in range(k):
            out += np.einsum("nchw,kc->nkhw", xp[:, :, r:r + x.shape[2], s:s + x.shape[3]], w[:, :, r, s])
    return out + b[None, :, None, None]


def test_byoc_demo_matches_a_hand_computation():
    from partition.models import byoc_demo as demo_mod
    g = models.get("byoc_demo")
    x = np.random.default_rng(5).standard_normal((1, 512)).astype(np.float32)
    consts = {c.name: c.data for c in g.constants}
    body = g.nodes[2].attrs["body"]
    bc = {c.name: c.data for c in body.constants}
    h = x.reshape(1, 8, 8, 8) + consts["offset"]
    for i in range(demo_mod.TRIPS):
        y = np.maximum(_conv_nchw(h, bc["conv.weight"], bc["conv.bias"], 1), 0)
        h = y + h if i < 1 else y * 0.5
    expect = h.reshape(1, 512) + x
    np.testing.assert_allclose(interpret(g, [x])[0], expect, rtol=1e-4, atol=1e-5)


def test_bert_attention_mask_hides_positions():
    g = models.get("bert_tiny")
    feeds = _inputs(g, seed=2)
    feeds["attention_mask"][0, 100:] = 0
    base = interpret(g, feeds)[0]
    feeds["input_ids"] = feeds["input_ids"].copy()
    feeds["input_ids"][0, 100:] = (feeds["input_ids"][0, 100:] + 7) % 30522
    changed = interpret(g, feeds)[0]
    # visible tokens cannot see masked ones; masked ones themselves change
    np.testing.assert_allclose(changed[0, :100], base[0, :100], rtol=1e-4, atol=1e-5)
    assert not np.allclose(changed[0, 100:], base[0, 100:])


def test_ssd_nms_selection_obeys_threshold_and_iou():
    from partition.models import ssd
    g = models.get("ssd_detector")
    boxes, scores, sel = interpret(g, _inputs(g, seed=3))
    assert sel.shape[1] == 3 and 0 < sel.shape[0] <= g.outputs[2].shape[0]
    for cls in range(ssd.NUM_CLASSES):
        idx = sel[sel[:, 1] == cls][:, 2]
        assert len(idx) <= ssd.MAX_PER_CLASS and np.all(scores[0, cls, idx] > 0.3)
        assert list(scores[0, cls, idx]) == sorted(scores[0, cls, idx], reverse=True)
        b = boxes[0, idx]
        for i in range(len(b)):
            for j in range(i + 1, len(b)):
                y1, x1 = np.maximum(b[i, :2], b[j, :2])
                y2, x2 = np.minimum(b[i, 2:], b[j, 2:])
                inter = max(0.0, y2 - y1) * max(0.0, x2 - x1)
                area = lambda q: (q[2] - q[0]) * (q[3] - q[1])  # noqa: E731
                assert inter / (area(b[i]) + area(b[j]) - inter) <= 0.5 + 1e-6


def test_builder_conv_rejects_bad_groups():
    b = GraphBuilder("t", 0)
    x = b.input("x", (1, 6, 4, 4))
    with pytest.raises(ValueError, match="do not divide into 4 groups"):
        b.conv(x, 8, 3, groups=4, name="c")


# ----------------------------------------------------------------------------- vs onnxruntime

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402


def _to_onnx(graph: Graph, names: dict[int, str] | None = None, prefix: str = ""):
    """An independent ONNX rendering of the built-in models' ops, so onnxruntime can check them."""
    names = dict(names or {})
    nm = lambda v: names.get(id(v), prefix + v.name)  # noqa: E731
    nodes, inits, counter = [], [], itertools.count()

    def k(arr) -> str:
        name = f"{prefix}_k{next(counter)}"
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def tmp() -> str:
        return f"{prefix}_t{next(counter)}"

    for c in graph.constants:
        inits.append(numpy_helper.from_array(c.data, nm(c)))
    simple = {"relu": "Relu", "add": "Add", "sub": "Sub", "mul": "Mul", "exp": "Exp", "sigmoid": "Sigmoid",
              "tanh": "Tanh", "matmul": "MatMul", "less": "Less", "global_avg_pool2d": "GlobalAveragePool"}
    for n in graph.nodes:
        i, o, a = [nm(v) for v in n.inputs], [nm(v) for v in n.outputs], n.attrs
        mk = lambda op, ins, outs, **kw: nodes.append(helper.make_node(op, ins, outs, **kw))  # noqa: E731
        if n.op in simple:
            mk(simple[n.op], i, o)
        elif n.op == "conv2d":
            mk("Conv", i, o, strides=list(a["strides"]), pads=list(a["pads"]), group=a.get("groups", 1))
        elif n.op == "batch_norm":
            mk("BatchNormalization", i, o, epsilon=a["epsilon"])
        elif n.op == "relu6":
            mk("Clip", [i[0], k(np.float32(0)), k(np.float32(6))], o)
        elif n.op == "max_pool2d":
            mk("MaxPool", i, o, kernel_shape=list(a["kernel"]), strides=list(a["strides"]), pads=list(a["pads"]))
        elif n.op == "flatten":
            mk("Flatten", i, o, axis=a["axis"])
        elif n.op == "dense":
            t1, t2 = tmp(), tmp()
            mk("Transpose", [i[1]], [t1], perm=[1, 0])
            mk("MatMul", [i[0], t1], [t2] if len(i) == 3 else o)
            if len(i) == 3:
                mk("Add", [t2, i[2]], o)
        elif n.op == "bias_add":
            t = tmp()
            mk("Reshape", [i[1], k(np.int64([-1, 1, 1]))], [t])
            mk("Add", [i[0], t], o)
        elif n.op == "layer_norm":
            mk("LayerNormalization", i, o, axis=a["axis"], epsilon=a["epsilon"])
        elif n.op == "gelu":
            t1, t2, t3 = tmp(), tmp(), tmp()
            mk("Div", [i[0], k(np.float32(np.sqrt(2)))], [t1])
            mk("Erf", [t1], [t2])
            mk("Add", [t2, k(np.float32(1))], [t3])
            t4 = tmp()
            mk("Mul", [i[0], t3], [t4])
            mk("Mul", [t4, k(np.float32(0.5))], o)
        elif n.op == "gather":
            mk("Gather", i, o, axis=a["axis"])
        elif n.op == "cast":
            mk("Cast", i, o, to=helper.np_dtype_to_tensor_dtype(np.dtype(a["dtype"])))
        elif n.op == "reshape":
            mk("Reshape", [i[0], k(np.int64(a["shape"]))], o)
        elif n.op == "transpose":
            mk("Transpose", i, o, perm=list(a["perm"]))
        elif n.op == "softmax":
            mk("Softmax", i, o, axis=a["axis"])
        elif n.op == "concat":
            mk("Concat", i, o, axis=a["axis"])
        elif n.op == "split":
            mk("Split", [i[0], k(np.int64(a["sizes"]))], o, axis=a["axis"])
        elif n.op == "non_max_suppression":
            mk("NonMaxSuppression", [*i, k(np.int64(a["max_output_boxes_per_class"])),
                                     k(np.float32(a["iou_threshold"])), k(np.float32(a["score_threshold"]))], o,
               center_point_box=a["center_point_box"])
        elif n.op == "if":
            branches = {}
            for key in ("then_branch", "else_branch"):
                sg = a[key]
                outer = {id(p): names_i for p, names_i in zip(sg.inputs, i[1:])}
                branches[key] = _to_onnx(sg, outer, prefix=f"{prefix}{n.name}.{key}/")
            mk("If", [i[0]], o, **branches)
        elif n.op == "loop":
            body = a["body"]
            assert len(body.inputs) == 2 + a["num_carried"], "captured loop inputs not rendered"
            mk("Loop", i, o, body=_to_onnx(body, prefix=f"{prefix}{n.name}.body/"))
        else:
            raise AssertionError(f"no ONNX rendering for {n.op}")
    vi = lambda v, shape: helper.make_tensor_value_info(  # noqa: E731
        nm(v), helper.np_dtype_to_tensor_dtype(np.dtype(v.dtype)), shape)
    return helper.make_graph(nodes, graph.name, [vi(v, list(v.shape)) for v in graph.inputs if id(v) not in names],
                             [vi(v, None) for v in graph.outputs], inits)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "bert_tiny", "ssd_detector", "byoc_demo"])
def test_small_models_match_onnxruntime(name):
    g = models.get(name)
    model = helper.make_model(_to_onnx(g), opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = _inputs(g, seed=4)
    ref = sess.run(None, feeds)
    ours = interpret(g, feeds)
    for a, r in zip(ours, ref):
        assert a.shape == r.shape
        if r.dtype.kind == "f":
            np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(a, r)


# ----------------------------------------------------------------------------- CLI

def _cli(*argv) -> tuple[int, str, str]:
    from tuner.cli import main
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def test_cli_models_json_matches_stats():
    rc, out, _ = _cli("models", "bert_tiny", "byoc_demo", "--json")
    assert rc == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["bert_tiny", "byoc_demo"]
    for r in rows:
        s = model_stats(models.get(r["name"]))
        assert (r["nodes"], r["params"], r["macs"]) == (s.nodes, s.params, s.macs)
    assert rows[0]["inputs"] == [{"name": "input_ids", "shape": [1, 128], "dtype": "int64"},
                                 {"name": "attention_mask", "shape": [1, 128], "dtype": "int64"}]


def test_cli_models_table_and_errors():
    rc, out, _ = _cli("models", "ssd_detector", "mobilenet_v2")
    assert rc == 0
    lines = out.strip().splitlines()
    assert lines[0].split()[:4] == ["name", "nodes", "params", "GMACs"]
    mb = next(line for line in lines if line.startswith("mobilenet_v2")).split()
    assert mb[3] == f"{count_macs(models.get('mobilenet_v2')) / 1e9:.3f}"
    rc, out, err = _cli("models", "nope")
    assert rc == 2 and out == "" and err.startswith("accel-tune: error: unknown model 'nope'; known models: ")
    rc, _, err = _cli("models", "--onnx", "/does/not/exist.onnx")
    assert rc == 2 and err.strip() == "accel-tune: error: /does/not/exist.onnx: no such ONNX file"


def test_builder_dense_takes_the_callers_weight():
    """GraphBuilder.dense with ``weight=``: the layer computes x @ weight.T + its bias; a weight of
    another shape is refused in one line."""
    b = GraphBuilder.for_model("dense_weight", 0)
    x = b.input("x", (2, 3))
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = b.dense(x, 4, name="fc", weight=b.const(w, "fc.weight"))
    g = b.finish([y])
    bias = next(v.data for n in g.nodes if n.name == "fc" for v in n.inputs[2:])
    xv = np.ones((2, 3), dtype=np.float32)
    np.testing.assert_allclose(interpret(g, {"x": xv})[0], xv @ w.T + bias, rtol=1e-6)
    with pytest.raises(ValueError, match=r"dense bad: weight must be \(4, 3\), got \(3, 4\)"):
        b.dense(x, 4, name="bad", weight=b.const(w.T.copy(), "bad.weight"))
