"""ONNX ops that import as compositions of canonical ops: Attention (opset 23+), RMSNormalization,
RotaryEmbedding and LayerNormalization's Mean/InvStdDev outputs.

Why compositions, not new IR ops: their compute is matrix products and elementwise math the IR
already has, so the accelerator targets offload and cost the products (batch_matmul) with no new
workload kind, and shape inference, the numpy reference and the FLOP/MAC counts are those of the
canonical ops. Each follows the op's ONNX function body (its order of operations), so results match
the spec's reference. Static parts (a causal mask, a sliding window) fold to constants.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import Value
from .context import Context
from .proto import np_dtype


class _Build:
    """Emits the temporaries of one composite node under fresh names derived from its output."""

    def __init__(self, c: Context):
        self.c = c
        self.k = 0

    def op(self, op: str, ins: list[Value], attrs: dict | None = None, name: str | None = None) -> Value:
        self.k += 1
        names = [name] if name else self.c.tmp(f"{op}{self.k}")
        return self.c.emit(op, ins, attrs, out_names=names)[0]

    def const(self, data, dtype=None) -> Value:
        self.k += 1
        arr = np.asarray(data) if dtype is None else np.asarray(data).astype(dtype)
        # these constants meet the model's float64 tensors in where/add: keep them float64
        return self.c.graph.add_const(arr, f"{self.c.node.output[0]}_c{self.k}", narrow=False)

    def out_name(self, i: int) -> str | None:
        outs = self.c.node.output
        return outs[i] if i < len(outs) and outs[i] else None


def _float_dtype(c: Context, v: Value) -> np.dtype:
    dt = np.dtype(v.dtype)
    if not (np.issubdtype(dt, np.floating) or dt.name == "bfloat16"):
        raise c.fail(f"input type {v.dtype} is not supported; only float inputs are")
    return dt


# ---------------------------------------------------------------------------- Attention

def _to_heads(b: _Build, x: Value, heads: int, what: str) -> Value:
    """(B, S, H*D) -> (B, H, S, D)."""
    bsz, s, hidden = x.shape
    if hidden % heads:
        raise b.c.fail(f"{what} hidden size {hidden} is not divisible by {heads} heads")
    x = b.op("reshape", [x], {"shape": (bsz, s, heads, hidden // heads)})
    return b.op("transpose", [x], {"perm": (0, 2, 1, 3)})


def _bool_to_bias(b: _Build, m: Value, dt) -> Value:
    """A boolean mask (True = attend) as an additive bias: 0 where True, -inf where False."""
    return b.op("where", [m, b.const(0, dt), b.const(-np.inf, dt)])


def _attention_bias(b: _Build, a: dict, dt, bsz: int, sq: int, skv: int, past: int,
                    mask: Value | None, nonpad: Value | None) -> Value | None:
    """The additive bias over (B or 1, 1 or H, Sq, Skv), in the spec's order: the mask (padded
    with -inf to Skv), the causal frontier, the sliding window, then the padding of nonpad_kv_seqlen.
    None when nothing masks."""
    c = b.c
    causal = bool(int(a.get("is_causal", 0)))
    left, right = int(a.get("left_window_size", -1)), int(a.get("right_window_size", -1))
    bias = None
    if mask is not None:
        bias = _bool_to_bias(b, mask, dt) if mask.dtype == "bool" else mask
        if bias.dtype != np.dtype(dt).name:
            bias = b.op("cast", [bias], {"dtype": np.dtype(dt).name})
        pad = skv - bias.shape[-1]
        if pad < 0:
            raise c.fail(f"attn_mask's last dimension {bias.shape[-1]} exceeds the {skv} keys")
        if pad:
            block = np.full(tuple(bias.shape[:-1]) + (pad,), -np.inf, dtype=dt)
            bias = b.op("concat", [bias, b.const(block)], {"axis": len(bias.shape) - 1})
    i = np.arange(sq).reshape(sq, 1)
    j = np.arange(skv).reshape(1, skv)
    static = np.zeros((sq, skv), bool)  # True = masked
    per_batch = nonpad is not None and past == 0
    if causal and not per_batch:
        static |= j > i + past
    if (left >= 0 or right >= 0) and not per_batch:
        diff = (i + past) - j
        static |= (diff > left) if left >= 0 else False
        static |= (-diff > right) if right >= 0 else False
    if static.any():
        sb = b.const(np.where(static, -np.inf, 0).astype(dt))
        bias = sb if bias is None else b.op("add", [bias, sb])
    if nonpad is not None:
        if past:
            raise c.fail("nonpad_kv_seqlen together with past_key/past_value is not supported (the spec "
                         "forbids it)")
        lens = b.op("reshape", [nonpad], {"shape": (bsz, 1, 1)})
        if lens.dtype != "int64":
            lens = b.op("cast", [lens], {"dtype": "int64"})
        # key j of batch row r is padding when j >= nonpad[r]
        keep = b.op("less", [b.const(np.arange(skv, dtype=np.int64).reshape(1, 1, skv)), lens])  # (B,1,Skv)
        if causal or left >= 0 or right >= 0:
            # the frontier aligned bottom-right per row: query i sees key j iff j <= i + nonpad[r] - Sq
            off = (j - i + sq).astype(np.int64)[None]  # (1, Sq, Skv)
            if causal:
                keep = b.op("and", [keep, b.op("less_equal", [b.const(off), lens])])
            if left >= 0:  # (i + nonpad - Sq) - j <= left
                keep = b.op("and", [keep, b.op("less_equal", [lens, b.const(off + left)])])
            if right >= 0:  # j - (i + nonpad - Sq) <= right
                keep = b.op("and", [keep, b.op("less_equal", [b.const(off - right), lens])])
        pb = _bool_to_bias(b, keep, dt)
        pb = b.op("unsqueeze", [pb], {"axes": (1,)})  # (B, 1, Sq or 1, Skv)
        bias = pb if bias is None else b.op("add", [bias, pb])
    return bias


def _attention(c: Context):
    b = _Build(c)
    q, k, v = c.need(0), c.need(1), c.need(2)
    mask, past_k, past_v, nonpad = c.inp(3), c.inp(4), c.inp(5), c.inp(6)
    a = c.attrs
    dt = _float_dtype(c, q)
    if (past_k is None) != (past_v is None):
        raise c.fail("past_key and past_value must be given together")
    if not len(q.shape) == len(k.shape) == len(v.shape) or len(q.shape) not in (3, 4):
        raise c.fail(f"Q, K and V must all be 3-D or all 4-D, got shapes {list(q.shape)}, "
                     f"{list(k.shape)}, {list(v.shape)}")
    three_d = len(q.shape) == 3
    if three_d:
        if "q_num_heads" not in a or "kv_num_heads" not in a:
            raise c.fail("3-D Q, K, V need the q_num_heads and kv_num_heads attributes")
        q4 = _to_heads(b, q, int(a["q_num_heads"]), "Q")
        k4 = _to_heads(b, k, int(a["kv_num_heads"]), "K")
        v4 = _to_heads(b, v, int(a["kv_num_heads"]), "V")
    else:
        q4, k4, v4 = q, k, v
    bsz, hq, sq, d = q4.shape
    past = 0
    if past_k is not None:
        past = past_k.shape[2]
        k4 = b.op("concat", [past_k, k4], {"axis": 2}, name=b.out_name(1))
        v4 = b.op("concat", [past_v, v4], {"axis": 2}, name=b.out_name(2))
        # The op says which tensors are its KV cache, whatever the model names them
        # (partition/onnx/kv_cache.py reads it).
        k4.producer.meta["kv_cache"] = "key"
        v4.producer.meta["kv_cache"] = "value"
    present_k, present_v = k4, v4
    hk, skv = k4.shape[1], k4.shape[2]
    if hq != hk:  # grouped-query attention: each K/V head serves hq/hk query heads
        if hq % hk or v4.shape[1] != hk:
            raise c.fail(f"{hq} query heads cannot share {hk} key/value heads")
        reps = hq // hk
        k4 = _repeat_heads(b, k4, reps)
        v4 = _repeat_heads(b, v4, reps)
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    # The spec scales Q and K by sqrt(scale) each before the product (numerically kinder than one
    # scale of the product); done the same way so results match its reference.
    root = b.const(np.sqrt(np.float64(scale)).astype(dt))
    qk = b.op("batch_matmul", [b.op("mul", [q4, root]), b.op("mul", [k4, root])], {"transpose_b": True})
    softcap = float(a.get("softcap", 0.0))
    if softcap > 0:
        capv = b.const(np.asarray(softcap, dt))
        qk = b.op("mul", [b.op("tanh", [b.op("div", [qk, capv])]), capv])
    bias = _attention_bias(b, a, dt, bsz, sq, skv, past, mask, nonpad)
    with_bias = qk if bias is None else b.op("add", [qk, bias])
    sm_in = with_bias
    prec = a.get("softmax_precision")
    if prec:
        sm_in = b.op("cast", [with_bias], {"dtype": np_dtype(int(prec)).name})
    probs = b.op("softmax", [sm_in], {"axis": -1})
    if bias is not None:  # a row with every key masked gives 0, not 0/0
        dead = b.op("isinf", [b.op("reduce_max", [bias], {"axes": (len(bias.shape) - 1,), "keepdims": True})],
                    {"detect_negative": 1, "detect_positive": 0})
        # A constant bias (causal, sliding window, a constant mask) that masks no whole row needs no
        # guard: leaving it out keeps the two products and the softmax one accelerator region
        # (where is a host op).
        if not (dead.is_const and not np.any(dead.data)):
            probs = b.op("where", [dead, b.const(np.asarray(0, probs.dtype)), probs])
    if probs.dtype != np.dtype(dt).name:
        probs_dt = b.op("cast", [probs], {"dtype": np.dtype(dt).name})
    else:
        probs_dt = probs
    mode = int(a.get("qk_matmul_output_mode", 0))
    qk_out = {2: with_bias, 3: probs}.get(mode, qk)
    y = b.op("batch_matmul", [probs_dt, v4], name=None if three_d else b.out_name(0))
    if three_d:
        y = b.op("transpose", [y], {"perm": (0, 2, 1, 3)})
        y = b.op("reshape", [y], {"shape": (bsz, sq, hq * v4.shape[3])}, name=b.out_name(0))
    if qk_out.dtype != np.dtype(dt).name:
        qk_out = b.op("cast", [qk_out], {"dtype": np.dtype(dt).name})
    return [y, present_k, present_v, qk_out]


def _repeat_heads(b: _Build, x: Value, reps: int) -> Value:
    """(B, H, S, D) -> (B, H*reps, S, D), each head repeated reps times in place (np.repeat)."""
    bsz, h, s, d = x.shape
    x = b.op("unsqueeze", [x], {"axes": (2,)})
    x = b.op("expand", [x], {"shape": (bsz, h, reps, s, d)})
    return b.op("reshape", [x], {"shape": (bsz, h * reps, s, d)})


# ---------------------------------------------------------------------------- normalizations

def _stash(c: Context, x: Value) -> str:
    """The dtype the statistics are computed in (stash_type, float32 by default)."""
    return np_dtype(int(c.attrs.get("stash_type", 1))).name


def _norm_axes(c: Context, x: Value) -> tuple[int, ...]:
    rank = len(x.shape)
    axis = int(c.attrs.get("axis", -1))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise c.fail(f"axis {c.attrs.get('axis')} is out of range for rank {rank}")
    return tuple(range(axis, rank))


def _rms_norm(c: Context):
    """The spec's function body: in stash_type, x / sqrt(mean(x^2) + epsilon), cast back, * scale."""
    b = _Build(c)
    x, scale = c.need(0), c.need(1)
    _float_dtype(c, x)
    axes = _norm_axes(c, x)
    st = _stash(c, x)
    xu = x if x.dtype == st else b.op("cast", [x], {"dtype": st})
    ms = b.op("reduce_mean", [b.op("mul", [xu, xu])], {"axes": axes, "keepdims": True})
    eps = b.const(np.asarray(float(c.attrs.get("epsilon", 1e-5)), st))
    # the body's Reciprocal as 1 / x (the same correctly rounded quotient): div is an op the
    # accelerator presets offload, reciprocal is not, so the whole norm can be one region
    inv = b.op("div", [b.const(np.asarray(1, st)), b.op("sqrt", [b.op("add", [ms, eps])])])
    normed = b.op("mul", [xu, inv])
    if normed.dtype != x.dtype:
        normed = b.op("cast", [normed], {"dtype": x.dtype})
    if scale.dtype != x.dtype:
        scale = b.op("cast", [scale], {"dtype": x.dtype})
    return [b.op("mul", [normed, scale], name=b.out_name(0))]


