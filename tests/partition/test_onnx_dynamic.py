"""Data-dependent sizes: values downstream of NonZero / NonMaxSuppression keep their upper bound in
their types (costing) and their real sizes at run time, matching onnxruntime on inputs that keep
few, many or no elements; MaxPool/AveragePool windows larger than the padded input under ceil_mode."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from partition import interpret  # noqa: E402
from partition.onnx.importer import OnnxImportError, load_onnx  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs], initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _c(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _ort(model, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _same_as_ort(model, feeds_list):
    """Import once, run every feed through the interpreter and onnxruntime; returns the graph and
    the run-time shapes of the outputs (so tests can check the inputs exercised sizes below the
    bound), and keeps the outputs in ``_same_as_ort.last``."""
    g = load_onnx(model.SerializeToString())
    sizes, _same_as_ort.last = [], []
    for feeds in feeds_list:
        ours = interpret(g, feeds)
        _same_as_ort.last.append(ours)
        ref = _ort(model, feeds)
        assert len(ours) == len(ref)
        for a, r in zip(ours, ref):
            assert a.shape == r.shape, (a.shape, r.shape)
            np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-6)
        sizes.append(tuple(o.shape for o in ours))
    return g, sizes


def _node(g, op):
    return next(n for n in g.nodes if n.op == op)


# ---------------------------------------------------------------------------- NonZero

def _nonzero_model():
    """y = reshape(x[x > t], [-1, 1]) via NonZero, and z = reshape(nonzero, [Shape[1], 2]) from a
    shape computation: both reshape targets depend on the run-time count."""
    nodes = [
        helper.make_node("Greater", ["x", "t"], ["m"]),
        helper.make_node("NonZero", ["m"], ["nz"]),                       # [2, n]
        helper.make_node("Transpose", ["nz"], ["nzt"], perm=[1, 0]),      # [n, 2]
        helper.make_node("GatherND", ["x", "nzt"], ["vals"]),             # [n]
        helper.make_node("Reshape", ["vals", "shape_m1_1"], ["y"]),       # [n, 1]
        helper.make_node("Shape", ["nz"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["n"]),
        helper.make_node("Unsqueeze", ["n", "zero_axis"], ["n1"]),
        helper.make_node("Concat", ["n1", "two"], ["tgt"], axis=0),
        helper.make_node("Reshape", ["nzt", "tgt"], ["z"]),
    ]
    inits = [_c("t", np.float32(0.5)), _c("shape_m1_1", np.array([-1, 1], np.int64)),
             _c("one", np.array(1, np.int64)), _c("zero_axis", np.array([0], np.int64)),
             _c("two", np.array([2], np.int64))]
    return _model(nodes, [("x", F, [4, 6])], [("y", F), ("z", I64)], inits)


def test_nonzero_reshapes_use_the_run_time_count_and_match_onnxruntime():
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.random((4, 6)).astype(np.float32)} for _ in range(4)]
    feeds += [{"x": np.zeros((4, 6), np.float32)}, {"x": np.ones((4, 6), np.float32)}]
    g, sizes = _same_as_ort(_nonzero_model(), feeds)
    counts = {s[0][0] for s in sizes}
    assert 0 in counts and 24 in counts and any(0 < c < 24 for c in counts)
    # the types carry the bound: every element non-zero
    assert _node(g, "non_zero").outputs[0].shape == (2, 24)
    assert [v.shape for v in g.outputs] == [(24, 1), (24, 2)]


def test_nonzero_of_a_constant_folds():
    nodes = [helper.make_node("NonZero", ["c"], ["nz"]), helper.make_node("Cast", ["nz"], ["f"], to=F),
             helper.make_node("ReduceSum", ["f"], ["s"], keepdims=0), helper.make_node("Add", ["x", "s"], ["y"])]
    m = _model(nodes, [("x", F, [1])], [("y", F)], [_c("c", np.array([[0, 3], [2, 0], [0, 0]], np.float32))])
    g, _ = _same_as_ort(m, [{"x": np.array([1.0], np.float32)}])
    assert not any(n.op == "non_zero" for n in g.nodes)


# ---------------------------------------------------------------------------- NMS + TopK(K = min(k, n))

def _nms_topk_model(k_max=5):
    """torchvision's post-processing in miniature: keep scores above a threshold (NonZero), take
    the top K = min(k_max, #kept) of them, then NMS on their boxes and gather the kept rows; the
    row count is data-dependent at every step."""
    nodes = [
        helper.make_node("Greater", ["scores", "thr"], ["keep"]),
        helper.make_node("NonZero", ["keep"], ["nz"]),
        helper.make_node("Reshape", ["nz", "m1"], ["idx"]),                    # [n]
        helper.make_node("Gather", ["scores", "idx"], ["kept"]),               # [n]
        helper.make_node("Shape", ["kept"], ["ks"]),
        helper.make_node("Min", ["ks", "kmax"], ["k"]),                        # min(k_max, n)
        helper.make_node("TopK", ["kept", "k"], ["top", "ti"]),
        helper.make_node("Gather", ["idx", "ti"], ["sel"]),
        helper.make_node("Gather", ["boxes", "sel"], ["b"]),                   # [K, 4]
        helper.make_node("Unsqueeze", ["b", "zero_axis"], ["b3"]),             # [1, K, 4]
        helper.make_node("Unsqueeze", ["top", "zero_one"], ["s3"]),            # [1, 1, K]
        helper.make_node("NonMaxSuppression", ["b3", "s3", "mo", "iou"], ["nms"]),
        helper.make_node("Gather", ["nms", "two"], ["col"], axis=1),           # [m]
        helper.make_node("Gather", ["b", "col"], ["out_boxes"]),
        helper.make_node("Shape", ["col"], ["cs"]),
        helper.make_node("Slice", ["top", "zero_axis", "cs"], ["out_scores"]),  # ends from a run-time shape
    ]
    inits = [_c("thr", np.float32(0.5)), _c("m1", np.array([-1], np.int64)), _c("kmax", np.array([k_max], np.int64)),
             _c("zero_axis", np.array([0], np.int64)), _c("zero_one", np.array([0, 1], np.int64)),
             _c("mo", np.array([10], np.int64)), _c("iou", np.array([0.3], np.float32)), _c("two", np.array(2, np.int64))]
    return _model(nodes, [("scores", F, [12]), ("boxes", F, [12, 4])],
                  [("out_boxes", F), ("out_scores", F), ("k", I64)], inits)


def _boxes(rng, n):
    xy = rng.random((n, 2)).astype(np.float32) * 10
    wh = rng.random((n, 2)).astype(np.float32) * 4 + 0.5
    return np.concatenate([xy, xy + wh], axis=1)


def test_topk_with_k_from_the_kept_count_and_nms_match_onnxruntime():
    rng = np.random.default_rng(3)
    feeds = []
    for frac in (0.1, 0.3, 0.6, 0.9, 0.0):  # fewer and more kept scores than K
        s = rng.random(12).astype(np.float32) * 0.5
        s[: int(12 * frac)] += 0.5
        feeds.append({"scores": rng.permutation(s), "boxes": _boxes(rng, 12)})
    g, sizes = _same_as_ort(_nms_topk_model(), feeds)
    ks = {int(out[2][0]) for out in _same_as_ort.last}
    assert 0 in ks and 5 in ks and ks & {1, 2, 3, 4}  # K = min(5, #kept) varied with the data
    topk = _node(g, "dyn_topk")
    assert topk.attrs["k"] == 5  # costing uses the bound min(5, 12)
    assert _node(g, "non_max_suppression").outputs[0].shape == (5, 3)


def test_costing_uses_the_upper_bound():
    """The dynamic TopK costs what a static TopK of K = bound costs, on an input of the bound size."""
    from partition.ops import op_cost
    g = load_onnx(_nms_topk_model(k_max=5).SerializeToString())
    dyn = _node(g, "dyn_topk")
    assert dyn.inputs[0].shape == (12,)  # NonZero's bound: every score kept
    static = _model([helper.make_node("TopK", ["x", "k"], ["v", "i"])], [("x", F, [12])], [("v", F), ("i", I64)],
                    [_c("k", np.array([5], np.int64))])
    ref = _node(load_onnx(static.SerializeToString()), "topk")
    assert op_cost(dyn).flops == op_cost(ref).flops > 0
    assert [o.shape for o in dyn.outputs] == [o.shape for o in ref.outputs] == [(5,), (5,)]


# ---------------------------------------------------------------------------- other run-time forms

def test_slice_expand_tile_constant_of_shape_and_range_from_run_time_sizes():
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"]),
        helper.make_node("Shape", ["nz"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["n"]),                  # scalar n
        helper.make_node("Unsqueeze", ["n", "zero_axis"], ["n1"]),        # [n]
        helper.make_node("Range", ["zero", "n", "one"], ["r"]),           # arange(n)
        helper.make_node("ConstantOfShape", ["n1"], ["ones"], value=_c("v", np.array([1.5], np.float32))),
        helper.make_node("Concat", ["two", "n1"], ["es"], axis=0),
        helper.make_node("Expand", ["ones", "es"], ["e"]),                # [2, n]
        helper.make_node("Concat", ["n1", "one1"], ["reps"], axis=0),
        helper.make_node("Tile", ["w", "reps"], ["t"]),                   # [3n, 2]
        helper.make_node("Slice", ["w", "zero_axis", "n1", "zero_axis"], ["sl"]),  # w[:n]
        helper.make_node("Size", ["nz"], ["sz"]),
    ]
    inits = [_c("one", np.array(1, np.int64)), _c("zero", np.array(0, np.int64)),
             _c("zero_axis", np.array([0], np.int64)), _c("two", np.array([2], np.int64)),
             _c("one1", np.array([1], np.int64)), _c("w", np.arange(6, dtype=np.float32).reshape(3, 2))]
    m = _model(nodes, [("x", F, [5])], [("r", I64), ("e", F), ("t", F), ("sl", F), ("sz", I64)], inits)
    feeds = [{"x": np.array(v, np.float32)} for v in ([0, 1, 0, 2, 0], [0] * 5, [1, 2, 3, 4, 5], [0, 0, 0, 0, 7])]
    g, sizes = _same_as_ort(m, feeds)
    assert {s[0] for s in sizes} == {(2,), (0,), (5,), (1,)}
    ops = {n.op for n in g.nodes}
    assert {"range", "constant_of_shape", "dyn_expand", "dyn_tile", "dyn_slice", "size"} <= ops
    # bound types: n <= 5
    assert [v.shape for v in g.outputs] == [(5,), (2, 5), (15, 2), (3, 2), ()]


def test_split_by_run_time_sizes_matches_onnxruntime():
    """Split sizes computed from data (boxes per pyramid level in Faster R-CNN's pooler): from a
    run-time count (bounded by its value at the bound) and from a sum of a mask (no bound but the
    whole axis)."""
    nodes = [
        helper.make_node("Greater", ["x", "t"], ["m"]),
        helper.make_node("NonZero", ["m"], ["nz"]),
        helper.make_node("Shape", ["nz"], ["s"]),
        helper.make_node("Slice", ["s", "one1", "two1"], ["n"]),              # [n]
        helper.make_node("Sub", ["six", "n"], ["rest"]),
        helper.make_node("Concat", ["n", "rest"], ["sizes"], axis=0),
        helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=0),
        helper.make_node("Cast", ["m"], ["mi"], to=I64),
        helper.make_node("ReduceSum", ["mi", "zero1"], ["k"], keepdims=1),  # data, not a shape
        helper.make_node("Sub", ["six", "k"], ["rest2"]),
        helper.make_node("Concat", ["k", "rest2"], ["sizes2"], axis=0),
        helper.make_node("Split", ["x", "sizes2"], ["c", "d"], axis=0),
    ]
    inits = [_c("t", np.float32(0.5)), _c("one1", np.array([1], np.int64)), _c("two1", np.array([2], np.int64)),
             _c("six", np.array([6], np.int64)), _c("zero1", np.array([0], np.int64))]
    m = _model(nodes, [("x", F, [6])], [("a", F), ("b", F), ("c", F), ("d", F)], inits, opset=18)
    feeds = [{"x": np.array(v, np.float32)} for v in ([0, 1, 0, 1, 1, 0], [0] * 6, [1] * 6, [0.9, 0, 0, 0, 0, 0])]
    g, sizes = _same_as_ort(m, feeds)
    assert {s[0] for s in sizes} == {(3,), (0,), (6,), (1,)}
    splits = [n for n in g.nodes if n.op == "dyn_split"]
    assert len(splits) == 2 and all(o.shape == (6,) for n in splits for o in n.outputs)


def test_if_whose_branches_differ_in_shape_feeds_a_reshape():
    """TorchScript exports guard ``boxes.numel() == 0`` with an If: its output is as long as the
    longer branch at import, and as the branch taken at run time."""
    empty = helper.make_graph([helper.make_node("Constant", [], ["e"], value=_c("ev", np.zeros((0, 3), np.int64)))],
                              "then_g", [], [helper.make_tensor_value_info("e", I64, [0, 3])])
    full = helper.make_graph([helper.make_node("NonMaxSuppression", ["b3", "s3", "mo"], ["n"])],
                             "else_g", [], [helper.make_tensor_value_info("n", I64, [None, 3])])
    nodes = [
        helper.make_node("Unsqueeze", ["boxes", "zero_axis"], ["b3"]),
        helper.make_node("Reshape", ["scores", "s_shape"], ["s3"]),
        helper.make_node("ReduceMax", ["scores"], ["mx"], keepdims=0),
        helper.make_node("Less", ["mx", "thr"], ["none"]),
        helper.make_node("If", ["none"], ["sel"], then_branch=empty, else_branch=full),
        helper.make_node("Flatten", ["sel"], ["flat"], axis=0),
        helper.make_node("Reshape", ["sel", "m1"], ["y"]),
    ]
    inits = [_c("zero_axis", np.array([0], np.int64)), _c("s_shape", np.array([1, 1, 6], np.int64)),
             _c("thr", np.float32(0.2)), _c("mo", np.array([4], np.int64)), _c("m1", np.array([-1], np.int64))]
    m = _model(nodes, [("boxes", F, [6, 4]), ("scores", F, [6])], [("y", I64), ("flat", I64)], inits)
    rng = np.random.default_rng(5)
    feeds = [{"boxes": _boxes(rng, 6), "scores": rng.random(6).astype(np.float32)} for _ in range(3)]
    feeds.append({"boxes": _boxes(rng, 6), "scores": np.full(6, 0.1, np.float32)})  # then-branch: empty
    _, sizes = _same_as_ort(m, feeds)
    assert (0,) in {s[0] for s in sizes}


def test_a_run_time_size_a_static_attribute_cannot_take_is_one_line():
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Shape", ["nz"], ["s"]),
             helper.make_node("Concat", ["zeros2", "s", "zeros2"], ["pads"], axis=0),
             helper.make_node("Pad", ["x2", "pads"], ["y"], name="pad")]
    inits = [_c("zeros2", np.array([0], np.int64))]
    m = _model(nodes, [("x", F, [5]), ("x2", F, [2, 2])], [("y", F)], inits)
    with pytest.raises(OnnxImportError, match=r"^node 'pad' \(Pad\): pads input 'pads' must be a constant"):
        load_onnx(m.SerializeToString())


# ---------------------------------------------------------------------------- pooling, ceil_mode

@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("h, k, s, pads, cip", [
    (5, 7, 7, [0, 0, 0, 0], 0),   # adaptive pooling of 5 -> 1 as dynamo writes it
    (3, 4, 4, [0, 0, 0, 0], 1),
    (1, 2, 2, [0, 0, 0, 0], 0),
    (6, 7, 3, [0, 0, 0, 0], 0),
    (5, 7, 2, [1, 1, 1, 1], 1),
    (7, 3, 2, [0, 0, 0, 0], 0),
])
def test_ceil_mode_pool_whose_kernel_exceeds_the_padded_input_matches_onnxruntime(op, h, k, s, pads, cip):
    attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=pads, ceil_mode=1)
    if op == "AveragePool":
        attrs["count_include_pad"] = cip
    m = _model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", F, [1, 2, h, h])], [("y", F)])
    x = np.random.default_rng(h * k).standard_normal((1, 2, h, h)).astype(np.float32)
    _same_as_ort(m, [{"x": x}])


def test_floor_mode_pool_larger_than_its_input_is_one_line():
    """The spec's floor((in + pads - kernel) / stride + 1) is 0 here (onnxruntime truncates toward
    zero and returns 1): refused rather than follow one runtime's rounding."""
    m = _model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[7, 7], strides=[7, 7], name="mp")],
               [("x", F, [1, 2, 5, 5])], [("y", F)])
    with pytest.raises(OnnxImportError, match="kernel 7x7 does not fit the padded 5x5 input"):
        load_onnx(m.SerializeToString())


