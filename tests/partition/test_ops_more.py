"""The ops real exported models use beyond the core set: trilu, einsum, cumsum, argmin, xor,
isnan/isinf, lrn, quantize_linear/dequantize_linear, scatter_nd/scatter_elements, one_hot,
thresholded_relu, shrink and hardmax. Each op against onnxruntime on one-node models over its
attributes (a float64 numpy formula where onnxruntime lacks the case), each importer converter by
load_onnx + interpret against onnxruntime, and the unsupported cases by their one-line messages."""
from __future__ import annotations

import json
import math

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from test_ops import Const, assert_host_cost, assert_same, import_error, one_node_model, ort_node, run_op

from partition import graph_from_json, graph_to_json, interpret, load_onnx
from partition.ir import TensorType
from partition.ops import OpError, infer_types, op_cost
from partition.onnx.importer import OnnxImportError

OPSET = 21


# ============================================================================ helpers
def import_vs_ort(op_type: str, inputs, attrs: dict | None = None, opset: int = OPSET, exact: bool = False,
                  n_out: int = 1):
    """load_onnx + interpret against onnxruntime on the same one-node model; returns the graph."""
    model, feeds = one_node_model(op_type, inputs, attrs, n_out, opset)
    g = load_onnx(model.SerializeToString())
    assert_same(interpret(g, feeds), ort_node(op_type, inputs, attrs, n_out, opset), exact)
    return g


def op_error(op: str, args, attrs: dict, match: str) -> None:
    with pytest.raises(OpError, match=match) as e:
        run_op(op, args, attrs)
    assert "\n" not in str(e.value)


def vs_ort(op: str, args, attrs: dict, onnx_op: str, onnx_inputs=None, onnx_attrs=None, opset: int = OPSET,
           exact: bool = False):
    ours = run_op(op, args, attrs)
    assert_same(ours, ort_node(onnx_op, list(args) if onnx_inputs is None else onnx_inputs, onnx_attrs,
                               opset=opset), exact)
    return ours


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ============================================================================ trilu
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -7, -1, 0, 2, 9])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_trilu_vs_ort(rng, upper, k, dtype):
    x = (rng.standard_normal((2, 4, 5)) * 5).astype(dtype)
    onnx_in = [x] if k is None else [x, Const(np.array(k, np.int64))]
    vs_ort("trilu", [x], {"upper": bool(upper), "k": k or 0}, "Trilu", onnx_in, {"upper": upper}, exact=True)


def test_trilu_import_and_errors(rng):
    x = f32(rng, 3, 3)
    g = import_vs_ort("Trilu", [x, Const(np.array(-1, np.int64))], {"upper": 0}, exact=True)
    assert [(n.op, n.attrs) for n in g.nodes] == [("trilu", {"upper": False, "k": -1})]
    op_error("trilu", [f32(rng, 4)], {}, r"^trilu: input must have rank >= 2, got shape \[4\]$")
    # a k computed at run time moves the diagonal, not the shape: a mask built at run time
    for k in (-2, 0, 1, 5):
        for upper in (0, 1):
            import_vs_ort("Trilu", [f32(rng, 2, 3, 4), np.array(k, np.int64)], {"upper": upper}, exact=True)


