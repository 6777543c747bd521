"""Probe models for ``accel-tune calibrate --host``: small whole models that put every elementwise
activation kind the host may run behind a convolution and its batch norm, as networks use them.

A host calibration learns from the kinds the models it times contain, and a kind that only one
model holds vanishes with that model: with efficientnet_b0 held out of the zoo and built-ins,
``silu`` is in no other model and its whole-model prediction was 10 % under onnxruntime's, 1 %
with efficientnet's own ``silu`` rows kept (experiments/bench/calibration.py's data, 2026-11-27).
The probes give every kind of ``PROBE_KINDS`` rows of its own, at the activation sizes of a
network's stages (``PROBE_SHAPES``), so a model the calibration never saw meets none of them for
the first time. Each probe is one model per shape: every kind applied, side by side, to the batch
norm of its own 1x1 convolution of one input, so each sees values of a normal spread (no chain of
activations drifting into denormals, which would time the CPU's slow path).
"""
from __future__ import annotations

from typing import Any, Sequence

# Batch-1 activations of the five stages of a ResNet-style network, 3.2 MB down to 0.1 MB of fp32:
# the sizes at which networks apply their activations, from cache-resident to memory-bound.
PROBE_SHAPES = ((1, 64, 112, 112), (1, 64, 56, 56), (1, 128, 28, 28), (1, 256, 14, 14), (1, 512, 7, 7))
PROBE_KINDS = ("relu", "relu6", "leaky_relu", "elu", "selu", "celu", "sigmoid", "hard_sigmoid", "silu",
               "hard_swish", "mish", "softplus", "softsign", "tanh", "gelu", "erf", "exp", "abs", "neg")


def probe_graph(shape: Sequence[int], kinds: Sequence[str] = PROBE_KINDS) -> Any:
    """One probe model: input ``shape`` (N, C, H, W); for each kind, a 1x1 convolution to C
    channels, its batch norm and the kind; every activation an output."""
    from partition.builder import GraphBuilder
    n, c, h, w = (int(d) for d in shape)
    b = GraphBuilder.for_model(f"probe_{c}x{h}x{w}", 0)
    x = b.input("x", [n, c, h, w])
    return b.finish([b.conv_bn(x, c, 1, name=f"{kind}", act=kind) for kind in kinds])


def probe_graphs(shapes: Sequence[Sequence[int]] = PROBE_SHAPES) -> list[tuple[str, Any]]:
    """(label, graph) of one probe per shape."""
    return [(f"probe:{s[1]}x{s[2]}x{s[3]}", probe_graph(s)) for s in shapes]


__all__ = ["PROBE_KINDS", "PROBE_SHAPES", "probe_graph", "probe_graphs"]
