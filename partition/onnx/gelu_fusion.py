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
(1/sqrt 2 may be a division or a multiplication), every intermediate used inside the chain alone
and by no graph output, the same ``x`` at both ends, a float ``x`` whose shape the result keeps.
The chain is a dataflow pattern of ``partition.patterns``, the matcher the BYOC tables use.
The ``gelu`` op computes the same erf form (``partition/ops/elementwise.py``), so outputs move by
float rounding only.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir import Graph, Value
from ..patterns import Pattern, is_const, is_op, match, wildcard

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


def _const(want: float) -> Pattern:
    """A constant holding ``want`` (within the tolerance) in every element."""
    def near(v: Value) -> bool:
        s = _scalar(v)
        return s is not None and abs(s - want) <= _TOL * max(1.0, abs(want))
    return is_const().where(near, f"constant {want:g}")


def _either(op: str, a: Pattern, b: Pattern) -> Pattern:
    """A commutative two-input op, its operands in either order."""
    return is_op(op, a, b) | is_op(op, b, a)


def _gelu_pattern() -> Pattern:
    """x * 0.5 * (1 + erf(x / sqrt 2)) in the three orders exporters write it; ``x`` is one value
    at both ends (patterns bind by identity), a float tensor that is not a constant."""
    x = wildcard().where(lambda v: not v.is_const and v.dtype.startswith(("float", "bfloat")), "float x").named("x")
    scaled = is_op("div", x, _const(_SQRT2)) | _either("mul", x, _const(1.0 / _SQRT2))
    one_plus = _either("add", is_op("erf", scaled), _const(1.0))
    return (_either("mul", _either("mul", x, one_plus), _const(0.5))       # (x * (1 + erf)) * 0.5
            | _either("mul", _either("mul", one_plus, _const(0.5)), x)     # ((1 + erf) * 0.5) * x
            | _either("mul", _either("mul", x, _const(0.5)), one_plus))    # (x * 0.5) * (1 + erf)


_GELU = _gelu_pattern()


def fuse_erf_gelu(graph: Graph) -> int:
    """Replace every exact erf-GELU chain of ``graph`` (and of its subgraphs) by one ``gelu``
    node; returns how many. A chain is matched by ``partition.patterns`` (whose matches use no
    interior value outside the chain or as a graph output) and kept only when its result has
    ``x``'s shape and dtype."""
    count = 0
    for node in list(graph.nodes):
        for sub in node.subgraphs():
            count += fuse_erf_gelu(sub)
    outputs = {id(v) for v in graph.outputs}
    for root in [n for n in graph.nodes if n.op == "mul"]:
        if root not in graph.nodes:
            continue
        out = root.outputs[0]
        m = match(_GELU, out, graph.outputs)
        if m is None:
            continue
        x = m.bindings["x"]
        if tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype:
            continue
        g = graph.add_node("gelu", [x], {}, name=f"{root.name}.gelu")
        graph.replace_all_uses(out, g.outputs[0])
        name = out.name
        for n in reversed(m.nodes):
            graph.erase_node(n)
        graph.rename(g.outputs[0], name)  # a graph output keeps its name
        count += 1
    if count:
        graph.toposort()
        graph.constants = [c for c in graph.constants if c.users or id(c) in outputs]
    return count


__all__ = ["fuse_erf_gelu"]
