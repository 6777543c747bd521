"""merge_composite: matches become calls to composite functions; numerics do not change."""
from __future__ import annotations

import numpy as np

from partition import Graph, interpret
from partition.byoc import merge_composite
from partition.patterns import PatternEntry, is_op, wildcard

from test_byoc_fixtures import acc_target, conv_block, inputs_for, nested_loop


def composites(g: Graph) -> dict[str, tuple[str, str]]:
    return {s: (f.attrs["Composite"], f.attrs["PartitionedFromPattern"]) for s, f in g.functions.items()}


def test_conv_bias_relu_blocks_become_two_composites():
    g = conv_block()
    ref = interpret(g, inputs_for(g))
    t = acc_target(patterns=["conv2d_bias_relu"])
    out = merge_composite(g, t)
    out.lint()
    assert [n.op for n in out.nodes] == ["call", "tanh", "call"]
    assert sorted(composites(out).values()) == [("acc.conv2d_bias_relu", "conv2d_bias_add_relu_"),
                                                ("acc.conv2d_bias_relu", "conv2d_relu_")]
    first = out.functions[out.nodes[0].attrs["callee"]]
    assert [p.shape for p in first.graph.inputs] == [(1, 3, 6, 6), (4, 3, 3, 3), (4,)]
    assert [v.name for v in out.nodes[0].inputs] == ["x", "w", "b"]  # weights passed from the host graph
    np.testing.assert_array_equal(interpret(out, inputs_for(g))[0], ref[0])


def test_higher_priority_entry_wins_then_lower_fills_in():
    g = conv_block()
    t = acc_target(patterns=["conv2d_bias", "conv2d_bias_relu"])
    out = merge_composite(g, t)
    assert sorted(c for c, _ in composites(out).values()) == ["acc.conv2d_bias_relu", "acc.conv2d_bias_relu"]
    g = conv_block()
    out = merge_composite(g, acc_target(patterns=["conv2d_bias"]))
    assert [n.op for n in out.nodes] == ["call", "relu", "tanh", "call", "relu"]


def test_no_overlap_and_longest_optional_form():
    # relu(add(relu(add(x, y)), y)): one entry add[+relu]; both adds fused, each with its own relu.
    g = Graph()
    x = g.add_input("x", (3,))
    y = g.add_input("y", (3,))
    a1 = g.add_node("add", [x, y], name="a1").output
    r1 = g.add_node("relu", [a1], name="r1").output
    a2 = g.add_node("add", [r1, y], name="a2").output
    r2 = g.add_node("relu", [a2], name="r2").output
    g.set_outputs([r2])
    p = is_op("add", wildcard(), wildcard()).optional(lambda q: is_op("relu", q))
    from partition.targets import Target
    t = Target("acc", lambda n: True, (PatternEntry("acc.add_relu", p, priority=2),))
    out = merge_composite(g, t)
    out.lint()
    assert [n.op for n in out.nodes] == ["call", "call"]
    assert sorted(f.attrs["PartitionedFromPattern"] for f in out.functions.values()) == ["add_relu_", "add_relu_"]


def test_shared_interior_is_not_fused():
    g = conv_block()
    relu = g.node_by_name("bias")  # bias_add output now also feeds a graph output
    g.set_outputs([*g.outputs, relu.output])
    out = merge_composite(g, acc_target(patterns=["conv2d_bias_relu", "conv2d_bias"]))
    out.lint()
    assert sorted(c for c, _ in composites(out).values()) == ["acc.conv2d_bias", "acc.conv2d_bias_relu"]
    assert "relu" in [n.op for n in out.nodes]


def test_composites_inside_loop_body_stay_in_the_body():
    g = nested_loop()
    ref = interpret(g, inputs_for(g))
    from partition.targets import Target
    p = is_op("mul", is_op("relu", wildcard()), wildcard())
    t = Target("acc", lambda n: True, (PatternEntry("acc.relu_mul", p, priority=2),))
    out = merge_composite(g, t)
    out.lint()
    body = out.node_by_name("lp").attrs["body"]
    assert [n.op for n in body.nodes] == ["call", "tanh"]
    assert list(body.functions) == ["composite_0"] and not out.functions
    np.testing.assert_array_equal(interpret(out, inputs_for(g))[0], ref[0])


def test_dtype_check_keeps_int_graphs_unfused():
    g = Graph()
    x = g.add_input("x", (2, 4), "int64")
    w = g.add_const(np.ones((3, 4), np.int64), "w")
    d = g.add_node("dense", [x, w]).output
    r = g.add_node("relu", [d]).output
    g.set_outputs([r])
    out = merge_composite(g, acc_target(patterns=["dense_relu"]))
    assert [n.op for n in out.nodes] == ["dense", "relu"]
    out = merge_composite(g, acc_target(patterns=["dense_relu"], dtypes=("float32", "int64")))
    assert [n.op for n in out.nodes] == ["call"]
