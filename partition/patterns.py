"""Dataflow patterns over the graph IR and the pattern tables targets are built from.

A pattern describes a small sub-graph ending in one value::

    x, w = wildcard(), wildcard()
    conv = is_op("conv2d", x, w)
    p = conv.optional(lambda c: is_op("relu", c))    # conv2d, or relu(conv2d)
    m = match(p, value)                               # Match or None

Patterns compare by identity: the same pattern object used twice must match the same value (so
``is_op("add", y, y)`` needs both operands to be one value), two ``wildcard()`` calls are free.
Matching backtracks over alternatives, and a match is accepted only if no interior node of it is
used outside it (fusing it would otherwise compute that node twice).

A pattern table is a tuple of frozen :class:`PatternEntry` values built by the ``make_*_pattern``
factories; names are prefixed by the target (``npu-gemm.conv2d_bias_relu``). The names the factories
know are listed by :func:`pattern_names`; :func:`make_pattern_table` builds entries from names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from .ir import IRError, Node, Value


class PatternError(IRError):
    """A malformed pattern or an unknown pattern name."""


# ---------------------------------------------------------------------------------------- patterns
@dataclass(frozen=True, eq=False)
class Pattern:
    """Base of all patterns. ``eq=False``: patterns are compared and hashed by identity."""

    def __or__(self, other: "Pattern") -> "Pattern":
        if not isinstance(other, Pattern):
            return NotImplemented
        left = self.options if isinstance(self, AltPattern) else (self,)
        right = other.options if isinstance(other, AltPattern) else (other,)
        return AltPattern(left + right)

    def has_attr(self, key: str, value: Any, default: Any = ...) -> "Pattern":
        """The producing node's attribute ``key`` equals ``value`` (lists compare as tuples). An
        absent attribute compares as ``default`` when one is given, else fails."""
        want = _norm_attr(value)

        def pred(v: Value) -> bool:
            node = v.producer
            if node is None:
                return False
            if key not in node.attrs:
                return default is not ... and _norm_attr(default) == want
            return _norm_attr(node.attrs[key]) == want
        return Constrained(self, pred, f"attr {key}={value!r}")

    def has_shape(self, shape: Sequence[int | None]) -> "Pattern":
        """The value's shape equals ``shape``; ``None`` entries match any extent."""
        want = tuple(shape)

        def pred(v: Value) -> bool:
            return len(v.shape) == len(want) and all(w is None or w == d for w, d in zip(want, v.shape))
        return Constrained(self, pred, f"shape {list(want)}")

    def has_dtype(self, *dtypes: str) -> "Pattern":
        want = frozenset(np.dtype(d).name for d in dtypes)
        return Constrained(self, lambda v: v.dtype in want, f"dtype in {sorted(want)}")

    def where(self, pred: Callable[[Value], bool], doc: str = "predicate") -> "Pattern":
        """Any test on the matched value (its ``producer`` gives the node)."""
        return Constrained(self, pred, doc)

    def optional(self, wrap: Callable[["Pattern"], "Pattern"]) -> "Pattern":
        """``wrap(self) | self``: the longer form is tried first."""
        return wrap(self) | self

    def named(self, label: str) -> "Pattern":
        """Record the matched value under ``label`` in ``Match.bindings``."""
        return Named(self, label)

    def root_ops(self) -> frozenset[str] | None:
        """Op names the matched value's producer can have; None when any value can match.
        Lets a matcher skip roots cheaply."""
        return None


@dataclass(frozen=True, eq=False)
class Wildcard(Pattern):
    pass


@dataclass(frozen=True, eq=False)
class ConstPattern(Pattern):
    pass


@dataclass(frozen=True, eq=False)
class OpPattern(Pattern):
    op: str
    inputs: tuple[Pattern, ...] | None  # None: any inputs, which all become match inputs

    def root_ops(self) -> frozenset[str] | None:
        return frozenset({self.op})


@dataclass(frozen=True, eq=False)
class AltPattern(Pattern):
    options: tuple[Pattern, ...]

    def root_ops(self) -> frozenset[str] | None:
        out: set[str] = set()
        for o in self.options:
            r = o.root_ops()
            if r is None:
                return None
            out |= r
        return frozenset(out)


@dataclass(frozen=True, eq=False)
class Constrained(Pattern):
    base: Pattern
    pred: Callable[[Value], bool]
    doc: str = ""

    def root_ops(self) -> frozenset[str] | None:
        return self.base.root_ops()


