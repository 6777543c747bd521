"""Converters for ONNX ops whose sizes can depend on data (``sizes.DynInfo`` tracks which values):
each wraps the static converter of ``converters`` and defers to it whenever nothing is
data-dependent; otherwise it emits the run-time form of the op with the bound in its attribute
(docs/IR.md)."""
from __future__ import annotations

import numpy as np

from ..ir import Value
from .context import Context
from .converters import CONVERTERS as _STATIC


# ---------------------------------------------------------------------------- converters

def _bound_or_const(c: Context, i: int, what: str) -> tuple[np.ndarray | None, bool]:
    """(data, dynamic) of input ``i``: a constant's data, or a bound value's bound with dynamic
    True; (None, False) when absent; any other run-time value is the usual static-input error."""
    v = c.inp(i)
    if v is None or v.is_const:
        return (None if v is None else v.data), False
    b = c.dyn.bound(v)
    if b is None:
        c.const(i, what)  # raises the one-line error naming the node
    return b, True


def _unbound(c: Context, *idx: int) -> bool:
    """Whether any of inputs ``idx`` is computed at run time with no bound (e.g. a graph input):
    then the run-time form is typed by the model's declared output shape (``c.declared``)."""
    for i in idx:
        v = c.inp(i)
        if v is not None and not v.is_const and c.dyn.bound(v) is None:
            return True
    return False


def _ints(a) -> tuple[int, ...]:
    return tuple(int(x) for x in np.asarray(a).reshape(-1))


def _shape(c):
    x = c.need(0)
    if not c.dyn.is_shaped(x):
        return _STATIC["Shape"](c)
    start, end = int(c.attrs.get("start", 0)), c.attrs.get("end")
    attrs = {"start": start, "end": None if end is None else int(end)}
    out = c.emit("shape", [x], attrs)
    c.dyn.set_bound(out[0], np.array(x.shape, np.int64)[start:None if end is None else int(end)])
    return out


def _size(c):
    x = c.need(0)
    if not c.dyn.is_shaped(x):
        return _STATIC["Size"](c)
    out = c.emit("size", [x])
    c.dyn.set_bound(out[0], np.array(x.type.size, np.int64))
    return out


def _compress(c):
    axis = c.attrs.get("axis")
    return c.emit("compress", [c.need(0), c.need(1)], {"axis": None if axis is None else int(axis)})


def _unique(c):
    axis = c.attrs.get("axis")
    outs = c.emit("unique", [c.need(0)], {"axis": None if axis is None else int(axis),
                                          "sorted": bool(int(c.attrs.get("sorted", 1)))},
                  out_names=[o or f"{c.name}_unused{i}" for i, o in enumerate(list(c.node.output) + [""] * 4)][:4])
    return outs[:len(c.node.output)]


def _nonzero(c):
    return c.emit("non_zero", [c.need(0)])


def _reshape(c):
    x = c.need(0)
    if _unbound(c, 1):
        shape = c.declared(1, "shape")
        return c.emit("dyn_reshape", [x, c.need(1)], {"shape": shape, "declared": shape,
                                                       "allowzero": bool(int(c.attrs.get("allowzero", 0)))})
    target, dynamic = _bound_or_const(c, 1, "shape")
    if not dynamic and not c.dyn.is_shaped(x):
        return _STATIC["Reshape"](c)
    target = list(_ints(target))
    allowzero = int(c.attrs.get("allowzero", 0))
    bound = [x.shape[i] if d == 0 and not allowzero and i < len(x.shape) else d for i, d in enumerate(target)]
    if bound.count(-1) > 1:
        raise c.fail(f"shape {target} has more than one -1")
    if -1 in bound:
        known = int(np.prod([d for d in bound if d != -1], dtype=np.int64))
        if known <= 0 or x.type.size % known:
            raise c.fail(f"cannot reshape {list(x.shape)} to {target} (at the upper bound of its sizes)")
        bound[bound.index(-1)] = x.type.size // known
    return c.emit("dyn_reshape", [x, c.need(1)], {"shape": tuple(bound), "allowzero": bool(allowzero)})


