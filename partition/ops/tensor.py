"""Data-movement ops: reshape, flatten, transpose, squeeze/unsqueeze, concat, split, slice, the
gathers, pad, expand, tile, depth_to_space, space_to_depth, trilu, the scatters and one_hot. They
do no arithmetic, so their cost is 0 FLOPs plus the bytes they read and write (a scatter with a
reduction: 1 FLOP per update). Semantics are ONNX's (slice clamping, negative gather and scatter
indices wrapping, bidirectional expand), with every shape and attribute static.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..ir import TensorType
from .base import OpCost, OpDef, check, zero_cost


# ---------------------------------------------------------------------------- shared helpers
def norm_axis(axis: Any, rank: int, op: str, allow_end: bool = False) -> int:
    """Axis in [-rank, rank) (or [-rank, rank] with ``allow_end``, as Flatten) -> non-negative axis."""
    check(isinstance(axis, (int, np.integer)) and not isinstance(axis, bool),
          f"{op}: axis must be an int, got {axis!r}")
    hi = rank + 1 if allow_end else rank
    a = int(axis)
    check(-rank <= a < hi, f"{op}: axis {a} is out of range for rank {rank}")
    return a + rank if a < 0 else a


def int_tuple(v: Any, op: str, name: str, length: int | None = None) -> tuple[int, ...]:
    """A list/tuple (or a single int) of ints as a tuple, checking the length when given."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = (int(v),) * (length or 1)
    check(isinstance(v, (list, tuple)) and all(isinstance(i, (int, np.integer)) and not isinstance(i, bool)
                                                for i in v),
          f"{op}: {name} must be a list of ints, got {v!r}")
    t = tuple(int(i) for i in v)
    if length is not None:
        check(len(t) == length, f"{op}: {name} must have {length} entries, got {len(t)}")
    return t


def _same(ins: Sequence[TensorType], shape: Sequence[int], dtype: str | None = None) -> list[TensorType]:
    return [TensorType(tuple(shape), dtype or ins[0].dtype)]


# ---------------------------------------------------------------------------- reshape & co
def _reshape_target(shape_in: tuple, attrs: dict) -> tuple[int, ...]:
    check("shape" in attrs, "reshape: missing attribute 'shape'")
    target = list(int_tuple(attrs["shape"], "reshape", "shape"))
    check(target.count(-1) <= 1, f"reshape: more than one -1 in shape {target}")
    check(all(d >= -1 for d in target), f"reshape: bad dimension in shape {target}")
    size = int(np.prod(shape_in, dtype=np.int64))
    if -1 in target:
        known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
        check(known > 0 and size % known == 0,
              f"reshape: cannot reshape {list(shape_in)} ({size} elements) to {target}")
        target[target.index(-1)] = size // known
    check(int(np.prod(target, dtype=np.int64)) == size,
          f"reshape: cannot reshape {list(shape_in)} ({size} elements) to {target}")
    return tuple(target)


def _reshape(args, attrs):
    x = np.asarray(args[0])
    return [x.reshape(_reshape_target(x.shape, attrs))]


def _flatten_shape(shape: tuple, attrs: dict) -> tuple[int, int]:
    axis = norm_axis(attrs.get("axis", 1), len(shape), "flatten", allow_end=True)
    return int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64))


def _perm(attrs: dict, rank: int) -> tuple[int, ...]:
    p = attrs.get("perm")
    if p is None:
        return tuple(range(rank - 1, -1, -1))
    p = int_tuple(p, "transpose", "perm")
    check(sorted(p) == list(range(rank)), f"transpose: perm {list(p)} is not a permutation of 0..{rank - 1}")
    return p


def _squeeze_axes(shape: tuple, attrs: dict) -> tuple[int, ...]:
    axes = attrs.get("axes")
    if axes is None:
        return tuple(i for i, d in enumerate(shape) if d == 1)
    axes = sorted({norm_axis(a, len(shape), "squeeze") for a in int_tuple(axes, "squeeze", "axes")})
    for a in axes:
        check(shape[a] == 1, f"squeeze: axis {a} of shape {list(shape)} has size {shape[a]}, not 1")
    return tuple(axes)


