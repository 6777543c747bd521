"""Canonical op -> standard ONNX nodes: the inverse of ``converters.py``, one writer per canonical
op (``WRITERS``), used by ``partition.onnx.export``.

A writer gets the ``Body`` being built (``export.py``), the IR node and the ONNX names of its
inputs, and must define the ONNX names ``ys`` (one per IR output). Static attributes that ONNX
passes as tensors (shapes, axes, pads, K, sizes, bounds) become constant inputs again. An op that
has no standard ONNX form at the export opset has no writer: the exporter refuses it in one line
naming the op and the region."""
from __future__ import annotations

from types import MappingProxyType
from typing import Callable, Mapping

import numpy as np

Writer = Callable[..., None]


def _simple(op_type: str, **renames) -> Writer:
    """One ONNX node with the same inputs; IR attrs copied under their ONNX names (``renames``:
    ONNX name -> (IR name, converter))."""
    def w(b, n, xs, ys):
        attrs = {}
        for onnx_name, (ir_name, conv) in renames.items():
            if n.attrs.get(ir_name) is not None:
                attrs[onnx_name] = conv(n.attrs[ir_name])
        b.node(op_type, xs, ys, **attrs)
    return w


_ints = lambda v: [int(a) for a in v]  # noqa: E731
_int = lambda v: int(v)  # noqa: E731
_float = lambda v: float(v)  # noqa: E731
_str = lambda v: str(v)  # noqa: E731

_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "erf": "Erf", "abs": "Abs", "neg": "Neg", "reciprocal": "Reciprocal", "not": "Not",
          "hard_swish": "HardSwish", "softplus": "Softplus", "softsign": "Softsign", "mish": "Mish",
          "sin": "Sin", "cos": "Cos", "floor": "Floor", "ceil": "Ceil", "round": "Round", "sign": "Sign",
          "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
          "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh", "bitwise_not": "BitwiseNot",
          "identity": "Identity", "isnan": "IsNaN", "non_zero": "NonZero", "det": "Det",
          "global_avg_pool2d": "GlobalAveragePool", "size": "Size", "matmul": "MatMul", "where": "Where"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "equal": "Equal",
           "less": "Less", "greater": "Greater", "less_equal": "LessOrEqual",
           "greater_equal": "GreaterOrEqual", "and": "And", "or": "Or", "xor": "Xor",
           "bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr", "bitwise_xor": "BitwiseXor",
           "min": "Min", "max": "Max", "prelu": "PRelu"}


def _axis(name="axis"):
    return {name: (name, _int)}


def _conv(b, n, xs, ys):
    w = n.inputs[1].shape
    b.node("Conv", xs, ys, kernel_shape=list(w[2:]), strides=_ints(n.attrs.get("strides", (1,) * (len(w) - 2))),
           pads=_ints(n.attrs.get("pads", (0,) * (2 * (len(w) - 2)))),
           dilations=_ints(n.attrs.get("dilations", (1,) * (len(w) - 2))), group=int(n.attrs.get("groups", 1)))


def _conv_transpose(b, n, xs, ys):
    nd = len(n.inputs[1].shape) - 2
    b.node("ConvTranspose", xs, ys, kernel_shape=list(n.inputs[1].shape[2:]),
           strides=_ints(n.attrs.get("strides", (1,) * nd)), pads=_ints(n.attrs.get("pads", (0,) * 2 * nd)),
           dilations=_ints(n.attrs.get("dilations", (1,) * nd)), group=int(n.attrs.get("groups", 1)),
           output_padding=_ints(n.attrs.get("output_padding", (0,) * nd)))


def _dense(b, n, xs, ys):
    """x[..., K] @ w[N, K].T (+ bias): on a 2-D input a Gemm with transB=1 (the importer's dense);
    on an N-D input a MatMul by the weight stored pre-transposed (how exporters write nn.Linear,
    and what the importer turns back into dense), plus the bias."""
    x, w = n.inputs[0], n.inputs[1]
    if len(x.shape) == 2 and len(w.shape) == 2:
        b.node("Gemm", xs, ys, transB=1)
        return
    data = b.const_data(xs[1])
    wt = (b.derived(xs[1], "T", np.ascontiguousarray(data.T)) if data is not None and data.ndim == 2
          else b.node("Transpose", [xs[1]], 1, perm=[1, 0])[0])
    if len(xs) == 2:
        b.node("MatMul", [xs[0], wt], ys)
    else:
        b.node("Add", [b.node("MatMul", [xs[0], wt], 1)[0], xs[2]], ys)


