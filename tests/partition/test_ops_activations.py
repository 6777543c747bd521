"""Activations, min/max/mod, log-softmax and the extra reductions that PyTorch exporters emit
(PReLU, ELU, SELU, Softplus, Mish, clamp as Min/Max, LogSoftmax, ...): each op against a one-node
onnxruntime model, and the importer's variadic and opset-dependent forms against onnxruntime on
small multi-node models."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from partition import interpret, load_onnx
from partition.ops import OpError, op_cost
from test_onnx_import import _check_against_ort, _model, _vi
from test_ops import Const, check_vs_ort, run_op


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def f32(rng, *shape, scale=3.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


UNARY = [("softplus", "Softplus", {}, {}), ("softsign", "Softsign", {}, {}), ("mish", "Mish", {}, {}),
         ("sin", "Sin", {}, {}), ("cos", "Cos", {}, {}), ("floor", "Floor", {}, {}), ("ceil", "Ceil", {}, {}),
         ("round", "Round", {}, {}), ("sign", "Sign", {}, {}),
         ("elu", "Elu", {}, {}), ("elu", "Elu", {"alpha": 0.3}, {"alpha": 0.3}),
         ("selu", "Selu", {}, {}), ("selu", "Selu", {"alpha": 1.5, "gamma": 2.0}, {"alpha": 1.5, "gamma": 2.0}),
         ("celu", "Celu", {"alpha": 0.7}, {"alpha": 0.7})]


@pytest.mark.parametrize("op,onnx_op,attrs,onnx_attrs", UNARY)
def test_unary_vs_ort(rng, op, onnx_op, attrs, onnx_attrs):
    x = f32(rng, 2, 3, 19)
    x[0, 0, :4] = [0.5, 1.5, -2.5, 0.0]  # Round's half-to-even cases, Sign's zero
    check_vs_ort(op, [x], attrs, onnx_op, onnx_attrs=onnx_attrs)


def test_softplus_and_mish_do_not_overflow():
    x = np.array([-200, -30, 0, 30, 200], np.float32)
    for op in ("softplus", "mish"):
        y = run_op(op, [x])[0]
        assert np.all(np.isfinite(y))
        np.testing.assert_allclose(y[-1], 200.0, rtol=1e-6)


@pytest.mark.parametrize("op,onnx_op", [("min", "Min"), ("max", "Max")])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5))])
def test_min_max_vs_ort(rng, op, onnx_op, shapes):
    check_vs_ort(op, [f32(rng, *shapes[0]), f32(rng, *shapes[1])], {}, onnx_op, exact=True)


@pytest.mark.parametrize("fmod,dtype", [(0, np.int64), (1, np.int64), (1, np.float32), (0, np.int32)])
def test_mod_vs_ort(rng, fmod, dtype):
    a = (rng.standard_normal((4, 6)) * 20).astype(dtype)
    b = (rng.choice([-7, -3, 2, 5], size=(6,))).astype(dtype)
    check_vs_ort("mod", [a, b], {"fmod": fmod}, "Mod", onnx_attrs={"fmod": fmod}, exact=dtype != np.float32)


def test_clip_bounds_computed_at_run_time_vs_ort(rng):
    from partition import interpret, load_onnx
    from test_ops import one_node_model, ort_node
    x = (rng.standard_normal((3, 4)) * 3).astype(np.float32)
    for ins in ([x, np.array(-1.0, np.float32), np.array(0.5, np.float32)],
                [x, np.array(2.0, np.float32), np.array(-1.0, np.float32)],  # min > max: max everywhere
                [x, None, np.array(0.25, np.float32)], [x, np.array(0.0, np.float32)]):
        model, feeds = one_node_model("Clip", ins, opset=13)
        got = interpret(load_onnx(model.SerializeToString()), feeds)
        np.testing.assert_array_equal(got[0], ort_node("Clip", ins, opset=13)[0])


def test_mod_float_floor_against_the_formula(rng):
    # opset 28 defines float fmod=0 as A - floor(A / B) * B (the sign of the divisor)
    a = (rng.standard_normal((4, 6)) * 20).astype(np.float32)
    b = rng.choice([-7.5, -3.0, 2.25, 5.0], size=(6,)).astype(np.float32)
    want = a.astype(np.float64) - np.floor(a.astype(np.float64) / b) * b
    np.testing.assert_allclose(run_op("mod", [a, b], {"fmod": 0})[0], want, rtol=1e-5, atol=1e-5)


def test_mod_errors_name_the_problem():
    with pytest.raises(OpError, match="integer division by zero"):
        run_op("mod", [np.ones(3, np.int64), np.array([1, 0, 2])], {"fmod": 0})


@pytest.mark.parametrize("slope_shape", [(1,), (3, 1, 1), (1, 3, 1, 1), (5,)])
def test_prelu_vs_ort(rng, slope_shape):
    x = f32(rng, 2, 3, 4, 5)
    slope = rng.uniform(0.05, 0.5, slope_shape).astype(np.float32)
    check_vs_ort("prelu", [x, slope], {}, "PRelu", onnx_inputs=[x, Const(slope)])


def test_prelu_slope_must_broadcast_to_input():
    with pytest.raises(OpError, match="does not broadcast to input shape"):
        run_op("prelu", [np.ones((2, 3), np.float32), np.ones((2, 3, 4), np.float32)])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_log_softmax_vs_ort(rng, axis):
    check_vs_ort("log_softmax", [f32(rng, 3, 4, 7)], {"axis": axis}, "LogSoftmax", onnx_attrs={"axis": axis})


def test_log_softmax_stays_finite_where_softmax_underflows():
    x = np.array([[0.0, -200.0, 50.0]], np.float32)
    y = run_op("log_softmax", [x], {"axis": -1})[0]
    np.testing.assert_allclose(y, [[-50.0, -250.0, 0.0]], rtol=1e-6)


REDUCE = [("reduce_min", "ReduceMin"), ("reduce_prod", "ReduceProd"), ("reduce_l1", "ReduceL1"),
          ("reduce_l2", "ReduceL2"), ("reduce_sum_square", "ReduceSumSquare"),
          ("reduce_log_sum_exp", "ReduceLogSumExp")]


@pytest.mark.parametrize("op,onnx_op", REDUCE)
@pytest.mark.parametrize("axes,keep", [((1,), True), ((0, 2), False), (None, True)])
def test_reductions_vs_ort(rng, op, onnx_op, axes, keep):
    x = f32(rng, 3, 4, 5, scale=1.0)
    inputs = [x] if axes is None else [x, Const(np.array(axes, np.int64))]
    check_vs_ort(op, [x], {"axes": axes, "keepdims": keep}, onnx_op, onnx_inputs=inputs,
                 onnx_attrs={"keepdims": int(keep)}, opset=18)


def test_new_ops_have_flop_counts_for_host_costing():
    from partition import Graph
    g = Graph("g")
    x = g.add_input("x", (4, 8))
    for op, per_elem in (("mish", 17), ("elu", 7), ("log_softmax", 6)):
        node = g.add_node(op, [x], {"axis": -1} if op == "log_softmax" else {})
        assert op_cost(node).flops == 32 * per_elem


# ----------------------------------------------------------------------------- importer forms
@pytest.mark.parametrize("onnx_op", ["Min", "Max", "Sum", "Mean"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_variadic_ops_import_like_onnxruntime(onnx_op, n):
    names = [f"x{i}" for i in range(n)]
    shapes = [(2, 3, 4), (4,), (3, 1)][:n]
    model = _model([helper.make_node(onnx_op, names, ["y"])], [_vi(nm, s) for nm, s in zip(names, shapes)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    _check_against_ort(model)


@pytest.mark.parametrize("opset", [11, 13])
def test_log_softmax_before_opset_13_flattens_from_axis(opset):
    model = _model([helper.make_node("LogSoftmax", ["x"], ["y"], axis=1)], [_vi("x", (2, 3, 4))],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=opset)
    _check_against_ort(model)


def test_prelu_with_channel_slope_and_selu_chain_import():
    slope = numpy_helper.from_array(np.linspace(0.1, 0.4, 3, dtype=np.float32).reshape(3, 1, 1), "slope")
    nodes = [helper.make_node("PRelu", ["x", "slope"], ["p"]), helper.make_node("Selu", ["p"], ["s"]),
             helper.make_node("Elu", ["s"], ["e"], alpha=0.5), helper.make_node("Clip", ["e", "", "hi"], ["y"])]
    hi = numpy_helper.from_array(np.array(1.2, np.float32), "hi")
    model = _model(nodes, [_vi("x", (1, 3, 4, 4))], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   inits=[slope, hi])
    _check_against_ort(model)


@pytest.mark.parametrize("opset", [13, 18])
def test_reduce_l2_axes_as_attribute_or_input(opset):
    if opset < 18:
        node = helper.make_node("ReduceL2", ["x"], ["y"], axes=[1], keepdims=0)
        inits = []
    else:
        node = helper.make_node("ReduceL2", ["x", "axes"], ["y"], keepdims=0)
        inits = [numpy_helper.from_array(np.array([1], np.int64), "axes")]
    model = _model([node], [_vi("x", (2, 5, 3))], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   inits=inits, opset=opset)
    _check_against_ort(model)


def test_mod_import_keeps_fmod():
    nodes = [helper.make_node("Mod", ["a", "b"], ["y"], fmod=1)]
    model = _model(nodes, [_vi("a", (3, 4)), _vi("b", (4,))], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    g = load_onnx(model.SerializeToString())
    assert [n.attrs.get("fmod") for n in g.nodes] == [1]
    a = np.arange(-6, 6, dtype=np.float32).reshape(3, 4)
    b = np.array([4, -4, 3, -3], np.float32)
    np.testing.assert_array_equal(interpret(g, [a, b])[0], np.fmod(a, b))