def _unsqueeze_shape(shape: tuple, attrs: dict) -> tuple[int, ...]:
    check(attrs.get("axes") is not None, "unsqueeze: missing attribute 'axes'")
    raw = int_tuple(attrs["axes"], "unsqueeze", "axes")
    out_rank = len(shape) + len(raw)
    axes = [norm_axis(a, out_rank, "unsqueeze") for a in raw]
    check(len(set(axes)) == len(axes), f"unsqueeze: repeated axes {list(raw)}")
    it = iter(shape)
    return tuple(1 if i in axes else next(it) for i in range(out_rank))


# ---------------------------------------------------------------------------- concat / split
def _infer_concat(ins, attrs, ctx):
    check(len(ins) >= 1, "concat: needs at least one input")
    check("axis" in attrs, "concat: missing attribute 'axis'")
    rank = len(ins[0].shape)
    axis = norm_axis(attrs["axis"], rank, "concat")
    for i, t in enumerate(ins[1:], 1):
        check(t.dtype == ins[0].dtype, f"concat: input {i} has dtype {t.dtype}, input 0 has {ins[0].dtype}")
        check(len(t.shape) == rank and all(a == b for j, (a, b) in enumerate(zip(t.shape, ins[0].shape)) if j != axis),
              f"concat: input {i} of shape {list(t.shape)} does not match input 0 {list(ins[0].shape)} "
              f"off axis {axis}")
    shape = list(ins[0].shape)
    shape[axis] = sum(t.shape[axis] for t in ins)
    return _same(ins, shape)


def _concat(args, attrs):
    axis = norm_axis(attrs["axis"], np.ndim(args[0]), "concat")
    return [np.concatenate([np.asarray(a) for a in args], axis=axis)]


def _split_params(shape: tuple, attrs: dict) -> tuple[int, tuple[int, ...]]:
    axis = norm_axis(attrs.get("axis", 0), len(shape), "split")
    check(attrs.get("sizes") is not None, "split: missing attribute 'sizes'")
    sizes = int_tuple(attrs["sizes"], "split", "sizes")
    check(len(sizes) >= 1 and all(s >= 0 for s in sizes), f"split: bad sizes {list(sizes)}")
    check(sum(sizes) == shape[axis],
          f"split: sizes {list(sizes)} sum to {sum(sizes)} but axis {axis} has {shape[axis]}")
    return axis, sizes


def _infer_split(ins, attrs, ctx):
    x = ins[0]
    axis, sizes = _split_params(x.shape, attrs)
    return [TensorType(tuple(s if i == axis else d for i, d in enumerate(x.shape)), x.dtype) for s in sizes]


def _split(args, attrs):
    x = np.asarray(args[0])
    axis, sizes = _split_params(x.shape, attrs)
    return [p.copy() for p in np.split(x, np.cumsum(sizes)[:-1], axis=axis)]


# ---------------------------------------------------------------------------- slice
def _slices(shape: tuple, attrs: dict) -> tuple[slice, ...]:
    check("starts" in attrs and "ends" in attrs, "slice: needs attributes 'starts' and 'ends'")
    starts = int_tuple(attrs["starts"], "slice", "starts")
    ends = int_tuple(attrs["ends"], "slice", "ends")
    n = len(starts)
    check(len(ends) == n, f"slice: starts has {n} entries but ends has {len(ends)}")
    axes = tuple(range(n)) if attrs.get("axes") is None else int_tuple(attrs["axes"], "slice", "axes", n)
    steps = (1,) * n if attrs.get("steps") is None else int_tuple(attrs["steps"], "slice", "steps", n)
    axes = tuple(norm_axis(a, len(shape), "slice") for a in axes)
    check(len(set(axes)) == n, f"slice: repeated axes {list(axes)}")
    out = [slice(None)] * len(shape)
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        check(sp != 0, "slice: step cannot be 0")
        d = shape[ax]
        # ONNX clamping: negative bounds count from the end, then clamp to the valid range.
        st = st + d if st < 0 else st
        en = en + d if en < 0 else en
        if sp > 0:
            st, en = min(max(st, 0), d), min(max(en, 0), d)
        else:
            st, en = min(max(st, 0), d - 1), min(max(en, -1), d - 1)
        out[ax] = slice(st, None if en < 0 else en, sp)
    return tuple(out)


