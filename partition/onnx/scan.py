"""ONNX Scan (opset 11+) -> the IR's ``loop``.

The body becomes a loop body whose carried values are Scan's states; each scan input is captured
whole and its slice for the iteration is a ``gather`` at the iteration index (counted from the end
for a reverse direction) along its scan axis; the loop stacks each scan output along axis 0, which
is then flipped for a reverse output direction and moved to its scan output axis.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from .context import Context, Scope


def _axes(c: Context, key: str, n: int, ranks: list[int]) -> list[int]:
    vals = [int(v) for v in c.attrs.get(key, [0] * n)]
    if len(vals) != n:
        raise c.fail(f"{key} has {len(vals)} entries for {n} values")
    return [v + r if v < 0 else v for v, r in zip(vals, ranks)]


def scan(c: Context):
    body_gp = c.attrs["body"]
    m = int(c.attrs.get("num_scan_inputs", 0))
    ins = [v for v in c.ins]
    if m < 1 or m > len(ins) or any(v is None for v in ins):
        raise c.fail(f"num_scan_inputs {m} does not fit the {len(ins)} inputs")
    n = len(ins) - m
    states, xs = ins[:n], ins[n:]
    in_axes = _axes(c, "scan_input_axes", m, [len(x.shape) for x in xs])
    in_dirs = [int(d) for d in c.attrs.get("scan_input_directions", [0] * m)]
    lengths = {x.shape[a] for x, a in zip(xs, in_axes)}
    if len(lengths) != 1:
        raise c.fail(f"scan inputs have different lengths {sorted(lengths)} along their scan axes")
    trips = lengths.pop()
    if len(body_gp.input) != n + m:
        raise c.fail(f"body takes {len(body_gp.input)} inputs, expected {n + m}")
    g = Graph(f"{c.name}_body")
    scope = Scope(g, c.scope)
    it = g.add_input("iter", (), "int64")
    g.add_input("cond", (), "bool")
    for i, v in enumerate(states):
        scope.env[body_gp.input[i].name] = g.add_input(body_gp.input[i].name, v.shape, v.dtype)
    bc = Context(c.imp, scope, c.node, c.name, [])
    last = g.add_const(np.array(trips - 1, np.int64), f"{c.name}_last")
    for j, (x, axis, rev) in enumerate(zip(xs, in_axes, in_dirs)):
        whole = scope.lookup(c.node.input[n + j], c.name)  # captured: an extra body input
        idx = bc.emit("sub", [last, it], out_names=[f"{c.name}_ridx{j}"])[0] if rev else it
        name = body_gp.input[n + j].name
        scope.env[name] = bc.emit("gather", [whole, idx], {"axis": axis}, out_names=[name])[0]
    c.imp._constants(body_gp, scope)
    c.imp._nodes(body_gp, scope)
    true = g.add_const(np.array(True), f"{c.name}_true")
    g.set_outputs([true] + [scope.lookup(o.name, f"{c.name} output") for o in body_gp.output])
    g.eliminate_dead_code()
    trip_v = c.graph.add_const(np.array(trips, np.int64), f"{c.name}_trips")
    cond_v = c.graph.add_const(np.array(True), f"{c.name}_cond")
    k = len(body_gp.output) - n
    names = [f"{c.name}_raw{i}" for i in range(n + k)]
    outs = c.emit("loop", [trip_v, cond_v, *states, *scope.captured], {"body": g, "num_carried": n},
                  out_names=names)
    out_axes = _axes(c, "scan_output_axes", k, [len(v.shape) for v in outs[n:]])
    out_dirs = [int(d) for d in c.attrs.get("scan_output_directions", [0] * k)]
    final = list(outs[:n])
    for j, (y, axis, rev) in enumerate(zip(outs[n:], out_axes, out_dirs)):
        if rev:
            order = c.graph.add_const(np.arange(trips - 1, -1, -1, dtype=np.int64), f"{c.name}_rev{j}")
            y = c.emit("gather", [y, order], {"axis": 0}, out_names=[f"{c.name}_flip{j}"])[0]
        if axis:
            perm = list(range(1, len(y.shape)))
            perm.insert(axis, 0)
            y = c.emit("transpose", [y], {"perm": tuple(perm)}, out_names=[f"{c.name}_t{j}"])[0]
        final.append(y)
    return final
