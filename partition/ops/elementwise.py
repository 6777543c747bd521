"""Elementwise ops: broadcasting arithmetic, comparisons, logic, unary math and activations,
``where``, ``cast`` and integer (de)quantization (ONNX QuantizeLinear/DequantizeLinear, per-tensor
or per-axis).

Dtype rule (shared by ``infer`` and ``compute`` so the two never disagree): equal input dtypes keep
that dtype; a float mixed with an integer or bool gives the float (a Python scalar folded to an
int64 constant must not turn a float32 tensor into float64); otherwise numpy promotion. Float math
runs in the input's float dtype, as onnxruntime does.

FLOPs per output element (cost): 1 for plain arithmetic, comparisons, logic and selections; the
transcendental activations count the arithmetic of their usual formula, listed in ``_FLOPS``.
"""
from __future__ import annotations

import math
import numbers
from typing import Callable

import numpy as np

from ..ir import TensorType
from .base import scipy_special, OpDef, broadcast_shapes, check, elementwise_cost
from .tensor import norm_axis

# FLOPs per output element of the ops that are more than one arithmetic operation; a
# transcendental (exp, erf, tanh) counts as 5, the rest one per add/mul/compare.
_FLOPS = {
    "erf": 5,
    "tanh": 5,
    "sigmoid": 7,       # exp(-x) (5), add, div
    "silu": 8,          # sigmoid + mul
    "gelu": 9,          # exact: mul by 1/sqrt2, erf (5), add, mul, mul
    "gelu_tanh": 12,    # x^3 (2), mul-add (2), mul, tanh (5), add, mul
    "hard_sigmoid": 4,  # mul, add, max, min
    "hard_swish": 5,    # hard_sigmoid + mul
    "relu6": 2,         # max, min
    "clip": 2,
    "leaky_relu": 2,    # compare-select, mul
    "prelu": 2,
    "elu": 7,           # exp (5), sub, mul (negative side)
    "selu": 8,          # elu + scale
    "celu": 8,          # exp of x/alpha: elu + div
    "softplus": 11,     # log1p (5) of exp (5), add
    "softsign": 3,      # abs, add, div
    "mish": 17,         # softplus (11), tanh (5), mul
    "sin": 5,
    "cos": 5,
    "mod": 2,
    "shrink": 3,             # two compares, add/sub
    "quantize_linear": 5,    # div, round, add zero point, clamp (2)
    "dequantize_linear": 2,  # sub zero point, mul
}


def _is_float(dtype: str) -> bool:
    return np.issubdtype(np.dtype(dtype), np.floating) or np.dtype(dtype).name == "bfloat16"


def result_dtype(*dtypes: str) -> str:
    ds = [np.dtype(d) for d in dtypes]
    if all(d == ds[0] for d in ds):
        return ds[0].name
    floats = [d for d in ds if np.issubdtype(d, np.floating)]
    if floats and len(floats) < len(ds):
        return np.result_type(*floats).name
    return np.result_type(*ds).name


# ----------------------------------------------------------------------------- binary
def _binary(name: str, fn: Callable, out_bool: bool = False, need_bool: bool = False,
            flops: int = 1) -> OpDef:
    def infer(ins, attrs, ctx):
        a, b = ins
        if need_bool:
            check(a.dtype == "bool" and b.dtype == "bool",
                  f"{name}: inputs must be bool, got {a.dtype} and {b.dtype}")
        shape = broadcast_shapes(a.shape, b.shape)
        return [TensorType(shape, "bool" if out_bool else result_dtype(a.dtype, b.dtype))]

    def compute(args, attrs):
        a, b = (np.asarray(x) for x in args)
        if out_bool:
            return [np.asarray(fn(a, b), dtype=bool)]
        dt = np.dtype(result_dtype(a.dtype.name, b.dtype.name))
        return [np.asarray(fn(a.astype(dt, copy=False), b.astype(dt, copy=False))).astype(dt, copy=False)]

    return OpDef(name, infer, compute, elementwise_cost(flops), "elementwise", (2, 2))


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        check(not np.any(b == 0), "div: integer division by zero")
        # ONNX (C semantics) truncates toward zero; numpy's // floors.
        q = np.abs(a) // np.abs(b)
        return np.where((a < 0) != (b < 0), -q, q)
    with np.errstate(divide="ignore", invalid="ignore"):  # inf/nan as IEEE (and ORT) give them
        return a / b


