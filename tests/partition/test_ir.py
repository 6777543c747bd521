import numpy as np
import pytest

from partition import Function, Graph, IRError, TensorType, clone_graph

F32 = "float32"


def _t(*shape):
    return [TensorType(shape, F32)]


def _chain():
    g = Graph("chain")
    x = g.add_input("x", (2, 3))
    w = g.add_const(np.ones((3, 3), np.float32), "w")
    a = g.add_node("matmul", [x, w], out_types=_t(2, 3)).output
    b = g.add_node("relu", [a], out_types=_t(2, 3)).output
    c = g.add_node("add", [b, x], out_types=_t(2, 3)).output
    g.set_outputs([c])
    return g, x, w, a, b, c


def test_use_def_is_kept_by_construction():
    g, x, w, a, b, c = _chain()
    assert [n.op for n in x.users] == ["matmul", "add"]
    assert w.users[0].op == "matmul"
    assert a.producer.op == "matmul" and b.users[0] is c.producer
    g.lint()


def test_replace_all_uses_updates_both_sides_and_outputs():
    g, x, w, a, b, c = _chain()
    n = g.add_node("relu", [a], out_types=_t(2, 3))
    g.replace_all_uses(c, n.output)
    assert g.outputs == [n.output] and c.users == []
    g.toposort()
    g.lint()


def test_set_input_moves_exactly_one_use():
    g, x, w, a, b, c = _chain()
    add = c.producer
    g.set_input(add, 1, a)
    assert add.inputs == (b, a)
    assert x.users == [a.producer]
    assert a.users.count(add) == 1
    g.lint()


def test_erase_refuses_live_node_and_dce_removes_dead():
    g, x, w, a, b, c = _chain()
    with pytest.raises(IRError, match="still used"):
        g.erase_node(a.producer)
    dead = g.add_node("relu", [x], out_types=_t(2, 3))
    assert g.eliminate_dead_code() == 1
    assert dead not in g.nodes
    g.lint()


def test_lint_catches_stale_users_and_bad_order():
    g, x, w, a, b, c = _chain()
    x.users.append(b.producer)
    with pytest.raises(IRError, match="lists 3 users"):
        g.lint()
    g, *_ = _chain()
    g.nodes.reverse()
    with pytest.raises(IRError, match="before it is defined"):
        g.lint()


def test_toposort_restores_order_and_detects_cycles():
    g, *_ = _chain()
    g.nodes.reverse()
    g.toposort()
    g.lint()
    n0 = g.nodes[0]
    g.set_input(n0, 0, g.nodes[-1].output)  # matmul now reads the final add: a cycle
    with pytest.raises(IRError, match="cycle"):
        g.toposort()


def test_text_form_names_every_node_and_function():
    g, *_ = _chain()
    body = Graph("body")
    p = body.add_input("p", (2, 3))
    body.set_outputs([body.add_node("relu", [p], out_types=_t(2, 3)).output])
    g.functions["ext_0"] = Function(body, {"Compiler": "npu", "global_symbol": "ext_0"})
    text = str(g)
    for needle in ("graph chain(", "matmul(%x, %w)", "relu(", "def @ext_0(", "Compiler='npu'", "return %add"):
        assert needle in text


def test_clone_is_independent_and_keeps_names():
    g, *_ = _chain()
    g2 = clone_graph(g)
    g2.lint()
    assert str(g2) == str(g)
    g2.add_node("relu", [g2.outputs[0]], out_types=_t(2, 3))
    assert len(g.nodes) == 3


def test_negative_dims_rejected():
    with pytest.raises(IRError, match="negative"):
        TensorType((2, -1), "float32")


def test_rename_reuses_an_erased_name_but_refuses_a_live_one():
    g, x, w, a, b, c = _chain()
    n = g.add_node("relu", [b], out_types=_t(2, 3))
    g.replace_all_uses(c, n.output)
    g.erase_node(c.producer)
    g.rename(n.output, c.name)
    assert g.outputs[0].name == c.name
    with pytest.raises(IRError, match="in use"):
        g.rename(n.output, "x")
    g.lint()