def _layer_norm_stats(c: Context, b: _Build, x: Value) -> tuple[Value, Value]:
    """Mean and InvStdDev (keepdims over [axis, rank)) in stash_type, as the spec's body has them."""
    axes = _norm_axes(c, x)
    st = _stash(c, x)
    xu = x if x.dtype == st else b.op("cast", [x], {"dtype": st})
    mean = b.op("reduce_mean", [xu], {"axes": axes, "keepdims": True}, name=b.out_name(1))
    dev = b.op("sub", [xu, mean])
    var = b.op("reduce_mean", [b.op("mul", [dev, dev])], {"axes": axes, "keepdims": True})
    eps = b.const(np.asarray(float(c.attrs.get("epsilon", 1e-5)), st))
    inv = b.op("reciprocal", [b.op("sqrt", [b.op("add", [var, eps])])], name=b.out_name(2))
    return mean, inv


def layer_norm_with_stats(c: Context, y: list[Value]) -> list[Value]:
    """LayerNormalization's optional Mean and InvStdDev outputs next to its Y."""
    b = _Build(c)
    mean, inv = _layer_norm_stats(c, b, c.need(0))
    return [y[0], mean, inv]


# ---------------------------------------------------------------------------- RotaryEmbedding

def _rotary(c: Context):
    """RotaryEmbedding (opset 23): the first rotary_embedding_dim features of each head rotated by
    the cos/sin caches (gathered by position_ids when given), halves or interleaved pairs."""
    b = _Build(c)
    x, cos, sin, pos = c.need(0), c.need(1), c.need(2), c.inp(3)
    a = c.attrs
    _float_dtype(c, x)
    interleaved = bool(int(a.get("interleaved", 0)))
    if len(x.shape) == 4:  # (B, H, S, D) -> (B, S, H, D)
        bsz, heads, s, d = x.shape
        xs = b.op("transpose", [x], {"perm": (0, 2, 1, 3)})
    elif len(x.shape) == 3:
        bsz, s, hidden = x.shape
        heads = int(a.get("num_heads", 0))
        if heads <= 0 or hidden % heads:
            raise c.fail(f"3-D input of hidden size {hidden} needs num_heads dividing it, got {heads}")
        d = hidden // heads
        xs = b.op("reshape", [x], {"shape": (bsz, s, heads, d)})
    else:
        raise c.fail(f"input must be 3-D or 4-D, got shape {list(x.shape)}")
    rd = int(a.get("rotary_embedding_dim", 0)) or d
    if rd > d or rd % 2:
        raise c.fail(f"rotary_embedding_dim {rd} must be even and at most the head size {d}")
    if pos is not None:
        cos = b.op("gather", [cos, pos], {"axis": 0})
        sin = b.op("gather", [sin, pos], {"axis": 0})
    half = rd // 2
    if tuple(cos.shape) != (bsz, s, half) and tuple(cos.shape[-2:]) != (s, half):
        raise c.fail(f"cos/sin caches give shape {list(cos.shape)}, expected [{bsz}, {s}, {half}]")
    cos = b.op("unsqueeze", [cos], {"axes": (len(cos.shape) - 1,)})  # (B, S, 1, half)
    sin = b.op("unsqueeze", [sin], {"axes": (len(sin.shape) - 1,)})
    rot = xs if rd == d else b.op("slice", [xs], {"starts": (0,), "ends": (rd,), "axes": (3,), "steps": None})
    if interleaved:
        x1 = b.op("slice", [rot], {"starts": (0,), "ends": (rd,), "axes": (3,), "steps": (2,)})
        x2 = b.op("slice", [rot], {"starts": (1,), "ends": (rd,), "axes": (3,), "steps": (2,)})
    else:
        x1 = b.op("slice", [rot], {"starts": (0,), "ends": (half,), "axes": (3,), "steps": None})
        x2 = b.op("slice", [rot], {"starts": (half,), "ends": (rd,), "axes": (3,), "steps": None})
    r1 = b.op("sub", [b.op("mul", [x1, cos]), b.op("mul", [x2, sin])])
    r2 = b.op("add", [b.op("mul", [x2, cos]), b.op("mul", [x1, sin])])
    if interleaved:  # pairs (r1[i], r2[i]) back in place
        r = b.op("concat", [b.op("unsqueeze", [r1], {"axes": (4,)}), b.op("unsqueeze", [r2], {"axes": (4,)})],
                 {"axis": 4})
        r = b.op("reshape", [r], {"shape": (bsz, s, heads, rd)})
    else:
        r = b.op("concat", [r1, r2], {"axis": 3})
    if rd < d:
        rest = b.op("slice", [xs], {"starts": (rd,), "ends": (d,), "axes": (3,), "steps": None})
        r = b.op("concat", [r, rest], {"axis": 3})
    if len(x.shape) == 4:
        return [b.op("transpose", [r], {"perm": (0, 2, 1, 3)}, name=b.out_name(0))]
    return [b.op("reshape", [r], {"shape": tuple(x.shape)}, name=b.out_name(0))]


