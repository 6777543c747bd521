"""ONNX import: the shared real models and hand-made ones match onnxruntime; static attributes,
folding, closed If/Loop bodies, stripped-weight filling and one-line errors."""
from __future__ import annotations

from pathlib import Path
import glob
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from partition import interpret  # noqa: E402
from partition.models import count_macs  # noqa: E402
from partition.onnx.importer import OnnxImportError, fill_arrays, fill_stripped, load_onnx  # noqa: E402

SHARED = str(Path(__file__).resolve().parents[3] / "shared" / "models")  # ../shared beside the checkout
SHARED_FILES = sorted(glob.glob(os.path.join(SHARED, "*.onnx")))
# BERT-base carries 110M weights: filling, serialising and two runtimes take ~25 s on a shared CPU.
SHARED_PARAMS = [pytest.param(p, marks=pytest.mark.slow) if "bert_base" in p else p for p in SHARED_FILES]
# GMACs from shared/models/README.md (counted by the exporter's side, not by this code).
README_GMACS = {"resnet50": 4.09, "mobilenet_v2": 0.30, "bert_small": 0.44, "bert_base": 11.17,
                "tiny_detector_topk": 0.19}
RTOL, ATOL = 1e-4, 1e-5


def _ort_run(model_bytes: bytes, feeds: dict) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1  # the CPU is shared
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})


def _random_feeds(graph, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for v in graph.inputs:
        if v.name == "input_ids":
            feeds[v.name] = rng.integers(0, 30522, v.shape).astype(np.int64)
        elif "mask" in v.name:
            feeds[v.name] = np.ones(v.shape, v.dtype)
        elif np.dtype(v.dtype).kind in "iu":
            feeds[v.name] = np.zeros(v.shape, v.dtype)
        else:
            feeds[v.name] = rng.standard_normal(v.shape).astype(v.dtype)
    return feeds


def _assert_match(ours: list[np.ndarray], ref: list[np.ndarray]) -> None:
    assert len(ours) == len(ref)
    for a, r in zip(ours, ref):
        assert a.shape == r.shape, (a.shape, r.shape)
        if r.dtype.kind == "f":
            np.testing.assert_allclose(a, r, rtol=RTOL, atol=ATOL)
        else:
            np.testing.assert_array_equal(a, r)


def _check_against_ort(model, feeds: dict | None = None):
    data = model.SerializeToString()
    g = load_onnx(data)
    g.lint()
    feeds = feeds if feeds is not None else _random_feeds(g)
    _assert_match(interpret(g, feeds), _ort_run(data, feeds))
    return g


# ----------------------------------------------------------------------------- shared models

@pytest.mark.skipif(not SHARED_FILES, reason="shared models folder is absent")
@pytest.mark.parametrize("path", SHARED_PARAMS, ids=os.path.basename)
def test_shared_model_matches_onnxruntime(path):
    model = onnx.load(path)
    filled = fill_stripped(model, seed=0)
    data = filled.SerializeToString()
    g = load_onnx(filled)  # the same copy onnxruntime gets, without parsing it again
    g.lint()
    feeds = _random_feeds(g)
    ours, ref = interpret(g, feeds), _ort_run(data, feeds)
    _assert_match(ours, ref)
    for r in ref:  # the fill keeps activations away from zero and overflow
        if r.dtype.kind == "f":
            assert np.all(np.isfinite(r)) and 1e-3 < float(np.std(r)) < 1e3
    stem = os.path.basename(path).split(".")[0]
    assert count_macs(g) / 1e9 == pytest.approx(README_GMACS[stem], abs=0.006)


@pytest.mark.skipif(not os.path.exists(os.path.join(SHARED, "tiny_detector_topk.shapes.onnx")),
                    reason="shared models folder is absent")
def test_stripped_file_fills_like_fill_stripped():
    path = os.path.join(SHARED, "tiny_detector_topk.shapes.onnx")
    g = load_onnx(path, fill_seed=3)
    assert g.meta["weights_stripped"] is True
    model = onnx.load(path)
    stripped = {t.name for t in model.graph.initializer if not t.raw_data and np.prod(t.dims) > 0}
    assert set(g.meta["filled_initializers"]) == stripped and stripped
    filled = {t.name: numpy_helper.to_array(t) for t in fill_stripped(model, seed=3).graph.initializer}
    consts = {c.name: c.data for c in g.constants}
    for name in ("backbone.0.0.weight", "cls.weight"):
        np.testing.assert_array_equal(consts[name], filled[name])
    # same seed, same numbers; another seed, other numbers; unstripped tensors untouched
    again = load_onnx(path, fill_seed=3)
    np.testing.assert_array_equal({c.name: c.data for c in again.constants}["cls.weight"], consts["cls.weight"])
    other = load_onnx(path, fill_seed=4)
    assert not np.array_equal({c.name: c.data for c in other.constants}["cls.weight"], consts["cls.weight"])
    assert "val_85" not in g.meta["filled_initializers"]


@pytest.mark.skipif(not os.path.exists(os.path.join(SHARED, "mobilenet_v2.onnx")), reason="no shared models")
def test_weighted_file_is_not_marked_stripped():
    g = load_onnx(os.path.join(SHARED, "mobilenet_v2.onnx"))
    assert "weights_stripped" not in g.meta
    assert g.meta["source"] == "onnx:mobilenet_v2.onnx"
    # Clip(0, 6) is ReLU6; every conv keeps its bias as the third input
    assert sum(n.op == "relu6" for n in g.nodes) == 35
    assert all(len(n.inputs) == 3 for n in g.nodes if n.op == "conv2d")


# ----------------------------------------------------------------------------- fill rules

def _stripped_tensor(name, dims):
    t = TensorProto()
    t.name, t.data_type = name, TensorProto.FLOAT
    t.dims.extend(dims)
    return t


def test_fill_scales_by_use_and_keeps_variances_positive():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 6, 6])
    inits = [_stripped_tensor("w", [16, 8, 3, 3]), _stripped_tensor("s", [16]), _stripped_tensor("b", [16]),
             _stripped_tensor("m", [16]), _stripped_tensor("v", [16])]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model.metadata_props.add(key="weights_stripped", value="true")
    arrs = fill_arrays(model, seed=0)
    assert set(arrs) == {"w", "s", "b", "m", "v"}
    assert np.std(arrs["w"]) == pytest.approx(np.sqrt(2 / 72), rel=0.15)  # He init, fan_in 8*3*3
    assert np.all(arrs["v"] > 0) and np.all(arrs["s"] > 0.5)
    g = _check_against_ort(fill_stripped(model, 0))
    # the filled copy still says its weights are synthetic, but nothing was missing
    assert g.meta["weights_stripped"] is True and g.meta["filled_initializers"] == []
    assert load_onnx(model.SerializeToString()).meta["filled_initializers"] == ["b", "m", "s", "v", "w"]


