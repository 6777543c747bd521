"""Probe models for ``accel-tune calibrate --host``: small whole models that put every elementwise
activation kind the host may run behind a convolution and its batch norm, as networks use them,
and fully connected layers too large for the CPU's caches.

A host calibration learns from the kinds the models it times contain, and a kind that only one
model holds vanishes with that model: with efficientnet_b0 held out of the zoo and built-ins,
``silu`` is in no other model and its whole-model prediction was 10 % under onnxruntime's, 1 %
with efficientnet's own ``silu`` rows kept (experiments/bench/calibration.py's data, 2026-11-27).
The probes give every kind of ``PROBE_KINDS`` rows of its own, at the activation sizes of a
network's stages (``PROBE_SHAPES``), so a model the calibration never saw meets none of them for
the first time. Each probe is one model per shape: every kind applied, side by side, to the batch
norm of its own 1x1 convolution of one input, so each sees values of a normal spread (no chain of
activations drifting into denormals, which would time the CPU's slow path).

One regime no model of the zoo or the built-ins reaches gets probes of its own too: **fully
connected layers whose weights stream from DRAM** (``DENSE_SHAPES``, 16 to 256 MB of weights).
The zoo's largest weight matrix is 9 MB, which the CPU's caches partly hold, and the calibration
carried that speed to VGG-11's 476 MB of classifier weights: 1.4 ms predicted, 11.2 ms measured,
the whole model 23 % under onnxruntime (experiments/calibration_unseen.py, 2026-11-29; within
11 % on five runs with these probes).

Grouped convolutions between plain and depthwise (RegNet's 8 channels per group) are not probed,
though onnxruntime runs them 3-4x slower per FLOP than the calibration predicts (regnet_y_400mf
27-36 % under). Probes of group widths 4 to 64 taught the fit that regime, but with the
MobileNets held out their depthwise convolutions then followed the probes: 3 of the family's 5
models went past 20 % over (the bench's family-held-out column). Extra features of the matrix
product each group runs (M, K, N) brought RegNet only from 32 % to 27 % under.
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


# (inputs, outputs) of batch-1 fully connected layers: 16, 64 and 256 MB of fp32 weights.
DENSE_SHAPES = ((2048, 2048), (4096, 4096), (8192, 8192))


def dense_probe_graph(k: int, n: int) -> Any:
    """One fully connected layer, batch 1: ``k`` inputs, ``n`` outputs (its weights ``4 k n`` bytes)."""
    from partition.builder import GraphBuilder
    b = GraphBuilder.for_model(f"dense_{k}x{n}", 0)
    return b.finish([b.dense(b.input("x", [1, k]), n, name="fc")])


def probe_graphs(shapes: Sequence[Sequence[int]] = PROBE_SHAPES) -> list[tuple[str, Any]]:
    """(label, graph) of one activation probe per shape and one fully connected probe per
    ``DENSE_SHAPES``."""
    return ([(f"probe:{s[1]}x{s[2]}x{s[3]}", probe_graph(s)) for s in shapes]
            + [(f"probe:dense:{k}x{n}", dense_probe_graph(k, n)) for k, n in DENSE_SHAPES])


__all__ = ["DENSE_SHAPES", "PROBE_KINDS", "PROBE_SHAPES", "dense_probe_graph", "probe_graph", "probe_graphs"]