def _batch_matmul(b, n, xs, ys):
    a, c = xs
    for i, flag in ((0, "transpose_a"), (1, "transpose_b")):
        if n.attrs.get(flag):
            r = len(n.inputs[i].shape)
            perm = list(range(r - 2)) + [r - 1, r - 2]
            t = b.node("Transpose", [xs[i]], 1, perm=perm)[0]
            a, c = (t, c) if i == 0 else (a, t)
    b.node("MatMul", [a, c], ys)


def _gemm(b, n, xs, ys):
    b.node("Gemm", xs, ys, alpha=float(n.attrs.get("alpha", 1.0)), beta=float(n.attrs.get("beta", 1.0)),
           transA=int(n.attrs.get("trans_a", 0)), transB=int(n.attrs.get("trans_b", 0)))


def _bias_add(b, n, xs, ys):
    rank = len(n.inputs[0].shape)
    axis = int(n.attrs.get("axis", 1))
    axis = axis + rank if axis < 0 else axis
    shape = [n.inputs[1].shape[0]] + [1] * (rank - axis - 1)
    bb = b.node("Reshape", [xs[1], b.ints(shape)], 1)[0] if len(shape) > 1 else xs[1]
    b.node("Add", [xs[0], bb], ys)


def _pool(op_type: str, avg: bool):
    def w(b, n, xs, ys):
        k = list(n.attrs["kernel"])
        nd = len(k)
        attrs = dict(kernel_shape=k, strides=_ints(n.attrs.get("strides", (1,) * nd)),
                     pads=_ints(n.attrs.get("pads", (0,) * 2 * nd)), ceil_mode=int(bool(n.attrs.get("ceil_mode", False))))
        dil = _ints(n.attrs.get("dilations", (1,) * nd))
        if any(d != 1 for d in dil):
            attrs["dilations"] = dil
        if avg:
            attrs["count_include_pad"] = int(bool(n.attrs.get("count_include_pad", False)))
        b.node(op_type, xs, ys, **attrs)
    return w


def _max_pool_indices(b, n, xs, ys):
    k = list(n.attrs["kernel"])
    nd = len(k)
    b.node("MaxPool", xs, [b.fresh("unused_values"), ys[0]], kernel_shape=k,
           strides=_ints(n.attrs.get("strides", (1,) * nd)), pads=_ints(n.attrs.get("pads", (0,) * 2 * nd)),
           dilations=_ints(n.attrs.get("dilations", (1,) * nd)), ceil_mode=int(bool(n.attrs.get("ceil_mode", False))),
           storage_order=int(n.attrs.get("storage_order", 0)))


def _clip(b, n, xs, ys):
    dt = n.inputs[0].dtype
    lo, hi = (n.attrs.get("min"), n.attrs.get("max")) if n.op == "clip" else (0.0, 6.0)
    ins = [xs[0], "" if lo is None else b.scalar(lo, dt), "" if hi is None else b.scalar(hi, dt)]
    while ins[-1] == "":
        ins.pop()
    b.node("Clip", ins, ys)


def _silu(b, n, xs, ys):
    b.node("Mul", [xs[0], b.node("Sigmoid", xs, 1)[0]], ys)


def _swish(b, n, xs, ys):
    ax = b.node("Mul", [xs[0], b.scalar(float(n.attrs.get("alpha", 1.0)), n.inputs[0].dtype)], 1)[0]
    b.node("Mul", [xs[0], b.node("Sigmoid", [ax], 1)[0]], ys)


def _cast(b, n, xs, ys):
    from onnx import helper
    attrs = {"to": int(helper.np_dtype_to_tensor_dtype(np.dtype(n.attrs["dtype"])))}
    if "saturate" in n.attrs:
        attrs["saturate"] = int(bool(n.attrs["saturate"]))
    b.node("Cast", xs, ys, **attrs)