def test_missing_data_without_stripped_flag_is_an_error():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y],
                                                [_stripped_tensor("w", [2, 4])]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(OnnxImportError, match="initializer 'w' has no data"):
        load_onnx(model.SerializeToString())


# ----------------------------------------------------------------------------- hand-made models

def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def test_if_branches_become_closed_graphs_and_match_onnxruntime():
    # then: relu(x) * w (w an outer initializer); else: y - x (two outer runtime values)
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "w"], ["t"])],
                               "then", [], [_vi("t", [2, 3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["y", "x"], ["e"])], "else", [], [_vi("e", [2, 3])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g)]
    model = _model(nodes, [_vi("x", [2, 3]), _vi("y", [2, 3])], [_vi("out", [2, 3])],
                   [_init("w", np.arange(6, dtype=np.float32).reshape(2, 3)), _init("zero", np.float32(0))])
    for sign in (1.0, -1.0):  # both branches taken
        feeds = {"x": sign * np.abs(np.random.default_rng(0).standard_normal((2, 3))).astype(np.float32),
                 "y": np.ones((2, 3), np.float32)}
        g = _check_against_ort(model, feeds)
    node = next(n for n in g.nodes if n.op == "if")
    then_b, else_b = node.attrs["then_branch"], node.attrs["else_branch"]
    # the runtime values x and y are explicit inputs, the same list in both branches; w is a body constant
    assert [v.name for v in node.inputs[1:]] == ["x", "y"]
    assert [v.name for v in then_b.inputs] == [v.name for v in else_b.inputs] == ["x", "y"]
    assert [c.name for c in then_b.constants] == ["w"]