# ---------------------------------------------------------------------------- more normalizations

def _lp_norm(c: Context):
    """LpNormalization: x / ||x||_p along one axis (p 1 or 2); a zero norm gives 0, as onnxruntime."""
    b = _Build(c)
    x = c.need(0)
    _float_dtype(c, x)
    p = int(c.attrs.get("p", 2))
    if p not in (1, 2):
        raise c.fail(f"p={p} is not supported (only 1 and 2, as the spec defines)")
    rank = len(x.shape)
    axis = int(c.attrs.get("axis", -1))
    axis = axis + rank if axis < 0 else axis
    norm = b.op("reduce_l2" if p == 2 else "reduce_l1", [x], {"axes": (axis,), "keepdims": True})
    zero = b.op("equal", [norm, b.const(np.asarray(0, x.dtype))])
    q = b.op("div", [x, norm])
    return [b.op("where", [zero, b.const(np.asarray(0, x.dtype)), q], name=b.out_name(0))]


def _group_norm(c: Context):
    """GroupNormalization: statistics per (N, group) in stash_type; scale/bias per channel (opset 21)
    or per group (opset 18, later deprecated)."""
    b = _Build(c)
    x, scale, bias = c.need(0), c.need(1), c.need(2)
    _float_dtype(c, x)
    if "num_groups" not in c.attrs:
        raise c.fail("missing attribute 'num_groups'")
    g = int(c.attrs["num_groups"])
    n, ch = x.shape[0], x.shape[1]
    if g <= 0 or ch % g:
        raise c.fail(f"num_groups {g} does not divide the {ch} channels")
    st = _stash(c, x) if c.opset >= 21 else x.dtype
    xu = x if x.dtype == st else b.op("cast", [x], {"dtype": st})
    grouped = b.op("reshape", [xu], {"shape": (n, g, x.type.size // (n * g))})
    mean = b.op("reduce_mean", [grouped], {"axes": (2,), "keepdims": True})
    dev = b.op("sub", [grouped, mean])
    var = b.op("reduce_mean", [b.op("mul", [dev, dev])], {"axes": (2,), "keepdims": True})
    eps = b.const(np.asarray(float(c.attrs.get("epsilon", 1e-5)), st))
    normed = b.op("div", [dev, b.op("sqrt", [b.op("add", [var, eps])])])
    normed = b.op("reshape", [normed], {"shape": tuple(x.shape)})
    if normed.dtype != x.dtype:
        normed = b.op("cast", [normed], {"dtype": x.dtype})
    per = (1, ch) + (1,) * (len(x.shape) - 2)
    if scale.shape == (g,) and g != ch:  # opset 18: one scale per group
        scale = b.op("reshape", [b.op("expand", [b.op("reshape", [scale], {"shape": (g, 1)})],
                                      {"shape": (g, ch // g)})], {"shape": (ch,)})
        bias = b.op("reshape", [b.op("expand", [b.op("reshape", [bias], {"shape": (g, 1)})],
                                     {"shape": (g, ch // g)})], {"shape": (ch,)})
    s = b.op("reshape", [scale], {"shape": per})
    t = b.op("reshape", [bias], {"shape": per})
    return [b.op("add", [b.op("mul", [normed, s]), t], name=b.out_name(0))]


def _mvn(c: Context):
    """MeanVarianceNormalization: (x - mean) / sqrt(mean((x - mean)^2)) over axes (default 0, 2, 3);
    the spec's body adds 1e-9 under the root."""
    b = _Build(c)
    x = c.need(0)
    _float_dtype(c, x)
    rank = len(x.shape)
    axes = tuple(sorted(int(a) + rank if int(a) < 0 else int(a) for a in c.attrs.get("axes", (0, 2, 3))))
    mean = b.op("reduce_mean", [x], {"axes": axes, "keepdims": True})
    sq_mean = b.op("reduce_mean", [b.op("mul", [x, x])], {"axes": axes, "keepdims": True})
    var = b.op("sub", [sq_mean, b.op("mul", [mean, mean])])
    std = b.op("sqrt", [b.op("add", [var, b.const(np.asarray(1e-9, x.dtype))])])
    return [b.op("div", [b.op("sub", [x, mean]), std], name=b.out_name(0))]


def _swiglu(c: Context):
    """SwiGLU (opset 28): Swish_alpha(A) * B, A and B of one shape."""
    b = _Build(c)
    gate, val = c.need(0), c.need(1)
    if gate.shape != val.shape:
        raise c.fail(f"A and B must have one shape, got {list(gate.shape)} and {list(val.shape)}")
    sw = b.op("swish", [gate], {"alpha": float(c.attrs.get("alpha", 1.0))})
    return [b.op("mul", [sw, val], name=b.out_name(0))]


def _dynamic_quantize(c: Context):
    """DynamicQuantizeLinear: uint8 with scale = (max(x, 0) - min(x, 0)) / 255 and zero point
    round(-min / scale) clamped to [0, 255] (ties to even), then QuantizeLinear with them."""
    b = _Build(c)
    x = c.need(0)
    if x.dtype != "float32":
        raise c.fail(f"input type {x.dtype} is not supported; the spec defines float32 only")
    zero = b.const(np.float32(0))
    lo = b.op("min", [b.op("reduce_min", [x], {"axes": None, "keepdims": False}), zero])
    hi = b.op("max", [b.op("reduce_max", [x], {"axes": None, "keepdims": False}), zero])
    scale = b.op("div", [b.op("sub", [hi, lo]), b.const(np.float32(255))], name=b.out_name(1))
    zp = b.op("clip", [b.op("round", [b.op("neg", [b.op("div", [lo, scale])])])], {"min": 0.0, "max": 255.0})
    zp = b.op("cast", [zp], {"dtype": "uint8"}, name=b.out_name(2))
    y = b.op("quantize_linear", [x, scale, zp], {"axis": 1}, name=b.out_name(0))
    return [y, scale, zp]


def _causal_conv_with_state(c: Context):
    """CausalConvWithState (opset 27): the past state (zeros when absent) prepended to the input,
    a depthwise conv2d over the length (so the accelerator targets see a convolution), optional
    SiLU, and the last k-1 positions as the present state."""
    b = _Build(c)
    x, w, bias, past = c.need(0), c.need(1), c.inp(2), c.inp(3)
    _float_dtype(c, x)
    if len(x.shape) != 3 or len(w.shape) != 3 or w.shape[0] != x.shape[1] or w.shape[1] != 1:
        raise c.fail(f"input (B, C, L) and weight (C, 1, k) are needed, got {list(x.shape)} and {list(w.shape)}")
    bsz, ch, length = x.shape
    k = w.shape[2]
    act = c.attrs.get("activation", "none")
    if act not in ("none", "silu", "swish"):
        raise c.fail(f"activation '{act}' is not supported (only none, silu and swish)")
    if k < 2:
        raise c.fail("a kernel of length 1 (an empty carry state) is not supported")
    if past is None:
        past = b.const(np.zeros((bsz, ch, k - 1), np.dtype(x.dtype)))
    full = b.op("concat", [past, x], {"axis": 2})
    ins = [b.op("unsqueeze", [full], {"axes": (2,)}), b.op("unsqueeze", [w], {"axes": (2,)})]
    if bias is not None:
        ins.append(bias)
    y = b.op("conv2d", ins, {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "groups": ch})
    y = b.op("squeeze", [y], {"axes": (2,)}, name=None if act != "none" else b.out_name(0))
    if act != "none":
        y = b.op("silu", [y], name=b.out_name(0))
    state = b.op("slice", [full], {"starts": (length,), "ends": (length + k - 1,), "axes": (2,), "steps": None},
                 name=b.out_name(1))
    return [y, state]


COMPOSITES = {
    "CausalConvWithState": _causal_conv_with_state,
    "DynamicQuantizeLinear": _dynamic_quantize,
    "LpNormalization": _lp_norm,
    "GroupNormalization": _group_norm,
    "MeanVarianceNormalization": _mvn,
    "SwiGLU": _swiglu,
    "Attention": _attention,
    "RMSNormalization": _rms_norm,
    "RotaryEmbedding": _rotary,
}
