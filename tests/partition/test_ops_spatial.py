"""Spatial ops: conv_transpose2d, resize, depth_to_space, space_to_depth and instance_norm, and the
1-D Conv/MaxPool/AveragePool import (lifted to the 2-D ops). Each ONNX node is imported with
load_onnx, interpreted, and compared with onnxruntime running the same one-node model; the
unsupported cases must fail with a one-line message naming the node and the problem."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from test_ops import Const, assert_host_cost, assert_same, import_error, one_node_model, ort_node, run_op

from partition import interpret, load_onnx
from partition.ops import OpError, op_cost
from partition.onnx.importer import OnnxImportError

OPSET = 21


# ============================================================================ helpers
def _model(op_type: str, inputs, attrs: dict | None, opset: int, n_out: int = 1):
    """The one-node model ``ort_node`` runs (same input names), for load_onnx."""
    return one_node_model(op_type, inputs, attrs, n_out, opset)


def import_vs_ort(op_type: str, inputs, attrs: dict | None = None, opset: int = OPSET, exact: bool = False):
    """load_onnx + interpret against onnxruntime on the same node; returns (graph, our outputs)."""
    model, feeds = _model(op_type, inputs, attrs, opset)
    g = load_onnx(model.SerializeToString())
    ours = interpret(g, feeds)
    assert_same(ours, ort_node(op_type, inputs, attrs, opset=opset), exact)
    return g, ours


def ops_of(g) -> list[str]:
    return [n.op for n in g.nodes]


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ============================================================================ ConvTranspose
CONVT_CASES = [
    # (N, C, H, W), (K/groups, R, S), attrs
    ((1, 3, 5, 5), (4, 3, 3), {}),
    ((2, 8, 4, 4), (4, 2, 2), {"strides": [2, 2]}),                                   # U-Net upsampling
    ((1, 4, 5, 6), (3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
    ((1, 4, 5, 4), (2, 3, 2), {"strides": [2, 3], "pads": [0, 1, 2, 1], "dilations": [2, 1]}),
    ((1, 6, 4, 5), (2, 3, 3), {"strides": [2, 2], "group": 3, "output_padding": [1, 0]}),
    ((1, 4, 6, 6), (1, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1], "group": 4}),  # depthwise
    ((1, 3, 4, 4), (2, 3, 3), {"dilations": [2, 2], "strides": [3, 2], "output_padding": [2, 1]}),
    ((1, 2, 3, 7), (3, 1, 4), {"strides": [1, 2], "pads": [0, 1, 0, 2]}),
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xs,ws,attrs", CONVT_CASES)
def test_conv_transpose_matches_onnxruntime(rng, xs, ws, attrs, bias):
    groups = attrs.get("group", 1)
    w = f32(rng, xs[1], *ws)
    ins = [f32(rng, *xs), Const(w)] + ([Const(f32(rng, ws[0] * groups))] if bias else [])
    g, _ = import_vs_ort("ConvTranspose", ins, attrs)
    assert ops_of(g) == ["conv_transpose2d"]


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 2], "output_shape": [10, 9]},                   # even and odd total padding
    {"strides": [2, 2], "output_shape": [9, 11], "auto_pad": "SAME_UPPER"},
    {"strides": [2, 2], "output_shape": [9, 11], "auto_pad": "SAME_LOWER"},
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"strides": [2, 2], "auto_pad": "SAME_LOWER"},
    {"strides": [2, 1], "auto_pad": "VALID"},
    {"strides": [2, 2], "output_shape": [12, 12], "output_padding": [1, 1]},
])
def test_conv_transpose_output_shape_and_auto_pad_become_explicit_pads(rng, attrs):
    x, w = f32(rng, 1, 2, 5, 6), f32(rng, 2, 3, 3, 3)
    g, _ = import_vs_ort("ConvTranspose", [x, Const(w), Const(f32(rng, 3))], attrs)
    (node,) = g.nodes
    assert len(node.attrs["pads"]) == 4 and "output_shape" not in node.attrs


def test_conv_transpose_op_direct_and_mac_count(rng):
    x, w, b = f32(rng, 2, 6, 5, 4), f32(rng, 6, 2, 3, 2), f32(rng, 6)
    attrs = {"strides": (2, 1), "pads": (1, 0, 0, 1), "dilations": (1, 2), "groups": 3, "output_padding": (1, 0)}
    (ours,) = run_op("conv_transpose2d", [x, w, b], attrs)
    (ref,) = ort_node("ConvTranspose", [x, Const(w), Const(b)],
                      {"strides": [2, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2], "group": 3,
                       "output_padding": [1, 0]})
    assert_same([ours], [ref])
    model, _ = _model("ConvTranspose", [x, Const(w), Const(b)], {"strides": [2, 1], "group": 3}, OPSET)
    (node,) = load_onnx(model.SerializeToString()).nodes
    c = op_cost(node)
    assert c.macs == 2 * 6 * 5 * 4 * 2 * 3 * 2  # N*Cin*H*W*(Cout/groups)*R*S
    assert c.flops == 2 * c.macs + node.outputs[0].type.size


@pytest.mark.parametrize("s,d,p,op", [((2, 3), (2, 1), (1, 0, 0, 2), (1, 2)),
                                      # onnxruntime rejects output_padding >= stride; PyTorch allows it
                                      # below the dilation, and the extra row is then bias only
                                      ((1, 1), (2, 1), (0, 1, 0, 0), (1, 0))])
def test_conv_transpose_float64_against_scatter_definition(rng, s, d, p, op):
    """Every input pixel adds its value times the kernel into the output at stride offsets."""
    x, w = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((2, 3, 2, 3))
    (ours,) = run_op("conv_transpose2d", [x, w], {"strides": s, "dilations": d, "pads": p, "output_padding": op})
    full = np.zeros((1, 3, s[0] * 2 + d[0] + 1 + op[0], s[1] * 3 + d[1] * 2 + 1 + op[1]))
    for c in range(2):
        for i in range(3):
            for j in range(4):
                for r in range(2):
                    for t in range(3):
                        full[0, :, i * s[0] + r * d[0], j * s[1] + t * d[1]] += x[0, c, i, j] * w[c, :, r, t]
    np.testing.assert_allclose(ours, full[:, :, p[0]:full.shape[2] - p[2], p[1]:full.shape[3] - p[3]], rtol=1e-12)


@pytest.mark.parametrize("attrs,match", [
    ({"strides": [2, 2], "output_padding": [2, 0]},
     r"conv_transpose2d: output_padding \[2, 0\] must be >= 0 and smaller than stride or dilation"),
    ({"strides": [2, 2], "output_shape": [13, 9]},
     r"output size \[13, 9\] is larger than the 11 .*by a stride or more; not supported"),
    ({"strides": [2, 2], "pads": [6, 0, 5, 0]},
     r"conv_transpose2d: pads \[6, 0, 5, 0\] crop away the whole 5x4 -> 11x9 output"),
    ({"kernel_shape": [2, 2]}, r"kernel_shape \[2, 2\] differs from the weight's \[3, 3\]"),
    ({"auto_pad": "SAME"}, r"unknown auto_pad 'SAME'"),
])
def test_conv_transpose_errors(rng, attrs, match):
    msg = import_error("ConvTranspose", [f32(rng, 1, 2, 5, 4), Const(f32(rng, 2, 3, 3, 3))], attrs)
    assert re.search(match, msg), msg


@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 1, 2], "pads": [1, 0, 0, 0, 1, 1], "group": 2},
                                   {"strides": [1, 2, 2], "dilations": [2, 1, 1], "output_padding": [0, 1, 1]},
                                   {"strides": [2, 2, 1], "output_shape": [10, 9, 6]}])
def test_conv_transpose_3d_vs_ort(rng, attrs):
    x, w, b = f32(rng, 1, 4, 4, 4, 5), f32(rng, 4, 3, 3, 2, 2), f32(rng, 6 if attrs.get("group") else 3)
    _, (ours,) = import_vs_ort("ConvTranspose", [x, Const(w), Const(b)], attrs)
    model, _ = _model("ConvTranspose", [x, Const(w), Const(b)], attrs, OPSET)
    (node,) = load_onnx(model.SerializeToString()).nodes
    assert node.op == "conv_transpose3d" and op_cost(node).macs == x.size * 3 * 3 * 2 * 2


def test_conv_transpose_output_shape_a_row_beyond_pads_the_end(rng):
    # output_shape one row past the full output: a zero row at the end (output_padding), as onnxruntime
    x, w = f32(rng, 1, 2, 5, 4), f32(rng, 2, 3, 3, 3)
    _, (ours,) = import_vs_ort("ConvTranspose", [x, Const(w)], {"strides": [2, 3], "output_shape": [12, 14]})
    assert ours.shape == (1, 3, 12, 14)
    full = run_op("conv_transpose2d", [x, w], {"strides": (2, 3)})[0]
    np.testing.assert_array_equal(ours[:, :, :11, :12], full)
    assert not ours[:, :, 11:].any() and not ours[:, :, :, 12:].any()


def test_conv_transpose_other_ranks_fail_clearly(rng):
    msg = import_error("ConvTranspose", [f32(rng, 1, 2, 3, 3, 3, 3), Const(f32(rng, 2, 3, 2, 2, 2, 2))])
    assert "only 1-D, 2-D and 3-D transposed convolutions are supported" in msg
    with pytest.raises(OpError, match=r"conv_transpose2d: input has 4 channels but weight has 2"):
        run_op("conv_transpose2d", [f32(rng, 1, 4, 3, 3), f32(rng, 2, 3, 3, 3)])


# ============================================================================ Resize
COORD_MODES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
RESIZE_TARGETS = [
    ("scales", [1, 1, 2, 2]),
    ("scales", [1, 1, 1.7, 0.6]),
    ("scales", [1, 1, 0.5, 3.0]),
    ("sizes", [2, 3, 7, 3]),
    ("sizes", [2, 3, 1, 11]),   # a length-1 axis: the align_corners / pytorch_half_pixel special case
]


def _resize_inputs(x, kind: str, target, opset: int = OPSET):
    arr = np.asarray(target, np.float32 if kind == "scales" else np.int64)
    if kind == "scales":
        return [x, None, Const(arr)]
    # before opset 13 scales is a required input, given empty when sizes is used
    return [x, Const(np.zeros(0, np.float32)), Const(np.zeros(0, np.float32)), Const(arr)] if opset < 13 \
        else [x, None, None, Const(arr)]


@pytest.mark.parametrize("kind,target", RESIZE_TARGETS)
@pytest.mark.parametrize("nearest_mode", NEAREST_MODES)
@pytest.mark.parametrize("ctm", COORD_MODES)
def test_resize_nearest_matches_onnxruntime(rng, ctm, nearest_mode, kind, target):
    x = f32(rng, 2, 3, 5, 6)
    attrs = {"mode": "nearest", "coordinate_transformation_mode": ctm, "nearest_mode": nearest_mode}
    g, _ = import_vs_ort("Resize", _resize_inputs(x, kind, target), attrs, exact=True)
    (node,) = g.nodes
    assert node.op == "resize" and node.attrs["size"] == tuple(node.outputs[0].shape[2:])


@pytest.mark.parametrize("kind,target", RESIZE_TARGETS)
@pytest.mark.parametrize("ctm", COORD_MODES)
def test_resize_linear_matches_onnxruntime(rng, ctm, kind, target):
    x = f32(rng, 2, 3, 5, 6)
    import_vs_ort("Resize", _resize_inputs(x, kind, target), {"mode": "linear", "coordinate_transformation_mode": ctm})


@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("kind,target", [("scales", [1, 1, 2.5, 1.5]), ("sizes", [1, 2, 9, 4])])
def test_resize_across_opsets(rng, opset, kind, target):
    x = f32(rng, 1, 2, 4, 5)
    ins = _resize_inputs(x, kind, target, opset)
    if opset < 13 and kind == "scales":
        ins = [x, Const(np.zeros(0, np.float32)), ins[2]]
    import_vs_ort("Resize", ins, {"mode": "linear"}, opset=opset)
    import_vs_ort("Resize", ins, {"mode": "nearest"}, opset=opset, exact=True)  # defaults: half_pixel, prefer floor


@pytest.mark.parametrize("kind,target", [("scales", [2.0, 3.0]), ("sizes", [7, 2])])
def test_resize_axes_attribute(rng, kind, target):
    x = f32(rng, 1, 2, 4, 5)
    ins = [x, None, Const(np.asarray(target, np.float32))] if kind == "scales" else \
        [x, None, None, Const(np.asarray(target, np.int64))]
    import_vs_ort("Resize", ins, {"mode": "linear", "axes": [2, -1]}, opset=18)


def test_resize_nearest_integer_data_is_exact(rng):
    x = rng.integers(0, 255, (1, 2, 3, 4)).astype(np.uint8)
    import_vs_ort("Resize", [x, None, Const(np.array([1, 1, 2.5, 0.5], np.float32))],
                  {"mode": "nearest", "coordinate_transformation_mode": "asymmetric"}, exact=True)


def test_resize_pytorch_nearest_x2_pattern(rng):
    """F.interpolate(scale_factor=2, mode="nearest"): scales [1,1,2,2], asymmetric, floor."""
    x = f32(rng, 1, 3, 4, 5)
    _, (ours,) = import_vs_ort("Resize", [x, None, Const(np.array([1, 1, 2, 2], np.float32))],
                               {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                "nearest_mode": "floor"}, opset=17, exact=True)
    np.testing.assert_array_equal(ours, np.repeat(np.repeat(x, 2, axis=2), 2, axis=3))


def _torch_bilinear(x: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """PyTorch's upsample_bilinear2d with align_corners=False, written out in float64."""
    def taps(n_in, n_out):
        out = []
        for d in range(n_out):
            src = max((d + 0.5) * n_in / n_out - 0.5, 0.0)
            i0 = int(math.floor(src))
            i1 = i0 + (1 if i0 < n_in - 1 else 0)
            out.append((i0, i1, src - i0))
        return out
    x = x.astype(np.float64)
    y = np.zeros(x.shape[:2] + (oh, ow))
    for a, (h0, h1, lh) in enumerate(taps(x.shape[2], oh)):
        for b, (w0, w1, lw) in enumerate(taps(x.shape[3], ow)):
            y[:, :, a, b] = ((1 - lh) * ((1 - lw) * x[:, :, h0, w0] + lw * x[:, :, h0, w1])
                             + lh * ((1 - lw) * x[:, :, h1, w0] + lw * x[:, :, h1, w1]))
    return y


