"""Property: on random small DAGs of offloadable and host-only ops, partition_for gives a graph
that lints, has no cycle, offloads every supported node it did not keep on the host, and computes
exactly what the original computes."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partition import Graph, interpret
from partition.byoc import candidate_regions, partition_for
from partition.targets import build_target

SUPPORTED = ("add", "mul", "sub", "relu")
HOST = ("tanh", "sigmoid", "abs")
TARGET = build_target("acc", SUPPORTED, ("dense_bias_relu",), prune_policy="none")


@st.composite
def dags(draw):
    g = Graph("rand")
    vals = [g.add_input(f"x{i}", (2, 3)) for i in range(draw(st.integers(1, 3)))]
    for i in range(draw(st.integers(1, 14))):
        op = draw(st.sampled_from(SUPPORTED + HOST))
        a = vals[draw(st.integers(0, len(vals) - 1))]
        if op in ("add", "mul", "sub"):
            b = vals[draw(st.integers(0, len(vals) - 1))]
            vals.append(g.add_node(op, [a, b], name=f"n{i}").output)
        else:
            vals.append(g.add_node(op, [a], name=f"n{i}").output)
    unused = [v for v in vals[1:] if not v.users and v.producer is not None]
    extra = draw(st.lists(st.sampled_from(vals), max_size=2))
    g.set_outputs(list(dict.fromkeys(unused + [v for v in extra if v.producer is not None])) or [vals[-1]])
    return g


def _inputs(g: Graph, seed: int):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.shape).astype(np.float32) for v in g.inputs]


def _acyclic_calls(p: Graph) -> None:
    order = list(p.nodes)
    p.toposort()  # raises on a cycle
    assert [n.name for n in p.nodes] == [n.name for n in order]  # partition_graph left it sorted


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=dags(), seed=st.integers(0, 2 ** 16), keep_bits=st.integers(0, 2 ** 8 - 1))
def test_random_dag_partitions_soundly(g, seed, keep_bits):
    regions = candidate_regions(g, TARGET)
    keep = frozenset(r.id for r in regions if keep_bits >> (r.id % 8) & 1)
    before = str(g)
    p = partition_for(g, TARGET, keep_on_host=keep)
    assert str(g) == before
    p.lint()
    _acyclic_calls(p)
    kept_nodes = {name for r in regions if r.id in keep for name in r.nodes}
    for n in p.nodes:
        if n.op in SUPPORTED:
            assert n.name in kept_nodes, f"{n.name} ({n.op}) left on the host"
        if n.op in HOST:
            assert "region" not in n.meta
    ext_ops = [m.op for s, f in p.functions.items() for m in f.graph.nodes]
    assert not set(ext_ops) & set(HOST)
    x = _inputs(g, seed)
    for a, b in zip(interpret(p, x), interpret(g, x)):
        np.testing.assert_array_equal(a, b)
