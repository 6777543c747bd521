"""Neural-network ops: convolution (2-D, 3-D and transposed 2-D), matrix products, einsum,
normalisation (lrn included), pooling, resize, softmax, hardmax, reductions, cumsum, argmax/argmin,
top-k and non-max suppression.

Numerics follow onnxruntime's CPU kernels for the matching ONNX ops (float32 in, float32 out).
Convolution is im2col + one GEMM per group (a strided window view, so no Python loop over
pixels); depthwise convolution accumulates over the R*S kernel taps instead, which is vectorised
over every pixel and channel.

FLOP counts (cost): 2 per MAC (+1 per output element for a bias); batch_norm 2 per element (the
per-channel scale/shift folded, as inference runtimes do); softmax 5 per element (max, sub, exp,
sum, div); layer_norm 8 per element (mean, sub, square, sum, mul by rstd, mul gamma, add beta,
plus the per-row rsqrt amortised as 1), instance_norm likewise 8; conv_transpose2d
N*C*H*W*(K/groups)*R*S MACs (every input pixel times every tap); resize 0 (nearest) or 7 (linear)
per output element; pools kh*kw (3-D: kd*kh*kw) per output element (compares or adds, +1 for
the average's divide); conv3d N*K*OD*OH*OW*(C/groups)*KD*KH*KW MACs; reductions 1 per input
element; einsum of n >= 2 operands n-1 MACs per point of its whole index space (every label, and
the '...' dimensions), of one operand 1 FLOP per input element; cumsum 1 per element; lrn size + 8
per element (the window's squares summed, scale and bias, a power of 5, the divide); hardmax 1 per
element.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..ir import TensorType
from .base import OpCost, OpDef, broadcast_shapes, check, elementwise_cost, low_precision
from .tensor import int_tuple, norm_axis


def _nbytes(ts: Sequence[TensorType]) -> int:
    return sum(t.nbytes for t in ts)


def _float(name: str, t: TensorType, what: str) -> None:
    check(np.issubdtype(np.dtype(t.dtype), np.floating) or t.dtype == "bfloat16",
          f"{name}: {what} must be a float tensor, got {t.dtype}")


# ============================================================================ conv2d
def _conv_params(attrs: dict, name: str = "conv2d", dims: int = 2) -> tuple[tuple[int, ...], ...]:
    """(strides, pads, dilations, groups) of a ``dims``-D convolution, validated; pads in ONNX order
    (all begins, then all ends)."""
    strides = int_tuple(attrs.get("strides", (1,) * dims), name, "strides", dims)
    pads = int_tuple(attrs.get("pads", (0,) * (2 * dims)), name, "pads", 2 * dims)
    dil = int_tuple(attrs.get("dilations", (1,) * dims), name, "dilations", dims)
    groups = int(attrs.get("groups", 1))
    check(all(s >= 1 for s in strides), f"{name}: strides must be >= 1, got {list(strides)}")
    check(all(d >= 1 for d in dil), f"{name}: dilations must be >= 1, got {list(dil)}")
    check(all(p >= 0 for p in pads), f"{name}: pads must be >= 0, got {list(pads)}")
    check(groups >= 1, f"{name}: groups must be >= 1, got {groups}")
    return strides, pads, dil, groups


def _out_len(size: int, k: int, stride: int, pad0: int, pad1: int, dil: int, ceil: bool = False) -> int:
    span = dil * (k - 1) + 1
    num = size + pad0 + pad1 - span
    if num < 0 and not ceil:
        return 0
    # ceil_mode: ceil(num / stride) + 1, which is 1 for a kernel up to one stride larger than the
    # padded input (valid ONNX, run by onnxruntime; dynamo exports of adaptive pooling emit it).
    out = (-(-num // stride) if ceil else num // stride) + 1
    if out < 1:
        return 0
    # A window may not start inside the trailing padding (ONNX/PyTorch ceil_mode rule).
    if ceil and (out - 1) * stride >= size + pad0:
        out -= 1
    return out


def _conv_operands(name: str, ins, rank: int, layout: str, weight_layout: str):
    """The input and weight of a convolution-like op, with their ranks and dtypes checked."""
    x, w = ins[0], ins[1]
    check(len(x.shape) == rank, f"{name}: input must be {rank}-D {layout}, got shape {list(x.shape)}")
    check(len(w.shape) == rank, f"{name}: weight must be {rank}-D {weight_layout}, got shape {list(w.shape)}")
    _float(name, x, "input")
    check(x.dtype == w.dtype, f"{name}: input dtype {x.dtype} differs from weight dtype {w.dtype}")
    return x, w


def _infer_conv2d(ins, attrs, ctx):
    x, w = _conv_operands("conv2d", ins, 4, "NCHW", "(K, C/groups, R, S)")
    (sh, sw), (pt, pl, pb, pr), (dh, dw), g = _conv_params(attrs)
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    check(c == cg * g, f"conv2d: input has {c} channels but weight expects {cg * g} (groups={g})")
    check(k % g == 0, f"conv2d: {k} output channels are not divisible by groups={g}")
    if len(ins) == 3:
        check(ins[2].shape == (k,), f"conv2d: bias must have shape [{k}], got {list(ins[2].shape)}")
    oh = _out_len(h, r, sh, pt, pb, dh)
    ow = _out_len(wd, s, sw, pl, pr, dw)
    check(oh >= 1 and ow >= 1,
          f"conv2d: kernel {r}x{s} (dilations {dh},{dw}) does not fit the padded {h}x{wd} input")
    return [TensorType((n, k, oh, ow), x.dtype)]


def _windows(xp: np.ndarray, oh: int, ow: int, r: int, s: int, strides, dil) -> np.ndarray:
    """(N, C, OH, OW, R, S) read-only view of the padded input's sliding windows."""
    sn, sc, shh, sww = xp.strides
    return as_strided(xp, (xp.shape[0], xp.shape[1], oh, ow, r, s),
                      (sn, sc, shh * strides[0], sww * strides[1], shh * dil[0], sww * dil[1]),
                      writeable=False)


def _conv2d(args, attrs):
    x, w = np.asarray(args[0]), np.asarray(args[1])
    bias = np.asarray(args[2]) if len(args) > 2 else None
    strides, (pt, pl, pb, pr), dil, g = _conv_params(attrs)
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    oh = _out_len(h, r, strides[0], pt, pb, dil[0])
    ow = _out_len(wd, s, strides[1], pl, pr, dil[1])
    if low_precision(x.dtype):
        # float16/bfloat16: products summed in float32 and rounded once, as onnxruntime does
        ys = _conv2d([x.astype(np.float32), w.astype(np.float32)]
                     + ([] if bias is None else [bias.astype(np.float32)]), attrs)
        return [ys[0].astype(x.dtype)]
    dt = x.dtype
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr))) if (pt or pl or pb or pr) else x
    xp = np.ascontiguousarray(xp)
    kg = k // g
    if g > 1 and cg == 1:
        out = _depthwise(xp, w, oh, ow, strides, dil, g)
    elif r == 1 and s == 1 and strides == (1, 1):
        # 1x1 stride-1 convolution is a plain GEMM over channels; no window copy needed.
        xs = xp[:, :, :oh, :ow].reshape(n, g, cg, oh * ow)
        wg = w.reshape(g, kg, cg)
        out = np.matmul(wg[None], xs).reshape(n, k, oh, ow)
    else:
        win = _windows(xp, oh, ow, r, s, strides, dil)  # N, C, OH, OW, R, S
        out = np.empty((n, k, oh * ow), dt)
        for gi in range(g):
            # weights (kg, cg*R*S) @ columns (cg*R*S, OH*OW) gives NCHW directly; this operand
            # order is also the one OpenBLAS runs fast when OH*OW is small (late ResNet layers).
            cols = win[:, gi * cg:(gi + 1) * cg].transpose(0, 1, 4, 5, 2, 3).reshape(n, cg * r * s, oh * ow)
            wm = w[gi * kg:(gi + 1) * kg].reshape(kg, cg * r * s)
            out[:, gi * kg:(gi + 1) * kg] = np.matmul(wm[None], cols)
        out = out.reshape(n, k, oh, ow)
    if bias is not None:
        out = out + bias.astype(dt, copy=False).reshape(1, k, 1, 1)
    return [np.ascontiguousarray(out, dtype=dt)]


def _depthwise(xp, w, oh, ow, strides, dil, g):
    """groups == C with one input channel per group; K = C * m. Loops over kernel taps only."""
    n, c = xp.shape[:2]
    k, _, r, s = w.shape
    m = k // g
    wr = w.reshape(c, m, r, s)
    acc = np.zeros((n, c, m, oh, ow), np.float64 if xp.dtype == np.float64 else np.float32)
    for i in range(r):
        for j in range(s):
            h0, w0 = i * dil[0], j * dil[1]
            tap = xp[:, :, h0:h0 + strides[0] * (oh - 1) + 1:strides[0], w0:w0 + strides[1] * (ow - 1) + 1:strides[1]]
            acc += tap[:, :, None] * wr[None, :, :, i, j, None, None]
    return acc.reshape(n, k, oh, ow).astype(xp.dtype, copy=False)


def _conv_cost(macs: int, ins, outs) -> OpCost:
    """A convolution's cost: 2 FLOPs per MAC, plus one per output element for a bias input."""
    return OpCost(macs, 2 * macs + (outs[0].size if len(ins) == 3 else 0), _nbytes(ins), _nbytes(outs))


def _cost_conv2d(ins, outs, attrs):
    k, cg, r, s = ins[1].shape
    n, _, oh, ow = outs[0].shape
    macs = n * k * oh * ow * cg * r * s
    return _conv_cost(macs, ins, outs)


# ============================================================================ conv_transpose2d/3d
def _convt_params(attrs: dict, name: str = "conv_transpose2d", dims: int = 2):
    """(strides, pads, dilations, output_padding, groups), validated; pads in ONNX order (all begins,
    then all ends: (top, left, bottom, right) in 2-D)."""
    strides, pads, dil, groups = _conv_params(attrs, name, dims)
    opad = int_tuple(attrs.get("output_padding", (0,) * dims), name, "output_padding", dims)
    # PyTorch's rule: output_padding only picks among the sizes a strided/dilated conv maps to one size.
    check(all(0 <= o < max(s, d) for o, s, d in zip(opad, strides, dil)),
          f"{name}: output_padding {list(opad)} must be >= 0 and smaller than stride or dilation "
          f"(strides {list(strides)}, dilations {list(dil)})")
    return strides, pads, dil, opad, groups