def _infer_slice(ins, attrs, ctx):
    x = ins[0]
    sl = _slices(x.shape, attrs)
    shape = tuple(len(range(*s.indices(d))) for s, d in zip(sl, x.shape))
    return _same(ins, shape)


def _slice(args, attrs):
    x = np.asarray(args[0])
    return [x[_slices(x.shape, attrs)].copy()]


# ---------------------------------------------------------------------------- gathers
def _int_indices(name: str, t: TensorType) -> None:
    check(t.dtype in ("int32", "int64"), f"{name}: indices must be int32 or int64, got {t.dtype}")


def _wrap(name: str, idx: np.ndarray, dim: int) -> np.ndarray:
    idx = np.asarray(idx).astype(np.int64)
    check(bool(np.all((idx >= -dim) & (idx < dim))), f"{name}: index out of range for a dimension of size {dim}")
    return np.where(idx < 0, idx + dim, idx)


def _infer_gather(ins, attrs, ctx):
    data, idx = ins
    _int_indices("gather", idx)
    axis = norm_axis(attrs.get("axis", 0), len(data.shape), "gather")
    return _same(ins, data.shape[:axis] + idx.shape + data.shape[axis + 1:])


def _gather(args, attrs):
    data = np.asarray(args[0])
    axis = norm_axis(attrs.get("axis", 0), data.ndim, "gather")
    return [np.take(data, _wrap("gather", args[1], data.shape[axis]), axis=axis)]


def _gnd_dims(data: tuple, idx: tuple, attrs: dict) -> tuple[int, int]:
    b = int(attrs.get("batch_dims", 0))
    check(len(idx) >= 1, "gather_nd: indices must have rank >= 1")
    check(0 <= b < min(len(data), len(idx)), f"gather_nd: batch_dims={b} must be below both ranks")
    check(data[:b] == idx[:b], f"gather_nd: batch dims differ: data {list(data[:b])} vs indices {list(idx[:b])}")
    m = idx[-1]
    check(1 <= m <= len(data) - b,
          f"gather_nd: indices last dimension {m} must be in [1, {len(data) - b}] (data rank {len(data)}, batch_dims={b})")
    return b, m


def _infer_gather_nd(ins, attrs, ctx):
    data, idx = ins
    _int_indices("gather_nd", idx)
    b, m = _gnd_dims(data.shape, idx.shape, attrs)
    return _same(ins, idx.shape[:-1] + data.shape[b + m:])


def _gather_nd(args, attrs):
    data, idx = np.asarray(args[0]), np.asarray(args[1])
    b, m = _gnd_dims(data.shape, idx.shape, attrs)
    nb = int(np.prod(data.shape[:b], dtype=np.int64))
    d = data.reshape((nb,) + data.shape[b:])
    ix = idx.reshape(nb, -1, m).astype(np.int64)
    cols = tuple(_wrap("gather_nd", ix[..., j], data.shape[b + j]) for j in range(m))
    out = d[(np.arange(nb)[:, None],) + cols]  # nb, L, *data.shape[b+m:]
    return [out.reshape(idx.shape[:-1] + data.shape[b + m:])]


def _infer_gather_elements(ins, attrs, ctx):
    data, idx = ins
    _int_indices("gather_elements", idx)
    check(len(idx.shape) == len(data.shape),
          f"gather_elements: indices rank {len(idx.shape)} differs from data rank {len(data.shape)}")
    axis = norm_axis(attrs.get("axis", 0), len(data.shape), "gather_elements")
    for i, (a, b) in enumerate(zip(idx.shape, data.shape)):
        check(i == axis or a <= b, f"gather_elements: indices {list(idx.shape)} exceed data {list(data.shape)} on axis {i}")
    return _same(ins, idx.shape)


