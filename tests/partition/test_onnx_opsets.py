"""Opsets 22..28 (issue 14): the ops current exporters emit (Attention, RMSNormalization,
RotaryEmbedding, LayerNormalization's statistics, GroupNormalization, Swish/SwiGLU, bitwise ops,
...) and the version-dependent conversions, each imported with load_onnx + interpret and compared
with onnxruntime on one-node models (a float64 numpy formula where onnxruntime lacks the op)."""
from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from test_ops import Const, assert_same, import_error, one_node_model, ort_node, run_op

from partition import interpret, load_onnx
from partition.onnx.importer import OnnxImportError, max_opset
from partition.ops import op_cost


def vs_ort(op_type, inputs, attrs=None, opset=23, n_out=1, exact=False):
    model, feeds = one_node_model(op_type, inputs, attrs, n_out, opset)
    g = load_onnx(model.SerializeToString())
    assert_same(interpret(g, feeds), ort_node(op_type, inputs, attrs, n_out, opset), exact)
    return g


def ours(op_type, inputs, attrs=None, opset=23, n_out=1):
    model, feeds = one_node_model(op_type, inputs, attrs, n_out, opset)
    g = load_onnx(model.SerializeToString())
    return g, interpret(g, feeds)


@pytest.fixture
def rng():
    return np.random.default_rng(14)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ============================================================================ opsets
def test_opsets_up_to_the_installed_onnx_are_accepted_and_newer_refused(rng):
    x = f32(rng, 2, 3)
    assert max_opset() == onnx.defs.onnx_opset_version()
    vs_ort("Relu", [x], opset=max_opset())
    model, _ = one_node_model("Relu", [x], opset=max_opset() + 1)
    with pytest.raises(OnnxImportError) as e:
        load_onnx(model.SerializeToString())
    assert str(e.value) == (f"<bytes> uses opset {max_opset() + 1}; supported opsets are 11..{max_opset()}")


def test_training_only_ops_are_refused_in_one_line(rng):
    msg = import_error("NegativeLogLikelihoodLoss", [f32(rng, 2, 3), np.array([0, 2])], opset=22)
    assert msg.endswith("training-only op NegativeLogLikelihoodLoss (a loss or random sampling) is not supported")
    msg = import_error("Dropout", [f32(rng, 2, 3), np.array(0.5, np.float32), np.array(True)], opset=22)
    assert "training-only" in msg


# ============================================================================ Attention
ATTENTION = [
    ("4d", {}, dict(q=(2, 3, 4, 8), k=(2, 3, 6, 8), v=(2, 3, 6, 5))),
    ("3d", {"q_num_heads": 4, "kv_num_heads": 4}, dict(q=(2, 3, 16), k=(2, 5, 16), v=(2, 5, 12))),
    ("gqa", {}, dict(q=(1, 4, 3, 8), k=(1, 2, 5, 8), v=(1, 2, 5, 8))),
    ("gqa-3d", {"q_num_heads": 6, "kv_num_heads": 2}, dict(q=(1, 3, 24), k=(1, 4, 8), v=(1, 4, 8))),
    ("causal", {"is_causal": 1}, dict(q=(1, 2, 4, 8), k=(1, 2, 4, 8), v=(1, 2, 4, 8))),
    ("scale-softcap", {"scale": 0.3, "softcap": 2.0}, dict(q=(1, 2, 3, 8), k=(1, 2, 5, 8), v=(1, 2, 5, 8))),
]


@pytest.mark.parametrize("name,attrs,shapes", ATTENTION, ids=[a[0] for a in ATTENTION])
def test_attention_vs_ort(rng, name, attrs, shapes):
    q, k, v = (f32(rng, *shapes[n]) for n in "qkv")
    g = vs_ort("Attention", [q, k, v], attrs)
    # costed as the two batched products: Q.K^T and P.V
    bmm = [n for n in g.nodes if n.op == "batch_matmul"]
    q4 = q if q.ndim == 4 else q.reshape(q.shape[0], q.shape[1], attrs["q_num_heads"], -1).transpose(0, 2, 1, 3)
    b, h, sq, d = q4.shape
    skv = k.shape[-2]
    dv = v.shape[-1] if v.ndim == 4 else v.shape[-1] // attrs["kv_num_heads"]
    assert sum(op_cost(n).macs for n in bmm) == b * h * sq * skv * (d + dv)


@pytest.mark.parametrize("mask_kind", ["bool", "float", "bool-causal"])
def test_attention_masks_vs_ort(rng, mask_kind):
    q, k, v = f32(rng, 2, 2, 3, 4), f32(rng, 2, 2, 5, 4), f32(rng, 2, 2, 5, 4)
    width = 5
    if mask_kind == "float":
        mask = f32(rng, 3, width)
    else:
        mask = rng.random((2, 1, 3, width)) > 0.3
        mask[..., 0] = True  # no fully masked row (its value is 0 by the spec, NaN in some runtimes)
    attrs = {"is_causal": 1} if mask_kind == "bool-causal" else {}
    vs_ort("Attention", [q, k, v, mask], attrs)