def _convt_full(size: int, k: int, stride: int, dil: int, opad: int) -> int:
    """Output length before the pads are cropped off."""
    return stride * (size - 1) + dil * (k - 1) + 1 + opad


def _infer_convt_nd(name: str, dims: int):
    layout = "NCHW" if dims == 2 else "NCDHW"
    def infer(ins, attrs, ctx):
        x, w = _conv_operands(name, ins, dims + 2, layout, "(C, K/groups, *kernel)")
        strides, pads, dil, opad, g = _convt_params(attrs, name, dims)
        n, c = x.shape[:2]
        check(w.shape[0] == c,
              f"{name}: input has {c} channels but weight has {w.shape[0]} (weight is (C, K/groups, *kernel))")
        check(c % g == 0, f"{name}: {c} input channels are not divisible by groups={g}")
        k = w.shape[1] * g
        if len(ins) == 3:
            check(ins[2].shape == (k,), f"{name}: bias must have shape [{k}], got {list(ins[2].shape)}")
        full = [_convt_full(x.shape[2 + i], w.shape[2 + i], strides[i], dil[i], opad[i]) for i in range(dims)]
        out = tuple(full[i] - pads[i] - pads[dims + i] for i in range(dims))
        check(min(out) >= 1, f"{name}: pads {list(pads)} crop away the whole "
                             f"{'x'.join(map(str, x.shape[2:]))} -> {'x'.join(map(str, full))} output")
        return [TensorType((n, k) + out, x.dtype)]
    return infer


def _conv_transpose_nd(name: str, dims: int):
    def compute(args, attrs):
        """col2im: one GEMM gives every input pixel's contribution to every kernel tap, then each
        tap's plane is added into the (uncropped) output at its strided, dilated offset."""
        x, w = np.asarray(args[0]), np.asarray(args[1])
        strides, pads, dil, opad, g = _convt_params(attrs, name, dims)
        n, c = x.shape[:2]
        sp, kern, kg = x.shape[2:], w.shape[2:], w.shape[1]
        cg = c // g
        acc = np.float64 if x.dtype == np.float64 else np.float32
        full = [_convt_full(sp[i], kern[i], strides[i], dil[i], opad[i]) for i in range(dims)]
        wm = w.reshape(g, cg, kg * math.prod(kern)).transpose(0, 2, 1).astype(acc, copy=False)  # g, kg*taps, cg
        cols = np.matmul(wm[None], x.reshape(n, g, cg, math.prod(sp)).astype(acc, copy=False))
        cols = cols.reshape((n, g, kg) + tuple(kern) + tuple(sp))
        y = np.zeros((n, g, kg) + tuple(full), acc)
        for tap in np.ndindex(*kern):
            where = tuple(slice(t * d, t * d + s * (m - 1) + 1, s) for t, d, s, m in zip(tap, dil, strides, sp))
            y[(Ellipsis,) + where] += cols[(slice(None),) * 3 + tap]
        crop = tuple(slice(pads[i], full[i] - pads[dims + i]) for i in range(dims))
        y = y[(Ellipsis,) + crop]
        y = y.reshape((n, g * kg) + y.shape[3:])
        if len(args) > 2:
            y = y + np.asarray(args[2]).astype(acc).reshape((1, -1) + (1,) * dims)
        return [np.ascontiguousarray(y, dtype=x.dtype)]
    return compute


def _cost_convt(ins, outs, attrs):
    x, w = ins[0], ins[1]
    macs = x.size * math.prod(w.shape[1:])  # every input element times each of its K/g*taps weights
    return _conv_cost(macs, ins, outs)


# ============================================================================ matmul family
def _matmul_shape(name: str, a: tuple, b: tuple) -> tuple[tuple, int, int, int, tuple]:
    """Output shape and (batch, M, K, N) of numpy matmul semantics."""
    check(len(a) >= 1 and len(b) >= 1, f"{name}: operands must have rank >= 1")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    check(a2[-1] == b2[-2],
          f"{name}: inner dimensions differ: {list(a)} @ {list(b)} ({a2[-1]} vs {b2[-2]})")
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    out = batch + ((a2[-2],) if len(a) > 1 else ()) + ((b2[-1],) if len(b) > 1 else ())
    return out, a2[-2], a2[-1], b2[-1], batch