def test_loop_with_scan_early_exit_captures_and_nested_if():
    # body: acc += x * i; scan out acc; an inner If adds b (outer init) on odd i; stop when i >= 3
    odd_then = helper.make_graph([helper.make_node("Add", ["acc1", "b"], ["o1"])], "odd", [], [_vi("o1", [3])])
    odd_else = helper.make_graph([helper.make_node("Identity", ["acc1"], ["o2"])], "even", [], [_vi("o2", [3])])
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("Add", ["acc_in", "xi"], ["acc1"]),
         helper.make_node("Equal", ["i", "one"], ["odd"]),
         helper.make_node("If", ["odd"], ["acc_out"], then_branch=odd_then, else_branch=odd_else),
         helper.make_node("Less", ["i", "three"], ["go"]),
         helper.make_node("Identity", ["acc_out"], ["scan"])],
        "body",
        [_vi("i", [], TensorProto.INT64), _vi("c", [], TensorProto.BOOL), _vi("acc_in", [3])],
        [_vi("go", [], TensorProto.BOOL), _vi("acc_out", [3]), _vi("scan", [3])])
    nodes = [helper.make_node("Loop", ["M", "", "acc0"], ["acc", "scans"], body=body)]
    model = _model(nodes, [_vi("x", [3]), _vi("acc0", [3])], [_vi("acc", [3]), _vi("scans", [None, 3])],
                   [_init("M", np.int64(10)), _init("b", np.float32([10, 20, 30])),
                    _init("one", np.int64(1)), _init("three", np.int64(3))])
    feeds = {"x": np.float32([1, 2, 3]), "acc0": np.float32([0.5, 0, -1])}
    g = _check_against_ort(model, feeds)
    loop = next(n for n in g.nodes if n.op == "loop")
    assert loop.outputs[1].shape == (10, 3)  # the type carries the trip bound; the run stops after 4
    assert interpret(g, feeds)[1].shape == (4, 3)
    body_g = loop.attrs["body"]
    assert [v.name for v in body_g.inputs] == ["i", "c", "acc_in", "x"]  # x captured after carried
    inner = next(n for n in body_g.nodes if n.op == "if")
    assert [c.name for c in inner.attrs["then_branch"].constants] == ["b"]


def test_loop_without_trip_count_is_an_error():
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Identity", ["v"], ["v2"])],
                             "body", [_vi("i", [], TensorProto.INT64), _vi("c", [], TensorProto.BOOL), _vi("v", [2])],
                             [_vi("c2", [], TensorProto.BOOL), _vi("v2", [2])])
    model = _model([helper.make_node("Loop", ["", "cond", "v0"], ["v"], body=body, name="spin")],
                   [_vi("cond", [], TensorProto.BOOL), _vi("v0", [2])], [_vi("v", [2])])
    with pytest.raises(OnnxImportError, match="node 'spin' .*max trip count"):
        load_onnx(model.SerializeToString())


