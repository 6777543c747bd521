"""Recurrent ops: ``lstm``, ``gru`` and ``rnn``, the ONNX LSTM, GRU and RNN with their default
activations (rnn(x, w, r, b?, initial_h?): Tanh; outputs Y, Y_h as GRU's; 7 elementwise FLOPs).

Inputs are ONNX's in ONNX's order with the optional ones trailing and no holes:
lstm(x, w, r, b?, initial_h?, initial_c?, p?) and gru(x, w, r, b?, initial_h?). The importer fills a
hole (a missing B before a given initial_h, say) with zeros, which is what ONNX means by an absent
input, and checks ``sequence_lens`` itself: only sequences that all run the full length exist here.
Gate order is ONNX's: LSTM i, o, f, c (peepholes i, o, f); GRU z, r, h.

Attributes: direction ("forward" | "reverse" | "bidirectional"), hidden_size (checked against R when
given), layout (0: x [S, N, I], Y [S, D, N, H], states [D, N, H]; 1: x [N, S, I], Y [N, S, D, H],
states [N, D, H]), linear_before_reset (GRU; PyTorch exports 1). ``activations`` must be the
defaults and ``clip`` absent; LSTM ``input_forget`` must be 0. Anything else is an OpError.

FLOPs (cost) per step, batch row and direction: 2*G*H*(I+H) for the input and recurrent
projections (G = 4 gates for LSTM, 3 for GRU) plus the gates' elementwise work per hidden unit,
with the transcendental counts of ``elementwise._FLOPS`` (sigmoid 7, tanh 5):
LSTM 43 = 8 (sum of the two projections and the bias, 4 gates) + 21 (3 sigmoids) + 10 (2 tanh)
+ 3 (cell update) + 1 (output gate), plus 6 with peepholes (3 muls, 3 adds);
GRU 31 = 4 (z, r sums) + 14 (2 sigmoids) + 4 (candidate: reset product, two adds, bias)
+ 5 (tanh) + 4 ((1 - z) * h~ + z * h).
"""
from __future__ import annotations

import numpy as np

from ..ir import TensorType
from .base import scipy_special, OpCost, OpDef, check

_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
_DEFAULT_ACTS = {"lstm": ("Sigmoid", "Tanh", "Tanh"), "gru": ("Sigmoid", "Tanh"), "rnn": ("Tanh",)}
_GATES = {"lstm": 4, "gru": 3, "rnn": 1}
# rnn: 2 (sum of the two projections and the bias) + 5 (tanh)
_EW_FLOPS = {"lstm": 43, "gru": 31, "rnn": 7}
_PEEPHOLE_FLOPS = 6


# ============================================================================ attributes and shapes
def _check_attrs(op: str, attrs: dict) -> tuple[str, int]:
    """(direction, layout) after rejecting what the reference does not compute."""
    direction = attrs.get("direction", "forward")
    check(direction in _DIRECTIONS,
          f"{op}: direction must be one of {sorted(_DIRECTIONS)}, got {direction!r}")
    layout = attrs.get("layout", 0)
    check(layout in (0, 1), f"{op}: layout must be 0 or 1, got {layout!r}")
    acts = attrs.get("activations")
    if acts is not None:
        want = _DEFAULT_ACTS[op] * _DIRECTIONS[direction]
        check([str(a).lower() for a in acts] == [a.lower() for a in want],
              f"{op}: activations {list(acts)} are not supported; only the defaults {list(want)}")
    check(attrs.get("clip") is None,
          f"{op}: clip (cell clipping, clip={attrs.get('clip')!r}) is not supported")
    if op == "lstm":
        check(attrs.get("input_forget", 0) in (0, False),
              "lstm: input_forget=1 (coupled input and forget gates) is not supported")
    elif op == "gru":
        check(attrs.get("linear_before_reset", 0) in (0, 1),
              f"gru: linear_before_reset must be 0 or 1, got {attrs.get('linear_before_reset')!r}")
    return direction, int(layout)


