"""3-D convolution and pooling (video and volumetric models): conv3d, max_pool3d and avg_pool3d
against onnxruntime running the same one-node model, both as ops and through load_onnx; shape and
import errors are one line; the host model costs them; no preset offloads them."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from test_ops import Const, assert_host_cost, assert_same, import_error, one_node_model, ort_node, run_op

import sim
from partition import interpret, load_onnx, partition_for
from partition.ir import TensorType
from partition.ops import OPS, OpError, infer_types

OPSET = 21
ZOO_C3D = "c3d_clip.ts.onnx"


@pytest.fixture
def rng():
    return np.random.default_rng(3)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def import_vs_ort(op_type: str, inputs, attrs: dict | None = None, opset: int = OPSET, exact: bool = False):
    model, feeds = one_node_model(op_type, inputs, attrs, 1, opset)
    g = load_onnx(model.SerializeToString())
    ours = interpret(g, feeds)
    assert_same(ours, ort_node(op_type, inputs, attrs, opset=opset), exact)
    return [n.op for n in g.nodes]


def op_error(op: str, shapes, attrs: dict, match: str) -> None:
    with pytest.raises(OpError, match=match) as e:
        infer_types(op, [TensorType(s, "float32") for s in shapes], attrs)
    assert "\n" not in str(e.value)


# ============================================================================ conv3d
# (x shape, w shape, bias?, our attrs); the ONNX node gets the same values under ONNX names.
CONV_CASES = {
    "plain": ((1, 3, 4, 5, 6), (4, 3, 3, 3, 3), False, {}),
    "bias_pads": ((2, 3, 4, 5, 6), (5, 3, 3, 3, 3), True, {"pads": (1, 1, 1, 1, 1, 1)}),
    "asym_pads": ((1, 2, 5, 4, 6), (3, 2, 2, 3, 2), True, {"pads": (0, 1, 2, 1, 0, 1)}),
    "strides": ((1, 3, 7, 8, 9), (4, 3, 3, 2, 3), False, {"strides": (2, 3, 1), "pads": (1, 0, 1, 1, 1, 0)}),
    "dilations": ((1, 2, 7, 7, 8), (3, 2, 2, 3, 2), True, {"dilations": (2, 1, 3), "pads": (1, 1, 1, 1, 1, 1)}),
    "groups": ((2, 4, 4, 5, 5), (6, 2, 3, 1, 3), True, {"groups": 2, "strides": (1, 2, 2), "pads": (1, 0, 1, 1, 0, 1)}),
    "depthwise": ((1, 4, 5, 6, 6), (8, 1, 3, 3, 3), True, {"groups": 4, "pads": (1, 1, 1, 1, 1, 1)}),
    "pointwise": ((1, 6, 3, 4, 5), (2, 6, 1, 1, 1), False, {}),
    "all": ((2, 6, 8, 7, 9), (6, 2, 2, 3, 2), True,
            {"groups": 3, "strides": (2, 1, 3), "dilations": (3, 2, 1), "pads": (2, 0, 1, 1, 2, 0)}),
}


def _onnx_conv_attrs(attrs: dict) -> dict:
    names = {"strides": "strides", "pads": "pads", "dilations": "dilations", "groups": "group"}
    return {names[k]: (list(v) if isinstance(v, tuple) else v) for k, v in attrs.items()}


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv3d_op_matches_onnxruntime(rng, case):
    xs, ws, bias, attrs = CONV_CASES[case]
    x, w = f32(rng, *xs), f32(rng, *ws)
    args = [x, w] + ([f32(rng, ws[0])] if bias else [])
    ours = run_op("conv3d", args, attrs)
    ref = ort_node("Conv", [x] + [Const(a) for a in args[1:]], _onnx_conv_attrs(attrs))
    assert_same(ours, ref)


@pytest.mark.parametrize("case", ["bias_pads", "all", "depthwise"])
def test_conv3d_import_matches_onnxruntime(rng, case):
    xs, ws, bias, attrs = CONV_CASES[case]
    ins = [f32(rng, *xs), Const(f32(rng, *ws))] + ([Const(f32(rng, ws[0]))] if bias else [])
    assert import_vs_ort("Conv", ins, _onnx_conv_attrs(attrs)) == ["conv3d"]


@pytest.mark.parametrize("auto_pad", ["VALID", "SAME_UPPER", "SAME_LOWER", "NOTSET"])
def test_conv3d_auto_pad(rng, auto_pad):
    attrs = {"auto_pad": auto_pad, "strides": [2, 1, 3], "kernel_shape": [2, 3, 4]}
    ins = [f32(rng, 1, 2, 5, 6, 7), Const(f32(rng, 3, 2, 2, 3, 4)), Const(f32(rng, 3))]
    assert import_vs_ort("Conv", ins, attrs) == ["conv3d"]


def _conv3d_loops(x, w, b, strides, pads, dil, groups):
    """Direct float64 definition: every output voxel is a sum over its window's taps."""
    n, _, d, h, wd = x.shape
    k, cg, kd, kh, kw = w.shape
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(pads[:3], pads[3:])))
    od, oh, ow = ((s + pads[i] + pads[i + 3] - dil[i] * (kk - 1) - 1) // strides[i] + 1
                  for i, (s, kk) in enumerate(zip((d, h, wd), (kd, kh, kw))))
    y = np.zeros((n, k, od, oh, ow))
    for ki, z, i, j in itertools.product(range(k), range(od), range(oh), range(ow)):
        g = ki // (k // groups)
        win = xp[:, g * cg:(g + 1) * cg,
                 z * strides[0]:z * strides[0] + dil[0] * (kd - 1) + 1:dil[0],
                 i * strides[1]:i * strides[1] + dil[1] * (kh - 1) + 1:dil[1],
                 j * strides[2]:j * strides[2] + dil[2] * (kw - 1) + 1:dil[2]]
        y[:, ki, z, i, j] = (win * w[ki]).sum(axis=(1, 2, 3, 4)) + b[ki]
    return y