# ============================================================================ einsum
EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),                      # implicit output
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),  # attention scores
    ("ab, bc -> ac", [(2, 3), (3, 4)]),               # spaces
    ("Ab,bC->AC", [(2, 3), (3, 4)]),                  # upper-case labels
    ("ij->ji", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),                                 # trace
    ("ij->", [(2, 3)]),
    ("ijk->ik", [(2, 3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i", [(5,), (5,)]),
    ("...ij,jk->...ik", [(5, 2, 3), (3, 4)]),
    ("...ij,jk", [(5, 2, 3), (3, 4)]),
    ("...ij,...jk->...ik", [(5, 2, 3), (1, 3, 4)]),   # ellipsis broadcasting
    ("b...d,bd->b...", [(2, 3, 4, 5), (2, 5)]),
    ("ij,jk->ik", [(2, 1), (3, 4)]),                  # a size-1 label broadcasts
    ("ab,bc,c->a", [(2, 3), (3, 4), (4,)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum_vs_ort(rng, eq, shapes):
    xs = [f32(rng, *s) for s in shapes]
    vs_ort("einsum", xs, {"equation": eq}, "Einsum", onnx_attrs={"equation": eq})


@pytest.mark.parametrize("dtype", ["int32", "int64", "float64"])
def test_einsum_other_dtypes_vs_ort(rng, dtype):
    a, b = (rng.integers(-5, 5, s).astype(dtype) for s in ((3, 4, 2), (3, 2, 5)))
    vs_ort("einsum", [a, b], {"equation": "bij,bjk->bik"}, "Einsum", onnx_attrs={"equation": "bij,bjk->bik"})


def test_einsum_implicit_order_is_ascii():
    # numpy's rule: labels used once, upper case before lower case (onnxruntime rejects this form)
    (t,) = infer_types("einsum", [TensorType((3, 2), "float32"), TensorType((2, 4), "float32")], {"equation": "Ca,ab"})
    assert t.shape == (3, 4)


def test_einsum_import(rng):
    xs = [f32(rng, 2, 3, 4), f32(rng, 2, 5, 4)]
    g = import_vs_ort("Einsum", xs, {"equation": "bij,bkj->bik"})
    assert [n.op for n in g.nodes] == ["einsum"] and g.nodes[0].attrs == {"equation": "bij,bkj->bik"}
    msg = import_error("Einsum", xs)
    assert msg == "node 'n0' (Einsum): missing attribute 'equation'"


@pytest.mark.parametrize("eq,shapes,msg", [
    ("ij,jk->ik", [(2, 3), (4, 5)], r"^einsum: label 'j' has size 3 in operand 0 but 4 in operand 1 \('ij,jk->ik'\)$"),
    ("ii->i", [(2, 3)], r"^einsum: label 'i' repeats in operand 0 with sizes 2 and 3$"),
    ("ij,jk", [(2, 3)], r"^einsum: equation 'ij,jk' has 2 operand terms but 1 inputs are given$"),
    ("ijk->i", [(2, 3)], r"^einsum: operand 0 term 'ijk' has 3 labels but the input has rank 2$"),
    ("i1->i", [(2, 3)], r"^einsum: bad operand 0 term 'i1' in equation 'i1->i'"),
    ("i......->i", [(2, 3)], r"^einsum: bad operand 0 term 'i......'"),
    ("ij->ik", [(2, 3)], r"^einsum: output label 'k' is in no operand"),
    ("ij->ii", [(2, 2)], r"^einsum: output term 'ii' repeats a label"),
    ("...ij->ij", [(5, 2, 3)],
     r"^einsum: the operands have '...' dimensions \[5\] but the output term 'ij' has no '...'$"),
    ("...i,...i->...", [(2, 3), (4, 3)], r"^einsum: the '...' dimensions \[\[2\], \[4\]\] do not broadcast"),
])
def test_einsum_errors(eq, shapes, msg):
    with pytest.raises(OpError, match=msg):
        infer_types("einsum", [TensorType(s, "float32") for s in shapes], {"equation": eq})


def test_einsum_error_through_importer(rng):
    msg = import_error("Einsum", [f32(rng, 2, 3), f32(rng, 4, 5)], {"equation": "ij,jk->ik"})
    assert msg == "node 'n0' (Einsum): einsum: label 'j' has size 3 in operand 0 but 4 in operand 1 ('ij,jk->ik')"
    with pytest.raises(OpError, match="inputs have different dtypes float32, int64"):
        infer_types("einsum", [TensorType((2,), "float32"), TensorType((2,), "int64")], {"equation": "i,i"})


@pytest.mark.parametrize("eq,shapes,macs,flops", [
    ("ij,jk->ik", [(2, 3), (3, 4)], 24, 48),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)], 120, 240),
    ("...ij,...jk->...ik", [(5, 2, 3), (1, 3, 4)], 120, 240),   # the '...' dims count
    ("ij,jk->ik", [(2, 1), (3, 4)], 24, 48),                     # broadcast label at its full size
    ("ab,bc,c->a", [(2, 3), (3, 4), (4,)], 48, 96),             # 3 operands: 2 MACs per point
    ("ij->", [(2, 3)], 0, 6),
    ("ii->i", [(3, 3)], 0, 9),
])
def test_einsum_cost(eq, shapes, macs, flops):
    from partition.ops import OPS
    ins = [TensorType(s, "float32") for s in shapes]
    outs = infer_types("einsum", ins, {"equation": eq})
    c = OPS["einsum"].cost(ins, outs, {"equation": eq})
    assert (c.macs, c.flops) == (macs, flops)


# ============================================================================ cumsum
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_cumsum_vs_ort(rng, exclusive, reverse, axis, dtype):
    x = (rng.standard_normal((3, 4, 5)) * 10).astype(dtype)
    attrs = {"axis": axis, "exclusive": bool(exclusive), "reverse": bool(reverse)}
    vs_ort("cumsum", [x], attrs, "CumSum", [x, Const(np.array(axis, np.int64))],
           {"exclusive": exclusive, "reverse": reverse})


@pytest.mark.parametrize("axis", [np.array(-2, np.int32), np.array([1], np.int64)])
def test_cumsum_import(rng, axis):
    g = import_vs_ort("CumSum", [f32(rng, 3, 4), Const(axis)], {"exclusive": 1})
    assert g.nodes[0].attrs == {"axis": int(axis.reshape(-1)[0]) % 2, "exclusive": True, "reverse": False}


def test_cumsum_errors(rng):
    x = f32(rng, 3, 4)
    # an axis computed at run time is read at run time (the shape is x's either way)
    for axis in (0, 1, -1):
        for exclusive, reverse in ((0, 0), (1, 1)):
            import_vs_ort("CumSum", [x, np.array(axis, np.int32)], {"exclusive": exclusive, "reverse": reverse})
    msg = import_error("CumSum", [x, np.array([0, 1], np.int64)])
    assert msg == "node 'n0' (CumSum): axis must hold one value, got shape [2]"
    msg = import_error("CumSum", [x, Const(np.array(2, np.int64))])
    assert msg == "node 'n0' (CumSum): cumsum: axis 2 is out of range for rank 2"
    op_error("cumsum", [np.ones(3, bool)], {"axis": 0}, r"^cumsum: input must be numeric, got bool$")
    op_error("cumsum", [x], {}, r"^cumsum: missing attribute 'axis'$")


# ============================================================================ argmin / argmax / reduce_max
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keep", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_argmin_vs_ort(rng, axis, keep, last):
    x = rng.integers(0, 3, (3, 4, 5)).astype(np.float32)  # many ties
    vs_ort("argmin", [x], {"axis": axis, "keepdims": bool(keep), "select_last_index": bool(last)}, "ArgMin",
           onnx_attrs={"axis": axis, "keepdims": keep, "select_last_index": last})


def test_argmin_import(rng):
    g = import_vs_ort("ArgMin", [f32(rng, 3, 4)], {"axis": -1, "keepdims": 0, "select_last_index": 1})
    assert g.nodes[0].attrs == {"axis": 1, "keepdims": False, "select_last_index": True}
    op_error("argmin", [f32(rng, 3, 0)], {"axis": 1}, r"^argmin: cannot reduce an empty axis$")


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "float64"])
@pytest.mark.parametrize("onnx_op", ["ArgMax", "ArgMin", "ReduceMax"])
def test_integer_inputs_of_arg_and_reduce_max(rng, dtype, onnx_op):
    x = rng.integers(0, 4, (3, 5)).astype(dtype)
    attrs = {"keepdims": 0} if onnx_op == "ReduceMax" else {"axis": 1, "select_last_index": 1}
    import_vs_ort(onnx_op, [x], attrs, exact=True)