def _gather_elements(args, attrs):
    data, idx = np.asarray(args[0]), np.asarray(args[1])
    axis = norm_axis(attrs.get("axis", 0), data.ndim, "gather_elements")
    # only the leading part of data's other axes is addressed (ONNX allows smaller indices dims)
    view = data[tuple(slice(None) if i == axis else slice(0, s) for i, s in enumerate(idx.shape))]
    return [np.take_along_axis(view, _wrap("gather_elements", idx, data.shape[axis]), axis=axis)]


# ---------------------------------------------------------------------------- pad / expand / tile
_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def _pad_params(shape: tuple, attrs: dict) -> tuple[list[tuple[int, int]], str]:
    check("pads" in attrs, "pad: missing attribute 'pads'")
    r = len(shape)
    pads = int_tuple(attrs["pads"], "pad", "pads", 2 * r)
    mode = attrs.get("mode", "constant")
    check(mode in _PAD_MODES, f"pad: unknown mode {mode!r} (expected one of {', '.join(_PAD_MODES)})")
    pairs = [(pads[i], pads[i + r]) for i in range(r)]
    for ax, (a, b) in enumerate(pairs):
        check(shape[ax] + a + b >= 0, f"pad: pads {list(pads)} remove more than axis {ax}'s {shape[ax]} elements")
        if mode == "reflect" and (a > 0 or b > 0):
            check(shape[ax] >= 2 and max(a, b) <= shape[ax] - 1,
                  f"pad: reflect pads on axis {ax} must be < its size {shape[ax]}")
        if mode in ("edge", "wrap") and (a > 0 or b > 0):
            check(shape[ax] >= 1, f"pad: {mode} padding of empty axis {ax}")
    return pairs, mode


def _infer_pad(ins, attrs, ctx):
    pairs, _ = _pad_params(ins[0].shape, attrs)
    return _same(ins, [d + a + b for d, (a, b) in zip(ins[0].shape, pairs)])


def _pad(args, attrs):
    x = np.asarray(args[0])
    pairs, mode = _pad_params(x.shape, attrs)
    # negative pads crop (ONNX); do the crop first, then pad the positive part
    crop = tuple(slice(max(-a, 0), d - max(-b, 0)) for d, (a, b) in zip(x.shape, pairs))
    x = x[crop]
    pos = [(max(a, 0), max(b, 0)) for a, b in pairs]
    if mode == "constant":
        return [np.pad(x, pos, mode="constant", constant_values=np.asarray(attrs.get("value", 0.0)).astype(x.dtype))]
    return [np.pad(x, pos, mode=_PAD_MODES[mode])]


def _expand_shape(shape: tuple, attrs: dict) -> tuple[int, ...]:
    check("shape" in attrs, "expand: missing attribute 'shape'")
    target = int_tuple(attrs["shape"], "expand", "shape")
    try:
        return tuple(np.broadcast_shapes(tuple(shape), target))
    except ValueError:
        check(False, f"expand: shape {list(shape)} does not broadcast with {list(target)}")
        raise


def _tile_reps(shape: tuple, attrs: dict) -> tuple[int, ...]:
    check("repeats" in attrs, "tile: missing attribute 'repeats'")
    reps = int_tuple(attrs["repeats"], "tile", "repeats", len(shape))
    check(all(r >= 0 for r in reps), f"tile: repeats must be >= 0, got {list(reps)}")
    return reps


# ---------------------------------------------------------------------------- depth <-> space
def _block(name: str, shape: tuple, attrs: dict) -> int:
    check(len(shape) == 4, f"{name}: input must be 4-D NCHW, got shape {list(shape)}")
    check("blocksize" in attrs, f"{name}: missing attribute 'blocksize'")
    b = attrs["blocksize"]
    check(isinstance(b, (int, np.integer)) and not isinstance(b, bool) and b >= 1,
          f"{name}: blocksize must be an int >= 1, got {b!r}")
    return int(b)