def test_conv3d_float64_matches_direct_definition(rng):
    x, w, b = rng.standard_normal((2, 4, 5, 4, 6)), rng.standard_normal((6, 2, 2, 3, 2)), rng.standard_normal(6)
    attrs = {"strides": (1, 2, 2), "pads": (1, 0, 1, 0, 1, 1), "dilations": (2, 1, 2), "groups": 2}
    (y,) = run_op("conv3d", [x, w, b], attrs)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, _conv3d_loops(x, w, b, attrs["strides"], attrs["pads"], attrs["dilations"], 2),
                               rtol=1e-12, atol=1e-12)


CONV_ERRORS = [
    ([(1, 3, 4, 4)], {}, r"^conv3d: input must be 5-D NCDHW, got shape \[1, 3, 4, 4\]$"),
    ([(1, 3, 4, 4, 4), (2, 3, 3, 3)], {},
     r"^conv3d: weight must be 5-D \(K, C/groups, KD, KH, KW\), got shape \[2, 3, 3, 3\]$"),
    ([(1, 4, 4, 4, 4), (2, 3, 1, 1, 1)], {}, r"^conv3d: input has 4 channels but weight expects 3 \(groups=1\)$"),
    ([(1, 4, 4, 4, 4), (3, 2, 1, 1, 1)], {"groups": 2},
     r"^conv3d: 3 output channels are not divisible by groups=2$"),
    ([(1, 3, 4, 4, 4), (2, 3, 1, 1, 1), (3,)], {}, r"^conv3d: bias must have shape \[2\], got \[3\]$"),
    ([(1, 3, 2, 4, 4), (2, 3, 3, 3, 3)], {},
     r"^conv3d: kernel 3x3x3 \(dilations \[1, 1, 1\]\) does not fit the padded 2x4x4 input$"),
    ([(1, 3, 4, 4, 4), (2, 3, 1, 1, 1)], {"pads": (0, 0, 0, 0)}, r"^conv3d: pads must have 6 entries, got 4$"),
    ([(1, 3, 4, 4, 4), (2, 3, 1, 1, 1)], {"strides": (1, 0, 1)}, r"^conv3d: strides must be >= 1, got \[1, 0, 1\]$"),
    ([(1, 3, 4, 4, 4), (2, 3, 1, 1, 1)], {"pads": (0, 0, -1, 0, 0, 0)}, r"^conv3d: pads must be >= 0"),
]