def _opset_variants_model(opset: int):
    """Squeeze/Unsqueeze/ReduceMean/ReduceSum/Split/Clip/Pad/TopK/Slice, with axes, bounds and sizes as
    attributes or as inputs as the opset requires."""
    inits = [_init("k", np.int64([2])), _init("lo", np.float32(-0.5)), _init("hi", np.float32(0.7)),
             _init("pads", np.int64([0, 1, 0, 0, 2, 0])),
             _init("starts", np.int64([1, 0])), _init("ends", np.int64([100, -1])), _init("axes_s", np.int64([1, 2])),
             _init("steps", np.int64([2, 1]))]
    nodes = []

    def axes_node(op, x, out, axes, input_from, **kw):
        if opset >= input_from:
            name = f"{out}_axes"
            inits.append(_init(name, np.int64(axes)))
            nodes.append(helper.make_node(op, [x, name], [out], **kw))
        else:
            nodes.append(helper.make_node(op, [x], [out], axes=axes, **kw))

    axes_node("Unsqueeze", "x", "u", [0], 13)                        # [1,2,5,6]
    axes_node("Squeeze", "u", "sq", [0], 13)                         # [2,5,6]
    axes_node("ReduceMean", "sq", "rm", [-1], 18, keepdims=1)        # [2,5,1]
    axes_node("ReduceSum", "sq", "rs", [1], 13, keepdims=0)          # [2,6]
    if opset >= 13:
        inits.append(_init("split", np.int64([2, 3])))
        nodes.append(helper.make_node("Split", ["sq", "split"], ["s1", "s2"], axis=1))
    else:
        nodes.append(helper.make_node("Split", ["sq"], ["s1", "s2"], axis=1, split=[2, 3]))
    nodes += [helper.make_node("Clip", ["s2", "lo", "hi"], ["cl"]),
              helper.make_node("Pad", ["cl", "pads"], ["pd"], mode="constant"),
              helper.make_node("TopK", ["rs", "k"], ["tv", "ti"], axis=1),
              helper.make_node("Slice", ["sq", "starts", "ends", "axes_s", "steps"], ["sl"])]
    outs = [_vi("rm", [2, 5, 1]), _vi("s1", [2, 2, 6]), _vi("pd", [2, 6, 8]), _vi("tv", [2, 2]),
            _vi("ti", [2, 2], TensorProto.INT64), _vi("sl", [2, 2, 5])]
    return _model(nodes, [_vi("x", [2, 5, 6])], outs, inits, opset)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_attribute_vs_input_forms_across_opsets(opset):
    g = _check_against_ort(_opset_variants_model(opset))
    by_op = {n.op: n for n in g.nodes}
    assert by_op["unsqueeze"].attrs["axes"] == (0,)
    assert by_op["reduce_mean"].attrs["axes"] == (2,)
    assert by_op["split"].attrs["sizes"] == (2, 3)
    assert by_op["clip"].attrs["min"] == -0.5 and by_op["clip"].attrs["max"] == pytest.approx(0.7)
    assert by_op["pad"].attrs["pads"] == (0, 1, 0, 0, 2, 0)
    assert by_op["topk"].attrs["k"] == 2
    assert by_op["slice"].attrs["steps"] == (2, 1)
    for n in g.nodes:  # attributes are plain values, never arrays
        assert all(not isinstance(v, np.ndarray) for v in n.attrs.values())