def _slice(c):
    if c.opset < 10:
        return _STATIC["Slice"](c)
    if _unbound(c, 1, 2, 3, 4):
        shape = c.declared(next(i for i in range(1, 5) if _unbound(c, i)), "starts/ends/axes/steps")
        x = c.need(0)
        ins = [x, c.need(1), c.need(2)] + [v for v in (c.inp(3), c.inp(4)) if v is not None]
        attrs = {"starts": (0,) * len(shape), "ends": shape, "declared": shape,
                 "axes_input": c.inp(3) is not None, "steps_input": c.inp(4) is not None}
        return c.emit("dyn_slice", ins, attrs)
    starts, d1 = _bound_or_const(c, 1, "starts")
    ends, d2 = _bound_or_const(c, 2, "ends")
    if not (d1 or d2):
        return _STATIC["Slice"](c)
    x = c.need(0)
    axes, steps = c.const(3, "axes"), c.const(4, "steps")
    attrs = {"starts": _ints(starts), "ends": _ints(ends),
             "axes": None if axes is None else tuple(a + len(x.shape) if a < 0 else a for a in _ints(axes)),
             "steps": None if steps is None else _ints(steps)}
    return c.emit("dyn_slice", [x, c.need(1), c.need(2)], attrs)


def _topk(c):
    if c.opset < 10:
        return _STATIC["TopK"](c)
    if _unbound(c, 1):
        x = c.need(0)
        shape = c.declared(1, "K")
        axis = int(c.attrs.get("axis", -1))
        axis = axis + len(x.shape) if axis < 0 else axis
        if not 0 <= axis < len(shape):
            raise c.fail(f"axis {axis} is out of range for the declared shape {list(shape)}")
        attrs = {"k": shape[axis], "axis": axis, "declared": shape, "largest": bool(c.attrs.get("largest", 1)),
                 "sorted": bool(c.attrs.get("sorted", 1))}
        return c.emit("dyn_topk", [x, c.need(1)], attrs)
    k, dynamic = _bound_or_const(c, 1, "K")
    if not dynamic:
        return _STATIC["TopK"](c)
    x = c.need(0)
    axis = int(c.attrs.get("axis", -1))
    attrs = {"k": int(_ints(k)[0]), "axis": axis + len(x.shape) if axis < 0 else axis,
             "largest": bool(c.attrs.get("largest", 1)), "sorted": bool(c.attrs.get("sorted", 1))}
    return c.emit("dyn_topk", [x, c.need(1)], attrs)


def _split(c):
    """Split sizes computed at run time (e.g. boxes per pyramid level in Faster R-CNN's pooler):
    each part is bounded by the whole axis. (A part's value at the bound is no bound: with n at
    its bound, ``axis - n`` is at its least.)"""
    v = c.inp(1)
    if c.opset < 13 or v is None or v.is_const:
        return _STATIC["Split"](c)
    x = c.need(0)
    axis = int(c.attrs.get("axis", 0))
    axis = axis + len(x.shape) if axis < 0 else axis
    sizes = (x.shape[axis],) * len(c.node.output)
    return c.emit("dyn_split", [x, v], {"axis": axis, "sizes": sizes})


def _expand(c):
    if _unbound(c, 1):
        shape = c.declared(1, "shape")
        return c.emit("dyn_expand", [c.need(0), c.need(1)], {"shape": shape, "declared": shape})
    shape, dynamic = _bound_or_const(c, 1, "shape")
    if not dynamic:
        return _STATIC["Expand"](c)
    return c.emit("dyn_expand", [c.need(0), c.need(1)], {"shape": _ints(shape)})


