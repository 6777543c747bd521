"""annotate_target and the op-support combinators it is configured with."""
from __future__ import annotations


from partition import Graph
from partition.byoc import annotate_target, merge_composite
from partition.byoc.support import all_of, any_of, attr_is, dtype_in, max_rank, not_, op_in, static_size
from partition.targets import Target

from test_byoc_fixtures import acc_target, conv_block, diamond_through_host, nested_if


def small_graph():
    g = Graph()
    x = g.add_input("x", (2, 3))
    i = g.add_input("i", (2, 3), "int64")
    a = g.add_node("relu", [x], name="a")
    b = g.add_node("relu", [i], name="b")
    c = g.add_node("reshape", [x], {"shape": (6,)}, name="c")
    g.set_outputs([a.output, b.output, c.output])
    return g, a, b, c


def test_combinators():
    g, a, b, c = small_graph()
    assert op_in(["relu"])(a) and not op_in(["relu"])(c)
    assert dtype_in(["float32"])(a) and not dtype_in(["float32"])(b)
    assert max_rank(1)(c) is False and max_rank(2)(a)
    assert static_size(6)(a) and not static_size(5)(a)
    both = all_of(op_in(["relu"]), dtype_in(["float32"]))
    assert [both(n) for n in (a, b, c)] == [True, False, False]
    either = any_of(op_in(["reshape"]), dtype_in(["int64"]))
    assert [either(n) for n in (a, b, c)] == [False, True, True]
    assert [not_(either)(n) for n in (a, b, c)] == [True, False, False]
    only_flat = attr_is("reshape", "shape", [(6,)])
    assert only_flat(c) and only_flat(a)
    assert not attr_is("reshape", "shape", [(3, 2)])(c)


def test_annotate_marks_supported_nodes_only():
    g = annotate_target(diamond_through_host(), acc_target())
    assert {n.name: n.meta.get("target") for n in g.nodes} == {"a": "acc", "b": None, "c": "acc", "d": "acc"}


def test_annotate_clears_stale_marks():
    g = annotate_target(diamond_through_host(), acc_target())
    g = annotate_target(g, Target("other", lambda n: False))
    assert all("target" not in n.meta for n in g.nodes)


def test_control_flow_is_never_offloaded_but_bodies_are_annotated():
    g = annotate_target(nested_if(), Target("all", lambda n: True))
    br = g.node_by_name("branch")
    assert "target" not in br.meta
    assert all(n.meta.get("target") == "all" for n in br.attrs["then_branch"].nodes)
    assert g.node_by_name("cond").meta["target"] == "all"


def test_composite_calls_are_supported_by_construction():
    t = acc_target(patterns=["conv2d_bias_relu"])
    unsupported_ops = Target("acc", lambda n: False, t.patterns)
    g = annotate_target(merge_composite(conv_block(), unsupported_ops), unsupported_ops)
    assert [(n.op, n.meta.get("target")) for n in g.nodes] == [("call", "acc"), ("tanh", None), ("call", "acc")]
    # Another target's composites are not this target's to offload.
    g = annotate_target(g, Target("other", lambda n: n.op != "call"))
    assert [n.meta.get("target") for n in g.nodes] == [None, "other", None]