def _reduce(op_type: str):
    def w(b, n, xs, ys):
        attrs = {"keepdims": int(bool(n.attrs.get("keepdims", True)))}
        if len(xs) > 1:  # axes computed at run time
            attrs["noop_with_empty_axes"] = int(bool(n.attrs.get("noop_with_empty_axes", False)))
            b.node(op_type, xs[:2], ys, **attrs)
            return
        axes = n.attrs.get("axes")
        b.node(op_type, [xs[0]] + ([b.ints(axes)] if axes is not None else []), ys, **attrs)
    return w


def _arg(op_type):
    return _simple(op_type, axis=("axis", _int), keepdims=("keepdims", lambda v: int(bool(v))),
                   select_last_index=("select_last_index", lambda v: int(bool(v))))


def _topk(b, n, xs, ys):
    k = b.ints([n.attrs["k"]]) if n.op == "topk" else b.node("Reshape", [b.cast64(xs[1], n.inputs[1]), b.ints([1])], 1)[0]
    b.node("TopK", [xs[0], k], ys, axis=int(n.attrs.get("axis", -1)), largest=int(bool(n.attrs.get("largest", True))),
           sorted=int(bool(n.attrs.get("sorted", True))))


def _transpose(b, n, xs, ys):
    perm = n.attrs.get("perm")
    perm = list(range(len(n.inputs[0].shape)))[::-1] if perm is None else _ints(perm)
    b.node("Transpose", xs, ys, perm=perm)


def _with_ints(op_type: str, attr: str, **extra):
    """ONNX op taking one static int list as its second input (Reshape, Expand, Tile, ...)."""
    def w(b, n, xs, ys):
        attrs = {k: conv(n.attrs[a]) for k, (a, conv) in extra.items() if n.attrs.get(a) is not None}
        b.node(op_type, [xs[0], b.ints(n.attrs[attr])], ys, **attrs)
    return w


def _squeeze(b, n, xs, ys):
    axes = n.attrs.get("axes")
    b.node("Squeeze", [xs[0]] + ([b.ints(axes)] if axes is not None else []), ys)


def _split(b, n, xs, ys):
    b.node("Split", [xs[0], b.ints(n.attrs["sizes"])], ys, axis=int(n.attrs.get("axis", 0)))


def _slice(b, n, xs, ys):
    a = n.attrs
    ins = [xs[0], b.ints(a["starts"]), b.ints(a["ends"])]
    if a.get("axes") is not None or a.get("steps") is not None:
        ins.append(b.ints(a["axes"]) if a.get("axes") is not None else
                   b.ints(list(range(len(a["starts"])))))
    if a.get("steps") is not None:
        ins.append(b.ints(a["steps"]))
    b.node("Slice", ins, ys)


def _pad(b, n, xs, ys):
    mode = n.attrs.get("mode", "constant")
    ins = [xs[0], b.ints(n.attrs["pads"])]
    if mode == "constant":
        ins.append(b.scalar(n.attrs.get("value", 0.0), n.inputs[0].dtype))
    b.node("Pad", ins, ys, mode=mode)


def _trilu(b, n, xs, ys):
    ins = list(xs)
    if len(ins) == 1 and int(n.attrs.get("k", 0)) != 0:
        ins.append(b.scalar(int(n.attrs["k"]), "int64"))
    b.node("Trilu", ins, ys, upper=int(bool(n.attrs.get("upper", True))))


def _one_hot(b, n, xs, ys):
    depth = b.scalar(int(n.attrs["depth"]), "int64") if n.op == "one_hot" else xs[1]
    vals = xs[1] if n.op == "one_hot" else xs[2]
    b.node("OneHot", [xs[0], depth, vals], ys, axis=int(n.attrs.get("axis", -1)))


def _cum(op_type):
    def w(b, n, xs, ys):
        axis = xs[1] if len(xs) > 1 else b.scalar(int(n.attrs["axis"]), "int64")
        b.node(op_type, [xs[0], axis], ys, exclusive=int(bool(n.attrs.get("exclusive", False))),
               reverse=int(bool(n.attrs.get("reverse", False))))
    return w


def _shape(b, n, xs, ys):
    attrs = {"start": int(n.attrs.get("start", 0))}
    if n.attrs.get("end") is not None:
        attrs["end"] = int(n.attrs["end"])
    b.node("Shape", xs, ys, **attrs)


