"""A small convenience for building graphs by hand (the built-in models, test fixtures).

Weights are drawn from one ``numpy.random.Generator`` per builder, seeded by the caller, so a model
built twice with the same seed has the same weights. Initialisation keeps activations in a sane
range through deep stacks: He-normal for conv/dense weights followed by ReLU, LeCun-normal (1/fan_in)
otherwise, near-identity batch norms whose ``gamma`` can be scaled down on residual branches.
"""
from __future__ import annotations

import zlib
from typing import Any, Sequence

import numpy as np

from .ir import Graph, Value


class GraphBuilder:
    def __init__(self, name: str, seed: int | Sequence[int]):
        self.graph = Graph(name)
        self.rng = np.random.default_rng(seed)

    @classmethod
    def for_model(cls, name: str, seed: int = 0) -> "GraphBuilder":
        """A builder whose generator is seeded by the model name and ``seed`` together, so two
        models never share a weight stream."""
        return cls(name, (int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode())))

    # ------------------------------------------------------------------ leaves
    def input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> Value:
        return self.graph.add_input(name, shape, dtype)

    def const(self, data: Any, name: str) -> Value:
        return self.graph.add_const(np.asarray(data), name)

    def normal(self, name: str, shape: Sequence[int], std: float, mean: float = 0.0) -> Value:
        data = self.rng.standard_normal(tuple(shape), dtype=np.float32)
        data *= np.float32(std)
        data += np.float32(mean)
        return self.graph.add_const(data, name)

    def uniform(self, name: str, shape: Sequence[int], lo: float, hi: float) -> Value:
        data = self.rng.random(tuple(shape), dtype=np.float32)
        return self.graph.add_const(np.float32(lo) + np.float32(hi - lo) * data, name)

    # ------------------------------------------------------------------ generic
    def op(self, op: str, inputs: Sequence[Value], attrs: dict | None = None, name: str | None = None) -> Value:
        return self.graph.add_node(op, list(inputs), attrs or {}, name=name).output

    def ops(self, op: str, inputs: Sequence[Value], attrs: dict | None = None,
            name: str | None = None) -> tuple[Value, ...]:
        return self.graph.add_node(op, list(inputs), attrs or {}, name=name).outputs

    def __getattr__(self, op: str):
        """``b.relu(x)``, ``b.add(a, c)``, ``b.reshape(x, shape=(1, -1))``: any single-output op."""
        if op.startswith("_"):
            raise AttributeError(op)

        def call(*inputs: Value, name: str | None = None, **attrs):
            return self.op(op, inputs, attrs, name=name)
        return call

    # ------------------------------------------------------------------ layers
    def conv(self, x: Value, out_ch: int, kernel: int, *, stride: int = 1, pad: int | None = None,
             groups: int = 1, bias: bool = True, name: str, gain: float = 2.0) -> Value:
        """conv2d with He-normal weights ``(K, C/groups, k, k)``; ``pad`` defaults to 'same'."""
        c = x.shape[1]
        if c % groups or out_ch % groups:
            raise ValueError(f"{name}: channels {c}->{out_ch} do not divide into {groups} groups")
        fan_in = (c // groups) * kernel * kernel
        w = self.normal(f"{name}.weight", (out_ch, c // groups, kernel, kernel), np.sqrt(gain / fan_in))
        ins = [x, w]
        if bias:
            ins.append(self.normal(f"{name}.bias", (out_ch,), 0.01))
        p = kernel // 2 if pad is None else pad
        return self.op("conv2d", ins, {"strides": (stride, stride), "pads": (p, p, p, p),
                                       "groups": groups}, name=name)

    def batch_norm(self, x: Value, *, name: str, gamma: float = 1.0) -> Value:
        c = x.shape[1]
        ins = [x, self.uniform(f"{name}.weight", (c,), 0.9 * gamma, 1.1 * gamma),
               self.normal(f"{name}.bias", (c,), 0.01),
               self.normal(f"{name}.running_mean", (c,), 0.01),
               self.uniform(f"{name}.running_var", (c,), 0.9, 1.1)]
        return self.op("batch_norm", ins, {"epsilon": 1e-5}, name=name)

    def conv_bn(self, x: Value, out_ch: int, kernel: int, *, stride: int = 1, groups: int = 1, name: str,
                act: str | None = "relu", gamma: float = 1.0) -> Value:
        y = self.conv(x, out_ch, kernel, stride=stride, groups=groups, bias=False, name=f"{name}.conv")
        y = self.batch_norm(y, name=f"{name}.bn", gamma=gamma)
        return self.op(act, [y], name=f"{name}.{act}") if act else y

    def dense(self, x: Value, units: int, *, name: str, bias: bool = True, gain: float = 1.0,
              weight: Value | None = None) -> Value:
        """dense with weight ``(units, K)``; gain 1 is LeCun-normal, 2 is He-normal; ``weight``: a
        ``(units, K)`` value of the caller's instead (``gain`` unused)."""
        k = x.shape[-1]
        if weight is not None and tuple(weight.shape) != (units, k):
            raise ValueError(f"dense {name}: weight must be {(units, k)}, got {tuple(weight.shape)}")
        ins = [x, weight if weight is not None else self.normal(f"{name}.weight", (units, k), np.sqrt(gain / k))]
        if bias:
            ins.append(self.normal(f"{name}.bias", (units,), 0.01))
        return self.op("dense", ins, name=name)

    def layer_norm(self, x: Value, *, name: str, epsilon: float = 1e-12) -> Value:
        d = x.shape[-1]
        return self.op("layer_norm", [x, self.normal(f"{name}.weight", (d,), 0.05, mean=1.0),
                                      self.normal(f"{name}.bias", (d,), 0.02)],
                       {"axis": -1, "epsilon": epsilon}, name=name)

    def finish(self, outputs: Sequence[Value], **meta) -> Graph:
        self.graph.set_outputs(list(outputs))
        self.graph.meta.update(meta)
        self.graph.lint()
        return self.graph
