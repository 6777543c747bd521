"""Ops whose output size depends on data, and the run-time forms of ops whose static attributes
derive from such sizes.

The IR is static: a type carries the upper bound of a data-dependent size (docs/IR.md), and costing
uses it. At run time the array may be shorter. ``non_zero`` has the bound "every element is
non-zero". The ``dyn_*`` ops (and ``shape``, ``size``, ``constant_of_shape``, ``range``) keep the
bound in their attributes, for shape inference and costing, and take the actual values as extra
inputs, computed at run time from the actual sizes (e.g. ``Shape -> Gather -> Reshape`` after a
NonMaxSuppression: the reshape target is the bound at import and the real row count at run time).
Each run-time value is checked against its bound: a run never produces more than its type says.
"""
from __future__ import annotations

import numpy as np

from ..ir import TensorType
from .base import OpCost, OpDef, check, zero_cost
from . import nn as _nn
from . import tensor as _tensor


def _ints(a, op: str, what: str) -> tuple[int, ...]:
    arr = np.asarray(a)
    check(arr.dtype.kind in "iu", f"{op}: {what} must be integers, got {arr.dtype}")
    return tuple(int(v) for v in arr.reshape(-1))


def _within(op: str, shape: tuple, bound: tuple) -> None:
    check(len(shape) == len(bound) and all(0 <= s <= b for s, b in zip(shape, bound)),
          f"{op}: run-time shape {list(shape)} exceeds its bound {list(bound)}")


# ---------------------------------------------------------------------------- non_zero
def _infer_non_zero(ins, attrs, ctx):
    x = ins[0]
    # Upper bound: every element non-zero (ONNX NonZero: [rank, count], one column per hit).
    return [TensorType((max(1, len(x.shape)) if x.shape else 0, x.size), "int64")]


def _non_zero(args, attrs):
    x = np.asarray(args[0])
    if x.ndim == 0:  # onnxruntime: a scalar gives shape [0, 1] when non-zero, [0, 0] when zero
        return [np.zeros((0, int(bool(x))), np.int64)]
    return [np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)]


def _cost_non_zero(ins, outs, attrs):
    return OpCost(0, ins[0].size, ins[0].nbytes, outs[0].nbytes)


# ---------------------------------------------------------------------------- compress
def _compress_axis(x: TensorType, attrs) -> int | None:
    axis = attrs.get("axis")
    return None if axis is None else _tensor.norm_axis(axis, len(x.shape), "compress")


def _infer_compress(ins, attrs, ctx):
    x, cond = ins
    check(len(cond.shape) == 1, f"compress: condition must be 1-D, got shape {list(cond.shape)}")
    axis = _compress_axis(x, attrs)
    # Upper bound: every selected element (as many as the condition reaches) is kept.
    if axis is None:
        return [TensorType((min(cond.size, x.size),), x.dtype)]
    return [TensorType(tuple(min(cond.size, d) if i == axis else d for i, d in enumerate(x.shape)), x.dtype)]


def _compress(args, attrs):
    """ONNX Compress: the slices (or, without axis, the flattened elements) where the condition is
    true; a condition shorter than the axis leaves the rest out."""
    x, cond = np.asarray(args[0]), np.asarray(args[1]).astype(bool).reshape(-1)
    axis = attrs.get("axis")
    if axis is None:
        flat = x.reshape(-1)
        check(cond.size <= flat.size, f"compress: condition of {cond.size} for {flat.size} elements")
        return [flat[:cond.size][cond]]
    axis = _tensor.norm_axis(axis, x.ndim, "compress")
    check(cond.size <= x.shape[axis], f"compress: condition of {cond.size} for an axis of {x.shape[axis]}")
    return [np.compress(cond, x, axis=axis)]


# ---------------------------------------------------------------------------- unique
def _infer_unique(ins, attrs, ctx):
    x = ins[0]
    axis = attrs.get("axis")
    if axis is None:
        n, y = x.size, (x.size,)
    else:
        axis = _tensor.norm_axis(axis, len(x.shape), "unique")
        n, y = x.shape[axis], x.shape
    # Upper bound: every element (slice) distinct. inverse_indices is exact: one per element (slice).
    return [TensorType(y, x.dtype), TensorType((n,), "int64"), TensorType((n,), "int64"), TensorType((n,), "int64")]


def _unique(args, attrs):
    """ONNX Unique: sorted ascending, or (sorted=0) in order of first occurrence; outputs Y, the
    first index of each, each element's index into Y, and the counts."""
    x = np.asarray(args[0])
    axis = attrs.get("axis")
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = _tensor.norm_axis(axis, x.ndim, "unique")
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inverse = np.asarray(inverse).reshape(-1)
    if not attrs.get("sorted", True):
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        first, counts, inverse = first[order], counts[order], rank[inverse]
        y = np.take(x, first, axis=axis)
    return [y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)]


