"""grid_sample: ONNX GridSample (opset 16 for 4-D, 20 for N-D) on the host.

X (N, C, D1..Dk) is sampled at the normalized coordinates of grid (N, G1..Gm, k), whose last axis
lists them innermost spatial axis first (x, y[, z]). The coordinate rules are the spec's: unnormalize
by align_corners, round for nearest, move an outside coordinate in (border: clamp, reflection:
reflect about the borders), then read the 1 (nearest), 2 (linear) or 4 (cubic, Keys with a = -0.75)
taps per axis, each tap outside the tensor read through the padding mode (zeros: 0, border: the edge,
reflection: the mirrored element). Vectorized over all output points, looping over the taps only.

Cost: per output element, the tap products and sums (taps^k multiply-adds) and the coordinate
arithmetic (about 8 operations per axis).
"""
from __future__ import annotations

import itertools

import numpy as np

from ..ir import TensorType
from .base import OpCost, OpDef, check

MODES = ("nearest", "linear", "cubic")
PADDING = ("zeros", "border", "reflection")
_TAPS = {"nearest": 1, "linear": 2, "cubic": 4}


def _params(attrs: dict) -> tuple[str, str, bool]:
    mode = attrs.get("mode", "linear")
    pad = attrs.get("padding_mode", "zeros")
    check(mode in MODES, f"grid_sample: mode must be one of {', '.join(MODES)}, got {mode!r}")
    check(pad in PADDING, f"grid_sample: padding_mode must be one of {', '.join(PADDING)}, got {pad!r}")
    return mode, pad, bool(attrs.get("align_corners", False))


def _infer(ins, attrs, ctx):
    x, grid = ins
    _params(attrs)
    k = len(x.shape) - 2
    check(k >= 1, f"grid_sample: input must have rank >= 3 (N, C, spatial...), got shape {list(x.shape)}")
    check(len(grid.shape) == k + 2 and grid.shape[-1] == k and grid.shape[0] == x.shape[0],
          f"grid_sample: grid shape {list(grid.shape)} must be [N={x.shape[0]}, {k} output sizes, {k}] for "
          f"input shape {list(x.shape)}")
    check(np.issubdtype(np.dtype(grid.dtype), np.floating), f"grid_sample: grid must be float, got {grid.dtype}")
    return [TensorType((x.shape[0], x.shape[1], *grid.shape[1:-1]), x.dtype)]


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Reflect about lo and hi until inside (the spec's rule, whole periods removed first)."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dx = np.where(below, lo - x, x - hi)
    n = np.trunc(dx / span)
    r = dx - n * span
    even = (n % 2) == 0
    inside_below = np.where(even, lo + r, hi - r)
    inside_above = np.where(even, hi - r, lo + r)
    return np.where(below, inside_below, np.where(above, inside_above, x))


def _cubic(t: np.ndarray) -> list[np.ndarray]:
    """Keys' cubic weights (a = -0.75) of the taps at -1, 0, 1, 2 for fraction t."""
    a = -0.75
    w0 = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a
    w1 = ((a + 2) * t - (a + 3)) * t * t + 1
    w2 = ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1
    w3 = ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a
    return [w0, w1, w2, w3]


def _axis_taps(coord: np.ndarray, size: int, mode: str, pad: str, align: bool):
    """[(index, weight, valid)] for one axis: indices inside [0, size), weights, and whether the
    tap reads data (False: a zero from the zeros padding)."""
    lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
    x = coord.astype(np.float64)
    if mode == "nearest":
        x = np.rint(x)
    if pad == "border":
        x = np.where((x < lo) | (x > hi), np.clip(x, 0, size - 1), x)
    elif pad == "reflection":
        x = _reflect(x, lo, hi)
    if mode == "nearest":
        starts, weights = np.trunc(x).astype(np.int64), [np.ones_like(x)]
    else:
        base = np.floor(x)
        t = x - base
        starts = base.astype(np.int64) - (1 if mode == "cubic" else 0)
        weights = [1 - t, t] if mode == "linear" else _cubic(t)
    taps = []
    for j, w in enumerate(weights):
        i = starts + j
        if pad == "zeros":
            valid = (i >= 0) & (i < size)
            i = np.clip(i, 0, size - 1)
        elif pad == "border":
            valid, i = np.ones(i.shape, bool), np.clip(i, 0, size - 1)
        else:
            valid = np.ones(i.shape, bool)
            i = np.clip(np.trunc(_reflect(i.astype(np.float64), lo, hi)).astype(np.int64), 0, size - 1)
        taps.append((i, w, valid))
    return taps


def _compute(args, attrs):
    x, grid = np.asarray(args[0]), np.asarray(args[1])
    mode, pad, align = _params(attrs)
    n, k = x.shape[0], x.ndim - 2
    sizes = x.shape[2:]
    g = grid if grid.dtype in (np.float32, np.float64) else grid.astype(np.float32)
    one, two = g.dtype.type(1), g.dtype.type(2)
    coords = []
    for d in range(k):
        v = g[..., k - 1 - d]  # grid lists the innermost axis first
        size = g.dtype.type(sizes[d])
        coords.append((v + one) / two * (size - one) if align else ((v + one) * size - one) / two)
    per_axis = [_axis_taps(coords[d], sizes[d], mode, pad, align) for d in range(k)]
    batch = np.arange(n).reshape((n,) + (1,) * (grid.ndim - 2))
    acc = np.zeros(grid.shape[:-1] + (x.shape[1],), np.float64)
    xf = x.astype(np.float64)
    for combo in itertools.product(*per_axis):
        w = np.ones(grid.shape[:-1])
        valid = np.ones(grid.shape[:-1], bool)
        for _, wi, vi in combo:
            w = w * wi
            valid &= vi
        vals = xf[(batch, slice(None), *[i for i, _, _ in combo])]  # (N, G..., C)
        acc += np.where(valid, w, 0.0)[..., None] * vals
    return [np.moveaxis(acc, -1, 1).astype(x.dtype)]


def _cost(ins, outs, attrs):
    mode, _, _ = _params(attrs)
    k = len(ins[0].shape) - 2
    per = 2 * _TAPS[mode] ** k + 8 * k
    return OpCost(0, outs[0].size * per, sum(t.nbytes for t in ins), outs[0].nbytes)


DEFS = [OpDef("grid_sample", _infer, _compute, _cost, "other", (2, 2))]
