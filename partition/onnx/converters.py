"""ONNX op -> canonical op converters, one per ONNX op type (``CONVERTERS``), used by
``partition.onnx.importer``. Each takes the ``Context`` (``context.py``) of one node and returns its output values;
attributes the IR keeps static must be constants (``c.const``), and every unsupported attribute
combination is a one-line ``c.fail(...)``.
"""
from __future__ import annotations

import math
from types import MappingProxyType
from typing import Callable, Mapping

import numpy as np

from ..ir import Value
from ..ops import OPS, OpError, infer_types
from ..ops.nn import resize_roi, resize_targets
from .composites import COMPOSITES, layer_norm_with_stats
from .context import Context
from .proto import np_dtype
from .scan import scan


Converter = Callable[[Context], list]


def _unary(op: str) -> Converter:
    return lambda c: c.emit(op, [c.need(0)])


def _binary(op: str) -> Converter:
    return lambda c: c.emit(op, [c.need(0), c.need(1)])


_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
          "Erf": "erf", "Abs": "abs", "Neg": "neg", "Reciprocal": "reciprocal", "Not": "not",
          "HardSwish": "hard_swish", "Softplus": "softplus", "Softsign": "softsign", "Mish": "mish",
          "Sin": "sin", "Cos": "cos", "Floor": "floor", "Ceil": "ceil", "Round": "round", "Sign": "sign",
          "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh",
          "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "BitwiseNot": "bitwise_not"}
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Equal": "equal", "Less": "less",
           "Greater": "greater", "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal", "And": "and",
           "Or": "or", "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}


def _identity(c: Context):
    if c.node.op_type == "Dropout" and c.inp(2) is not None and not c.inp(2).is_const:
        # A constant training_mode=1 still imports as the identity: this is an inference compiler,
        # and exporters leave it set for modules exported in train mode (torch dynamo's native_dropout
        # in tests/data/zoo/hf_gpt2), whose outputs are compared in eval mode. Chosen at run time,
        # the mode (and its random mask) cannot be decided here.
        raise c.fail("training-only: Dropout whose training_mode is computed at run time (random "
                     "sampling in training) is not supported; only inference Dropout (an identity) is")
    if c.node.op_type == "Dropout" and len(c.node.output) > 1 and c.node.output[1]:
        # The mask of an inference Dropout is all ones.
        x = c.need(0)
        return [x, c.graph.add_const(np.ones(x.shape, dtype=bool), c.node.output[1])]
    return [c.need(0)]


def _where(c):
    return c.emit("where", [c.need(0), c.need(1), c.need(2)])


def _leaky(c):
    return c.emit("leaky_relu", [c.need(0)], {"alpha": float(c.attrs.get("alpha", 0.01))})


def _hsig(c):
    return c.emit("hard_sigmoid", [c.need(0)], {"alpha": float(c.attrs.get("alpha", 0.2)),
                                                "beta": float(c.attrs.get("beta", 0.5))})


def _gelu(c):
    return c.emit("gelu", [c.need(0)], {"approximate": c.attrs.get("approximate", "none")})


def _clip(c):
    if any(v is not None and not v.is_const for v in c.ins[1:3]):
        return _clip_runtime(c)
    if c.opset < 11:
        lo, hi = c.attrs.get("min"), c.attrs.get("max")
    else:
        lo_a, hi_a = c.const(1, "min"), c.const(2, "max")
        lo = None if lo_a is None else float(np.asarray(lo_a).reshape(-1)[0])
        hi = None if hi_a is None else float(np.asarray(hi_a).reshape(-1)[0])
    if lo == 0.0 and hi == 6.0:
        return c.emit("relu6", [c.need(0)])
    return c.emit("clip", [c.need(0)], {"min": lo, "max": hi})


def _clip_runtime(c):
    """Bounds computed at run time leave the shape alone: max with min, then min with max (the
    order of ONNX's definition, so min > max gives max everywhere)."""
    y = c.need(0)
    for i, op in ((1, "max"), (2, "min")):
        bound = c.inp(i)
        if bound is not None:
            last = i == 2 or c.inp(2) is None
            y = c.emit(op, [y, bound], out_names=None if last else c.tmp(f"clip_{op}"))[0]
    return [y]


def _cast_attrs(c: Context, dtype: str) -> dict:
    """saturate (opset 19+, default 1) matters only for float8 targets: out-of-range values clamp
    to the type's largest finite value instead of becoming NaN/inf."""
    attrs = {"dtype": dtype}
    if dtype.startswith("float8"):
        attrs["saturate"] = bool(c.attrs.get("saturate", 1))
    if dtype == "float8_e8m0fnu":  # the exponent-only scale type: round_mode from opset 24
        attrs["round_mode"] = c.attrs.get("round_mode", "up")
        if isinstance(attrs["round_mode"], bytes):
            attrs["round_mode"] = attrs["round_mode"].decode()
    return attrs


def _cast(c):
    return c.emit("cast", [c.need(0)], _cast_attrs(c, np_dtype(int(c.attrs["to"])).name))


def _cast_like(c):
    return c.emit("cast", [c.need(0)], _cast_attrs(c, c.need(1).dtype))


def _spatial(c: Context, x: Value, kernel: tuple[int, int]) -> dict:
    """strides, dilations and (top, left, bottom, right) pads with auto_pad resolved."""
    if len(x.shape) != 4:
        raise c.fail(f"only 2-D spatial inputs (rank 4, NCHW) are supported, got shape {list(x.shape)}")
    return _spatial_nd(c, x, kernel)


def _spatial_nd(c: Context, x: Value, kernel: tuple[int, ...]) -> dict:
    """strides, dilations and ONNX-order pads (all begins, then all ends) with auto_pad resolved,
    for as many spatial axes as ``kernel`` has."""
    nd = len(kernel)
    strides = tuple(int(s) for s in c.attrs.get("strides", (1,) * nd))
    dil = tuple(int(d) for d in c.attrs.get("dilations", (1,) * nd))
    auto = c.attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = tuple(int(p) for p in c.attrs.get("pads", (0,) * (2 * nd)))
    elif auto == "VALID":
        pads = (0,) * (2 * nd)
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(x.shape[2:], kernel, strides, dil):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            begin.append(lo)
            end.append(total - lo)
        pads = (*begin, *end)
    else:
        raise c.fail(f"unknown auto_pad '{auto}'")
    return {"strides": strides, "pads": pads, "dilations": dil}


def _lift_1d(c: Context, x: Value) -> Value:
    """(N, C, L) -> (N, C, 1, L), rewriting the node's 1-D attributes for the 2-D op: the new axis
    has kernel 1, stride 1, dilation 1 and no padding, so the 2-D op computes the 1-D one (and a
    1-D convolution can be offloaded as a conv2d)."""
    a = dict(c.attrs)
    for k in ("strides", "dilations", "kernel_shape"):
        if k in a:
            a[k] = [1, *a[k]]
    if "pads" in a:
        p = list(a["pads"])
        a["pads"] = [0, p[0], 0, p[1]] if len(p) == 2 else p
    c.attrs = a
    return c.emit("unsqueeze", [x], {"axes": (2,)}, out_names=c.tmp("2d"))[0]


def _squeeze_1d(c: Context, op: str, ins: list[Value], attrs: dict) -> list[Value]:
    y = c.emit(op, ins, attrs, out_names=c.tmp(op))[0]
    return c.emit("squeeze", [y], {"axes": (2,)})


def _conv(c):
    x, w = c.need(0), c.need(1)
    one_d = len(w.shape) == 3 and len(x.shape) == 3
    if len(w.shape) == 5 and len(x.shape) == 5:
        return _conv3d(c, x, w)
    if len(w.shape) != 4 and not one_d:
        raise c.fail(f"only 1-D, 2-D and 3-D convolutions are supported, weight shape {list(w.shape)}")
    if one_d:
        x = _lift_1d(c, x)
        w = c.emit("unsqueeze", [w], {"axes": (2,)}, out_names=c.tmp("w2d"))[0]
    attrs = _spatial(c, x, tuple(w.shape[2:]))
    attrs["groups"] = int(c.attrs.get("group", 1))
    ins = [x, w] + ([c.inp(2)] if c.inp(2) is not None else [])
    return _squeeze_1d(c, "conv2d", ins, attrs) if one_d else c.emit("conv2d", ins, attrs)


def _pool_attrs(c: Context, x: Value) -> dict:
    kernel = tuple(int(k) for k in c.attrs["kernel_shape"])
    attrs = _spatial(c, x, kernel)
    attrs["kernel"] = kernel
    attrs["ceil_mode"] = bool(c.attrs.get("ceil_mode", 0))
    return attrs


def _pool_input(c: Context) -> tuple[Value, bool]:
    """The pool's input as NCHW, and whether it was a 1-D (N, C, L) input lifted to (N, C, 1, L)."""
    x = c.need(0)
    if len(x.shape) == 3:
        return _lift_1d(c, x), True
    if len(x.shape) != 4:
        raise c.fail(f"only 1-D, 2-D and 3-D pooling is supported, input shape {list(x.shape)}, "
                     f"kernel_shape {list(c.attrs.get('kernel_shape', []))}")
    return x, False


