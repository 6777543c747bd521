"""What a partition offloads: per external function its ops and MACs, the host's ops, and the
share of MACs offloaded."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..ir import Function, Graph
from ..ops import op_cost


@dataclass(frozen=True)
class FunctionSummary:
    symbol: str
    compiler: str
    ops: tuple[str, ...]          # primitive ops, composites expanded
    composites: tuple[str, ...]   # Composite names of the composite calls inside
    calls: int                    # static call sites
    macs_per_call: int


@dataclass(frozen=True)
class PartitionSummary:
    functions: tuple[FunctionSummary, ...]
    host_ops: tuple[str, ...]
    offloaded_ops: int            # primitive ops run by external functions, per call site
    macs_total: int
    macs_offloaded: int

    @property
    def macs_offloaded_pct(self) -> float:
        return 100.0 * self.macs_offloaded / self.macs_total if self.macs_total else 0.0

    def to_json(self) -> dict:
        return {
            "functions": [{"symbol": f.symbol, "compiler": f.compiler, "ops": list(f.ops),
                           "composites": list(f.composites), "calls": f.calls,
                           "macs_per_call": f.macs_per_call} for f in self.functions],
            "host_ops": list(self.host_ops),
            "num_functions": len(self.functions),
            "offloaded_ops": self.offloaded_ops,
            "host_op_count": len(self.host_ops),
            "macs_total": self.macs_total,
            "macs_offloaded": self.macs_offloaded,
            "macs_offloaded_pct": round(self.macs_offloaded_pct, 3),
        }


def _body(graph: Graph, scope: Mapping[str, Function]) -> tuple[list[str], list[str], int]:
    """(primitive ops, composite names, MACs) of a function body, composites expanded."""
    scope = {**scope, **graph.functions}
    ops: list[str] = []
    comps: list[str] = []
    macs = 0
    for n in graph.nodes:
        if n.op == "call" and n.attrs.get("callee") in scope:
            fn = scope[n.attrs["callee"]]
            if "Composite" in fn.attrs:
                comps.append(str(fn.attrs["Composite"]))
            o, c, m = _body(fn.graph, scope)
            ops += o
            comps += c
            macs += m
        else:
            ops.append(n.op)
            macs += op_cost(n).macs
    return ops, comps, macs


def summarize(graph: Graph) -> PartitionSummary:
    """MACs follow ``partition.models.stats.count_macs``: a loop counts its body once per trip of its
    constant trip bound, an if its costlier branch. Op lists and call counts are static."""
    externals = {s: f for s, f in graph.functions.items() if "Compiler" in f.attrs}
    calls = {s: 0 for s in externals}
    host_ops: list[str] = []

    def visit(g: Graph, scope: Mapping[str, Function]) -> tuple[int, int]:
        """(host MACs, offloaded MACs) of one run of ``g``."""
        scope = {**scope, **g.functions}
        host = off = 0
        for n in g.nodes:
            sym = n.attrs.get("callee") if n.op == "call" else None
            if sym in externals and scope.get(sym) is externals[sym]:
                calls[sym] += 1
                off += _body(externals[sym].graph, scope)[2]
            elif n.op == "call" and sym in scope:  # a plain function: its ops run on the host
                ops, _, macs = _body(scope[sym].graph, scope)
                host_ops.extend(ops)
                host += macs
            elif n.op == "loop":
                host_ops.append(n.op)
                trip = n.inputs[0].data
                trips = int(np.asarray(trip).reshape(-1)[0]) if trip is not None else 1
                h, o = visit(n.attrs["body"], scope)
                host, off = host + trips * h, off + trips * o
            elif n.op == "if":
                host_ops.append(n.op)
                branches = [visit(n.attrs[k], scope) for k in ("then_branch", "else_branch")]
                h, o = max(branches, key=sum)
                host, off = host + h, off + o
            else:
                host_ops.append(n.op)
                host += op_cost(n).macs
        return host, off

    host_macs, off_macs = visit(graph, {})
    funcs = []
    off_ops = 0
    for s, f in externals.items():
        ops, comps, macs = _body(f.graph, graph.functions)
        funcs.append(FunctionSummary(s, str(f.attrs["Compiler"]), tuple(ops), tuple(comps), calls[s], macs))
        off_ops += len(ops) * calls[s]
    return PartitionSummary(tuple(funcs), tuple(host_ops), off_ops, host_macs + off_macs, off_macs)