def _dyn_reshape(b, n, xs, ys):
    b.node("Reshape", [xs[0], b.cast64(xs[1], n.inputs[1])], ys, allowzero=int(bool(n.attrs.get("allowzero", False))))


def _dyn_slice(b, n, xs, ys):
    a = n.attrs
    rest = list(xs[3:])
    ins = [xs[0], b.cast64(xs[1], n.inputs[1]), b.cast64(xs[2], n.inputs[2])]
    axes = rest.pop(0) if a.get("axes_input") else (b.ints(a["axes"]) if a.get("axes") is not None else None)
    steps = rest.pop(0) if a.get("steps_input") else (b.ints(a["steps"]) if a.get("steps") is not None else None)
    if axes is not None or steps is not None:
        ins.append(axes if axes is not None else b.ints(list(range(len(a["starts"])))))
    if steps is not None:
        ins.append(steps)
    b.node("Slice", ins, ys)


def _dyn_second(op_type: str, **extra):
    """The run-time form of an op whose parameter is its second ONNX input."""
    def w(b, n, xs, ys):
        attrs = {k: conv(n.attrs[a]) for k, (a, conv) in extra.items() if n.attrs.get(a) is not None}
        b.node(op_type, [xs[0], b.cast64(xs[1], n.inputs[1]), *xs[2:]], ys, **attrs)
    return w


def _constant_of_shape(b, n, xs, ys):
    from onnx import numpy_helper
    value = numpy_helper.from_array(np.array([n.attrs.get("value", 0)], dtype=np.dtype(n.attrs.get("dtype", "float32"))))
    b.node("ConstantOfShape", [b.cast64(xs[0], n.inputs[0])], ys, value=value)


def _nms(b, n, xs, ys):
    a = n.attrs
    ins = list(xs[:2])
    if a.get("runtime"):
        given = dict(zip(a["runtime"], xs[2:]))
        ins += [given.get(k, "") for k in ("max_output_boxes_per_class", "iou_threshold", "score_threshold")]
    else:
        ins += [b.ints([int(a.get("max_output_boxes_per_class", 0))]),
                b.const(np.array([float(a.get("iou_threshold", 0.0))], np.float32))]
        if a.get("score_threshold") is not None:
            ins.append(b.const(np.array([float(a["score_threshold"])], np.float32)))
    while ins and ins[-1] == "":
        ins.pop()
    b.node("NonMaxSuppression", ins, ys, center_point_box=int(a.get("center_point_box", 0)))


def _resize(b, n, xs, ys):
    a = n.attrs
    x = n.inputs[0]
    attrs = {"mode": a.get("mode", "nearest"),
             "coordinate_transformation_mode": a.get("coordinate_transformation_mode", "half_pixel"),
             "nearest_mode": a.get("nearest_mode", "round_prefer_floor")}
    if a.get("mode") == "cubic":
        attrs.update(cubic_coeff_a=float(a.get("cubic_coeff_a", -0.75)),
                     exclude_outside=int(bool(a.get("exclude_outside", False))))
    if a.get("antialias"):
        attrs["antialias"] = 1
    rest = list(xs[1:])
    roi = ""
    if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        attrs["extrapolation_value"] = float(a.get("extrapolation_value", 0.0))
    if "by" in a:  # scales or sizes computed at run time
        given = rest.pop(0)
        if a.get("axes") is not None:
            attrs["axes"] = _ints(a["axes"])
        if a.get("policy") not in (None, "stretch"):
            attrs["keep_aspect_ratio_policy"] = a["policy"]
        if a.get("roi_input"):
            roi = rest.pop(0)
        elif "roi" in a:
            roi = _roi(b, a["roi"])
        ins = [xs[0], roi, given, ""] if a["by"] == "scales" else [xs[0], roi, "", b.cast64(given, n.inputs[1])]
        b.node("Resize", ins, ys, **attrs)
        return
    if a.get("roi_input"):
        roi = rest.pop(0)
        if a.get("roi_axes") is not None:
            attrs["axes"] = _ints(a["roi_axes"])
    elif "roi" in a:
        roi = _roi(b, a["roi"])
    size = [int(v) for v in a["size"]]
    scales = [float(v) for v in (a.get("scales") or size)]
    # sizes when they give the same float32 scale (what onnxruntime derives from sizes), else the
    # scales, whose output is floor(in * scale)
    same = all(np.float32(s) / np.float32(i) == np.float32(sc) for s, i, sc in zip(size, x.shape[2:], scales))
    if same or a.get("scales") is None:
        b.node("Resize", [xs[0], roi, "", b.ints(list(x.shape[:2]) + size)], ys, **attrs)
    else:
        b.node("Resize", [xs[0], roi, b.const(np.array([1.0, 1.0, *scales], np.float32)), ""], ys, **attrs)


