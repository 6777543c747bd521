"""partition_graph: regions become external functions called from the host."""
from __future__ import annotations

import numpy as np

from partition import interpret
from partition.byoc import (annotate_target, merge_composite, merge_compiler_regions, partition_graph)

from test_byoc_fixtures import (acc_target, conv_block, cycle_through_region, host_between_region_nodes,
                                inputs_for, multiple_outputs, nested_if, nested_loop, repeated_blocks)


def outline(g, target=None, keep=frozenset()):
    t = target or acc_target()
    ref = interpret(g, inputs_for(g))
    g = merge_compiler_regions(annotate_target(merge_composite(g, t), t), t, keep_on_host=keep)
    out = partition_graph(g, t)
    out.lint()
    for a, b in zip(interpret(out, inputs_for(out)), ref):
        np.testing.assert_array_equal(a, b)
    return out


def externals(g):
    return {s: f for s, f in g.functions.items() if "Compiler" in f.attrs}


def test_external_function_attrs_and_activation_only_params():
    g = outline(conv_block(), acc_target(patterns=["conv2d_bias_relu"]))
    ext = externals(g)
    assert list(ext) == ["acc_main_0", "acc_main_1"]
    for sym, f in ext.items():
        assert f.attrs == {"Compiler": "acc", "global_symbol": sym, "Primitive": 1}
        assert len(f.graph.inputs) == 1                      # weights moved inside
        assert len(f.graph.constants) == 2
        (call,) = f.graph.nodes
        assert f.graph.functions[call.attrs["callee"]].attrs["Composite"] == "acc.conv2d_bias_relu"
    assert [n.op for n in g.nodes] == ["call", "tanh", "call"]
    assert g.constants == []                                 # the host keeps no weights
    assert not [s for s, f in g.functions.items() if "Composite" in f.attrs]


def test_multiple_outputs_leave_through_one_call():
    g = outline(multiple_outputs())
    call = g.nodes[0]
    assert call.op == "call" and len(call.outputs) == 2
    assert [n.op for n in g.nodes] == ["call", "exp"]


def test_host_node_between_region_nodes_is_moved_after_the_call():
    g = outline(host_between_region_nodes())
    assert [n.op for n in g.nodes] == ["call", "tanh"]


def test_cycle_fixture_outlines_into_three_calls():
    g = outline(cycle_through_region())
    assert [n.op for n in g.nodes].count("call") == 3
    assert sorted(n.op for n in g.nodes if n.op != "call") == ["exp", "exp"]


def test_identical_regions_share_one_function():
    g = outline(repeated_blocks(same_constant=True))
    assert list(externals(g)) == ["acc_main_0"]
    assert [n.attrs.get("callee") for n in g.nodes] == ["acc_main_0", None, "acc_main_0"]


def test_different_constants_do_not_share():
    g = outline(repeated_blocks(same_constant=False))
    assert list(externals(g)) == ["acc_main_0", "acc_main_1"]


def test_sharing_can_be_turned_off():
    g = outline(repeated_blocks(same_constant=True), acc_target(share_identical_functions=False))
    assert list(externals(g)) == ["acc_main_0", "acc_main_1"]


def test_if_branches_call_module_level_functions():
    g = outline(nested_if())
    br = g.node_by_name("branch")
    assert "region" not in br.meta and br.op == "if"
    for key in ("then_branch", "else_branch"):
        body = br.attrs[key]
        (call,) = body.nodes
        assert call.op == "call" and call.attrs["callee"] in externals(g)
        assert body.functions == {}
    assert len(externals(g)) == 3


def test_loop_body_is_partitioned_and_the_loop_stays():
    g = outline(nested_loop())
    body = g.node_by_name("lp").attrs["body"]
    assert [n.op for n in body.nodes] == ["call", "tanh"]
    assert g.node_by_name("lp").op == "loop"


def test_composites_of_a_region_kept_on_host_are_inlined():
    t = acc_target(patterns=["conv2d_bias_relu"])
    g = outline(conv_block(), t, keep=frozenset({0}))
    assert [n.op for n in g.nodes] == ["conv2d", "bias_add", "relu", "tanh", "call"]
    assert list(g.functions) == ["acc_main_0"]
    assert {c.name for c in g.constants} == {"w", "b"}