def _pow_infer(ins, attrs, ctx):
    a, b = ins
    return [TensorType(broadcast_shapes(a.shape, b.shape), a.dtype)]


def _pow_compute(args, attrs):
    # ONNX Pow: the result has the base's type whatever the exponent's type.
    a, b = (np.asarray(x) for x in args)
    if _is_float(a.dtype.name):
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # nan/inf as in ORT
            return [np.power(a, b.astype(a.dtype, copy=False))]
    check(not np.any(b < 0), "pow: negative exponent for an integer base")
    return [np.power(a, b.astype(a.dtype, copy=False))]


# ----------------------------------------------------------------------------- unary
def _unary(name: str, fn: Callable, float_only: bool = False, flops: int = 1,
           out_dtype: str | None = None, cost=None) -> OpDef:
    def infer(ins, attrs, ctx):
        (x,) = ins
        if float_only:
            check(_is_float(x.dtype), f"{name}: input must be a float tensor, got {x.dtype}")
        if name == "not":
            check(x.dtype == "bool", f"not: input must be bool, got {x.dtype}")
        _check_attrs(name, attrs)
        return [TensorType(x.shape, out_dtype or x.dtype)]

    def compute(args, attrs):
        x = np.asarray(args[0])
        if x.dtype.name == "bfloat16":  # numpy has no bfloat16 math: float32, rounded once
            return [np.asarray(fn(x.astype(np.float32), attrs)).astype(out_dtype or x.dtype)]
        return [np.asarray(fn(x, attrs)).astype(out_dtype or x.dtype, copy=False)]

    return OpDef(name, infer, compute, cost or elementwise_cost(flops), "elementwise", (1, 1))


def _check_attrs(name: str, attrs: dict) -> None:
    if name == "gelu":
        approx = attrs.get("approximate", "none")
        check(approx in ("none", "tanh"), f"gelu: approximate must be 'none' or 'tanh', got {approx!r}")
    if name == "clip":
        # ONNX allows min > max (the result is max everywhere); only non-numbers are wrong.
        for key in ("min", "max"):
            v = attrs.get(key)
            check(v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool)),
                  f"clip: {key} must be a number or None, got {v!r}")
    if name == "isinf":
        for key in ("detect_negative", "detect_positive"):
            v = attrs.get(key, 1)
            check(v in (0, 1), f"isinf: {key} must be 0 or 1, got {v!r}")


def _sigmoid(x, attrs):
    return scipy_special().expit(x)


def _silu(x, attrs):
    return x * scipy_special().expit(x)


def _relu(x, attrs):
    return np.maximum(x, np.zeros((), x.dtype))


def _relu6(x, attrs):
    return np.clip(x, np.asarray(0, x.dtype), np.asarray(6, x.dtype))


def _clip(x, attrs):
    lo, hi = attrs.get("min"), attrs.get("max")
    out = x
    if lo is not None:
        out = np.maximum(out, np.asarray(lo).astype(x.dtype))
    if hi is not None:
        out = np.minimum(out, np.asarray(hi).astype(x.dtype))
    return out


def _gelu(x, attrs):
    if attrs.get("approximate", "none") == "tanh":
        c = np.asarray(math.sqrt(2.0 / math.pi), x.dtype)
        return np.asarray(0.5, x.dtype) * x * (1 + np.tanh(c * (x + np.asarray(0.044715, x.dtype) * x * x * x)))
    return np.asarray(0.5, x.dtype) * x * (1 + scipy_special().erf(x * np.asarray(1 / math.sqrt(2.0), x.dtype)))


