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


def _gru(args, attrs):
    direction, layout = _check_attrs("gru", attrs)
    x, w, r, *rest = _sequence_first([np.asarray(a) for a in args], layout)
    seq, batch, _ = x.shape
    d, hs = w.shape[0], r.shape[2]
    b = rest[0] if len(rest) > 0 else np.zeros((d, 6 * hs), x.dtype)
    h0 = rest[1] if len(rest) > 1 else np.zeros((d, batch, hs), x.dtype)
    y = np.empty((seq, d, batch, hs), x.dtype)
    hn = np.empty((d, batch, hs), x.dtype)
    lbr = bool(attrs.get("linear_before_reset", 0))
    for k in range(d):
        hn[k] = _gru_dir(x, w[k], r[k], b[k], h0[k], _steps(direction, k, seq), y[:, k], lbr)
    return _layout_out(y, [hn], layout)


def _rnn(args, attrs):
    """ONNX RNN with its default Tanh: h = tanh(x W^T + h R^T + Wb + Rb)."""
    direction, layout = _check_attrs("rnn", attrs)
    x, w, r, *rest = _sequence_first([np.asarray(a) for a in args], layout)
    seq, batch, _ = x.shape
    d, hs = w.shape[0], r.shape[2]
    b = rest[0] if len(rest) > 0 else np.zeros((d, 2 * hs), x.dtype)
    h0 = rest[1] if len(rest) > 1 else np.zeros((d, batch, hs), x.dtype)
    y = np.empty((seq, d, batch, hs), x.dtype)
    hn = np.empty((d, batch, hs), x.dtype)
    for k in range(d):
        xw = x @ w[k].T + (b[k, :hs] + b[k, hs:])
        h = h0[k]
        for t in _steps(direction, k, seq):
            h = np.tanh(xw[t] + h @ r[k].T)
            y[t, k] = h
        hn[k] = h
    return _layout_out(y, [hn], layout)


DEFS = (
    OpDef("lstm", _infer("lstm"), _lstm, _cost("lstm"), "other", (3, 7)),
    OpDef("gru", _infer("gru"), _gru, _cost("gru"), "other", (3, 5)),
    OpDef("rnn", _infer("rnn"), _rnn, _cost("rnn"), "other", (3, 5)),
)
