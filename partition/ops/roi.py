"""ONNX RoiAlign: bilinear sampling of each region of interest into a fixed grid (Faster/Mask
R-CNN's box heads). The number of regions usually comes out of NonMaxSuppression, so it is the
upper bound in the type and the actual count at run time, as every data-dependent size
(docs/IR.md). Numerics follow onnxruntime and onnx's reference: ``half_pixel`` shifts the box
by half a pixel, ``output_half_pixel`` widens boxes to at least one pixel, and ``max`` mode takes
the largest weighted corner of each sample (onnxruntime's definition)."""
from __future__ import annotations

import numpy as np

from ..ir import TensorType
from .base import OpCost, OpDef, check


def _params(attrs):
    oh, ow = int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1))
    sr = int(attrs.get("sampling_ratio", 0))
    mode = str(attrs.get("mode", "avg"))
    ctm = str(attrs.get("coordinate_transformation_mode", "half_pixel"))
    check(oh >= 1 and ow >= 1, f"roi_align: output size must be >= 1, got {oh}x{ow}")
    check(sr >= 0, f"roi_align: sampling_ratio must be >= 0, got {sr}")
    check(mode in ("avg", "max"), f"roi_align: mode must be avg or max, got {mode!r}")
    check(ctm in ("half_pixel", "output_half_pixel"),
          f"roi_align: coordinate_transformation_mode must be half_pixel or output_half_pixel, got {ctm!r}")
    return oh, ow, sr, mode, ctm == "half_pixel", float(attrs.get("spatial_scale", 1.0))


def _infer(ins, attrs, ctx):
    x, rois, idx = ins
    check(len(x.shape) == 4, f"roi_align: input must be NCHW, got {list(x.shape)}")
    check(len(rois.shape) == 2 and rois.shape[1] == 4, f"roi_align: rois must be [R, 4], got {list(rois.shape)}")
    check(idx.shape == (rois.shape[0],), f"roi_align: batch_indices must be [{rois.shape[0]}], got {list(idx.shape)}")
    check(x.dtype.startswith("float") and rois.dtype == x.dtype,
          f"roi_align: input and rois must be of one float type, got {x.dtype} and {rois.dtype}")
    oh, ow, *_ = _params(attrs)
    return [TensorType((rois.shape[0], x.shape[1], oh, ow), x.dtype)]


def _axis_samples(start: float, size: float, bins: int, grid: int) -> np.ndarray:
    """Sample coordinates along one axis: [bins, grid]."""
    b = size / bins
    return start + np.arange(bins)[:, None] * b + (np.arange(grid)[None, :] + 0.5) * b / grid


def _corners(c: np.ndarray, limit: int):
    """Low/high indices and weights of bilinear interpolation along one axis (onnxruntime's
    rule: a sample beyond [-1, limit] counts zero; one at the last pixel uses it twice)."""
    valid = (c >= -1.0) & (c <= limit)
    c = np.maximum(c, 0.0)
    low = np.floor(c).astype(np.int64)
    at_end = low >= limit - 1
    low = np.where(at_end, limit - 1, low)
    high = np.where(at_end, limit - 1, low + 1)
    c = np.where(at_end, low.astype(c.dtype), c)
    frac = c - low
    return low, high, 1.0 - frac, frac, valid


def _roi_align(args, attrs):
    x, rois, idx = (np.asarray(a) for a in args)
    oh, ow, sr, mode, half, scale = _params(attrs)
    n, ch, h, w = x.shape
    out = np.zeros((rois.shape[0], ch, oh, ow), dtype=x.dtype)
    off = 0.5 if half else 0.0
    for r in range(rois.shape[0]):
        b = int(idx[r])
        check(0 <= b < n, f"roi_align: batch index {b} outside [0, {n})")
        x0, y0, x1, y1 = (float(v) * scale - off for v in rois[r])
        rw, rh = x1 - x0, y1 - y0
        if not half:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = sr if sr > 0 else int(np.ceil(rh / oh))
        gw = sr if sr > 0 else int(np.ceil(rw / ow))
        if gh <= 0 or gw <= 0:
            continue  # an empty grid: onnxruntime leaves zeros
        ys = _axis_samples(y0, rh, oh, gh).reshape(-1)          # [oh*gh]
        xs = _axis_samples(x0, rw, ow, gw).reshape(-1)          # [ow*gw]
        yl, yh, wy0, wy1, vy = _corners(ys, h)
        xl, xh, wx0, wx1, vx = _corners(xs, w)
        feat = x[b].astype(np.float64)                          # [C, H, W]
        valid = (vy[:, None] & vx[None, :]).astype(np.float64)  # [Y, X]
        parts = [feat[:, yl][:, :, xl] * (wy0[:, None] * wx0[None, :] * valid),
                 feat[:, yl][:, :, xh] * (wy0[:, None] * wx1[None, :] * valid),
                 feat[:, yh][:, :, xl] * (wy1[:, None] * wx0[None, :] * valid),
                 feat[:, yh][:, :, xh] * (wy1[:, None] * wx1[None, :] * valid)]
        if mode == "avg":
            s = sum(parts).reshape(ch, oh, gh, ow, gw)
            out[r] = (s.sum(axis=(2, 4)) / max(gh * gw, 1)).astype(x.dtype)
        else:
            s = np.maximum.reduce(parts).reshape(ch, oh, gh, ow, gw)
            out[r] = s.max(axis=(2, 4)).astype(x.dtype)
    return [out]


def _cost(ins, outs, attrs):
    # four reads and multiply-adds per sample, about four samples per output bin with ratio 0
    sr = int(attrs.get("sampling_ratio", 0)) or 2
    return OpCost(0, 8 * sr * sr * outs[0].size, ins[1].nbytes + outs[0].nbytes, outs[0].nbytes)


DEFS = [OpDef("roi_align", _infer, _roi_align, _cost, "data", (3, 3))]