# ---------------------------------------------------------------------------- shape, size
def _shape_slice(rank: int, attrs) -> slice:
    start, end = int(attrs.get("start", 0)), attrs.get("end")
    return slice(start, None if end is None else int(end))


def _infer_shape(ins, attrs, ctx):
    n = len(range(len(ins[0].shape))[_shape_slice(len(ins[0].shape), attrs)])
    return [TensorType((n,), "int64")]


def _shape(args, attrs):
    x = np.asarray(args[0])
    return [np.array(x.shape, dtype=np.int64)[_shape_slice(x.ndim, attrs)]]


def _size(args, attrs):
    return [np.array(np.asarray(args[0]).size, dtype=np.int64)]


# ---------------------------------------------------------------------------- dyn_reshape
def _onnx_target(shape_in: tuple, target: tuple, allowzero: bool) -> tuple[int, ...]:
    """ONNX Reshape's target: 0 copies the input's dimension (unless allowzero), one -1 is inferred."""
    out = list(target)
    for i, d in enumerate(out):
        if d == 0 and not allowzero:
            check(i < len(shape_in), f"dyn_reshape: target {list(target)} copies dimension {i} that "
                                     f"{list(shape_in)} lacks")
            out[i] = shape_in[i]
    return _tensor._reshape_target(tuple(shape_in), {"shape": tuple(out)})


def _dyn_reshape(args, attrs):
    x = np.asarray(args[0])
    shape = _onnx_target(x.shape, _ints(args[1], "dyn_reshape", "shape"), bool(attrs.get("allowzero", False)))
    _within("dyn_reshape", shape, tuple(attrs["shape"]))
    return [x.reshape(shape)]


# ---------------------------------------------------------------------------- dyn_slice
def _dyn_slice(args, attrs):
    x = np.asarray(args[0])
    a = dict(attrs, starts=_ints(args[1], "dyn_slice", "starts"), ends=_ints(args[2], "dyn_slice", "ends"))
    rest = list(args[3:])  # axes and steps computed at run time (typed by the declared shape)
    if attrs.get("axes_input"):
        a["axes"] = _ints(rest.pop(0), "dyn_slice", "axes")
    if attrs.get("steps_input"):
        a["steps"] = _ints(rest.pop(0), "dyn_slice", "steps")
    return _tensor._slice([x], a)


# ---------------------------------------------------------------------------- dyn_topk
def _dyn_topk(args, attrs):
    k = _ints(args[1], "dyn_topk", "k")
    check(len(k) == 1, f"dyn_topk: K must hold one value, got {len(k)}")
    check(0 <= k[0] <= int(attrs["k"]), f"dyn_topk: K={k[0]} at run time exceeds its bound {attrs['k']}")
    return _nn._topk([args[0]], dict(attrs, k=k[0]))


# ---------------------------------------------------------------------------- dyn_expand, dyn_tile
def _dyn_expand(args, attrs):
    x = np.asarray(args[0])
    shape = _tensor._expand_shape(x.shape, {"shape": _ints(args[1], "dyn_expand", "shape")})
    return [np.broadcast_to(x, shape).copy()]


def _dyn_tile(args, attrs):
    x = np.asarray(args[0])
    return [np.tile(x, _tensor._tile_reps(x.shape, {"repeats": _ints(args[1], "dyn_tile", "repeats")}))]


# ---------------------------------------------------------------------------- dyn_split
def _infer_dyn_split(ins, attrs, ctx):
    x = ins[0]
    axis = _tensor.norm_axis(attrs.get("axis", 0), len(x.shape), "dyn_split")
    sizes = tuple(int(s) for s in attrs["sizes"])
    check(all(0 <= s <= x.shape[axis] for s in sizes),
          f"dyn_split: bounds {list(sizes)} must lie in [0, {x.shape[axis]}]")
    return [TensorType(tuple(s if i == axis else d for i, d in enumerate(x.shape)), x.dtype) for s in sizes]


def _dyn_split(args, attrs):
    x = np.asarray(args[0])
    axis = _tensor.norm_axis(attrs.get("axis", 0), x.ndim, "dyn_split")
    sizes = _ints(args[1], "dyn_split", "split")
    check(len(sizes) == len(attrs["sizes"]), f"dyn_split: {len(sizes)} sizes for {len(attrs['sizes'])} outputs")
    check(all(s >= 0 for s in sizes) and sum(sizes) == x.shape[axis],
          f"dyn_split: sizes {list(sizes)} do not add up to {x.shape[axis]}")
    for s, b in zip(sizes, attrs["sizes"]):
        check(s <= int(b), f"dyn_split: a part of {s} exceeds its bound {b}")
    return [p.copy() for p in np.split(x, np.cumsum(sizes)[:-1], axis=axis)]


