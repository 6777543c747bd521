"""Graph costing of control flow (``tuner.costing.graph_cost``): a loop body once per trip, of an if
the branch a constant condition takes, else the slower one, never both. The expected costs are
sums of ``host_op_cost`` over the nodes, computed here apart from the walk."""
from __future__ import annotations

import numpy as np
import pytest

import sim
from partition.builder import GraphBuilder
from partition.ops import branch_work, subgraph_runs
from tuner.costing import CostOptions, KernelCoster, graph_cost, host_op_cost

OPTS = CostOptions(fidelity="analytical")
HW = sim.load_hw("edge-npu")
X = (16, 64)


def _branches(seed: int, heavy_then: bool = True):
    """One branch two denses and a tanh (costly), the other one scale (cheap)."""
    hb = GraphBuilder("heavy", seed)
    t = hb.input("v", X)
    heavy = hb.finish([hb.tanh(hb.dense(hb.dense(t, X[1], name="d0"), X[1], name="d1"), name="t")])
    lb = GraphBuilder("light", seed)
    e = lb.input("v", X)
    light = lb.finish([lb.mul(e, lb.const(np.float32(0.5), "half"), name="m")])
    return (heavy, light) if heavy_then else (light, heavy)


def if_graph(cond_const: bool | None, heavy_then: bool = True):
    """x -> relu -> if(cond) -> exp; ``cond`` a graph input, or a constant."""
    b = GraphBuilder("branchy", 0)
    x = b.input("x", X)
    cond = b.input("c", (), "bool") if cond_const is None else b.const(np.array(cond_const), "c")
    then_g, else_g = _branches(0, heavy_then)
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


@pytest.mark.parametrize("heavy_then", [True, False])
def test_an_if_on_a_run_time_condition_counts_its_slower_branch_once(heavy_then):
    g = if_graph(None, heavy_then)
    node = next(n for n in g.nodes if n.op == "if")
    then_s, else_s = (host_s(node.attrs[k]) for k in ("then_branch", "else_branch"))
    assert max(then_s, else_s) > 5 * min(then_s, else_s) > 0   # a sum or a mean would not match
    assert cost(g).host_s == pytest.approx(host_s(g) + max(then_s, else_s), rel=1e-12)
    heavy = "then_branch" if heavy_then else "else_branch"
    assert branch_work(node.attrs[heavy]) > branch_work(node.attrs["else_branch" if heavy_then else "then_branch"])


@pytest.mark.parametrize("taken", [True, False])
def test_an_if_on_a_constant_condition_counts_the_branch_it_takes(taken):
    g = if_graph(taken)
    node = next(n for n in g.nodes if n.op == "if")
    key = "then_branch" if taken else "else_branch"
    assert subgraph_runs(node) == {key: 1.0, "else_branch" if taken else "then_branch": 0.0}
    assert cost(g).host_s == pytest.approx(host_s(g) + host_s(node.attrs[key]), rel=1e-12)


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_an_if_in_a_loop_counts_its_slower_branch_on_each_trip(trips):
    g = loop_of_if(trips)
    loop = next(n for n in g.nodes if n.op == "loop")
    body = loop.attrs["body"]
    node = next(n for n in body.nodes if n.op == "if")
    branch = max(host_s(node.attrs["then_branch"]), host_s(node.attrs["else_branch"]))
    assert cost(g).host_s == pytest.approx(host_s(g) + trips * (host_s(body) + branch), rel=1e-12)