def _infer_matmul(ins, attrs, ctx):
    a, b = ins
    check(a.dtype == b.dtype, f"matmul: operand dtypes differ ({a.dtype} vs {b.dtype})")
    out, *_ = _matmul_shape("matmul", a.shape, b.shape)
    return [TensorType(out, a.dtype)]


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.matmul; float16/bfloat16 operands are summed in float32 (the caller rounds once), as
    onnxruntime accumulates them."""
    if low_precision(a.dtype):
        return np.matmul(a.astype(np.float32), b.astype(np.float32))
    return np.matmul(a, b)


def _matmul(args, attrs):
    a, b = np.asarray(args[0]), np.asarray(args[1])
    return [_mm(a, b).astype(a.dtype, copy=False)]


def _cost_matmul(ins, outs, attrs):
    _, m, k, n, batch = _matmul_shape("matmul", ins[0].shape, ins[1].shape)
    macs = int(np.prod(batch, dtype=np.int64)) * m * k * n
    return OpCost(macs, 2 * macs, _nbytes(ins), _nbytes(outs))


def _infer_qlinear_matmul(ins, attrs, ctx):
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = ins
    for what, t in (("a", a), ("b", b), ("y_zero_point", y_zp)):
        check(t.dtype in ("int8", "uint8"), f"qlinear_matmul: {what} must be int8 or uint8, got {t.dtype}")
    check(a_zp.dtype == a.dtype and b_zp.dtype == b.dtype,
          "qlinear_matmul: a zero point must have its operand's type")
    for what, t in (("a_scale", a_s), ("b_scale", b_s), ("y_scale", y_s)):
        _float("qlinear_matmul", t, what)
    out, *_ = _matmul_shape("qlinear_matmul", a.shape, b.shape)
    return [TensorType(out, y_zp.dtype)]


def _qlinear_matmul(args, attrs):
    """ONNX QLinearMatMul as its reference: the integer product of the zero-point-shifted operands,
    times a_scale * b_scale / y_scale (in the scales' type), plus y_zero_point, rounded half to
    even and saturated."""
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (np.asarray(v) for v in args)
    acc = np.matmul(a.astype(np.int32) - a_zp.astype(np.int32), b.astype(np.int32) - b_zp.astype(np.int32))
    y = acc * (a_s * b_s / y_s) + y_zp
    info = np.iinfo(y_zp.dtype)
    return [np.clip(np.rint(y), info.min, info.max).astype(y_zp.dtype)]


def _cost_qlinear_matmul(ins, outs, attrs):
    _, m, k, n, batch = _matmul_shape("qlinear_matmul", ins[0].shape, ins[3].shape)
    macs = int(np.prod(batch, dtype=np.int64)) * m * k * n
    return OpCost(macs, 2 * macs + 3 * outs[0].size, _nbytes(ins), _nbytes(outs))


def _infer_dense(ins, attrs, ctx):
    x, w = ins[0], ins[1]
    check(len(x.shape) >= 1, "dense: input must have rank >= 1")
    check(len(w.shape) == 2, f"dense: weight must be 2-D [N, K], got shape {list(w.shape)}")
    check(x.dtype == w.dtype, f"dense: input dtype {x.dtype} differs from weight dtype {w.dtype}")
    check(x.shape[-1] == w.shape[1],
          f"dense: input has {x.shape[-1]} features but weight expects {w.shape[1]}")
    if len(ins) == 3:
        check(ins[2].shape == (w.shape[0],),
              f"dense: bias must have shape [{w.shape[0]}], got {list(ins[2].shape)}")
    return [TensorType(x.shape[:-1] + (w.shape[0],), x.dtype)]


def _dense(args, attrs):
    x, w = np.asarray(args[0]), np.asarray(args[1])
    # w @ x.T runs 2-3x faster in OpenBLAS than x @ w.T for transformer-sized layers
    x2 = x.reshape(-1, x.shape[-1])
    out = np.ascontiguousarray(_mm(w, x2.T).T).reshape(x.shape[:-1] + (w.shape[0],))
    if len(args) > 2:
        out = out + np.asarray(args[2]).astype(x.dtype, copy=False)
    return [out.astype(x.dtype, copy=False)]


def _cost_dense(ins, outs, attrs):
    macs = outs[0].size * ins[1].shape[1]
    return OpCost(macs, 2 * macs + (outs[0].size if len(ins) == 3 else 0), _nbytes(ins), _nbytes(outs))


def _bmm_dims(ins, attrs):
    a, b = ins
    check(len(a.shape) >= 2 and len(b.shape) >= 2,
          f"batch_matmul: operands must have rank >= 2, got {list(a.shape)} and {list(b.shape)}")
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))
    m, ka = (a.shape[-1], a.shape[-2]) if ta else (a.shape[-2], a.shape[-1])
    kb, n = (b.shape[-1], b.shape[-2]) if tb else (b.shape[-2], b.shape[-1])
    check(ka == kb, f"batch_matmul: inner dimensions differ ({ka} vs {kb}) for shapes "
                    f"{list(a.shape)} and {list(b.shape)} (transpose_a={ta}, transpose_b={tb})")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return batch, m, ka, n


def _infer_bmm(ins, attrs, ctx):
    check(ins[0].dtype == ins[1].dtype, f"batch_matmul: operand dtypes differ ({ins[0].dtype} vs {ins[1].dtype})")
    batch, m, _, n = _bmm_dims(ins, attrs)
    return [TensorType(batch + (m, n), ins[0].dtype)]


def _bmm(args, attrs):
    a, b = np.asarray(args[0]), np.asarray(args[1])
    if attrs.get("transpose_a", False):
        a = np.swapaxes(a, -1, -2)
    if attrs.get("transpose_b", False):
        b = np.swapaxes(b, -1, -2)
    return [_mm(a, b).astype(args[0].dtype, copy=False)]


def _cost_bmm(ins, outs, attrs):
    batch, m, k, n = _bmm_dims(ins, attrs)
    macs = int(np.prod(batch, dtype=np.int64)) * m * k * n
    return OpCost(macs, 2 * macs, _nbytes(ins), _nbytes(outs))


def _gemm_dims(ins, attrs):
    a, b = ins[0], ins[1]
    check(len(a.shape) == 2 and len(b.shape) == 2,
          f"gemm: A and B must be 2-D, got {list(a.shape)} and {list(b.shape)}")
    ta, tb = int(attrs.get("trans_a", 0)), int(attrs.get("trans_b", 0))
    m, ka = (a.shape[1], a.shape[0]) if ta else a.shape
    kb, n = (b.shape[1], b.shape[0]) if tb else b.shape
    check(ka == kb, f"gemm: inner dimensions differ ({ka} vs {kb}) for A {list(a.shape)} "
                    f"(trans_a={ta}) and B {list(b.shape)} (trans_b={tb})")
    return m, ka, n


def _infer_gemm(ins, attrs, ctx):
    check(ins[0].dtype == ins[1].dtype, f"gemm: operand dtypes differ ({ins[0].dtype} vs {ins[1].dtype})")
    m, _, n = _gemm_dims(ins, attrs)
    if len(ins) == 3:
        c = ins[2].shape
        ok = len(c) <= 2 and all(d in (1, t) for d, t in zip(reversed(c), (n, m)))
        check(ok, f"gemm: C of shape {list(c)} does not broadcast to [{m}, {n}]")
    return [TensorType((m, n), ins[0].dtype)]


def _gemm(args, attrs):
    a, b = np.asarray(args[0]), np.asarray(args[1])
    dt = a.dtype
    if int(attrs.get("trans_a", 0)):
        a = a.T
    if int(attrs.get("trans_b", 0)):
        b = b.T
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    y = _mm(a, b).astype(dt, copy=False)
    if alpha != 1.0:
        y = y * np.asarray(alpha, dt)
    if len(args) > 2:
        c = np.asarray(args[2]).astype(dt, copy=False)
        y = y + (c if beta == 1.0 else c * np.asarray(beta, dt))
    return [np.broadcast_to(y, (a.shape[0], b.shape[1])).astype(dt)]


def _cost_gemm(ins, outs, attrs):
    m, k, n = _gemm_dims(ins, attrs)
    macs = m * k * n
    return OpCost(macs, 2 * macs + (m * n if len(ins) == 3 else 0), _nbytes(ins), _nbytes(outs))


# ============================================================================ bias / norms
def _infer_bias_add(ins, attrs, ctx):
    x, b = ins
    axis = norm_axis(attrs.get("axis", 1), len(x.shape), "bias_add")
    check(b.shape == (x.shape[axis],),
          f"bias_add: bias must have shape [{x.shape[axis]}] (axis {axis} of {list(x.shape)}), got {list(b.shape)}")
    return [TensorType(x.shape, x.dtype)]


def _bias_add(args, attrs):
    x, b = np.asarray(args[0]), np.asarray(args[1])
    axis = norm_axis(attrs.get("axis", 1), x.ndim, "bias_add")
    shape = [1] * x.ndim
    shape[axis] = -1
    return [(x + b.astype(x.dtype, copy=False).reshape(shape)).astype(x.dtype, copy=False)]


def _infer_batch_norm(ins, attrs, ctx):
    x = ins[0]
    check(len(x.shape) >= 2, f"batch_norm: input must have rank >= 2 (N, C, ...), got {list(x.shape)}")
    _float("batch_norm", x, "input")
    c = x.shape[1]
    for name, t in zip(("scale", "bias", "mean", "var"), ins[1:]):
        check(t.shape == (c,), f"batch_norm: {name} must have shape [{c}], got {list(t.shape)}")
    return [TensorType(x.shape, x.dtype)]


def _batch_norm(args, attrs):
    x, scale, bias, mean, var = (np.asarray(a) for a in args)
    eps = float(attrs.get("epsilon", 1e-5))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    # Fold into one scale/shift per channel (what ORT does); float64 for the fold is harmless.
    s = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    t = bias.astype(np.float64) - mean.astype(np.float64) * s
    y = x * s.astype(x.dtype).reshape(shape) + t.astype(x.dtype).reshape(shape)
    return [y.astype(x.dtype, copy=False)]


def _infer_layer_norm(ins, attrs, ctx):
    x = ins[0]
    _float("layer_norm", x, "input")
    axis = norm_axis(attrs.get("axis", -1), len(x.shape), "layer_norm")
    norm_shape = x.shape[axis:]
    for name, t in zip(("gamma", "beta"), ins[1:]):
        try:
            ok = broadcast_shapes(t.shape, norm_shape) == tuple(norm_shape) and len(t.shape) <= len(norm_shape)
        except Exception:
            ok = False
        check(ok, f"layer_norm: {name} of shape {list(t.shape)} does not broadcast to the normalised "
                  f"shape {list(norm_shape)}")
    return [TensorType(x.shape, x.dtype)]


def _layer_norm(args, attrs):
    x = np.asarray(args[0])
    axis = norm_axis(attrs.get("axis", -1), x.ndim, "layer_norm")
    eps = float(attrs.get("epsilon", 1e-5))
    axes = tuple(range(axis, x.ndim))
    xd = x.astype(np.float64)
    mean = xd.mean(axis=axes, keepdims=True)
    d = xd - mean  # two-pass variance: no cancellation for large means
    var = np.mean(d * d, axis=axes, keepdims=True)
    y = d / np.sqrt(var + eps) * np.asarray(args[1]).astype(np.float64)
    if len(args) > 2:
        y = y + np.asarray(args[2]).astype(np.float64)
    return [y.astype(x.dtype)]


def _infer_instance_norm(ins, attrs, ctx):
    x = ins[0]
    check(len(x.shape) >= 3, f"instance_norm: input must have rank >= 3 (N, C, spatial...), got {list(x.shape)}")
    _float("instance_norm", x, "input")
    c = x.shape[1]
    for name, t in zip(("scale", "bias"), ins[1:]):
        check(t.shape == (c,), f"instance_norm: {name} must have shape [{c}], got {list(t.shape)}")
    return [TensorType(x.shape, x.dtype)]


def _instance_norm(args, attrs):
    x = np.asarray(args[0])
    eps = float(attrs.get("epsilon", 1e-5))
    axes = tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    xd = x.astype(np.float64)
    d = xd - xd.mean(axis=axes, keepdims=True)  # two-pass variance, as layer_norm
    var = np.mean(d * d, axis=axes, keepdims=True)
    y = d / np.sqrt(var + eps) * np.asarray(args[1]).astype(np.float64).reshape(shape)
    y = y + np.asarray(args[2]).astype(np.float64).reshape(shape)
    return [y.astype(x.dtype)]


# ============================================================================ pooling
def _pool_params(name: str, attrs: dict):
    check("kernel" in attrs, f"{name}: missing attribute 'kernel'")
    kernel = int_tuple(attrs["kernel"], name, "kernel", 2)
    strides = int_tuple(attrs.get("strides", (1, 1)), name, "strides", 2)
    pads = int_tuple(attrs.get("pads", (0, 0, 0, 0)), name, "pads", 4)
    dil = int_tuple(attrs.get("dilations", (1, 1)), name, "dilations", 2)
    check(all(v >= 1 for v in kernel + strides + dil), f"{name}: kernel, strides and dilations must be >= 1")
    check(all(p >= 0 for p in pads), f"{name}: pads must be >= 0, got {list(pads)}")
    check(pads[0] < kernel[0] * dil[0] and pads[2] < kernel[0] * dil[0] and pads[1] < kernel[1] * dil[1]
          and pads[3] < kernel[1] * dil[1], f"{name}: pads {list(pads)} must be smaller than the kernel {list(kernel)}")
    return kernel, strides, pads, dil, bool(attrs.get("ceil_mode", False))


def _pool_out(name, x: tuple, attrs):
    check(len(x) == 4, f"{name}: input must be 4-D NCHW, got shape {list(x)}")
    (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw), ceil = _pool_params(name, attrs)
    oh = _out_len(x[2], kh, sh, pt, pb, dh, ceil)
    ow = _out_len(x[3], kw, sw, pl, pr, dw, ceil)
    check(oh >= 1 and ow >= 1, f"{name}: kernel {kh}x{kw} does not fit the padded {x[2]}x{x[3]} input")
    return oh, ow


def _infer_pool(name):
    def infer(ins, attrs, ctx):
        x = ins[0]
        if name == "avg_pool2d":
            _float(name, x, "input")
        oh, ow = _pool_out(name, x.shape, attrs)
        return [TensorType(x.shape[:2] + (oh, ow), x.dtype)]
    return infer


def _pool_windows(x: np.ndarray, attrs, name: str, fill) -> tuple[np.ndarray, tuple]:
    (kh, kw), strides, (pt, pl, pb, pr), dil, _ = _pool_params(name, attrs)
    oh, ow = _pool_out(name, x.shape, attrs)
    # extra bottom/right rows so ceil-mode windows that overhang the padded input exist
    need_h = (oh - 1) * strides[0] + dil[0] * (kh - 1) + 1
    need_w = (ow - 1) * strides[1] + dil[1] * (kw - 1) + 1
    eh = max(0, need_h - (x.shape[2] + pt + pb))
    ew = max(0, need_w - (x.shape[3] + pl + pr))
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb + eh), (pl, pr + ew)), constant_values=fill)
    return _windows(np.ascontiguousarray(xp), oh, ow, kh, kw, strides, dil), (pt, pl, pb, pr, eh, ew)


def _max_pool(args, attrs):
    x = np.asarray(args[0])
    if np.issubdtype(x.dtype, np.floating):
        fill = -np.inf
    else:
        fill = np.iinfo(x.dtype).min
    win, _ = _pool_windows(x, attrs, "max_pool2d", fill)
    return [win.max(axis=(4, 5)).astype(x.dtype, copy=False)]


def _max_pool_indices(args, attrs):
    """ONNX MaxPool's Indices output: the flat input index of each window's first maximum, row
    major over (N, C, H, W) (storage_order 0) or with H and W swapped (1)."""
    x = np.asarray(args[0])
    fill = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    win, (pt, pl, _, _, _, _) = _pool_windows(x, attrs, "max_pool2d", fill)
    (kh, kw), strides, _, dil, _ = _pool_params("max_pool2d", attrs)
    n, c, oh, ow = win.shape[:4]
    best = win.reshape(n, c, oh, ow, kh * kw).argmax(axis=-1)
    r, s = np.divmod(best, kw)
    h = np.arange(oh)[:, None] * strides[0] - pt + r * dil[0]
    w = np.arange(ow)[None, :] * strides[1] - pl + s * dil[1]
    hh, ww = x.shape[2:]
    plane = (np.arange(n)[:, None, None, None] * c + np.arange(c)[None, :, None, None]) * hh * ww
    within = h * ww + w if not int(attrs.get("storage_order", 0)) else w * hh + h
    return [(plane + within).astype(np.int64)]


def _infer_pool_indices(ins, attrs, ctx):
    return [TensorType(_infer_pool("max_pool2d")(ins, attrs, ctx)[0].shape, "int64")]


def _avg_pool(args, attrs):
    x = np.asarray(args[0])
    win, (pt, pl, pb, pr, eh, ew) = _pool_windows(x, attrs, "avg_pool2d", 0)
    total = win.sum(axis=(4, 5), dtype=np.float64)
    # Divisor: real pixels only, or real + explicit padding (never the ceil-mode overhang), as ORT.
    h, w = x.shape[2:]
    if attrs.get("count_include_pad", False):
        mh = np.r_[np.ones(pt + h + pb), np.zeros(eh)]
        mw = np.r_[np.ones(pl + w + pr), np.zeros(ew)]
    else:
        mh = np.r_[np.zeros(pt), np.ones(h), np.zeros(pb + eh)]
        mw = np.r_[np.zeros(pl), np.ones(w), np.zeros(pr + ew)]
    mask = np.ascontiguousarray(np.outer(mh, mw)[None, None])
    (kh, kw), strides, _, dil, _ = _pool_params("avg_pool2d", attrs)
    count = _windows(mask, win.shape[2], win.shape[3], kh, kw, strides, dil).sum(axis=(4, 5))
    return [(total / np.maximum(count, 1)).astype(x.dtype)]


def _cost_pool(extra: int):
    def cost(ins, outs, attrs):
        kh, kw = int_tuple(attrs["kernel"], "pool", "kernel", 2)
        return OpCost(0, outs[0].size * (kh * kw + extra), _nbytes(ins), _nbytes(outs))
    return cost


def _infer_gap(ins, attrs, ctx):
    x = ins[0]
    check(len(x.shape) == 4, f"global_avg_pool2d: input must be 4-D NCHW, got shape {list(x.shape)}")
    _float("global_avg_pool2d", x, "input")
    return [TensorType(x.shape[:2] + (1, 1), x.dtype)]


def _gap(args, attrs):
    x = np.asarray(args[0])
    return [x.mean(axis=(2, 3), keepdims=True, dtype=np.float64).astype(x.dtype)]


# ============================================================================ 3-D conv / pools
# Video and volumetric models (C3D, R(2+1)D, 3-D U-Net). These run on the host only: no simulator
# kernel or preset knows them (sim.workload.from_ir keys on the op name, so conv3d never reaches the
# conv2d workload even though its category is "conv").
def _params3d(name: str, attrs: dict, key: str, n: int, default: int) -> tuple[int, ...]:
    return int_tuple(attrs.get(key, (default,) * n), name, key, n)


def _conv3d_params(attrs: dict):
    return _conv_params(attrs, "conv3d", 3)


def _out3d(spatial, kernel, strides, pads, dil, ceil: bool = False) -> tuple[int, ...]:
    """Output (OD, OH, OW); pads in ONNX order (d0, h0, w0, d1, h1, w1)."""
    return tuple(_out_len(spatial[i], kernel[i], strides[i], pads[i], pads[i + 3], dil[i], ceil)
                 for i in range(3))


def _infer_conv3d(ins, attrs, ctx):
    name = "conv3d"
    x, w = _conv_operands(name, ins, 5, "NCDHW", "(K, C/groups, KD, KH, KW)")
    strides, pads, dil, g = _conv3d_params(attrs)
    n, c = x.shape[:2]
    k, cg = w.shape[:2]
    check(c == cg * g, f"{name}: input has {c} channels but weight expects {cg * g} (groups={g})")
    check(k % g == 0, f"{name}: {k} output channels are not divisible by groups={g}")
    if len(ins) == 3:
        check(ins[2].shape == (k,), f"{name}: bias must have shape [{k}], got {list(ins[2].shape)}")
    out = _out3d(x.shape[2:], w.shape[2:], strides, pads, dil)
    check(min(out) >= 1, f"{name}: kernel {'x'.join(map(str, w.shape[2:]))} (dilations {list(dil)}) does not "
                         f"fit the padded {'x'.join(map(str, x.shape[2:]))} input")
    return [TensorType((n, k) + out, x.dtype)]


def _tap(xp: np.ndarray, start, strides, out) -> np.ndarray:
    """The padded input sampled at one kernel tap for every output position: (N, C, OD, OH, OW)."""
    return xp[(slice(None), slice(None)) + tuple(slice(b, b + s * (o - 1) + 1, s)
                                                 for b, s, o in zip(start, strides, out))]


def _conv3d(args, attrs):
    """One GEMM per kernel tap, (K/g, C/g) @ (C/g, OD*OH*OW) per group, accumulated: memory stays at
    the output's size (an im2col of a video clip would be KD*KH*KW times the input)."""
    x, w = np.asarray(args[0]), np.asarray(args[1])
    strides, pads, dil, g = _conv3d_params(attrs)
    n = x.shape[0]
    k, cg = w.shape[:2]
    out = _out3d(x.shape[2:], w.shape[2:], strides, pads, dil)
    acc = np.float64 if x.dtype == np.float64 else np.float32
    xp = np.pad(x.astype(acc, copy=False), ((0, 0), (0, 0)) + tuple(zip(pads[:3], pads[3:])))
    wg = w.astype(acc, copy=False).reshape((g, k // g, cg) + w.shape[2:])
    y = np.zeros((n, g, k // g, int(np.prod(out))), acc)
    for tap in np.ndindex(*w.shape[2:]):
        cols = _tap(xp, [t * d for t, d in zip(tap, dil)], strides, out).reshape(n, g, cg, -1)
        y += np.matmul(wg[(None, slice(None), slice(None), slice(None)) + tap], cols)
    y = y.reshape((n, k) + out)
    if len(args) > 2:
        y += np.asarray(args[2]).astype(acc).reshape(1, k, 1, 1, 1)
    return [np.ascontiguousarray(y, dtype=x.dtype)]


def _cost_conv3d(ins, outs, attrs):
    _, cg, kd, kh, kw = ins[1].shape
    macs = outs[0].size * cg * kd * kh * kw  # N*K*OD*OH*OW * (C/g)*KD*KH*KW
    return _conv_cost(macs, ins, outs)


def _pool3d_params(name: str, attrs: dict):
    check("kernel" in attrs, f"{name}: missing attribute 'kernel'")
    kernel = int_tuple(attrs["kernel"], name, "kernel", 3)
    strides, dil = _params3d(name, attrs, "strides", 3, 1), _params3d(name, attrs, "dilations", 3, 1)
    pads = _params3d(name, attrs, "pads", 6, 0)
    check(all(v >= 1 for v in kernel + strides + dil), f"{name}: kernel, strides and dilations must be >= 1")
    check(all(p >= 0 for p in pads), f"{name}: pads must be >= 0, got {list(pads)}")
    # onnxruntime's rule; it also keeps every window touching at least one real voxel.
    check(all(pads[i] < kernel[i] and pads[i + 3] < kernel[i] for i in range(3)),
          f"{name}: pads {list(pads)} must be smaller than the kernel {list(kernel)}")
    return kernel, strides, pads, dil, bool(attrs.get("ceil_mode", False))


def _infer_pool3d(name):
    def infer(ins, attrs, ctx):
        x = ins[0]
        check(len(x.shape) == 5, f"{name}: input must be 5-D NCDHW, got shape {list(x.shape)}")
        if name == "avg_pool3d":
            _float(name, x, "input")
        kernel, strides, pads, dil, ceil = _pool3d_params(name, attrs)
        out = _out3d(x.shape[2:], kernel, strides, pads, dil, ceil)
        check(min(out) >= 1, f"{name}: kernel {'x'.join(map(str, kernel))} does not fit the padded "
                             f"{'x'.join(map(str, x.shape[2:]))} input")
        return [TensorType(x.shape[:2] + out, x.dtype)]
    return infer


def _pool3d_pad(x: np.ndarray, attrs, name: str, fill):
    """The input padded with ``fill``, the output size and the per-axis (begin, end) pad widths; the
    end widths include the ceil-mode overhang so that every window exists."""
    kernel, strides, pads, dil, ceil = _pool3d_params(name, attrs)
    out = _out3d(x.shape[2:], kernel, strides, pads, dil, ceil)
    need = [(o - 1) * s + d * (k - 1) + 1 for o, s, d, k in zip(out, strides, dil, kernel)]
    widths = [(pads[i], max(pads[i + 3], need[i] - x.shape[2 + i] - pads[i])) for i in range(3)]
    return np.pad(x, [(0, 0), (0, 0)] + widths, constant_values=fill), out, widths


def _pool3d_taps(xp: np.ndarray, attrs, name: str, out):
    """Each kernel tap's (N, C, OD, OH, OW) sample of the padded input; reducing over taps one at a
    time never builds the KD*KH*KW-times larger window array."""
    kernel, strides, _, dil, _ = _pool3d_params(name, attrs)
    return (_tap(xp, [t * d for t, d in zip(tap, dil)], strides, out) for tap in np.ndindex(*kernel))


def _max_pool3d(args, attrs):
    x = np.asarray(args[0])
    fill = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    xp, out, _ = _pool3d_pad(x, attrs, "max_pool3d", fill)
    taps = _pool3d_taps(xp, attrs, "max_pool3d", out)
    y = next(taps).copy()
    for t in taps:
        np.maximum(y, t, out=y)
    return [np.ascontiguousarray(y)]


def _avg_pool3d(args, attrs):
    x = np.asarray(args[0])
    acc = np.float64 if x.dtype == np.float64 else np.float32
    xp, out, widths = _pool3d_pad(x.astype(acc, copy=False), attrs, "avg_pool3d", 0)
    total = sum(_pool3d_taps(xp, attrs, "avg_pool3d", out))
    # Divisor: real voxels only, or real + explicit padding (never the ceil-mode overhang), as ORT.
    incl = bool(attrs.get("count_include_pad", False))
    pads = _pool3d_params("avg_pool3d", attrs)[2]
    axes = [np.r_[np.full(b, incl), np.ones(size, bool), np.full(pads[i + 3], incl),
                  np.zeros(e - pads[i + 3], bool)] for i, (size, (b, e)) in enumerate(zip(x.shape[2:], widths))]
    mask = np.einsum("i,j,k->ijk", *(a.astype(acc) for a in axes))[None, None]
    count = sum(_pool3d_taps(mask, attrs, "avg_pool3d", out))
    return [np.ascontiguousarray(total / np.maximum(count, 1), dtype=x.dtype)]


def _cost_pool3d(extra: int):
    def cost(ins, outs, attrs):
        kd, kh, kw = int_tuple(attrs["kernel"], "pool", "kernel", 3)
        return OpCost(0, outs[0].size * (kd * kh * kw + extra), _nbytes(ins), _nbytes(outs))
    return cost


# ============================================================================ resize
# ONNX Resize on the two spatial axes of NCHW. Coordinates are computed in float32 the way
# onnxruntime does, so nearest-neighbour picks the same pixels at exact .5 ties.
RESIZE_MODES = ("nearest", "linear", "cubic")
RESIZE_COORD_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric",
                      "tf_crop_and_resize")
RESIZE_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize_params(attrs: dict):
    name = "resize"
    check("size" in attrs, f"{name}: missing attribute 'size'")
    size = int_tuple(attrs["size"], name, "size", 2)
    scales = attrs.get("scales")
    scales = tuple(size) if scales is None else tuple(scales)
    check(len(scales) == 2 and all(isinstance(v, (int, float)) and v > 0 for v in scales),
          f"{name}: scales must be 2 positive numbers, got {list(scales)}")
    mode = attrs.get("mode", "nearest")
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    nm = attrs.get("nearest_mode", "round_prefer_floor")
    check(all(v >= 1 for v in size), f"{name}: size must be >= 1, got {list(size)}")
    check(mode in RESIZE_MODES, f"{name}: mode {mode!r} is not one of {', '.join(RESIZE_MODES)}")
    check(ctm in RESIZE_COORD_MODES,
          f"{name}: coordinate_transformation_mode {ctm!r} is not one of {', '.join(RESIZE_COORD_MODES)}")
    check(nm in RESIZE_NEAREST_MODES, f"{name}: nearest_mode {nm!r} is not one of {', '.join(RESIZE_NEAREST_MODES)}")
    return size, tuple(float(v) for v in scales), mode, ctm, nm


def _infer_resize(ins, attrs, ctx):
    x = ins[0]
    check(len(x.shape) == 4, f"resize: input must be 4-D NCHW, got shape {list(x.shape)}")
    size, _, mode, ctm, _ = _resize_params(attrs)
    check(ctm != "tf_crop_and_resize" or "roi" in attrs or attrs.get("roi_input"),
          "resize: tf_crop_and_resize needs a roi")
    check(len(ins) == 1 + ("by" in attrs) + bool(attrs.get("roi_input")),
          f"resize: {len(ins)} inputs do not match the run-time scales/sizes and roi the attributes name")
    if mode != "nearest":
        _float("resize", x, f"input ({mode} mode)")
    check(x.shape[2] >= 1 and x.shape[3] >= 1, f"resize: cannot resize an empty {list(x.shape[2:])} image")
    return [TensorType(x.shape[:2] + size, x.dtype)]


def resize_targets(shape: Sequence[int], given: np.ndarray, by: str, axes: Sequence[int] | None,
                   policy: str = "stretch") -> tuple[list[float], list[int]]:
    """ONNX Resize's per-axis scales (float32, as ONNX stores them) and output sizes of a 4-D
    ``shape`` from its ``scales`` or ``sizes`` input (``by``), paired with ``axes`` in the order
    listed (axes=[3, 2] is not sorted); with sizes, the scale is sizes / input size, as onnxruntime
    computes it. Only the spatial axes of NCHW may change."""
    rank = len(shape)
    given = np.asarray(given, np.float32 if by == "scales" else np.int64).reshape(-1)
    axes = list(range(rank)) if axes is None else [int(v) + rank if int(v) < 0 else int(v) for v in axes]
    check(len(given) == len(axes), f"resize: {by} {given.tolist()} has {len(given)} entries for {len(axes)} axes")
    sc = [np.float32(1.0)] * rank
    out = list(shape)
    if by == "sizes" and policy != "stretch":
        # one scale for all the given axes, the largest (not_smaller) or smallest (not_larger)
        # that fits, and sizes rounded half up from it (the spec)
        ratios = [float(v) / shape[ax] for ax, v in zip(axes, given)]
        r = min(ratios) if policy == "not_larger" else max(ratios)
        for ax in axes:
            sc[ax], out[ax] = np.float32(r), int(np.floor(r * shape[ax] + 0.5))
        given = []
    for ax, v in zip(axes, given):
        if by == "scales":
            sc[ax], out[ax] = v, int(v * np.float32(shape[ax]))
        else:
            sc[ax], out[ax] = np.float32(v) / np.float32(shape[ax]), int(v)
    check(out[:2] == list(shape[:2]), f"resize: only the spatial axes of NCHW can be resized; input "
                                      f"{list(shape)} -> {out}")
    return [float(v) for v in sc], out


def resize_roi(roi, rank: int, axes: Sequence[int] | None) -> tuple[float, float, float, float]:
    """Resize's roi input ([starts, ends] over all axes or over ``axes``) as (start_h, start_w,
    end_h, end_w) of NCHW; the batch and channel axes must keep their whole extent [0, 1]."""
    roi = np.asarray(roi, np.float32).reshape(-1)
    axes = list(range(rank)) if axes is None else [int(a) + rank if int(a) < 0 else int(a) for a in axes]
    check(roi.size == 2 * len(axes), f"resize: roi {roi.tolist()} needs {2 * len(axes)} values "
                                     f"(starts and ends of axes {axes})")
    start, end = [0.0] * rank, [1.0] * rank
    for k, ax in enumerate(axes):
        check(0 <= ax < rank, f"resize: axis {ax} is out of range for rank {rank}")
        start[ax], end[ax] = float(roi[k]), float(roi[len(axes) + k])
    check(start[:2] == [0.0, 0.0] and end[:2] == [1.0, 1.0],
          f"resize: a roi cropping the batch or channel axis is not supported (starts {start[:2]}, ends {end[:2]})")
    return (start[2], start[3], end[2], end[3])


def _resize_coords(out_len: int, in_len: int, scale: float, ctm: str,
                   roi: tuple[float, float] = (0.0, 1.0)) -> np.ndarray:
    """Source coordinate (float32) of every output position along one axis."""
    x = np.arange(out_len, dtype=np.float32)
    sc, half = np.float32(scale), np.float32(0.5)
    if ctm == "tf_crop_and_resize":
        # the roi's fraction of the input, sampled at out_len evenly spaced points (TF CropAndResize;
        # onnxruntime's float32 formula)
        r0, r1, last = np.float32(roi[0]), np.float32(roi[1]), np.float32(in_len - 1)
        if out_len == 1:
            return np.full(1, np.float32(0.5) * (r0 + r1) * last, np.float32)
        return r0 * last + x * (r1 - r0) * last / np.float32(out_len - 1)
    if ctm == "asymmetric":
        return x / sc
    if ctm == "align_corners":
        if out_len == 1:
            return np.zeros(1, np.float32)
        return x * np.float32(in_len - 1) / np.float32(out_len - 1)
    if ctm == "pytorch_half_pixel" and out_len == 1:
        return np.zeros(1, np.float32)
    if ctm == "half_pixel_symmetric":
        # the spec: keep the sampled grid centred when out_len rounds scale * in_len
        adjust = np.float32(out_len) / (sc * np.float32(in_len))
        return np.float32(in_len) / np.float32(2) * (np.float32(1) - adjust) + (x + half) / sc - half
    return (x + half) / sc - half


def _keys(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic kernel at distance |t| (a: cubic_coeff_a)."""
    t = np.abs(t)
    return np.where(t <= 1, ((a + 2) * t - (a + 3)) * t * t + 1,
                    np.where(t < 2, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a, 0.0))


def _resize_matrix(out_len: int, in_len: int, scale: float, attrs: dict,
                   roi: tuple[float, float] = (0.0, 1.0)) -> np.ndarray:
    """(out_len, in_len) interpolation weights along one axis for cubic, and for linear with
    antialias: taps around each source coordinate, clamped to the edge (or dropped and the rest
    renormalised with exclude_outside). With antialias and scale < 1 the kernel is stretched by
    1/scale and normalised (the spec's reference)."""
    mode = attrs.get("mode", "nearest")
    a = float(attrs.get("cubic_coeff_a", -0.75))
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    x = _resize_coords(out_len, in_len, scale, ctm, roi).astype(np.float64)
    if ctm == "pytorch_half_pixel" and out_len == 1:
        x = np.full(1, -0.5)
    base = np.floor(x)
    ratio = x - base
    whole = ratio == 0  # the reference takes ratio 1 from the tap below
    base, ratio = np.where(whole, base - 1, base), np.where(whole, 1.0, ratio)
    s = min(scale, 1.0) if attrs.get("antialias") else 1.0
    reach = 2 if mode == "cubic" else 1
    start = int(np.floor(-reach / s) + 1)
    offsets = np.arange(start, 2 - start)  # taps base + offsets
    dist = (offsets[None, :] - ratio[:, None]) * s
    w = _keys(dist, a) if mode == "cubic" else np.clip(1 - np.abs(dist), 0, 1)
    pos = base[:, None].astype(np.int64) + offsets[None, :]
    if attrs.get("exclude_outside"):
        w = np.where((pos < 0) | (pos >= in_len), 0.0, w)
    if s < 1.0 or attrs.get("exclude_outside"):
        w = w / w.sum(axis=1, keepdims=True)
    m = np.zeros((out_len, in_len))
    np.add.at(m, (np.repeat(np.arange(out_len), len(offsets)), np.clip(pos, 0, in_len - 1).reshape(-1)),
              w.reshape(-1))
    return m


def _nearest_index(coord: np.ndarray, nm: str, in_len: int) -> np.ndarray:
    fl = np.floor(coord)
    frac = coord - fl  # exact in float32
    if nm == "floor":
        idx = fl
    elif nm == "ceil":
        idx = np.ceil(coord)
    else:
        # negative coordinates clamp to 0 whichever way the tie goes
        up = (frac > 0.5) | ((frac == 0.5) & (nm == "round_prefer_ceil"))
        idx = fl + up
    return np.clip(idx, 0, in_len - 1).astype(np.int64)


def _lerp_axis(x: np.ndarray, coord: np.ndarray, axis: int) -> np.ndarray:
    n = x.shape[axis]
    c = np.clip(coord, np.float32(0), np.float32(n - 1))
    i0 = np.floor(c).astype(np.int64)
    i1 = np.minimum(i0 + 1, n - 1)
    shape = [1] * x.ndim
    shape[axis] = -1
    w1 = (c - i0).astype(np.float64).reshape(shape)
    return np.take(x, i0, axis=axis) * (1.0 - w1) + np.take(x, i1, axis=axis) * w1


def _resize(args, attrs):
    x = np.asarray(args[0])
    rest = list(args[1:])
    if attrs.get("roi_input"):  # tf_crop_and_resize's roi computed at run time (the last input)
        roi = resize_roi(rest.pop(), x.ndim, attrs.get("roi_axes"))
        attrs = {k: v for k, v in attrs.items() if k != "roi_input"}
        attrs["roi"] = roi
    if rest:
        # scales or sizes computed at run time: the declared output size must come out exactly
        sc, out = resize_targets(x.shape, rest[0], attrs["by"], attrs.get("axes"), attrs.get("policy", "stretch"))
        check(tuple(out[2:]) == tuple(attrs["size"]), f"resize: the {attrs['by']} computed at run time give "
              f"size {out[2:]}, not the declared {list(attrs['size'])}")
        attrs = dict(attrs, scales=tuple(sc[2:]))
    size, scales, mode, ctm, nm = _resize_params(attrs)
    roi = tuple(attrs.get("roi", (0.0, 0.0, 1.0, 1.0)))
    rois = [(roi[0], roi[2]), (roi[1], roi[3])]
    coords = [_resize_coords(o, i, s, ctm, r) for o, i, s, r in zip(size, x.shape[2:], scales, rois)]
    if mode == "nearest":
        ih, iw = (_nearest_index(cd, nm, i) for cd, i in zip(coords, x.shape[2:]))
        y = np.ascontiguousarray(x[:, :, ih[:, None], iw[None, :]])
    elif mode == "cubic" or attrs.get("antialias") or ctm == "half_pixel_symmetric":
        mh, mw = (_resize_matrix(o, i, s, attrs, r) for o, i, s, r in zip(size, x.shape[2:], scales, rois))
        y = np.einsum("oh,nchw,pw->ncop", mh, x.astype(np.float64), mw, optimize=True).astype(x.dtype)
    else:
        y = _lerp_axis(_lerp_axis(x.astype(np.float64), coords[0], 2), coords[1], 3).astype(x.dtype)
    if ctm == "tf_crop_and_resize":
        # a sample outside the input takes extrapolation_value (TF CropAndResize)
        out_h, out_w = ((cd < 0) | (cd > np.float32(i - 1)) for cd, i in zip(coords, x.shape[2:]))
        outside = out_h[:, None] | out_w[None, :]
        y = np.where(outside, np.asarray(attrs.get("extrapolation_value", 0.0)).astype(x.dtype), y)
    return [y]


def _cost_resize(ins, outs, attrs):
    # linear: the four neighbours weighted and summed (4 multiplies, 3 adds) per output element;
    # cubic: 16 neighbours (antialiased kernels are wider, counted as cubic)
    per = {"linear": 7, "cubic": 31}.get(attrs.get("mode", "nearest"), 0)
    return OpCost(0, outs[0].size * per, _nbytes(ins[:1]), _nbytes(outs))


# ============================================================================ softmax
def _infer_softmax(ins, attrs, ctx):
    x = ins[0]
    _float("softmax", x, "input")
    norm_axis(attrs.get("axis", -1), len(x.shape), "softmax")
    return [TensorType(x.shape, x.dtype)]


def _staged_softmax(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    """(Log)Softmax of a float16/bfloat16 ``x`` as the spec's function body defines it (opset 13:
    ReduceMax, Sub, Exp, ReduceSum, Div or Log and Sub): every intermediate is a tensor of the input
    type, so each step rounds to it; each step itself is float32 math (numpy's own float16 arithmetic
    and sums, and the only way for bfloat16). This is what onnx's reference gives, e.g. inside
    float16 Attention; one rounding at the end is off by an ulp there."""
    dt, f32 = x.dtype, np.float32
    r = lambda a: np.asarray(a, f32).astype(dt).astype(f32)  # noqa: E731 - materialise in dt
    xf = x.astype(f32)
    with np.errstate(invalid="ignore", divide="ignore"):  # a row of all -inf is NaN, as IEEE gives it
        z = r(xf - xf.max(axis=axis, keepdims=True))
        e = r(np.exp(z))
        s = r(e.sum(axis=axis, keepdims=True))
        y = z - r(np.log(s)) if log else e / s
    return y.astype(dt)


def _softmax(args, attrs):
    x = np.asarray(args[0])
    axis = norm_axis(attrs.get("axis", -1), x.ndim, "softmax")
    if low_precision(x.dtype):
        return [_staged_softmax(x, axis, log=False)]
    with np.errstate(invalid="ignore"):  # a row of all -inf is NaN, as IEEE (and onnxruntime) give it
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return [(e / e.sum(axis=axis, keepdims=True)).astype(x.dtype, copy=False)]


def _log_softmax(args, attrs):
    x = np.asarray(args[0])
    axis = norm_axis(attrs.get("axis", -1), x.ndim, "log_softmax")
    if low_precision(x.dtype):
        return [_staged_softmax(x, axis, log=True)]
    # x - max - log(sum(exp(x - max))): finite wherever softmax would underflow to 0.
    z = x - x.max(axis=axis, keepdims=True)
    return [(z - np.log(np.exp(z).sum(axis=axis, keepdims=True))).astype(x.dtype, copy=False)]


def _infer_log_softmax(ins, attrs, ctx):
    x = ins[0]
    _float("log_softmax", x, "input")
    norm_axis(attrs.get("axis", -1), len(x.shape), "log_softmax")
    return [TensorType(x.shape, x.dtype)]


# ============================================================================ reductions
def _reduce_axes(name: str, attrs: dict, rank: int) -> tuple[int, ...]:
    axes = attrs.get("axes")
    if axes is None:
        return tuple(range(rank))
    axes = [axes] if isinstance(axes, int) else list(axes)
    norm = tuple(sorted(norm_axis(a, rank, name) for a in axes))
    check(len(set(norm)) == len(norm), f"{name}: repeated axes {list(axes)}")
    return norm


def _reduce(name: str, fn):
    """A reduction over static ``axes``, or over an ``axes`` input computed at run time: then the
    type is the ``shape`` attribute (the model's declared output shape) and the run checks the
    actual axes give exactly that shape (``noop_with_empty_axes`` as ONNX defines it)."""
    def infer(ins, attrs, ctx):
        x = ins[0]
        if name in ("reduce_mean", "reduce_l2", "reduce_log_sum_exp", "reduce_log_sum"):
            _float(name, x, "input")
        keep = bool(attrs.get("keepdims", True))
        if len(ins) == 2:
            shape = tuple(int(d) for d in attrs["shape"])
            check(ins[1].dtype == "int64" and len(ins[1].shape) <= 1, f"{name}: axes must be a 1-D int64 tensor")
            check(len(shape) == len(x.shape) if keep else len(shape) <= len(x.shape),
                  f"{name}: declared shape {list(shape)} does not fit input {list(x.shape)}")
            return [TensorType(shape, x.dtype)]
        axes = _reduce_axes(name, attrs, len(x.shape))
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
        return [TensorType(shape, x.dtype)]

    def compute(args, attrs):
        x = np.asarray(args[0])
        if len(args) == 2:
            axes = tuple(int(a) for a in np.asarray(args[1]).reshape(-1))
            if not axes and attrs.get("noop_with_empty_axes", False):
                out = x
            else:
                out = compute([x], dict(attrs, axes=axes or None))[0]
            check(out.shape == tuple(attrs["shape"]), f"{name}: axes {list(axes)} at run time give shape "
                  f"{list(out.shape)}, not the declared {list(attrs['shape'])}")
            return [out]
        axes = _reduce_axes(name, attrs, x.ndim)
        return [np.asarray(fn(x, axes, bool(attrs.get("keepdims", True)))).astype(x.dtype, copy=False)]

    def cost(ins, outs, attrs):
        return OpCost(0, ins[0].size, _nbytes(ins[:1]), _nbytes(outs))

    return OpDef(name, infer, compute, cost, "reduce", (1, 2))


def _mean(x, axes, keep):
    acc = np.float64 if x.dtype == np.float64 else np.float32
    return np.mean(x, axis=axes, keepdims=keep, dtype=acc)


def _sum(x, axes, keep):
    return np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)


def _extreme(x, lowest: bool):
    """The identity of max (lowest) or min over an empty set, as ONNX defines it: -inf/+inf, the
    integer type's min/max, False/True."""
    if x.dtype == np.bool_:
        return not lowest
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        return info.min if lowest else info.max
    return -np.inf if lowest else np.inf


def _max(x, axes, keep):
    return np.max(x, axis=axes, keepdims=keep, initial=_extreme(x, True))


def _min(x, axes, keep):
    return np.min(x, axis=axes, keepdims=keep, initial=_extreme(x, False))


def _prod(x, axes, keep):
    return np.prod(x, axis=axes, keepdims=keep, dtype=x.dtype)


def _l1(x, axes, keep):
    return np.sum(np.abs(x), axis=axes, keepdims=keep, dtype=x.dtype)


def _l2(x, axes, keep):
    return np.sqrt(np.sum(np.square(x, dtype=np.float64), axis=axes, keepdims=keep))


def _log_sum(x, axes, keep):
    with np.errstate(divide="ignore"):  # log(0) = -inf, as onnxruntime
        return np.log(np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype))


def _sum_square(x, axes, keep):
    return np.sum(np.square(x), axis=axes, keepdims=keep, dtype=x.dtype)


def _log_sum_exp(x, axes, keep):
    if any(x.shape[a] == 0 for a in axes):  # log(sum of nothing) = log(0) = -inf, as onnxruntime
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
        return np.full(shape, -np.inf, x.dtype)
    m = np.max(x, axis=axes, keepdims=True)
    out = np.log(np.sum(np.exp(x - m, dtype=np.float64), axis=axes, keepdims=True)) + m
    return out if keep else np.squeeze(out, axis=axes)


# ============================================================================ argmax / topk
def _arg_reduce(name: str, fn) -> OpDef:
    """argmax / argmin: int64 indices along one axis, the first (or last) on ties."""
    def infer(ins, attrs, ctx):
        x = ins[0]
        axis = norm_axis(attrs.get("axis", 0), len(x.shape), name)
        check(x.shape[axis] > 0, f"{name}: cannot reduce an empty axis")
        keep = bool(attrs.get("keepdims", True))
        shape = tuple(1 if i == axis else d for i, d in enumerate(x.shape) if keep or i != axis)
        return [TensorType(shape, "int64")]

    def compute(args, attrs):
        x = np.asarray(args[0])
        axis = norm_axis(attrs.get("axis", 0), x.ndim, name)
        if attrs.get("select_last_index", False):
            n = x.shape[axis]
            idx = n - 1 - fn(np.flip(x, axis=axis), axis=axis)
        else:
            idx = fn(x, axis=axis)
        if attrs.get("keepdims", True):
            idx = np.expand_dims(idx, axis)
        return [idx.astype(np.int64)]

    return OpDef(name, infer, compute, lambda i, o, a: OpCost(0, i[0].size, _nbytes(i), _nbytes(o)), "reduce", (1, 1))


def _topk_params(attrs, rank):
    check("k" in attrs, "topk: missing attribute 'k'")
    k = int(attrs["k"])
    axis = norm_axis(attrs.get("axis", -1), rank, "topk")
    return k, axis


def _infer_topk(ins, attrs, ctx):
    x = ins[0]
    k, axis = _topk_params(attrs, len(x.shape))
    check(0 <= k <= x.shape[axis], f"topk: k={k} is outside [0, {x.shape[axis]}] (axis {axis} of {list(x.shape)})")
    shape = tuple(k if i == axis else d for i, d in enumerate(x.shape))
    return [TensorType(shape, x.dtype), TensorType(shape, "int64")]


def _topk(args, attrs):
    x = np.asarray(args[0])
    k, axis = _topk_params(attrs, x.ndim)
    n = x.shape[axis]
    if attrs.get("largest", True):
        # Stable ascending sort of the reversed axis, read backwards: descending values with ties
        # broken by the lower index, as ORT does; works for every dtype (no negation overflow).
        order = np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable")
        idx = (n - 1 - np.flip(order, axis=axis))
    else:
        idx = np.argsort(x, axis=axis, kind="stable")
    idx = np.take(idx, np.arange(k), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)]


def _cost_topk(ins, outs, attrs):
    n = ins[0].size
    return OpCost(0, n * max(1, int(np.ceil(np.log2(max(2, int(attrs.get("k", 1))))))), _nbytes(ins), _nbytes(outs))


# ============================================================================ NMS
def _nms_params(attrs) -> tuple[int, float, float | None, int]:
    max_out = int(attrs.get("max_output_boxes_per_class", 0) or 0)
    iou = float(attrs.get("iou_threshold", 0.0) or 0.0)
    st = attrs.get("score_threshold")
    cpb = int(attrs.get("center_point_box", 0))
    check(max_out >= 0, f"non_max_suppression: max_output_boxes_per_class must be >= 0, got {max_out}")
    check(0.0 <= iou <= 1.0, f"non_max_suppression: iou_threshold must be in [0, 1], got {iou}")
    check(cpb in (0, 1), f"non_max_suppression: center_point_box must be 0 or 1, got {cpb}")
    return max_out, iou, (None if st is None else float(st)), cpb


def _infer_nms(ins, attrs, ctx):
    boxes, scores = ins[:2]
    check(len(ins) - 2 == len(attrs.get("runtime", ())),
          "non_max_suppression: one extra input per parameter named in 'runtime'")
    check(len(boxes.shape) == 3 and boxes.shape[2] == 4,
          f"non_max_suppression: boxes must be [B, N, 4], got {list(boxes.shape)}")
    check(len(scores.shape) == 3, f"non_max_suppression: scores must be [B, C, N], got {list(scores.shape)}")
    b, n, _ = boxes.shape
    check(scores.shape[0] == b and scores.shape[2] == n,
          f"non_max_suppression: scores {list(scores.shape)} do not match boxes {list(boxes.shape)} "
          f"(expected [{b}, C, {n}])")
    max_out, *_ = _nms_params(attrs)
    # Upper bound on the data-dependent row count: a class never selects more than its N boxes.
    return [TensorType((b * scores.shape[1] * min(max_out, n), 3), "int64")]


def _corners(boxes: np.ndarray, center: int) -> np.ndarray:
    """(N, 4) -> (N, 4) as (y_min, x_min, y_max, x_max) in float32."""
    b = boxes.astype(np.float32)
    if center:
        xc, yc, w, h = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
        hw, hh = w / np.float32(2), h / np.float32(2)
        return np.stack([yc - hh, xc - hw, yc + hh, xc + hw], axis=1)
    y0, x0, y1, x1 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    return np.stack([np.minimum(y0, y1), np.minimum(x0, x1), np.maximum(y0, y1), np.maximum(x0, x1)], axis=1)


def _iou(c: np.ndarray, i: int, js: np.ndarray) -> np.ndarray:
    """IoU of box i with boxes js; 0 wherever ORT treats the pair as not overlapping."""
    a, b = c[i], c[js]
    ih = np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0])
    iw = np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1])
    inter = np.where((ih > 0) & (iw > 0), ih * iw, np.float32(0))
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a + area_b - inter
    ok = (inter > 0) & (area_a > 0) & (area_b > 0) & (union > 0)
    return np.where(ok, inter / np.where(ok, union, np.float32(1)), np.float32(0))


