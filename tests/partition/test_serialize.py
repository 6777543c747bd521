"""Graph <-> JSON round trips: text form, lint and interpreter outputs must survive, and the JSON
must be strict JSON (no NaN literals) that a non-Python reader can parse."""
import json
import math

import numpy as np
import pytest

from partition import Function, Graph, interpret
from partition.serialize import (SerializeError, decode_value, encode_value, graph_from_json,
                                 graph_hash, graph_to_json)

RNG = np.random.default_rng(0)


def _roundtrip(g: Graph) -> Graph:
    doc, params = graph_to_json(g)
    text = json.dumps(doc, allow_nan=False)  # strict JSON or this raises
    g2 = graph_from_json(json.loads(text), {k: np.array(a) for k, a in params.items()})
    g2.lint()
    assert str(g2) == str(g)
    return g2


def _assert_same_outputs(g, g2, inputs):
    for a, b in zip(interpret(g, inputs), interpret(g2, inputs), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- fixtures by shape
def conv_block() -> Graph:
    """conv2d + bias + relu -> pool -> flatten -> dense, with float64 and int constants kept apart."""
    g = Graph("conv_block")
    x = g.add_input("x", (1, 3, 8, 8))
    w = g.add_const(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = g.add_const(RNG.standard_normal(4).astype(np.float32), "b")
    y = g.add_node("conv2d", [x, w, b], {"strides": (1, 1), "pads": (1, 1, 1, 1), "dilations": (1, 1),
                                         "groups": 1}).output
    y = g.add_node("relu", [y]).output
    y = g.add_node("max_pool2d", [y], {"kernel": (2, 2), "strides": (2, 2), "ceil_mode": False}).output
    y = g.add_node("flatten", [y], {"axis": 1}).output
    wd = g.add_const(RNG.standard_normal((5, 64)).astype(np.float32), "wd")
    y = g.add_node("dense", [y, wd]).output
    y = g.add_node("clip", [y], {"min": None, "max": float("inf")}).output
    g.set_outputs([y])
    g.meta.update(source="test:conv_block", weights_stripped=False)
    return g


def control_flow() -> Graph:
    """If whose branches hold constants, and a Loop with a carried value, a scan output and an If
    nested in its body."""
    def branch(name, scale):
        br = Graph(name)
        v = br.add_input("v", (3,))
        c = br.add_const(np.full(3, scale, np.float32), "scale")
        br.set_outputs([br.add_node("mul", [v, c]).output])
        return br

    g = Graph("control")
    x = g.add_input("x", (3,))
    flag = g.add_input("flag", (), "bool")
    y = g.add_node("if", [flag, x], {"then_branch": branch("then", 2.0),
                                     "else_branch": branch("else", -1.0)}).output

    body = Graph("body")
    it = body.add_input("i", (), "int64")
    cond = body.add_input("cond", (), "bool")
    acc = body.add_input("acc", (3,))
    step = body.add_input("step", (3,))
    lim = body.add_const(np.array(2, np.int64), "lim")
    small = body.add_node("less", [it, lim]).output
    inner = body.add_node("if", [small, acc, step], {
        "then_branch": _adder("add_step"), "else_branch": _adder("sub_step", op="sub")}).output
    body.set_outputs([cond, inner, inner])

    trip = g.add_const(np.array(4, np.int64), "trip")
    true = g.add_const(np.array(True), "true")
    loop = g.add_node("loop", [trip, true, y, x], {"num_carried": 1, "body": body})
    g.set_outputs(list(loop.outputs))
    return g


def _adder(name, op="add"):
    g = Graph(name)
    a = g.add_input("a", (3,))
    b = g.add_input("b", (3,))
    g.set_outputs([g.add_node(op, [a, b]).output])
    return g


def with_functions() -> Graph:
    """An external function that calls a nested composite (with its own constant), called from the
    host graph and from inside an If branch (the callee is found in the outer scope)."""
    comp = Graph("comp")
    a = comp.add_input("a", (2, 4))
    w = comp.add_input("w", (4, 4))
    bias = comp.add_const(np.arange(4, dtype=np.float32), "bias")
    y = comp.add_node("matmul", [a, w]).output
    y = comp.add_node("add", [y, bias]).output
    comp.set_outputs([comp.add_node("relu", [y]).output])

    ext = Graph("npu_main_0")
    xa = ext.add_input("x", (2, 4))
    wc = ext.add_const(RNG.standard_normal((4, 4)).astype(np.float32), "w")
    ext.functions["npu.dense_bias_relu_0"] = Function(comp, {
        "Composite": "npu.dense_bias_relu", "PartitionedFromPattern": "matmul_add_relu_"})
    y = ext.add_node("call", [xa, wc], {"callee": "npu.dense_bias_relu_0"}).output
    ext.set_outputs([ext.add_node("sigmoid", [y]).output])

    g = Graph("host")
    g.functions["npu_main_0"] = Function(ext, {"Compiler": "npu", "global_symbol": "npu_main_0",
                                               "Primitive": 1, "Inline": False})
    x = g.add_input("x", (2, 4))
    flag = g.add_input("flag", (1,), "bool")
    c = g.add_node("call", [x], {"callee": "npu_main_0"})
    c.meta.update(target="npu", region=0, cost={"cycles": 120, "energy_j": 1.5e-9},
                  not_json=object(), fn=len)
    br_t = Graph("t")
    bx = br_t.add_input("bx", (2, 4))
    br_t.set_outputs([br_t.add_node("call", [bx], {"callee": "npu_main_0"}, functions=g.functions).output])
    br_e = Graph("e")
    ex = br_e.add_input("ex", (2, 4))
    br_e.set_outputs([br_e.add_node("neg", [ex]).output])
    z = g.add_node("if", [flag, c.output], {"then_branch": br_t, "else_branch": br_e}).output
    g.set_outputs([z, c.output])
    return g


# ----------------------------------------------------------------------------- round trips
def test_conv_block_round_trip_keeps_text_numbers_and_meta():
    g = conv_block()
    g2 = _roundtrip(g)
    assert g2.meta == g.meta
    _assert_same_outputs(g, g2, [RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)])
    clip = g2.node_by_name("clip")
    assert clip.attrs == {"min": None, "max": float("inf")}
    assert isinstance(g2.node_by_name("conv2d").attrs["pads"], tuple)


@pytest.mark.parametrize("flag", [True, False])
def test_control_flow_round_trip_runs_both_branches(flag):
    g = control_flow()
    g2 = _roundtrip(g)
    x = np.array([1.0, -2.0, 3.0], np.float32)
    _assert_same_outputs(g, g2, [x, np.array(flag)])
    # Hand-computed: y = 2x or -x; the loop adds x twice, subtracts x twice, scans each carry.
    y = x * 2 if flag else -x
    carried, scan = interpret(g2, [x, np.array(flag)])
    np.testing.assert_allclose(scan, np.stack([y + x, y + 2 * x, y + x, y]))
    np.testing.assert_allclose(carried, y)
    # The branch constants went to params, not inline, under distinct keys.
    doc, params = graph_to_json(g)
    assert sorted(params) == ["if.else_branch/scale", "if.then_branch/scale", "loop.body/lim", "trip", "true"]
    assert all(isinstance(a, np.ndarray) for a in params.values())
    assert doc["nodes"][0]["attrs"]["then_branch"]["$graph"]["constants"] == [
        {"name": "scale", "shape": [3], "dtype": "float32", "param": "if.then_branch/scale"}]


@pytest.mark.parametrize("flag", [True, False])
def test_functions_round_trip_with_nested_composite_and_meta(flag):
    g = with_functions()
    g2 = _roundtrip(g)
    _assert_same_outputs(g, g2, [RNG.standard_normal((2, 4)).astype(np.float32), np.array([flag])])
    ext = g2.functions["npu_main_0"]
    assert ext.attrs == {"Compiler": "npu", "global_symbol": "npu_main_0", "Primitive": 1, "Inline": False}
    assert type(ext.attrs["Inline"]) is bool and type(ext.attrs["Primitive"]) is int
    comp = ext.graph.functions["npu.dense_bias_relu_0"]
    assert comp.attrs["Composite"] == "npu.dense_bias_relu"
    meta = g2.node_by_name("call").meta
    # JSON-able entries survive exactly; the object and the builtin function are left out.
    assert meta == {"target": "npu", "region": 0, "cost": {"cycles": 120, "energy_j": 1.5e-9}}


def test_param_keys_are_stable_and_unique():
    doc1, p1 = graph_to_json(with_functions())
    doc2, p2 = graph_to_json(with_functions())
    assert list(p1) == list(p2)
    assert len(set(p1)) == len(p1) == 2  # the external's weight and the composite's bias
    assert "@npu_main_0/w" in p1 and "@npu_main_0/@npu.dense_bias_relu_0/bias" in p1


def test_float64_and_odd_constants_keep_their_dtype():
    g = Graph("consts")
    x = g.add_input("x", (2,), "float64")
    c64 = g.add_const(np.zeros(2), "c64")
    c64.data = np.array([1.5, -0.25])  # add_const narrows float64; a pass may still hold one
    c64.type = type(c64.type)((2,), "float64")
    scalar = g.add_const(np.array(7, np.int64), "k")
    empty = g.add_const(np.zeros((0, 3), np.float32), "empty")
    y = g.add_node("add", [x, c64]).output
    g.set_outputs([y, scalar, empty])
    g.lint()
    g2 = _roundtrip(g)
    assert g2.constants[0].data.dtype == np.float64
    _assert_same_outputs(g, g2, [np.array([1.0, 2.0])])


# ----------------------------------------------------------------------------- attribute encoding
@pytest.mark.parametrize("value", [
    None, True, False, 0, -3, 2 ** 62, 1.0, -0.5, 1e-300, "same", "", (), [], (1, 2), [1, 2],
    ((1, 2), [3, (4,)]), [None, True, 1.25], float("inf"), float("-inf"),
    np.int64(3), np.float32(0.1), np.bool_(True), {"a": (1, 2), "b": [None]},
])
def test_value_encoding_round_trips_exactly(value):
    j = json.loads(json.dumps(encode_value(value, "v"), allow_nan=False))
    back = decode_value(j, "v")
    assert repr(back) == repr(value) and type(back) is type(value)


def test_nan_round_trips():
    back = decode_value(json.loads(json.dumps(encode_value(float("nan"), "v"))), "v")
    assert isinstance(back, float) and math.isnan(back)


def test_tuple_is_a_json_array_and_list_is_tagged():
    assert encode_value((1, 2), "v") == [1, 2]
    assert encode_value([1, 2], "v") == {"$list": [1, 2]}
    assert encode_value(float("-inf"), "v") == {"$float": "-inf"}


def test_numpy_array_attr_is_refused_naming_node_and_attr():
    g = Graph("bad")
    x = g.add_input("x", (2,))
    n = g.add_node("relu", [x])
    n.attrs["table"] = np.zeros(3)
    g.set_outputs([n.output])
    with pytest.raises(SerializeError, match=r"node 'relu' attr table: numpy array attributes are not allowed"):
        graph_to_json(g)


def test_object_constant_is_refused():
    g = Graph("bad")
    c = g.add_const(np.zeros(2, np.float32), "c")
    c.data = np.array([None, 1], dtype=object)
    g.set_outputs([c])
    with pytest.raises(SerializeError, match="dtype object"):
        graph_to_json(g)


# ----------------------------------------------------------------------------- malformed documents
def _doc():
    return graph_to_json(conv_block())


def test_missing_param_is_named():
    doc, params = _doc()
    params.pop("wd")
    with pytest.raises(SerializeError, match=r"constant 'wd' refers to param 'wd', which is missing"):
        graph_from_json(doc, params)


def test_param_with_wrong_shape_is_named():
    doc, params = _doc()
    params["b"] = np.zeros(5, np.float32)
    with pytest.raises(SerializeError, match=r"constant 'b' is declared float32\[4\].*float32\[5\]"):
        graph_from_json(doc, params)


def test_undefined_input_is_named():
    doc, params = _doc()
    doc["nodes"][1]["inputs"] = ["nowhere"]
    with pytest.raises(SerializeError, match=r"node 'relu': input \"nowhere\" is not defined"):
        graph_from_json(doc, params)


def test_unknown_tag_and_bad_dtype_are_named():
    doc, params = _doc()
    doc["nodes"][0]["attrs"]["strides"] = {"$set": [1]}
    with pytest.raises(SerializeError, match=r"node 'conv2d' attr strides: expected a JSON value"):
        graph_from_json(doc, params)
    doc, params = _doc()
    doc["inputs"][0]["dtype"] = "object"
    with pytest.raises(SerializeError, match=r"input 0 \(x\).*not a plain numpy dtype"):
        graph_from_json(doc, params)


def test_missing_field_is_named():
    doc, params = _doc()
    del doc["nodes"][2]["outputs"]
    with pytest.raises(SerializeError, match=r"node 2: missing field\(s\) outputs"):
        graph_from_json(doc, params)


# ----------------------------------------------------------------------------- hashing
def test_graph_hash_tracks_structure_and_weights_not_object_identity():
    h = graph_hash(_fixed_block())
    assert h == graph_hash(_fixed_block())
    assert len(h) == 64 and int(h, 16) >= 0
    g = _fixed_block()
    g.node_by_name("conv2d").attrs["strides"] = (1, 1)  # same value, new object
    assert graph_hash(g) == h
    g.constants[0].data = g.constants[0].data.copy()
    g.constants[0].data[0, 0, 0, 0] += 1
    assert graph_hash(g) != h
    g = _fixed_block()
    g.node_by_name("max_pool2d").attrs["ceil_mode"] = True
    assert graph_hash(g) != h


def _fixed_block():
    global RNG
    saved, RNG = RNG, np.random.default_rng(42)
    try:
        return conv_block()
    finally:
        RNG = saved
