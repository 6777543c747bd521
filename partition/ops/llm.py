"""Ops of decoder LLMs that the other op modules do not have: RMS normalisation, rotary position
embedding, the in-place KV-cache append, and the collectives of tensor and pipeline parallel
(all-reduce, send, recv).

- ``rms_norm(x, gamma)``: ``x / sqrt(mean(x^2 over the last axis) + epsilon) * gamma`` (Llama,
  Mistral, Qwen; ONNX's RMSNormalization with axis -1). 4 FLOPs per element (square, sum, scale,
  mul gamma) plus the per-row rsqrt amortised as 0.
- ``rotary_embedding(x)``: x is ``(..., T, head_dim)``; the first ``rotary_dim`` features of every
  position ``t`` (``position + t``) are rotated by ``theta ** (-2i / rotary_dim)`` per pair, in the
  rotate-half layout (GPT-NeoX / Llama) or the interleaved one (``interleaved=1``, GPT-J). 3 FLOPs
  per rotated element (two multiplies, one add).
- ``kv_append(cache, new)``: the cache ``(B, KV, L, D)`` with ``new`` ``(B, KV, T, D)`` written at
  positions ``L - T .. L - 1``. It stands for an in-place write into device-resident state: its cost
  is the T new tokens, never a copy of the cache (``bytes_in`` counts ``new`` only).
- ``all_reduce(x1, ..., xn)``: the sum of the partial results of a tensor-parallel group of
  ``group_size`` devices. A per-device graph passes one input (its own partial); the reference sums
  the inputs it is given, so a test that passes every partial gets the group's result.
- ``send(x)`` / ``recv(x)``: a tensor leaving one pipeline stage for ``peer`` and arriving at the next
  (identity numerics; the interconnect costs them).
"""
from __future__ import annotations

import numpy as np

from ..ir import TensorType
from .base import OpCost, OpDef, check, elementwise_cost, zero_cost


def _float(op: str, t: TensorType) -> None:
    check(np.dtype(t.dtype).kind == "f", f"{op}: input must be a float tensor, got {t.dtype}")


# ---------------------------------------------------------------------------- rms_norm
def _infer_rms(ins, attrs, ctx):
    x, g = ins
    _float("rms_norm", x)
    check(len(x.shape) >= 1, "rms_norm: input must have rank >= 1")
    check(g.shape == (x.shape[-1],), f"rms_norm: gamma must have shape [{x.shape[-1]}], got {list(g.shape)}")
    return [TensorType(x.shape, x.dtype)]


def _rms(args, attrs):
    x, g = np.asarray(args[0]), np.asarray(args[1])
    eps = float(attrs.get("epsilon", 1e-6))
    xd = x.astype(np.float64)
    y = xd / np.sqrt(np.mean(xd * xd, axis=-1, keepdims=True) + eps) * g.astype(np.float64)
    return [y.astype(x.dtype)]


# ---------------------------------------------------------------------------- rotary_embedding
def _rotary_params(x: TensorType, attrs) -> tuple[int, int, float, bool]:
    check(len(x.shape) >= 2, f"rotary_embedding: input must be (..., T, head_dim), got {list(x.shape)}")
    d = x.shape[-1]
    rd = int(attrs.get("rotary_dim", d))
    pos = int(attrs.get("position", 0))
    theta = float(attrs.get("theta", 10000.0))
    check(0 < rd <= d and rd % 2 == 0, f"rotary_embedding: rotary_dim {rd} must be even and in 1..{d}")
    check(pos >= 0, f"rotary_embedding: position must be >= 0, got {pos}")
    check(theta > 1.0, f"rotary_embedding: theta must be > 1, got {theta}")
    return rd, pos, theta, bool(attrs.get("interleaved", 0))


def _infer_rotary(ins, attrs, ctx):
    x = ins[0]
    _float("rotary_embedding", x)
    _rotary_params(x, attrs)
    return [TensorType(x.shape, x.dtype)]


