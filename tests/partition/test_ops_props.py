"""Property tests: on random valid inputs, shape inference predicts exactly the shape and dtype the
numpy reference produces; for conv2d, pools and slice the values also match onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

from partition.ir import TensorType
from partition.ops import OPS, OpError, infer_types

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

dims = st.integers(1, 5)
shapes = st.lists(dims, min_size=0, max_size=4).map(tuple)
nonscalar = st.lists(dims, min_size=1, max_size=4).map(tuple)


def arr(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def agree(op, args, attrs):
    """infer's types == compute's arrays (shape and dtype); returns the arrays."""
    types = infer_types(op, [TensorType(a.shape, a.dtype.name) for a in args], attrs)
    outs = OPS[op].compute(list(args), attrs)
    assert [(o.shape, o.dtype.name) for o in outs] == [(t.shape, t.dtype) for t in types]
    return outs


def ort_run(op_type, feeds_and_consts, attrs, n_out=1):
    inputs, inits, names, feeds = [], [], [], {}
    for i, (v, is_const) in enumerate(feeds_and_consts):
        name = f"in{i}"
        names.append(name)
        if is_const:
            inits.append(onnx.numpy_helper.from_array(np.asarray(v), name))
        else:
            inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape))
            feeds[name] = v
    outs = [f"o{i}" for i in range(n_out)]
    g = helper.make_graph([helper.make_node(op_type, names, outs, **attrs)], "g", inputs,
                          [helper.make_empty_tensor_value_info(o) for o in outs], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


# ---------------------------------------------------------------------------- broadcasting
@st.composite
def broadcast_pair(draw):
    out = draw(st.lists(dims, min_size=0, max_size=4))
    def sub():
        k = draw(st.integers(0, len(out)))
        return tuple(1 if draw(st.booleans()) else d for d in out[len(out) - k:])
    return sub(), sub()


@SETTINGS
@given(broadcast_pair(), st.sampled_from(["add", "sub", "mul", "div", "pow", "less", "equal"]))
def test_binary_shapes(pair, op):
    a, b = arr(pair[0], 1), np.abs(arr(pair[1], 2)) + np.float32(0.5)
    out = agree(op, [a, b], {})[0]
    assert out.shape == np.broadcast_shapes(pair[0], pair[1])


@SETTINGS
@given(shapes, st.sampled_from(["relu", "gelu", "sigmoid", "silu", "hard_swish", "relu6", "neg", "tanh",
                                "leaky_relu", "hard_sigmoid", "identity", "abs", "exp", "erf"]))
def test_unary_shapes(shape, op):
    x = arr(shape)
    assert agree(op, [x], {})[0].shape == x.shape


# ---------------------------------------------------------------------------- conv / pool (vs ORT too)
@st.composite
def conv_case(draw):
    g = draw(st.sampled_from([1, 1, 2, 3]))
    cg, kg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    depthwise = draw(st.booleans())
    if depthwise:
        g, cg = draw(st.integers(2, 4)), 1
    r, s = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    h = draw(st.integers(max(1, dil[0] * (r - 1) + 1 - pads[0] - pads[2]), 12))
    w = draw(st.integers(max(1, dil[1] * (s - 1) + 1 - pads[1] - pads[3]), 12))
    n = draw(st.integers(1, 2))
    bias = draw(st.booleans())
    return (n, cg * g, h, w), (kg * g, cg, r, s), {"strides": strides, "pads": pads, "dilations": dil,
                                                   "groups": g}, bias


@settings(max_examples=60, deadline=None)
@given(conv_case())
def test_conv2d_shape_and_values_vs_ort(case):
    xs, ws, attrs, bias = case
    args = [arr(xs, 1), arr(ws, 2)] + ([arr((ws[0],), 3)] if bias else [])
    ours = agree("conv2d", args, attrs)[0]
    ref = ort_run("Conv", [(a, False) for a in args],
                  {"strides": list(attrs["strides"]), "pads": list(attrs["pads"]),
                   "dilations": list(attrs["dilations"]), "group": attrs["groups"]})[0]
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)


@st.composite
def pool_case(draw):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = (draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)),
            draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    h = draw(st.integers(dil[0] * (kh - 1) + 1, 11))
    w = draw(st.integers(dil[1] * (kw - 1) + 1, 11))
    attrs = {"kernel": (kh, kw), "strides": strides, "pads": pads, "dilations": dil,
             "ceil_mode": draw(st.booleans())}
    return (1, 2, h, w), attrs, draw(st.booleans())


@settings(max_examples=60, deadline=None)
@given(pool_case(), st.sampled_from(["max_pool2d", "avg_pool2d"]))
def test_pool_shape_and_values_vs_ort(case, op):
    shape, attrs, cip = case
    if op == "avg_pool2d":
        attrs = {**attrs, "count_include_pad": cip}
    x = arr(shape, 4)
    ours = agree(op, [x], attrs)[0]
    oa = {"kernel_shape": list(attrs["kernel"]), "strides": list(attrs["strides"]), "pads": list(attrs["pads"]),
          "dilations": list(attrs["dilations"]), "ceil_mode": int(attrs["ceil_mode"])}
    if op == "avg_pool2d":
        oa["count_include_pad"] = int(cip)
    ref = ort_run("MaxPool" if op == "max_pool2d" else "AveragePool", [(x, False)], oa)[0]
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------- matmul family
@st.composite
def matmul_shapes(draw):
    m, k, n = draw(dims), draw(dims), draw(dims)
    batch_a, batch_b = draw(broadcast_pair())
    a = (k,) if draw(st.booleans()) else batch_a + (m, k)
    b = (k,) if draw(st.booleans()) else batch_b + (k, n)
    return a, b


@SETTINGS
@given(matmul_shapes())
def test_matmul_shapes(ab):
    a, b = arr(ab[0], 1), arr(ab[1], 2)
    assert agree("matmul", [a, b], {})[0].shape == np.matmul(a, b).shape


@SETTINGS
@given(dims, dims, dims, st.booleans(), st.booleans(), st.sampled_from([None, "mn", "n", "m1", "1n", "scalar"]))
def test_gemm_shapes(m, k, n, ta, tb, c):
    a = arr((k, m) if ta else (m, k), 1)
    b = arr((n, k) if tb else (k, n), 2)
    cs = {None: None, "mn": (m, n), "n": (n,), "m1": (m, 1), "1n": (1, n), "scalar": ()}[c]
    args = [a, b] + ([] if cs is None else [arr(cs, 3)])
    out = agree("gemm", args, {"trans_a": int(ta), "trans_b": int(tb), "alpha": 0.5, "beta": 2.0})[0]
    ref = 0.5 * (a.T if ta else a).astype(np.float64) @ (b.T if tb else b) + (0 if cs is None else 2.0 * args[2])
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------- reductions & friends
@st.composite
def axes_of(draw, shape):
    r = len(shape)
    if draw(st.booleans()) or r == 0:
        return None
    chosen = draw(st.lists(st.integers(0, r - 1), min_size=1, max_size=r, unique=True))
    return tuple(a - r if draw(st.booleans()) else a for a in chosen)


@SETTINGS
@given(st.data(), nonscalar, st.sampled_from(["reduce_mean", "reduce_sum", "reduce_max"]), st.booleans())
def test_reduce_shapes(data, shape, op, keep):
    axes = data.draw(axes_of(shape))
    x = arr(shape)
    fn = {"reduce_mean": np.mean, "reduce_sum": np.sum, "reduce_max": np.max}[op]
    out = agree(op, [x], {"axes": axes, "keepdims": keep})[0]
    np.testing.assert_allclose(out, fn(x.astype(np.float64), axis=axes, keepdims=keep), rtol=1e-4, atol=1e-5)


@SETTINGS
@given(st.data(), nonscalar, st.booleans())
def test_argmax_softmax_layer_norm_topk_shapes(data, shape, keep):
    r = len(shape)
    axis = data.draw(st.integers(-r, r - 1))
    x = arr(shape, 5)
    agree("argmax", [x], {"axis": axis, "keepdims": keep})
    np.testing.assert_allclose(agree("softmax", [x], {"axis": axis})[0].sum(axis=axis), 1.0, rtol=1e-5)
    norm = shape[axis % r:]
    agree("layer_norm", [x, arr(norm, 6), arr(norm, 7)], {"axis": axis})
    k = data.draw(st.integers(0, shape[axis]))
    vals, idx = agree("topk", [x], {"k": k, "axis": axis})
    np.testing.assert_array_equal(vals, np.take_along_axis(x, idx, axis=axis))


# ---------------------------------------------------------------------------- data movement
@SETTINGS
@given(st.data(), shapes)
def test_reshape_flatten_transpose_shapes(data, shape):
    x = arr(shape)
    perm = data.draw(st.permutations(range(len(shape))))
    assert agree("transpose", [x], {"perm": tuple(perm)})[0].shape == tuple(shape[p] for p in perm)
    target = list(data.draw(st.permutations(shape)))
    if target:
        target[data.draw(st.integers(0, len(target) - 1))] = -1
    assert agree("reshape", [x], {"shape": target})[0].size == x.size
    if shape:
        axis = data.draw(st.integers(-len(shape), len(shape)))
        assert len(agree("flatten", [x], {"axis": axis})[0].shape) == 2


@SETTINGS
@given(st.data(), shapes)
def test_squeeze_unsqueeze_roundtrip(data, shape):
    x = arr(shape)
    out_rank = len(shape) + data.draw(st.integers(1, 3))
    axes = data.draw(st.lists(st.integers(0, out_rank - 1), min_size=out_rank - len(shape),
                              max_size=out_rank - len(shape), unique=True))
    y = agree("unsqueeze", [x], {"axes": axes})[0]
    z = agree("squeeze", [y], {"axes": axes})[0]
    np.testing.assert_array_equal(z, x)


@SETTINGS
@given(st.data(), nonscalar)
def test_concat_split_roundtrip(data, shape):
    r = len(shape)
    axis = data.draw(st.integers(-r, r - 1))
    parts = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    xs = [arr(tuple(p if i == axis % r else d for i, d in enumerate(shape)), i) for i, p in enumerate(parts)]
    y = agree("concat", xs, {"axis": axis})[0]
    back = agree("split", [y], {"axis": axis, "sizes": parts})
    for a, b in zip(back, xs):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=60, deadline=None)
@given(st.data(), nonscalar)
def test_slice_shapes_and_values_vs_ort(data, shape):
    r = len(shape)
    axes = data.draw(st.lists(st.integers(0, r - 1), min_size=1, max_size=r, unique=True))
    starts = [data.draw(st.integers(-8, 8)) for _ in axes]
    ends = [data.draw(st.integers(-8, 8)) for _ in axes]
    steps = [data.draw(st.sampled_from([-3, -2, -1, 1, 2, 3])) for _ in axes]
    x = arr(shape)
    ours = agree("slice", [x], {"starts": starts, "ends": ends, "axes": axes, "steps": steps})[0]
    ref = ort_run("Slice", [(x, False)] + [(np.array(v, np.int64), True) for v in (starts, ends, axes, steps)], {})[0]
    np.testing.assert_array_equal(ours, ref)


@SETTINGS
@given(st.data(), nonscalar, shapes)
def test_gather_shapes(data, shape, ishape):
    r = len(shape)
    axis = data.draw(st.integers(-r, r - 1))
    d = shape[axis]
    idx = np.random.default_rng(0).integers(-d, d, ishape).astype(np.int64)
    out = agree("gather", [arr(shape), idx], {"axis": axis})[0]
    assert out.shape == np.take(arr(shape), idx % d, axis=axis).shape


@SETTINGS
@given(st.data(), st.lists(dims, min_size=1, max_size=4).map(tuple))
def test_gather_nd_and_elements_shapes(data, shape):
    r = len(shape)
    b = data.draw(st.integers(0, r - 1))
    m = data.draw(st.integers(1, r - b))
    mid = tuple(data.draw(st.lists(dims, max_size=2)))
    ishape = shape[:b] + mid + (m,)
    rng = np.random.default_rng(1)
    idx = np.stack([rng.integers(-shape[b + j], shape[b + j], ishape[:-1]) for j in range(m)], -1).astype(np.int64)
    out = agree("gather_nd", [arr(shape), idx], {"batch_dims": b})[0]
    assert out.shape == ishape[:-1] + shape[b + m:]
    axis = data.draw(st.integers(-r, r - 1))
    eshape = tuple(data.draw(st.integers(1, 4)) if i == axis % r else data.draw(st.integers(1, d))
                   for i, d in enumerate(shape))
    eidx = rng.integers(-shape[axis], shape[axis], eshape).astype(np.int64)
    assert agree("gather_elements", [arr(shape), eidx], {"axis": axis})[0].shape == eshape


@SETTINGS
@given(st.data(), nonscalar, st.sampled_from(["constant", "reflect", "edge", "wrap"]))
def test_pad_shapes(data, shape, mode):
    hi = {"reflect": None}.get(mode, 3)
    pads = []
    for d in shape * 2:
        top = (d - 1) if hi is None else hi
        pads.append(data.draw(st.integers(0, top)))
    ends = pads[len(shape):]
    begins = pads[:len(shape)]
    out = agree("pad", [arr(shape)], {"pads": begins + ends, "mode": mode})[0]
    assert out.shape == tuple(d + a + b for d, a, b in zip(shape, begins, ends))


@SETTINGS
@given(broadcast_pair(), st.lists(st.integers(0, 3), min_size=0, max_size=4))
def test_expand_tile_shapes(pair, reps):
    x = arr(pair[0])
    assert agree("expand", [x], {"shape": pair[1]})[0].shape == np.broadcast_shapes(pair[0], pair[1])
    reps = (reps + [1] * len(pair[0]))[:len(pair[0])]
    assert agree("tile", [x], {"repeats": reps})[0].shape == np.tile(x, reps).shape


@SETTINGS
@given(nonscalar, nonscalar)
def test_infer_rejects_or_agrees_on_random_concat(a, b):
    # Either the types fit together (and compute agrees) or infer names the mismatch; never a crash.
    xa, xb = arr(a), arr(b)
    try:
        infer_types("concat", [TensorType(a, "float32"), TensorType(b, "float32")], {"axis": 0})
    except OpError as e:
        assert str(e).startswith("concat:")
        with pytest.raises(ValueError):
            np.concatenate([xa, xb], axis=0)
        return
    agree("concat", [xa, xb], {"axis": 0})


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 60), st.integers(0, 20),
       st.floats(0.0, 1.0), st.one_of(st.none(), st.floats(0.0, 0.9)), st.sampled_from([0, 1]),
       st.integers(0, 2**31 - 1))
def test_nms_vs_ort(b, c, n, max_out, iou, score, center, seed):
    rng = np.random.default_rng(seed)
    # coarse grid coordinates make exact ties and heavy overlap common
    boxes = (rng.integers(0, 8, (b, n, 4)) / 2).astype(np.float32)
    scores = (rng.integers(0, 10, (b, c, n)) / 10).astype(np.float32)
    attrs = {"max_output_boxes_per_class": max_out, "iou_threshold": iou, "score_threshold": score,
             "center_point_box": center}
    types = infer_types("non_max_suppression", [TensorType(boxes.shape, "float32"),
                                                TensorType(scores.shape, "float32")], attrs)
    ours = OPS["non_max_suppression"].compute([boxes, scores], attrs)[0]
    assert ours.dtype == np.int64 and ours.shape[1] == 3 and ours.shape[0] <= types[0].shape[0]
    consts = [(np.array([max_out], np.int64), True), (np.array([iou], np.float32), True)]
    if score is not None:
        consts.append((np.array([score], np.float32), True))
    ref = ort_run("NonMaxSuppression", [(boxes, False), (scores, False)] + consts,
                  {"center_point_box": center})[0]
    np.testing.assert_array_equal(ours, ref)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 80), st.integers(0, 30), st.integers(0, 2**31 - 1))
def test_nms_cost_bounds_the_iou_work_of_the_reference(c, n, max_out, seed):
    """The cost counts n log n for the sort and 10 flops per IoU for at most
    min(n, max_output_boxes_per_class) kept boxes against every candidate: an upper bound of the
    IoUs the reference computes, and tight when no box suppresses another."""
    import partition.ops.nn as nn
    from partition.ops import op_cost
    from partition.ir import Graph
    rng = np.random.default_rng(seed)
    # boxes on a diagonal, none overlapping: nothing is suppressed, so every kept box is compared
    # with every candidate left
    lo = np.arange(n, dtype=np.float32)[:, None] * 2
    boxes = np.concatenate([lo, lo, lo + 1, lo + 1], axis=1)[None]
    scores = rng.permutation(n * c).reshape(1, c, n).astype(np.float32) + 1
    attrs = {"max_output_boxes_per_class": max_out, "iou_threshold": 0.5, "score_threshold": 0.0,
             "center_point_box": 0}
    seen = [0]
    real = nn._iou

    def counting(corners, top, rest):
        seen[0] += len(rest)
        return real(corners, top, rest)
    nn._iou = counting
    try:
        OPS["non_max_suppression"].compute([boxes, scores], attrs)
    finally:
        nn._iou = real
    g = Graph("nms")
    b = g.add_input("boxes", boxes.shape)
    s = g.add_input("scores", scores.shape)
    node = g.add_node("non_max_suppression", [b, s], attrs)
    sort = c * n * max(1, int(np.log2(max(n, 2))))
    iou_flops = op_cost(node).flops - sort
    kept = min(n, max_out)
    assert iou_flops == 10 * c * n * kept
    assert 10 * seen[0] <= iou_flops                                   # an upper bound ...
    assert seen[0] >= c * kept * (n - kept) // 2 if kept else seen[0] == 0   # ... of the right order