def test_attention_short_mask_is_padded_with_masked_keys(rng):
    """A mask narrower than the keys (the spec pads it with False / -inf; onnxruntime refuses it)."""
    q, k, v = f32(rng, 1, 2, 3, 4), f32(rng, 1, 2, 5, 4), f32(rng, 1, 2, 5, 4)
    mask = np.array([[True, False, True]] * 3)
    _, (y,) = ours("Attention", [q, k, v, mask])
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / 2.0
    s[..., [1, 3, 4]] = -np.inf
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(y, (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-5, atol=1e-6)


def test_attention_past_and_present_kv_vs_ort(rng):
    q, k, v = f32(rng, 1, 2, 2, 4), f32(rng, 1, 2, 2, 4), f32(rng, 1, 2, 2, 4)
    pk, pv = f32(rng, 1, 2, 3, 4), f32(rng, 1, 2, 3, 4)
    vs_ort("Attention", [q, k, v, None, pk, pv], {"is_causal": 1}, n_out=3)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_qk_output_modes_against_float64(rng, mode):
    """The spec's qk_matmul_output: the (softcapped) product, with the mask, or after softmax."""
    q, k, v = f32(rng, 1, 2, 3, 4), f32(rng, 1, 2, 5, 4), f32(rng, 1, 2, 5, 4)
    mask = f32(rng, 3, 5)
    _, outs = ours("Attention", [q, k, v, mask], {"qk_matmul_output_mode": mode}, n_out=4)
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / math.sqrt(4)
    biased = s + mask
    p = np.exp(biased - biased.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want_qk = {0: s, 1: s, 2: biased, 3: p}[mode]
    np.testing.assert_allclose(outs[0], p @ v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[3], want_qk, rtol=1e-5, atol=1e-6)


def test_attention_fully_masked_row_is_zero(rng):
    q, k, v = f32(rng, 1, 1, 2, 4), f32(rng, 1, 1, 3, 4), f32(rng, 1, 1, 3, 4)
    mask = np.array([[True, False, True], [False, False, False]])
    _, (y,) = ours("Attention", [q, k, v, mask])
    assert np.all(y[0, 0, 1] == 0) and np.all(np.isfinite(y))


def test_attention_errors_are_one_line(rng):
    msg = import_error("Attention", [f32(rng, 1, 3, 8), f32(rng, 1, 3, 8), f32(rng, 1, 3, 8)], opset=23)
    assert msg.endswith("3-D Q, K, V need the q_num_heads and kv_num_heads attributes")


# ============================================================================ normalizations
@pytest.mark.parametrize("axis", [-1, 1])
def test_rms_normalization_vs_ort(rng, axis):
    x = f32(rng, 2, 3, 4)
    scale = f32(rng, *x.shape[axis:]) if axis != -1 else f32(rng, 4)
    vs_ort("RMSNormalization", [x, scale], {"axis": axis, "epsilon": 1e-3})


def test_layer_normalization_mean_and_inv_std_vs_ort(rng):
    x = f32(rng, 2, 3, 4)
    vs_ort("LayerNormalization", [x, f32(rng, 3, 4), f32(rng, 3, 4)], {"axis": 1}, opset=17, n_out=3)


@pytest.mark.parametrize("opset,groups", [(21, 2), (21, 4), (18, 2)])
def test_group_normalization_vs_reference(rng, opset, groups):
    x = f32(rng, 2, 4, 3, 3)
    per = 4 if opset >= 21 else groups
    scale, bias = f32(rng, per), f32(rng, per)
    _, (y,) = ours("GroupNormalization", [x, scale, bias], {"num_groups": groups, "epsilon": 1e-5}, opset=opset)
    xg = x.astype(np.float64).reshape(2, groups, -1)
    z = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    s = scale if opset >= 21 else np.repeat(scale, 4 // groups)
    b = bias if opset >= 21 else np.repeat(bias, 4 // groups)
    np.testing.assert_allclose(y, z * s.reshape(1, 4, 1, 1) + b.reshape(1, 4, 1, 1), rtol=1e-5, atol=1e-5)
    if opset >= 21:
        vs_ort("GroupNormalization", [x, scale, bias], {"num_groups": groups}, opset=opset)


def test_mean_variance_and_lp_normalization_vs_ort(rng):
    vs_ort("MeanVarianceNormalization", [f32(rng, 2, 3, 4, 5)], opset=13)
    x = f32(rng, 3, 4)
    x[1] = 0  # a zero norm gives zeros
    for p in (1, 2):
        vs_ort("LpNormalization", [x], {"p": p, "axis": -1}, opset=22)


# ============================================================================ RotaryEmbedding
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("layout", ["4d", "3d", "positions", "partial"])
def test_rotary_embedding_vs_ort(rng, interleaved, layout):
    b, h, s, d = 2, 3, 4, 8
    rd = 4 if layout == "partial" else d
    attrs = {"interleaved": interleaved}
    if layout == "partial":
        attrs["rotary_embedding_dim"] = rd
    x = f32(rng, b, h, s, d)
    if layout == "3d":
        x = x.transpose(0, 2, 1, 3).reshape(b, s, h * d)
        attrs["num_heads"] = h
    if layout == "positions":
        cos, sin = f32(rng, 10, rd // 2), f32(rng, 10, rd // 2)
        pos = rng.integers(0, 10, (b, s))
        vs_ort("RotaryEmbedding", [x, cos, sin, pos], attrs)
    else:
        vs_ort("RotaryEmbedding", [x, f32(rng, b, s, rd // 2), f32(rng, b, s, rd // 2)], attrs)


# ============================================================================ elementwise
@pytest.mark.parametrize("op", ["Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh"])
def test_trigonometry_vs_ort(rng, op):
    vs_ort(op, [rng.uniform(-0.9, 0.9, (3, 4)).astype(np.float32)], opset=22)


def test_acosh_and_swish_vs_ort(rng):
    vs_ort("Acosh", [rng.uniform(1, 5, (3, 4)).astype(np.float32)], opset=22)
    vs_ort("Swish", [f32(rng, 3, 4)], {"alpha": 0.7}, opset=24)


def test_swiglu_against_float64(rng):
    a, b = f32(rng, 2, 5), f32(rng, 2, 5)
    _, (y,) = ours("SwiGLU", [a, b], {"alpha": 1.5}, opset=28)
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(y, a64 / (1 + np.exp(-1.5 * a64)) * b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_bitwise_vs_ort(rng, dtype):
    a = rng.integers(0, 100, (3, 4)).astype(dtype)
    b = rng.integers(0, 100, (4,)).astype(dtype)
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        vs_ort(op, [a, b], opset=18, exact=True)
    vs_ort("BitwiseNot", [a], opset=18, exact=True)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
def test_bitshift_vs_ort(rng, direction, dtype):
    x = rng.integers(0, 200, (3, 4)).astype(dtype)
    y = rng.integers(0, 6, (4,)).astype(dtype)
    vs_ort("BitShift", [x, y], {"direction": direction}, opset=11, exact=True)


def test_bitshift_past_the_width():
    x = np.array([-8, 8, 5], np.int8)
    y = np.array([9, 9, 1], np.int8)
    assert run_op("bit_shift", [x, y], {"direction": "RIGHT"})[0].tolist() == [-1, 0, 2]
    assert run_op("bit_shift", [x, y], {"direction": "LEFT"})[0].tolist() == [0, 0, 10]


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumprod_vs_ort(rng, exclusive, reverse):
    x = rng.uniform(0.5, 1.5, (3, 4)).astype(np.float32)
    vs_ort("CumProd", [x, Const(np.array(1))], {"exclusive": exclusive, "reverse": reverse}, opset=26)


def test_reduce_log_sum_and_eye_like_vs_ort(rng):
    vs_ort("ReduceLogSum", [rng.uniform(0.1, 2, (3, 4)).astype(np.float32), Const(np.array([1]))], opset=18)
    vs_ort("EyeLike", [np.zeros((3, 5), np.float32)], {"k": 1, "dtype": TensorProto.DOUBLE}, opset=22, exact=True)


def test_mod_float_floor_from_opset_28_only(rng):
    a, b = f32(rng, 3, 4) * 10, np.array([-3.5, 2.0, 7.25, -1.5], np.float32)
    vs_ort("Mod", [a, b], {"fmod": 0}, opset=28)
    assert "not supported before opset 28" in import_error("Mod", [a, b], {"fmod": 0}, opset=27)


# ============================================================================ issue 14 bugs
@pytest.mark.parametrize("to", [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2])
@pytest.mark.parametrize("saturate", [0, 1])
def test_cast_to_float8_saturates_vs_onnx_reference(to, saturate):
    """onnxruntime cannot hand float8 back to numpy; onnx's own reference evaluator is the peer."""
    from onnx.reference import ReferenceEvaluator
    x = np.array([1e6, -1e6, np.inf, -np.inf, 3.3, np.nan, 500.0, -0.01], np.float32)
    for op in ("Cast", "CastLike"):
        like = [np.zeros(1, helper.tensor_dtype_to_np_dtype(to))] if op == "CastLike" else []
        attrs = {"saturate": saturate, **({"to": to} if op == "Cast" else {})}
        model, feeds = one_node_model(op, [x, *like], attrs, opset=21)
        g = load_onnx(model.SerializeToString())
        y = interpret(g, feeds)[0]
        want = ReferenceEvaluator(model).run(None, feeds)[0]
        assert y.dtype == want.dtype
        np.testing.assert_array_equal(y.astype(np.float32), want.astype(np.float32))
        if saturate:
            import ml_dtypes
            top = float(ml_dtypes.finfo(y.dtype).max)
            assert y.astype(np.float32)[:4].tolist() == [top, -top, top, -top]


def test_space_to_depth_crd_inverts_depth_to_space(rng):
    x = f32(rng, 2, 3, 4, 6)
    _, (y,) = ours("SpaceToDepth", [x], {"blocksize": 2, "mode": "CRD"}, opset=25)
    # CRD: output channel c*4 + i*2 + j holds x[c, 2h + i, 2w + j]
    want = np.empty((2, 12, 2, 3), np.float32)
    for c in range(3):
        for i in range(2):
            for j in range(2):
                want[:, c * 4 + i * 2 + j] = x[:, c, i::2, j::2]
    np.testing.assert_array_equal(y, want)
    back = ort_node("DepthToSpace", [y], {"blocksize": 2, "mode": "CRD"}, opset=13)[0]
    np.testing.assert_array_equal(back, x)


def test_reduce_log_sum_exp_over_an_empty_axis_is_minus_inf():
    y = run_op("reduce_log_sum_exp", [np.zeros((2, 0, 3), np.float32)], {"axes": (1,), "keepdims": False})[0]
    assert y.shape == (2, 3) and np.all(y == -np.inf)


def test_float16_depthwise_and_dense_conv_accumulate_in_float32(rng):
    x = rng.uniform(-4, 4, (1, 8, 9, 9)).astype(np.float16)
    for w, group in ((rng.uniform(-1, 1, (8, 1, 3, 3)).astype(np.float16), 8),
                     (rng.uniform(-1, 1, (4, 8, 3, 3)).astype(np.float16), 1)):
        y = run_op("conv2d", [x, w], {"groups": group})[0]
        ref = run_op("conv2d", [x.astype(np.float64), w.astype(np.float64)], {"groups": group})[0]
        # one rounding of the float64 sum: within half a float16 ulp (plus float32 summation noise)
        assert np.max(np.abs(y.astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(np.float16))) <= 0.51


# ============================================================================ GridSample, LpPool
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_2d_vs_ort(rng, mode, padding_mode, align_corners):
    x = f32(rng, 2, 3, 5, 6)
    grid = rng.uniform(-1.4, 1.4, (2, 4, 7, 2)).astype(np.float32)  # some points outside
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    if (mode, padding_mode) == ("cubic", "border"):
        # onnxruntime clamps each cubic tap but not the coordinate; the spec's reference clamps
        # the coordinate first (and the conformance suite expects that): compare with it
        from onnx.reference import ReferenceEvaluator
        model, feeds = one_node_model("GridSample", [x, grid], attrs, opset=20)
        np.testing.assert_allclose(interpret(load_onnx(model), feeds)[0],
                                   ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-5, atol=1e-5)
        return
    vs_ort("GridSample", [x, grid], {"mode": mode, "padding_mode": padding_mode,
                                     "align_corners": align_corners}, opset=20)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_grid_sample_3d_and_opset16_names_vs_ort(rng, mode):
    x, grid = f32(rng, 1, 2, 3, 4, 5), rng.uniform(-1.2, 1.2, (1, 2, 3, 4, 3)).astype(np.float32)
    vs_ort("GridSample", [x, grid], {"mode": mode, "padding_mode": "border"}, opset=20)
    x2, grid2 = f32(rng, 1, 2, 4, 4), rng.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)
    vs_ort("GridSample", [x2, grid2], {"mode": "bilinear" if mode == "linear" else mode}, opset=16)


@pytest.mark.parametrize("shape,attrs", [
    ((1, 2, 9), {"kernel_shape": [3], "p": 2}),
    ((1, 2, 6, 7), {"kernel_shape": [2, 3], "p": 3, "strides": [2, 1], "pads": [1, 0, 1, 1]}),
    # SAME padding with dilations is left out: onnxruntime and onnx's reference disagree on it
    ((1, 2, 6, 7), {"kernel_shape": [3, 3], "p": 1, "auto_pad": "SAME_UPPER"}),
    ((1, 2, 6, 7), {"kernel_shape": [3, 3], "p": 1, "dilations": [1, 2]}),
    ((1, 2, 4, 5, 6), {"kernel_shape": [2, 2, 2], "p": 2}),
])
def test_lp_pool_vs_ort(rng, shape, attrs):
    vs_ort("LpPool", [f32(rng, *shape)], attrs, opset=22)


# ============================================================================ Resize (opset 18+ attributes)
RESIZE = [
    ("cubic-up", {"mode": "cubic"}, [1.0, 1.0, 1.6, 2.0], None),
    ("cubic-down-A-exclude", {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, [1.0, 1.0, 0.6, 0.75], None),
    ("cubic-align", {"mode": "cubic", "coordinate_transformation_mode": "align_corners"}, [1.0, 1.0, 2.0, 1.5], None),
    ("cubic-asym", {"mode": "cubic", "coordinate_transformation_mode": "asymmetric"}, [1.0, 1.0, 2.0, 2.0], None),
    ("linear-symmetric", {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"},
     [1.0, 1.0, 0.6, 1.7], None),
    ("linear-antialias", {"mode": "linear", "antialias": 1}, [1.0, 1.0, 0.6, 0.4], None),
    ("cubic-antialias", {"mode": "cubic", "antialias": 1}, None, [1, 2, 4, 3]),
    ("nearest-not-larger", {"mode": "nearest", "keep_aspect_ratio_policy": "not_larger"}, None, [1, 2, 7, 8]),
    ("nearest-not-smaller", {"mode": "nearest", "keep_aspect_ratio_policy": "not_smaller"}, None, [1, 2, 3, 8]),
]


@pytest.mark.parametrize("name,attrs,scales,sizes", RESIZE, ids=[r[0] for r in RESIZE])
def test_resize_new_modes_vs_ort(rng, name, attrs, scales, sizes):
    x = f32(rng, 1, 2, 6, 7)
    roi = Const(np.zeros(0, np.float32))
    if scales is not None:
        vs_ort("Resize", [x, roi, Const(np.array(scales, np.float32))], attrs, opset=19)
    else:
        vs_ort("Resize", [x, roi, None, Const(np.array(sizes, np.int64))], attrs, opset=19)


# ============================================================================ RNN, BitCast
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_rnn_vs_ort(rng, direction, layout):
    d, h, i, s, n = (2 if direction == "bidirectional" else 1), 4, 3, 5, 2
    x, h0 = f32(rng, s, n, i), f32(rng, d, n, h)
    w, r, b = f32(rng, d, h, i), f32(rng, d, h, h), f32(rng, d, 2 * h)
    attrs = {"hidden_size": h, "direction": direction}
    want = ort_node("RNN", [x, w, r, b, None, h0], attrs, 2, 22)
    if layout == 1:  # onnxruntime has no batch-first RNN: the same run, transposed
        x, h0 = x.transpose(1, 0, 2), h0.transpose(1, 0, 2)
        want = [want[0].transpose(2, 0, 1, 3), want[1].transpose(1, 0, 2)]
    g, got = ours("RNN", [x, w, r, b, None, h0], {**attrs, "layout": layout}, opset=22, n_out=2)
    assert_same(got, want)
    (node,) = [nd for nd in g.nodes if nd.op == "rnn"]
    assert op_cost(node).macs == s * n * d * h * (i + h)


@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.int64, np.float64), (np.bool_, np.uint8),
                                     (np.float16, np.int16)])
def test_bitcast_keeps_the_bits(rng, src, dst):
    x = (rng.standard_normal((2, 3)) * 100).astype(src)
    _, (y,) = ours("BitCast", [x], {"to": helper.np_dtype_to_tensor_dtype(np.dtype(dst))}, opset=26)
    assert y.dtype == dst and y.shape == x.shape
    assert y.tobytes() == x.astype(x.dtype.newbyteorder("<")).tobytes()
    assert "differ in width" in import_error("BitCast", [x], {"to": TensorProto.INT8 if src != np.bool_
                                                               else TensorProto.INT32}, opset=26)


# ============================================================================ DFT, Det
@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("complex_in,inverse,onesided,length", [
    (False, 0, 0, None), (True, 0, 0, None), (False, 0, 1, None), (True, 1, 0, None), (False, 0, 0, 12),
    (True, 0, 0, 5)])
def test_dft_vs_numpy_float64(rng, opset, complex_in, inverse, onesided, length):
    x = f32(rng, 2, 8, 3, 2 if complex_in else 1)
    ins = [x, None if length is None else Const(np.array(length, np.int64))]
    attrs = {"inverse": inverse, "onesided": onesided}
    if opset >= 20:
        ins.append(Const(np.array(1, np.int64)))
    else:
        attrs["axis"] = 1
    _, (y,) = ours("DFT", ins, attrs, opset=opset)
    sig = x[..., 0].astype(np.float64) + (1j * x[..., 1] if complex_in else 0)
    n = length or 8
    ref = np.fft.ifft(sig, n=n, axis=1) if inverse else np.fft.fft(sig, n=n, axis=1)
    if onesided:
        ref = ref[:, : n // 2 + 1]
    np.testing.assert_allclose(y, np.stack([ref.real, ref.imag], -1), rtol=1e-4, atol=1e-5)
    if opset == 17 and not inverse:  # onnxruntime agrees where it implements the case
        assert_same([y], ort_node("DFT", ins, attrs, 1, opset))


def test_det_vs_ort(rng):
    vs_ort("Det", [f32(rng, 3, 2, 4, 4)], opset=22)
    vs_ort("Det", [f32(rng, 3, 3)], opset=22)


def test_dynamic_quantize_linear_vs_ort(rng):
    for x in (f32(rng, 3, 4) * 5, np.abs(f32(rng, 2, 5)) + 1, -np.abs(f32(rng, 6))):
        vs_ort("DynamicQuantizeLinear", [x.astype(np.float32)], opset=11, n_out=3)


@pytest.mark.parametrize("with_past,with_bias,activation", [(0, 0, "none"), (1, 1, "silu"), (1, 0, "swish")])
def test_causal_conv_with_state_against_float64(rng, with_past, with_bias, activation):
    b, ch, length, k = 2, 3, 5, 4
    x, w = f32(rng, b, ch, length), f32(rng, ch, 1, k)
    bias, past = f32(rng, ch), f32(rng, b, ch, k - 1)
    ins = [x, w, bias if with_bias else None, past if with_past else None]
    g, (y, state) = ours("CausalConvWithState", ins, {"activation": activation}, opset=27, n_out=2)
    full = np.concatenate([past if with_past else np.zeros_like(past), x], axis=2).astype(np.float64)
    want = np.stack([sum(full[:, :, t + j] * w[:, 0, j].astype(np.float64) for j in range(k))
                     for t in range(length)], axis=2)
    if with_bias:
        want = want + bias[:, None]
    if activation != "none":
        want = want / (1 + np.exp(-want))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(state, full[:, :, length:].astype(np.float32))
    assert [n.op for n in g.nodes if n.op == "conv2d"] == ["conv2d"]  # offloadable as a convolution


@pytest.mark.parametrize("rule,heads,decay_per_key,with_past", [
    ("linear", (2, 2), False, False), ("gated", (2, 2), True, True), ("delta", (4, 2), False, True),
    ("gated_delta", (4, 1), False, False)])
def test_linear_attention_against_the_recurrence(rng, rule, heads, decay_per_key, with_past):
    """The spec's recurrence written out in float64 (onnxruntime has no LinearAttention)."""
    b, t, dk, dv = 2, 4, 3, 5
    hq, hk = heads
    q, k, v = f32(rng, b, t, hq * dk), f32(rng, b, t, hk * dk), f32(rng, b, t, hk * dv)
    past = f32(rng, b, hk, dk, dv) if with_past else None
    decay = -np.abs(f32(rng, b, t, hk * dk if decay_per_key else hk)) if "gated" in rule else None
    beta = rng.uniform(0, 1, (b, t, hk)).astype(np.float32) if "delta" in rule else None
    _, (y, state) = ours("LinearAttention", [q, k, v, past, decay, beta],
                         {"update_rule": rule, "q_num_heads": hq, "kv_num_heads": hk}, opset=27, n_out=2)
    s = np.zeros((b, hk, dk, dv)) if past is None else past.astype(np.float64)
    want = np.zeros((b, t, hq, dv))
    for i in range(t):
        for bb in range(b):
            for h in range(hk):
                kt, vt = k[bb, i, h * dk:(h + 1) * dk].astype(np.float64), v[bb, i, h * dv:(h + 1) * dv]
                if decay is not None:
                    g = decay[bb, i, h * dk:(h + 1) * dk] if decay_per_key else decay[bb, i, h]
                    s[bb, h] = s[bb, h] * np.exp(np.asarray(g, np.float64)).reshape(-1, 1)
                if beta is not None:
                    vt = beta[bb, i, h] * (vt - s[bb, h].T @ kt)
                s[bb, h] = s[bb, h] + np.outer(kt, vt)
            for h in range(hq):
                qt = q[bb, i, h * dk:(h + 1) * dk].astype(np.float64)
                want[bb, i, h] = qt @ s[bb, h // (hq // hk)] / np.sqrt(dk)
    np.testing.assert_allclose(y, want.reshape(b, t, hq * dv), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(state, s, rtol=1e-4, atol=1e-5)


# ============================================================================ Scan
@pytest.mark.parametrize("in_axis,in_dir,out_axis,out_dir", [(0, 0, 0, 0), (1, 1, 1, 0), (0, 1, 1, 1)])
def test_scan_vs_ort(rng, in_axis, in_dir, out_axis, out_dir):
    """A running sum and product over the scan axis, with a scan output per step; the body also
    reads an outer value (captured)."""
    FLOAT = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_add"]),
         helper.make_node("Mul", ["s_add", "w"], ["s_out"]),
         helper.make_node("Tanh", ["s_out"], ["y_t"])],
        "body", [helper.make_tensor_value_info("s_in", FLOAT, [3]), helper.make_tensor_value_info("x_t", FLOAT, [3])],
        [helper.make_tensor_value_info("s_out", FLOAT, [3]), helper.make_tensor_value_info("y_t", FLOAT, [3])])
    x = f32(rng, 5, 3) if in_axis == 0 else f32(rng, 3, 5)
    s0, w = f32(rng, 3), rng.uniform(0.5, 1.0, 3).astype(np.float32)
    node = helper.make_node("Scan", ["s0", "x"], ["s_final", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[in_axis], scan_input_directions=[in_dir],
                            scan_output_axes=[out_axis], scan_output_directions=[out_dir])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("s0", FLOAT, [3]),
                                            helper.make_tensor_value_info("x", FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("s_final", FLOAT, None),
                               helper.make_tensor_value_info("ys", FLOAT, None)],
                              initializer=[onnx.numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    import onnxruntime as ort
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"s0": s0, "x": x})
    got = interpret(load_onnx(model.SerializeToString()), {"s0": s0, "x": x})
    assert_same(got, want)


@pytest.mark.parametrize("axes", [[2, 3], [3, 2], [-1, -2]])
def test_resize_axes_in_any_order_vs_ort(rng, axes):
    """scales/sizes pair with the axes in the order listed (issue 14: [3, 2] was sorted)."""
    x = f32(rng, 1, 2, 4, 6)
    roi = Const(np.zeros(0, np.float32))
    vs_ort("Resize", [x, roi, Const(np.array([2.0, 0.5], np.float32))], {"axes": axes, "mode": "nearest"}, opset=19)
    vs_ort("Resize", [x, roi, None, Const(np.array([3, 8], np.int64))], {"axes": axes, "mode": "linear"}, opset=19)


# ============================================================================ low-bit quantization
_FLOAT_Q = [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.FLOAT4E2M1]


@pytest.mark.parametrize("code,saturate", [(t, 1) for t in (TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2,
                                                            TensorProto.UINT2)]
                         + [(t, s) for t in _FLOAT_Q for s in (1, 0)])  # saturate: float targets only
def test_low_bit_quantize_and_dequantize_vs_onnx_reference(rng, code, saturate):
    """onnxruntime cannot return these types to numpy; onnx's reference evaluator is the peer."""
    from onnx.reference import ReferenceEvaluator
    dt = helper.tensor_dtype_to_np_dtype(code)
    is_float = np.dtype(dt).name.startswith("float")
    x = (f32(rng, 3, 4) * 40).astype(np.float32)
    x[0, :2] = [1e6, -1e6]  # out of range: clamped (saturate) or NaN/inf
    scale = Const(np.float32([0.5, 2.0, 1.0, 4.0]))
    zp = Const(np.zeros(4, dt) if is_float else np.array([0, 1, -1, 0]).clip(*(
        (0, 1) if np.dtype(dt).name.startswith("u") else (-1, 1))).astype(dt))
    attrs = {"axis": 1, **({"saturate": saturate} if is_float else {})}
    opset = 25
    for op, ins in (("QuantizeLinear", [x, scale, zp]),):
        model, feeds = one_node_model(op, ins, attrs, opset=opset)
        q = interpret(load_onnx(model), feeds)[0]
        want = ReferenceEvaluator(model).run(None, feeds)[0]
        assert q.dtype == want.dtype
        np.testing.assert_array_equal(q.astype(np.float32), want.astype(np.float32))
    model, feeds = one_node_model("DequantizeLinear", [q, scale, zp], {"axis": 1}, opset=opset)
    got = interpret(load_onnx(model), feeds)[0]
    np.testing.assert_array_equal(got, ReferenceEvaluator(model).run(None, feeds)[0])


@pytest.mark.parametrize("attrs", [{}, {"strides": [2], "pads": [1, 0], "output_padding": [1]},
                                   {"strides": [3], "output_shape": [10]}, {"group": 2, "dilations": [2]}])
def test_conv_transpose_1d_vs_ort(rng, attrs):
    x, w = f32(rng, 1, 2, 5), f32(rng, 2, 3, 3)
    vs_ort("ConvTranspose", [x, w, f32(rng, 3 * attrs.get("group", 1))], attrs, opset=11)


# ============================================================================ ReverseSequence, TensorScatter
@pytest.mark.parametrize("batch_axis,time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence_vs_ort(rng, batch_axis, time_axis):
    x = f32(rng, 4, 3, 2) if batch_axis == 1 else f32(rng, 3, 4, 2)
    lens = np.array([4, 1, 0], np.int64) if batch_axis == 1 else np.array([2, 4, 3], np.int64)
    vs_ort("ReverseSequence", [x, lens], {"batch_axis": batch_axis, "time_axis": time_axis}, opset=10 + 5,
           exact=True)


@pytest.mark.parametrize("mode,axis", [("linear", -2), ("circular", 2), ("linear", 1)])
def test_tensor_scatter_against_the_spec_loop(rng, mode, axis):
    past = f32(rng, 2, 3, 6, 4)
    upd_shape = list(past.shape)
    upd_shape[axis] = 2
    update = f32(rng, *upd_shape)
    ax = axis % 4
    size = past.shape[ax]
    starts = np.array([size - 2, 5 if mode == "circular" else 1], np.int64)
    _, (y,) = ours("TensorScatter", [past, update, starts], {"mode": mode, "axis": axis}, opset=24)
    want = past.copy()
    for prefix in np.ndindex(past.shape[:ax]):
        for s in range(2):
            j = starts[prefix[0]] + s
            j = j % size if mode == "circular" else j
            want[prefix + (j,)] = update[prefix + (s,)]
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("attrs,with_bias,with_mask", [
    ({}, False, False), ({"strides": [2, 1], "pads": [1, 0, 1, 1]}, True, True),
    ({"group": 2, "offset_group": 2, "dilations": [1, 2]}, False, True)])
def test_deform_conv_vs_onnx_reference(rng, attrs, with_bias, with_mask):
    """Offsets move the taps off the grid (some outside the image: zeros); checked against onnx's
    reference evaluator, and with zero offsets and a unit mask against onnxruntime's Conv."""
    from onnx.reference import ReferenceEvaluator
    x, w = f32(rng, 1, 4, 5, 6), f32(rng, 4, 4 // attrs.get("group", 1), 3, 3)
    model, _ = one_node_model("Conv", [x, w], {k: v for k, v in attrs.items() if k != "offset_group"}, opset=19)
    oh, ow = ort_node("Conv", [x, w], {k: v for k, v in attrs.items() if k != "offset_group"}, 1, 19)[0].shape[2:]
    og = attrs.get("offset_group", 1)
    off = (f32(rng, 1, og * 18, oh, ow) * 1.5).astype(np.float32)
    ins = [x, w, off, f32(rng, 4) if with_bias else None,
           rng.uniform(0, 1, (1, og * 9, oh, ow)).astype(np.float32) if with_mask else None]
    model, feeds = one_node_model("DeformConv", ins, attrs, opset=19)
    got = interpret(load_onnx(model), feeds)[0]
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-4, atol=1e-5)
    zero_ins = [x, w, np.zeros_like(off)]
    model, feeds = one_node_model("DeformConv", zero_ins, attrs, opset=19)
    conv = ort_node("Conv", [x, w], {k: v for k, v in attrs.items() if k != "offset_group"}, 1, 19)[0]
    np.testing.assert_allclose(interpret(load_onnx(model), feeds)[0], conv, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2]}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 2], "dilations": [2, 1], "storage_order": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}])
def test_max_pool_indices_vs_ort(rng, attrs):
    x = f32(rng, 2, 3, 7, 8)
    x[0, 0, :2, :2] = 5.0  # ties: the first maximum
    vs_ort("MaxPool", [x], attrs, opset=12, n_out=2, exact=True)


def test_an_llm_block_of_opset_24_ops_vs_ort(rng):
    """Projections, RMSNormalization, grouped-query causal Attention, a residual LayerNormalization
    and a Swish-gated MLP in one opset-24 model: imported, run and compared with onnxruntime."""
    import onnxruntime as ort
    from onnx import numpy_helper
    s, e = 6, 32

    def w(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]), helper.make_node("MatMul", ["x", "wk"], ["k"]),
             helper.make_node("MatMul", ["x", "wv"], ["v"]), helper.make_node("RMSNormalization", ["q", "g"], ["qn"]),
             helper.make_node("Attention", ["qn", "k", "v"], ["a"], q_num_heads=4, kv_num_heads=2, is_causal=1),
             helper.make_node("MatMul", ["a", "wo"], ["o"]), helper.make_node("Add", ["o", "x"], ["r"]),
             helper.make_node("LayerNormalization", ["r", "lg", "lb"], ["y"]),
             helper.make_node("MatMul", ["y", "w1"], ["h1"]), helper.make_node("MatMul", ["y", "w2"], ["h2"]),
             helper.make_node("Swish", ["h1"], ["s1"]), helper.make_node("Mul", ["s1", "h2"], ["z"])]
    inits = [w("wq", (e, e)), w("wk", (e, 16)), w("wv", (e, 16)), w("wo", (e, e)), w("g", (e,)), w("lg", (e,)),
             w("lb", (e,)), w("w1", (e, 64)), w("w2", (e, 64))]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, e])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    x = f32(rng, 1, s, e)
    g = load_onnx(model.SerializeToString())
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    assert_same(interpret(g, [x]), want)
    assert sum(n.op == "batch_matmul" for n in g.nodes) == 2  # Q.K^T and P.V, offloadable products
