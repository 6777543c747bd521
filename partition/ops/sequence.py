"""Sequence data movement: reverse_sequence (ONNX ReverseSequence) and tensor_scatter (ONNX
TensorScatter, opset 24: a KV-cache write). Both keep their first input's shape, so their index
inputs (sequence lengths, write positions) may be computed at run time. Cost: data movement only.
"""
from __future__ import annotations

import numpy as np

from ..ir import TensorType
from .base import OpDef, check, zero_cost
from .tensor import norm_axis


def _rs_axes(x: TensorType, lens: TensorType, attrs: dict) -> tuple[int, int]:
    check(len(x.shape) >= 2, f"reverse_sequence: input must have rank >= 2, got shape {list(x.shape)}")
    b = norm_axis(attrs.get("batch_axis", 1), len(x.shape), "reverse_sequence")
    t = norm_axis(attrs.get("time_axis", 0), len(x.shape), "reverse_sequence")
    check(b != t and {b, t} <= {0, 1}, f"reverse_sequence: batch_axis {b} and time_axis {t} must be 0 and 1")
    check(lens.shape == (x.shape[b],) and np.issubdtype(np.dtype(lens.dtype), np.integer),
          f"reverse_sequence: sequence_lens must be {x.shape[b]} integers, got {lens}")
    return b, t


def _rs_infer(ins, attrs, ctx):
    _rs_axes(ins[0], ins[1], attrs)
    return [TensorType(ins[0].shape, ins[0].dtype)]


def _reverse_sequence(args, attrs):
    x, lens = np.asarray(args[0]), np.asarray(args[1]).astype(np.int64)
    b, t = _rs_axes(TensorType(x.shape, x.dtype.name), TensorType(lens.shape, lens.dtype.name), attrs)
    n = x.shape[t]
    check(bool(np.all((lens >= 0) & (lens <= n))), f"reverse_sequence: sequence_lens {lens.tolist()} outside 0..{n}")
    xs = np.moveaxis(x, (b, t), (0, 1))  # (B, T, ...)
    pos = np.arange(n)[None, :]
    src = np.where(pos < lens[:, None], lens[:, None] - 1 - pos, pos)  # (B, T)
    ys = np.take_along_axis(xs, src.reshape(src.shape + (1,) * (xs.ndim - 2)), axis=1)
    return [np.ascontiguousarray(np.moveaxis(ys, (0, 1), (b, t)))]


def _ts_axis(past: TensorType, update: TensorType, attrs: dict) -> int:
    rank = len(past.shape)
    check(rank >= 2, f"tensor_scatter: past_cache must have rank >= 2, got shape {list(past.shape)}")
    axis = norm_axis(attrs.get("axis", -2), rank, "tensor_scatter")
    check(axis > 0, "tensor_scatter: axis must not be the batch axis 0")
    check(len(update.shape) == rank and all(u == p for i, (u, p) in enumerate(zip(update.shape, past.shape))
                                            if i != axis) and update.shape[axis] <= past.shape[axis],
          f"tensor_scatter: update shape {list(update.shape)} must match past_cache {list(past.shape)} "
          f"except a shorter axis {axis}")
    check(update.dtype == past.dtype, f"tensor_scatter: update dtype {update.dtype} differs from {past.dtype}")
    check(attrs.get("mode", "linear") in ("linear", "circular"),
          f"tensor_scatter: mode must be 'linear' or 'circular', got {attrs.get('mode')!r}")
    return axis


def _ts_infer(ins, attrs, ctx):
    _ts_axis(ins[0], ins[1], attrs)
    if len(ins) > 2:
        check(ins[2].shape == (ins[0].shape[0],), f"tensor_scatter: write_indices must have shape "
                                                  f"[{ins[0].shape[0]}], got {list(ins[2].shape)}")
    return [TensorType(ins[0].shape, ins[0].dtype)]


def _tensor_scatter(args, attrs):
    past, update = np.asarray(args[0]), np.asarray(args[1])
    axis = _ts_axis(TensorType(past.shape, past.dtype.name), TensorType(update.shape, update.dtype.name), attrs)
    starts = np.asarray(args[2]).astype(np.int64) if len(args) > 2 else np.zeros(past.shape[0], np.int64)
    size, seq = past.shape[axis], update.shape[axis]
    out = past.copy()
    for b in range(past.shape[0]):
        pos = starts[b] + np.arange(seq)
        if attrs.get("mode", "linear") == "circular":
            pos = pos % size
        check(bool(np.all((pos >= 0) & (pos < size))),
              f"tensor_scatter: write index {int(starts[b])} + {seq} updates overruns the {size} cache slots")
        dst = np.moveaxis(out[b], axis - 1, 0)  # a view: writes land in out
        dst[pos] = np.moveaxis(update[b], axis - 1, 0)
    return [out]


DEFS = [
    OpDef("reverse_sequence", _rs_infer, _reverse_sequence, zero_cost, "data", (2, 2)),
    OpDef("tensor_scatter", _ts_infer, _tensor_scatter, zero_cost, "data", (2, 3)),
]
