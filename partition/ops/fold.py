"""col2im (ONNX Col2Im) and max_unpool (ONNX MaxUnpool): ops that put values back into an image.

col2im: x [N, C * prod(block), L] -> [N, C, *image]: the L column blocks (enumerated in row-major
order over the sliding positions) summed back into the padded image, then the padding cropped, as
torch's ``fold``. The image and block shapes are attributes when the model gives them as constants;
computed at run time they are extra inputs (read when run) and the output type is the declared one.
Cost: one add per input element.

max_unpool: x [N, C, *spatial] and int64 indices of the same shape (flat, row-major, over the whole
output tensor, as MaxPool's Indices output gives them) -> zeros of shape ``out`` with x scattered
at the indices. Cost: none (data movement).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..ir import TensorType
from .base import OpCost, OpDef, check


def _nd(attrs: dict, key: str, n: int, default: int) -> tuple[int, ...]:
    v = attrs.get(key)
    return (default,) * n if v is None else tuple(int(a) for a in v)


def _col2im_grid(xshape, image, block, attrs) -> tuple[tuple[int, ...], tuple, tuple, tuple]:
    """The number of sliding positions per spatial axis (checked against L), and the strides,
    dilations and ONNX-order pads."""
    n = len(image)
    check(n >= 1 and len(block) == n, f"col2im: image_shape {list(image)} and block_shape {list(block)} "
                                      f"must name the same number (>= 1) of spatial axes")
    check(all(b >= 1 for b in block) and all(i >= 1 for i in image),
          f"col2im: image_shape {list(image)} and block_shape {list(block)} must be >= 1")
    strides, dil = _nd(attrs, "strides", n, 1), _nd(attrs, "dilations", n, 1)
    pads = _nd(attrs, "pads", 2 * n, 0)
    check(len(strides) == n and len(dil) == n and len(pads) == 2 * n,
          f"col2im: strides, dilations and pads must have {n}, {n} and {2 * n} values")
    check(min(strides + dil) >= 1 and min(pads) >= 0, "col2im: strides and dilations must be >= 1, pads >= 0")
    grid = []
    for i in range(n):
        span = image[i] + pads[i] + pads[n + i] - (dil[i] * (block[i] - 1) + 1)
        check(span >= 0, f"col2im: the dilated block {block[i]} does not fit the padded image axis {i} "
                         f"of {image[i] + pads[i] + pads[n + i]}")
        grid.append(span // strides[i] + 1)
    cb = math.prod(block)
    check(len(xshape) == 3 and xshape[1] % cb == 0,
          f"col2im: input must be [N, C * {cb}, L] for block_shape {list(block)}, got {list(xshape)}")
    check(xshape[2] == math.prod(grid), f"col2im: input has {xshape[2]} blocks, but image_shape "
          f"{list(image)} and block_shape {list(block)} give {math.prod(grid)}")
    return tuple(grid), strides, dil, pads


def _col2im_infer(ins, attrs, ctx):
    x = ins[0]
    if len(ins) == 3:  # shapes computed at run time: the declared output shape
        out = tuple(int(d) for d in attrs["declared"])
        check(len(out) >= 3 and len(x.shape) == 3 and out[0] == x.shape[0] and x.shape[1] % out[1] == 0,
              f"col2im: the declared shape {list(out)} does not fit input {list(x.shape)}")
        return [TensorType(out, x.dtype)]
    image, block = tuple(attrs["image_shape"]), tuple(attrs["block_shape"])
    _col2im_grid(x.shape, image, block, attrs)
    return [TensorType((x.shape[0], x.shape[1] // math.prod(block)) + image, x.dtype)]


def _col2im(args, attrs):
    x = np.asarray(args[0])
    if len(args) == 3:
        image = tuple(int(v) for v in np.asarray(args[1]).reshape(-1))
        block = tuple(int(v) for v in np.asarray(args[2]).reshape(-1))
        out = _col2im([x], dict(attrs, image_shape=image, block_shape=block))[0]
        check(out.shape == tuple(attrs["declared"]), f"col2im: image_shape {list(image)} and block_shape "
              f"{list(block)} at run time give shape {list(out.shape)}, not the declared {list(attrs['declared'])}")
        return [out]
    image, block = tuple(attrs["image_shape"]), tuple(attrs["block_shape"])
    grid, strides, dil, pads = _col2im_grid(x.shape, image, block, attrs)
    n = len(image)
    bsz, c = x.shape[0], x.shape[1] // math.prod(block)
    cols = x.reshape((bsz, c) + block + grid)
    padded = np.zeros((bsz, c) + tuple(image[i] + pads[i] + pads[n + i] for i in range(n)), x.dtype)
    # each block offset adds one strided lattice of positions
    for off in itertools.product(*(range(b) for b in block)):
        where = tuple(slice(o * d, o * d + s * (g - 1) + 1, s) for o, d, s, g in zip(off, dil, strides, grid))
        padded[(slice(None), slice(None)) + where] += cols[(slice(None), slice(None)) + off]
    crop = tuple(slice(pads[i], pads[i] + image[i]) for i in range(n))
    return [np.ascontiguousarray(padded[(slice(None), slice(None)) + crop])]


def _col2im_cost(ins, outs, attrs):
    return OpCost(0, ins[0].size, sum(t.nbytes for t in ins), outs[0].nbytes)


def _unpool_infer(ins, attrs, ctx):
    x, idx = ins[0], ins[1]
    check(len(x.shape) >= 3, f"max_unpool: input must be [N, C, spatial...], got {list(x.shape)}")
    check(idx.shape == x.shape and idx.dtype == "int64",
          f"max_unpool: indices must be int64 of the input's shape {list(x.shape)}, got {idx.dtype} {list(idx.shape)}")
    out = tuple(int(d) for d in attrs["out"])
    check(len(out) == len(x.shape) and out[:2] == x.shape[:2],
          f"max_unpool: output shape {list(out)} does not fit input {list(x.shape)}")
    return [TensorType(out, x.dtype)]


def _unpool(args, attrs):
    x, idx = np.asarray(args[0]), np.asarray(args[1])
    out = tuple(int(d) for d in attrs["out"])
    flat = idx.reshape(-1)
    size = math.prod(out)
    check(bool(((flat >= 0) & (flat < size)).all()),
          f"max_unpool: an index is outside the {size} elements of the output {list(out)}")
    y = np.zeros(size, x.dtype)
    y[flat] = x.reshape(-1)
    return [y.reshape(out)]


DEFS = [
    OpDef("col2im", _col2im_infer, _col2im, _col2im_cost, "data", (1, 3)),
    OpDef("max_unpool", _unpool_infer, _unpool,
          lambda i, o, a: OpCost(0, 0, sum(t.nbytes for t in i), o[0].nbytes), "data", (2, 2)),
]