@pytest.mark.parametrize("ctm", ["half_pixel", "pytorch_half_pixel"])
def test_resize_pytorch_bilinear_pattern(rng, ctm):
    """F.interpolate(scale_factor=2, mode="bilinear", align_corners=False) exports half_pixel
    (pytorch_half_pixel from older exporters) linear Resize."""
    x = f32(rng, 1, 3, 4, 5)
    _, (ours,) = import_vs_ort("Resize", [x, None, Const(np.array([1, 1, 2, 2], np.float32))],
                               {"mode": "linear", "coordinate_transformation_mode": ctm}, opset=17)
    np.testing.assert_allclose(ours, _torch_bilinear(x, 8, 10), rtol=1e-5, atol=1e-6)


def test_resize_cost_and_direct_op(rng):
    x = f32(rng, 1, 2, 3, 4)
    attrs = {"mode": "linear", "size": (6, 8), "scales": (2.0, 2.0), "coordinate_transformation_mode": "half_pixel",
             "nearest_mode": "floor"}
    (ours,) = run_op("resize", [x], attrs)
    assert_same([ours], ort_node("Resize", [x, None, Const(np.array([1, 1, 2, 2], np.float32))], {"mode": "linear"}))
    model, _ = _model("Resize", [x, None, Const(np.array([1, 1, 2, 2], np.float32))], {"mode": "nearest"}, OPSET)
    (node,) = load_onnx(model.SerializeToString()).nodes
    assert op_cost(node).flops == 0 and op_cost(node).bytes_out == 2 * 6 * 8 * 4