def _dims(op: str, ins: list[TensorType], attrs: dict) -> tuple[int, int, int, int, int, int]:
    """(seq, batch, input, hidden, directions, layout), with every input's shape and dtype checked."""
    direction, layout = _check_attrs(op, attrs)
    x, w, r = ins[0], ins[1], ins[2]
    check(np.issubdtype(np.dtype(x.dtype), np.floating), f"{op}: X must be a float tensor, got {x.dtype}")
    for name, t in zip(("W", "R", "B", "initial_h", "initial_c", "P"), ins[1:]):
        check(t.dtype == x.dtype, f"{op}: {name} dtype {t.dtype} differs from X dtype {x.dtype}")
    check(len(x.shape) == 3, f"{op}: X must be 3-D, got shape {list(x.shape)}")
    check(len(w.shape) == 3 and len(r.shape) == 3,
          f"{op}: W and R must be 3-D, got shapes {list(w.shape)} and {list(r.shape)}")
    seq, batch = (x.shape[0], x.shape[1]) if layout == 0 else (x.shape[1], x.shape[0])
    d, g, i, h = _DIRECTIONS[direction], _GATES[op], x.shape[2], r.shape[2]
    hs = attrs.get("hidden_size")
    check(hs is None or hs == h, f"{op}: hidden_size={hs} but R has shape {list(r.shape)}")
    check(h >= 1, f"{op}: hidden size must be >= 1, got R shape {list(r.shape)}")
    check(w.shape == (d, g * h, i), f"{op}: W must have shape {[d, g * h, i]}, got {list(w.shape)}")
    check(r.shape == (d, g * h, h), f"{op}: R must have shape {[d, g * h, h]}, got {list(r.shape)}")
    if len(ins) > 3:
        check(ins[3].shape == (d, 2 * g * h), f"{op}: B must have shape {[d, 2 * g * h]}, got {list(ins[3].shape)}")
    state = [d, batch, h] if layout == 0 else [batch, d, h]
    for name, t in zip(("initial_h", "initial_c"), ins[4:6]):
        check(list(t.shape) == state, f"{op}: {name} must have shape {state}, got {list(t.shape)}")
    if len(ins) > 6:
        check(ins[6].shape == (d, 3 * h), f"{op}: P must have shape {[d, 3 * h]}, got {list(ins[6].shape)}")
    return seq, batch, i, h, d, layout


def _infer(op: str):
    n_out = 3 if op == "lstm" else 2  # rnn: Y and Y_h as GRU

    def infer(ins, attrs, ctx):
        seq, batch, _, h, d, layout = _dims(op, ins, attrs)
        y = (seq, d, batch, h) if layout == 0 else (batch, seq, d, h)
        state = (d, batch, h) if layout == 0 else (batch, d, h)
        return [TensorType(y, ins[0].dtype)] + [TensorType(state, ins[0].dtype)] * (n_out - 1)
    return infer


def _cost(op: str):
    def cost(ins, outs, attrs):
        seq, batch, i, h, d, _ = _dims(op, ins, attrs)
        rows = seq * batch * d
        macs = rows * _GATES[op] * h * (i + h)
        ew = _EW_FLOPS[op] + (_PEEPHOLE_FLOPS if len(ins) > 6 else 0)
        return OpCost(macs, 2 * macs + rows * ew * h,
                      sum(t.nbytes for t in ins), sum(t.nbytes for t in outs))
    return cost


# ============================================================================ reference
def _steps(direction: str, k: int, seq: int) -> range:
    backward = direction == "reverse" or (direction == "bidirectional" and k == 1)
    return range(seq - 1, -1, -1) if backward else range(seq)


def _sequence_first(args: list[np.ndarray], layout: int) -> list[np.ndarray]:
    """X to [S, N, I] and the states to [D, N, H] (layout 1 keeps batch first)."""
    if layout == 0:
        return args
    out = list(args)
    out[0] = np.swapaxes(args[0], 0, 1)
    for j in (4, 5):
        if j < len(args):
            out[j] = np.swapaxes(args[j], 0, 1)
    return out


def _layout_out(y: np.ndarray, states: list[np.ndarray], layout: int) -> list[np.ndarray]:
    if layout == 1:
        y = y.transpose(2, 0, 1, 3)
        states = [s.transpose(1, 0, 2) for s in states]
    return [np.ascontiguousarray(y)] + [np.ascontiguousarray(s) for s in states]


def _lstm_dir(x, w, r, b, h, c, p, steps, y):
    hs = r.shape[1]
    xw = x @ w.T + (b[:4 * hs] + b[4 * hs:])
    pi, po, pf = (None, None, None) if p is None else (p[:hs], p[hs:2 * hs], p[2 * hs:])
    for t in steps:
        gates = xw[t] + h @ r.T
        i, o, f, cand = gates[:, :hs], gates[:, hs:2 * hs], gates[:, 2 * hs:3 * hs], gates[:, 3 * hs:]
        if p is not None:
            i, f = i + pi * c, f + pf * c
        c = scipy_special().expit(f) * c + scipy_special().expit(i) * np.tanh(cand)
        if p is not None:
            o = o + po * c
        h = scipy_special().expit(o) * np.tanh(c)
        y[t] = h
    return h, c