def test_shape_chains_fold_to_static_attributes():
    # Reshape(x, Concat(Shape(x)[0:1], [-1])) and Expand(y, Shape(x)) -> static attrs, no shape nodes
    nodes = [helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("Gather", ["shp", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("Cast", ["shp"], ["shp_f"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["shp_f"], ["shp_i"], to=TensorProto.INT64),
             helper.make_node("Expand", ["y", "shp_i"], ["big"]),
             helper.make_node("ConstantOfShape", ["shp"], ["ones"],
                              value=numpy_helper.from_array(np.float32([1.0]))),
             helper.make_node("Add", ["big", "ones"], ["out"])]
    model = _model(nodes, [_vi("x", [3, 4, 5]), _vi("y", [1, 5])], [_vi("flat", [3, 20]), _vi("out", [3, 4, 5])],
                   [_init("zero", np.int64(0)), _init("ax0", np.int64([0])), _init("minus1", np.int64([-1]))])
    g = _check_against_ort(model)
    assert sorted(n.op for n in g.nodes) == ["add", "expand", "reshape"]
    reshape = next(n for n in g.nodes if n.op == "reshape")
    assert reshape.attrs["shape"] == (3, 20)
    assert next(n for n in g.nodes if n.op == "expand").attrs["shape"] == (3, 4, 5)


def test_softmax_before_opset_13_flattens_from_axis():
    model = _model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [_vi("x", [2, 3, 4])], [_vi("y", [2, 3, 4])],
                   opset=11)
    g = _check_against_ort(model)
    assert [n.op for n in g.nodes] == ["reshape", "softmax", "reshape"]
    m13 = _model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [_vi("x", [2, 3, 4])], [_vi("y", [2, 3, 4])],
                 opset=13)
    assert [n.op for n in _check_against_ort(m13).nodes] == ["softmax"]


def test_cnn_ops_with_auto_pad_and_normalisation():
    rng = np.random.default_rng(0)
    inits = [_init("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3),
             _init("wd", rng.standard_normal((4, 1, 3, 3)).astype(np.float32) * 0.3),
             _init("s", np.float32([1.0, 0.5, 2.0, 1.5])), _init("b", np.float32([0.1, 0, -0.1, 0.2])),
             _init("m", np.float32([0, 0.1, 0.2, -0.1])), _init("v", np.float32([1.0, 0.5, 2.0, 0.8])),
             _init("fw", rng.standard_normal((4, 5)).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], auto_pad="SAME_UPPER", strides=[2, 2]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"], epsilon=1e-3),
             helper.make_node("LeakyRelu", ["bn"], ["lr"], alpha=0.1),
             helper.make_node("Conv", ["lr", "wd"], ["dw"], group=4, pads=[1, 1, 1, 1]),
             helper.make_node("HardSwish", ["dw"], ["hs"]),
             helper.make_node("HardSigmoid", ["hs"], ["hsg"], alpha=0.3, beta=0.4),
             helper.make_node("AveragePool", ["hsg"], ["ap"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              count_include_pad=0),
             helper.make_node("MaxPool", ["hs"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER"),
             helper.make_node("GlobalAveragePool", ["ap"], ["gap"]),
             helper.make_node("Flatten", ["gap"], ["fl"], axis=1),
             helper.make_node("Gemm", ["fl", "fw"], ["fc"], transB=0, alpha=0.5),
             helper.make_node("Sigmoid", ["fc"], ["out"])]
    model = _model(nodes, [_vi("x", [1, 3, 11, 11])], [_vi("out", [1, 5]), _vi("mp", [1, 4, 3, 3])], inits)
    g = _check_against_ort(model)
    conv = next(n for n in g.nodes if n.op == "conv2d")
    assert conv.attrs["pads"] == (1, 1, 1, 1) and conv.attrs["strides"] == (2, 2)
    assert next(n for n in g.nodes if n.op == "gemm").attrs["alpha"] == 0.5


def test_gemm_linear_form_becomes_dense():
    rng = np.random.default_rng(0)
    model = _model([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], [_vi("x", [2, 4])], [_vi("y", [2, 3])],
                   [_init("w", rng.standard_normal((3, 4)).astype(np.float32)), _init("b", np.float32([1, 2, 3]))])
    g = _check_against_ort(model)
    assert [n.op for n in g.nodes] == ["dense"]
    assert [c.name for c in g.constants] == ["w", "b"]  # initializer names kept


def test_non_max_suppression_has_a_bounded_type():
    boxes = np.float32([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 0.9, 1, 1.9], [0, 10, 1, 11], [0, 10.1, 1, 11.1],
                         [0, 100, 1, 101]]])
    scores = np.float32([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [0.1, 0.2, 0.8, 0.3, 0.9, 0.4]]])
    model = _model([helper.make_node("NonMaxSuppression", ["boxes", "scores", "mo", "iou", "st"], ["sel"])],
                   [_vi("boxes", [1, 6, 4]), _vi("scores", [1, 2, 6])], [_vi("sel", [None, 3], TensorProto.INT64)],
                   [_init("mo", np.int64(4)), _init("iou", np.float32(0.5)), _init("st", np.float32(0.25))])
    g = _check_against_ort(model, {"boxes": boxes, "scores": scores})
    assert g.outputs[0].shape == (1 * 2 * 4, 3)
    assert interpret(g, {"boxes": boxes, "scores": scores})[0].shape[0] == 7  # 4 of class 0, 3 of class 1


def test_constant_if_condition_is_inlined():
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [_vi("t", [2])])
    else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [], [_vi("e", [2])])
    model = _model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                   [_vi("x", [2])], [_vi("y", [2])], [_init("c", np.array(False))])
    g = _check_against_ort(model, {"x": np.float32([-1, 2])})
    assert [n.op for n in g.nodes] == ["abs"]


# ----------------------------------------------------------------------------- errors

def _one_line_error(src, match: str) -> str:
    with pytest.raises(OnnxImportError) as ei:
        load_onnx(src)
    msg = str(ei.value)
    assert "\n" not in msg
    assert match in msg, msg
    assert isinstance(ei.value, ValueError)
    return msg


def test_not_onnx_and_missing_files(tmp_path):
    bad = tmp_path / "x.onnx"
    bad.write_bytes(b"\xff\xfe this is not a protobuf \x00\x01" * 10)
    assert _one_line_error(bad, "x.onnx is not an ONNX model: ").startswith("x.onnx is not an ONNX model: ")
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    _one_line_error(empty, "empty.onnx is not an ONNX model")
    _one_line_error(str(tmp_path / "nope.onnx"), "nope.onnx: no such ONNX file")


