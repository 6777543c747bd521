"""Size and work of a graph: nodes, parameters and MACs, sub-graphs and functions included."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..ir import Function, Graph
from ..ops import loop_trip_bound, op_cost


@dataclass(frozen=True)
class ModelStats:
    nodes: int   # every node, those inside If/Loop bodies and functions included
    params: int  # elements of floating-point constants (weights)
    macs: int    # multiply-accumulates of one run (loop bodies times the trip bound)


def count_nodes(graph: Graph) -> int:
    return sum(1 for _ in graph.walk())


def count_params(graph: Graph) -> int:
    total = sum(c.type.size for c in graph.constants if np.dtype(c.dtype).kind == "f")
    for n in graph.nodes:
        total += sum(count_params(sg) for sg in n.subgraphs())
    return total + sum(count_params(fn.graph) for fn in graph.functions.values())


def count_macs(graph: Graph, functions: Mapping[str, Function] | None = None) -> int:
    """MACs by ``partition.ops.op_cost``. A loop counts its body once per iteration of its (constant)
    trip bound and an if its costlier branch, so the figure is an upper bound like every
    data-dependent size in the IR."""
    scope = {**(functions or {}), **graph.functions}
    total = 0
    for n in graph.nodes:
        if n.op == "loop":
            trips = loop_trip_bound(n)
            total += trips * count_macs(n.attrs["body"], scope)
        elif n.op == "if":
            total += max(count_macs(n.attrs["then_branch"], scope), count_macs(n.attrs["else_branch"], scope))
        elif n.op == "call" and n.attrs.get("callee") in scope:
            total += count_macs(scope[n.attrs["callee"]].graph, scope)
        else:
            total += op_cost(n).macs
    return total


def model_stats(graph: Graph) -> ModelStats:
    return ModelStats(count_nodes(graph), count_params(graph), count_macs(graph))
