"""One kernel's loop nest, derived from a graph node or given by explicit dimensions.

Kinds and their dims:

- ``conv2d``: n, c, h, w (input), k (filters), r, s (kernel), stride_h, stride_w, pad_t, pad_l, pad_b,
  pad_r, dil_h, dil_w, groups; derived p, q (output height, width). Grouped and depthwise
  convolutions are one workload with ``groups`` independent GEMMs (not ``groups`` separate layers).
- ``gemm``: b (independent batches, no operand shared between them), m, n, k.
- vector kinds ``elementwise``, ``pool``, ``softmax``, ``layer_norm``, ``reduce``, ``data_move``:
  in_elems, out_elems (elements read and written), ops (element operations), special_ops (ops of the
  exp/erf/sqrt/div class, each costing ``hw.vector.special_op_cycles``).

``gemm_view()`` gives every MAC workload as (g, m, n, k): g independent GEMMs of M x K times K x N.
For a convolution M = n*p*q output pixels, N = k/groups filters, K = (c/groups)*r*s, g = groups.
Sizes on the device are counted in words of ``hw.array.word_bytes``; ``dtype_bytes`` is the size
of an element in the model (it sets link transfers and host costs).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

MAC_KINDS = ("conv2d", "gemm")
VECTOR_KINDS = ("elementwise", "pool", "softmax", "layer_norm", "reduce", "data_move")
KINDS = MAC_KINDS + VECTOR_KINDS

# Ops whose per-element cost is a transcendental or a division (vector unit, special_op_cycles each).
SPECIAL_OPS = frozenset({"exp", "log", "erf", "sigmoid", "tanh", "gelu", "silu", "sqrt", "div",
                         "reciprocal", "pow", "hard_swish", "softmax", "elu", "selu", "celu", "softplus",
                         "mish", "sin", "cos", "mod", "softsign"})
ELEMENTWISE_FLOPS = {"rotary_embedding": 3, "batch_norm": 2, "gelu": 8, "silu": 4, "hard_swish": 4, "hard_sigmoid": 3,
                     "leaky_relu": 2, "clip": 2, "relu6": 2, "where": 1}
ELEMENTWISE_OPS = frozenset({
    "add", "sub", "mul", "div", "pow", "equal", "less", "greater", "less_equal", "greater_equal",
    "and", "or", "not", "neg", "abs", "sqrt", "exp", "log", "reciprocal", "erf", "sigmoid", "tanh",
    "relu", "silu", "identity", "relu6", "clip", "gelu", "hard_sigmoid", "hard_swish", "leaky_relu",
    "where", "bias_add", "batch_norm", "cast", "min", "max", "mod", "prelu", "elu", "selu", "celu", "softplus",
    "softsign", "mish", "sin", "cos", "floor", "ceil", "round", "sign", "xor", "isnan", "isinf",
    "thresholded_relu", "shrink", "quantize_linear", "dequantize_linear", "rotary_embedding"})
VIEW_OPS = frozenset({"reshape", "flatten", "squeeze", "unsqueeze", "identity"})
MOVE_OPS = frozenset({"transpose", "concat", "split", "slice", "gather", "gather_nd",
                      "gather_elements", "pad", "expand", "tile", "depth_to_space", "space_to_depth",
                      "trilu"})
REDUCE_OPS = frozenset({"reduce_mean", "reduce_sum", "reduce_max", "argmax", "topk",
                        "global_avg_pool2d", "reduce_min", "reduce_prod", "reduce_l1", "reduce_l2",
                        "reduce_sum_square", "reduce_log_sum_exp", "argmin"})
SOFTMAX_OPS = frozenset({"softmax", "log_softmax"})
# Every op the accelerator model can cost: what a hardware config's support.ops may list.
OFFLOADABLE_OPS = (frozenset({"conv2d", "dense", "matmul", "batch_matmul", "gemm", "max_pool2d", "avg_pool2d",
                              "layer_norm", "rms_norm", "kv_append"}) | SOFTMAX_OPS | ELEMENTWISE_OPS | VIEW_OPS | MOVE_OPS | REDUCE_OPS)
CONV_DIMS = ("n", "c", "h", "w", "k", "r", "s", "stride_h", "stride_w", "pad_t", "pad_l", "pad_b",
             "pad_r", "dil_h", "dil_w", "groups")
VECTOR_DIMS = ("in_elems", "out_elems", "ops", "special_ops")


class WorkloadError(ValueError):
    """A node or dimension set that cannot be made into a kernel workload."""


def _pair(v: Any, name: str) -> tuple[int, int]:
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise WorkloadError(f"{name} must be one int or two, got {v!r}")
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _pads(v: Any) -> tuple[int, int, int, int]:
    if isinstance(v, (tuple, list)):
        if len(v) == 2:
            return int(v[0]), int(v[1]), int(v[0]), int(v[1])
        if len(v) == 4:
            return tuple(int(x) for x in v)  # type: ignore[return-value]
        raise WorkloadError(f"pad must be one int, (h, w) or (top, left, bottom, right), got {v!r}")
    return (int(v),) * 4  # type: ignore[return-value]


@dataclass(frozen=True)
class Workload:
    kind: str
    dims: tuple[tuple[str, int], ...]
    dtype_bytes: int = 4
    epilogue: tuple[str, ...] = ()
    op: str = ""  # the graph op it came from (informational; not part of the key)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise WorkloadError(f"workload kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        object.__setattr__(self, "dims", tuple((str(k), int(v)) for k, v in self.dims))
        object.__setattr__(self, "epilogue", tuple(self.epilogue))
        d = self.d
        need = {"conv2d": CONV_DIMS, "gemm": ("b", "m", "n", "k")}.get(self.kind, VECTOR_DIMS)
        for name in need:
            if name not in d:
                raise WorkloadError(f"{self.kind} workload needs dim '{name}'")
        for name, v in self.dims:
            lo = 0 if (name.startswith("pad") or name in VECTOR_DIMS) else 1
            if v < lo:
                raise WorkloadError(f"workload dim {name} must be >= {lo}, got {v}")
        if self.dtype_bytes < 1:
            raise WorkloadError(f"workload dtype_bytes must be >= 1, got {self.dtype_bytes}")
        if self.kind == "conv2d":
            g = d["groups"]
            if d["c"] % g or d["k"] % g:
                raise WorkloadError(f"conv2d groups={g} must divide c={d['c']} and k={d['k']}")
            if self.p < 1 or self.q < 1:
                raise WorkloadError(f"conv2d output is empty: input {d['h']}x{d['w']}, kernel "
                                    f"{d['r']}x{d['s']}, padding and stride leave {self.p}x{self.q}")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def conv2d(cls, n: int, c: int, h: int, w: int, k: int, r: int, s: int, stride: Any = 1,
               pad: Any = 0, dilation: Any = 1, groups: int = 1, dtype_bytes: int = 4,
               epilogue: tuple[str, ...] = ()) -> "Workload":
        """``h``, ``w`` are the INPUT height and width; ``pad`` is per side (int, (h, w) or
        (top, left, bottom, right))."""
        sh, sw = _pair(stride, "stride")
        dh, dw = _pair(dilation, "dilation")
        pt, pl, pb, pr = _pads(pad)
        dims = dict(n=n, c=c, h=h, w=w, k=k, r=r, s=s, stride_h=sh, stride_w=sw, pad_t=pt, pad_l=pl,
                    pad_b=pb, pad_r=pr, dil_h=dh, dil_w=dw, groups=groups)
        return cls("conv2d", tuple(dims.items()), dtype_bytes, tuple(epilogue), "conv2d")

    @classmethod
    def gemm(cls, m: int, n: int, k: int, batch: int = 1, dtype_bytes: int = 4,
             epilogue: tuple[str, ...] = ()) -> "Workload":
        return cls("gemm", (("b", batch), ("m", m), ("n", n), ("k", k)), dtype_bytes, tuple(epilogue), "gemm")

    @classmethod
    def vector(cls, kind: str, in_elems: int, out_elems: int, ops: int, special_ops: int = 0,
               dtype_bytes: int = 4, op: str = "") -> "Workload":
        if kind not in VECTOR_KINDS:
            raise WorkloadError(f"vector workload kind must be one of {', '.join(VECTOR_KINDS)}, got {kind!r}")
        return cls(kind, (("in_elems", in_elems), ("out_elems", out_elems), ("ops", ops),
                          ("special_ops", special_ops)), dtype_bytes, (), op or kind)

    @classmethod
    def from_node(cls, node: Any, epilogue: tuple[str, ...] = ()) -> "Workload":
        """Deprecated: ``sim.workload_of(node, epilogue)`` (``sim.workload.from_ir``)."""
        import importlib
        import warnings
        warnings.warn("Workload.from_node is deprecated: use sim.workload_of (sim.workload.from_ir)",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module("sim.workload.from_ir").workload_of(node, epilogue)

    def with_epilogue(self, epilogue: tuple[str, ...]) -> "Workload":
        return Workload(self.kind, self.dims, self.dtype_bytes, tuple(epilogue), self.op)

    # ------------------------------------------------------------------ derived
    @cached_property
    def d(self) -> dict[str, int]:
        """The dims as a dict (cached: simulators read it often; do not mutate it)."""
        return dict(self.dims)

    @property
    def is_mac(self) -> bool:
        return self.kind in MAC_KINDS

    @property
    def p(self) -> int:
        d = self.d
        return (d["h"] + d["pad_t"] + d["pad_b"] - d["dil_h"] * (d["r"] - 1) - 1) // d["stride_h"] + 1

    @property
    def q(self) -> int:
        d = self.d
        return (d["w"] + d["pad_l"] + d["pad_r"] - d["dil_w"] * (d["s"] - 1) - 1) // d["stride_w"] + 1

    def gemm_view(self) -> tuple[int, int, int, int]:
        """(g, M, N, K): g independent GEMMs (groups or batches)."""
        d = self.d
        if self.kind == "conv2d":
            g = d["groups"]
            return g, d["n"] * self.p * self.q, d["k"] // g, (d["c"] // g) * d["r"] * d["s"]
        if self.kind == "gemm":
            return d["b"], d["m"], d["n"], d["k"]
        raise WorkloadError(f"{self.kind} workload has no GEMM view")

    @property
    def macs(self) -> int:
        if not self.is_mac:
            return 0
        g, m, n, k = self.gemm_view()
        return g * m * n * k

    def operand_elems(self) -> dict[str, int]:
        """Elements of each operand as stored in DRAM: input (real tensor, not im2col), weight, output."""
        d = self.d
        if self.kind == "conv2d":
            return {"ifmap": d["n"] * d["c"] * d["h"] * d["w"],
                    "weight": d["k"] * (d["c"] // d["groups"]) * d["r"] * d["s"],
                    "output": d["n"] * d["k"] * self.p * self.q}
        if self.kind == "gemm":
            return {"ifmap": d["b"] * d["m"] * d["k"], "weight": d["b"] * d["k"] * d["n"],
                    "output": d["b"] * d["m"] * d["n"]}
        return {"ifmap": d["in_elems"], "weight": 0, "output": d["out_elems"]}

    @property
    def key(self) -> str:
        """Stable identity of the workload (tuning records are keyed by it)."""
        body = ",".join(f"{k}={v}" for k, v in self.dims)
        epi = "+".join(self.epilogue)
        return f"{self.kind}({body})x{self.dtype_bytes}B" + (f"|{epi}" if epi else "")

    def __str__(self) -> str:
        return self.key