def _nms_class(corners: np.ndarray, scores: np.ndarray, max_out: int, iou_t: float,
               score_t: float | None) -> list[int]:
    """Greedy selection for one (batch, class). ORT pops candidates by score and keeps one unless
    a kept box overlaps it by more than iou_t; dropping every box the newly kept one suppresses
    gives the same set and order, with at most max_out vectorised steps."""
    cand = np.arange(scores.shape[0]) if score_t is None else np.nonzero(scores > np.float32(score_t))[0]
    cand = cand[np.lexsort((cand, -scores[cand]))]  # score descending, ties to the lower index
    keep: list[int] = []
    while cand.size and len(keep) < max_out:
        top, rest = int(cand[0]), cand[1:]
        keep.append(top)
        cand = rest[_iou(corners, top, rest) <= np.float32(iou_t)]
    return keep


def _nms(args, attrs):
    boxes, scores = np.asarray(args[0]), np.asarray(args[1])
    if len(args) > 2:
        # parameters computed at run time (named by 'runtime'; the type's bound assumed every box)
        attrs = dict(attrs)
        for name, a in zip(attrs["runtime"], args[2:]):
            v = np.asarray(a).reshape(-1)
            check(v.size == 1, f"non_max_suppression: {name} must hold one value, got {v.size}")
            attrs[name] = v[0].item()
    max_out, iou_t, score_t, cpb = _nms_params(attrs)
    rows: list[tuple[int, int, int]] = []
    if max_out > 0:
        for bi in range(boxes.shape[0]):
            corners = _corners(boxes[bi], cpb)
            for ci in range(scores.shape[1]):
                keep = _nms_class(corners, scores[bi, ci].astype(np.float32), max_out, iou_t, score_t)
                rows.extend((bi, ci, i) for i in keep)
    return [np.asarray(rows, dtype=np.int64).reshape(-1, 3)]