@pytest.mark.parametrize("shapes,attrs,match", CONV_ERRORS)
def test_conv3d_shape_errors(shapes, attrs, match):
    if len(shapes) == 1:
        shapes = shapes + [(2, 3, 1, 1, 1)]
    op_error("conv3d", shapes, attrs, match)


def test_conv3d_dtype_errors():
    with pytest.raises(OpError, match=r"^conv3d: input must be a float tensor, got int32$"):
        infer_types("conv3d", [TensorType((1, 1, 2, 2, 2), "int32")] * 2, {})
    with pytest.raises(OpError, match=r"^conv3d: input dtype float32 differs from weight dtype float64$"):
        infer_types("conv3d", [TensorType((1, 1, 2, 2, 2), "float32"), TensorType((1, 1, 1, 1, 1), "float64")], {})


# ============================================================================ pools
POOL_CASES = {
    "plain": ((1, 3, 4, 6, 6), {"kernel": (2, 2, 2), "strides": (2, 2, 2)}),
    "c3d_spatial_only": ((2, 2, 4, 8, 8), {"kernel": (1, 2, 2), "strides": (1, 2, 2)}),
    "overlap_pads": ((1, 2, 5, 6, 7), {"kernel": (3, 3, 2), "strides": (1, 2, 1), "pads": (1, 1, 0, 1, 0, 1)}),
    "ceil": ((1, 2, 5, 7, 6), {"kernel": (2, 3, 2), "strides": (2, 2, 2), "ceil_mode": True}),
    "ceil_pads": ((2, 2, 6, 5, 7), {"kernel": (3, 2, 3), "strides": (2, 2, 3), "pads": (1, 1, 1, 0, 1, 2),
                                    "ceil_mode": True}),
    "dilations": ((1, 2, 7, 8, 9), {"kernel": (2, 3, 2), "strides": (2, 3, 2), "dilations": (2, 1, 3),
                                    "pads": (1, 1, 0, 1, 2, 1)}),
    "dilations_ceil": ((1, 2, 7, 8, 9), {"kernel": (2, 2, 2), "strides": (2, 2, 3), "dilations": (2, 3, 2),
                                         "pads": (1, 1, 1, 0, 1, 1), "ceil_mode": True}),
}


def _onnx_pool_attrs(attrs: dict) -> dict:
    out = {"kernel_shape": list(attrs["kernel"])}
    for k in ("strides", "pads", "dilations"):
        if k in attrs:
            out[k] = list(attrs[k])
    for k in ("ceil_mode", "count_include_pad"):
        if k in attrs:
            out[k] = int(attrs[k])
    return out


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool3d_matches_onnxruntime(rng, case):
    xs, attrs = POOL_CASES[case]
    x = f32(rng, *xs)
    assert_same(run_op("max_pool3d", [x], attrs), ort_node("MaxPool", [x], _onnx_pool_attrs(attrs)), exact=True)


@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("case", POOL_CASES)
def test_avg_pool3d_matches_onnxruntime(rng, case, count_include_pad):
    xs, attrs = POOL_CASES[case]
    attrs = {**attrs, "count_include_pad": count_include_pad}
    x = f32(rng, *xs)
    assert_same(run_op("avg_pool3d", [x], attrs), ort_node("AveragePool", [x], _onnx_pool_attrs(attrs)))


def test_max_pool3d_integers_exact(rng):
    x = rng.integers(0, 255, (1, 2, 4, 5, 5), dtype=np.uint8)
    attrs = {"kernel": (2, 2, 2), "strides": (1, 2, 2), "pads": (1, 0, 1, 0, 1, 0)}
    assert_same(run_op("max_pool3d", [x], attrs), ort_node("MaxPool", [x], _onnx_pool_attrs(attrs)), exact=True)


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("auto_pad", ["VALID", "SAME_UPPER", "SAME_LOWER"])
def test_pool3d_import_auto_pad(rng, op_type, auto_pad):
    attrs = {"kernel_shape": [2, 3, 3], "strides": [2, 2, 1], "auto_pad": auto_pad}
    if op_type == "AveragePool":
        attrs["count_include_pad"] = 1
    want = "max_pool3d" if op_type == "MaxPool" else "avg_pool3d"
    assert import_vs_ort(op_type, [f32(rng, 1, 3, 5, 7, 6)], attrs) == [want]


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_pool3d_import_explicit_attrs(rng, op_type):
    attrs = {"kernel_shape": [3, 2, 2], "strides": [2, 1, 2], "pads": [1, 0, 1, 1, 1, 0], "ceil_mode": 1,
             "dilations": [1, 2, 1]}
    want = "max_pool3d" if op_type == "MaxPool" else "avg_pool3d"
    assert import_vs_ort(op_type, [f32(rng, 2, 2, 6, 7, 7)], attrs) == [want]


