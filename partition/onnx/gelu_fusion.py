"""The exact GELU written out as ONNX ops, imported as one ``gelu`` node.

Exporters that predate ONNX's Gelu (opset 20) write ``gelu(x) = x * 0.5 * (1 + erf(x / sqrt 2))``
as five element-wise nodes: torch's TorchScript exporter as ``Div(x, 1.4142) -> Erf -> Add 1 ->
Mul x -> Mul 0.5``, Hugging Face's older BERT code with the 0.5 first. onnxruntime fuses the chain
into one kernel, as TVM's importer does, and so does this pass (``fuse_erf_gelu``): costing then
sees the one element-wise pass the hardware runs, the ``dense_bias_gelu`` pattern matches an
exported BERT's feed-forward layer, and a host calibration predicts the chain as the one kernel
onnxruntime times. Before, ConvNeXt-T's 18 chains were predicted at 8.7 ms where onnxruntime
spends about 0.5 ms on them in context (experiments/calibration_unseen.py, 2026-11-29).

The chain is fused only when it is exactly that function: the constants within 1e-6 of theirs
(1/sqrt 2 may be a division or a multiplication), every intermediate used by the next node alone
and by no graph output, the same ``x`` at both ends, a float ``x`` whose shape the result keeps.
The ``gelu`` op computes the same erf form (``partition/ops/elementwise.py``), so outputs move by
float rounding only.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir import Graph, Node, Value

_SQRT2 = math.sqrt(2.0)
_TOL = 1e-6


def _scalar(v: Value) -> float | None:
    """The one number a constant holds (every element equal), else None."""
    if not v.is_const or v.data is None:
        return None
    a = np.asarray(v.data)
    if a.size == 0 or a.dtype.kind not in "fiu":
        return None
    first = float(a.flat[0])
    return first if np.all(a == a.flat[0]) else None


def _is(v: Value, want: float) -> bool:
    s = _scalar(v)
    return s is not None and abs(s - want) <= _TOL * max(1.0, abs(want))


def _other(node: Node, v: Value) -> Value | None:
    """The other input of a two-input commutative node whose one input is ``v``."""
    if len(node.inputs) != 2:
        return None
    a, b = node.inputs
    return b if a is v else a if b is v else None


def _only_user(v: Value, outputs: set[int]) -> Node | None:
    """The node that alone uses ``v`` once (not a graph output), else None."""
    if id(v) in outputs or len(v.users) != 1:
        return None
    return v.users[0]


def _match(erf: Node, outputs: set[int]) -> tuple[Value, Value, list[Node]] | None:
    """(x, the chain's result, the chain's nodes) when ``erf`` is the middle of an exact GELU."""
    scaled = erf.inputs[0]
    d = scaled.producer
    if d is None or _only_user(scaled, outputs) is not erf or len(d.inputs) != 2:
        return None
    if d.op == "div" and _is(d.inputs[1], _SQRT2):
        x = d.inputs[0]
    elif d.op == "mul" and (_is(d.inputs[1], 1.0 / _SQRT2) or _is(d.inputs[0], 1.0 / _SQRT2)):
        x = d.inputs[0] if _is(d.inputs[1], 1.0 / _SQRT2) else d.inputs[1]
    else:
        return None
    if x.is_const or not x.dtype.startswith(("float", "bfloat")):
        return None
    add = _only_user(erf.outputs[0], outputs)
    one = _other(add, erf.outputs[0]) if add is not None and add.op == "add" else None
    if one is None or not _is(one, 1.0):
        return None
    chain = [d, erf, add]
    m1 = _only_user(add.outputs[0], outputs)
    if m1 is None or m1.op != "mul":
        return None
    w = _other(m1, add.outputs[0])
    if w is None:
        return None
    if w is x or _is(w, 0.5):  # (x * (1 + erf)) * 0.5, or ((1 + erf) * 0.5) * x
        m2 = _only_user(m1.outputs[0], outputs)
        last = _other(m2, m1.outputs[0]) if m2 is not None and m2.op == "mul" else None
        if last is None or not ((w is x and _is(last, 0.5)) or (w is not x and last is x)):
            return None
        chain += [m1, m2]
        out = m2.outputs[0]
    else:  # (x * 0.5) * (1 + erf)
        h = w.producer
        if h is None or h.op != "mul" or _only_user(w, outputs) is not m1 or _other(h, x) is None \
                or not _is(_other(h, x), 0.5):
            return None
        chain += [h, m1]
        out = m1.outputs[0]
    if tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype:
        return None
    return x, out, chain


def fuse_erf_gelu(graph: Graph) -> int:
    """Replace every exact erf-GELU chain of ``graph`` (and of its subgraphs) by one ``gelu``
    node; returns how many."""
    count = 0
    for node in list(graph.nodes):
        for sub in node.subgraphs():
            count += fuse_erf_gelu(sub)
    outputs = {id(v) for v in graph.outputs}
    for erf in [n for n in graph.nodes if n.op == "erf"]:
        if erf not in graph.nodes:
            continue
        m = _match(erf, outputs)
        if m is None:
            continue
        x, out, chain = m
        g = graph.add_node("gelu", [x], {}, name=f"{chain[-1].name}.gelu")
        graph.replace_all_uses(out, g.outputs[0])
        name = out.name
        for n in reversed(sorted(chain, key=graph.nodes.index)):
            graph.erase_node(n)
        graph.rename(g.outputs[0], name)  # a graph output keeps its name
        count += 1
    if count:
        graph.toposort()
        graph.constants = [c for c in graph.constants if c.users or id(c) in outputs]
    return count


__all__ = ["fuse_erf_gelu"]
