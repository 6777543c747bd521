"""dft (ONNX DFT, opsets 17 and 20) and det (ONNX Det): host-only numerics.

dft: x [..., N, ..., 1 | 2] (real, or complex as (re, im) pairs in the last axis) transformed along
``axis`` (< rank - 1) with ``length`` points (zero-padded or truncated): forward, ``onesided`` keeping
the first length // 2 + 1 frequencies; ``inverse`` divides by length, and inverse + onesided takes
a half spectrum back to a real signal (last axis 1). Cost: 5 N log2 N FLOPs per transformed line.
det: the determinant of each trailing [M, M] matrix (LU: 2/3 M^3 FLOPs each).
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import TensorType
from .base import OpCost, OpDef, check


def _dft_params(x: TensorType, attrs: dict) -> tuple[int, int, bool, bool]:
    rank = len(x.shape)
    check(rank >= 2 and x.shape[-1] in (1, 2),
          f"dft: input must end in an axis of 1 (real) or 2 (complex), got shape {list(x.shape)}")
    check(np.issubdtype(np.dtype(x.dtype), np.floating), f"dft: input must be float, got {x.dtype}")
    axis = int(attrs.get("axis", 1))
    check(0 <= axis < rank - 1, f"dft: axis {axis} must name a signal axis of shape {list(x.shape)} "
                                f"(not the last, complex one)")
    inverse, onesided = bool(attrs.get("inverse", False)), bool(attrs.get("onesided", False))
    length = attrs.get("length")
    if length is None:
        length = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    check(int(length) >= 1, f"dft: length must be >= 1, got {length}")
    return axis, int(length), inverse, onesided


def _dft_infer(ins, attrs, ctx):
    x = ins[0]
    axis, n, inverse, onesided = _dft_params(x, attrs)
    shape = list(x.shape)
    shape[axis] = n // 2 + 1 if onesided and not inverse else n
    shape[-1] = 1 if inverse and onesided else 2
    return [TensorType(tuple(shape), x.dtype)]


def _dft(args, attrs):
    x = np.asarray(args[0])
    if len(args) == 2:
        # an axis computed at run time (the type came from the declared shape): read, then checked
        a = np.asarray(args[1]).reshape(-1)
        check(a.size == 1 and a.dtype.kind in "iu", f"dft: axis must be one integer, got {a.tolist()}")
        axis = int(a[0]) + x.ndim if int(a[0]) < 0 else int(a[0])
        out = _dft([x], dict(attrs, axis=axis))[0]
        check(out.shape == tuple(attrs["declared"]), f"dft: axis {int(a[0])} at run time gives shape "
              f"{list(out.shape)}, not the declared {list(attrs['declared'])}")
        return [out]
    axis, n, inverse, onesided = _dft_params(TensorType(x.shape, x.dtype.name), attrs)
    # in the input's precision (numpy's FFT keeps float32 as complex64), as onnx's reference does
    sig = x[..., 0] + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    if inverse and onesided:
        out = np.fft.irfft(sig, n=n, axis=axis)[..., None]
    elif inverse:
        y = np.fft.ifft(sig, n=n, axis=axis)
        out = np.stack([y.real, y.imag], axis=-1)
    else:
        y = np.fft.fft(sig, n=n, axis=axis)
        if onesided:
            y = np.take(y, range(n // 2 + 1), axis=axis)
        out = np.stack([y.real, y.imag], axis=-1)
    return [out.astype(x.dtype)]


def _dft_cost(ins, outs, attrs):
    axis, n, _, _ = _dft_params(ins[0], attrs)
    lines = outs[0].size // max(1, outs[0].shape[axis] * outs[0].shape[-1])
    return OpCost(0, int(lines * 5 * n * max(1.0, math.log2(n))), ins[0].nbytes, outs[0].nbytes)


WINDOWS = ("hann", "hamming", "blackman")


def _window_infer(ins, attrs, ctx):
    check(attrs.get("kind") in WINDOWS, f"window: kind must be one of {', '.join(WINDOWS)}")
    check(ins[0].size == 1 and ins[0].dtype in ("int32", "int64"), "window: size must be one integer")
    check(int(attrs.get("length", 0)) >= 0, "window: length must be >= 0")
    return [TensorType((int(attrs["length"]),), str(attrs.get("dtype", "float32")))]


def _window(args, attrs):
    """ONNX HannWindow/HammingWindow/BlackmanWindow (float64, then the output type, as onnx's
    reference); the size is read at run time and must be the typed length."""
    size = int(np.asarray(args[0]).reshape(-1)[0])
    check(size == int(attrs["length"]), f"window: size {size} at run time is not the declared length "
                                         f"{attrs['length']}")
    n = np.arange(size, dtype=np.float64)
    period = size if attrs.get("periodic", True) else size - 1
    w = 2 * np.pi * n / period if period else np.zeros(size)
    kind = attrs["kind"]
    if kind == "hann":
        y = np.sin(w / 2) ** 2
    elif kind == "hamming":
        y = 25.0 / 46.0 - (21.0 / 46.0) * np.cos(w)
    else:
        y = 0.42 - 0.5 * np.cos(w) + 0.08 * np.cos(2 * w)
    return [y.astype(np.dtype(attrs.get("dtype", "float32")))]


def _det_infer(ins, attrs, ctx):
    x = ins[0]
    check(len(x.shape) >= 2 and x.shape[-1] == x.shape[-2],
          f"det: input must end in square matrices, got shape {list(x.shape)}")
    check(np.issubdtype(np.dtype(x.dtype), np.floating), f"det: input must be float, got {x.dtype}")
    return [TensorType(x.shape[:-2], x.dtype)]


def _det(args, attrs):
    x = np.asarray(args[0])
    return [np.asarray(np.linalg.det(x.astype(np.float64))).astype(x.dtype)]


def _det_cost(ins, outs, attrs):
    m = ins[0].shape[-1]
    return OpCost(0, max(1, outs[0].size) * (2 * m ** 3) // 3, ins[0].nbytes, outs[0].nbytes)


DEFS = [
    OpDef("dft", _dft_infer, _dft, _dft_cost, "other", (1, 2)),
    OpDef("det", _det_infer, _det, _det_cost, "other", (1, 1)),
    OpDef("window", _window_infer, _window, lambda i, o, a: OpCost(0, 6 * o[0].size, 0, o[0].nbytes), "other", (1, 1)),
]