@dataclass(frozen=True, eq=False)
class Named(Pattern):
    base: Pattern
    label: str

    def root_ops(self) -> frozenset[str] | None:
        return self.base.root_ops()


def wildcard() -> Pattern:
    """Any value; it becomes an input of the match."""
    return Wildcard()


def is_const() -> Pattern:
    """A graph constant; it becomes an input of the match."""
    return ConstPattern()


def is_op(name: str, *inputs: Pattern) -> Pattern:
    """The single output of a node with op ``name``. With input patterns the node must have exactly
    that many inputs, matched in order; with none it may have any inputs."""
    if not isinstance(name, str) or not name:
        raise PatternError(f"is_op needs an op name, got {name!r}")
    for p in inputs:
        if not isinstance(p, Pattern):
            raise PatternError(f"is_op({name!r}) input is not a pattern: {p!r}")
    return OpPattern(name, tuple(inputs) if inputs else None)


def _norm_attr(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_norm_attr(x) for x in v)
    if isinstance(v, tuple):
        return tuple(_norm_attr(x) for x in v)
    return v


# ---------------------------------------------------------------------------------------- matching
@dataclass(frozen=True)
class Match:
    """A successful match: ``nodes`` in topological order (the last one produces ``root``),
    ``inputs`` the values bound by wildcards/constants (first-bound order, no repeats), and
    ``bindings`` the values of ``named`` patterns."""
    root: Value
    nodes: tuple[Node, ...]
    inputs: tuple[Value, ...]
    bindings: Mapping[str, Value] = field(default_factory=dict)

    @property
    def op_chain(self) -> str:
        """TVM's ``PartitionedFromPattern`` string: the matched ops joined, e.g. ``conv2d_add_relu_``."""
        return "".join(f"{n.op}_" for n in self.nodes)


@dataclass(frozen=True)
class _State:
    bound: tuple[tuple[Pattern, Value], ...] = ()   # pattern identity -> value
    nodes: tuple[Node, ...] = ()                    # post-order, so topological
    leaves: tuple[Value, ...] = ()
    labels: tuple[tuple[str, Value], ...] = ()

    def lookup(self, p: Pattern) -> Value | None:
        for q, v in self.bound:
            if q is p:
                return v
        return None


def _bind(p: Pattern, v: Value, st: _State, leaf: bool) -> _State:
    leaves = st.leaves + (v,) if leaf and not any(x is v for x in st.leaves) else st.leaves
    return _State(st.bound + ((p, v),), st.nodes, leaves, st.labels)


def _m(p: Pattern, v: Value, st: _State) -> Iterator[_State]:
    seen = st.lookup(p)
    if seen is not None:
        if seen is v:
            yield st
        return
    if isinstance(p, Wildcard):
        yield _bind(p, v, st, leaf=True)
    elif isinstance(p, ConstPattern):
        if v.is_const:
            yield _bind(p, v, st, leaf=True)
    elif isinstance(p, OpPattern):
        node = v.producer
        if node is None or node.op != p.op or len(node.outputs) != 1:
            return
        if p.inputs is None:
            subs: tuple[Pattern, ...] = tuple(Wildcard() for _ in node.inputs)
        elif len(p.inputs) != len(node.inputs):
            return
        else:
            subs = p.inputs
        for s in _m_seq(subs, node.inputs, st):
            if any(n is node for n in s.nodes):
                yield _State(s.bound + ((p, v),), s.nodes, s.leaves, s.labels)
            else:
                yield _State(s.bound + ((p, v),), s.nodes + (node,), s.leaves, s.labels)
    elif isinstance(p, AltPattern):
        for o in p.options:
            yield from _m(o, v, st)
    elif isinstance(p, Constrained):
        if p.pred(v):
            yield from _m(p.base, v, st)
    elif isinstance(p, Named):
        for s in _m(p.base, v, st):
            yield _State(s.bound, s.nodes, s.leaves, s.labels + ((p.label, v),))
    else:
        raise PatternError(f"unknown pattern kind {type(p).__name__}")


def _m_seq(ps: Sequence[Pattern], vs: Sequence[Value], st: _State) -> Iterator[_State]:
    if not ps:
        yield st
        return
    for s in _m(ps[0], vs[0], st):
        yield from _m_seq(ps[1:], vs[1:], s)


def _self_contained(st: _State, root: Value, graph_outputs: Sequence[Value]) -> bool:
    members = {id(n) for n in st.nodes}
    outs = {id(v) for v in graph_outputs}
    for n in st.nodes:
        if n is root.producer:
            continue
        for o in n.outputs:
            if id(o) in outs or any(id(u) not in members for u in o.users):
                return False
    # A leaf that some matched node computes would make the fused function read its own interior.
    return not any(v.producer is not None and id(v.producer) in members for v in st.leaves)


