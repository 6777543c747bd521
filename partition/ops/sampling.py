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


# ---------------------------------------------------------------------------- deform_conv
def _dc_params(ins, attrs):
    """deform_conv(x, w, offset, bias?, mask?) (ONNX DeformConv, 2-D): every sampling point of a
    convolution window moved by its offset (bilinear, zeros outside) and scaled by its mask."""
    x, w, off = ins[0], ins[1], ins[2]
    check(len(x.shape) == 4 and len(w.shape) == 4, f"deform_conv: only 2-D (NCHW input, 4-D weight) is supported, "
                                                   f"got {list(x.shape)} and {list(w.shape)}")
    n, c, h, wd = x.shape
    oc, cpg, kh, kw = w.shape
    g, og = int(attrs.get("groups", 1)), int(attrs.get("offset_groups", 1))
    check(c == cpg * g and oc % g == 0, f"deform_conv: {c} input channels do not fit weight {list(w.shape)} "
                                        f"in {g} groups")
    check(c % og == 0, f"deform_conv: {c} channels are not divisible by offset_group {og}")
    s, d, p = attrs.get("strides", (1, 1)), attrs.get("dilations", (1, 1)), attrs.get("pads", (0, 0, 0, 0))
    oh = (h + p[0] + p[2] - ((kh - 1) * d[0] + 1)) // s[0] + 1
    ow = (wd + p[1] + p[3] - ((kw - 1) * d[1] + 1)) // s[1] + 1
    check(oh >= 1 and ow >= 1, f"deform_conv: no output positions for input {list(x.shape)}")
    check(off.shape == (n, og * kh * kw * 2, oh, ow),
          f"deform_conv: offset must have shape {[n, og * kh * kw * 2, oh, ow]}, got {list(off.shape)}")
    if len(ins) > 3:
        check(ins[3].shape == (oc,), f"deform_conv: bias must have shape [{oc}], got {list(ins[3].shape)}")
    if len(ins) > 4:
        check(ins[4].shape == (n, og * kh * kw, oh, ow),
              f"deform_conv: mask must have shape {[n, og * kh * kw, oh, ow]}, got {list(ins[4].shape)}")
    return n, c, h, wd, oc, cpg, kh, kw, g, og, s, d, p, oh, ow


def _dc_infer(ins, attrs, ctx):
    n, _, _, _, oc, _, _, _, _, _, _, _, _, oh, ow = _dc_params(ins, attrs)
    return [TensorType((n, oc, oh, ow), ins[0].dtype)]


def _deform_conv(args, attrs):
    arrs = [np.asarray(a) for a in args]
    x, w, off = arrs[0], arrs[1].astype(np.float64), arrs[2].astype(np.float64)
    n, c, h, wd, oc, cpg, kh, kw, g, og, s, d, p, oh, ow = _dc_params(
        [TensorType(a.shape, a.dtype.name) for a in arrs], attrs)
    off = off.reshape(n, og, kh, kw, 2, oh, ow)
    mask = arrs[4].astype(np.float64).reshape(n, og, kh, kw, oh, ow) if len(arrs) > 4 else np.ones((n, og, kh, kw, oh, ow))
    rows = (np.arange(oh) * s[0] - p[0])[None, None, :, None] + (np.arange(kh) * d[0])[:, None, None, None]
    cols = (np.arange(ow) * s[1] - p[1])[None, None, None, :] + (np.arange(kw) * d[1])[None, :, None, None]
    xf = x.astype(np.float64)
    batch = np.arange(n).reshape(n, 1, 1, 1, 1)
    per = c // og
    sampled = np.zeros((n, c, kh, kw, oh, ow))
    for gi in range(og):
        ch = off[:, gi, :, :, 0] + rows  # (N, kh, kw, OH, OW) in pixels
        cw = off[:, gi, :, :, 1] + cols
        xs = xf[:, gi * per:(gi + 1) * per]
        acc = np.zeros((n, kh, kw, oh, ow, per))
        for (hi, hw, hv), (wi, ww, wv) in itertools.product(_axis_taps(ch, h, "linear", "zeros", True),
                                                            _axis_taps(cw, wd, "linear", "zeros", True)):
            acc += np.where(hv & wv, hw * ww, 0.0)[..., None] * xs[batch, :, hi, wi]
        sampled[:, gi * per:(gi + 1) * per] = np.moveaxis(acc * mask[:, gi][..., None], -1, 1)
    out = np.empty((n, oc, oh, ow))
    opg = oc // g
    for gi in range(g):
        out[:, gi * opg:(gi + 1) * opg] = np.einsum("nckrij,ockr->noij", sampled[:, gi * cpg:(gi + 1) * cpg],
                                                    w[gi * opg:(gi + 1) * opg], optimize=True)
    if len(arrs) > 3:
        out += arrs[3].astype(np.float64).reshape(1, oc, 1, 1)
    return [out.astype(x.dtype)]