def test_global_average_pool_5d(rng):
    assert import_vs_ort("GlobalAveragePool", [f32(rng, 2, 3, 4, 5, 6)]) == ["reduce_mean"]


POOL_ERRORS = [
    ("max_pool3d", (1, 2, 4, 4), {"kernel": (2, 2, 2)},
     r"^max_pool3d: input must be 5-D NCDHW, got shape \[1, 2, 4, 4\]$"),
    ("avg_pool3d", (1, 2, 4, 4, 4), {}, r"^avg_pool3d: missing attribute 'kernel'$"),
    ("max_pool3d", (1, 2, 4, 4, 4), {"kernel": (2, 2)}, r"^max_pool3d: kernel must have 3 entries, got 2$"),
    ("avg_pool3d", (1, 2, 4, 4, 4), {"kernel": (2, 2, 2), "pads": (0, 2, 0, 0, 0, 0)},
     r"^avg_pool3d: pads \[0, 2, 0, 0, 0, 0\] must be smaller than the kernel \[2, 2, 2\]$"),
    ("max_pool3d", (1, 2, 4, 4, 4), {"kernel": (2, 0, 2)}, r"^max_pool3d: kernel, strides and dilations must be >= 1$"),
    ("max_pool3d", (1, 2, 4, 1, 4), {"kernel": (2, 2, 2)},
     r"^max_pool3d: kernel 2x2x2 does not fit the padded 4x1x4 input$"),
]


@pytest.mark.parametrize("op,shape,attrs,match", POOL_ERRORS)
def test_pool3d_shape_errors(op, shape, attrs, match):
    op_error(op, [shape], attrs, match)


def test_avg_pool3d_needs_float():
    with pytest.raises(OpError, match=r"^avg_pool3d: input must be a float tensor, got int32$"):
        infer_types("avg_pool3d", [TensorType((1, 1, 2, 2, 2), "int32")], {"kernel": (1, 1, 1)})


# ============================================================================ import errors
def test_import_errors_are_one_line(rng):
    x = f32(rng, 1, 2, 4, 4, 4)
    msg = import_error("MaxPool", [x], {"kernel_shape": [2, 2, 2]}, n_out=2)
    assert msg == ("node 'n0' (MaxPool): the Indices output of MaxPool is supported for 2-D pooling only, "
                   "input shape [1, 2, 4, 4, 4]")
    msg = import_error("AveragePool", [x], {"kernel_shape": [2, 2]})
    assert msg == ("node 'n0' (AveragePool): kernel_shape [2, 2] must have 3 entries for the 5-D input of "
                   "shape [1, 2, 4, 4, 4]")
    msg = import_error("GlobalAveragePool", [f32(rng, 1, 2, 2, 2, 2, 2)])
    assert msg == ("node 'n0' (GlobalAveragePool): only rank-3 (N, C, L), rank-4 (NCHW) and rank-5 (NCDHW) "
                   "inputs are supported, got shape [1, 2, 2, 2, 2, 2]")
    msg = import_error("Conv", [f32(rng, 1, 2, 2, 2, 2, 2), Const(f32(rng, 1, 2, 1, 1, 1, 1))])
    assert msg == ("node 'n0' (Conv): only 1-D, 2-D and 3-D convolutions are supported, "
                   "weight shape [1, 2, 1, 1, 1, 1]")
    msg = import_error("Conv", [x, Const(f32(rng, 3, 2, 2, 2, 2))], {"auto_pad": "SAME"})
    assert msg == "node 'n0' (Conv): unknown auto_pad 'SAME'"