def test_unsupported_op_names_op_and_node():
    model = _model([helper.make_node("Foo", ["x"], ["y"], name="bar")], [_vi("x", [2])], [_vi("y", [2])])
    assert _one_line_error(model.SerializeToString(), "unsupported ONNX op") == "unsupported ONNX op 'Foo' at node 'bar'"
    ms = _model([helper.make_node("Gelu", ["x"], ["y"], name="g", domain="com.microsoft")], [_vi("x", [2])],
                [_vi("y", [2])])
    ms.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    _one_line_error(ms.SerializeToString(), "unsupported ONNX op 'com.microsoft.Gelu' at node 'g'")


def test_non_constant_shape_input_without_a_declared_shape_is_an_error():
    # (with a fully static declared output shape it imports: tests/partition/test_onnx_runtime_params.py)
    model = _model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                   [_vi("x", [2, 3]), _vi("s", [2], TensorProto.INT64)], [_vi("y", [3, "n"])])
    _one_line_error(model.SerializeToString(), "node 'rs' (Reshape): shape input 's' must be a constant")
    # (Clip bounds and Trilu's k computed at run time import: they do not change the shape)


def test_dynamic_dims_and_bad_opsets_are_errors():
    dyn = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2, "seq"])], [_vi("y", [2, "seq"])])
    _one_line_error(dyn.SerializeToString(), "input 'x' has a dynamic dimension 'seq' at axis 1")
    old = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [3])], [_vi("y", [3])], opset=9)
    _one_line_error(old.SerializeToString(), "opset 9; supported opsets are 11..")


def test_shape_errors_name_the_node():
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                   [_vi("a", [2, 3]), _vi("b", [4, 5])], [_vi("y", [2, 5])])
    _one_line_error(model.SerializeToString(), "node 'mm' (MatMul): ")


def test_torchscript_style_opset11_graph():
    """The TorchScript exporter's habits at opset 11: Constant nodes for every literal, shapes
    rebuilt at run time through Shape/Gather/Unsqueeze(attr)/Concat, Range/ConstantOfShape/Where
    chains on constants, Pad and Slice with input tensors, Squeeze with attribute axes."""
    c = lambda name, arr: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(arr)))  # noqa: E731
    rng = np.random.default_rng(7)
    nodes = [
        c("c0", np.int64(0)), c("c1", np.int64(1)), c("heads", np.int64([2])), c("dh", np.int64([4])),
        c("w", rng.standard_normal((8, 8)).astype(np.float32)), c("scale", np.float32(2.0)),
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "c0"], ["b"], axis=0),
        helper.make_node("Gather", ["shp", "c1"], ["s"], axis=0),
        helper.make_node("Unsqueeze", ["b"], ["b1"], axes=[0]),
        helper.make_node("Unsqueeze", ["s"], ["s1"], axes=[0]),
        helper.make_node("Concat", ["b1", "s1", "heads", "dh"], ["qshape"], axis=0),
        helper.make_node("MatMul", ["x", "w"], ["q"]),
        helper.make_node("Reshape", ["q", "qshape"], ["q4"]),
        helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["q4"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["qt", "kt"], ["sc"]),
        helper.make_node("Div", ["sc", "scale"], ["sc2"]),
        # position ids: Range(0, s) -> Equal to ConstantOfShape(zeros) -> Where -> a constant bias
        helper.make_node("Range", ["c0", "s", "c1"], ["pos"]),
        helper.make_node("ConstantOfShape", ["s1"], ["zeros"], value=numpy_helper.from_array(np.int64([0]))),
        helper.make_node("Equal", ["pos", "zeros"], ["is0"]),
        c("big", np.float32(-100.0)), c("nil", np.float32(0.0)),
        helper.make_node("Where", ["is0", "big", "nil"], ["bias"]),
        helper.make_node("Add", ["sc2", "bias"], ["sc3"]),
        helper.make_node("Softmax", ["sc3"], ["p"], axis=3),
        c("pads", np.int64([0, 0, 0, 1, 0, 0, 0, 2])),
        helper.make_node("Pad", ["p", "pads"], ["pp"]),
        c("st", np.int64([1])), c("en", np.int64([4])), c("ax", np.int64([3])),
        helper.make_node("Slice", ["pp", "st", "en", "ax"], ["sl"]),
        helper.make_node("ReduceSum", ["sl"], ["rs"], axes=[1], keepdims=1),
        helper.make_node("Squeeze", ["rs"], ["out"], axes=[1]),
    ]
    model = _model(nodes, [_vi("x", [1, 5, 8])], [_vi("out", [1, 5, 3])], opset=11)
    g = _check_against_ort(model)
    ops = [n.op for n in g.nodes]
    assert not {"shape", "range"} & set(ops)
    # the first MatMul multiplies by a constant matrix: a linear layer, imported as dense
    assert ops == ["dense", "reshape", "transpose", "transpose", "matmul", "div", "add", "softmax", "pad",
                   "slice", "reduce_sum", "squeeze"]
    assert g.nodes[1].attrs["shape"] == (1, 5, 2, 4)