def _lstm(args, attrs):
    direction, layout = _check_attrs("lstm", attrs)
    x, w, r, *rest = _sequence_first([np.asarray(a) for a in args], layout)
    seq, batch, _ = x.shape
    d, hs = w.shape[0], r.shape[2]
    zeros = np.zeros((d, batch, hs), x.dtype)
    b = rest[0] if len(rest) > 0 else np.zeros((d, 8 * hs), x.dtype)
    h0 = rest[1] if len(rest) > 1 else zeros
    c0 = rest[2] if len(rest) > 2 else zeros
    p = rest[3] if len(rest) > 3 else None
    y = np.empty((seq, d, batch, hs), x.dtype)
    hn, cn = np.empty_like(zeros), np.empty_like(zeros)
    for k in range(d):
        hn[k], cn[k] = _lstm_dir(x, w[k], r[k], b[k], h0[k], c0[k], None if p is None else p[k],
                                 _steps(direction, k, seq), y[:, k])
    return _layout_out(y, [hn, cn], layout)


def _gru_dir(x, w, r, b, h, steps, y, linear_before_reset: bool):
    hs = r.shape[1]
    xw = x @ w.T + b[:3 * hs]
    rb = b[3 * hs:]
    r_zr, r_h = r[:2 * hs], r[2 * hs:]
    for t in steps:
        zr = scipy_special().expit(xw[t, :, :2 * hs] + h @ r_zr.T + rb[:2 * hs])
        z, reset = zr[:, :hs], zr[:, hs:]
        if linear_before_reset:
            cand = np.tanh(xw[t, :, 2 * hs:] + reset * (h @ r_h.T + rb[2 * hs:]))
        else:
            cand = np.tanh(xw[t, :, 2 * hs:] + (reset * h) @ r_h.T + rb[2 * hs:])
        h = (1 - z) * cand + z * h
        y[t] = h
    return h


def _rnn_dir(x, w, r, b, h, steps, y, attrs):
    """ONNX RNN with its default Tanh: h = tanh(x W^T + h R^T + Wb + Rb)."""
    hs = r.shape[1]
    xw = x @ w.T + (b[:hs] + b[hs:])
    for t in steps:
        h = np.tanh(xw[t] + h @ r.T)
        y[t] = h
    return h


def _single_state(op: str, run_dir):
    """gru / rnn: one hidden state, each direction run by ``run_dir``; absent B and initial_h are
    zeros."""
    def compute(args, attrs):
        direction, layout = _check_attrs(op, attrs)
        x, w, r, *rest = _sequence_first([np.asarray(a) for a in args], layout)
        seq, batch, _ = x.shape
        d, hs = w.shape[0], r.shape[2]
        b = rest[0] if len(rest) > 0 else np.zeros((d, 2 * _GATES[op] * hs), x.dtype)
        h0 = rest[1] if len(rest) > 1 else np.zeros((d, batch, hs), x.dtype)
        y = np.empty((seq, d, batch, hs), x.dtype)
        hn = np.empty((d, batch, hs), x.dtype)
        for k in range(d):
            hn[k] = run_dir(x, w[k], r[k], b[k], h0[k], _steps(direction, k, seq), y[:, k], attrs)
        return _layout_out(y, [hn], layout)
    return compute


_gru = _single_state("gru", lambda x, w, r, b, h, steps, y, attrs: _gru_dir(
    x, w, r, b, h, steps, y, bool(attrs.get("linear_before_reset", 0))))
_rnn = _single_state("rnn", _rnn_dir)


# ============================================================================ linear attention
_RULES = ("linear", "gated", "delta", "gated_delta")