def _maxpool(c):
    if len(c.node.output) > 1 and c.node.output[1]:
        x = c.need(0)
        if len(x.shape) != 4:
            raise c.fail(f"the Indices output of MaxPool is supported for 2-D pooling only, input shape {list(x.shape)}")
        attrs = _pool_attrs(c, x)
        y = c.emit("max_pool2d", [x], attrs, out_names=[c.node.output[0]])
        idx = c.emit("max_pool2d_indices", [x], {**attrs, "storage_order": int(c.attrs.get("storage_order", 0))},
                     out_names=[c.node.output[1]])
        return y + idx
    if len(c.need(0).shape) == 5:
        return _pool3d(c, "max_pool3d")
    x, one_d = _pool_input(c)
    attrs = _pool_attrs(c, x)
    return _squeeze_1d(c, "max_pool2d", [x], attrs) if one_d else c.emit("max_pool2d", [x], attrs)


def _avgpool(c):
    if len(c.need(0).shape) == 5:
        return _pool3d(c, "avg_pool3d")
    x, one_d = _pool_input(c)
    attrs = _pool_attrs(c, x)
    attrs["count_include_pad"] = bool(c.attrs.get("count_include_pad", 0))
    return _squeeze_1d(c, "avg_pool2d", [x], attrs) if one_d else c.emit("avg_pool2d", [x], attrs)


def _lp_pool(c):
    """LpPool: (sum over the window of |x|^p)^(1/p), as |x|^p averaged with the padding counted
    (zeros), times the window size, then the p-th root; any rank the average pools take."""
    x = c.need(0)
    p = float(c.attrs.get("p", 2))
    if len(x.shape) not in (3, 4, 5):
        raise c.fail(f"only 1-D, 2-D and 3-D pooling is supported, input shape {list(x.shape)}")
    if int(c.attrs.get("ceil_mode", 0)):
        raise c.fail("ceil_mode=1 is not supported for LpPool")
    pw = c.graph.add_const(np.asarray(p, x.dtype), c.tmp("p")[0], narrow=False)
    xp = c.emit("pow", [c.emit("abs", [x], out_names=c.tmp("abs"))[0], pw], out_names=c.tmp("pow"))[0]
    kernel = tuple(int(k) for k in c.attrs["kernel_shape"])
    if len(x.shape) == 5:
        attrs = {**_spatial_nd(c, xp, kernel), "kernel": kernel, "ceil_mode": False, "count_include_pad": True}
        mean = c.emit("avg_pool3d", [xp], attrs, out_names=c.tmp("mean"))[0]
    else:
        one_d = len(x.shape) == 3
        xin = _lift_1d(c, xp) if one_d else xp
        attrs = {**_pool_attrs(c, xin), "count_include_pad": True}
        mean = c.emit("avg_pool2d", [xin], attrs, out_names=c.tmp("mean"))[0]
        if one_d:
            mean = c.emit("squeeze", [mean], {"axes": (2,)}, out_names=c.tmp("mean1d"))[0]
    area = c.graph.add_const(np.asarray(int(np.prod(kernel)), x.dtype), c.tmp("area")[0], narrow=False)
    total = c.emit("mul", [mean, area], out_names=c.tmp("sum"))[0]
    root = c.graph.add_const(np.asarray(1.0 / p, x.dtype), c.tmp("root")[0], narrow=False)
    return c.emit("pow", [total, root])


def _gap(c):
    x = c.need(0)
    if len(x.shape) == 3:
        return _squeeze_1d(c, "global_avg_pool2d", [_lift_1d(c, x)], {})
    if len(x.shape) == 5:
        return c.emit("reduce_mean", [x], {"axes": (2, 3, 4), "keepdims": True})
    if len(x.shape) != 4:
        raise c.fail(f"only rank-3 (N, C, L), rank-4 (NCHW) and rank-5 (NCDHW) inputs are supported, "
                     f"got shape {list(x.shape)}")
    return c.emit("global_avg_pool2d", [x])


def _gmp(c):
    x = c.need(0)
    return c.emit("reduce_max", [x], {"axes": tuple(range(2, len(x.shape))), "keepdims": True})


def _bn(c):
    if any(o for o in c.node.output[1:]):
        raise c.fail("training-mode outputs of BatchNormalization are not supported")
    if int(c.attrs.get("training_mode", 0)):
        raise c.fail("training_mode=1 is not supported")
    return c.emit("batch_norm", [c.need(i) for i in range(5)], {"epsilon": float(c.attrs.get("epsilon", 1e-5))},
                  out_names=[c.node.output[0]])


def _ln(c):
    ins = [c.need(0), c.need(1)] + ([c.inp(2)] if c.inp(2) is not None else [])
    y = c.emit("layer_norm", ins, {"axis": int(c.attrs.get("axis", -1)),
                                   "epsilon": float(c.attrs.get("epsilon", 1e-5))},
               out_names=[c.node.output[0]])
    if any(o for o in c.node.output[1:]):  # Mean / InvStdDev, computed beside Y
        return layer_norm_with_stats(c, y)
    return y


def _matmul(c):
    """MatMul by a constant 2-D matrix is a linear layer (how exporters write nn.Linear on N-D
    inputs); like TVM's ONNX frontend, canonicalise it to dense with the weight stored [N, K], so
    that dense-only accelerators and the dense patterns (bias, activation epilogues) see it."""
    a, b = c.need(0), c.need(1)
    if not (b.is_const and len(b.shape) == 2 and len(a.shape) >= 2 and a.dtype == b.dtype):
        return c.emit("matmul", [a, b])
    key = (id(c.graph), id(b))  # one transposed copy per weight and graph, even when tied
    w = c.imp.transposed.get(key)
    if w is None:
        w = c.graph.add_const(np.ascontiguousarray(np.asarray(b.data).T), f"{b.name}_T")
        c.imp.transposed[key] = w
    return c.emit("dense", [a, w])


def _gemm(c):
    a, b, bias = c.need(0), c.need(1), c.inp(2)
    alpha, beta = float(c.attrs.get("alpha", 1.0)), float(c.attrs.get("beta", 1.0))
    ta, tb = int(c.attrs.get("transA", 0)), int(c.attrs.get("transB", 0))
    # The common nn.Linear form is canonicalised to dense so patterns see one op for it.
    if (alpha == 1.0 and beta == 1.0 and ta == 0 and tb == 1 and len(b.shape) == 2
            and (bias is None or bias.shape == (b.shape[0],))):
        return c.emit("dense", [a, b] + ([bias] if bias is not None else []))
    attrs = {"alpha": alpha, "beta": beta, "trans_a": ta, "trans_b": tb}
    return c.emit("gemm", [a, b] + ([bias] if bias is not None else []), attrs)


