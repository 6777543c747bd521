"""Graphs named by their shape, shared by the BYOC pass tests, each with the partition it must get
for the ``acc`` test target (add, mul, sub, relu, conv2d, dense offloaded; exp and tanh stay on the
host). The expected regions are written by hand from the graph's shape, not from the code.

The tests in this file check only that every fixture is a valid graph that runs."""
from __future__ import annotations

import numpy as np
import pytest

from partition import Graph, interpret
from partition.targets import build_target

SHAPE = (2, 3)


def acc_target(**kw):
    kw.setdefault("prune_policy", "none")
    return build_target("acc", ("add", "mul", "sub", "relu", "conv2d", "dense", "reshape"),
                        kw.pop("patterns", ()), **kw)


def inputs_for(g: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.shape).astype(v.dtype) for v in g.inputs]


def region_sets(g: Graph) -> set[frozenset[str]]:
    """The node names of each region marked in ``g`` (top level only)."""
    by: dict[int, set[str]] = {}
    for n in g.nodes:
        if "region" in n.meta:
            by.setdefault(n.meta["region"], set()).add(n.name)
    return {frozenset(s) for s in by.values()}


def diamond_through_host() -> Graph:
    """a -> exp(host) -> d and a -> c -> d: {a, c} may merge, d may not join them."""
    g = Graph("diamond")
    x = g.add_input("x", SHAPE)
    a = g.add_node("relu", [x], name="a").output
    b = g.add_node("exp", [a], name="b").output
    c = g.add_node("mul", [a, a], name="c").output
    d = g.add_node("add", [b, c], name="d").output
    g.set_outputs([d])
    return g


DIAMOND_REGIONS = {frozenset({"a", "c"}), frozenset({"d"})}


def would_be_cycle() -> Graph:
    """A -> host -> B and A -> B: merging A and B would make the call depend on itself."""
    g = Graph("cycle")
    x = g.add_input("x", SHAPE)
    a = g.add_node("relu", [x], name="A").output
    h = g.add_node("exp", [a], name="host").output
    b = g.add_node("add", [a, h], name="B").output
    g.set_outputs([b])
    return g


CYCLE_REGIONS = {frozenset({"A"}), frozenset({"B"})}


def cycle_through_region() -> Graph:
    """a -> B is an edge; a reaches the region {c1, c2, k} through host h1, and the region reaches
    B through host h2. No node-level path leaves {a, B} and comes back, but once {c1, c2, k} is one
    call, a -> h1 -> call -> h2 -> B is one: a and B must stay apart."""
    g = Graph("cycle_region")
    x = g.add_input("x", SHAPE)
    y = g.add_input("y", SHAPE)
    a = g.add_node("relu", [x], name="a").output
    h1 = g.add_node("exp", [a], name="h1").output
    c1 = g.add_node("relu", [h1], name="c1").output
    c2 = g.add_node("relu", [y], name="c2").output
    k = g.add_node("add", [c1, c2], name="k").output
    h2 = g.add_node("exp", [c2], name="h2").output
    b = g.add_node("add", [a, h2], name="B").output
    g.set_outputs([k, b])
    return g


CYCLE_REGION_REGIONS = {frozenset({"a"}), frozenset({"c1", "c2", "k"}), frozenset({"B"})}


def multiple_producers() -> Graph:
    """Two independent supported producers feed one supported node: one region, two inputs."""
    g = Graph("producers")
    x = g.add_input("x", SHAPE)
    y = g.add_input("y", SHAPE)
    p1 = g.add_node("relu", [x], name="p1").output
    p2 = g.add_node("relu", [y], name="p2").output
    s = g.add_node("sub", [p1, p2], name="s").output
    g.set_outputs([s])
    return g


PRODUCERS_REGIONS = {frozenset({"p1", "p2", "s"})}


def multiple_outputs() -> Graph:
    """One region whose two values leave it: one to a host op, one as a graph output."""
    g = Graph("outputs")
    x = g.add_input("x", SHAPE)
    a = g.add_node("relu", [x], name="a").output
    b = g.add_node("mul", [a, a], name="b").output
    e = g.add_node("exp", [a], name="e").output
    g.set_outputs([e, b])
    return g


OUTPUTS_REGIONS = {frozenset({"a", "b"})}


def host_between_region_nodes() -> Graph:
    """Topological order a, h, b with a -> b and a -> h (host): the call replacing {a, b} must end up
    before h, which reads its output."""
    g = Graph("interleaved")
    x = g.add_input("x", SHAPE)
    a = g.add_node("relu", [x], name="a").output
    h = g.add_node("tanh", [a], name="h").output
    b = g.add_node("add", [a, x], name="b").output
    g.set_outputs([h, b])
    return g