def _la_dims(ins: list[TensorType], attrs: dict):
    """(b, t, hq, hk, dk, dv, rule) of linear_attention(q, k, v, state, decay?, beta?): q/k/v
    [B, T, H*D], state [B, Hk, dk, dv], decay [B, T, Hk or Hk*dk] (gated rules), beta
    [B, T, Hk or 1] (delta rules)."""
    rule = attrs.get("update_rule", "gated_delta")
    check(rule in _RULES, f"linear_attention: update_rule must be one of {', '.join(_RULES)}, got {rule!r}")
    hq, hk = int(attrs.get("q_num_heads", 0)), int(attrs.get("kv_num_heads", 0))
    check(hq > 0 and hk > 0 and hq % hk == 0,
          f"linear_attention: q_num_heads {hq} must be a positive multiple of kv_num_heads {hk}")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    check(len(ins) == 4 + gated + delta,
          f"linear_attention: update_rule {rule!r} takes {4 + gated + delta} inputs, got {len(ins)}")
    q, k, v, s = ins[:4]
    check(len(q.shape) == len(k.shape) == len(v.shape) == 3,
          f"linear_attention: query, key and value must be 3-D, got {list(q.shape)}, {list(k.shape)}, {list(v.shape)}")
    b, t = q.shape[:2]
    check(q.shape[2] % hq == 0 and k.shape[2] % hk == 0 and v.shape[2] % hk == 0,
          "linear_attention: hidden sizes must divide by the head counts")
    dk, dv = q.shape[2] // hq, v.shape[2] // hk
    check(k.shape == (b, t, hk * dk) and v.shape[:2] == (b, t),
          f"linear_attention: key {list(k.shape)} / value {list(v.shape)} do not match query {list(q.shape)}")
    check(s.shape == (b, hk, dk, dv), f"linear_attention: state must have shape {[b, hk, dk, dv]}, got {list(s.shape)}")
    extra = ins[4:]
    if gated:
        check(extra[0].shape in ((b, t, hk), (b, t, hk * dk)),
              f"linear_attention: decay must have shape {[b, t, hk]} or {[b, t, hk * dk]}, got {list(extra[0].shape)}")
    if delta:
        check(extra[-1].shape in ((b, t, hk), (b, t, 1)),
              f"linear_attention: beta must have shape {[b, t, hk]} or {[b, t, 1]}, got {list(extra[-1].shape)}")
    return b, t, hq, hk, dk, dv, rule


def _la_infer(ins, attrs, ctx):
    b, t, hq, hk, dk, dv, _ = _la_dims(ins, attrs)
    return [TensorType((b, t, hq * dv), ins[0].dtype), TensorType((b, hk, dk, dv), ins[3].dtype)]


def _heads(x: np.ndarray, h: int) -> np.ndarray:
    b, t, hd = x.shape
    return x.reshape(b, t, h, hd // h).transpose(0, 2, 1, 3).astype(np.float64)


def _linear_attention(args, attrs):
    """The spec's recurrence, token by token, in float64: (gated) decay of the state by exp(g),
    (delta) the value corrected by what the state already retrieves for the key, times beta, the
    outer-product update, and the read scale * q^T S (a KV head's state shared by its query heads)."""
    b, t, hq, hk, dk, dv, rule = _la_dims([TensorType(np.shape(a), np.asarray(a).dtype.name) for a in args], attrs)
    q, k, v = _heads(np.asarray(args[0]), hq), _heads(np.asarray(args[1]), hk), _heads(np.asarray(args[2]), hk)
    state = np.asarray(args[3]).astype(np.float64)
    extra = list(args[4:])
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    decay = None
    if gated:
        g = np.asarray(extra[0]).astype(np.float64)
        decay = (g.reshape(b, t, hk, 1) if g.shape[-1] == hk else g.reshape(b, t, hk, dk)).transpose(0, 2, 1, 3)
    beta = None
    if delta:
        bt = np.asarray(extra[-1]).astype(np.float64)
        beta = bt.reshape(b, t, bt.shape[-1], 1).transpose(0, 2, 1, 3)
    scale = float(attrs.get("scale") or 0.0) or 1.0 / np.sqrt(dk)
    group = hq // hk
    out = np.zeros((b, hq, t, dv))
    for i in range(t):
        kt, vt = k[:, :, i], v[:, :, i]
        if gated:
            state = state * np.exp(decay[:, :, i])[..., None]
        if delta:
            vt = beta[:, :, i] * (vt - np.einsum("bhdm,bhd->bhm", state, kt))
        state = state + kt[..., :, None] * vt[..., None, :]
        read = state if group == 1 else np.repeat(state, group, axis=1)
        out[:, :, i] = scale * np.einsum("bhd,bhdm->bhm", q[:, :, i], read)
    y = out.transpose(0, 2, 1, 3).reshape(b, t, hq * dv)
    return [y.astype(np.asarray(args[0]).dtype), state.astype(np.asarray(args[3]).dtype)]


def _la_cost(ins, outs, attrs):
    b, t, hq, hk, dk, dv, rule = _la_dims(ins, attrs)
    per_token = hk * dk * dv * (2 if rule in ("delta", "gated_delta") else 1) + hq * dk * dv
    macs = b * t * per_token
    return OpCost(macs, 2 * macs, sum(x.nbytes for x in ins), sum(o.nbytes for o in outs))


DEFS = (
    OpDef("lstm", _infer("lstm"), _lstm, _cost("lstm"), "other", (3, 7)),
    OpDef("gru", _infer("gru"), _gru, _cost("gru"), "other", (3, 5)),
    OpDef("rnn", _infer("rnn"), _rnn, _cost("rnn"), "other", (3, 5)),
    OpDef("linear_attention", _la_infer, _linear_attention, _la_cost, "other", (4, 6)),
)