def match(pattern: Pattern, value: Value, graph_outputs: Sequence[Value] = ()) -> Match | None:
    """The first match of ``pattern`` rooted at ``value`` whose interior nodes are used only inside
    the match (and are not among ``graph_outputs``); None if there is none."""
    roots = pattern.root_ops()
    if roots is not None and (value.producer is None or value.producer.op not in roots):
        return None
    for st in _m(pattern, value, _State()):
        if _self_contained(st, value, graph_outputs):
            return Match(value, st.nodes, st.leaves, dict(st.labels))
    return None


# ---------------------------------------------------------------------------------------- tables
def _always(m: Match) -> bool:
    return True


@dataclass(frozen=True)
class PatternEntry:
    """One row of a pattern table. Higher ``priority`` is tried first; ``check`` can veto a match."""
    name: str
    pattern: Pattern
    check: Callable[[Match], bool] = _always
    priority: int = 0


def by_priority(table: Iterable[PatternEntry]) -> tuple[PatternEntry, ...]:
    """Highest priority first; ties keep table order."""
    return tuple(sorted(table, key=lambda e: -e.priority))


ACTIVATIONS = ("relu", "relu6", "clip", "gelu", "sigmoid", "silu", "tanh", "hard_swish", "leaky_relu")
LINEAR_OPS = ("conv2d", "dense", "matmul", "gemm", "batch_matmul")


def pattern_name(op: str, with_bias: bool = False, activation: str | None = None,
                 residual: bool = False, with_bn: bool = False) -> str:
    """``conv2d``, ``conv2d_bias``, ``conv2d_bias_bn_relu``, ``conv2d_bias_residual_relu``, ..."""
    return op + ("_bias" if with_bias else "") + ("_bn" if with_bn else "") + \
        ("_residual" if residual else "") + (f"_{activation}" if activation else "")


BN_OPS = ("conv2d",)  # batch_norm normalises axis 1, the channel axis of conv2d only


def pattern_names() -> tuple[str, ...]:
    """Every name :func:`make_pattern_table` accepts: ``<op>[_bias][_bn][_residual][_<activation>]``
    for op in LINEAR_OPS (``_bn``, an inference batch_norm, for conv2d only) and activation in
    ACTIVATIONS."""
    return tuple(pattern_name(op, b, a, r, bn) for op in LINEAR_OPS for b in (False, True)
                 for bn in ((False, True) if op in BN_OPS else (False,))
                 for r in (False, True) for a in (None, *ACTIVATIONS))


def _channel_bias_ok(axis: int) -> Callable[[Match], bool]:
    """The bias constant adds one number per output channel (``axis`` of the linear op's output),
    so the fused kernel can apply it in its epilogue."""
    def check(m: Match) -> bool:
        b = m.bindings.get("bias")
        if b is None:
            return True
        out = m.bindings["linear"].shape
        if not out:
            return False
        ax = axis % len(out)
        k = out[ax]
        user = next(n for n in m.nodes if any(v is b for v in n.inputs))
        if user.op == "bias_add":
            return int(user.attrs.get("axis", 1)) % len(out) == ax and b.shape == (k,)
        if user.op != "add":
            return True  # the op's own bias input: its shape inference already vetted it
        if len(b.shape) > len(out):
            return False
        padded = (1,) * (len(out) - len(b.shape)) + tuple(b.shape)
        return all(d == (k if i == ax else 1) for i, d in enumerate(padded))
    return check


def _residual_ok(m: Match) -> bool:
    r = m.bindings.get("residual")
    return r is None or r.shape == m.bindings["pre_residual"].shape


def _all_of(*checks: Callable[[Match], bool]) -> Callable[[Match], bool]:
    def check(m: Match) -> bool:
        return all(c(m) for c in checks)
    return check


def _linear(op: str, with_bias: bool) -> tuple[Pattern, int]:
    """The linear op with an optional bias in every form the IR can spell it; returns the pattern
    and the output axis the bias runs along."""
    a, b = wildcard(), wildcard()
    axis = 1 if op == "conv2d" else -1
    if not with_bias:
        return is_op(op, a, b).named("linear"), axis
    bias = is_const().named("bias")
    if op in ("conv2d", "dense", "gemm"):
        fused_in = is_op(op, a, b, bias).named("linear")
    else:
        fused_in = None
    plain = is_op(op, a, b).named("linear")
    forms = [is_op("bias_add", plain, bias), is_op("add", plain, bias), is_op("add", bias, plain)]
    if op == "gemm":
        forms = []  # ONNX Gemm carries its own C; an extra add is not a gemm bias
    p = fused_in
    for f in forms:
        p = f if p is None else p | f
    return p, axis