def test_remaining_op_converters_match_onnxruntime():
    """One graph through the converters the models above do not reach (opset 20 for Gelu)."""
    rng = np.random.default_rng(11)
    mk = helper.make_node
    nodes = [
        mk("Abs", ["x"], ["ax"]), mk("Sqrt", ["ax"], ["sq"]), mk("Log", ["sq"], ["lg"]), mk("Neg", ["lg"], ["ng"]),
        mk("Reciprocal", ["sq"], ["rc"]), mk("Pow", ["ax", "two"], ["pw"]), mk("Gelu", ["x"], ["ge"], approximate="tanh"),
        mk("Tile", ["ge", "reps"], ["tl"]), mk("GlobalMaxPool", ["tl"], ["gmp"]), mk("Flatten", ["gmp"], ["fl"], axis=1),
        mk("LessOrEqual", ["x", "ax"], ["le"]), mk("GreaterOrEqual", ["x", "zero"], ["ge0"]), mk("Or", ["le", "ge0"], ["o"]),
        mk("Not", ["o"], ["no"]), mk("Where", ["no", "rc", "pw"], ["wh"]), mk("Dropout", ["wh"], ["dr"]),
        mk("Identity", ["dr"], ["idn"]), mk("CastLike", ["ids", "x"], ["idf"]), mk("Add", ["idn", "idf"], ["sum"]),
        mk("Size", ["x"], ["sz"]), mk("Cast", ["sz"], ["szf"], to=TensorProto.FLOAT), mk("Div", ["sum", "szf"], ["out"]),
        mk("GatherND", ["x", "nd"], ["gnd"], batch_dims=1), mk("Neg", ["ng"], ["neg2"]),
    ]
    model = _model(nodes, [_vi("x", [2, 3, 4, 4]), _vi("ids", [2, 3, 4, 4], TensorProto.INT64)],
                   [_vi("out", [2, 3, 4, 4]), _vi("fl", [2, 3]), _vi("gnd", [2, 4]), _vi("neg2", [2, 3, 4, 4])],
                   [_init("two", np.float32(2)), _init("reps", np.int64([1, 1, 2, 1])), _init("zero", np.float32(0)),
                    _init("nd", np.int64([[1, 2], [0, 3]]))], opset=20)
    feeds = {"x": rng.standard_normal((2, 3, 4, 4)).astype(np.float32) + 0.1,
             "ids": rng.integers(-3, 3, (2, 3, 4, 4)).astype(np.int64)}
    g = _check_against_ort(model, feeds)
    assert {"gelu", "tile", "reduce_max", "not", "or", "cast"} <= {n.op for n in g.nodes}
    assert not any(n.op == "identity" for n in g.nodes)  # Identity and Dropout alias their input


