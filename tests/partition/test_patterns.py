"""The pattern language: each combinator against hand-built graphs, the interior-use rule,
backtracking, and the pattern-table factories."""
from __future__ import annotations

import numpy as np
import pytest

from partition import Graph
from partition.patterns import (ACTIVATIONS, PatternEntry, PatternError, by_priority, is_const, is_op,
                                make_conv2d_pattern, make_dense_pattern, make_matmul_pattern,
                                make_pattern_table, match, pattern_names, wildcard)


def chain():
    g = Graph()
    x = g.add_input("x", (1, 4))
    w = g.add_const(np.ones((3, 4), np.float32), "w")
    b = g.add_const(np.ones(3, np.float32), "b")
    d = g.add_node("dense", [x, w], name="d").output
    a = g.add_node("add", [d, b], name="a").output
    r = g.add_node("relu", [a], name="r").output
    g.set_outputs([r])
    return g, x, w, b, d, a, r


def test_is_op_matches_op_and_arity():
    g, x, w, b, d, a, r = chain()
    assert match(is_op("relu", wildcard()), r) is not None
    assert match(is_op("tanh", wildcard()), r) is None
    assert match(is_op("relu", wildcard(), wildcard()), r) is None  # relu has one input
    assert match(is_op("dense"), d).inputs == (x, w)                 # no input patterns: any inputs


def test_match_reports_nodes_in_order_inputs_and_chain():
    g, x, w, b, d, a, r = chain()
    p = is_op("relu", is_op("add", is_op("dense", wildcard(), is_const()), is_const()))
    m = match(p, r)
    assert [n.name for n in m.nodes] == ["d", "a", "r"]
    assert m.inputs == (x, w, b)
    assert m.root is r
    assert m.op_chain == "dense_add_relu_"


def test_is_const_rejects_activations():
    g, x, w, b, d, a, r = chain()
    assert match(is_op("dense", is_const(), wildcard()), d) is None
    assert match(is_op("dense", wildcard(), is_const()), d) is not None


def test_alternatives_backtrack_into_later_options():
    g, x, w, b, d, a, r = chain()
    inner = is_op("add", wildcard(), wildcard()) | is_op("dense", wildcard(), wildcard())
    # The first option of ``inner`` matches nothing at d; the second does.
    assert match(is_op("add", inner, is_const()), a) is not None

def test_alternative_is_revisited_when_a_later_sibling_fails():
    g = Graph()
    x = g.add_input("x", (2,))
    y = g.add_input("y", (2,))
    s = g.add_node("add", [x, y]).output
    m = g.add_node("mul", [s, y]).output
    v = wildcard()
    # add(v, _) first binds v = x, then mul's second operand y != x: the matcher must go back and
    # try add(_, v), which binds v = y.
    p = is_op("mul", is_op("add", v, wildcard()) | is_op("add", wildcard(), v), v)
    got = match(p, m)
    assert got is not None and got.inputs == (x, y)


def test_same_pattern_object_must_bind_same_value():
    g = Graph()
    x = g.add_input("x", (2,))
    y = g.add_input("y", (2,))
    sq = g.add_node("mul", [x, x]).output
    xy = g.add_node("mul", [x, y]).output
    v = wildcard()
    assert match(is_op("mul", v, v), sq) is not None
    assert match(is_op("mul", v, v), xy) is None
    assert match(is_op("mul", wildcard(), wildcard()), xy) is not None


def test_optional_prefers_longer_form():
    g, x, w, b, d, a, r = chain()
    p = is_op("add", is_op("dense", wildcard(), wildcard()), wildcard()).optional(lambda q: is_op("relu", q))
    assert [n.op for n in match(p, r).nodes] == ["dense", "add", "relu"]
    assert [n.op for n in match(p, a).nodes] == ["dense", "add"]


def test_interior_node_used_outside_is_not_matched():
    g, x, w, b, d, a, r = chain()
    g.add_node("tanh", [a], name="leak")  # a now has a user outside relu(add(...))
    p = is_op("relu", is_op("add", wildcard(), wildcard()))
    assert match(p, r) is None
    assert match(is_op("add", wildcard(), wildcard()), a) is not None  # the root may be used anywhere


def test_interior_graph_output_is_not_matched():
    g, x, w, b, d, a, r = chain()
    g.set_outputs([r, a])
    assert match(is_op("relu", is_op("add", wildcard(), wildcard())), r, g.outputs) is None
    assert match(is_op("relu", is_op("add", wildcard(), wildcard())), r) is not None


def test_leaf_computed_inside_the_match_is_rejected():
    g = Graph()
    x = g.add_input("x", (2,))
    e = g.add_node("exp", [x]).output
    s = g.add_node("add", [e, e]).output
    # The second wildcard would bind exp's output, which the match itself computes.
    assert match(is_op("add", is_op("exp", wildcard()), wildcard()), s) is None
    e_p = is_op("exp", wildcard())
    assert [n.op for n in match(is_op("add", e_p, e_p), s).nodes] == ["exp", "add"]