def _hard_sigmoid(x, attrs):
    alpha = np.asarray(attrs.get("alpha", 0.2), x.dtype)
    beta = np.asarray(attrs.get("beta", 0.5), x.dtype)
    return np.clip(alpha * x + beta, np.asarray(0, x.dtype), np.asarray(1, x.dtype))


def _hard_swish(x, attrs):
    # ONNX HardSwish = x * HardSigmoid(x; alpha=1/6, beta=0.5)
    return x * np.clip(x * np.asarray(1 / 6, x.dtype) + np.asarray(0.5, x.dtype),
                       np.asarray(0, x.dtype), np.asarray(1, x.dtype))


def _swish(x, attrs):
    # ONNX Swish (opset 24): x * sigmoid(alpha * x)
    return x * scipy_special().expit(np.asarray(attrs.get("alpha", 1.0), x.dtype) * x)


def _int_binary(name: str, fn: Callable) -> OpDef:
    """Bitwise ops: integer inputs of one dtype (ONNX BitwiseAnd/Or/Xor, BitShift)."""
    def infer(ins, attrs, ctx):
        a, b = ins
        check(a.dtype == b.dtype and np.issubdtype(np.dtype(a.dtype), np.integer),
              f"{name}: inputs must be integers of one dtype, got {a.dtype} and {b.dtype}")
        if name == "bit_shift":
            check(attrs.get("direction") in ("LEFT", "RIGHT"),
                  f"bit_shift: direction must be 'LEFT' or 'RIGHT', got {attrs.get('direction')!r}")
        return [TensorType(broadcast_shapes(a.shape, b.shape), a.dtype)]

    def compute(args, attrs):
        a, b = (np.asarray(x) for x in args)
        return [np.asarray(fn(a, b, attrs)).astype(a.dtype, copy=False)]

    return OpDef(name, infer, compute, elementwise_cost(1), "elementwise", (2, 2))


def _bit_shift(a, b, attrs):
    # ONNX BitShift is on unsigned types; bits shifted past the width are gone (0), as in C++
    # for shifts below the width; numpy's shift by >= width is platform-defined, so clamp it.
    width = a.dtype.itemsize * 8
    big = b >= width
    s = np.where(big, 0, b).astype(a.dtype)
    if attrs["direction"] == "LEFT":
        return np.where(big, np.zeros((), a.dtype), np.left_shift(a, s))
    # an arithmetic right shift by >= the width leaves only the sign: 0 or -1
    return np.where(big, np.where(a < 0, -1, 0).astype(a.dtype), np.right_shift(a, s))


def _bitcast_infer(ins, attrs, ctx):
    x = ins[0]
    dt = _cast_dtype(attrs)
    check(np.dtype(x.dtype).itemsize == dt.itemsize,
          f"bitcast: {x.dtype} ({np.dtype(x.dtype).itemsize * 8} bits) and {dt.name} ({dt.itemsize * 8} bits) "
          f"differ in width")
    return [TensorType(x.shape, dt.name)]


def _bitcast_compute(args, attrs):
    # ONNX BitCast: the same bytes read as another type of the same width, little endian
    x = np.asarray(args[0])
    dt = _cast_dtype(attrs)
    flat = np.ascontiguousarray(x.reshape(-1), dtype=x.dtype.newbyteorder("<"))
    return [flat.view(dt.newbyteorder("<")).astype(dt).reshape(x.shape)]


def _leaky_relu(x, attrs):
    alpha = np.asarray(attrs.get("alpha", 0.01), x.dtype)
    return np.where(x >= 0, x, alpha * x)


def _sqrt(x, attrs):
    return np.sqrt(x)


def _log(x, attrs):
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf, log(<0) = nan as in ORT
        return np.log(x)


def _reciprocal(x, attrs):
    with np.errstate(divide="ignore"):
        return np.reciprocal(x)