def _softmax_like(op: str) -> Converter:
    """Softmax / LogSoftmax / Hardmax: before opset 13 they normalise over all of [axis, rank) flattened
    together (default axis 1), from 13 over one axis (default -1)."""
    def conv(c: Context):
        x = c.need(0)
        rank = len(x.shape)
        axis = int(c.attrs.get("axis", 1 if c.opset < 13 else -1))
        axis = axis + rank if axis < 0 else axis
        if c.opset >= 13 or axis == rank - 1:
            return c.emit(op, [x], {"axis": axis if c.opset >= 13 else -1})
        outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        flat = c.emit("reshape", [x], {"shape": (outer, x.type.size // max(outer, 1))}, out_names=c.tmp("2d"))[0]
        y = c.emit(op, [flat], {"axis": -1}, out_names=c.tmp("flat"))[0]
        return c.emit("reshape", [y], {"shape": tuple(x.shape)})
    return conv


def _axes_of(c: Context, input_from: int, input_idx: int) -> tuple[int, ...] | None:
    """Axes given as an attribute (older opsets) or as a constant input (newer ones)."""
    if c.opset >= input_from:
        a = c.const(input_idx, "axes")
        return None if a is None else tuple(int(v) for v in np.asarray(a).reshape(-1))
    a = c.attrs.get("axes")
    return None if a is None else tuple(int(v) for v in a)


def _norm_axes(axes, rank: int) -> tuple[int, ...]:
    return tuple(sorted(a + rank if a < 0 else a for a in axes))


def _reduce(op: str, axes_input_from: int) -> Converter:
    def conv(c: Context):
        x = c.need(0)
        keep = bool(c.attrs.get("keepdims", 1))
        v = c.inp(1)
        if c.opset >= axes_input_from and v is not None and not v.is_const:
            # axes computed at run time: typed by the declared output shape, checked when run
            return c.emit(op, [x, v], {"shape": c.declared(1, "axes"), "keepdims": keep,
                                       "noop_with_empty_axes": bool(int(c.attrs.get("noop_with_empty_axes", 0)))})
        axes = _axes_of(c, axes_input_from, 1)
        if not axes:
            if int(c.attrs.get("noop_with_empty_axes", 0)):
                return [x]
            axes = None
        else:
            axes = _norm_axes(axes, len(x.shape))
        return c.emit(op, [x], {"axes": axes, "keepdims": keep})
    return conv




def _argmax(c):
    x = c.need(0)
    axis = int(c.attrs.get("axis", 0))
    return c.emit("argmax", [x], {"axis": axis + len(x.shape) if axis < 0 else axis,
                                  "keepdims": bool(c.attrs.get("keepdims", 1)),
                                  "select_last_index": bool(c.attrs.get("select_last_index", 0))})


def _topk(c):
    x = c.need(0)
    k = int(np.asarray(c.const(1, "K")).reshape(-1)[0]) if c.opset >= 10 else int(c.attrs["k"])
    axis = int(c.attrs.get("axis", -1))
    return c.emit("topk", [x], {"k": k, "axis": axis + len(x.shape) if axis < 0 else axis,
                                "largest": bool(c.attrs.get("largest", 1)),
                                "sorted": bool(c.attrs.get("sorted", 1))})


def _transpose(c):
    x = c.need(0)
    perm = c.attrs.get("perm")
    perm = tuple(range(len(x.shape)))[::-1] if perm is None else tuple(int(p) for p in perm)
    return c.emit("transpose", [x], {"perm": perm})


def _reshape(c):
    x = c.need(0)
    target = [int(v) for v in np.asarray(c.const(1, "shape")).reshape(-1)]
    allowzero = int(c.attrs.get("allowzero", 0))
    shape = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if i >= len(x.shape):
                raise c.fail(f"shape {target} copies dimension {i} that input {list(x.shape)} lacks")
            d = x.shape[i]
        shape.append(d)
    if shape.count(-1) > 1:
        raise c.fail(f"shape {target} has more than one -1")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or x.type.size % known:
            raise c.fail(f"cannot reshape {list(x.shape)} to {target}")
        shape[shape.index(-1)] = x.type.size // known
    return c.emit("reshape", [x], {"shape": tuple(shape)})


def _flatten(c):
    x = c.need(0)
    axis = int(c.attrs.get("axis", 1))
    return c.emit("flatten", [x], {"axis": axis + len(x.shape) if axis < 0 else axis})


def _squeeze(c):
    x = c.need(0)
    axes = _axes_of(c, 13, 1)
    axes = tuple(i for i, d in enumerate(x.shape) if d == 1) if axes is None else _norm_axes(axes, len(x.shape))
    return c.emit("squeeze", [x], {"axes": axes})


def _unsqueeze(c):
    x = c.need(0)
    axes = _axes_of(c, 13, 1)
    if axes is None:
        raise c.fail("Unsqueeze needs axes")
    return c.emit("unsqueeze", [x], {"axes": _norm_axes(axes, len(x.shape) + len(axes))})


def _concat(c):
    xs = [v for v in c.ins if v is not None]
    axis = int(c.attrs["axis"])
    rank = len(xs[0].shape)
    return c.emit("concat", xs, {"axis": axis + rank if axis < 0 else axis})


def _split(c):
    x = c.need(0)
    axis = int(c.attrs.get("axis", 0))
    axis = axis + len(x.shape) if axis < 0 else axis
    n_out = len(c.node.output)
    if c.opset >= 13:
        sizes = c.const(1, "split")
        sizes = None if sizes is None else [int(v) for v in np.asarray(sizes).reshape(-1)]
    else:
        sizes = c.attrs.get("split")
        sizes = None if sizes is None else [int(v) for v in sizes]
    if sizes is None:
        n = int(c.attrs.get("num_outputs", n_out))
        dim = x.shape[axis]
        chunk = -(-dim // n)  # ONNX: equal chunks, the last one smaller when it does not divide
        sizes = [min(chunk, dim - i * chunk) for i in range(n)]
    return c.emit("split", [x], {"axis": axis, "sizes": tuple(sizes)})


def _slice(c):
    x = c.need(0)
    if c.opset < 10:
        starts, ends = c.attrs["starts"], c.attrs["ends"]
        axes, steps = c.attrs.get("axes"), None
    else:
        starts, ends = c.const(1, "starts"), c.const(2, "ends")
        axes, steps = c.const(3, "axes"), c.const(4, "steps")
    ints = lambda a: None if a is None else tuple(int(v) for v in np.asarray(a).reshape(-1))  # noqa: E731
    attrs = {"starts": ints(starts), "ends": ints(ends), "axes": ints(axes), "steps": ints(steps)}
    if attrs["axes"] is not None:
        attrs["axes"] = tuple(a + len(x.shape) if a < 0 else a for a in attrs["axes"])
    return c.emit("slice", [x], attrs)


def _gather(c):
    data = c.need(0)
    axis = int(c.attrs.get("axis", 0))
    return c.emit("gather", [data, c.need(1)], {"axis": axis + len(data.shape) if axis < 0 else axis})


def _gather_nd(c):
    return c.emit("gather_nd", [c.need(0), c.need(1)], {"batch_dims": int(c.attrs.get("batch_dims", 0))})


def _gather_el(c):
    data = c.need(0)
    axis = int(c.attrs.get("axis", 0))
    return c.emit("gather_elements", [data, c.need(1)], {"axis": axis + len(data.shape) if axis < 0 else axis})


def _pad(c):
    x = c.need(0)
    rank = len(x.shape)
    if c.opset < 11:
        pads, value = list(c.attrs["pads"]), float(c.attrs.get("value", 0.0))
    else:
        pads = [int(v) for v in np.asarray(c.const(1, "pads")).reshape(-1)]
        cv = c.const(2, "constant_value")
        value = 0.0 if cv is None else float(np.asarray(cv).reshape(-1)[0])
        axes = c.const(3, "axes") if c.opset >= 18 else None
        if axes is not None:
            axes = [int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes).reshape(-1)]
            full = [0] * (2 * rank)
            for j, a in enumerate(axes):
                full[a], full[rank + a] = pads[j], pads[len(axes) + j]
            pads = full
    mode = c.attrs.get("mode", "constant")
    return c.emit("pad", [x], {"pads": tuple(int(p) for p in pads), "mode": mode, "value": value})


def _expand(c):
    shape = tuple(int(v) for v in np.asarray(c.const(1, "shape")).reshape(-1))
    return c.emit("expand", [c.need(0)], {"shape": shape})


def _tile(c):
    reps = tuple(int(v) for v in np.asarray(c.const(1, "repeats")).reshape(-1))
    return c.emit("tile", [c.need(0)], {"repeats": reps})


def _roi_align(c):
    # Before opset 16 the only transformation was output_half_pixel (no half-pixel shift).
    ctm = c.attrs.get("coordinate_transformation_mode", "half_pixel" if c.opset >= 16 else "output_half_pixel")
    return c.emit("roi_align", [c.need(0), c.need(1), c.need(2)],
                  {"output_height": int(c.attrs.get("output_height", 1)),
                   "output_width": int(c.attrs.get("output_width", 1)),
                   "sampling_ratio": int(c.attrs.get("sampling_ratio", 0)),
                   "spatial_scale": float(c.attrs.get("spatial_scale", 1.0)),
                   "mode": c.attrs.get("mode", "avg"), "coordinate_transformation_mode": ctm})


_NMS_PARAMS = ("max_output_boxes_per_class", "iou_threshold", "score_threshold")


def _nms(c):
    if any(c.inp(i) is not None and not c.inp(i).is_const for i in (2, 3, 4)):
        # parameters computed at run time are read then (the output is data-dependent anyway);
        # its type's bound is every box of every class
        given = [(name, c.inp(i)) for i, name in zip((2, 3, 4), _NMS_PARAMS) if c.inp(i) is not None]
        boxes = c.need(0)
        attrs = {"max_output_boxes_per_class": boxes.shape[1] if len(boxes.shape) == 3 else 0,
                 "iou_threshold": 0.0, "score_threshold": None,
                 "center_point_box": int(c.attrs.get("center_point_box", 0)),
                 "runtime": tuple(name for name, _ in given)}
        return c.emit("non_max_suppression", [boxes, c.need(1), *(v for _, v in given)], attrs)
    mo, iou, st = c.const(2, "max_output_boxes_per_class"), c.const(3, "iou_threshold"), c.const(4, "score_threshold")
    scalar = lambda a, f: None if a is None else f(np.asarray(a).reshape(-1)[0])  # noqa: E731
    attrs = {"max_output_boxes_per_class": scalar(mo, int) or 0,
             "iou_threshold": scalar(iou, float) or 0.0,
             "score_threshold": scalar(st, float),
             "center_point_box": int(c.attrs.get("center_point_box", 0))}
    return c.emit("non_max_suppression", [c.need(0), c.need(1)], attrs)


# ---- ops that only ever produce constants (shapes are static) -------------------------------

def _constant(c):
    from onnx import numpy_helper
    a = c.attrs
    if "value" in a:
        data = numpy_helper.to_array(a["value"])
    elif "value_float" in a:
        data = np.array(a["value_float"], dtype=np.float32)
    elif "value_floats" in a:
        data = np.array(a["value_floats"], dtype=np.float32)
    elif "value_int" in a:
        data = np.array(a["value_int"], dtype=np.int64)
    elif "value_ints" in a:
        data = np.array(a["value_ints"], dtype=np.int64)
    else:
        raise c.fail(f"unsupported Constant attribute {sorted(a)}")
    return c.new_const(data)


def _shape(c):
    shape = np.array(c.need(0).shape, dtype=np.int64)
    start, end = int(c.attrs.get("start", 0)), c.attrs.get("end")
    return c.new_const(shape[start:None if end is None else int(end)])


def _size(c):
    return c.new_const(np.array(c.need(0).type.size, dtype=np.int64))


def _const_of_shape(c):
    from onnx import numpy_helper
    shape = tuple(int(v) for v in np.asarray(c.const(0, "shape")).reshape(-1))
    value = c.attrs.get("value")
    fill = numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
    return c.new_const(np.full(shape, fill[0], dtype=fill.dtype))


def _range(c):
    start, limit, delta = (np.asarray(c.const(i, n)) for i, n in enumerate(("start", "limit", "delta")))
    return c.new_const(np.arange(start.item(), limit.item(), delta.item()).astype(start.dtype))


# ---- control flow -----------------------------------------------------------------------------

def _if(c):
    cond = c.need(0)
    then_gp, else_gp = c.attrs["then_branch"], c.attrs["else_branch"]
    if cond.is_const:  # a static branch: inline it into the current graph
        gp = then_gp if bool(np.asarray(cond.data).reshape(-1)[0]) else else_gp
        c.imp._constants(gp, c.scope)
        c.imp._nodes(gp, c.scope)
        return [c.scope.lookup(o.name, c.name) for o in gp.output]
    then_g, then_s = c.imp.import_body(then_gp, c.scope, f"{c.name}_then", [])
    else_g, else_s = c.imp.import_body(else_gp, c.scope, f"{c.name}_else", [])
    # Both branches must take the same captured values in the same order.
    order: list[Value] = []
    for v in [*then_s.captured, *else_s.captured]:
        if all(v is not u for u in order):
            order.append(v)
    for g, s in ((then_g, then_s), (else_g, else_s)):
        by_outer = {id(o): inner for o, inner in zip(s.captured, g.inputs)}
        ordered = []
        for o in order:
            inner = by_outer.get(id(o))
            ordered.append(inner if inner is not None else g.add_input(o.name, o.shape, o.dtype))
        g.inputs = ordered
    return c.emit("if", [cond, *order], {"then_branch": then_g, "else_branch": else_g})


def _loop(c):
    body_gp = c.attrs["body"]
    if c.inp(0) is None:
        raise c.fail("a Loop without a max trip count is not supported (scan outputs need a bound)")
    trip = c.need(0)
    cond = c.inp(1)
    if cond is None:
        cond = c.graph.add_const(np.array(True), f"{c.name}_cond")
    attrs = {}
    if not trip.is_const and c.dyn.bound(trip) is None:
        attrs = _loop_trip_bound(c, cond)
    elif not trip.is_const:
        c.const(0, "max trip count M")
    carried = [v for v in c.ins[2:]]
    if any(v is None for v in carried):
        raise c.fail("empty loop-carried inputs are not supported")
    leading = [("iter", (), "int64"), ("cond", (), "bool")] + [(f"v{i}", v.shape, v.dtype) for i, v in enumerate(carried)]
    if len(body_gp.input) != len(leading):
        raise c.fail(f"body takes {len(body_gp.input)} inputs, expected {len(leading)}")
    body, scope = c.imp.import_body(body_gp, c.scope, f"{c.name}_body", leading)
    if trip.shape == () and trip.dtype == "int64":
        trip_v = trip
    elif trip.is_const:
        trip_v = c.graph.add_const(np.array(int(np.asarray(trip.data).reshape(-1)[0]), dtype=np.int64), f"{c.name}_trip")
    else:
        trip_v = c.emit("reshape", [trip], {"shape": ()}, out_names=c.tmp("trip"))[0]
    cond_v = cond if cond.shape == () else c.emit("reshape", [cond], {"shape": ()}, out_names=c.tmp("cond"))[0]
    if attrs:
        # exact unless the body's condition can end the loop early (then the scan outputs are
        # shape-dynamic, the trip count their bound)
        always = lambda v: v.is_const and bool(np.asarray(v.data).reshape(-1)[0])  # noqa: E731
        attrs["trip_exact"] = always(body.outputs[0]) and always(cond)
    return c.emit("loop", [trip_v, cond_v, *carried, *scope.captured],
                  {"body": body, "num_carried": len(carried), **attrs})


def _loop_trip_bound(c: Context, cond: Value) -> dict:
    """A max trip count computed at run time: the scan outputs' declared leading dimension stands
    for it (type, costing); the loop runs the actual count and checks its scan outputs against it."""
    k = len(c.node.input) - 2
    scans = [o for o in list(c.node.output)[k:] if o]
    if not scans:  # no scan outputs: the trip count leaves every shape alone
        return {"trip_bound": 0}
    lead = {c.imp.declared[o][0] if c.imp.declared.get(o) else None for o in scans}
    if None in lead or len(lead) != 1:
        c.const(0, "max trip count M")  # raises the one-line error naming the node
    return {"trip_bound": int(lead.pop())}


def _check_seq_lens(c: Context, seq: int, batch: int) -> None:
    """Only full-length sequences are computed; sequence_lens may say so, never anything else."""
    v = c.inp(4)
    if v is None:
        return
    if not v.is_const:
        raise c.fail("sequence_lens computed at run time is not supported; only a constant equal "
                     f"to the sequence length {seq} for every batch row is")
    lens = np.asarray(v.data).reshape(-1)
    if lens.size != batch or np.any(lens != seq):
        raise c.fail(f"sequence_lens {lens.tolist()} is not supported; variable-length sequences are "
                     f"not, only every batch row running the full sequence length {seq}")


def _recurrent(op: str, n_states: int) -> Converter:
    """ONNX LSTM/GRU -> lstm/gru. Holes among the optional inputs (a missing B before initial_h)
    become zeros, as ONNX defines them, so the IR op takes its optional inputs trailing."""
    def conv(c):
        x, w, r = c.need(0), c.need(1), c.need(2)
        if not len(x.shape) == len(w.shape) == len(r.shape) == 3:
            raise c.fail(f"X, W and R must be 3-D, got shapes {list(x.shape)}, {list(w.shape)}, {list(r.shape)}")
        layout = int(c.attrs.get("layout", 0))
        seq, batch = (x.shape[0], x.shape[1]) if layout == 0 else (x.shape[1], x.shape[0])
        _check_seq_lens(c, seq, batch)
        d, hs = w.shape[0], r.shape[-1]
        state = (d, batch, hs) if layout == 0 else (batch, d, hs)
        # ONNX input index -> zero value when absent
        optional = [(3, (d, 2 * w.shape[1]))] + [(5 + k, state) for k in range(n_states)]
        if op == "lstm":
            optional.append((7, (d, 3 * hs)))
        last = max([k for k, (i, _) in enumerate(optional) if c.inp(i) is not None], default=-1)
        ins = [x, w, r]
        for i, shape in optional[:last + 1]:
            ins.append(c.inp(i) if c.inp(i) is not None else
                       c.graph.add_const(np.zeros(shape, x.dtype), f"{c.name}_in{i}"))
        attrs = {k: c.attrs[k] for k in ("direction", "hidden_size", "activations", "clip", "input_forget",
                                         "linear_before_reset") if k in c.attrs}
        attrs["layout"] = layout
        outs = list(c.node.output) + [""] * (1 + n_states - len(c.node.output))
        names = [o or f"{c.name}_{k}" for o, k in zip(outs, ("Y", "Y_h", "Y_c"))]
        return c.emit(op, ins, attrs, out_names=names)
    return conv


def _with_attrs(op: str, **defaults) -> Converter:
    """A unary op whose ONNX float attributes (with the spec's defaults) pass straight through."""
    return lambda c: c.emit(op, [c.need(0)], {k: float(c.attrs.get(k, v)) for k, v in defaults.items()})


def _variadic(op: str, mean: bool = False) -> Converter:
    """Min/Max/Sum/Mean over any number of broadcasting inputs, as a chain of binary ops."""
    def conv(c: Context):
        xs = [v for v in c.ins if v is not None]
        if not xs:
            raise c.fail("needs at least one input")
        if len(xs) == 1 and not mean:
            return [xs[0]]
        acc = xs[0]
        for i, x in enumerate(xs[1:], 1):
            last = i == len(xs) - 1 and not mean
            acc = c.emit(op, [acc, x], out_names=None if last else c.tmp(f"acc{i}"))[0]
        if mean:
            n = c.graph.add_const(np.asarray(len(xs), dtype=acc.dtype), c.tmp("count")[0])
            acc = c.emit("div", [acc, n])[0]
        return [acc]
    return conv


def _mod(c):
    fmod = int(c.attrs.get("fmod", 0))
    a = c.need(0)
    if fmod == 0 and c.opset < 28 and (np.issubdtype(np.dtype(a.dtype), np.floating) or a.dtype == "bfloat16"):
        raise c.fail(f"float inputs with fmod=0 are not supported before opset 28 (the ONNX spec needs "
                     f"fmod=1 there); this model is opset {c.opset}")
    return c.emit("mod", [a, c.need(1)], {"fmod": fmod})


def _convt_pads(c: Context, x: Value, w: Value, strides, dil, opad) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Explicit ONNX-order pads (all begins, then all ends) and output_padding. output_shape and
    SAME_* auto_pad split the total padding as the ONNX spec says (SAME_UPPER puts the odd one at the
    end, else at the start); an output_shape up to a stride beyond the full output adds that many
    zero rows at the end, as output_padding (onnxruntime; onnx's reference agrees)."""
    n = len(x.shape) - 2
    auto = c.attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise c.fail(f"unknown auto_pad '{auto}'")
    out = c.attrs.get("output_shape")
    if out is None and auto == "NOTSET":
        return tuple(int(p) for p in c.attrs.get("pads", (0,) * (2 * n))), opad
    if out is None and auto == "VALID":
        return (0,) * (2 * n), opad
    out = [d * s for d, s in zip(x.shape[2:], strides)] if out is None else [int(v) for v in out]
    if len(out) != n:
        raise c.fail(f"output_shape {out} must give the {n} spatial sizes")
    begin, end, extra = [], [], list(opad)
    for i, (size, k, s, d, op, o) in enumerate(zip(x.shape[2:], w.shape[2:], strides, dil, opad, out)):
        full = s * (size - 1) + op + (k - 1) * d + 1
        if o > full:
            if op or o - full >= max(s, d):
                raise c.fail(f"output size {out} is larger than the {full} that input {list(x.shape)}, kernel "
                             f"{list(w.shape[2:])}, strides {list(strides)} and output_padding {list(opad)} "
                             f"give, by a stride or more; not supported (onnxruntime refuses it)")
            extra[i] = o - full
            begin.append(0)
            end.append(0)
            continue
        total = full - o
        lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
        begin.append(lo)
        end.append(total - lo)
    return (*begin, *end), tuple(extra)


def _conv_transpose(c):
    x, w = c.need(0), c.need(1)
    if len(x.shape) == 3 and len(w.shape) == 3:
        # 1-D: as the 2-D op over (N, C, 1, L), the new axis with kernel 1 and no padding
        for k, fill in (("output_padding", 0), ("output_shape", 1)):
            if k in c.attrs:
                c.attrs = {**c.attrs, k: [fill, *c.attrs[k]]}
        x2 = _lift_1d(c, x)
        w2 = c.emit("unsqueeze", [w], {"axes": (2,)}, out_names=c.tmp("w2d"))[0]
        c.ins = [x2, w2] + list(c.ins[2:])
        y = _conv_transpose(c)[0]
        return c.emit("squeeze", [y], {"axes": (2,)}, out_names=[c.node.output[0]])
    if len(x.shape) not in (4, 5) or len(w.shape) != len(x.shape):
        raise c.fail(f"only 1-D, 2-D and 3-D transposed convolutions are supported (input and weight of one "
                     f"rank 3..5), input shape {list(x.shape)}, weight shape {list(w.shape)}")
    n = len(x.shape) - 2
    ks = c.attrs.get("kernel_shape")
    if ks is not None and tuple(int(k) for k in ks) != tuple(w.shape[2:]):
        raise c.fail(f"kernel_shape {list(ks)} differs from the weight's {list(w.shape[2:])}")
    strides = tuple(int(s) for s in c.attrs.get("strides", (1,) * n))
    dil = tuple(int(d) for d in c.attrs.get("dilations", (1,) * n))
    opad = tuple(int(o) for o in c.attrs.get("output_padding", (0,) * n))
    pads, opad = _convt_pads(c, x, w, strides, dil, opad)
    attrs = {"strides": strides, "pads": pads, "dilations": dil,
             "groups": int(c.attrs.get("group", 1)), "output_padding": opad}
    ins = [x, w] + ([c.inp(2)] if c.inp(2) is not None else [])
    return c.emit("conv_transpose2d" if n == 2 else "conv_transpose3d", ins, attrs)


_RESIZE_COORD_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric",
                       "tf_crop_and_resize")


def _resize_check(c: Context, x: Value) -> None:
    a = c.attrs
    mode = a.get("mode", "nearest")
    ctm = a.get("coordinate_transformation_mode", "half_pixel")
    if mode not in ("nearest", "linear", "cubic"):
        raise c.fail(f"mode '{mode}' is not supported (only nearest, linear and cubic)")
    if ctm not in _RESIZE_COORD_MODES:
        raise c.fail(f"coordinate_transformation_mode '{ctm}' is not supported (only "
                     f"{', '.join(_RESIZE_COORD_MODES)})")
    if a.get("keep_aspect_ratio_policy", "stretch") not in ("stretch", "not_larger", "not_smaller"):
        raise c.fail(f"keep_aspect_ratio_policy '{a['keep_aspect_ratio_policy']}' is not supported")
    if len(x.shape) != 4:
        raise c.fail(f"only 4-D NCHW inputs are supported, got shape {list(x.shape)}")


def _resize_targets(c: Context, x: Value) -> tuple[list[float], list[int]]:
    """Per-axis scales and output sizes from the constant scales or sizes input."""
    scales, sizes = c.const(2, "scales"), c.const(3, "sizes")
    scales = None if scales is None or np.size(scales) == 0 else scales
    sizes = None if sizes is None or np.size(sizes) == 0 else sizes
    if (scales is None) == (sizes is None):
        raise c.fail("exactly one of the scales and sizes inputs must be given")
    by = "scales" if scales is not None else "sizes"
    try:
        return resize_targets(x.shape, scales if sizes is None else sizes, by, c.attrs.get("axes"),
                              c.attrs.get("keep_aspect_ratio_policy", "stretch"))
    except OpError as e:
        raise c.fail(str(e).removeprefix("resize: ")) from None


def _resize_runtime(c: Context, x: Value) -> tuple[dict, list[Value]] | None:
    """Scales or sizes computed at run time (a graph input): the output size is the model's declared
    one, and the resize op checks the actual values give it (and uses their scales) when it runs."""
    live = [(i, v) for i, v in ((2, c.inp(2)), (3, c.inp(3))) if v is not None and not v.is_const]
    if not live:
        return None
    i, v = live[0]
    other = c.inp(5 - i)
    if len(live) > 1 or (other is not None and np.size(other.data) != 0):
        raise c.fail("exactly one of the scales and sizes inputs must be given")
    if i == 2 and c.attrs.get("coordinate_transformation_mode") == "align_corners":
        # its formula divides by the resized length, fractional for most scales: onnx's reference
        # uses scale * length, onnxruntime the integer length (constant scales follow onnxruntime
        # today; at run time the fractional case could not be told apart before it runs)
        raise c.fail("align_corners with scales computed at run time is not supported (onnx's "
                     "reference and onnxruntime disagree where scale * length is fractional)")
    shape = c.declared(i, "scales" if i == 2 else "sizes")
    if len(shape) != 4 or list(shape[:2]) != list(x.shape[:2]):
        raise c.fail(f"only the spatial axes of NCHW can be resized; input {list(x.shape)} -> {list(shape)}")
    axes = c.attrs.get("axes")
    return ({"size": tuple(shape[2:]), "by": "scales" if i == 2 else "sizes",
             "axes": None if axes is None else tuple(int(a) for a in axes),
             "policy": c.attrs.get("keep_aspect_ratio_policy", "stretch")}, [v])


def _resize(c):
    x = c.need(0)
    _resize_check(c, x)
    runtime = _resize_runtime(c, x)
    if runtime is None:
        scales, out = _resize_targets(c, x)
        attrs, extra = {"size": tuple(out[2:]), "scales": tuple(scales[2:])}, []
    else:
        attrs, extra = runtime
    attrs = {**attrs, "mode": c.attrs.get("mode", "nearest"),
             "coordinate_transformation_mode": c.attrs.get("coordinate_transformation_mode", "half_pixel"),
             "nearest_mode": c.attrs.get("nearest_mode", "round_prefer_floor")}
    if attrs["mode"] == "cubic":
        attrs["cubic_coeff_a"] = float(c.attrs.get("cubic_coeff_a", -0.75))
        attrs["exclude_outside"] = bool(int(c.attrs.get("exclude_outside", 0)))
    if int(c.attrs.get("antialias", 0)) and attrs["mode"] != "nearest":
        attrs["antialias"] = True
    if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        attrs["extrapolation_value"] = float(c.attrs.get("extrapolation_value", 0.0))
        roi = c.inp(1)
        if roi is None or (roi.is_const and np.size(roi.data) == 0):
            raise c.fail("tf_crop_and_resize needs the roi input")
        axes = c.attrs.get("axes")
        if roi.is_const:
            try:
                attrs["roi"] = resize_roi(roi.data, len(x.shape), axes)
            except OpError as e:
                raise c.fail(str(e).removeprefix("resize: ")) from None
        else:  # read when run, after the scales/sizes input if that is run-time too
            extra.append(roi)
            attrs.update(roi_input=True, roi_axes=None if axes is None else tuple(int(a) for a in axes))
    return c.emit("resize", [x, *extra], attrs)


def _instance_norm(c):
    return c.emit("instance_norm", [c.need(0), c.need(1), c.need(2)],
                  {"epsilon": float(c.attrs.get("epsilon", 1e-5))})


def _blocksize(c: Context) -> dict:
    # a missing (required) blocksize is left for the op to report
    return {"blocksize": int(c.attrs["blocksize"])} if "blocksize" in c.attrs else {}


def _depth_to_space(c):
    return c.emit("depth_to_space", [c.need(0)], {**_blocksize(c), "mode": c.attrs.get("mode", "DCR")})


def _space_to_depth(c):
    # mode arrived in opset 25 (default DCR, the only order before it)
    return c.emit("space_to_depth", [c.need(0)], {**_blocksize(c), "mode": c.attrs.get("mode", "DCR")})


def _trilu(c):
    kv = c.inp(1)
    if kv is not None and not kv.is_const:
        return _trilu_runtime(c, kv)
    k = c.const(1, "k")
    return c.emit("trilu", [c.need(0)], {"upper": bool(c.attrs.get("upper", 1)),
                                         "k": 0 if k is None else int(np.asarray(k).reshape(-1)[0])})


def _trilu_runtime(c, kv: Value):
    """A k computed at run time moves the diagonal, not the shape: keep x where column - row is
    >= k (upper) or <= k (lower), else 0."""
    x = c.need(0)
    if len(x.shape) < 2:
        raise c.fail(f"input must have rank >= 2, got shape {list(x.shape)}")
    rows, cols = x.shape[-2:]
    diag = c.graph.add_const(np.arange(cols)[None, :] - np.arange(rows)[:, None], c.tmp("diag")[0])
    k = kv if kv.dtype == "int64" else c.emit("cast", [kv], {"dtype": "int64"}, out_names=c.tmp("k"))[0]
    k = c.emit("reshape", [k], {"shape": ()}, out_names=c.tmp("k0"))[0] if k.shape != () else k
    cmp = "greater_equal" if bool(c.attrs.get("upper", 1)) else "less_equal"
    keep = c.emit(cmp, [diag, k], out_names=c.tmp("keep"))[0]
    zero = c.graph.add_const(np.zeros((), x.dtype), c.tmp("zero")[0], narrow=False)
    return c.emit("where", [keep, x, zero])


def _einsum(c):
    if "equation" not in c.attrs:
        raise c.fail("missing attribute 'equation'")
    return c.emit("einsum", [c.need(i) for i in range(len(c.ins))], {"equation": c.attrs["equation"]})


def _axis_in(rank: int, axis: int) -> int:
    """A negative axis made non-negative; one out of range is left for the op to report."""
    return axis + rank if -rank <= axis < 0 else axis


def _bit_shift(c):
    return c.emit("bit_shift", [c.need(0), c.need(1)], {"direction": c.attrs.get("direction", "")})


def _grid_sample(c):
    # opset 16 spells the modes bilinear/bicubic; opset 20 linear/cubic (and allows N-D)
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(c.attrs.get("mode", "linear"), c.attrs.get("mode", "linear"))
    return c.emit("grid_sample", [c.need(0), c.need(1)], {
        "mode": mode, "padding_mode": c.attrs.get("padding_mode", "zeros"),
        "align_corners": bool(int(c.attrs.get("align_corners", 0)))})


def _dft(c):
    """DFT: opset 17 takes axis as an attribute (default 1), opset 20 as an input (default -2);
    dft_length is an input in both."""
    x = c.need(0)
    rank = len(x.shape)
    av = c.inp(2)
    if c.opset >= 20 and av is not None and not av.is_const:
        return _dft_runtime_axis(c, x, av)
    if c.opset >= 20:
        a = c.const(2, "axis")
        axis = -2 if a is None else int(np.asarray(a).reshape(-1)[0])
    else:
        axis = int(c.attrs.get("axis", 1))
    n = c.const(1, "dft_length")
    attrs = {"axis": axis + rank if axis < 0 else axis, "inverse": bool(int(c.attrs.get("inverse", 0))),
             "onesided": bool(int(c.attrs.get("onesided", 0)))}
    if n is not None:
        attrs["length"] = int(np.asarray(n).reshape(-1)[0])
    return c.emit("dft", [x], attrs)


def _window(kind: str) -> Converter:
    """Hann/Hamming/BlackmanWindow: a constant size folds; one computed at run time takes the
    declared length (checked when run)."""
    def conv(c: Context):
        sv = c.need(0)
        if sv.is_const:
            length = int(np.asarray(sv.data).reshape(-1)[0])
        else:
            shape = c.declared(0, "size")
            if len(shape) != 1:
                raise c.fail(f"the declared shape {list(shape)} is not 1-D")
            length = shape[0]
        dtype = np_dtype(int(c.attrs.get("output_datatype", 1))).name
        return c.emit("window", [sv], {"kind": kind, "periodic": bool(int(c.attrs.get("periodic", 1))),
                                       "dtype": dtype, "length": length})
    return conv


def _dft_runtime_axis(c: Context, x: Value, av: Value) -> list[Value]:
    """An axis computed at run time: typed (and costed) along the first signal axis that gives the
    declared output shape; the op reads the actual axis when it runs and checks the shape."""
    shape = c.declared(2, "axis")
    rank = len(x.shape)
    n = c.const(1, "dft_length")
    base = {"inverse": bool(int(c.attrs.get("inverse", 0))), "onesided": bool(int(c.attrs.get("onesided", 0))),
            "declared": shape}
    if n is not None:
        base["length"] = int(np.asarray(n).reshape(-1)[0])
    for axis in range(rank - 1):
        try:
            fits = infer_types("dft", [x.type], dict(base, axis=axis))[0].shape == shape
        except OpError:
            fits = False
        if fits:
            return c.emit("dft", [x, av], dict(base, axis=axis))
    raise c.fail(f"no signal axis of input {list(x.shape)} gives the declared shape {list(shape)}")


def _col2im(c):
    """Col2Im: constant image/block shapes become attributes; computed at run time, they stay inputs
    (read when run) and the output is typed by the declared shape."""
    x, image, block = c.need(0), c.need(1), c.need(2)
    attrs = {k: tuple(int(v) for v in c.attrs[k]) for k in ("strides", "dilations", "pads") if k in c.attrs}
    if image.is_const and block.is_const:
        return c.emit("col2im", [x], {**attrs, "image_shape": tuple(int(v) for v in np.ravel(image.data)),
                                      "block_shape": tuple(int(v) for v in np.ravel(block.data))})
    shape = c.declared(1 if not image.is_const else 2, "image_shape/block_shape")
    return c.emit("col2im", [x, image, block], {**attrs, "declared": shape})


def _max_unpool(c):
    """MaxUnpool: the output is (in - 1) * stride - pads + kernel per spatial axis. An output_shape
    input equal to that is the same op; a larger one is refused: onnx's reference scatters the
    indices into the inferred shape and zero-pads it, onnxruntime (and torch) index the larger
    shape itself."""
    x, idx = c.need(0), c.need(1)
    n = len(x.shape) - 2
    kernel = [int(k) for k in c.attrs.get("kernel_shape", ())]
    if len(kernel) != n or n < 1:
        raise c.fail(f"kernel_shape {kernel} must have one value per spatial axis of input {list(x.shape)}")
    strides = [int(s) for s in c.attrs.get("strides", [1] * n)]
    pads = [int(p) for p in c.attrs.get("pads", [0] * (2 * n))]
    if len(strides) != n or len(pads) != 2 * n:
        raise c.fail(f"strides {strides} and pads {pads} must have {n} and {2 * n} values")
    out = tuple(x.shape[:2]) + tuple((x.shape[2 + i] - 1) * strides[i] - pads[i] - pads[n + i] + kernel[i]
                                     for i in range(n))
    if min(out) < 1:
        raise c.fail(f"kernel {kernel}, strides {strides} and pads {pads} give output shape {list(out)}")
    sv = c.inp(2)
    if sv is not None:
        want = (tuple(int(v) for v in np.ravel(sv.data)) if sv.is_const
                else c.declared(2, "output_shape"))
        if tuple(want) != out:
            raise c.fail(f"output_shape {list(want)} other than the inferred {list(out)} is not supported "
                         f"(onnx's reference and onnxruntime place the indices differently there)")
    return c.emit("max_unpool", [x, idx], {"out": out})


def _stft(c):
    """STFT: a constant frame_step/frame_length becomes an attribute; computed at run time it is an
    extra input (read when run) and the output is typed by the declared shape."""
    x, step_v, window, length_v = c.need(0), c.need(1), c.inp(2), c.inp(3)
    attrs = {"onesided": bool(int(c.attrs.get("onesided", 1))), "window": window is not None}
    ins, runtime = [x] + ([window] if window is not None else []), None
    for key, v in (("frame_step", step_v), ("frame_length", length_v)):
        if v is None:
            attrs[key] = None
        elif v.is_const:
            attrs[key] = int(np.asarray(v.data).reshape(-1)[0])
        else:
            attrs[key] = None
            ins.append(v)
            runtime = 1 if key == "frame_step" else 3
    if attrs["frame_length"] is None and length_v is None and window is None:
        raise c.fail("needs a window or a frame_length input")
    if runtime is not None:
        attrs["declared"] = c.declared(runtime, "frame_step/frame_length")
    return c.emit("stft", ins, attrs)


def _mel_weight_matrix(c):
    ins = [c.need(i) for i in range(5)]
    dtype = np_dtype(int(c.attrs.get("output_datatype", 1))).name
    if all(v.is_const for v in ins):  # a constant, in its own type (float64 stays float64)
        bins, dft_len = (int(np.asarray(v.data).reshape(-1)[0]) for v in ins[:2])
        try:
            return c.new_const(OPS["mel_weight_matrix"].compute(
                [v.data for v in ins], {"declared": (dft_len // 2 + 1, bins), "dtype": dtype})[0])
        except OpError as e:
            raise c.fail(str(e)) from None
    else:
        shape = c.declared(next(i for i, v in enumerate(ins) if not v.is_const), "num_mel_bins/dft_length")
    return c.emit("mel_weight_matrix", ins, {"declared": shape, "dtype": dtype})


def _linear_attention(c):
    """LinearAttention (opset 27): a missing past_state is zeros; decay/beta follow update_rule."""
    q, k, v = c.need(0), c.need(1), c.need(2)
    rule = c.attrs.get("update_rule", "gated_delta")
    hk = int(c.attrs.get("kv_num_heads", 0))
    hq = int(c.attrs.get("q_num_heads", 0))
    if hk <= 0 or hq <= 0 or q.shape[-1] % hq or v.shape[-1] % hk:
        raise c.fail(f"q_num_heads {hq} and kv_num_heads {hk} must divide the hidden sizes")
    state = c.inp(3)
    if state is None:
        state = c.graph.add_const(np.zeros((q.shape[0], hk, q.shape[-1] // hq, v.shape[-1] // hk), q.dtype),
                                  c.tmp("state0")[0], narrow=False)
    ins = [q, k, v, state]
    for i, what, used in ((4, "decay", rule in ("gated", "gated_delta")), (5, "beta", rule in ("delta", "gated_delta"))):
        if used != (c.inp(i) is not None):
            raise c.fail(f"update_rule '{rule}' {'needs' if used else 'takes no'} {what} input")
        if used:
            ins.append(c.inp(i))
    attrs = {"update_rule": rule, "q_num_heads": hq, "kv_num_heads": hk}
    if c.attrs.get("scale"):
        attrs["scale"] = float(c.attrs["scale"])
    return c.emit("linear_attention", ins, attrs, out_names=[o or f"{c.name}_{j}" for j, o in
                                                            enumerate(list(c.node.output) + [""] * 2)][:2])


def _bitcast(c):
    return c.emit("bitcast", [c.need(0)], {"dtype": np_dtype(int(c.attrs["to"])).name})


def _deform_conv(c):
    x, w, off = c.need(0), c.need(1), c.need(2)
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise c.fail(f"only 2-D deformable convolutions are supported, input shape {list(x.shape)}")
    attrs = _spatial(c, x, tuple(w.shape[2:]))
    attrs["groups"] = int(c.attrs.get("group", 1))
    attrs["offset_groups"] = int(c.attrs.get("offset_group", 1))
    ins = [x, w, off]
    bias, mask = c.inp(3), c.inp(4)
    if mask is not None and bias is None:  # a hole: an absent bias is zeros
        bias = c.graph.add_const(np.zeros(w.shape[0], x.dtype), c.tmp("bias0")[0], narrow=False)
    ins += [v for v in (bias, mask) if v is not None]
    return c.emit("deform_conv", ins, attrs)


def _eye_like(c):
    """EyeLike: a constant, since the shape is static (k shifts the diagonal)."""
    x = c.need(0)
    if len(x.shape) != 2:
        raise c.fail(f"input must be 2-D, got shape {list(x.shape)}")
    dtype = np_dtype(int(c.attrs["dtype"])) if "dtype" in c.attrs else np.dtype(x.dtype)
    return c.new_const(np.eye(x.shape[0], x.shape[1], k=int(c.attrs.get("k", 0)), dtype=dtype))


def _cumsum(c):
    x, axis_v = c.need(0), c.need(1)
    op = "cumprod" if c.node.op_type == "CumProd" else "cumsum"
    flags = {"exclusive": bool(c.attrs.get("exclusive", 0)), "reverse": bool(c.attrs.get("reverse", 0))}
    if not axis_v.is_const:  # an axis computed at run time leaves the shape alone: read it then
        if axis_v.type.size != 1:
            raise c.fail(f"axis must hold one value, got shape {list(axis_v.shape)}")
        return c.emit(op, [x, axis_v], flags)
    axis = np.asarray(c.const(1, "axis")).reshape(-1)
    if axis.size != 1:
        raise c.fail(f"axis must hold one value, got {axis.tolist()}")
    return c.emit(op, [x], {"axis": _axis_in(len(x.shape), int(axis[0])), **flags})


def _arg_reduce(op: str) -> Converter:
    def conv(c):
        x = c.need(0)
        return c.emit(op, [x], {"axis": _axis_in(len(x.shape), int(c.attrs.get("axis", 0))),
                                "keepdims": bool(c.attrs.get("keepdims", 1)),
                                "select_last_index": bool(c.attrs.get("select_last_index", 0))})
    return conv


def _isinf(c):
    return c.emit("isinf", [c.need(0)], {"detect_negative": int(c.attrs.get("detect_negative", 1)),
                                         "detect_positive": int(c.attrs.get("detect_positive", 1))})


def _lrn(c):
    if "size" not in c.attrs:
        raise c.fail("missing attribute 'size'")
    return c.emit("lrn", [c.need(0)], {"size": int(c.attrs["size"]), "alpha": float(c.attrs.get("alpha", 1e-4)),
                                       "beta": float(c.attrs.get("beta", 0.75)),
                                       "bias": float(c.attrs.get("bias", 1.0))})


# ONNX element types QuantizeLinear may produce here (output_dtype codes); float8 and int4 are not.
_QUANT_CODES = {2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz",
                19: "float8_e5m2", 20: "float8_e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4_e2m1fn",
                25: "uint2", 26: "int2"}
_QUANT_TYPES = "8/16/4/2-bit integer and float8/float4"


def _quant_attrs(c: Context, x: Value) -> dict:
    """The axis of a per-axis or blocked scale (block_size, opset 21); pre-13 per-axis scales are errors."""
    block = int(c.attrs.get("block_size", 0))
    if block:
        return {"axis": _axis_in(len(x.shape), int(c.attrs.get("axis", 1))), "block_size": block}
    scale = c.need(1)
    if scale.type.size != 1 and c.opset < 13:
        raise c.fail(f"a per-axis scale (shape {list(scale.shape)}) needs opset 13 or later; opset {c.opset} "
                     f"quantizes per tensor only")
    return {"axis": _axis_in(len(x.shape), int(c.attrs.get("axis", 1)))}


def _quant_type(c: Context, dtype: str, what: str) -> None:
    if dtype not in _QUANT_CODES.values():
        raise c.fail(f"{what} type {dtype} is not supported; only {_QUANT_TYPES} quantization is")


def _quantize(c):
    from onnx import TensorProto
    x, zp = c.need(0), c.inp(2)
    attrs = _quant_attrs(c, x)
    if not int(c.attrs.get("saturate", 1)):  # float8 targets only (opset 19+)
        attrs["saturate"] = False
    code = int(c.attrs.get("output_dtype", 0))
    if code and code not in _QUANT_CODES:
        raise c.fail(f"output_dtype {TensorProto.DataType.Name(code)} is not supported; only {_QUANT_TYPES} "
                     f"quantization is")
    if zp is not None:
        _quant_type(c, zp.dtype, "zero_point")
        if code and _QUANT_CODES[code] != zp.dtype:
            raise c.fail(f"output_dtype {_QUANT_CODES[code]} differs from the zero_point type {zp.dtype}")
        return c.emit("quantize_linear", [x, c.need(1), zp], attrs)
    return c.emit("quantize_linear", [x, c.need(1)], {**attrs, "dtype": _QUANT_CODES.get(code, "uint8")})


def _dequantize(c):
    x, zp = c.need(0), c.inp(2)
    if x.dtype != "int32":
        _quant_type(c, x.dtype, "input")
    attrs = _quant_attrs(c, x)
    return c.emit("dequantize_linear", [x, c.need(1)] + ([zp] if zp is not None else []), attrs)


def _affine_grid(c):
    """A constant size gives the output shape; one computed at run time takes the declared one
    (checked when run)."""
    theta, sv = c.need(0), c.need(1)
    if sv.is_const:
        size = [int(v) for v in np.asarray(sv.data).reshape(-1)]
        shape = (size[0], *size[2:], len(size) - 2) if len(size) >= 3 else tuple(size)
    else:
        shape = c.declared(1, "size")
    return c.emit("affine_grid", [theta, sv], {"align_corners": bool(int(c.attrs.get("align_corners", 0))),
                                               "declared": tuple(shape)})


def _qlinear_matmul(c):
    return c.emit("qlinear_matmul", [c.need(i) for i in range(8)])


def _scatter_nd(c):
    return c.emit("scatter_nd", [c.need(0), c.need(1), c.need(2)], {"reduction": c.attrs.get("reduction", "none")})


def _scatter_el(c):
    data = c.need(0)
    return c.emit("scatter_elements", [data, c.need(1), c.need(2)],
                  {"axis": _axis_in(len(data.shape), int(c.attrs.get("axis", 0))),
                   "reduction": c.attrs.get("reduction", "none")})


def _one_hot(c):
    idx, _ = c.need(0), c.need(1)
    depth = np.asarray(c.const(1, "depth")).reshape(-1)
    if depth.size != 1:
        raise c.fail(f"depth must hold one value, got {depth.tolist()}")
    # a float depth is cast to int64, as the spec says
    return c.emit("one_hot", [idx, c.need(2)], {"depth": int(depth[0]),
                                                "axis": _axis_in(len(idx.shape) + 1, int(c.attrs.get("axis", -1)))})


def _conv3d(c: Context, x: Value, w: Value) -> list[Value]:
    attrs = _spatial_nd(c, x, tuple(w.shape[2:]))
    attrs["groups"] = int(c.attrs.get("group", 1))
    return c.emit("conv3d", [x, w] + ([c.inp(2)] if c.inp(2) is not None else []), attrs)


def _pool3d(c: Context, op: str) -> list[Value]:
    x = c.need(0)
    kernel = tuple(int(k) for k in c.attrs["kernel_shape"])
    if len(kernel) != 3:
        raise c.fail(f"kernel_shape {list(kernel)} must have 3 entries for the 5-D input of shape "
                     f"{list(x.shape)}")
    attrs = _spatial_nd(c, x, kernel)
    attrs["kernel"] = kernel
    attrs["ceil_mode"] = bool(c.attrs.get("ceil_mode", 0))
    if op == "avg_pool3d":
        attrs["count_include_pad"] = bool(c.attrs.get("count_include_pad", 0))
    return c.emit(op, [x], attrs)


# Ops only training uses (losses, random sampling): refused in one line, never computed.
TRAINING_ONLY = ("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "Bernoulli", "RandomNormal",
                 "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial")


def _training_only(c):
    raise c.fail(f"training-only op {c.node.op_type} (a loss or random sampling) is not supported")


# ONNX op type -> converter; a value built once, read by ``_Importer._nodes``.
CONVERTERS: Mapping[str, Converter] = MappingProxyType({
    **{k: _training_only for k in TRAINING_ONLY},
    **COMPOSITES,
    **{k: _unary(v) for k, v in _UNARY.items()},
    **{k: _binary(v) for k, v in _BINARY.items()},
    # ReduceSum took axes as an input from opset 13, the others from opset 18
    "HannWindow": _window("hann"),
    "HammingWindow": _window("hamming"),
    "BlackmanWindow": _window("blackman"),
    "ReduceMean": _reduce("reduce_mean", 18),
    "ReduceMax": _reduce("reduce_max", 18),
    "ReduceSum": _reduce("reduce_sum", 13),
    "LSTM": _recurrent("lstm", 2),
    "GRU": _recurrent("gru", 1),
    "RNN": _recurrent("rnn", 1),
    "ReduceMin": _reduce("reduce_min", 18),
    "ReduceProd": _reduce("reduce_prod", 18),
    "ReduceL1": _reduce("reduce_l1", 18),
    "ReduceL2": _reduce("reduce_l2", 18),
    "ReduceSumSquare": _reduce("reduce_sum_square", 18),
    "ReduceLogSumExp": _reduce("reduce_log_sum_exp", 18),
    "ReduceLogSum": _reduce("reduce_log_sum", 18),
    "CumProd": _cumsum,
    "BitShift": _bit_shift,
    "EyeLike": _eye_like,
    "GridSample": _grid_sample,
    "DeformConv": _deform_conv,
    "LpPool": _lp_pool,
    "BitCast": _bitcast,
    "DFT": _dft,
    "Col2Im": _col2im,
    "STFT": _stft,
    "MelWeightMatrix": _mel_weight_matrix,
    "MaxUnpool": _max_unpool,
    "Scan": scan,
    "ReverseSequence": lambda c: c.emit("reverse_sequence", [c.need(0), c.need(1)], {
        "batch_axis": int(c.attrs.get("batch_axis", 1)), "time_axis": int(c.attrs.get("time_axis", 0))}),
    "TensorScatter": lambda c: c.emit("tensor_scatter", [v for v in c.ins if v is not None], {
        "axis": int(c.attrs.get("axis", -2)), "mode": c.attrs.get("mode", "linear")}),
    "LinearAttention": _linear_attention,
    "Det": _unary("det"),
    "Swish": _with_attrs("swish", alpha=1.0),
    "Min": _variadic("min"),
    "Max": _variadic("max"),
    "Sum": _variadic("add"),
    "Mean": _variadic("add", mean=True),
    "Mod": _mod,
    "PRelu": _binary("prelu"),
    "Elu": _with_attrs("elu", alpha=1.0),
    "Selu": _with_attrs("selu", alpha=1.67326319217681884765625, gamma=1.05070102214813232421875),
    "Celu": _with_attrs("celu", alpha=1.0),
    "LogSoftmax": _softmax_like("log_softmax"),
    "ConvTranspose": _conv_transpose,
    "Resize": _resize,
    "InstanceNormalization": _instance_norm,
    "DepthToSpace": _depth_to_space,
    "SpaceToDepth": _space_to_depth,
    "Trilu": _trilu,
    "Einsum": _einsum,
    "CumSum": _cumsum,
    "ArgMin": _arg_reduce("argmin"),
    "Xor": _binary("xor"),
    "IsNaN": _unary("isnan"),
    "IsInf": _isinf,
    "LRN": _lrn,
    "QuantizeLinear": _quantize,
    "DequantizeLinear": _dequantize,
    "QLinearMatMul": _qlinear_matmul,
    "AffineGrid": _affine_grid,
    "ScatterND": _scatter_nd,
    "ScatterElements": _scatter_el,
    "OneHot": _one_hot,
    "ThresholdedRelu": _with_attrs("thresholded_relu", alpha=1.0),
    "Shrink": _with_attrs("shrink", bias=0.0, lambd=0.5),
    "Hardmax": _softmax_like("hardmax"),
    "Identity": _identity,
    "Dropout": _identity,
    "Where": _where,
    "LeakyRelu": _leaky,
    "HardSigmoid": _hsig,
    "Gelu": _gelu,
    "Clip": _clip,
    "Cast": _cast,
    "CastLike": _cast_like,
    "Conv": _conv,
    "MaxPool": _maxpool,
    "AveragePool": _avgpool,
    "GlobalAveragePool": _gap,
    "GlobalMaxPool": _gmp,
    "BatchNormalization": _bn,
    "LayerNormalization": _ln,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "Softmax": _softmax_like("softmax"),
    "ArgMax": _argmax,
    "TopK": _topk,
    "Transpose": _transpose,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Concat": _concat,
    "Split": _split,
    "Slice": _slice,
    "Gather": _gather,
    "GatherND": _gather_nd,
    "GatherElements": _gather_el,
    "Pad": _pad,
    "Expand": _expand,
    "Tile": _tile,
    "NonMaxSuppression": _nms,
    "RoiAlign": _roi_align,
    "Constant": _constant,
    "Shape": _shape,
    "Size": _size,
    "ConstantOfShape": _const_of_shape,
    "Range": _range,
    "If": _if,
    "Loop": _loop,
})