def test_has_attr_shape_dtype_where_and_named():
    g = Graph()
    x = g.add_input("x", (1, 2, 5, 5))
    w = g.add_const(np.ones((2, 1, 3, 3), np.float32), "w")
    c = g.add_node("conv2d", [x, w], {"groups": 2, "pads": [1, 1, 1, 1]}).output
    assert match(is_op("conv2d").has_attr("groups", 2), c)
    assert not match(is_op("conv2d").has_attr("groups", 1), c)
    assert match(is_op("conv2d").has_attr("pads", (1, 1, 1, 1)), c)  # lists compare as tuples
    assert not match(is_op("conv2d").has_attr("strides", (1, 1)), c)
    assert match(is_op("conv2d").has_attr("strides", (1, 1), default=(1, 1)), c)
    assert match(is_op("conv2d").has_shape((1, 2, None, 5)), c)
    assert not match(is_op("conv2d").has_shape((1, 2, 5)), c)
    assert match(is_op("conv2d").has_dtype("float32"), c)
    assert not match(is_op("conv2d").has_dtype("int64"), c)
    assert match(is_op("conv2d", wildcard().where(lambda v: v.shape[1] == 2), wildcard()), c)
    assert not match(is_op("conv2d", wildcard().where(lambda v: v.shape[1] == 3), wildcard()), c)
    m = match(is_op("conv2d", wildcard().named("data"), is_const().named("weight")).named("out"), c)
    assert m.bindings == {"data": x, "weight": w, "out": c}


def test_is_op_rejects_non_patterns():
    with pytest.raises(PatternError, match="not a pattern"):
        is_op("relu", "x")
    with pytest.raises(PatternError, match="op name"):
        is_op("")


# ------------------------------------------------------------------------------ factories
def conv_graph(bias_form: str, act: str | None = "relu", bias_shape=(4,), residual: bool = False):
    g = Graph()
    x = g.add_input("x", (1, 3, 5, 5))
    w = g.add_const(np.ones((4, 3, 3, 3), np.float32), "w")
    b = g.add_const(np.ones(bias_shape, np.float32), "b")
    if bias_form == "input":
        v = g.add_node("conv2d", [x, w, b], {"pads": (1, 1, 1, 1)}).output
    else:
        v = g.add_node("conv2d", [x, w], {"pads": (1, 1, 1, 1)}).output
        if bias_form == "bias_add":
            v = g.add_node("bias_add", [v, b], {"axis": 1}).output
        elif bias_form == "add":
            v = g.add_node("add", [v, b]).output
        elif bias_form == "add_rev":
            v = g.add_node("add", [b, v]).output
    if residual:
        r = g.add_input("r", (1, 4, 5, 5))
        v = g.add_node("add", [v, r]).output
    if act:
        v = g.add_node(act, [v]).output
    g.set_outputs([v])
    return g, v


def accepts(entry: PatternEntry, v) -> bool:
    m = match(entry.pattern, v)
    return m is not None and entry.check(m)


@pytest.mark.parametrize("form, shape", [("input", (4,)), ("bias_add", (4,)), ("add", (1, 4, 1, 1)),
                                         ("add_rev", (4, 1, 1))])
def test_conv2d_bias_relu_matches_every_bias_spelling(form, shape):
    e = make_conv2d_pattern("npu", with_bias=True, activation="relu")
    assert e.name == "npu.conv2d_bias_relu"
    g, v = conv_graph(form, "relu", shape)
    assert accepts(e, v)
    assert not accepts(make_conv2d_pattern("npu", with_bias=True, activation="relu6"), v)


@pytest.mark.parametrize("shape", [(5,), (1, 1, 1, 5), (1, 4, 5, 5)])
def test_conv2d_bias_check_rejects_non_channel_bias(shape):
    e = make_conv2d_pattern("npu", with_bias=True, activation="relu")
    g, v = conv_graph("add", "relu", shape)
    assert match(e.pattern, v) is not None and not e.check(match(e.pattern, v))


def test_residual_pattern_and_its_shape_check():
    e = make_conv2d_pattern("npu", with_bias=True, activation="relu", residual=True)
    g, v = conv_graph("input", "relu", residual=True)
    assert accepts(e, v)
    assert e.priority == 4
    g, v = conv_graph("input", "relu", residual=False)
    assert not accepts(e, v)


def test_dense_and_matmul_factories():
    g, x, w, b, d, a, r = chain()
    assert accepts(make_dense_pattern("t", True, "relu"), r)
    assert not accepts(make_matmul_pattern("t", True, "relu"), r)
    g2 = Graph()
    p = g2.add_input("p", (2, 8, 4))
    q = g2.add_input("q", (2, 4, 3))
    bias = g2.add_const(np.ones(3, np.float32), "bias")
    mm = g2.add_node("matmul", [p, q]).output
    s = g2.add_node("add", [mm, bias]).output
    ge = g2.add_node("gelu", [s]).output
    assert accepts(make_matmul_pattern("t", True, "gelu"), ge)
    assert not accepts(make_matmul_pattern("t", False, "gelu"), ge)


def test_pattern_names_round_trip_through_table():
    names = pattern_names()
    assert len(names) == len(set(names))
    assert {"conv2d_bias_relu", "dense_bias_gelu", "conv2d_bn_relu6", "conv2d_bias_residual_relu",
            "matmul_bias", "batch_matmul", "gemm_bias_hard_swish"} <= set(names)
    table = make_pattern_table("npu", names)
    assert sorted(e.name for e in table) == sorted(f"npu.{n}" for n in names)
    assert [e.priority for e in table] == sorted((e.priority for e in table), reverse=True)
    assert all(n.split("_")[-1] != "bn" or n.startswith("conv2d") for n in names)
    for act in ACTIVATIONS:
        assert f"dense_bias_{act}" in names


@pytest.mark.parametrize("bad", ["conv3d_relu", "dense_bias_swish", "dense_bn", "conv2d_relu_bias"])
def test_unknown_pattern_name_is_one_clear_error(bad):
    with pytest.raises(PatternError, match=f"unknown pattern name '{bad}'"):
        make_pattern_table("npu", [bad])


def test_by_priority_is_stable():
    p = wildcard()
    t = [PatternEntry("t.a", p, priority=1), PatternEntry("t.b", p, priority=3), PatternEntry("t.c", p, priority=1)]
    assert [e.name for e in by_priority(t)] == ["t.b", "t.a", "t.c"]
