"""dft (ONNX DFT, opsets 17 and 20), stft (ONNX STFT), mel_weight_matrix (ONNX MelWeightMatrix)
and det (ONNX Det): host-only numerics.

dft: x [..., N, ..., 1 | 2] (real, or complex as (re, im) pairs in the last axis) transformed along
``axis`` (< rank - 1) with ``length`` points (zero-padded or truncated): forward, ``onesided`` keeping
the first length // 2 + 1 frequencies; ``inverse`` divides by length, and inverse + onesided takes
a half spectrum back to a real signal (last axis 1). Cost: 5 N log2 N FLOPs per transformed line.
stft: signal [B, L, 1 | 2] cut into frames of frame_length every frame_step samples (frames =
1 + (L - frame_length) // frame_step), each times the window, then a DFT of frame_length points
(the first frame_length // 2 + 1 with onesided): [B, frames, bins, 2]. frame_step and frame_length
are attributes when constant; computed at run time they are extra inputs and the output is typed by
the declared shape. Cost: per frame the window product and 5 N log2 N FLOPs.
mel_weight_matrix: [dft_length // 2 + 1, num_mel_bins] triangular filters from five scalars (run-time
inputs: the shape is the declared one), as onnx's reference computes them.
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


def _stft_shape(sig: TensorType, step: int, length: int, onesided: bool) -> tuple[int, ...]:
    check(len(sig.shape) == 3 and sig.shape[2] in (1, 2),
          f"stft: signal must be [batch, length, 1 | 2], got shape {list(sig.shape)}")
    check(np.issubdtype(np.dtype(sig.dtype), np.floating), f"stft: signal must be float, got {sig.dtype}")
    check(step >= 1 and 1 <= length <= sig.shape[1],
          f"stft: frame_step {step} must be >= 1 and frame_length {length} within the signal's {sig.shape[1]}")
    check(not (onesided and sig.shape[2] == 2), "stft: onesided needs a real signal (last axis 1)")
    return (sig.shape[0], 1 + (sig.shape[1] - length) // step, length // 2 + 1 if onesided else length, 2)


def _stft_args(args, attrs) -> tuple[np.ndarray, np.ndarray | None, int, int]:
    """The signal, window, frame_step and frame_length, run-time ones read from the extra inputs."""
    rest = list(args[1:])
    window = rest.pop(0) if attrs.get("window") else None
    step = int(np.asarray(rest.pop(0)).reshape(-1)[0]) if attrs.get("frame_step") is None else int(attrs["frame_step"])
    if attrs.get("frame_length") is not None:
        length = int(attrs["frame_length"])
    elif rest:
        length = int(np.asarray(rest.pop(0)).reshape(-1)[0])
    else:
        length = int(np.shape(window)[0])
    return np.asarray(args[0]), window, step, length


def _stft_infer(ins, attrs, ctx):
    if "declared" in attrs:
        out = tuple(int(d) for d in attrs["declared"])
        check(len(out) == 4 and out[0] == ins[0].shape[0] and out[3] == 2,
              f"stft: the declared shape {list(out)} is not [batch, frames, bins, 2]")
        return [TensorType(out, ins[0].dtype)]
    length = attrs.get("frame_length")
    if length is None:
        check(bool(attrs.get("window")), "stft: needs a window or a frame_length")
        length = ins[1].shape[0]
    if attrs.get("window"):
        check(ins[1].shape == (int(length),), f"stft: window shape {list(ins[1].shape)} is not [frame_length] "
                                              f"= [{length}]")
    return [TensorType(_stft_shape(ins[0], int(attrs["frame_step"]), int(length),
                                   bool(attrs.get("onesided", True))), ins[0].dtype)]


def _stft(args, attrs):
    x, window, step, length = _stft_args(args, attrs)
    onesided = bool(attrs.get("onesided", True))
    shape = _stft_shape(TensorType(x.shape, x.dtype.name), step, length, onesided)
    check(window is None or np.shape(window) == (length,),
          f"stft: window shape {list(np.shape(window))} is not [frame_length] = [{length}]")
    check("declared" not in attrs or shape == tuple(attrs["declared"]),
          f"stft: frame_step {step} and frame_length {length} at run time give shape {list(shape)}, "
          f"not the declared {list(attrs.get('declared', ()))}")
    sig = x[..., 0].astype(np.float64) + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    starts = np.arange(shape[1]) * step
    frames = sig[:, starts[:, None] + np.arange(length)[None, :]]  # [B, frames, length]
    if window is not None:
        frames = frames * np.asarray(window, np.float64)
    y = np.fft.fft(frames, axis=-1)[..., :shape[2]]
    return [np.stack([y.real, y.imag], axis=-1).astype(x.dtype)]


def _stft_cost(ins, outs, attrs):
    b, frames, bins, _ = outs[0].shape
    n = bins if not attrs.get("onesided", True) else max(1, 2 * (bins - 1))
    per_frame = n + int(5 * n * max(1.0, math.log2(n)))
    return OpCost(0, b * frames * per_frame, sum(t.nbytes for t in ins), outs[0].nbytes)


def _mel_infer(ins, attrs, ctx):
    check(all(t.size == 1 for t in ins), "mel_weight_matrix: its five inputs must be scalars")
    out = tuple(int(d) for d in attrs["declared"])
    check(len(out) == 2 and min(out) >= 1, f"mel_weight_matrix: the declared shape {list(out)} is not 2-D")
    return [TensorType(out, str(attrs.get("dtype", "float32")))]


def _mel(args, attrs):
    """ONNX MelWeightMatrix as onnx's reference: mel points spaced by (high - low) / (bins + 2)
    (the reference's step), rounded down to DFT bins, triangular filters between them."""
    bins, dft_len, rate = (int(np.asarray(a).reshape(-1)[0]) for a in args[:3])
    low, high = (float(np.asarray(a).reshape(-1)[0]) for a in args[3:5])
    spec_bins = dft_len // 2 + 1
    check((spec_bins, bins) == tuple(attrs["declared"]), f"mel_weight_matrix: num_mel_bins {bins} and "
          f"dft_length {dft_len} at run time give shape {[spec_bins, bins]}, not the declared "
          f"{list(attrs['declared'])}")
    check(rate > 0 and 0 <= low < high, f"mel_weight_matrix: needs sample_rate > 0 and 0 <= lower edge "
                                        f"< upper edge, got {rate}, {low}, {high}")
    lo_mel, hi_mel = (2595 * np.log1p(f / 700) / np.log(10) for f in (low, high))
    pts = np.arange(bins + 2) * ((hi_mel - lo_mel) / (bins + 2)) + lo_mel
    hz = 700 * np.expm1(pts / 2595 * np.log(10))
    edge = (((dft_len + 1) * hz) // rate).astype(np.int64)
    check(bool((edge < spec_bins).all()), f"mel_weight_matrix: the upper edge {high} Hz is above the "
                                          f"{spec_bins} DFT bins of sample_rate {rate}")
    out = np.zeros((spec_bins, bins))
    for i in range(bins):
        lo, mid, hi = edge[i], edge[i + 1], edge[i + 2]
        if mid == lo:
            out[mid, i] = 1.0
        else:
            out[lo:mid + 1, i] = (np.arange(lo, mid + 1) - lo) / (mid - lo)
        if hi > mid:
            out[mid:hi, i] = (hi - np.arange(mid, hi)) / (hi - mid)
    return [out.astype(np.dtype(attrs.get("dtype", "float32")))]


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
    OpDef("stft", _stft_infer, _stft, _stft_cost, "other", (1, 4)),
    OpDef("mel_weight_matrix", _mel_infer, _mel, lambda i, o, a: OpCost(0, 4 * o[0].size, 0, o[0].nbytes),
          "other", (5, 5)),
    OpDef("window", _window_infer, _window, lambda i, o, a: OpCost(0, 6 * o[0].size, 0, o[0].nbytes), "other", (1, 1)),
]
