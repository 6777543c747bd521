"""Control flow and calls. Their numerics need the interpreter (bodies are graphs), so ``compute``
is None here and ``partition.interpreter`` runs them.

Conventions (closed sub-graphs, see ``partition.ir``):
- ``if``: inputs ``[cond, *captured]``; attrs ``then_branch``/``else_branch`` are Graphs whose
  inputs match ``captured`` one to one; both branches give outputs of the same types.
- ``loop``: inputs ``[max_trip (int64 scalar), cond (bool scalar), *carried, *captured]``; attr
  ``num_carried``; attr ``body`` is a Graph with inputs ``[iter (int64 scalar), cond, *carried,
  *captured]`` and outputs ``[cond, *carried, *scan]``. Node outputs are ``[*carried, *scan]``;
  a scan output's leading dimension is the trip count, which must be a constant: the type carries
  it as an upper bound when the body's condition can stop the loop early (the runtime array is then
  shorter), the same rule as every data-dependent size (see ``non_max_suppression``).
- ``call``: attr ``callee`` names a Function in scope; inputs match its graph's inputs.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..ir import Graph, TensorType
from .base import OpCost, OpDef, check


def _same_types(a, b) -> bool:
    return [t for t in a] == [t for t in b]


def _infer_if(ins, attrs, ctx):
    check("then_branch" in attrs and "else_branch" in attrs, "if needs then_branch and else_branch")
    check(ins[0].size == 1, f"if condition must have one element, got shape {list(ins[0].shape)}")
    then_g, else_g = attrs["then_branch"], attrs["else_branch"]
    for br, g in (("then_branch", then_g), ("else_branch", else_g)):
        check(len(g.inputs) == len(ins) - 1,
              f"if {br} takes {len(g.inputs)} inputs but the node passes {len(ins) - 1}")
    t_out = [v.type for v in then_g.outputs]
    e_out = [v.type for v in else_g.outputs]
    check(len(t_out) == len(e_out), "if branches return different numbers of outputs")
    for a, b in zip(t_out, e_out):
        check(a.dtype == b.dtype and len(a.shape) == len(b.shape),
              f"if branches disagree on output type: {a} vs {b}")
    # Where shapes differ the larger is the bound.
    return [TensorType(tuple(max(x, y) for x, y in zip(a.shape, b.shape)), a.dtype)
            for a, b in zip(t_out, e_out)]


def _infer_loop(ins, attrs, ctx):
    body = attrs.get("body")
    check(body is not None, "loop needs a body")
    k = int(attrs.get("num_carried", 0))
    check(len(ins) >= 2 + k, f"loop with {k} carried values needs at least {2 + k} inputs")
    check(len(body.inputs) == len(ins), f"loop body takes {len(body.inputs)} inputs, node passes {len(ins)}")
    check(len(body.outputs) >= 1 + k, "loop body must return cond and every carried value")
    trip = ctx.consts[0] if ctx.consts else None
    if trip is None and "trip_bound" in attrs:  # computed at run time: the model's declared count
        trip = attrs["trip_bound"]
    check(trip is not None, "loop max trip count must be a constant (needed to bound scan outputs)")
    trip = int(np.asarray(trip).reshape(-1)[0])
    carried = [v.type for v in body.outputs[1:1 + k]]
    for i, (a, b) in enumerate(zip(ins[2:2 + k], carried)):
        check(a == b, f"loop carried value {i} enters as {a} but the body returns {b}")
    scans = [TensorType((trip, *v.shape), v.dtype) for v in body.outputs[1 + k:]]
    return carried + scans


def _infer_call(ins, attrs, ctx):
    callee = attrs.get("callee")
    check(isinstance(callee, str), "call needs a callee name")
    fn = ctx.functions.get(callee)
    check(fn is not None, f"call to unknown function '{callee}'")
    params = fn.graph.inputs
    check(len(params) == len(ins), f"@{callee} takes {len(params)} arguments, got {len(ins)}")
    for p, t in zip(params, ins):
        check(p.type == t, f"@{callee} argument {p.name} expects {p.type}, got {t}")
    return [v.type for v in fn.graph.outputs]


def _no_cost(ins, outs, attrs):
    return OpCost(0, 0, 0, 0)


def loop_trip_bound(node) -> int:
    """How many times a ``loop`` node's body runs at most, as costing counts it: its constant
    maximum trip count, never below 0 (a zero or negative count runs the body no time, as
    onnxruntime does), or 1 when the count is only known at run time."""
    trip = node.inputs[0].data if node.inputs and node.inputs[0].is_const else None
    if trip is None:
        return 1
    return max(0, int(np.asarray(trip).reshape(-1)[0]))


def subgraph_runs(node, scope: Mapping[str, Any] | None = None) -> dict[str, float]:
    """How many times costing counts each sub-graph of ``node`` per run of it (attr name -> runs):
    a loop body once per trip (``loop_trip_bound``); of an ``if``, the branch a constant condition
    picks, else the branch with more work (``branch_work``; the then branch on a tie), once, and
    the other never. Which branch runs is known only at run time, so costing takes the slower one,
    as the simulator's report does and as MAC counts do (an upper bound like every data-dependent
    size in the IR). Counting both, as costing did until the seventh session of 2026-11-29,
    doubled byoc_demo's if. ``scope``: the functions a ``call`` in a branch may name (its work is
    its body's, so partitioning a branch does not change which branch counts)."""
    if node.op == "loop":
        return {"body": float(loop_trip_bound(node))} if "body" in node.attrs else {}
    if node.op != "if":
        return {k: 1.0 for k, v in node.attrs.items() if isinstance(v, Graph)}
    cond = node.inputs[0] if node.inputs else None
    if cond is not None and cond.is_const and cond.data is not None:
        taken = "then_branch" if bool(np.asarray(cond.data).reshape(-1)[0]) else "else_branch"
    else:
        then_w, else_w = (branch_work(node.attrs[k], scope) for k in ("then_branch", "else_branch"))
        taken = "then_branch" if then_w >= else_w else "else_branch"
    return {k: float(k == taken) for k in ("then_branch", "else_branch")}


def branch_work(graph, scope: Mapping[str, Any] | None = None) -> float:
    """The arithmetic and bytes (``op_cost``: FLOPs + bytes in + bytes out) of one run of
    ``graph``, into called functions, loop bodies (per trip) and the branch of an if that costing
    counts: what picks the slower branch of an if."""
    from . import op_cost
    scope = {**(scope or {}), **graph.functions}
    total = 0.0
    for n in graph.nodes:
        if n.op == "call":
            fn = scope.get(n.attrs.get("callee"))
            total += branch_work(fn.graph, scope) if fn is not None else 0.0
        elif n.op in ("if", "loop"):
            total += sum(r * branch_work(n.attrs[k], scope) for k, r in subgraph_runs(n, scope).items() if r)
        else:
            c = op_cost(n)
            total += float(c.flops + c.bytes_in + c.bytes_out)
    return total


DEFS = [
    OpDef("if", _infer_if, None, _no_cost, "control", (1, 1 << 30)),
    OpDef("loop", _infer_loop, None, _no_cost, "control", (2, 1 << 30)),
    OpDef("call", _infer_call, None, _no_cost, "call"),
]