def test_reduce_max_bool_vs_ort():
    # onnxruntime has ReduceMax on bool from opset 20; ArgMax/ArgMin on bool it rejects
    x = np.array([[True, False, False], [False, False, False]])
    import_vs_ort("ReduceMax", [x], {"keepdims": 0}, exact=True)
    import_vs_ort("ReduceMax", [x, Const(np.array([1], np.int64))], {}, exact=True)


# ============================================================================ xor / isnan / isinf
def test_xor_vs_ort(rng):
    a, b = rng.random((2, 3)) > 0.5, rng.random((3,)) > 0.5
    vs_ort("xor", [a, b], {}, "Xor", exact=True)
    import_vs_ort("Xor", [a, b], exact=True)
    op_error("xor", [a.astype(np.float32), b], {}, r"^xor: inputs must be bool, got float32 and bool$")


SPECIALS = np.array([0.0, -1.5, 2.0, np.inf, -np.inf, np.nan, -np.nan, 3e38, -0.0])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_isnan_vs_ort(dtype):
    with np.errstate(over="ignore"):  # 3e38 is inf in float16
        x = SPECIALS.astype(dtype)
    vs_ort("isnan", [x], {}, "IsNaN", exact=True)
    import_vs_ort("IsNaN", [x], exact=True)


@pytest.mark.parametrize("neg", [0, 1])
@pytest.mark.parametrize("pos", [0, 1])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_isinf_vs_ort(neg, pos, dtype):
    x = SPECIALS.astype(dtype).reshape(3, 3)
    attrs = {"detect_negative": neg, "detect_positive": pos}
    vs_ort("isinf", [x], attrs, "IsInf", onnx_attrs=attrs, exact=True)
    import_vs_ort("IsInf", [x], attrs, exact=True)


def test_isnan_isinf_errors():
    op_error("isnan", [np.arange(3)], {}, r"^isnan: input must be a float tensor, got int64$")
    op_error("isinf", [np.ones(3)], {"detect_negative": 2}, r"^isinf: detect_negative must be 0 or 1, got 2$")


# ============================================================================ lrn
def lrn_reference(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    """The ONNX formula, one channel at a time in float64."""
    xd = x.astype(np.float64)
    c = x.shape[1]
    out = np.empty_like(xd)
    for ch in range(c):
        lo, hi = max(0, ch - (size - 1) // 2), min(c - 1, ch + math.ceil((size - 1) / 2))
        sq = np.sum(xd[:, lo:hi + 1] ** 2, axis=1)
        out[:, ch] = xd[:, ch] / (bias + alpha / size * sq) ** beta
    return out.astype(x.dtype)


@pytest.mark.parametrize("attrs", [{"size": 1}, {"size": 3}, {"size": 5},
                                   {"size": 3, "alpha": 0.5, "beta": 0.5, "bias": 2.0},
                                   {"size": 7, "alpha": 1e-3, "beta": 1.0}])
def test_lrn_vs_ort(rng, attrs):
    x = f32(rng, 2, 6, 3, 4, scale=3.0)
    full = {"alpha": 1e-4, "beta": 0.75, "bias": 1.0, **attrs}
    ours = vs_ort("lrn", [x], full, "LRN", onnx_attrs=attrs)
    np.testing.assert_allclose(ours[0], lrn_reference(x, **full), rtol=1e-5, atol=1e-6)
    import_vs_ort("LRN", [x], attrs)


@pytest.mark.parametrize("shape,size", [((2, 5, 7), 3), ((1, 4, 2, 2, 3), 5), ((2, 6, 3, 3), 4)])
def test_lrn_beyond_ort_vs_formula(rng, shape, size):
    # onnxruntime takes only 4-D inputs and odd sizes; the ONNX formula covers these too
    x = f32(rng, *shape, scale=3.0)
    (y,) = run_op("lrn", [x], {"size": size, "alpha": 0.3, "beta": 0.75, "bias": 1.0})
    np.testing.assert_allclose(y, lrn_reference(x, size, 0.3, 0.75, 1.0), rtol=1e-6, atol=1e-7)


def test_lrn_errors(rng):
    op_error("lrn", [f32(rng, 2, 3)], {"size": 3},
             r"^lrn: input must have rank >= 3 \(N, C, spatial...\), got \[2, 3\]$")
    op_error("lrn", [np.ones((1, 2, 3), np.int32)], {"size": 3}, r"^lrn: input must be a float tensor, got int32$")
    op_error("lrn", [f32(rng, 1, 2, 3)], {"size": 0}, r"^lrn: size must be an int >= 1, got 0$")
    assert import_error("LRN", [f32(rng, 1, 2, 3, 3)]) == "node 'n0' (LRN): missing attribute 'size'"


# ============================================================================ quantize / dequantize
ROUNDING = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 126.5, 127.5, 1e6, -1e6, 300.0, -300.0],
                    np.float32)