def _roi(b, roi):
    h0, w0, h1, w1 = (float(v) for v in roi)
    return b.const(np.array([0, 0, h0, w0, 1, 1, h1, w1], np.float32))


def _recurrent(op_type: str, n_state_in: int):
    """LSTM/GRU/RNN: IR inputs x, w, r, b?, initial_h?, (initial_c?, p?) with ONNX's
    sequence_lens slot (index 4) left out; it is empty here."""
    def w(b, n, xs, ys):
        ins = list(xs[:4]) + [""] + list(xs[4:])
        while len(ins) < 4:
            ins.insert(len(ins), "")
        attrs = {k: n.attrs[k] for k in ("hidden_size", "direction", "layout", "input_forget",
                                          "linear_before_reset", "clip", "activations") if k in n.attrs}
        attrs = {k: (int(v) if isinstance(v, bool) else list(v) if isinstance(v, tuple) else v) for k, v in attrs.items()}
        while ins and ins[-1] == "":
            ins.pop()
        b.node(op_type, ins, ys, **attrs)
    return w


def _quantize(b, n, xs, ys):
    attrs = {"axis": int(n.attrs.get("axis", 1))}
    if n.attrs.get("block_size"):
        attrs["block_size"] = int(n.attrs["block_size"])
    if n.op == "quantize_linear":
        if len(xs) < 3:
            from onnx import helper
            attrs["output_dtype"] = int(helper.np_dtype_to_tensor_dtype(np.dtype(n.attrs.get("dtype", "uint8"))))
        if "saturate" in n.attrs:
            attrs["saturate"] = int(bool(n.attrs["saturate"]))
    b.node("QuantizeLinear" if n.op == "quantize_linear" else "DequantizeLinear", xs, ys, **attrs)


def _depth_to_space(b, n, xs, ys):
    attrs = {"blocksize": int(n.attrs["blocksize"])}
    if n.op == "depth_to_space":
        attrs["mode"] = n.attrs.get("mode", "DCR")
    b.node("DepthToSpace" if n.op == "depth_to_space" else "SpaceToDepth", xs, ys, **attrs)


def _scatter(op_type):
    def w(b, n, xs, ys):
        attrs = {"reduction": n.attrs.get("reduction", "none")}
        if op_type == "ScatterElements":
            attrs["axis"] = int(n.attrs.get("axis", 0))
        b.node(op_type, xs, ys, **attrs)
    return w


