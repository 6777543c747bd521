"""Offload targets: a name, an op-support predicate and a pattern table, plus partitioning options.

Built-in targets (``get(name)``):

- ``npu-gemm``: a matrix engine. Offloads conv2d, dense, matmul, gemm and batch_matmul in float32,
  each alone or fused with a bias, a batch_norm (conv2d), a residual add and an activation
  (composites named ``npu-gemm.<op>[_bias][_bn][_residual][_<activation>]``).
- ``npu-full``: the same engine plus a vector unit: pooling, softmax, layer_norm, batch_norm, gelu,
  elementwise arithmetic and activations, reductions and layout ops (reshape, transpose, concat...).

``build_target(name, ops, patterns)`` makes a target from plain lists, e.g. a hardware config's
supported ops and pattern names. Pattern names are ``<op>[_bias][_bn][_residual][_<activation>]`` with
op in conv2d, dense, matmul, gemm, batch_matmul (``_bn``, a following inference batch_norm, for
conv2d only) and activation in relu, relu6, clip, gelu, sigmoid, silu, tanh, hard_swish, leaky_relu
(``partition.patterns.pattern_names()`` lists them all), for example ``conv2d_bias_relu``,
``conv2d_bn_relu6``, ``conv2d_bias_residual_relu``, ``dense_bias_gelu``, ``matmul_bias``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .byoc.support import Support, all_of, dtype_in, op_in
from .ir import IRError
from .patterns import LINEAR_OPS, Match, PatternEntry, make_pattern_table, pattern_names

PRUNE_POLICIES = ("none", "no_compute")


class TargetError(IRError):
    """An unknown target, op or pattern name, or an inconsistent target."""


@dataclass(frozen=True)
class Target:
    """``is_supported(node)`` decides single ops; ``patterns`` (highest priority first) fuse ops
    into composites, which are supported by construction. ``share_identical_functions``: regions with
    the same structure, shapes and constants share one external function. ``prune_policy`` names
    which candidate regions stay on the host anyway: ``none``, or ``no_compute`` (regions made only
    of data-movement ops, which would cost a transfer and save nothing)."""
    name: str
    is_supported: Support
    patterns: tuple[PatternEntry, ...] = ()
    share_identical_functions: bool = True
    prune_policy: str = "no_compute"
    description: str = ""

    def __post_init__(self):
        if not self.name or any(c in self.name for c in ". \t\n/"):
            raise TargetError(f"bad target name {self.name!r}: use letters, digits, '-' and '_'")
        object.__setattr__(self, "patterns", tuple(self.patterns))
        for e in self.patterns:
            if not e.name.startswith(self.name + "."):
                raise TargetError(f"pattern {e.name!r} of target {self.name!r} must be named "
                                  f"'{self.name}.<pattern>'")
        if self.prune_policy not in PRUNE_POLICIES:
            raise TargetError(f"unknown prune policy {self.prune_policy!r}; known: {', '.join(PRUNE_POLICIES)}")


GEMM_OPS = LINEAR_OPS
VECTOR_OPS = (
    "bias_add", "batch_norm", "layer_norm", "softmax", "max_pool2d", "avg_pool2d", "global_avg_pool2d",
    "add", "sub", "mul", "div", "neg", "abs", "sqrt", "exp", "log", "reciprocal", "erf",
    "relu", "relu6", "clip", "gelu", "sigmoid", "tanh", "silu", "hard_sigmoid", "hard_swish", "leaky_relu",
    "identity", "reduce_mean", "reduce_sum", "reduce_max",
    "reshape", "flatten", "transpose", "squeeze", "unsqueeze", "concat",
)
_HOST_ONLY = frozenset({"if", "loop", "call"})


def _fused_names() -> list[str]:
    """Every pattern name except the bare op (which the support predicate already covers)."""
    return [n for n in pattern_names() if n not in LINEAR_OPS]


def _inputs_dtype_in(dtypes: frozenset[str]):
    def check(m: Match) -> bool:
        return all(v.dtype in dtypes for v in (*m.inputs, m.root))
    return check


def build_target(name: str, ops: Iterable[str], patterns: Iterable[str] = (),
                 dtypes: Iterable[str] = ("float32",), share_identical_functions: bool = True,
                 prune_policy: str = "no_compute", description: str = "") -> Target:
    """A target offloading ``ops`` (canonical op names) whose tensors all have one of ``dtypes``,
    with composites for ``patterns`` (plain names such as ``conv2d_bias_relu``)."""
    from .ops import OPS
    ops = tuple(dict.fromkeys(ops))
    unknown = [o for o in ops if o not in OPS or o in _HOST_ONLY]
    if unknown:
        known = sorted(set(OPS) - _HOST_ONLY)
        raise TargetError(f"target {name!r}: unknown or non-offloadable op(s) {', '.join(map(repr, unknown))}; "
                          f"known ops: {', '.join(known)}")
    try:
        dt = frozenset(np.dtype(d).name for d in dtypes)
    except TypeError as e:
        raise TargetError(f"target {name!r}: bad dtype ({e})") from None
    plain = [p.split(".", 1)[1] if p.startswith(name + ".") else p for p in patterns]
    bad = [p for p in plain if p not in set(pattern_names())]
    if bad:
        raise TargetError(f"target {name!r}: unknown pattern name(s) {', '.join(map(repr, bad))}; names are "
                          f"<op>[_bias][_residual][_<activation>], e.g. conv2d_bias_relu, dense_bias_gelu "
                          f"(partition.patterns.pattern_names() lists all {len(pattern_names())})")
    return Target(name=name, is_supported=all_of(op_in(ops), dtype_in(dt)),
                  patterns=make_pattern_table(name, plain, _inputs_dtype_in(dt)),
                  share_identical_functions=share_identical_functions, prune_policy=prune_policy,
                  description=description)


def _npu_gemm() -> Target:
    return build_target("npu-gemm", GEMM_OPS, _fused_names(),
                        description="matrix engine: conv2d/dense/matmul/gemm/batch_matmul with fused "
                                    "bias, residual add and activation")


def _npu_full() -> Target:
    return build_target("npu-full", GEMM_OPS + VECTOR_OPS, _fused_names(),
                        description="matrix engine plus vector unit: pooling, softmax, norms, "
                                    "elementwise, reductions and layout ops")


_BUILTINS = {"npu-gemm": _npu_gemm, "npu-full": _npu_full}


def names() -> tuple[str, ...]:
    return tuple(_BUILTINS)


def get(name: str) -> Target:
    """The built-in target called ``name``."""
    try:
        make = _BUILTINS[name]
    except (KeyError, TypeError):
        raise TargetError(f"unknown target {name!r}; known targets: {', '.join(_BUILTINS)}") from None
    return make()


__all__ = ["Target", "TargetError", "build_target", "get", "names", "GEMM_OPS", "VECTOR_OPS", "PRUNE_POLICIES"]