def _cost_nms(ins, outs, attrs):
    b, n, _ = ins[0].shape
    c = ins[1].shape[1]
    ins = ins[:2]
    # per class: a sort (n log n), then each kept box against the candidates left (~10 flops an
    # IoU); at most max_output_boxes_per_class boxes are kept (``_nms_class``), every box when it is
    # given at run time
    runtime = "max_output_boxes_per_class" in attrs.get("runtime", ())
    kept = n if runtime else min(n, _nms_params(attrs)[0])
    flops = b * c * (n * max(1, int(np.log2(max(n, 2)))) + 10 * n * kept)
    return OpCost(0, flops, _nbytes(ins), _nbytes(outs))


# ============================================================================ einsum
def _einsum_term(eq: str, term: str, where: str) -> tuple[list[str], bool]:
    """A term's labels in order ('...' kept as one entry) and whether it has an ellipsis."""
    ell = term.count("...")
    rest = term.replace("...", "")
    check(ell <= 1 and all(ch.isascii() and ch.isalpha() for ch in rest),
          f"einsum: bad {where} term {term!r} in equation {eq!r} (letters a-z, A-Z and at most one '...')")
    head, _, tail = term.partition("...")
    return list(head) + (["..."] + list(tail) if ell else []), bool(ell)


def _einsum_plan(eq: Any, shapes: Sequence[tuple]) -> tuple[str, tuple[int, ...], int]:
    """(the explicit equation numpy runs, the output shape, the size of the whole index space).
    Implicit outputs are the ellipsis then the labels used once, in ASCII order (numpy's rule).
    A label's sizes must agree across operands, except that size 1 broadcasts (numpy, onnxruntime)."""
    check(isinstance(eq, str), f"einsum: equation must be a string, got {eq!r}")
    lhs, arrow, rhs = eq.replace(" ", "").partition("->")
    terms = lhs.split(",")
    check(len(terms) == len(shapes),
          f"einsum: equation {eq!r} has {len(terms)} operand terms but {len(shapes)} inputs are given")
    sizes: dict[str, int] = {}
    owner: dict[str, int] = {}  # the operand a label's size came from
    counts: dict[str, int] = {}
    ells: list[tuple[int, ...]] = []
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        labels, ell = _einsum_term(eq, term, f"operand {i}")
        n_ell = len(shape) - (len(labels) - ell)
        check(n_ell >= 0 and (ell or n_ell == 0),
              f"einsum: operand {i} term {term!r} has {len(labels) - ell} labels but the input has rank {len(shape)}")
        dims = list(shape)
        if ell:
            at = labels.index("...")
            ells.append(tuple(dims[at:at + n_ell]))
            dims = dims[:at] + [None] + dims[at + n_ell:]
        seen: dict[str, int] = {}
        for lab, d in zip(labels, dims):
            if lab == "...":
                continue
            check(seen.setdefault(lab, d) == d,
                  f"einsum: label {lab!r} repeats in operand {i} with sizes {seen[lab]} and {d}")
            old = sizes.get(lab)
            check(old is None or old == d or 1 in (old, d),
                  f"einsum: label {lab!r} has size {old} in operand {owner.get(lab)} but {d} in operand {i} ({eq!r})")
            if old in (None, 1):
                sizes[lab], owner[lab] = d, i
        for lab in labels:
            counts[lab] = counts.get(lab, 0) + 1
    try:
        ell_shape = broadcast_shapes(*ells) if ells else ()
    except Exception:
        check(False, f"einsum: the '...' dimensions {[list(e) for e in ells]} do not broadcast ({eq!r})")
        raise
    if arrow:
        out, out_ell = _einsum_term(eq, rhs, "output")
        for lab in out:
            check(lab == "..." or lab in sizes, f"einsum: output label {lab!r} is in no operand ({eq!r})")
        check(len(set(out)) == len(out), f"einsum: output term {rhs!r} repeats a label ({eq!r})")
        check(out_ell or not ell_shape,
              f"einsum: the operands have '...' dimensions {list(ell_shape)} but the output term {rhs!r} has no '...'")
    else:
        out = (["..."] if ells else []) + sorted(lab for lab, n in counts.items() if n == 1 and lab != "...")
    shape: list[int] = []
    for lab in out:
        shape += list(ell_shape) if lab == "..." else [sizes[lab]]
    space = int(np.prod(list(sizes.values()) + list(ell_shape), dtype=np.int64))
    return f"{','.join(terms)}->{''.join(out)}", tuple(shape), space