def _gelu_cost(ins, outs, attrs):
    key = "gelu_tanh" if attrs.get("approximate", "none") == "tanh" else "gelu"
    return elementwise_cost(_FLOPS[key])(ins, outs, attrs)


def _elu(x, attrs):
    alpha = np.asarray(attrs.get("alpha", 1.0), x.dtype)
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


# The SELU constants of Klambauer et al. 2017, as the ONNX spec gives them.
_SELU_ALPHA, _SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875


def _selu(x, attrs):
    alpha = np.asarray(attrs.get("alpha", _SELU_ALPHA), x.dtype)
    gamma = np.asarray(attrs.get("gamma", _SELU_GAMMA), x.dtype)
    return gamma * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _celu(x, attrs):
    alpha = np.asarray(attrs.get("alpha", 1.0), x.dtype)
    return np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(np.minimum(x, 0) / alpha))


def _softplus(x, attrs):
    return np.logaddexp(np.zeros((), x.dtype), x)  # log(1 + e^x) without overflow


def _softsign(x, attrs):
    return x / (1 + np.abs(x))


def _mish(x, attrs):
    return x * np.tanh(_softplus(x, attrs))


def _sign(x, attrs):
    return np.sign(x)


def _round(x, attrs):
    return np.round(x)  # half to even, as ONNX Round


def _prelu_infer(ins, attrs, ctx):
    x, slope = ins
    check(_is_float(x.dtype) or np.issubdtype(np.dtype(x.dtype), np.signedinteger),
          f"prelu: input must be float or signed integer, got {x.dtype}")
    try:
        ok = np.broadcast_shapes(tuple(x.shape), tuple(slope.shape)) == tuple(x.shape)
    except ValueError:
        ok = False
    check(ok, f"prelu: slope shape {list(slope.shape)} does not broadcast to input shape {list(x.shape)}")
    return [TensorType(x.shape, x.dtype)]


def _prelu_compute(args, attrs):
    x, slope = (np.asarray(a) for a in args)
    return [np.where(x < 0, slope.astype(x.dtype, copy=False) * x, x).astype(x.dtype, copy=False)]


def _mod_infer(ins, attrs, ctx):
    a, b = ins
    check(a.dtype == b.dtype, f"mod: inputs have different dtypes {a.dtype} and {b.dtype}")
    fmod = int(attrs.get("fmod", 0))
    check(fmod in (0, 1), f"mod: fmod must be 0 or 1, got {fmod}")
    return [TensorType(broadcast_shapes(a.shape, b.shape), a.dtype)]


def _mod_compute(args, attrs):
    a, b = (np.asarray(x) for x in args)
    if not _is_float(a.dtype.name):
        check(not np.any(b == 0), "mod: integer division by zero")
    # fmod=1: C fmod, the sign of the dividend; fmod=0: Python mod, the sign of the divisor.
    fn = np.fmod if int(attrs.get("fmod", 0)) else np.mod
    with np.errstate(invalid="ignore", divide="ignore"):
        return [fn(a, b).astype(a.dtype, copy=False)]


# ----------------------------------------------------------------------------- where / cast
def _where_infer(ins, attrs, ctx):
    c, a, b = ins
    check(c.dtype == "bool", f"where: condition must be bool, got {c.dtype}")
    check(a.dtype == b.dtype, f"where: branches have different dtypes {a.dtype} and {b.dtype}")
    return [TensorType(broadcast_shapes(c.shape, a.shape, b.shape), a.dtype)]


def _where_compute(args, attrs):
    c, a, b = (np.asarray(x) for x in args)
    return [np.where(c.astype(bool), a, b).astype(result_dtype(a.dtype.name, b.dtype.name), copy=False)]


def _cast_dtype(attrs) -> np.dtype:
    name = attrs.get("dtype")
    check(name is not None, "cast: missing attribute 'dtype'")
    try:
        return np.dtype(name)
    except TypeError:
        check(False, f"cast: unknown dtype {name!r}")
        raise