def test_input_shapes_fix_dynamic_dimensions_and_match_onnxruntime():
    """A model exported with dynamic batch and sequence axes: input_shapes makes it static, shape
    sub-computations fold to the given sizes, and the numbers match onnxruntime at that shape."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
             helper.make_node("Concat", ["b1", "minus1"], ["tgt"], axis=0),
             helper.make_node("Reshape", ["x", "tgt"], ["flat"]),
             helper.make_node("MatMul", ["flat", "w"], ["y"])]
    inits = [_init("zero", np.array(0, np.int64)), _init("ax0", np.array([0], np.int64)),
             _init("minus1", np.array([-1], np.int64)),
             _init("w", np.random.default_rng(0).standard_normal((5 * 4, 3)).astype(np.float32))]
    model = _model(nodes, [_vi("x", ["batch", "seq", 4])], [_vi("y", None)], inits)
    data = model.SerializeToString()
    g = load_onnx(data, input_shapes={"x": (2, 5, 4)})
    assert g.inputs[0].shape == (2, 5, 4) and g.outputs[0].shape == (2, 3)
    assert not any(n.op == "shape" for n in g.nodes)
    x = np.random.default_rng(1).standard_normal((2, 5, 4)).astype(np.float32)
    _assert_match(interpret(g, {"x": x}), _ort_run(data, {"x": x}))
    with pytest.warns(UserWarning, match="dynamic dimension 0"), \
            pytest.raises(OnnxImportError, match="dynamic dimension 'seq' at axis 1"):
        load_onnx(data)


def test_matmul_by_a_constant_matrix_is_a_dense_layer():
    """Exporters write nn.Linear on N-D inputs as MatMul(x, W[K, N]) (+ Add): it imports as
    dense(x, W.T) so that dense patterns and dense-only accelerators see a linear layer; a weight
    tied to two MatMuls is transposed once; a MatMul of two activations stays a matmul."""
    w = np.random.default_rng(0).standard_normal((8, 6)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal(6).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m1"]), helper.make_node("Add", ["m1", "b"], ["y1"]),
             helper.make_node("MatMul", ["x2", "w"], ["y2"]),
             helper.make_node("MatMul", ["y1", "y2t"], ["y3"]),
             helper.make_node("Transpose", ["y2"], ["y2t"], perm=[0, 2, 1])]
    nodes = nodes[:3] + [nodes[4], nodes[3]]
    model = _model(nodes, [_vi("x", [2, 5, 8]), _vi("x2", [2, 5, 8])], [_vi("y3", [2, 5, 5])],
                   [_init("w", w), _init("b", b)])
    g = _check_against_ort(model)
    assert [n.op for n in g.nodes] == ["dense", "add", "dense", "transpose", "matmul"]
    dense = [n for n in g.nodes if n.op == "dense"]
    assert dense[0].inputs[1] is dense[1].inputs[1]
    np.testing.assert_array_equal(dense[0].inputs[1].data, w.T)


def _qdq_model(tmp_path):
    """A QDQ model as onnxruntime's static quantizer writes it: int8 weights and an activation
    QuantizeLinear -> DequantizeLinear pair before every quantized op."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.n = 0

        def get_next(self):
            self.n += 1
            return None if self.n > 2 else {"in_0": np.random.default_rng(self.n).standard_normal(
                (1, 3, 32, 32)).astype(np.float32)}
    out = tmp_path / "qdq.onnx"
    quantize_static(str(ZOO_DIR / "hf_resnet.ts.onnx"), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    return out


ZOO_DIR = Path(__file__).resolve().parents[1] / "data" / "zoo"


def test_qdq_model_imports_exactly_and_fold_qdq_removes_the_activation_pairs(tmp_path):
    import onnx
    path = _qdq_model(tmp_path)
    x = {"in_0": np.random.default_rng(9).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    g = load_onnx(path)
    _assert_match(interpret(g, x), _ort_run(path.read_bytes(), x))   # quantize/dequantize as ORT does
    assert any(n.op == "quantize_linear" for n in g.nodes)
    proto = onnx.load(path)
    before = proto.SerializeToString()
    folded = load_onnx(proto, fold_qdq=True)
    assert proto.SerializeToString() == before                       # the caller's proto is untouched
    n_pairs = sum(n.op_type == "QuantizeLinear" for n in proto.graph.node)
    assert folded.meta["folded_qdq_pairs"] == n_pairs > 0
    assert not {"quantize_linear", "dequantize_linear"} & {n.op for n in folded.nodes}
    # the same graph with each pair replaced by Identity, run by onnxruntime
    from partition.onnx.importer import _fold_fake_quant
    _fold_fake_quant(proto.graph)
    _assert_match(interpret(folded, x), _ort_run(proto.SerializeToString(), x))