def _d2s_params(shape: tuple, attrs: dict) -> tuple[int, str]:
    b = _block("depth_to_space", shape, attrs)
    mode = attrs.get("mode", "DCR")
    check(mode in ("DCR", "CRD"), f"depth_to_space: mode must be 'DCR' or 'CRD', got {mode!r}")
    check(shape[1] % (b * b) == 0,
          f"depth_to_space: {shape[1]} channels are not divisible by blocksize^2 = {b * b}")
    return b, mode


def _d2s_shape(shape: tuple, attrs: dict) -> tuple[int, ...]:
    b, _ = _d2s_params(shape, attrs)
    n, c, h, w = shape
    return n, c // (b * b), h * b, w * b


def _depth_to_space(args, attrs):
    x = np.asarray(args[0])
    b, mode = _d2s_params(x.shape, attrs)
    n, c, h, w = x.shape
    # DCR: channel = (bh, bw, c'); CRD: channel = (c', bh, bw) -- the ONNX spec's two orders
    if mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [np.ascontiguousarray(y).reshape(_d2s_shape(x.shape, attrs))]


def _s2d_shape(shape: tuple, attrs: dict) -> tuple[int, ...]:
    b = _block("space_to_depth", shape, attrs)
    n, c, h, w = shape
    check(h % b == 0 and w % b == 0,
          f"space_to_depth: spatial size {h}x{w} is not divisible by blocksize {b}")
    return n, c * b * b, h // b, w // b


def _space_to_depth(args, attrs):
    x = np.asarray(args[0])
    out = _s2d_shape(x.shape, attrs)
    n, c, h, w = x.shape
    b = int(attrs["blocksize"])
    mode = attrs.get("mode", "DCR")
    check(mode in ("DCR", "CRD"), f"space_to_depth: mode must be 'DCR' or 'CRD', got {mode!r}")
    # the inverse of depth_to_space: DCR puts the block offsets first, CRD after the channel
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(*perm)
    return [np.ascontiguousarray(y).reshape(out)]


# ---------------------------------------------------------------------------- trilu
def _infer_trilu(ins, attrs, ctx):
    x = ins[0]
    check(len(x.shape) >= 2, f"trilu: input must have rank >= 2, got shape {list(x.shape)}")
    k = attrs.get("k", 0)
    check(isinstance(k, (int, np.integer)) and not isinstance(k, bool), f"trilu: k must be an int, got {k!r}")
    return _same(ins, x.shape)


def _trilu(args, attrs):
    x, k = np.asarray(args[0]), int(attrs.get("k", 0))
    return [np.triu(x, k) if attrs.get("upper", True) else np.tril(x, k)]