def _cast_infer(ins, attrs, ctx):
    return [TensorType(ins[0].shape, _cast_dtype(attrs).name)]


E8M0_ROUND_MODES = ("up", "down", "nearest")


def _to_e8m0(x: np.ndarray, saturate: bool, mode: str) -> np.ndarray:
    """float8_e8m0fnu (2^(e - 127), e = 0xFF is NaN; no sign, no zero) from the float32 bits as the
    ONNX Cast spec (opset 24) rounds: the exponent, plus one when ``mode`` rounds the fraction up
    ("up": any fraction; "nearest": above half, or half with an odd result; "down": never);
    NaN/inf give 0xFF, and with saturate the largest exponent 0xFE does not round up into it."""
    import ml_dtypes
    check(mode in E8M0_ROUND_MODES, f"cast: round_mode {mode!r} is not one of {', '.join(E8M0_ROUND_MODES)}")
    bits = np.asarray(x, np.float32).view(np.uint32)  # float16/bfloat16 widen exactly
    exp = ((bits >> 23) & 0xFF).astype(np.uint16)
    if mode == "up":
        inc = (bits & 0x7FFFFF) != 0
    elif mode == "nearest":
        inc = ((bits & 0x400000) != 0) & (((bits & 0x3FFFFF) != 0) | (exp > 0))
    else:
        inc = np.zeros(exp.shape, bool)
    special = exp == 0xFF
    if saturate:
        inc &= exp != 0xFE
    out = np.where(special, 0xFF, np.minimum(exp + inc, 0xFF)).astype(np.uint8)
    return out.view(ml_dtypes.float8_e8m0fnu)


def _cast_compute(args, attrs):
    x = np.asarray(args[0])
    dt = _cast_dtype(attrs)
    if dt.name == "float8_e8m0fnu" and x.dtype != dt:
        check(x.dtype.kind == "f" or x.dtype.name == "bfloat16",
              f"cast: only float inputs convert to float8_e8m0fnu, got {x.dtype}")
        return [_to_e8m0(x, bool(attrs.get("saturate", True)), attrs.get("round_mode", "up"))]
    if attrs.get("saturate") and (x.dtype.kind == "f" or x.dtype.name == "bfloat16"):
        # ONNX Cast saturate=1 to float8: clamp (inf included) to the largest finite value; NaN stays
        import ml_dtypes
        info = ml_dtypes.finfo(dt)
        return [np.clip(x, info.min, info.max).astype(dt)]
    if np.issubdtype(x.dtype, np.floating) and np.issubdtype(dt, np.integer):
        with np.errstate(invalid="ignore"):
            return [x.astype(dt)]
    return [x.astype(dt)]


# ----------------------------------------------------------------------------- more activations
def _isinf(x, attrs):
    hit = np.isinf(x)
    if not attrs.get("detect_positive", 1):
        hit &= x < 0
    if not attrs.get("detect_negative", 1):
        hit &= x > 0
    return hit


def _thresholded_relu(x, attrs):
    return np.where(x > np.asarray(attrs.get("alpha", 1.0), x.dtype), x, np.zeros((), x.dtype))


def _shrink(x, attrs):
    bias, lambd = attrs.get("bias", 0.0), attrs.get("lambd", 0.5)
    # onnxruntime does integer inputs in float32 and truncates the result back to the integer type.
    dt = x.dtype if _is_float(x.dtype.name) else np.dtype(np.float32)
    xf, b, lam = x.astype(dt, copy=False), np.asarray(bias, dt), np.asarray(lambd, dt)
    y = np.where(xf < -lam, xf + b, np.where(xf > lam, xf - b, np.zeros((), dt)))
    return y if dt == x.dtype else np.trunc(y)