RESIZE_ERRORS = [
    ({"mode": "area"}, None, r"mode 'area' is not supported \(only nearest, linear and cubic\)"),
    ({"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}, None,
     r"tf_crop_and_resize needs the roi input"),
    ({"coordinate_transformation_mode": "tf_half_pixel_for_nn"}, None,
     r"coordinate_transformation_mode 'tf_half_pixel_for_nn' is not supported \(only half_pixel, "
     r"pytorch_half_pixel, align_corners, asymmetric, half_pixel_symmetric, tf_crop_and_resize\)"),
    ({"keep_aspect_ratio_policy": "fit"}, "sizes", r"keep_aspect_ratio_policy 'fit' is not supported"),
    ({"nearest_mode": "round_half_even"}, None, r"resize: nearest_mode 'round_half_even' is not one of"),
    ({}, "channels", r"only the spatial axes of NCHW can be resized; input \[1, 2, 4, 4\] -> \[1, 4, 8, 8\]"),
    ({}, "both", r"exactly one of the scales and sizes inputs must be given"),
    ({}, "runtime", r"scales input 'in2' must be a constant \(it is computed at run time\)"),
    ({}, "rank3", r"only 4-D NCHW inputs are supported, got shape \[1, 2, 4\]"),
]


@pytest.mark.parametrize("attrs,variant,match", RESIZE_ERRORS)
def test_resize_errors(rng, attrs, variant, match):
    x = f32(rng, 1, 2, 4, 4)
    scales = Const(np.array([1, 1, 2, 2], np.float32))
    ins = {None: [x, None, scales],
           "sizes": [x, None, None, Const(np.array([1, 2, 6, 8], np.int64))],
           "channels": [x, None, Const(np.array([1, 2, 2, 2], np.float32))],
           "both": [x, None, scales, Const(np.array([1, 2, 6, 8], np.int64))],
           "runtime": [x, None, np.array([1, 1, 2, 2], np.float32)],
           "rank3": [f32(rng, 1, 2, 4), None, Const(np.array([1, 1, 2], np.float32))]}[variant]
    model, _ = _model("Resize", ins, attrs, OPSET)
    with pytest.raises(OnnxImportError, match=match) as e:
        load_onnx(model.SerializeToString())
    assert str(e.value).startswith("node 'n0' (Resize): ")


def test_resize_upsample_op_is_rejected_as_unsupported(rng):
    # Upsample is deprecated from opset 10; onnxruntime refuses it in every opset the importer reads.
    model, _ = _model("Upsample", [f32(rng, 1, 1, 2, 2), Const(np.array([1, 1, 2, 2], np.float32))],
                      {"mode": "nearest"}, 11)
    with pytest.raises(OnnxImportError, match=r"unsupported ONNX op 'Upsample' at node 'n0'"):
        load_onnx(model.SerializeToString())


# ============================================================================ DepthToSpace / SpaceToDepth
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape,block", [((1, 8, 3, 4), 2), ((2, 18, 2, 3), 3), ((1, 4, 2, 2), 1)])
def test_depth_to_space_matches_onnxruntime(rng, mode, shape, block):
    g, _ = import_vs_ort("DepthToSpace", [f32(rng, *shape)], {"blocksize": block, "mode": mode}, exact=True)
    (node,) = g.nodes
    assert node.op == "depth_to_space" and op_cost(node).flops == 0


def test_depth_to_space_modes_differ_and_default_is_dcr(rng):
    x = np.arange(32, dtype=np.int64).reshape(1, 8, 2, 2)
    (dcr,) = run_op("depth_to_space", [x], {"blocksize": 2})
    (crd,) = run_op("depth_to_space", [x], {"blocksize": 2, "mode": "CRD"})
    assert not np.array_equal(dcr, crd)
    import_vs_ort("DepthToSpace", [x.astype(np.float32)], {"blocksize": 2}, exact=True)


@pytest.mark.parametrize("shape,block", [((1, 2, 4, 6), 2), ((2, 3, 6, 3), 3)])
def test_space_to_depth_matches_onnxruntime_and_inverts_dcr(rng, shape, block):
    x = f32(rng, *shape)
    g, (y,) = import_vs_ort("SpaceToDepth", [x], {"blocksize": block}, exact=True)
    assert ops_of(g) == ["space_to_depth"] and op_cost(g.nodes[0]).flops == 0
    (back,) = run_op("depth_to_space", [y], {"blocksize": block, "mode": "DCR"})
    np.testing.assert_array_equal(back, x)


def test_depth_space_errors(rng):
    msg = import_error("DepthToSpace", [f32(rng, 1, 6, 2, 2)], {"blocksize": 2})
    assert msg.endswith("depth_to_space: 6 channels are not divisible by blocksize^2 = 4")
    msg = import_error("SpaceToDepth", [f32(rng, 1, 2, 5, 4)], {"blocksize": 2})
    assert msg.endswith("space_to_depth: spatial size 5x4 is not divisible by blocksize 2")
    with pytest.raises(OpError, match=r"depth_to_space: mode must be 'DCR' or 'CRD', got 'XYZ'"):
        run_op("depth_to_space", [f32(rng, 1, 4, 2, 2)], {"blocksize": 2, "mode": "XYZ"})
    with pytest.raises(OpError, match=r"space_to_depth: input must be 4-D NCHW, got shape \[2, 4, 4\]"):
        run_op("space_to_depth", [f32(rng, 2, 4, 4)], {"blocksize": 2})


# ============================================================================ InstanceNormalization
@pytest.mark.parametrize("shape,eps,offset", [((2, 3, 5, 4), 1e-5, 0.0), ((1, 4, 7), 1e-3, 0.0),
                                              ((1, 2, 6, 6), 1e-5, 100.0), ((2, 2, 3, 2, 2), 1e-2, 0.0)])
def test_instance_norm_matches_onnxruntime(rng, shape, eps, offset):
    x = f32(rng, *shape) + np.float32(offset)
    c = shape[1]
    g, _ = import_vs_ort("InstanceNormalization", [x, Const(f32(rng, c)), Const(f32(rng, c))], {"epsilon": eps})
    (node,) = g.nodes
    assert node.op == "instance_norm"
    assert op_cost(node).flops == 8 * x.size


def test_instance_norm_errors(rng):
    msg = import_error("InstanceNormalization", [f32(rng, 1, 3, 4, 4), Const(f32(rng, 2)), Const(f32(rng, 3))])
    assert msg.endswith("instance_norm: scale must have shape [3], got [2]")
    with pytest.raises(OpError, match=r"instance_norm: input must have rank >= 3 \(N, C, spatial...\), got \[2, 3\]"):
        run_op("instance_norm", [f32(rng, 2, 3), f32(rng, 3), f32(rng, 3)])


# ============================================================================ 1-D Conv / pools
CONV1D = [
    ((1, 10, 16), (32, 10, 5), {"pads": [2, 2]}),
    ((2, 4, 15), (6, 4, 3), {"strides": [2], "dilations": [2], "pads": [1, 3]}),
    ((1, 8, 12), (8, 1, 3), {"group": 8, "pads": [1, 1]}),                         # depthwise
    ((1, 6, 11), (4, 3, 4), {"group": 2, "auto_pad": "SAME_UPPER", "strides": [2]}),
    ((1, 3, 9), (5, 3, 1), {}),
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xs,ws,attrs", CONV1D)
def test_conv1d_is_imported_as_conv2d(rng, xs, ws, attrs, bias):
    ins = [f32(rng, *xs), Const(f32(rng, *ws))] + ([Const(f32(rng, ws[0]))] if bias else [])
    g, (y,) = import_vs_ort("Conv", ins, dict(attrs, kernel_shape=[ws[2]]))
    assert ops_of(g) == ["unsqueeze", "conv2d", "squeeze"] and y.ndim == 3
    conv = g.nodes[1]
    assert conv.inputs[1].is_const and conv.inputs[1].shape == (ws[0], ws[1], 1, ws[2])


def test_conv1d_with_runtime_weight(rng):
    model, _ = _model("Conv", [f32(rng, 1, 3, 8), f32(rng, 4, 3, 3)], {"pads": [1, 1]}, OPSET)
    g = load_onnx(model.SerializeToString())
    x, w = f32(rng, 1, 3, 8), f32(rng, 4, 3, 3)
    assert_same(interpret(g, {"in0": x, "in1": w}), ort_node("Conv", [x, w], {"pads": [1, 1]}))


POOL1D = [
    ("MaxPool", {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ("MaxPool", {"kernel_shape": [2], "strides": [2], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [3], "dilations": [2]}),
    ("MaxPool", {"kernel_shape": [4], "auto_pad": "SAME_LOWER", "strides": [3]}),
    ("AveragePool", {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ("AveragePool", {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [2], "strides": [2], "ceil_mode": 1}),
]


@pytest.mark.parametrize("op_type,attrs", POOL1D)
def test_pool1d_is_imported_as_pool2d(rng, op_type, attrs):
    g, (y,) = import_vs_ort(op_type, [f32(rng, 2, 3, 11)], attrs)
    assert ops_of(g) == ["unsqueeze", "max_pool2d" if op_type == "MaxPool" else "avg_pool2d", "squeeze"]


def test_global_avg_pool1d(rng):
    g, _ = import_vs_ort("GlobalAveragePool", [f32(rng, 2, 5, 13)])
    assert ops_of(g) == ["unsqueeze", "global_avg_pool2d", "squeeze"]


def test_4d_conv_and_pool_fail_clearly(rng):
    """3-D is supported (tests/partition/test_ops_3d.py); four spatial axes are not."""
    msg = import_error("Conv", [f32(rng, 1, 3, 3, 3, 3, 3), Const(f32(rng, 2, 3, 2, 2, 2, 2))])
    assert msg == ("node 'n0' (Conv): only 1-D, 2-D and 3-D convolutions are supported, "
                   "weight shape [2, 3, 2, 2, 2, 2]")
    msg = import_error("MaxPool", [f32(rng, 1, 3, 3, 3, 3, 3)], {"kernel_shape": [2, 2, 2, 2]})
    assert msg == ("node 'n0' (MaxPool): only 1-D, 2-D and 3-D pooling is supported, input shape "
                   "[1, 3, 3, 3, 3, 3], kernel_shape [2, 2, 2, 2]")
    msg = import_error("AveragePool", [f32(rng, 1, 3, 3, 3, 3, 3)], {"kernel_shape": [2, 2, 2, 2]})
    assert "only 1-D, 2-D and 3-D pooling is supported" in msg


# ============================================================================ host costing
HOST_CASES = [
    ("ConvTranspose", lambda r: [f32(r, 1, 4, 5, 5), Const(f32(r, 4, 2, 2, 2))], {"strides": [2, 2]}),
    ("Resize", lambda r: [f32(r, 1, 2, 4, 4), None, Const(np.array([1, 1, 2, 2], np.float32))], {"mode": "linear"}),
    ("DepthToSpace", lambda r: [f32(r, 1, 8, 3, 3)], {"blocksize": 2}),
    ("SpaceToDepth", lambda r: [f32(r, 1, 2, 4, 4)], {"blocksize": 2}),
    ("InstanceNormalization", lambda r: [f32(r, 1, 3, 4, 4), Const(f32(r, 3)), Const(f32(r, 3))], {}),
]


@pytest.mark.parametrize("op_type,make,attrs", HOST_CASES, ids=[c[0] for c in HOST_CASES])
def test_host_model_costs_each_new_op(rng, op_type, make, attrs):
    model, _ = _model(op_type, make(rng), attrs, OPSET)
    (node,) = load_onnx(model.SerializeToString()).nodes
    assert_host_cost(node)