def make_linear_pattern(target: str, op: str, with_bias: bool = False, activation: str | None = None,
                        residual: bool = False, with_bn: bool = False) -> PatternEntry:
    """``[act]([add](batch_norm?(op(x, w) [+ bias]), residual))``. The bias must be a constant with
    one value per output channel, batch_norm's parameters constants, and a residual must have the
    linear output's shape (no broadcast)."""
    if op not in LINEAR_OPS:
        raise PatternError(f"no pattern factory for op '{op}'; known: {', '.join(LINEAR_OPS)}")
    if activation is not None and activation not in ACTIVATIONS:
        raise PatternError(f"unknown activation '{activation}'; known: {', '.join(ACTIVATIONS)}")
    if with_bn and op not in BN_OPS:
        raise PatternError(f"batch_norm patterns exist for {', '.join(BN_OPS)} only, not '{op}'")
    p, axis = _linear(op, with_bias)
    checks: list[Callable[[Match], bool]] = [_channel_bias_ok(axis)]
    if with_bn:
        p = is_op("batch_norm", p, is_const(), is_const(), is_const(), is_const())
    if residual:
        inner = p.named("pre_residual")
        r = wildcard().named("residual")
        p = is_op("add", inner, r) | is_op("add", r, inner)
        checks.append(_residual_ok)
    if activation is not None:
        p = is_op(activation, p)
    n_ops = 1 + with_bias + with_bn + residual + (activation is not None)
    return PatternEntry(f"{target}.{pattern_name(op, with_bias, activation, residual, with_bn)}", p,
                        _all_of(*checks), priority=n_ops)


def make_conv2d_pattern(target: str, with_bias: bool = False, activation: str | None = None,
                        residual: bool = False) -> PatternEntry:
    return make_linear_pattern(target, "conv2d", with_bias, activation, residual)


def make_dense_pattern(target: str, with_bias: bool = False, activation: str | None = None,
                       residual: bool = False) -> PatternEntry:
    return make_linear_pattern(target, "dense", with_bias, activation, residual)


def make_matmul_pattern(target: str, with_bias: bool = False, activation: str | None = None,
                        residual: bool = False) -> PatternEntry:
    return make_linear_pattern(target, "matmul", with_bias, activation, residual)


def _parse_name(name: str) -> tuple[str, bool, str | None, bool, bool]:
    for op in sorted(LINEAR_OPS, key=len, reverse=True):
        if name == op or name.startswith(op + "_"):
            rest = name[len(op):].split("_")[1:]
            flags = {}
            for flag in ("bias", "bn", "residual"):
                flags[flag] = bool(rest) and rest[0] == flag
                rest = rest[1:] if flags[flag] else rest
            act = "_".join(rest) or None
            if (act is None or act in ACTIVATIONS) and (op in BN_OPS or not flags["bn"]):
                return op, flags["bias"], act, flags["residual"], flags["bn"]
    raise PatternError(f"unknown pattern name '{name}'; names are <op>[_bias][_bn][_residual][_<activation>] "
                       f"with op in {', '.join(LINEAR_OPS)} (_bn for conv2d only) and activation in "
                       f"{', '.join(ACTIVATIONS)}")


def make_pattern_table(target: str, names: Iterable[str],
                       extra_check: Callable[[Match], bool] | None = None) -> tuple[PatternEntry, ...]:
    """Entries for the given pattern names (see :func:`pattern_names`), highest priority first.
    ``extra_check`` (for example a dtype restriction) is added to every entry's check."""
    out = []
    for name in dict.fromkeys(names):
        e = make_linear_pattern(target, *_parse_name(name))
        if extra_check is not None:
            e = PatternEntry(e.name, e.pattern, _all_of(e.check, extra_check), e.priority)
        out.append(e)
    return by_priority(out)


__all__ = ["Pattern", "PatternError", "PatternEntry", "Match", "wildcard", "is_const", "is_op", "match",
           "by_priority", "pattern_name", "pattern_names", "make_linear_pattern", "make_conv2d_pattern",
           "make_dense_pattern", "make_matmul_pattern", "make_pattern_table", "ACTIVATIONS", "LINEAR_OPS", "BN_OPS"]