WRITERS: Mapping[str, Writer] = MappingProxyType({
    **{op: _simple(t) for op, t in _UNARY.items()},
    **{op: _simple(t) for op, t in _BINARY.items()},
    "conv2d": _conv, "conv3d": _conv, "conv_transpose2d": _conv_transpose, "conv_transpose3d": _conv_transpose,
    "dense": _dense, "batch_matmul": _batch_matmul, "gemm": _gemm, "bias_add": _bias_add,
    "batch_norm": _simple("BatchNormalization", epsilon=("epsilon", _float)),
    "layer_norm": _simple("LayerNormalization", axis=("axis", _int), epsilon=("epsilon", _float)),
    "instance_norm": _simple("InstanceNormalization", epsilon=("epsilon", _float)),
    "lrn": _simple("LRN", size=("size", _int), alpha=("alpha", _float), beta=("beta", _float), bias=("bias", _float)),
    "max_pool2d": _pool("MaxPool", False), "avg_pool2d": _pool("AveragePool", True),
    "max_pool3d": _pool("MaxPool", False), "avg_pool3d": _pool("AveragePool", True),
    "max_pool2d_indices": _max_pool_indices,
    "softmax": _simple("Softmax", **_axis()), "log_softmax": _simple("LogSoftmax", **_axis()),
    "hardmax": _simple("Hardmax", **_axis()),
    "relu6": _clip, "clip": _clip, "silu": _silu, "swish": _swish,
    "gelu": _simple("Gelu", approximate=("approximate", _str)),
    "elu": _simple("Elu", alpha=("alpha", _float)), "celu": _simple("Celu", alpha=("alpha", _float)),
    "selu": _simple("Selu", alpha=("alpha", _float), gamma=("gamma", _float)),
    "leaky_relu": _simple("LeakyRelu", alpha=("alpha", _float)),
    "hard_sigmoid": _simple("HardSigmoid", alpha=("alpha", _float), beta=("beta", _float)),
    "thresholded_relu": _simple("ThresholdedRelu", alpha=("alpha", _float)),
    "shrink": _simple("Shrink", bias=("bias", _float), lambd=("lambd", _float)),
    "isinf": _simple("IsInf", detect_negative=("detect_negative", _int), detect_positive=("detect_positive", _int)),
    "mod": _simple("Mod", fmod=("fmod", _int)),
    "bit_shift": _simple("BitShift", direction=("direction", _str)),
    "cast": _cast,
    **{f"reduce_{r}": _reduce(t) for r, t in (("mean", "ReduceMean"), ("sum", "ReduceSum"), ("max", "ReduceMax"),
                                              ("min", "ReduceMin"), ("prod", "ReduceProd"), ("l1", "ReduceL1"),
                                              ("l2", "ReduceL2"), ("sum_square", "ReduceSumSquare"),
                                              ("log_sum_exp", "ReduceLogSumExp"), ("log_sum", "ReduceLogSum"))},
    "argmax": _arg("ArgMax"), "argmin": _arg("ArgMin"),
    "topk": _topk, "dyn_topk": _topk, "transpose": _transpose,
    "reshape": _with_ints("Reshape", "shape"), "expand": _with_ints("Expand", "shape"),
    "tile": _with_ints("Tile", "repeats"), "unsqueeze": _with_ints("Unsqueeze", "axes"),
    "flatten": _simple("Flatten", **_axis()), "squeeze": _squeeze,
    "concat": _simple("Concat", **_axis()), "split": _split, "slice": _slice,
    "gather": _simple("Gather", **_axis()), "gather_elements": _simple("GatherElements", **_axis()),
    "gather_nd": _simple("GatherND", batch_dims=("batch_dims", _int)),
    "pad": _pad, "trilu": _trilu, "one_hot": _one_hot, "dyn_one_hot": _one_hot,
    "depth_to_space": _depth_to_space, "space_to_depth": _depth_to_space,
    "scatter_nd": _scatter("ScatterND"), "scatter_elements": _scatter("ScatterElements"),
    "cumsum": _cum("CumSum"), "shape": _shape,
    "dyn_reshape": _dyn_reshape, "dyn_slice": _dyn_slice,
    "dyn_expand": _dyn_second("Expand"), "dyn_tile": _dyn_second("Tile"),
    "dyn_split": _dyn_second("Split", axis=("axis", _int)),
    "dyn_squeeze": _dyn_second("Squeeze"), "dyn_unsqueeze": _dyn_second("Unsqueeze"),
    "dyn_pad": _dyn_second("Pad", mode=("mode", _str)),
    "constant_of_shape": _constant_of_shape, "range": _simple("Range"),
    "non_max_suppression": _nms,
    "roi_align": _simple("RoiAlign", output_height=("output_height", _int), output_width=("output_width", _int),
                         sampling_ratio=("sampling_ratio", _int), spatial_scale=("spatial_scale", _float),
                         mode=("mode", _str),
                         coordinate_transformation_mode=("coordinate_transformation_mode", _str)),
    "resize": _resize,
    "lstm": _recurrent("LSTM", 2), "gru": _recurrent("GRU", 1), "rnn": _recurrent("RNN", 1),
    "quantize_linear": _quantize, "dequantize_linear": _quantize,
    "qlinear_matmul": _simple("QLinearMatMul"),
    "einsum": _simple("Einsum", equation=("equation", _str)),
    "reverse_sequence": _simple("ReverseSequence", batch_axis=("batch_axis", _int), time_axis=("time_axis", _int)),
    "compress": _simple("Compress", **_axis()),
})