# ============================================================================ costs
def _cost(op, shapes, attrs):
    ins = [TensorType(s, "float32") for s in shapes]
    return OPS[op].cost(ins, infer_types(op, ins, attrs), attrs)


def test_conv3d_cost_by_hand():
    # C3D conv1: 3 -> 64 channels, 3x3x3, 16x112x112 clip, "same" padding
    c = _cost("conv3d", [(1, 3, 16, 112, 112), (64, 3, 3, 3, 3), (64,)], {"pads": (1,) * 6})
    assert c.macs == 64 * 16 * 112 * 112 * 3 * 27 == 1040449536
    assert c.flops == 2 * c.macs + 64 * 16 * 112 * 112
    assert c.bytes_in == 4 * (3 * 16 * 112 * 112 + 64 * 81 + 64)
    assert c.bytes_out == 4 * 64 * 16 * 112 * 112
    # grouped, strided, batch 2: N*K*OD*OH*OW*(C/g)*KD*KH*KW, no bias term
    c = _cost("conv3d", [(2, 8, 8, 8, 8), (16, 2, 3, 3, 3)], {"groups": 4, "strides": (2, 2, 2), "pads": (1,) * 6})
    assert c.macs == 2 * 16 * 4 * 4 * 4 * 2 * 27
    assert c.flops == 2 * c.macs


def test_pool3d_cost_by_hand():
    c = _cost("max_pool3d", [(1, 64, 16, 56, 56)], {"kernel": (2, 2, 2), "strides": (2, 2, 2)})
    assert (c.macs, c.flops) == (0, 64 * 8 * 28 * 28 * 8)
    c = _cost("avg_pool3d", [(1, 4, 4, 4, 4)], {"kernel": (3, 3, 3), "pads": (1,) * 6})
    assert (c.macs, c.flops) == (0, 4 * 64 * 28)


HOST_CASES = [
    ("Conv", lambda r: [f32(r, 1, 2, 4, 5, 5), Const(f32(r, 3, 2, 3, 3, 3)), Const(f32(r, 3))], {"pads": [1] * 6}),
    ("MaxPool", lambda r: [f32(r, 1, 2, 4, 6, 6)], {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}),
    ("AveragePool", lambda r: [f32(r, 1, 2, 4, 6, 6)], {"kernel_shape": [1, 3, 3], "pads": [0, 1, 1, 0, 1, 1]}),
]


@pytest.mark.parametrize("op_type,make,attrs", HOST_CASES, ids=[c[0] for c in HOST_CASES])
def test_host_model_costs_3d_ops(rng, op_type, make, attrs):
    model, _ = one_node_model(op_type, make(rng), attrs, 1, OPSET)
    (node,) = load_onnx(model.SerializeToString()).nodes
    assert node.op in ("conv3d", "max_pool3d", "avg_pool3d")
    assert_host_cost(node)


# ============================================================================ host only
def _ops_in_functions(graph) -> set[str]:
    ops = set()
    for fn in graph.functions.values():
        ops |= {n.op for n in fn.graph.nodes} | _ops_in_functions(fn.graph)
    return ops


@pytest.mark.parametrize("preset", sim.hw.presets.names())
def test_no_preset_offloads_3d_ops(preset):
    from pathlib import Path
    g = load_onnx(Path(__file__).resolve().parents[1] / "data" / "zoo" / ZOO_C3D)
    assert {"conv3d", "max_pool3d"} <= {n.op for n in g.nodes}
    pg = partition_for(g, sim.load_hw(preset).partition_target())
    assert not _ops_in_functions(pg) & {"conv3d", "max_pool3d", "avg_pool3d"}
    assert [n.op for n in pg.nodes].count("conv3d") == 2


def test_simulator_has_no_conv3d_workload(rng):
    """conv3d shares the "conv" category with conv2d, but the simulator keys on the op name: it
    must refuse the node rather than cost it as a 2-D convolution."""
    model, _ = one_node_model("Conv", [f32(rng, 1, 2, 4, 4, 4), Const(f32(rng, 3, 2, 3, 3, 3))], {}, 1, OPSET)
    (node,) = load_onnx(model.SerializeToString()).nodes
    with pytest.raises(sim.WorkloadError, match="conv3d"):
        sim.workload_of(node)
