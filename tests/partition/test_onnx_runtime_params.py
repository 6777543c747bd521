"""Shape parameters computed at run time (axes, scales/sizes, a Reshape/Expand target, Slice's
starts..steps, TopK's K, Tile's repeats, ConstantOfShape's shape, Range's bounds) given as graph
inputs: the importer types the op by the model's declared output shape (as an exporter writes it),
costs that, reads the actual value when it runs and checks it gives exactly that shape (else one line
naming the node). Each against onnxruntime on one-node models whose parameters are graph inputs."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from test_ops import assert_same, ort_node

from partition import interpret, load_onnx
from partition.interpreter import InterpretError
from partition.onnx.importer import OnnxImportError
from partition.ops import op_cost

OPSET = 21


def _model(op_type: str, inputs: list[np.ndarray], attrs: dict | None, out_shapes, opset: int):
    names = [f"in{i}" if v is not None else "" for i, v in enumerate(inputs)]
    vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.shape(v))
           for n, v in zip(names, inputs) if n]
    outs = [helper.make_tensor_value_info(f"out{i}", 0, None) if s is None else
            helper.make_tensor_value_info(f"out{i}", helper.np_dtype_to_tensor_dtype(np.dtype(s[1])), s[0])
            for i, s in enumerate(out_shapes)]
    node = helper.make_node(op_type, names, [f"out{i}" for i in range(len(out_shapes))], name="n0", **(attrs or {}))
    model = helper.make_model(helper.make_graph([node], "g", vis, outs),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model, {n: np.asarray(v) for n, v in zip(names, inputs) if n}


def declared_vs_ort(op_type: str, inputs: list, attrs: dict | None = None, n_out: int = 1, opset: int = OPSET,
                    exact: bool = False):
    """Every input a graph input; the outputs declared with the shapes onnxruntime computes (what
    an exporter writes). Imports, runs and matches onnxruntime; returns the graph."""
    ref = ort_node(op_type, inputs, attrs, n_out, opset)
    model, feeds = _model(op_type, inputs, attrs, [(r.shape, r.dtype) for r in ref], opset)
    g = load_onnx(model.SerializeToString())
    assert [o.shape for o in g.outputs] == [r.shape for r in ref]  # typed (and costed) by the declaration
    assert_same(interpret(g, feeds), ref, exact)
    return g, model


def run_with(model, feeds: dict) -> list:
    return interpret(load_onnx(model.SerializeToString()), feeds)


def rng_f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------- reductions
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"])
@pytest.mark.parametrize("axes,keep", [([1], 1), ([0, 2], 0), ([-1], 1), ([2, 0], 1), ([1, 2, 0], 0)])
def test_reduction_with_axes_computed_at_run_time(op, axes, keep):
    x = np.abs(rng_f32(2, 3, 4)) + 0.5
    declared_vs_ort(op, [x, np.array(axes, np.int64)], {"keepdims": keep}, opset=18)


@pytest.mark.parametrize("noop", [0, 1])
def test_reduction_with_empty_axes_at_run_time(noop):
    x = rng_f32(2, 3)
    declared_vs_ort("ReduceSum", [x, np.zeros(0, np.int64)], {"keepdims": 1, "noop_with_empty_axes": noop},
                    opset=18)


def test_reduction_axes_that_break_the_declared_shape_are_one_line_naming_the_node():
    x = rng_f32(2, 3, 4)
    _, model = declared_vs_ort("ReduceSum", [x, np.array([1], np.int64)], {"keepdims": 0}, opset=18)
    with pytest.raises(InterpretError, match=r"n0.*reduce_sum: axes \[2\] at run time give shape \[2, 3\], "
                                             r"not the declared \[2, 4\]") as e:
        run_with(model, {"in0": x, "in1": np.array([2], np.int64)})
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("op,dtype", [("ReduceMax", np.float32), ("ReduceMin", np.float32),
                                      ("ReduceMax", np.int32), ("ReduceMin", np.int64)])
def test_reduce_max_min_over_an_empty_set_give_the_identity(op, dtype):
    """The spec: max over nothing is -inf (the type's least integer), min +inf (the greatest); the
    empty input is an initializer (graph inputs must be non-empty)."""
    from onnx import numpy_helper
    x = np.zeros((2, 0, 3), dtype)
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info(
        "y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), [2, 1, 3])],
        initializer=[numpy_helper.from_array(x, "x"), numpy_helper.from_array(np.array([1], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    got = interpret(load_onnx(model.SerializeToString()), {})[0]
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    want = ((-np.inf if info is None else info.min) if op == "ReduceMax" else (np.inf if info is None else info.max))
    np.testing.assert_array_equal(got, np.full((2, 1, 3), want, dtype))
    sess = ort.InferenceSession(model.SerializeToString())
    np.testing.assert_array_equal(sess.run(None, {})[0], got)


# ---------------------------------------------------------------------------- resize
@pytest.mark.parametrize("mode,ctm", [("nearest", "asymmetric"), ("linear", "half_pixel"), ("cubic", "half_pixel"),
                                      ("linear", "pytorch_half_pixel"), ("linear", "align_corners")])
def test_resize_with_sizes_computed_at_run_time(mode, ctm):
    x = rng_f32(1, 2, 5, 7)
    declared_vs_ort("Resize", [x, None, None, np.array([1, 2, 8, 4], np.int64)],
                    {"mode": mode, "coordinate_transformation_mode": ctm})


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_with_scales_computed_at_run_time(mode):
    x = rng_f32(1, 2, 4, 6)
    declared_vs_ort("Resize", [x, None, np.array([1, 1, 1.5, 0.5], np.float32)], {"mode": mode})


def test_resize_sizes_with_axes_and_aspect_policy_at_run_time():
    x = rng_f32(1, 1, 4, 6)
    declared_vs_ort("Resize", [x, None, None, np.array([9, 5], np.int64)],
                    {"mode": "linear", "axes": [3, 2], "keep_aspect_ratio_policy": "not_larger"})


def test_resize_sizes_at_run_time_other_than_declared_are_one_line():
    x = rng_f32(1, 1, 4, 4)
    _, model = declared_vs_ort("Resize", [x, None, None, np.array([1, 1, 8, 8], np.int64)], {"mode": "nearest"})
    with pytest.raises(InterpretError, match=r"n0.*resize: the sizes computed at run time give size \[6, 8\], "
                                             r"not the declared \[8, 8\]"):
        run_with(model, {"in0": x, "in3": np.array([1, 1, 6, 8], np.int64)})


def test_resize_align_corners_with_run_time_scales_is_refused_in_one_line():
    x = rng_f32(1, 1, 2, 4)
    model, _ = _model("Resize", [x, None, np.array([1, 1, 0.6, 0.6], np.float32)],
                      {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
                      [((1, 1, 1, 2), np.float32)], OPSET)
    with pytest.raises(OnnxImportError, match="align_corners with scales computed at run time is not supported"):
        load_onnx(model.SerializeToString())


# ---------------------------------------------------------------------------- shape ops (the dyn_* forms)
def test_reshape_target_at_run_time():
    x = rng_f32(2, 3, 4)
    declared_vs_ort("Reshape", [x, np.array([4, 0, -1], np.int64)], exact=True)
    declared_vs_ort("Reshape", [x, np.array([6, 4], np.int64)], exact=True)


def test_reshape_target_other_than_declared_is_one_line():
    x = rng_f32(2, 3, 4)
    _, model = declared_vs_ort("Reshape", [x, np.array([6, 4], np.int64)], exact=True)
    with pytest.raises(InterpretError, match=r"n0") as e:
        run_with(model, {"in0": x, "in1": np.array([4, 6], np.int64)})
    assert "\n" not in str(e.value) and "[4, 6]" in str(e.value)


def test_slice_smaller_than_declared_at_run_time_is_one_line():
    """The declared shape is exact, not a bound: a shorter slice at run time is an error too."""
    x = rng_f32(4, 5)
    i64 = lambda v: np.array(v, np.int64)  # noqa: E731
    _, model = declared_vs_ort("Slice", [x, i64([0]), i64([3]), i64([0])], exact=True)
    with pytest.raises(InterpretError, match=r"n0.*dyn_slice: the values computed at run time give shape "
                                             r"\[2, 5\], not the declared \[3, 5\]") as e:
        run_with(model, {"in0": x, "in1": i64([0]), "in2": i64([2]), "in3": i64([0])})
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("starts,ends,axes,steps", [([0, 1], [2, 3], [0, 2], [1, 1]), ([-1], [-4], [1], [-1]),
                                                    ([1, 0], [10, 3], [2, 1], [2, 1])])
def test_slice_with_starts_ends_axes_steps_at_run_time(starts, ends, axes, steps):
    x = rng_f32(3, 4, 5)
    i64 = lambda v: np.array(v, np.int64)  # noqa: E731
    declared_vs_ort("Slice", [x, i64(starts), i64(ends), i64(axes), i64(steps)], exact=True)
    declared_vs_ort("Slice", [x, i64(starts), i64(ends), i64(axes)], exact=True)


@pytest.mark.parametrize("largest", [0, 1])
def test_topk_with_k_at_run_time(largest):
    x = rng_f32(3, 7)
    declared_vs_ort("TopK", [x, np.array([4], np.int64)], {"axis": 1, "largest": largest}, n_out=2, exact=True)


def test_expand_tile_constant_of_shape_range_at_run_time():
    x = rng_f32(3, 1)
    declared_vs_ort("Expand", [x, np.array([2, 3, 4], np.int64)], exact=True)
    declared_vs_ort("Tile", [x, np.array([2, 3], np.int64)], exact=True)
    declared_vs_ort("ConstantOfShape", [np.array([2, 5], np.int64)], exact=True)
    declared_vs_ort("Range", [np.float32(1), np.float32(7.5), np.float32(1.5)])
    declared_vs_ort("Range", [np.int32(10), np.int32(1), np.int32(-3)], exact=True)


@pytest.mark.parametrize("center", [0, 1])
def test_nms_with_max_boxes_and_thresholds_at_run_time(center):
    """The output is data-dependent either way: its type bounds every box of every class, the run
    takes the actual max_output_boxes_per_class and thresholds."""
    r = np.random.default_rng(3)
    xy = r.uniform(0, 10, (2, 6, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + r.uniform(1, 4, (2, 6, 2)).astype(np.float32)], axis=2)
    scores = r.uniform(0, 1, (2, 3, 6)).astype(np.float32)
    for mo, iou, st in [(2, 0.5, 0.1), (10, 0.3, 0.0), (0, 0.5, 0.0)]:
        inputs = [boxes, scores, np.array([mo], np.int64), np.array([iou], np.float32), np.array([st], np.float32)]
        ref = ort_node("NonMaxSuppression", inputs, {"center_point_box": center}, 1, OPSET)
        model, feeds = _model("NonMaxSuppression", inputs, {"center_point_box": center}, [None], OPSET)
        g = load_onnx(model.SerializeToString())
        assert g.outputs[0].shape == (2 * 3 * 6, 3)  # the bound: every box of every class
        assert_same(interpret(g, feeds), ref, exact=True)


def test_squeeze_unsqueeze_axes_at_run_time():
    x = rng_f32(3, 1, 4, 1)
    declared_vs_ort("Squeeze", [x, np.array([1, -1], np.int64)], exact=True)
    declared_vs_ort("Squeeze", [x, np.array([3], np.int64)], exact=True)
    declared_vs_ort("Unsqueeze", [x, np.array([0, 5], np.int64)], exact=True)
    _, model = declared_vs_ort("Unsqueeze", [x, np.array([-1], np.int64)], exact=True)
    with pytest.raises(InterpretError, match=r"n0.*not the declared \[3, 1, 4, 1, 1\]"):
        run_with(model, {"in0": x, "in1": np.array([0], np.int64)})


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
def test_pad_with_pads_value_axes_at_run_time(mode):
    x = rng_f32(2, 3, 4)
    declared_vs_ort("Pad", [x, np.array([0, 1, 2, 0, 2, 1], np.int64), np.float32(1.5)], {"mode": mode}, exact=True)
    declared_vs_ort("Pad", [x, np.array([1, -1, 2, 0], np.int64), np.float32(0), np.array([2, 0], np.int64)],
                    {"mode": mode}, exact=True)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_depth_at_run_time(axis):
    idx = np.array([[0, 3, -1], [5, 2, 9]], np.int64)
    declared_vs_ort("OneHot", [idx, np.array([6], np.int64), np.array([-2.0, 3.0], np.float32)], {"axis": axis},
                    exact=True)
    declared_vs_ort("OneHot", [idx, np.float32(4.7), np.array([0, 1], np.int32)], {"axis": axis}, exact=True)


@pytest.mark.parametrize("shape,axes", [([5, 2], None), ([1, 7], [1, 2]), ([3, 9], [-1, 0]), ([4], [1])])
def test_center_crop_pad_at_run_time_and_constant(shape, axes):
    """Odd crops and pads leave the extra element at the end (onnxruntime expands the function)."""
    x = rng_f32(4, 5, 6) if axes is not None else rng_f32(8, 1)
    attrs = {} if axes is None else {"axes": axes}
    declared_vs_ort("CenterCropPad", [x, np.array(shape, np.int64)], attrs, opset=18, exact=True)
    # the same as a constant target (an initializer) needs no declared shape
    from test_ops import Const
    from test_ops_more import import_vs_ort
    import_vs_ort("CenterCropPad", [x, Const(np.array(shape, np.int64))], attrs, opset=18, exact=True)


@pytest.mark.parametrize("axis,onesided,inverse", [(1, 0, 0), (-2, 0, 1), (2, 1, 0), (-3, 0, 0)])
def test_dft_axis_at_run_time(axis, onesided, inverse):
    """Typed along a signal axis giving the declared shape; the actual axis is read when run (the
    two may differ where several axes give that shape: here axes 1 and 2 have one length)."""
    x = rng_f32(2, 6, 6, 1 if onesided else 2)
    g, model = declared_vs_ort("DFT", [x, None, np.array(axis, np.int64)],
                               {"onesided": onesided, "inverse": inverse}, opset=20)
    ax = axis % 4
    sig = x[..., 0].astype(np.float64) + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    y = (np.fft.ifft if inverse else np.fft.fft)(sig, axis=ax)
    if onesided:
        y = np.take(y, range(6 // 2 + 1), axis=ax)
    np.testing.assert_allclose(interpret(g, {"in0": x, "in2": np.array(axis, np.int64)})[0],
                               np.stack([y.real, y.imag], -1), rtol=1e-4, atol=1e-4)


def test_declared_shape_reaches_a_reduction_through_unary_ops():
    """The expanded ReduceLogSumExp: only the graph output is declared; Log and CastLike keep
    their input's shape, so the ReduceSum before them is typed by it."""
    x = rng_f32(2, 3, 4)
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("ReduceSum", ["e", "axes"], ["s"], keepdims=0),
             helper.make_node("Log", ["s"], ["l"]), helper.make_node("CastLike", ["l", "x"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [2, 3, 4]),
                                           helper.make_tensor_value_info("axes", 7, [1])],
                              [helper.make_tensor_value_info("y", 1, [2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    axes = np.array([1], np.int64)
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x, "axes": axes})
    assert_same(interpret(load_onnx(model.SerializeToString()), {"x": x, "axes": axes}), ref)


def _loop_model(scan_len: int, early: bool):
    """Loop(M, cond, y): y += x[i] each trip, scan output y; with ``early`` the body stops once y > 2.5."""
    from onnx import numpy_helper
    xs = numpy_helper.from_array(np.arange(1, 9, dtype=np.float32).reshape(8, 1) / 2, "xs")
    body_nodes = [helper.make_node("Constant", [], ["xs"], value=xs),
                  helper.make_node("Gather", ["xs", "i"], ["xi"], axis=0),
                  helper.make_node("Add", ["y_in", "xi"], ["y_out"]),
                  helper.make_node("Identity", ["y_out"], ["scan"])]
    if early:
        body_nodes += [helper.make_node("Constant", [], ["lim"], value=numpy_helper.from_array(np.float32([2.5]))),
                       helper.make_node("Less", ["y_out", "lim"], ["c1"]),
                       helper.make_node("Squeeze", ["c1"], ["c_out"])]
    else:
        body_nodes += [helper.make_node("Constant", [], ["c_out"], value=numpy_helper.from_array(np.array(True)))]
    body = helper.make_graph(body_nodes, "body", [helper.make_tensor_value_info("i", 7, []),
                                                 helper.make_tensor_value_info("c_in", 9, []),
                                                 helper.make_tensor_value_info("y_in", 1, [1])],
                             [helper.make_tensor_value_info("c_out", 9, []), helper.make_tensor_value_info("y_out", 1, [1]),
                              helper.make_tensor_value_info("scan", 1, [1])])
    node = helper.make_node("Loop", ["M", "cond", "y0"], ["y", "scans"], body=body, name="lp")
    # the entry condition: a graph input with ``early``, else the constant True
    ins = [helper.make_tensor_value_info("M", 7, []), helper.make_tensor_value_info("y0", 1, [1])]
    ins += [helper.make_tensor_value_info("cond", 9, [])] if early else []
    graph = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", 1, [1]),
                                                 helper.make_tensor_value_info("scans", 1, [scan_len, 1])],
                              initializer=[] if early else [numpy_helper.from_array(np.array(True), "cond")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("early", [False, True])
def test_loop_trip_count_at_run_time(early):
    """The scan output's declared length stands for the trip count (typing, costing); the loop runs
    the actual count. Exact when nothing can stop the loop early, otherwise a bound."""
    model = _loop_model(5, early)
    g = load_onnx(model.SerializeToString())
    assert g.outputs[1].shape == (5, 1)
    sess = ort.InferenceSession(model.SerializeToString())
    feeds = {"M": np.array(5, np.int64), "y0": np.float32([0.25])}
    feeds.update({"cond": np.array(True)} if early else {})
    assert_same(interpret(g, feeds), sess.run(None, feeds))
    if early:  # stops after 3 trips: shorter than the bound, as onnxruntime returns it
        assert interpret(g, feeds)[1].shape == (3, 1)
    else:
        with pytest.raises(InterpretError, match=r"lp \(loop\): 4 trips at run time, not the declared scan length 5"):
            interpret(g, dict(feeds, M=np.array(4, np.int64)))


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_window_with_size_at_run_time(op, periodic):
    g, model = declared_vs_ort(op, [np.array(7, np.int64)], {"periodic": periodic}, opset=17)
    with pytest.raises(InterpretError, match=r"n0 .*window: size 5 at run time is not the declared length 7"):
        run_with(model, {"in0": np.array(5, np.int64)})
    from test_ops import Const
    from test_ops_more import import_vs_ort
    import_vs_ort(op, [Const(np.array(9, np.int32))], {"periodic": periodic}, opset=17)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress_is_data_dependent_and_matches_onnxruntime(axis):
    """Compress keeps as many slices as the condition selects: its type is the bound (all of
    them), the run gives the actual count, and a Reshape -1 downstream follows it."""
    x = rng_f32(4, 5)
    attrs = {} if axis is None else {"axis": axis}
    for cond in ([1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0]):
        cond = np.array(cond, bool)
        ref = ort_node("Compress", [x, cond], attrs, 1, OPSET)
        model, feeds = _model("Compress", [x, cond], attrs, [None], OPSET)
        g = load_onnx(model.SerializeToString())
        n = len(cond) if axis is None else min(len(cond), x.shape[axis])
        assert g.outputs[0].shape == ((n,) if axis is None else tuple(n if i == axis % 2 else d for i, d in enumerate(x.shape)))
        assert_same(interpret(g, feeds), ref, exact=True)


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("shapes", [((3, 5), (5, 4)), ((2, 3, 5), (5, 2))])
def test_qlinear_matmul_matches_onnxruntime(dt, shapes):
    """(Not a run-time parameter: the remaining inference op the suite showed refused.)"""
    r = np.random.default_rng(5)
    info = np.iinfo(dt)
    a = r.integers(info.min, info.max, shapes[0]).astype(dt)
    b = r.integers(info.min, info.max, shapes[1]).astype(dt)
    f = lambda v: np.array([v], np.float32)  # noqa: E731
    z = lambda v: np.array([v], dt)  # noqa: E731
    inputs = [a, f(0.02), z(3), b, f(0.05), z(-2 if dt == np.int8 else 130), f(0.9), z(1 if dt == np.int8 else 120)]
    from test_ops_more import import_vs_ort
    g = import_vs_ort("QLinearMatMul", inputs, exact=True)
    (node,) = g.nodes
    m, k = shapes[0][-2:]
    assert op_cost(node).macs == int(np.prod(shapes[0][:-2], dtype=np.int64)) * m * k * shapes[1][-1]


@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_unique_is_data_dependent_and_matches_onnxruntime(sorted_, axis):
    """(A data-dependent op the suite showed refused.) Types are the bound: every element distinct."""
    x = np.array([[2, 1, 2], [0, 5, 0], [2, 1, 2], [3, 3, 3]], np.float32)
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    ref = ort_node("Unique", [x], attrs, 4, OPSET)
    model, feeds = _model("Unique", [x], attrs, [None] * 4, OPSET)
    g = load_onnx(model.SerializeToString())
    n = x.size if axis is None else x.shape[axis]
    assert [o.shape for o in g.outputs[1:]] == [(n,)] * 3
    assert_same(interpret(g, feeds), ref, exact=True)


@pytest.mark.parametrize("op,inputs,declared,match", [
    ("Reshape", [np.zeros((2, 3), np.float32), np.array([7, 7])], (7, 7), "cannot reshape"),
    ("Squeeze", [np.zeros((2, 1), np.float32), np.array([1])], (3,), "does not hold the input's 2 elements"),
    ("Pad", [np.zeros((2, 3), np.float32), np.array([1, 1, 1, 1])], (2,), "does not have the input's rank 2"),
    ("Tile", [np.zeros((2, 3), np.float32), np.array([2, 2])], (5, 6), "declared shape \\[5, 6\\] does not fit"),
])
def test_a_declared_shape_that_cannot_be_is_one_line_at_import(op, inputs, declared, match):
    model, _ = _model(op, inputs, None, [(declared, np.float32)], OPSET)
    with pytest.raises(OnnxImportError, match=f"node 'n0' \\({op}\\): .*{match}") as e:
        load_onnx(model.SerializeToString())
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("size", [[2, 3, 4, 5], [1, 1, 3, 2, 4], [2, 1, 1, 3]])
def test_affine_grid_with_size_at_run_time_and_constant(align, size):
    # (a length-1 axis with align_corners is left out: onnx's reference puts it at -1, onnxruntime
    # elsewhere; the spec's formula divides by zero there)
    if align and 1 in size[2:]:
        size = size[:2] + [d + 1 for d in size[2:]]
    k = len(size) - 2
    theta = rng_f32(size[0], k, k + 1, seed=len(size))
    declared_vs_ort("AffineGrid", [theta, np.array(size, np.int64)], {"align_corners": align}, opset=20)
    from test_ops import Const
    from test_ops_more import import_vs_ort
    import_vs_ort("AffineGrid", [theta, Const(np.array(size, np.int64))], {"align_corners": align}, opset=20)