def test_scan_output_of_a_loop_that_stops_early_feeds_a_shape():
    """A Loop whose body stops when a running sum passes a limit: the scan output is as long as
    the max trip count in its type and as the trips taken at run time; Shape of it follows."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         helper.make_node("ReduceSum", ["acc_out"], ["tot"], keepdims=0),
         helper.make_node("Less", ["tot", "limit"], ["cond_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan"])],
        "body", [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("acc_in", F, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("acc_out", F, [2]),
         helper.make_tensor_value_info("scan", F, [2])])
    nodes = [helper.make_node("Loop", ["trips", "", "zero2"], ["acc", "scans"], body=body),
             helper.make_node("Shape", ["scans"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"]),
             helper.make_node("Cast", ["n"], ["nf"], to=F),
             helper.make_node("Mul", ["x", "nf"], ["y"]),
             helper.make_node("Reshape", ["scans", "m1"], ["flat"])]
    inits = [_c("trips", np.array(6, np.int64)), _c("zero2", np.zeros(2, np.float32)), _c("zero", np.array(0, np.int64)),
             _c("limit", np.float32(5.0)), _c("m1", np.array([-1], np.int64))]
    m = _model(nodes, [("x", F, [2])], [("y", F), ("flat", F)], inits)
    feeds = [{"x": np.array(v, np.float32)} for v in ([0.5, 0.5], [2.0, 1.0], [0.1, 0.0], [9.0, 9.0])]
    _, sizes = _same_as_ort(m, feeds)
    assert len({s[1] for s in sizes}) > 1