def repeated_blocks(same_constant: bool = True) -> Graph:
    """relu(x + c) -> tanh -> relu(. + c'), twice the same block with a host op in between; with
    ``same_constant`` c' holds the same numbers as c (a different constant object)."""
    g = Graph("repeated")
    x = g.add_input("x", SHAPE)
    c = g.add_const(np.arange(6, dtype=np.float32).reshape(SHAPE), "c")
    c2 = g.add_const(np.arange(6, dtype=np.float32).reshape(SHAPE) + (0 if same_constant else 1), "c2")
    a1 = g.add_node("add", [x, c], name="add1").output
    r1 = g.add_node("relu", [a1], name="relu1").output
    t = g.add_node("tanh", [r1], name="t").output
    a2 = g.add_node("add", [t, c2], name="add2").output
    r2 = g.add_node("relu", [a2], name="relu2").output
    g.set_outputs([r2])
    return g


def _branch(name: str, op: str) -> Graph:
    b = Graph(name)
    v = b.add_input("v", SHAPE)
    r = b.add_node("relu", [v], name=f"{name}_relu").output
    o = b.add_node(op, [r, v], name=f"{name}_{op}").output
    b.set_outputs([o])
    return b


def nested_if() -> Graph:
    """An If (on the host) whose branches each hold a two-op supported chain."""
    g = Graph("nested_if")
    x = g.add_input("x", SHAPE)
    s = g.add_node("reduce_sum", [x], {"axes": None, "keepdims": False}, name="s").output
    zero = g.add_const(np.array(0.0, dtype=np.float32), "zero")
    cond = g.add_node("greater", [s, zero], name="cond").output
    pre = g.add_node("relu", [x], name="pre").output
    out = g.add_node("if", [cond, pre], {"then_branch": _branch("then", "add"),
                                         "else_branch": _branch("else", "mul")}, name="branch").output
    g.set_outputs([out])
    return g


def nested_loop() -> Graph:
    """A Loop carrying h for 3 trips; its body runs relu(h) * h (supported) and tanh (host)."""
    g = Graph("nested_loop")
    x = g.add_input("x", SHAPE)
    trip = g.add_const(np.array(3, dtype=np.int64), "trip")
    go = g.add_const(np.array(True), "go")
    body = Graph("body")
    body.add_input("i", (), "int64")
    cnd = body.add_input("cond", (), "bool")
    h = body.add_input("h", SHAPE)
    r = body.add_node("relu", [h], name="body_relu").output
    m = body.add_node("mul", [r, h], name="body_mul").output
    t = body.add_node("tanh", [m], name="body_tanh").output
    body.set_outputs([cnd, t])
    out = g.add_node("loop", [trip, go, x], {"body": body, "num_carried": 1}, name="lp").output
    g.set_outputs([out])
    return g


def conv_block() -> Graph:
    """conv2d + bias_add + relu, then tanh on the host and a second conv2d + bias + relu."""
    rng = np.random.default_rng(1)
    g = Graph("conv_block")
    x = g.add_input("x", (1, 3, 6, 6))
    w = g.add_const(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = g.add_const(rng.standard_normal(4).astype(np.float32), "b")
    c = g.add_node("conv2d", [x, w], {"pads": (1, 1, 1, 1)}, name="conv").output
    ba = g.add_node("bias_add", [c, b], {"axis": 1}, name="bias").output
    r = g.add_node("relu", [ba], name="relu").output
    t = g.add_node("tanh", [r], name="t").output
    w2 = g.add_const(rng.standard_normal((2, 4, 1, 1)).astype(np.float32), "w2")
    b2 = g.add_const(rng.standard_normal(2).astype(np.float32), "b2")
    c2 = g.add_node("conv2d", [t, w2, b2], name="conv2").output
    r2 = g.add_node("relu", [c2], name="relu2").output
    g.set_outputs([r2])
    return g


ALL = [diamond_through_host, would_be_cycle, cycle_through_region, multiple_producers, multiple_outputs,
       host_between_region_nodes, repeated_blocks, nested_if, nested_loop, conv_block]


@pytest.mark.parametrize("build", ALL, ids=lambda f: f.__name__)
def test_fixture_is_valid_and_runs(build):
    g = build()
    g.lint()
    outs = interpret(g, inputs_for(g))
    assert len(outs) == len(g.outputs)
    assert all(np.all(np.isfinite(o)) for o in outs)