# ----------------------------------------------------------------------------- quantization
# ONNX QuantizeLinear/DequantizeLinear: integers (8/16 bits, and the 4- and 2-bit ones of opsets
# 21/25), rounded half to even and saturated; float8/float4 (opsets 19/23), rounded by the cast
# and clamped to the type's largest finite value unless saturate=False.
QUANT_DTYPES = ("int8", "uint8", "int16", "uint16", "int4", "uint4", "int2", "uint2", "float8_e4m3fn",
                "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn")


def _quant_float(dtype) -> bool:
    return np.dtype(dtype).name.startswith(("float8", "float4"))


def _quant_axis(name: str, x: TensorType, scale: TensorType, zp: TensorType | None, attrs: dict) -> int | None:
    """The axis of a per-axis or blocked scale, None for a per-tensor one (a scalar or a one-element
    1-D). Blocked (block_size > 0, opset 21): the scale has the input's rank, ceil(size / block_size)
    along the axis, and each entry serves block_size consecutive elements."""
    check(_is_float(scale.dtype), f"{name}: scale must be a float tensor, got {scale.dtype}")
    block = int(attrs.get("block_size", 0))
    if block:
        axis = norm_axis(attrs.get("axis", 1), len(x.shape), name)
        want = tuple(-(-d // block) if i == axis else d for i, d in enumerate(x.shape))
        check(scale.shape == want, f"{name}: blocked scale shape {list(scale.shape)} must be {list(want)} for "
                                   f"input {list(x.shape)}, axis {axis}, block_size {block}")
        check(zp is None or zp.shape == scale.shape,
              f"{name}: zero_point shape {list(zp.shape) if zp else []} differs from scale shape {list(scale.shape)}")
        return axis
    per_tensor = len(scale.shape) == 0 or scale.shape == (1,)
    if zp is not None:
        # A scalar and a one-element 1-D are both per-tensor; quantizers mix them (onnxruntime's does).
        check(zp.shape == scale.shape or (per_tensor and zp.shape in ((), (1,))),
              f"{name}: zero_point shape {list(zp.shape)} differs from scale shape {list(scale.shape)}")
    if per_tensor:
        return None
    check(len(scale.shape) == 1, f"{name}: scale must be a scalar or 1-D (per-axis), got shape {list(scale.shape)}")
    axis = norm_axis(attrs.get("axis", 1), len(x.shape), name)
    check(scale.shape[0] == x.shape[axis],
          f"{name}: per-axis scale has {scale.shape[0]} entries but axis {axis} of input {list(x.shape)} "
          f"has {x.shape[axis]}")
    return axis


def _q_param(v: np.ndarray, axis: int | None, x: np.ndarray, attrs: dict) -> np.ndarray:
    """scale/zero_point broadcastable against x: per tensor, per axis, or repeated per block."""
    block = int(attrs.get("block_size", 0))
    if block:
        return np.take(np.repeat(v, block, axis=axis), range(x.shape[axis]), axis=axis)
    return _along(v, axis, x.ndim)


def _along(v: np.ndarray, axis: int | None, rank: int) -> np.ndarray:
    """scale/zero_point shaped to broadcast against the input."""
    if axis is None:
        return v.reshape(())
    shape = [1] * rank
    shape[axis] = -1
    return v.reshape(shape)


def _quantize_infer(ins, attrs, ctx):
    x, scale = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 else None
    check(_is_float(x.dtype), f"quantize_linear: input must be a float tensor, got {x.dtype}")
    out = zp.dtype if zp is not None else attrs.get("dtype", "uint8")
    check(out in QUANT_DTYPES, f"quantize_linear: output type {out} is not one of {', '.join(QUANT_DTYPES)}")
    _quant_axis("quantize_linear", x, scale, zp, attrs)
    return [TensorType(x.shape, out)]


def _quantize_compute(args, attrs):
    x, scale = np.asarray(args[0]), np.asarray(args[1])
    axis = _quant_axis("quantize_linear", TensorType(x.shape, x.dtype.name), TensorType(scale.shape, scale.dtype.name),
                       None, attrs)
    out = np.dtype(args[2].dtype if len(args) > 2 else attrs.get("dtype", "uint8"))
    zp = np.asarray(args[2]) if len(args) > 2 else np.zeros(scale.shape, out)
    # x / scale in float32 (float16 inputs too), rounded half to even, then saturated: onnxruntime's order.
    import ml_dtypes
    acc = np.float64 if x.dtype == np.float64 else np.float32
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ratio = x.astype(acc) / _q_param(scale, axis, x, attrs).astype(acc)
        if _quant_float(out):  # the cast rounds; saturate clamps (inf too), else out of range is NaN/inf
            q = ratio + _q_param(zp, axis, x, attrs).astype(acc)
            if attrs.get("saturate", True):
                info = ml_dtypes.finfo(out)
                q = np.clip(q, float(info.min), float(info.max))
            return [q.astype(out)]
        q = np.rint(ratio) + _q_param(zp, axis, x, attrs).astype(acc)
        info = ml_dtypes.iinfo(out)
        return [np.clip(q, int(info.min), int(info.max)).astype(out)]


def _dequantize_infer(ins, attrs, ctx):
    x, scale = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 else None
    check(x.dtype in QUANT_DTYPES + ("int32",),
          f"dequantize_linear: input type {x.dtype} is not one of {', '.join(QUANT_DTYPES + ('int32',))}")
    if zp is not None:
        check(zp.dtype == x.dtype, f"dequantize_linear: zero_point type {zp.dtype} differs from input type {x.dtype}")
    _quant_axis("dequantize_linear", x, scale, zp, attrs)
    return [TensorType(x.shape, scale.dtype)]


def _dequantize_compute(args, attrs):
    x, scale = np.asarray(args[0]), np.asarray(args[1])
    axis = _quant_axis("dequantize_linear", TensorType(x.shape, x.dtype.name),
                       TensorType(scale.shape, scale.dtype.name), None, attrs)
    zp = np.asarray(args[2]) if len(args) > 2 else np.zeros(scale.shape, x.dtype)
    # (x - zero_point) exactly in integers, then one multiply in float32 (float16 scales too), as onnxruntime.
    acc = np.float64 if scale.dtype == np.float64 else np.float32
    exact = acc if _quant_float(x.dtype) else np.int64  # float8/float4 values are exact in float32
    d = (x.astype(exact) - _q_param(zp, axis, x, attrs).astype(exact)).astype(acc)
    return [(d * _q_param(scale, axis, x, attrs).astype(acc)).astype(scale.dtype)]


# ----------------------------------------------------------------------------- table
def _float_unary(name, fn, flops=1):
    return _unary(name, fn, float_only=True, flops=flops)


DEFS = [
    _binary("add", np.add),
    _binary("sub", np.subtract),
    _binary("mul", np.multiply),
    _binary("div", _div),
    OpDef("pow", _pow_infer, _pow_compute, elementwise_cost(1), "elementwise", (2, 2)),
    _binary("equal", np.equal, out_bool=True),
    _binary("less", np.less, out_bool=True),
    _binary("greater", np.greater, out_bool=True),
    _binary("less_equal", np.less_equal, out_bool=True),
    _binary("greater_equal", np.greater_equal, out_bool=True),
    _binary("and", np.logical_and, out_bool=True, need_bool=True),
    _binary("or", np.logical_or, out_bool=True, need_bool=True),
    _unary("not", lambda x, a: np.logical_not(x), out_dtype="bool"),
    _unary("neg", lambda x, a: np.negative(x)),
    _unary("abs", lambda x, a: np.abs(x)),
    _float_unary("sqrt", _sqrt),
    _float_unary("exp", lambda x, a: np.exp(x)),
    _float_unary("log", _log),
    _float_unary("reciprocal", _reciprocal),
    _float_unary("erf", lambda x, a: scipy_special().erf(x), _FLOPS["erf"]),
    _float_unary("sigmoid", _sigmoid, _FLOPS["sigmoid"]),
    _float_unary("tanh", lambda x, a: np.tanh(x), _FLOPS["tanh"]),
    _unary("relu", _relu),
    _float_unary("silu", _silu, _FLOPS["silu"]),
    _unary("identity", lambda x, a: x.copy()),
    _unary("relu6", _relu6, flops=_FLOPS["relu6"]),
    _unary("clip", _clip, flops=_FLOPS["clip"]),
    _unary("gelu", _gelu, float_only=True, cost=_gelu_cost),
    _float_unary("hard_sigmoid", _hard_sigmoid, _FLOPS["hard_sigmoid"]),
    _float_unary("hard_swish", _hard_swish, _FLOPS["hard_swish"]),
    _float_unary("leaky_relu", _leaky_relu, _FLOPS["leaky_relu"]),
    _binary("min", np.minimum),
    _binary("max", np.maximum),
    OpDef("mod", _mod_infer, _mod_compute, elementwise_cost(_FLOPS["mod"]), "elementwise", (2, 2)),
    OpDef("prelu", _prelu_infer, _prelu_compute, elementwise_cost(_FLOPS["prelu"]), "elementwise", (2, 2)),
    _float_unary("elu", _elu, _FLOPS["elu"]),
    _float_unary("selu", _selu, _FLOPS["selu"]),
    _float_unary("celu", _celu, _FLOPS["celu"]),
    _float_unary("softplus", _softplus, _FLOPS["softplus"]),
    _float_unary("softsign", _softsign, _FLOPS["softsign"]),
    _float_unary("mish", _mish, _FLOPS["mish"]),
    _float_unary("sin", lambda x, a: np.sin(x), _FLOPS["sin"]),
    _float_unary("cos", lambda x, a: np.cos(x), _FLOPS["cos"]),
    _float_unary("floor", lambda x, a: np.floor(x)),
    _float_unary("ceil", lambda x, a: np.ceil(x)),
    _float_unary("round", _round),
    _unary("sign", _sign),
    *[_float_unary(n, (lambda f: lambda x, a: f(x))(getattr(np, fn)), 5) for n, fn in (
        ("tan", "tan"), ("asin", "arcsin"), ("acos", "arccos"), ("atan", "arctan"), ("sinh", "sinh"),
        ("cosh", "cosh"), ("asinh", "arcsinh"), ("acosh", "arccosh"), ("atanh", "arctanh"))],
    _float_unary("swish", _swish, _FLOPS["silu"] + 1),
    _int_binary("bitwise_and", lambda a, b, at: np.bitwise_and(a, b)),
    _int_binary("bitwise_or", lambda a, b, at: np.bitwise_or(a, b)),
    _int_binary("bitwise_xor", lambda a, b, at: np.bitwise_xor(a, b)),
    _int_binary("bit_shift", _bit_shift),
    _unary("bitwise_not", lambda x, a: np.invert(x)),
    OpDef("bitcast", _bitcast_infer, _bitcast_compute, elementwise_cost(0), "elementwise", (1, 1)),
    OpDef("where", _where_infer, _where_compute, elementwise_cost(1), "elementwise", (3, 3)),
    OpDef("cast", _cast_infer, _cast_compute, elementwise_cost(1), "elementwise", (1, 1)),
    _binary("xor", np.logical_xor, out_bool=True, need_bool=True),
    _unary("isnan", lambda x, a: np.isnan(x), float_only=True, out_dtype="bool"),
    _unary("isinf", _isinf, float_only=True, out_dtype="bool"),
    _float_unary("thresholded_relu", _thresholded_relu),
    _unary("shrink", _shrink, flops=_FLOPS["shrink"]),
    OpDef("quantize_linear", _quantize_infer, _quantize_compute, elementwise_cost(_FLOPS["quantize_linear"]),
          "elementwise", (2, 3)),
    OpDef("dequantize_linear", _dequantize_infer, _dequantize_compute, elementwise_cost(_FLOPS["dequantize_linear"]),
          "elementwise", (2, 3)),
]