def _rotary(args, attrs):
    x = np.asarray(args[0])
    rd, pos, theta, inter = _rotary_params(TensorType(x.shape, x.dtype.name), attrs)
    t = x.shape[-2]
    inv = theta ** (-np.arange(0, rd, 2, dtype=np.float64) / rd)          # (rd/2,)
    ang = (pos + np.arange(t, dtype=np.float64))[:, None] * inv[None, :]  # (T, rd/2)
    cos, sin = np.cos(ang), np.sin(ang)
    xr = x[..., :rd].astype(np.float64)
    if inter:  # GPT-J: pairs (0,1), (2,3), ...
        a, b = xr[..., 0::2], xr[..., 1::2]
        out = np.empty_like(xr)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = b * cos + a * sin
    else:      # rotate-half: pairs (i, i + rd/2)
        h = rd // 2
        a, b = xr[..., :h], xr[..., h:]
        out = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    y = x.copy()
    y[..., :rd] = out.astype(x.dtype)
    return [y]


def _cost_rotary(ins, outs, attrs):
    x = ins[0]
    rd = _rotary_params(x, attrs)[0]
    rotated = x.size // x.shape[-1] * rd
    return OpCost(0, 3 * rotated, x.nbytes, outs[0].nbytes)


# ---------------------------------------------------------------------------- kv_append
def _infer_kv_append(ins, attrs, ctx):
    cache, new = ins
    check(len(cache.shape) == 4 and len(new.shape) == 4,
          f"kv_append: cache and new must be 4-D (B, KV heads, tokens, head_dim), got {list(cache.shape)} "
          f"and {list(new.shape)}")
    check(cache.dtype == new.dtype, f"kv_append: cache dtype {cache.dtype} differs from new {new.dtype}")
    b, h, length, d = cache.shape
    check(new.shape[:2] == (b, h) and new.shape[3] == d,
          f"kv_append: new {list(new.shape)} does not match cache {list(cache.shape)} outside the token axis")
    check(new.shape[2] <= length, f"kv_append: {new.shape[2]} new tokens do not fit a cache of {length}")
    return [TensorType(cache.shape, cache.dtype)]


def _kv_append(args, attrs):
    cache, new = np.asarray(args[0]), np.asarray(args[1])
    out = cache.copy()
    out[:, :, cache.shape[2] - new.shape[2]:] = new
    return [out]


def _cost_kv_append(ins, outs, attrs):
    return OpCost(0, 0, ins[1].nbytes, ins[1].nbytes)  # in place: the new tokens are read and written


# ---------------------------------------------------------------------------- collectives
def _infer_all_reduce(ins, attrs, ctx):
    n = int(attrs.get("group_size", len(ins)))
    check(n >= 1, f"all_reduce: group_size must be >= 1, got {n}")
    check(len(ins) in (1, n), f"all_reduce: takes one partial (this device's) or all {n}, got {len(ins)}")
    check(all(t == ins[0] for t in ins), "all_reduce: every partial must have the same shape and dtype")
    return [ins[0]]


def _all_reduce(args, attrs):
    out = np.asarray(args[0]).copy()
    for a in args[1:]:
        out = out + np.asarray(a)
    return [out.astype(np.asarray(args[0]).dtype, copy=False)]


def _cost_all_reduce(ins, outs, attrs):
    # the additions of the reduction: (N - 1) per element over the group, a share of 1/N each
    n = int(attrs.get("group_size", len(ins)))
    per = (n - 1) / n if n else 0
    return OpCost(0, int(outs[0].size * per), ins[0].nbytes, outs[0].nbytes)


def _infer_p2p(name: str):
    def infer(ins, attrs, ctx):
        peer = attrs.get("peer", 0)
        check(isinstance(peer, (int, np.integer)) and not isinstance(peer, bool) and peer >= 0,
              f"{name}: peer must be a stage index >= 0, got {peer!r}")
        return [ins[0]]
    return infer


DEFS = [
    OpDef("rms_norm", _infer_rms, _rms, elementwise_cost(4), "norm", (2, 2)),
    OpDef("rotary_embedding", _infer_rotary, _rotary, _cost_rotary, "elementwise", (1, 1)),
    OpDef("kv_append", _infer_kv_append, _kv_append, _cost_kv_append, "data", (2, 2)),
    OpDef("all_reduce", _infer_all_reduce, _all_reduce, _cost_all_reduce, "collective", (1, 1 << 16)),
    OpDef("send", _infer_p2p("send"), lambda a, k: [np.asarray(a[0])], zero_cost, "collective", (1, 1)),
    OpDef("recv", _infer_p2p("recv"), lambda a, k: [np.asarray(a[0])], zero_cost, "collective", (1, 1)),
]