# ---------------------------------------------------------------------------- scatters
SCATTER_REDUCTIONS = {"none": None, "add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _reduction(name: str, data: TensorType, attrs: dict):
    red = attrs.get("reduction", "none")
    check(red in SCATTER_REDUCTIONS,
          f"{name}: reduction {red!r} is not one of {', '.join(SCATTER_REDUCTIONS)}")
    check(red == "none" or data.dtype != "bool", f"{name}: reduction {red!r} on bool data is not supported")
    return SCATTER_REDUCTIONS[red]


def _scatter_into(data: np.ndarray, key: tuple, updates: np.ndarray, ufunc) -> np.ndarray:
    """A copy of data with updates written (or reduced, ``ufunc.at`` accumulating repeated indices in
    order) at the index arrays ``key``."""
    out = data.copy()
    if ufunc is None:
        out[key] = updates
    else:
        ufunc.at(out, key, updates)
    return out


def _infer_scatter_nd(ins, attrs, ctx):
    data, idx, upd = ins
    _int_indices("scatter_nd", idx)
    _reduction("scatter_nd", data, attrs)
    check(upd.dtype == data.dtype, f"scatter_nd: updates dtype {upd.dtype} differs from data dtype {data.dtype}")
    check(len(idx.shape) >= 1 and 1 <= idx.shape[-1] <= len(data.shape),
          f"scatter_nd: indices last dimension must be in [1, {len(data.shape)}] (data rank), "
          f"got indices shape {list(idx.shape)}")
    want = idx.shape[:-1] + data.shape[idx.shape[-1]:]
    check(upd.shape == want, f"scatter_nd: updates shape {list(upd.shape)} should be {list(want)} "
                             f"(indices {list(idx.shape)}, data {list(data.shape)})")
    return _same(ins, data.shape)


def _scatter_nd(args, attrs):
    data, idx, upd = (np.asarray(a) for a in args)
    k = idx.shape[-1]
    flat = idx.reshape(-1, k)
    key = tuple(_wrap("scatter_nd", flat[:, j], data.shape[j]) for j in range(k))
    ufunc = _reduction("scatter_nd", TensorType(data.shape, data.dtype.name), attrs)
    return [_scatter_into(data, key, upd.reshape((-1,) + data.shape[k:]), ufunc)]


def _infer_scatter_elements(ins, attrs, ctx):
    data, idx, upd = ins
    _int_indices("scatter_elements", idx)
    _reduction("scatter_elements", data, attrs)
    check(upd.dtype == data.dtype,
          f"scatter_elements: updates dtype {upd.dtype} differs from data dtype {data.dtype}")
    check(upd.shape == idx.shape,
          f"scatter_elements: updates shape {list(upd.shape)} differs from indices shape {list(idx.shape)}")
    check(len(idx.shape) == len(data.shape),
          f"scatter_elements: indices rank {len(idx.shape)} differs from data rank {len(data.shape)}")
    axis = norm_axis(attrs.get("axis", 0), len(data.shape), "scatter_elements")
    for i, (a, b) in enumerate(zip(idx.shape, data.shape)):
        check(i == axis or a <= b,
              f"scatter_elements: indices {list(idx.shape)} exceed data {list(data.shape)} on axis {i}")
    return _same(ins, data.shape)


def _scatter_elements(args, attrs):
    data, idx, upd = (np.asarray(a) for a in args)
    axis = norm_axis(attrs.get("axis", 0), data.ndim, "scatter_elements")
    key = list(np.indices(idx.shape, sparse=True))
    key[axis] = _wrap("scatter_elements", idx, data.shape[axis])
    ufunc = _reduction("scatter_elements", TensorType(data.shape, data.dtype.name), attrs)
    return [_scatter_into(data, tuple(np.broadcast_arrays(*key)), upd, ufunc)]


def _cost_scatter(ins, outs, attrs):
    # a reduction does one operation per update; a plain scatter only moves data
    flops = ins[2].size if attrs.get("reduction", "none") != "none" else 0
    return OpCost(0, flops, sum(t.nbytes for t in ins), sum(o.nbytes for o in outs))


# ---------------------------------------------------------------------------- one_hot
def _one_hot_params(idx_shape: tuple, attrs: dict) -> tuple[int, int]:
    check("depth" in attrs, "one_hot: missing attribute 'depth'")
    depth = attrs["depth"]
    check(isinstance(depth, (int, np.integer)) and not isinstance(depth, bool) and depth >= 1,
          f"one_hot: depth must be an int >= 1, got {depth!r}")
    return int(depth), norm_axis(attrs.get("axis", -1), len(idx_shape) + 1, "one_hot")


def _infer_one_hot(ins, attrs, ctx):
    idx, values = ins
    check(idx.dtype != "bool", "one_hot: indices must be numeric, got bool")
    check(values.shape == (2,), f"one_hot: values must be [off_value, on_value] of shape [2], got {list(values.shape)}")
    depth, axis = _one_hot_params(idx.shape, attrs)
    return [TensorType(idx.shape[:axis] + (depth,) + idx.shape[axis:], values.dtype)]


def _one_hot(args, attrs):
    idx, values = np.asarray(args[0]), np.asarray(args[1])
    depth, axis = _one_hot_params(idx.shape, attrs)
    # negative indices count from depth; anything else out of range, or a float index with a
    # fraction, matches no class and is all off (onnxruntime compares, it does not truncate)
    ix = idx.astype(np.float64) if idx.dtype.kind == "f" else idx.astype(np.int64)
    ix = np.expand_dims(np.where(ix < 0, ix + depth, ix), axis)
    classes = np.arange(depth).reshape([-1 if i == axis else 1 for i in range(ix.ndim)])
    return [np.where(ix == classes, values[1], values[0]).astype(values.dtype, copy=False)]


DEFS = [
    OpDef("reshape", lambda i, a, c: _same(i, _reshape_target(i[0].shape, a)), _reshape, zero_cost, "data", (1, 1)),
    OpDef("flatten", lambda i, a, c: _same(i, _flatten_shape(i[0].shape, a)),
          lambda x, a: [np.asarray(x[0]).reshape(_flatten_shape(np.shape(x[0]), a))], zero_cost, "data", (1, 1)),
    OpDef("transpose", lambda i, a, c: _same(i, [i[0].shape[p] for p in _perm(a, len(i[0].shape))]),
          lambda x, a: [np.transpose(x[0], _perm(a, np.ndim(x[0]))).copy()], zero_cost, "data", (1, 1)),
    OpDef("squeeze", lambda i, a, c: _same(i, [d for j, d in enumerate(i[0].shape) if j not in _squeeze_axes(i[0].shape, a)]),
          lambda x, a: [np.squeeze(np.asarray(x[0]), axis=_squeeze_axes(np.shape(x[0]), a))], zero_cost, "data", (1, 1)),
    OpDef("unsqueeze", lambda i, a, c: _same(i, _unsqueeze_shape(i[0].shape, a)),
          lambda x, a: [np.asarray(x[0]).reshape(_unsqueeze_shape(np.shape(x[0]), a))], zero_cost, "data", (1, 1)),
    OpDef("concat", _infer_concat, _concat, zero_cost, "data", (1, 1 << 30)),
    OpDef("split", _infer_split, _split, zero_cost, "data", (1, 1)),
    OpDef("slice", _infer_slice, _slice, zero_cost, "data", (1, 1)),
    OpDef("gather", _infer_gather, _gather, zero_cost, "data", (2, 2)),
    OpDef("gather_nd", _infer_gather_nd, _gather_nd, zero_cost, "data", (2, 2)),
    OpDef("gather_elements", _infer_gather_elements, _gather_elements, zero_cost, "data", (2, 2)),
    OpDef("pad", _infer_pad, _pad, zero_cost, "data", (1, 1)),
    OpDef("expand", lambda i, a, c: _same(i, _expand_shape(i[0].shape, a)),
          lambda x, a: [np.broadcast_to(x[0], _expand_shape(np.shape(x[0]), a)).copy()], zero_cost, "data", (1, 1)),
    OpDef("tile", lambda i, a, c: _same(i, [d * r for d, r in zip(i[0].shape, _tile_reps(i[0].shape, a))]),
          lambda x, a: [np.tile(x[0], _tile_reps(np.shape(x[0]), a))], zero_cost, "data", (1, 1)),
    OpDef("depth_to_space", lambda i, a, c: _same(i, _d2s_shape(i[0].shape, a)), _depth_to_space,
          zero_cost, "data", (1, 1)),
    OpDef("space_to_depth", lambda i, a, c: _same(i, _s2d_shape(i[0].shape, a)), _space_to_depth,
          zero_cost, "data", (1, 1)),
    OpDef("trilu", _infer_trilu, _trilu, zero_cost, "data", (1, 1)),
    OpDef("scatter_nd", _infer_scatter_nd, _scatter_nd, _cost_scatter, "data", (3, 3)),
    OpDef("scatter_elements", _infer_scatter_elements, _scatter_elements, _cost_scatter, "data", (3, 3)),
    OpDef("one_hot", _infer_one_hot, _one_hot, zero_cost, "data", (2, 2)),
]