def _infer_einsum(ins, attrs, ctx):
    check(len({t.dtype for t in ins}) == 1,
          f"einsum: inputs have different dtypes {', '.join(t.dtype for t in ins)}")
    check("equation" in attrs, "einsum: missing attribute 'equation'")
    _, shape, _ = _einsum_plan(attrs["equation"], [t.shape for t in ins])
    return [TensorType(shape, ins[0].dtype)]


def _einsum(args, attrs):
    xs = [np.asarray(a) for a in args]
    eq, _, _ = _einsum_plan(attrs["equation"], [x.shape for x in xs])
    if low_precision(xs[0].dtype):  # sums in float32, one rounding (numpy has no bfloat16 einsum)
        return [np.einsum(eq, *(x.astype(np.float32) for x in xs), optimize=len(xs) > 1).astype(xs[0].dtype)]
    # optimize routes contractions through BLAS (tensordot); a lone operand is a sum or a diagonal
    return [np.array(np.einsum(eq, *xs, optimize=len(xs) > 1), dtype=xs[0].dtype)]


def _cost_einsum(ins, outs, attrs):
    _, _, space = _einsum_plan(attrs["equation"], [t.shape for t in ins])
    if len(ins) == 1:
        return OpCost(0, ins[0].size, _nbytes(ins), _nbytes(outs))
    # evaluated naively, every point of the index space multiplies the operands (n-1 MACs)
    macs = (len(ins) - 1) * space
    return OpCost(macs, 2 * macs, _nbytes(ins), _nbytes(outs))