@pytest.mark.parametrize("qtype", ["int8", "uint8", "int16", "uint16"])
@pytest.mark.parametrize("zp", [None, 0, 3])
def test_quantize_per_tensor_vs_ort(rng, qtype, zp):
    x = np.concatenate([ROUNDING, f32(rng, 20, scale=100.0)])
    scale = np.float32(0.5) if zp is None else np.float32(0.37)
    if zp is None:
        onnx_in, ours_in = [x, Const(scale)], [x, scale]
        attrs, onnx_attrs = {"dtype": qtype}, {"output_dtype": helper.np_dtype_to_tensor_dtype(np.dtype(qtype))}
    else:
        z = np.array(zp, qtype)
        onnx_in, ours_in, attrs, onnx_attrs = [x, Const(scale), Const(z)], [x, scale, z], {}, {}
    vs_ort("quantize_linear", ours_in, attrs, "QuantizeLinear", onnx_in, onnx_attrs, exact=True)
    import_vs_ort("QuantizeLinear", onnx_in, onnx_attrs, exact=True)


def test_quantize_rounds_half_to_even_and_saturates():
    (q,) = run_op("quantize_linear", [ROUNDING, np.float32(1.0), np.array(0, np.int8)], {})
    assert q.tolist() == [0, 2, 2, 0, -2, -2, 0, 126, 127, 127, -128, 127, -128]


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("qtype", ["int8", "uint8"])
@pytest.mark.parametrize("opset", [13, 21])
def test_quantize_per_axis_vs_ort(rng, axis, qtype, opset):
    x = f32(rng, 3, 4, 5, scale=20.0)
    n = x.shape[axis]
    scale = rng.uniform(0.05, 0.5, n).astype(np.float32)
    zp = rng.integers(0, 20, n).astype(qtype)
    g = import_vs_ort("QuantizeLinear", [x, Const(scale), Const(zp)], {"axis": axis}, opset, exact=True)
    assert g.nodes[0].attrs == {"axis": axis % 3}
    vs_ort("quantize_linear", [x, scale, zp], {"axis": axis}, "QuantizeLinear", [x, Const(scale), Const(zp)],
           {"axis": axis}, opset, exact=True)


def test_quantize_default_axis_and_float16_and_old_opset(rng):
    x = f32(rng, 2, 3, 4, scale=20.0)
    import_vs_ort("QuantizeLinear", [x, Const(np.float32([0.1, 0.2, 0.3])), Const(np.int8([1, -2, 3]))], exact=True)
    xh = f32(rng, 4, 5, scale=20.0).astype(np.float16)
    import_vs_ort("QuantizeLinear", [xh, Const(np.float16(0.3)), Const(np.int8(2))], exact=True)
    for opset in (11, 12):
        import_vs_ort("QuantizeLinear", [x, Const(np.float32(0.25)), Const(np.uint8(128))], opset=opset, exact=True)
        import_vs_ort("DequantizeLinear", [x.astype(np.int8), Const(np.float32(0.25)), Const(np.int8(-3))],
                      opset=opset)


def test_quantize_one_element_scale_is_per_tensor(rng):
    x = f32(rng, 2, 3, scale=20.0)
    import_vs_ort("QuantizeLinear", [x, Const(np.float32([0.3])), Const(np.int8([-2]))], exact=True)
    import_vs_ort("DequantizeLinear", [x.astype(np.int8), Const(np.float32([0.3])), Const(np.int8([-2]))], exact=True)