# ---------------------------------------------------------------------------- constant_of_shape, range
def _infer_cos(ins, attrs, ctx):
    return [TensorType(tuple(int(d) for d in attrs["shape"]), str(attrs.get("dtype", "float32")))]


def _constant_of_shape(args, attrs):
    shape = _ints(args[0], "constant_of_shape", "shape")
    _within("constant_of_shape", shape, tuple(attrs["shape"]))
    return [np.full(shape, attrs.get("value", 0), dtype=np.dtype(attrs.get("dtype", "float32")))]


def _infer_range(ins, attrs, ctx):
    return [TensorType((int(attrs["length"]),), ins[0].dtype)]


def _range(args, attrs):
    start, limit, delta = (np.asarray(a).reshape(-1)[0] for a in args)
    check(delta != 0, "range: delta cannot be 0")
    out = np.arange(start, limit, delta).astype(np.asarray(args[0]).dtype)
    _within("range", out.shape, (int(attrs["length"]),))
    return [out]


def _declared(d: OpDef) -> OpDef:
    """An op whose static parameter came from the model's declared output shape (attribute
    ``declared``, set when the parameter is a graph input or other run-time value with no bound):
    the static attributes must give exactly that shape, and so must the actual values at run time.
    Without ``declared`` the op is unchanged (its bound check applies)."""
    def infer(ins, attrs, ctx):
        types = d.infer(ins, attrs, ctx)
        if "declared" in attrs:
            want = tuple(int(v) for v in attrs["declared"])
            check(tuple(types[0].shape) == want, f"{d.name}: declared shape {list(want)} does not fit "
                                                 f"the input (it gives {list(types[0].shape)})")
        return types

    def compute(args, attrs):
        outs = d.compute(args, attrs)
        if "declared" in attrs:
            got, want = tuple(np.shape(outs[0])), tuple(int(v) for v in attrs["declared"])
            check(got == want, f"{d.name}: the values computed at run time give shape {list(got)}, "
                               f"not the declared {list(want)}")
        return outs

    return OpDef(d.name, infer, compute, d.cost, d.category, d.num_inputs)


def _data_cost(ins, outs, attrs):
    return zero_cost(ins[:1], outs, attrs)


# ---------------------------------------------------------------------------- dyn_squeeze, dyn_unsqueeze, dyn_pad, dyn_one_hot
# Forms whose parameter (axes, pads, depth) is a run-time value with no bound: typed by the model's
# declared output shape (attribute ``declared``, checked exactly by ``_declared``).
def _infer_as_declared(dtype_of: int, same_size: bool = False, same_rank: bool = False):
    def infer(ins, attrs, ctx):
        check("declared" in attrs, "missing attribute 'declared'")
        t = TensorType(tuple(int(d) for d in attrs["declared"]), ins[dtype_of].dtype)
        check(not same_size or t.size == ins[0].size,
              f"declared shape {list(t.shape)} does not hold the input's {ins[0].size} elements")
        check(not same_rank or len(t.shape) == len(ins[0].shape),
              f"declared shape {list(t.shape)} does not have the input's rank {len(ins[0].shape)}")
        return [t]
    return infer


def _dyn_squeeze(args, attrs):
    x = np.asarray(args[0])
    axes = _ints(args[1], "dyn_squeeze", "axes") if len(args) > 1 else None
    return [np.squeeze(x, axis=_tensor._squeeze_axes(x.shape, {"axes": axes}))]


def _dyn_unsqueeze(args, attrs):
    x = np.asarray(args[0])
    return [x.reshape(_tensor._unsqueeze_shape(x.shape, {"axes": _ints(args[1], "dyn_unsqueeze", "axes")}))]


def _dyn_pad(args, attrs):
    """ONNX Pad's inputs as given (pads, then constant_value and axes where ``value_input`` and
    ``axes_input`` say they are present)."""
    x = np.asarray(args[0])
    rank, rest = x.ndim, list(args[2:])
    pads = list(_ints(args[1], "dyn_pad", "pads"))
    value = np.asarray(rest.pop(0)).reshape(-1) if attrs.get("value_input") else np.zeros(0)
    if attrs.get("axes_input"):
        axes = [a + rank if a < 0 else a for a in _ints(rest.pop(0), "dyn_pad", "axes")]
        check(len(pads) == 2 * len(axes), f"dyn_pad: {len(pads)} pads for {len(axes)} axes")
        full = [0] * (2 * rank)
        for j, a in enumerate(axes):
            check(0 <= a < rank, f"dyn_pad: axis {a} is out of range for rank {rank}")
            full[a], full[rank + a] = pads[j], pads[len(axes) + j]
        pads = full
    check(len(pads) == 2 * rank, f"dyn_pad: {len(pads)} pads for rank {rank}")
    return _tensor._pad([x], {"pads": tuple(pads), "mode": attrs.get("mode", "constant"),
                              "value": value[0].item() if value.size else 0.0})