# ============================================================================ cumsum
def _infer_cumsum(ins, attrs, ctx):
    x = ins[0]
    check(x.dtype != "bool", "cumsum: input must be numeric, got bool")
    if len(ins) == 2:  # the axis computed at run time: a scalar integer (the shape is x's either way)
        check(ins[1].size == 1 and np.issubdtype(np.dtype(ins[1].dtype), np.integer),
              f"cumsum: the axis input must be one integer, got {ins[1]}")
        return [TensorType(x.shape, x.dtype)]
    check("axis" in attrs, "cumsum: missing attribute 'axis'")
    norm_axis(attrs["axis"], len(x.shape), "cumsum")
    return [TensorType(x.shape, x.dtype)]


def _cumsum(args, attrs):
    return _scan(args, attrs, np.cumsum, 0)


def _cumprod(args, attrs):
    return _scan(args, attrs, np.cumprod, 1)


def _scan(args, attrs, fn, identity):
    """cumsum / cumprod: inclusive or exclusive (starting from the identity), forward or reversed."""
    x = np.asarray(args[0])
    axis = int(np.asarray(args[1]).reshape(-1)[0]) if len(args) > 1 else attrs["axis"]
    axis = norm_axis(axis, x.ndim, "cumsum")
    rev = bool(attrs.get("reverse", False))
    xs = np.flip(x, axis) if rev else x
    y = fn(xs, axis=axis, dtype=x.dtype)
    if attrs.get("exclusive", False) and x.shape[axis]:
        # y[i] = x[0] op ... op x[i-1], in the same order as the inclusive scan
        first = np.full_like(np.take(y, [0], axis=axis), identity)
        y = np.concatenate([first, np.take(y, range(x.shape[axis] - 1), axis=axis)], axis=axis)
    return [np.ascontiguousarray(np.flip(y, axis) if rev else y)]