def test_qdq_conv_model_vs_ort(rng):
    """A QDQ export: the activation quantized and dequantized at run time, the int8 weight
    dequantized per output channel (folded to a float constant on import), then Conv."""
    w_q = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("w_q", w_q), ("w_scale", rng.uniform(0.001, 0.01, 4).astype(np.float32)), ("w_zp", np.zeros(4, np.int8)),
        ("x_scale", np.float32(0.02)), ("x_zp", np.uint8(128))]]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w"], axis=0),
             helper.make_node("Conv", ["xd", "w"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    g = load_onnx(model.SerializeToString())
    assert [n.op for n in g.nodes] == ["quantize_linear", "dequantize_linear", "conv2d"]
    x = f32(rng, 1, 3, 6, 6)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    ref = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert_same(interpret(g, {"x": x}), ref)


def test_quantize_runtime_scale(rng):
    # scale and zero_point are ordinary inputs of the op, so a computed scale works too
    x, scale = f32(rng, 3, 4, scale=10.0), np.float32(0.2)
    import_vs_ort("QuantizeLinear", [x, scale, np.int8(-4)], exact=True)


@pytest.mark.parametrize("qtype", ["int8", "uint8", "int16", "uint16", "int32"])
@pytest.mark.parametrize("with_zp", [False, True])
def test_dequantize_per_tensor_vs_ort(rng, qtype, with_zp):
    info = np.iinfo(qtype)
    x = rng.integers(max(info.min, -1000), min(info.max, 1000), (4, 5), endpoint=True).astype(qtype)
    if qtype != "int32":  # int32 - zero_point may overflow, which onnxruntime wraps
        x.flat[:2] = info.min, info.max
    scale = np.float32(0.0123)
    zp = np.array(7, qtype)
    onnx_in = [x, Const(scale)] + ([Const(zp)] if with_zp else [])
    vs_ort("dequantize_linear", [x, scale] + ([zp] if with_zp else []), {}, "DequantizeLinear", onnx_in, exact=True)
    import_vs_ort("DequantizeLinear", onnx_in, exact=True)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("opset", [13, 21])
def test_dequantize_per_axis_vs_ort(rng, axis, opset):
    x = rng.integers(-128, 128, (3, 4, 5)).astype(np.int8)
    n = x.shape[axis]
    scale, zp = rng.uniform(0.01, 0.1, n).astype(np.float32), rng.integers(-5, 5, n).astype(np.int8)
    import_vs_ort("DequantizeLinear", [x, Const(scale), Const(zp)], {"axis": axis}, opset, exact=True)


def test_dequantize_float16_scale(rng):
    x = rng.integers(0, 256, (4, 6)).astype(np.uint8)
    import_vs_ort("DequantizeLinear", [x, Const(np.float16(0.07)), Const(np.uint8(100))], exact=True)


def test_quantize_import_errors(rng):
    x = f32(rng, 2, 4)
    # blocked scales (opset 21): each scale entry serves block_size elements along the axis
    for block, width in ((2, 4), (3, 7)):
        xb = f32(rng, 2, width) * 10
        scale = Const(rng.uniform(0.5, 2, (2, -(-width // block))).astype(np.float32))
        zp = Const(rng.integers(-3, 3, (2, -(-width // block))).astype(np.int8))
        g = import_vs_ort("QuantizeLinear", [xb, scale, zp], {"block_size": block, "axis": 1}, exact=True)
        q = interpret(g, [xb])[0]
        import_vs_ort("DequantizeLinear", [q, scale, zp], {"block_size": block, "axis": 1})
    msg = import_error("QuantizeLinear", [x, Const(np.ones((2, 3), np.float32))], {"block_size": 2, "axis": 1})
    assert msg == ("node 'n0' (QuantizeLinear): quantize_linear: blocked scale shape [2, 3] must be [2, 2] for "
                   "input [2, 4], axis 1, block_size 2")
    msg = import_error("QuantizeLinear", [x, Const(np.float32(1.0))], {"output_dtype": TensorProto.INT32})
    assert msg == ("node 'n0' (QuantizeLinear): output_dtype INT32 is not supported; only 8/16/4/2-bit integer "
                   "and float8/float4 quantization is")
    msg = import_error("QuantizeLinear", [x, Const(np.float32([1, 2, 3, 4])), Const(np.int8([0, 0, 0, 0]))],
                       opset=12)
    assert msg == ("node 'n0' (QuantizeLinear): a per-axis scale (shape [4]) needs opset 13 or later; opset 12 "
                   "quantizes per tensor only")
    msg = import_error("QuantizeLinear", [x, Const(np.float32(1.0)), Const(np.int8(0))],
                       {"output_dtype": TensorProto.UINT8})
    assert msg == "node 'n0' (QuantizeLinear): output_dtype uint8 differs from the zero_point type int8"
    msg = import_error("QuantizeLinear", [x, Const(np.float32([1, 2, 3])), Const(np.int8([0, 0, 0]))])
    assert msg == ("node 'n0' (QuantizeLinear): quantize_linear: per-axis scale has 3 entries but axis 1 of "
                   "input [2, 4] has 4")
    msg = import_error("DequantizeLinear", [np.ones((2, 3), np.int64), Const(np.float32(1.0))])
    assert msg == ("node 'n0' (DequantizeLinear): input type int64 is not supported; only 8/16/4/2-bit integer "
                   "and float8/float4 quantization is")


def test_float8_zero_point_quantizes_to_float8(rng):
    """(Refused before opset 19 support: now a float8 zero point gives float8 output, saturated.)"""
    zp = helper.make_tensor("in2", TensorProto.FLOAT8E4M3FN, [], [0.0])
    node = helper.make_node("QuantizeLinear", ["x", "in1", "in2"], ["y"], name="n0")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [2])],
                              initializer=[helper.make_tensor("in1", TensorProto.FLOAT, [], [1.0]), zp])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    (y,) = interpret(load_onnx(model.SerializeToString()), [np.array([1000.0, 3.0], np.float32)])
    assert y.dtype.name == "float8_e4m3fn" and y.astype(np.float32).tolist() == [448.0, 3.0]


def test_quantize_op_errors(rng):
    x = f32(rng, 2, 3)
    op_error("quantize_linear", [x.astype(np.int32), np.float32(1)], {},
             r"^quantize_linear: input must be a float tensor, got int32$")
    op_error("quantize_linear", [x, np.float32(1)], {"dtype": "int32"},
             r"^quantize_linear: output type int32 is not one of int8, uint8, int16, uint16, int4, uint4, int2, "
             r"uint2, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float4_e2m1fn$")
    op_error("quantize_linear", [x, np.float32([1, 2, 3]), np.int8([1, 2])], {"axis": 1},
             r"^quantize_linear: zero_point shape \[2\] differs from scale shape \[3\]$")
    op_error("quantize_linear", [x, np.ones((2, 3), np.float32)], {},
             r"^quantize_linear: scale must be a scalar or 1-D \(per-axis\), got shape \[2, 3\]$")
    op_error("dequantize_linear", [x.astype(np.int8), np.float32(1), np.uint8(0)], {},
             r"^dequantize_linear: zero_point type uint8 differs from input type int8$")
    op_error("dequantize_linear", [x.astype(np.int8), np.int32(1)], {},
             r"^dequantize_linear: scale must be a float tensor, got int32$")


# ============================================================================ scatters
@pytest.mark.parametrize("reduction,opset", [("none", 11), ("none", 21), ("add", 16), ("mul", 16),
                                             ("min", 18), ("max", 18)])
def test_scatter_nd_vs_ort(rng, reduction, opset):
    data = f32(rng, 4, 3, 5)
    # reductions see repeated (and negative, wrapping) indices; a plain scatter distinct ones
    idx = np.array([[1, 0], [-3, 0], [3, 2], [0, -1]] if reduction != "none" else [[1, 0], [3, 2], [0, -1]], np.int64)
    upd = f32(rng, len(idx), 5)
    attrs = {} if reduction == "none" and opset < 16 else {"reduction": reduction}
    vs_ort("scatter_nd", [data, idx, upd], {"reduction": reduction}, "ScatterND", onnx_attrs=attrs, opset=opset)
    g = import_vs_ort("ScatterND", [data, idx, upd], attrs, opset)
    assert g.nodes[0].attrs == {"reduction": reduction}


@pytest.mark.parametrize("k", [1, 2, 3])
def test_scatter_nd_index_depths_int64(rng, k):
    data = rng.integers(-9, 9, (3, 4, 2)).astype(np.int64)
    idx = np.stack([rng.permutation(d)[:2] for d in data.shape[:k]], axis=-1).astype(np.int64)  # 2 distinct rows
    upd = rng.integers(-9, 9, (2,) + data.shape[k:]).astype(np.int64)
    vs_ort("scatter_nd", [data, idx, upd], {"reduction": "add"}, "ScatterND", onnx_attrs={"reduction": "add"},
           exact=True)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "min", "max"])
def test_scatter_elements_vs_ort(rng, axis, reduction):
    data = f32(rng, 4, 5)
    ax = axis % 2
    n, shape = data.shape[ax], (3, 4)
    if reduction == "none":  # distinct targets along the axis in every line, as a plain scatter needs
        lines = [rng.permutation(n)[:shape[ax]] for _ in range(shape[1 - ax])]
        idx = np.stack(lines, axis=1 - ax).astype(np.int64)
        idx[idx == n - 1] = -1  # the same target, as a negative index
    else:
        idx = rng.integers(-n, n, shape).astype(np.int64)
    upd = f32(rng, *shape)
    attrs = {"axis": axis, "reduction": reduction}
    vs_ort("scatter_elements", [data, idx, upd], attrs, "ScatterElements", onnx_attrs=attrs)
    g = import_vs_ort("ScatterElements", [data, idx, upd], attrs)
    assert g.nodes[0].attrs == {"axis": axis % 2, "reduction": reduction}


def test_scatter_elements_int_and_int32_indices_and_old_opset(rng):
    data = rng.integers(-5, 5, (3, 4)).astype(np.int64)
    idx = np.array([[2, 0], [1, 3], [0, 0]], np.int32)
    upd = rng.integers(-5, 5, (3, 2)).astype(np.int64)
    vs_ort("scatter_elements", [data, idx, upd], {"axis": 1, "reduction": "mul"}, "ScatterElements",
           onnx_attrs={"axis": 1, "reduction": "mul"}, exact=True)
    import_vs_ort("ScatterElements", [data, idx, upd], {"axis": 1}, opset=11, exact=True)


def test_scatter_errors(rng):
    data = f32(rng, 4, 3)
    idx = np.array([[1]], np.int64)
    op_error("scatter_nd", [data, idx, f32(rng, 1, 3)], {"reduction": "sum"},
             r"^scatter_nd: reduction 'sum' is not one of none, add, mul, min, max$")
    op_error("scatter_nd", [data, idx, f32(rng, 1, 4)], {},
             r"^scatter_nd: updates shape \[1, 4\] should be \[1, 3\] \(indices \[1, 1\], data \[4, 3\]\)$")
    op_error("scatter_nd", [data, np.array([[1, 2, 0]]), f32(rng, 1)], {},
             r"^scatter_nd: indices last dimension must be in \[1, 2\] \(data rank\), got indices shape \[1, 3\]$")
    op_error("scatter_nd", [data, np.array([[4]]), f32(rng, 1, 3)], {},
             r"^scatter_nd: index out of range for a dimension of size 4$")
    op_error("scatter_nd", [data, idx.astype(np.float32), f32(rng, 1, 3)], {},
             r"^scatter_nd: indices must be int32 or int64, got float32$")
    op_error("scatter_nd", [np.zeros((4, 3), bool), idx, np.ones((1, 3), bool)], {"reduction": "add"},
             r"^scatter_nd: reduction 'add' on bool data is not supported$")
    op_error("scatter_elements", [data, idx, f32(rng, 1, 2)], {},
             r"^scatter_elements: updates shape \[1, 2\] differs from indices shape \[1, 1\]$")
    op_error("scatter_elements", [data, np.zeros((5, 1), np.int64), f32(rng, 5, 1)], {"axis": 1},
             r"^scatter_elements: indices \[5, 1\] exceed data \[4, 3\] on axis 0$")
    op_error("scatter_elements", [data, np.array([[-5]]), f32(rng, 1, 1)], {},
             r"^scatter_elements: index out of range for a dimension of size 4$")
    op_error("scatter_elements", [data, idx, np.ones((1, 1), np.int64)], {},
             r"^scatter_elements: updates dtype int64 differs from data dtype float32$")
    msg = import_error("ScatterElements", [data, idx, f32(rng, 1, 1)], {"reduction": "avg"})
    assert msg == ("node 'n0' (ScatterElements): scatter_elements: reduction 'avg' is not one of none, add, mul, "
                   "min, max")


# ============================================================================ one_hot
@pytest.mark.parametrize("axis", [-1, 0, 1, -3])
@pytest.mark.parametrize("itype,dtype,vtype", [("int64", "int64", "float32"), ("int64", "float32", "int32"),
                                               ("int32", "int32", "float32"), ("float32", "float32", "float32")])
def test_one_hot_vs_ort(rng, axis, itype, dtype, vtype):
    # Integral indices only: the spec leaves a fractional index undefined (onnxruntime 1.32
    # truncates it, onnx's reference matches no class), so no peer's choice is a contract.
    idx = np.array([[1, -1, 5, -5, 3, 0], [2, 2, -4, 4, -2, 1]]).astype(itype)
    values = np.array([2, 7]).astype(vtype)
    onnx_in = [idx, Const(np.array(4).astype(dtype)), Const(values)]
    vs_ort("one_hot", [idx, values], {"depth": 4, "axis": axis}, "OneHot", onnx_in, {"axis": axis}, exact=True)
    g = import_vs_ort("OneHot", onnx_in, {"axis": axis}, exact=True)
    assert g.nodes[0].attrs == {"depth": 4, "axis": axis % 3}


def test_one_hot_errors(rng):
    idx = np.array([0, 1], np.int64)
    values = np.array([0, 1], np.float32)
    msg = import_error("OneHot", [idx, np.array(3, np.int64), Const(values)])
    assert "depth input 'in1' must be a constant" in msg
    msg = import_error("OneHot", [idx, Const(np.array([3, 4], np.int64)), Const(values)])
    assert msg == "node 'n0' (OneHot): depth must hold one value, got [3, 4]"
    op_error("one_hot", [idx, np.zeros(3, np.float32)], {"depth": 3},
             r"^one_hot: values must be \[off_value, on_value\] of shape \[2\], got \[3\]$")
    op_error("one_hot", [idx, values], {"depth": 0}, r"^one_hot: depth must be an int >= 1, got 0$")
    op_error("one_hot", [idx, values], {"depth": 3, "axis": 2}, r"^one_hot: axis 2 is out of range for rank 2$")


# ============================================================================ thresholded_relu / shrink / hardmax
@pytest.mark.parametrize("alpha", [None, 0.0, 0.5, -1.0])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_thresholded_relu_vs_ort(rng, alpha, dtype):
    x = f32(rng, 3, 7, scale=2.0).astype(dtype)
    x[0, :3] = [0.5, 1.0, -1.0]  # exactly at the thresholds: not above them
    onnx_attrs = {} if alpha is None else {"alpha": alpha}
    vs_ort("thresholded_relu", [x], {"alpha": 1.0 if alpha is None else alpha}, "ThresholdedRelu",
           onnx_attrs=onnx_attrs, exact=True)
    import_vs_ort("ThresholdedRelu", [x], onnx_attrs, exact=True)


@pytest.mark.parametrize("attrs", [{}, {"bias": 0.25}, {"lambd": 1.0}, {"bias": 1.5, "lambd": 0.0}])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "int8"])
def test_shrink_vs_ort(rng, attrs, dtype):
    x = (rng.standard_normal((4, 6)) * 3).astype(dtype)
    x[0, :4] = [0.5, -0.5, 1.0, -1.0]  # the boundaries (integer types round them)
    full = {"bias": 0.0, "lambd": 0.5, **attrs}
    vs_ort("shrink", [x], full, "Shrink", onnx_attrs=attrs, exact=dtype != "float64")
    import_vs_ort("Shrink", [x], attrs)


@pytest.mark.parametrize("axis", [None, 0, 1, -1, -2])
def test_hardmax_vs_ort(rng, axis):
    x = rng.integers(0, 3, (3, 4, 5)).astype(np.float32)  # ties go to the first index
    onnx_attrs = {} if axis is None else {"axis": axis}
    vs_ort("hardmax", [x], {"axis": -1 if axis is None else axis}, "Hardmax", onnx_attrs=onnx_attrs, exact=True)
    import_vs_ort("Hardmax", [x], onnx_attrs, exact=True)


@pytest.mark.parametrize("opset", [11, 12])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
def test_hardmax_old_opsets_flatten(rng, opset, axis):
    x = rng.integers(0, 4, (2, 3, 4)).astype(np.float32)
    g = import_vs_ort("Hardmax", [x], {} if axis is None else {"axis": axis}, opset, exact=True)
    assert "hardmax" in [n.op for n in g.nodes]


def test_activation_errors(rng):
    op_error("thresholded_relu", [np.arange(3)], {}, r"^thresholded_relu: input must be a float tensor, got int64$")
    op_error("hardmax", [np.arange(3)], {}, r"^hardmax: input must be a float tensor, got int64$")
    op_error("hardmax", [f32(rng, 2, 3)], {"axis": 2}, r"^hardmax: axis 2 is out of range for rank 2$")


# ============================================================================ graphs of new ops serialise
SERIAL_CASES = [
    ("Trilu", lambda r: [f32(r, 3, 3), Const(np.array(1, np.int64))], {"upper": 0}),
    ("Einsum", lambda r: [f32(r, 2, 3), f32(r, 3, 4)], {"equation": "ij,jk->ik"}),
    ("CumSum", lambda r: [f32(r, 3, 4), Const(np.array(1, np.int64))], {"reverse": 1}),
    ("LRN", lambda r: [f32(r, 1, 4, 2, 2)], {"size": 3}),
    ("QuantizeLinear", lambda r: [f32(r, 2, 3), Const(np.float32([0.1, 0.2, 0.3])), Const(np.int8([0, 1, 2]))], {}),
    ("OneHot", lambda r: [np.array([0, 2], np.int64), Const(np.array(3, np.int64)), Const(np.float32([0, 1]))], {}),
    ("Shrink", lambda r: [f32(r, 2, 3)], {"bias": 0.5}),
]


@pytest.mark.parametrize("op_type,make,attrs", SERIAL_CASES, ids=[c[0] for c in SERIAL_CASES])
def test_imported_graphs_serialise(rng, op_type, make, attrs):
    model, feeds = one_node_model(op_type, make(rng), attrs, 1, OPSET)
    g = load_onnx(model.SerializeToString())
    doc, params = graph_to_json(g)
    g2 = graph_from_json(json.loads(json.dumps(doc)), params)
    assert_same(interpret(g2, feeds), interpret(g, feeds), exact=True)


# ============================================================================ host costing
HOST_CASES = [
    ("Trilu", lambda r: [f32(r, 4, 4)], {}),
    ("Einsum", lambda r: [f32(r, 2, 3, 4), f32(r, 2, 4, 5)], {"equation": "bij,bjk->bik"}),
    ("CumSum", lambda r: [f32(r, 3, 4), Const(np.array(0, np.int64))], {}),
    ("ArgMin", lambda r: [f32(r, 3, 4)], {"axis": 1}),
    ("Xor", lambda r: [r.random((3, 4)) > 0.5, r.random((3, 4)) > 0.5], {}),
    ("IsNaN", lambda r: [f32(r, 3, 4)], {}),
    ("IsInf", lambda r: [f32(r, 3, 4)], {"detect_negative": 0}),
    ("LRN", lambda r: [f32(r, 1, 4, 3, 3)], {"size": 3}),
    ("QuantizeLinear", lambda r: [f32(r, 3, 4), Const(np.float32(0.1)), Const(np.int8(0))], {}),
    ("DequantizeLinear", lambda r: [r.integers(0, 9, (3, 4)).astype(np.uint8), Const(np.float32(0.1))], {}),
    ("ScatterND", lambda r: [f32(r, 4, 3), np.array([[1], [1]], np.int64), f32(r, 2, 3)], {"reduction": "add"}),
    ("ScatterElements", lambda r: [f32(r, 4, 3), np.array([[1, 0]], np.int64), f32(r, 1, 2)], {"axis": 0}),
    ("OneHot", lambda r: [np.array([0, 2], np.int64), Const(np.array(3, np.int64)), Const(np.float32([0, 1]))], {}),
    ("ThresholdedRelu", lambda r: [f32(r, 3, 4)], {"alpha": 0.5}),
    ("Shrink", lambda r: [f32(r, 3, 4)], {}),
    ("Hardmax", lambda r: [f32(r, 3, 4)], {}),
]


@pytest.mark.parametrize("op_type,make,attrs", HOST_CASES, ids=[c[0] for c in HOST_CASES])
def test_host_model_costs_each_new_op(rng, op_type, make, attrs):
    model, _ = one_node_model(op_type, make(rng), attrs, 1, OPSET)
    (node,) = load_onnx(model.SerializeToString()).nodes
    assert_host_cost(node)
    c = op_cost(node)
    if node.op in ("trilu", "one_hot", "scatter_elements"):  # data movement (no reduction): no arithmetic
        assert c.flops == 0
    else:
        assert c.flops > 0
