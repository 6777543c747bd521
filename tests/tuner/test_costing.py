"""Graph costing of control flow (``tuner.costing.graph_cost``): a loop body once per trip, an if
branch half the if's runs, all of them when the condition is a constant. The expected costs are
sums of ``host_op_cost`` over the nodes, computed here apart from the walk."""
from __future__ import annotations

import numpy as np
import pytest

import sim
from partition.builder import GraphBuilder
from partition.ops import subgraph_runs
from tuner.costing import CostOptions, KernelCoster, graph_cost, host_op_cost

OPTS = CostOptions(fidelity="analytical")
HW = sim.load_hw("edge-npu")
X = (16, 64)


def _branches(seed: int):
    """then: two denses and a tanh (costly); else: one scale (cheap)."""
    tb = GraphBuilder("then", seed)
    t = tb.input("v", X)
    then_g = tb.finish([tb.tanh(tb.dense(tb.dense(t, X[1], name="d0"), X[1], name="d1"), name="t")])
    eb = GraphBuilder("else", seed)
    e = eb.input("v", X)
    else_g = eb.finish([eb.mul(e, eb.const(np.float32(0.5), "half"), name="m")])
    return then_g, else_g


def if_graph(cond_const: bool | None):
    """x -> relu -> if(cond) -> exp; ``cond`` a graph input, or a constant."""
    b = GraphBuilder("branchy", 0)
    x = b.input("x", X)
    cond = b.input("c", (), "bool") if cond_const is None else b.const(np.array(cond_const), "c")
    then_g, else_g = _branches(0)
    y = b.op("if", [cond, b.relu(x, name="r")], {"then_branch": then_g, "else_branch": else_g}, name="choose")
    return b.finish([b.exp(y, name="e")])


def loop_of_if(trips: int):
    """A loop of ``trips`` whose body chooses by its iteration number (known only at run time)."""
    body = GraphBuilder("body", 0)
    it = body.input("iter", (), "int64")
    go = body.input("cond", (), "bool")
    h = body.input("h", X)
    then_g, else_g = _branches(1)
    first = body.less(it, body.const(np.int64(1), "one"), name="first")
    z = body.op("if", [first, h], {"then_branch": then_g, "else_branch": else_g}, name="choose")
    body_g = body.finish([go, z])
    b = GraphBuilder("looped", 0)
    x = b.input("x", X)
    out = b.op("loop", [b.const(np.int64(trips), "n"), b.const(np.array(True), "go"), x],
               {"body": body_g, "num_carried": 1}, name="loop")
    return b.finish([out])


def host_s(g) -> float:
    """The host seconds of one run of every node of ``g`` (its own level only)."""
    return sum(host_op_cost(n, HW, OPTS).host_s for n in g.nodes)


def cost(g):
    return graph_cost(g, KernelCoster(HW, opts=OPTS), OPTS).total


def test_an_if_on_a_run_time_condition_counts_each_branch_half():
    g = if_graph(None)
    node = next(n for n in g.nodes if n.op == "if")
    then_s, else_s = (host_s(node.attrs[k]) for k in ("then_branch", "else_branch"))
    assert then_s > 5 * else_s > 0       # the branches differ: a sum or a max would not match
    assert cost(g).host_s == pytest.approx(host_s(g) + 0.5 * then_s + 0.5 * else_s, rel=1e-12)


@pytest.mark.parametrize("taken", [True, False])
def test_an_if_on_a_constant_condition_counts_the_branch_it_takes(taken):
    g = if_graph(taken)
    node = next(n for n in g.nodes if n.op == "if")
    key = "then_branch" if taken else "else_branch"
    assert subgraph_runs(node, key) == 1.0 and subgraph_runs(node, "else_branch" if taken else "then_branch") == 0.0
    assert cost(g).host_s == pytest.approx(host_s(g) + host_s(node.attrs[key]), rel=1e-12)


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_an_if_in_a_loop_counts_half_of_each_trip(trips):
    g = loop_of_if(trips)
    loop = next(n for n in g.nodes if n.op == "loop")
    body = loop.attrs["body"]
    node = next(n for n in body.nodes if n.op == "if")
    branches = 0.5 * (host_s(node.attrs["then_branch"]) + host_s(node.attrs["else_branch"]))
    assert cost(g).host_s == pytest.approx(host_s(g) + trips * (host_s(body) + branches), rel=1e-12)