# ============================================================================ lrn
def _lrn_params(attrs: dict) -> tuple[int, float, float, float]:
    check("size" in attrs, "lrn: missing attribute 'size'")
    size = attrs["size"]
    check(isinstance(size, (int, np.integer)) and not isinstance(size, bool) and size >= 1,
          f"lrn: size must be an int >= 1, got {size!r}")
    return int(size), float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75)), float(attrs.get("bias", 1.0))


def _infer_lrn(ins, attrs, ctx):
    x = ins[0]
    check(len(x.shape) >= 3, f"lrn: input must have rank >= 3 (N, C, spatial...), got {list(x.shape)}")
    _float("lrn", x, "input")
    _lrn_params(attrs)
    return [TensorType(x.shape, x.dtype)]


def _lrn(args, attrs):
    """ONNX LRN: the sum of squares runs over channels [c - floor((size-1)/2), c + ceil((size-1)/2)]
    clipped to [0, C), then y = x / (bias + alpha / size * sum) ** beta."""
    x = np.asarray(args[0])
    size, alpha, beta, bias = _lrn_params(attrs)
    c = x.shape[1]
    lo = (size - 1) // 2
    sq = np.square(x.astype(np.float64))
    sqp = np.pad(sq, [(0, 0), (lo, size - 1 - lo)] + [(0, 0)] * (x.ndim - 2))
    total = sum(sqp[:, i:i + c] for i in range(size))
    return [(x / (bias + alpha / size * total) ** beta).astype(x.dtype)]


def _cost_lrn(ins, outs, attrs):
    size = _lrn_params(attrs)[0]
    return elementwise_cost(size + 8)(ins, outs, attrs)


# ============================================================================ hardmax
def _infer_hardmax(ins, attrs, ctx):
    x = ins[0]
    _float("hardmax", x, "input")
    axis = norm_axis(attrs.get("axis", -1), len(x.shape), "hardmax")
    check(x.shape[axis] > 0, "hardmax: cannot reduce an empty axis")
    return [TensorType(x.shape, x.dtype)]


def _hardmax(args, attrs):
    x = np.asarray(args[0])
    axis = norm_axis(attrs.get("axis", -1), x.ndim, "hardmax")
    out = np.zeros_like(x)
    np.put_along_axis(out, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
    return [out]


DEFS = [
    OpDef("conv2d", _infer_conv2d, _conv2d, _cost_conv2d, "conv", (2, 3)),
    OpDef("conv_transpose2d", _infer_convt_nd("conv_transpose2d", 2), _conv_transpose_nd("conv_transpose2d", 2),
          _cost_convt, "conv", (2, 3)),
    OpDef("conv_transpose3d", _infer_convt_nd("conv_transpose3d", 3), _conv_transpose_nd("conv_transpose3d", 3),
          _cost_convt, "conv", (2, 3)),
    OpDef("matmul", _infer_matmul, _matmul, _cost_matmul, "gemm", (2, 2)),
    OpDef("qlinear_matmul", _infer_qlinear_matmul, _qlinear_matmul, _cost_qlinear_matmul, "gemm", (8, 8)),
    OpDef("dense", _infer_dense, _dense, _cost_dense, "gemm", (2, 3)),
    OpDef("batch_matmul", _infer_bmm, _bmm, _cost_bmm, "gemm", (2, 2)),
    OpDef("gemm", _infer_gemm, _gemm, _cost_gemm, "gemm", (2, 3)),
    OpDef("bias_add", _infer_bias_add, _bias_add, elementwise_cost(1), "elementwise", (2, 2)),
    OpDef("batch_norm", _infer_batch_norm, _batch_norm, elementwise_cost(2), "norm", (5, 5)),
    OpDef("max_pool2d", _infer_pool("max_pool2d"), _max_pool, _cost_pool(0), "pool", (1, 1)),
    OpDef("avg_pool2d", _infer_pool("avg_pool2d"), _avg_pool, _cost_pool(1), "pool", (1, 1)),
    OpDef("max_pool2d_indices", _infer_pool_indices, _max_pool_indices, _cost_pool(0), "other", (1, 1)),
    OpDef("global_avg_pool2d", _infer_gap, _gap,
          lambda i, o, a: OpCost(0, i[0].size + o[0].size, _nbytes(i), _nbytes(o)), "pool", (1, 1)),
    OpDef("conv3d", _infer_conv3d, _conv3d, _cost_conv3d, "conv", (2, 3)),
    OpDef("max_pool3d", _infer_pool3d("max_pool3d"), _max_pool3d, _cost_pool3d(0), "pool", (1, 1)),
    OpDef("avg_pool3d", _infer_pool3d("avg_pool3d"), _avg_pool3d, _cost_pool3d(1), "pool", (1, 1)),
    OpDef("resize", _infer_resize, _resize, _cost_resize, "other", (1, 3)),
    OpDef("softmax", _infer_softmax, _softmax, elementwise_cost(5), "softmax", (1, 1)),
    OpDef("layer_norm", _infer_layer_norm, _layer_norm, elementwise_cost(8), "norm", (2, 3)),
    OpDef("instance_norm", _infer_instance_norm, _instance_norm, elementwise_cost(8), "norm", (3, 3)),
    _reduce("reduce_mean", _mean),
    _reduce("reduce_sum", _sum),
    _reduce("reduce_max", _max),
    _reduce("reduce_min", _min),
    _reduce("reduce_prod", _prod),
    _reduce("reduce_l1", _l1),
    _reduce("reduce_l2", _l2),
    _reduce("reduce_sum_square", _sum_square),
    _reduce("reduce_log_sum_exp", _log_sum_exp),
    _reduce("reduce_log_sum", _log_sum),
    OpDef("log_softmax", _infer_log_softmax, _log_softmax, elementwise_cost(6), "softmax", (1, 1)),
    _arg_reduce("argmax", np.argmax),
    OpDef("topk", _infer_topk, _topk, _cost_topk, "other", (1, 1)),
    OpDef("non_max_suppression", _infer_nms, _nms, _cost_nms, "other", (2, 5)),
    _arg_reduce("argmin", np.argmin),
    OpDef("einsum", _infer_einsum, _einsum, _cost_einsum, "gemm", (1, 1 << 30)),
    OpDef("cumsum", _infer_cumsum, _cumsum, elementwise_cost(1), "reduce", (1, 2)),
    OpDef("cumprod", _infer_cumsum, _cumprod, elementwise_cost(1), "reduce", (1, 2)),
    OpDef("lrn", _infer_lrn, _lrn, _cost_lrn, "norm", (1, 1)),
    OpDef("hardmax", _infer_hardmax, _hardmax, elementwise_cost(1), "softmax", (1, 1)),
]