def _tile(c):
    if _unbound(c, 1):
        x, shape = c.need(0), c.declared(1, "repeats")
        reps = tuple(s // d if d else 1 for s, d in zip(shape, x.shape))
        return c.emit("dyn_tile", [x, c.need(1)], {"repeats": reps, "declared": shape})
    reps, dynamic = _bound_or_const(c, 1, "repeats")
    if not dynamic:
        return _STATIC["Tile"](c)
    return c.emit("dyn_tile", [c.need(0), c.need(1)], {"repeats": _ints(reps)})


def _const_of_shape(c):
    if _unbound(c, 0):
        shape, dynamic = c.declared(0, "shape"), True
    else:
        shape, dynamic = _bound_or_const(c, 0, "shape")
    if not dynamic:
        return _STATIC["ConstantOfShape"](c)
    from onnx import numpy_helper
    value = c.attrs.get("value")
    fill = numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
    attrs = {"shape": _ints(shape), "value": fill[0].item(), "dtype": fill.dtype.name}
    if _unbound(c, 0):
        attrs["declared"] = attrs["shape"]
    return c.emit("constant_of_shape", [c.need(0)], attrs)


def _range(c):
    if _unbound(c, 0, 1, 2):
        shape = c.declared(next(i for i in range(3) if _unbound(c, i)), "start/limit/delta")
        if len(shape) != 1:
            raise c.fail(f"the declared shape {list(shape)} is not 1-D")
        return c.emit("range", [c.need(0), c.need(1), c.need(2)], {"length": shape[0], "declared": shape})
    got = [_bound_or_const(c, i, n) for i, n in enumerate(("start", "limit", "delta"))]
    if not any(d for _, d in got):
        return _STATIC["Range"](c)
    start, limit, delta = (np.asarray(a).reshape(-1)[0] for a, _ in got)
    if delta == 0:
        raise c.fail("delta is 0")
    length = len(np.arange(start, limit, delta))
    return c.emit("range", [c.need(0), c.need(1), c.need(2)], {"length": length})


def _squeeze(c):
    if c.opset < 13 or not _unbound(c, 1):
        return _STATIC["Squeeze"](c)
    return c.emit("dyn_squeeze", [c.need(0), c.need(1)], {"declared": c.declared(1, "axes")})


def _unsqueeze(c):
    if c.opset < 13 or not _unbound(c, 1):
        return _STATIC["Unsqueeze"](c)
    return c.emit("dyn_unsqueeze", [c.need(0), c.need(1)], {"declared": c.declared(1, "axes")})


def _pad(c):
    if c.opset < 11 or not _unbound(c, 1, 2, 3):
        return _STATIC["Pad"](c)
    shape = c.declared(next(i for i in (1, 2, 3) if _unbound(c, i)), "pads/constant_value/axes")
    value, axes = c.inp(2), c.inp(3) if c.opset >= 18 else None
    ins = [c.need(0), c.need(1)] + [v for v in (value, axes) if v is not None]
    return c.emit("dyn_pad", ins, {"declared": shape, "mode": c.attrs.get("mode", "constant"),
                                   "value_input": value is not None, "axes_input": axes is not None})


def _one_hot(c):
    if not _unbound(c, 1):
        return _STATIC["OneHot"](c)
    idx = c.need(0)
    shape = c.declared(1, "depth")
    axis = int(c.attrs.get("axis", -1))
    axis = axis + len(idx.shape) + 1 if axis < 0 else axis
    if len(shape) != len(idx.shape) + 1 or not 0 <= axis < len(shape):
        raise c.fail(f"the declared shape {list(shape)} does not fit indices of shape {list(idx.shape)}")
    return c.emit("dyn_one_hot", [idx, c.need(1), c.need(2)], {"depth": shape[axis], "axis": axis, "declared": shape})


def _center_crop_pad(c):
    """A constant target shape gives the output shape; one computed at run time takes the declared
    one (checked when run)."""
    x, tv = c.need(0), c.need(1)
    rank = len(x.shape)
    axes = c.attrs.get("axes")
    axes = tuple(range(rank)) if axes is None else tuple(int(a) + rank if int(a) < 0 else int(a) for a in axes)
    if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
        raise c.fail(f"axes {list(c.attrs.get('axes'))} are invalid for rank {rank}")
    if tv.is_const:
        target = _ints(tv.data)
        if len(target) != len(axes):
            raise c.fail(f"shape {list(target)} has {len(target)} entries for {len(axes)} axes")
        shape = list(x.shape)
        for a, t in zip(axes, target):
            shape[a] = t
        shape = tuple(shape)
    else:
        shape = c.declared(1, "shape")
    return c.emit("center_crop_pad", [x, tv], {"axes": axes, "declared": shape})


CONVERTERS = {
    **_STATIC,
    "NonZero": _nonzero,
    "Compress": _compress,
    "Unique": _unique,
    "Shape": _shape,
    "Size": _size,
    "Reshape": _reshape,
    "Slice": _slice,
    "TopK": _topk,
    "Expand": _expand,
    "Split": _split,
    "Tile": _tile,
    "ConstantOfShape": _const_of_shape,
    "Range": _range,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Pad": _pad,
    "OneHot": _one_hot,
    "CenterCropPad": _center_crop_pad,
}