def _center_crop_pad(args, attrs):
    """ONNX CenterCropPad: each listed axis cropped or zero-padded to its target size around the
    centre (an odd difference leaves the extra element at the end)."""
    x = np.asarray(args[0])
    target = _ints(args[1], "center_crop_pad", "shape")
    axes = tuple(range(x.ndim)) if attrs.get("axes") is None else tuple(int(a) for a in attrs["axes"])
    check(len(target) == len(axes), f"center_crop_pad: shape has {len(target)} entries for {len(axes)} axes")
    crop, place = [slice(None)] * x.ndim, [slice(None)] * x.ndim
    out = list(x.shape)
    for a, t in zip(axes, target):
        d = x.shape[a]
        check(t >= 0, f"center_crop_pad: target size {t} is negative")
        lo = abs(d - t) // 2
        if t < d:
            crop[a] = slice(lo, lo + t)
        elif t > d:
            place[a] = slice(lo, lo + d)
        out[a] = t
    y = np.zeros(out, x.dtype)
    y[tuple(place)] = x[tuple(crop)]
    return [y]


def _dyn_one_hot(args, attrs):
    depth = np.asarray(args[1]).reshape(-1)
    check(depth.size == 1, f"dyn_one_hot: depth must hold one value, got {depth.size}")
    # a float depth is cast to int64, as the spec says
    return _tensor._one_hot([args[0], args[2]], dict(attrs, depth=int(depth[0])))


DEFS = [
    OpDef("non_zero", _infer_non_zero, _non_zero, _cost_non_zero, "data", (1, 1)),
    OpDef("unique", _infer_unique, _unique, lambda i, o, a: OpCost(0, i[0].size, i[0].nbytes, sum(t.nbytes for t in o)),
          "data", (1, 1)),
    OpDef("compress", _infer_compress, _compress, _data_cost, "data", (2, 2)),
    OpDef("shape", _infer_shape, _shape, lambda i, o, a: OpCost(), "data", (1, 1)),
    OpDef("size", lambda i, a, c: [TensorType((), "int64")], _size, lambda i, o, a: OpCost(), "data", (1, 1)),
    OpDef("dyn_reshape", lambda i, a, c: _tensor._same(i, _tensor._reshape_target(i[0].shape, a)),
          _dyn_reshape, _data_cost, "data", (2, 2)),
    OpDef("dyn_slice", lambda i, a, c: _tensor._infer_slice(i[:1], a, c), _dyn_slice, _data_cost, "data", (3, 5)),
    OpDef("dyn_topk", lambda i, a, c: _nn._infer_topk(i[:1], a, c), _dyn_topk,
          lambda i, o, a: _nn._cost_topk(i[:1], o, a), "data", (2, 2)),
    OpDef("dyn_expand", lambda i, a, c: _tensor._same(i, _tensor._expand_shape(i[0].shape, a)),
          _dyn_expand, _data_cost, "data", (2, 2)),
    OpDef("dyn_tile", lambda i, a, c: _tensor._same(i, [d * r for d, r in zip(i[0].shape, _tensor._tile_reps(i[0].shape, a))]),
          _dyn_tile, _data_cost, "data", (2, 2)),
    OpDef("dyn_split", _infer_dyn_split, _dyn_split, _data_cost, "data", (2, 2)),
    OpDef("dyn_squeeze", _infer_as_declared(0, True), _dyn_squeeze, _data_cost, "data", (1, 2)),
    OpDef("dyn_unsqueeze", _infer_as_declared(0, True), _dyn_unsqueeze, _data_cost, "data", (2, 2)),
    OpDef("dyn_pad", _infer_as_declared(0, same_rank=True), _dyn_pad, _data_cost, "data", (2, 4)),
    OpDef("dyn_one_hot", _infer_as_declared(2), _dyn_one_hot, lambda i, o, a: zero_cost([i[0], i[2]], o, a),
          "data", (3, 3)),
    OpDef("center_crop_pad", _infer_as_declared(0, same_rank=True), _center_crop_pad, _data_cost, "data", (2, 2)),
    OpDef("constant_of_shape", _infer_cos, _constant_of_shape, lambda i, o, a: zero_cost([], o, a), "data", (1, 1)),
    OpDef("range", _infer_range, _range, lambda i, o, a: zero_cost([], o, a), "data", (3, 3)),
]
DEFS = [_declared(d) if d.name.startswith("dyn_") or d.name in ("constant_of_shape", "range", "center_crop_pad") else d
        for d in DEFS]