def _dc_cost(ins, outs, attrs):
    _, _, _, _, _, cpg, kh, kw, _, _, _, _, _, _, _ = _dc_params(ins, attrs)
    macs = outs[0].size * cpg * kh * kw
    sample = ins[0].shape[0] * ins[0].shape[1] * kh * kw * outs[0].shape[2] * outs[0].shape[3] * 8
    return OpCost(macs, 2 * macs + sample, sum(t.nbytes for t in ins), outs[0].nbytes)


def _infer_affine_grid(ins, attrs, ctx):
    theta, size = ins
    shape = tuple(int(d) for d in attrs.get("declared", ()))
    k = len(shape) - 2
    check(k in (2, 3), f"affine_grid: the output shape {list(shape)} must be [N, H, W, 2] or [N, D, H, W, 3]")
    check(theta.shape == (shape[0], k, k + 1), f"affine_grid: theta must be {[shape[0], k, k + 1]}, got "
                                               f"{list(theta.shape)}")
    check(shape[-1] == k and size.shape == (k + 2,), f"affine_grid: size must hold {k + 2} values")
    check(np.issubdtype(np.dtype(theta.dtype), np.floating), f"affine_grid: theta must be float, got {theta.dtype}")
    return [TensorType(shape, theta.dtype)]


def _affine_grid(args, attrs):
    """ONNX AffineGrid: normalised coordinates of each output pixel (x along W first, then y, z;
    pixel centres, or the corners with align_corners) mapped through theta. The size is read at run
    time and must give the typed shape."""
    theta = np.asarray(args[0])
    size = [int(v) for v in np.asarray(args[1]).reshape(-1)]
    spatial = size[2:]
    want = tuple(int(d) for d in attrs["declared"])
    got = (size[0], *spatial, len(spatial))
    check(got == want, f"affine_grid: size {size} at run time gives shape {list(got)}, not the declared {list(want)}")
    if attrs.get("align_corners"):
        axes = [np.linspace(-1.0, 1.0, n) for n in spatial]
    else:
        axes = [(2 * np.arange(n) + 1) / n - 1 for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # (D,) H, W
    base = np.stack([*mesh[::-1], np.ones(mesh[0].shape)], axis=-1)  # x, y, (z), 1
    grid = np.einsum("...j,nij->n...i", base, theta.astype(np.float64))
    return [grid.astype(theta.dtype)]


def _cost_affine_grid(ins, outs, attrs):
    k = outs[0].shape[-1]
    return OpCost(outs[0].size * (k + 1), 2 * outs[0].size * (k + 1), ins[0].nbytes, outs[0].nbytes)


DEFS = [OpDef("grid_sample", _infer, _compute, _cost, "other", (2, 2)),
        OpDef("affine_grid", _infer_affine_grid, _affine_grid, _cost_affine_grid, "other", (2, 2)),
        OpDef("deform_conv", _dc_infer, _deform_conv, _dc_cost, "other", (3, 5))]
