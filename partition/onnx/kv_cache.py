"""The KV cache of an imported decoder: which graph inputs and outputs are the cache, per layer,
for keys and values, and which of their dims are batch, cache length, heads and head size.

A decode step reads the cache of the previous steps (``past``, a graph input) and returns it with
the new tokens written in (``present``, a graph output). Two forms exist, both found by the graph's
structure, so an exporter's names do not matter:

- ``concat``: ``present = concat(past, new)`` along the sequence axis; the cache grows by the new
  tokens every step (transformers/optimum ``past_key_values.*`` -> ``present.*``, and the opset-23
  ``Attention`` op with past_key/past_value, which imports as that concat);
- ``scatter``: ``present = tensor_scatter(past, new, write_indices)`` (ONNX TensorScatter); the
  cache is a fixed buffer of ``max length`` slots written in place, so past and present have one
  shape.

A concat onto a graph input is a cache write only when the model says so: the concat comes from
an ``Attention`` op (the importer tags it), or the input or output is named as a cache
(``past_key_values.0.key``, ``past_key``, ``present.3.value``, ...); a plain Concat model is not a
decoder. The op or the names say which tensor of a pair holds keys and which values, and names
give the layer number; without them, pairs alternate key, value in graph order (every exporter
writes the key first), and a lone unnamed buffer is kind "state". A graph whose names announce a
cache but whose structure does not match gets one line naming the tensor (``KVCacheError``).

``find_kv_cache(graph)`` is what the importer uses to mark the cache device-resident
(``graph.meta["device_resident"]``, docs/PARTITIONING.md); it imports nothing but the IR.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from ..ir import Graph, Node, Value
from .errors import OnnxImportError

# Ops a cache tensor may pass through between the graph input and the write, or between the write
# and the graph output, without changing what it holds.
_PASS = frozenset({"identity", "cast"})

# A name that announces a cache tensor: "past"/"present" (or "cache") next to key/value words.
_PAST = re.compile(r"past|cache_in|in_cache", re.I)
_PRESENT = re.compile(r"present|cache_out|out_cache", re.I)
_KEY = re.compile(r"(?:^|[._/\-])(?:key|keys|k)(?:$|[._/\-\d])|key", re.I)
_VALUE = re.compile(r"(?:^|[._/\-])(?:value|values|v)(?:$|[._/\-\d])|value", re.I)


class KVCacheError(OnnxImportError):
    """A decoder whose cache inputs and outputs do not pair up; the message names the tensor."""


@dataclass(frozen=True)
class KVPair:
    """One cache tensor of one layer: ``past`` (graph input name) and ``present`` (graph output
    name), ``kind`` "key" or "value" ("state" for an unnamed tensor that pairs with none: a cache
    that is not attention's), and its axes: ``batch_axis``, ``seq_axis`` (where the tokens
    go), ``heads_axis`` and ``head_size_axis`` (None for a layout without them, e.g. 3-D)."""
    layer: int
    kind: str
    past: str
    present: str
    past_shape: tuple[int, ...]
    present_shape: tuple[int, ...]
    dtype: str
    batch_axis: int
    seq_axis: int
    heads_axis: int | None
    head_size_axis: int | None

    @property
    def past_len(self) -> int:
        return self.past_shape[self.seq_axis]

    @property
    def present_len(self) -> int:
        return self.present_shape[self.seq_axis]


@dataclass(frozen=True)
class KVCache:
    """The cache of a decoder: its pairs (layer, then key before value) and its form
    (``concat``: grows by ``new_tokens`` a step; ``scatter``: a fixed buffer of ``past_len``
    slots). ``batch``, ``past_len``, ``new_tokens``, ``heads`` and ``head_size`` are those of
    every pair (``heads``/``head_size`` None when the layers disagree or the layout has none)."""
    pairs: tuple[KVPair, ...]
    form: str
    batch: int
    past_len: int
    new_tokens: int
    heads: int | None
    head_size: int | None
    dtype: str

    @property
    def layers(self) -> int:
        return len({p.layer for p in self.pairs})

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(p.past for p in self.pairs)

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(p.present for p in self.pairs)

    @property
    def past_bytes(self) -> int:
        """Bytes of the cache read by one step, in the graph's dtype."""
        import numpy as np
        return sum(int(np.prod(p.past_shape)) * np.dtype(p.dtype).itemsize for p in self.pairs)

    def to_dict(self) -> dict:
        return {"form": self.form, "layers": self.layers, "batch": self.batch, "past_len": self.past_len,
                "new_tokens": self.new_tokens, "heads": self.heads, "head_size": self.head_size,
                "dtype": self.dtype,
                "pairs": [{"layer": p.layer, "kind": p.kind, "past": p.past, "present": p.present,
                           "past_shape": list(p.past_shape), "present_shape": list(p.present_shape),
                           "batch_axis": p.batch_axis, "seq_axis": p.seq_axis, "heads_axis": p.heads_axis,
                           "head_size_axis": p.head_size_axis} for p in self.pairs]}


def announces_cache(name: str, present: bool = False) -> bool:
    """Whether a tensor's name says it is a cache tensor (past or present key/value)."""
    side = _PRESENT if present else _PAST
    return bool(side.search(name)) and (bool(_KEY.search(name)) or bool(_VALUE.search(name))
                                        or "key_values" in name.lower())


def _through(v: Value) -> Value:
    """``v`` with identities and casts in front of it skipped (towards its source)."""
    while v.producer is not None and v.producer.inputs and (
            v.producer.op in _PASS or (v.producer.op == "concat" and len(v.producer.inputs) == 1)):
        v = v.producer.inputs[0]  # a one-input concat (TorchScript writes one per cache) copies
    return v


def _write(out: Value) -> tuple[Node, Value] | None:
    """The node that writes a present output (concat or tensor_scatter, identities and casts
    after it skipped) and the graph input it extends, or None."""
    v = _through(out)
    node = v.producer
    if node is None:
        return None
    if node.op == "tensor_scatter":
        src = _through(node.inputs[0])
        return (node, src) if src.producer is None and not src.is_const else None
    if node.op == "concat" and len(node.inputs) >= 2:
        src = _through(node.inputs[0])
        return (node, src) if src.producer is None and not src.is_const else None
    return None


def _kind(name: str) -> str | None:
    # "key_values" names both: look at what follows it (past_key_values.0.key)
    tail = re.sub(r"key_values", "", name, flags=re.I)
    k, v = bool(_KEY.search(tail)), bool(_VALUE.search(tail))
    return "key" if k and not v else "value" if v and not k else None


def _layer(name: str) -> int | None:
    nums = re.findall(r"\d+", name)
    return int(nums[-1]) if nums else None


def _axes(past: Value, present: Value, node: Node, form: str) -> tuple[int, int | None, int | None]:
    """(seq axis, heads axis, head size axis) of one pair; the batch axis is 0."""
    rank = len(past.shape)
    seq = int(node.attrs.get("axis", -2 if form == "scatter" else 0))
    seq = seq + rank if seq < 0 else seq
    rest = [a for a in range(1, rank) if a != seq]
    if len(rest) == 2:
        return seq, rest[0], rest[1]
    if len(rest) == 1:  # [B, S, H*D] or [B*H, S, D]: no separate heads axis
        return seq, None, rest[0]
    return seq, None, None


def _check_shapes(past: Value, present: Value, node: Node, form: str, new: Value) -> int:
    """The new tokens of one step; a pair whose shapes do not match its form is a KVCacheError."""
    ps, qs = tuple(past.shape), tuple(present.shape)
    if len(ps) < 2:
        raise KVCacheError(f"cache input '{past.name}' has shape {list(ps)}; a cache has a batch and a "
                           f"sequence axis at least")
    if past.dtype != present.dtype:
        raise KVCacheError(f"cache input '{past.name}' is {past.dtype} but its present output "
                           f"'{present.name}' is {present.dtype}")
    seq = _axes(past, present, node, form)[0]
    if seq == 0:
        raise KVCacheError(f"cache input '{past.name}' grows along axis 0, its batch axis")
    if form == "scatter":
        if ps != qs:
            raise KVCacheError(f"cache input '{past.name}' {list(ps)} and its present output '{present.name}' "
                               f"{list(qs)} differ; a scatter-written cache keeps its shape")
        return int(new.shape[seq])
    same = len(ps) == len(qs) and all(a == b for i, (a, b) in enumerate(zip(ps, qs)) if i != seq)
    if not same or qs[seq] <= ps[seq]:
        raise KVCacheError(f"cache input '{past.name}' {list(ps)} and its present output '{present.name}' "
                           f"{list(qs)} do not match: the present must equal the past but longer on axis {seq}")
    return qs[seq] - ps[seq]


def find_kv_cache(graph: Graph) -> KVCache | None:
    """The KV cache of a decode-step graph, or None when it has none. A cache that is announced by
    names but broken (a past input without its present output, a present not written from its
    past, shapes that do not match, layers that disagree on batch or length) raises KVCacheError."""
    found: list[tuple[Value, Value, Node, str]] = []
    used_inputs: dict[int, str] = {}
    for out in dict.fromkeys(graph.outputs):
        w = _write(out)
        if w is None:
            if announces_cache(out.name, present=True):
                raise KVCacheError(f"present output '{out.name}' is not written from a past cache input "
                                   f"(no concat or TensorScatter onto a graph input produces it)")
            continue
        node, src = w
        # A concat onto an input is a cache write only when the model says so: an Attention op
        # (its concat carries meta "kv_cache"), or cache names on either end. TensorScatter exists
        # to write caches.
        if not (node.op == "tensor_scatter" or node.meta.get("kv_cache") or announces_cache(src.name)
                or announces_cache(out.name, present=True)):
            continue
        if id(src) in used_inputs:
            raise KVCacheError(f"cache input '{src.name}' feeds two present outputs, '{used_inputs[id(src)]}' "
                               f"and '{out.name}'")
        used_inputs[id(src)] = out.name
        found.append((src, out, node, "scatter" if node.op == "tensor_scatter" else "concat"))
    paired = {id(s) for s, _, _, _ in found}
    # A lone "past_values" input (a time-series model's history) is no cache: a name is only held
    # against the graph when the graph has a cache, or the name is the transformers one.
    decoder = bool(found) or any(announces_cache(o.name, present=True) for o in graph.outputs)
    for v in graph.inputs:
        if id(v) not in paired and announces_cache(v.name) and (decoder or "key_values" in v.name.lower()):
            raise KVCacheError(f"cache input '{v.name}' has no present output (no graph output is it with "
                               f"the new tokens written in)")
    if not found:
        return None
    forms = {f for *_, f in found}
    if len(forms) > 1:
        raise KVCacheError(f"cache outputs mix concat-grown and scatter-written tensors "
                           f"('{found[0][1].name}' and others); one decoder uses one form")
    return _assemble(found, forms.pop())


def _assemble(found: list[tuple[Value, Value, Node, str]], form: str) -> KVCache:
    pairs = []
    named = [n.meta.get("kv_cache") or _kind(p.name) or _kind(q.name) for p, q, n, _ in found]
    # Unnamed tensors alternate key, value; an odd number of them is no key/value cache but some
    # other state carried from step to step (a lone TensorScatter buffer): kind "state".
    unnamed_state = sum(k is None for k in named) % 2 == 1
    for order, (past, present, node, _) in enumerate(found):
        new = node.inputs[1]
        n_new = _check_shapes(past, present, node, form, new)
        kind = named[order] or ("state" if unnamed_state else "key" if order % 2 == 0 else "value")
        layer = _layer(past.name)
        if layer is None:
            layer = _layer(present.name)
        seq, heads, hd = _axes(past, present, node, form)
        pairs.append((layer, order, kind, n_new, KVPair(
            -1, kind, past.name, present.name, tuple(past.shape), tuple(present.shape), past.dtype, 0, seq,
            heads, hd)))
    # Layers by number when every pair is named as a cache and names one (a digit in "in4" is no
    # layer), else by order (key, value per layer).
    announced = all(announces_cache(p[4].past) or announces_cache(p[4].present, present=True) for p in pairs)
    if announced and all(p[0] is not None for p in pairs):
        numbers = sorted({p[0] for p in pairs})
        index = {n: i for i, n in enumerate(numbers)}
        layers = [index[p[0]] for p in pairs]
    else:
        seen: dict[str, int] = {}
        layers = []
        for p in pairs:
            layers.append(seen.get(p[2], 0))
            seen[p[2]] = seen.get(p[2], 0) + 1
    out = []
    slots: dict[tuple[int, str], str] = {}
    for layer, (_, _, kind, _, p) in zip(layers, pairs):
        if (layer, kind) in slots:
            raise KVCacheError(f"cache inputs '{slots[(layer, kind)]}' and '{p.past}' are both the {kind}s of "
                               f"layer {layer}")
        slots[(layer, kind)] = p.past
        out.append(KVPair(layer, kind, p.past, p.present, p.past_shape, p.present_shape, p.dtype, p.batch_axis,
                          p.seq_axis, p.heads_axis, p.head_size_axis))
    for layer in sorted({p.layer for p in out if p.kind != "state"}):
        kinds = {p.kind for p in out if p.layer == layer and p.kind != "state"}
        if kinds != {"key", "value"}:
            missing = ({"key", "value"} - kinds).pop()
            have = next(p.past for p in out if p.layer == layer)
            raise KVCacheError(f"layer {layer} has a {kinds.pop()} cache ('{have}') but no {missing} cache")
    out.sort(key=lambda p: (p.layer, ("key", "value", "state").index(p.kind)))
    first = out[0]
    news = {n for *_, n, _ in pairs}
    for p in out:
        if p.past_shape[p.batch_axis] != first.past_shape[first.batch_axis]:
            raise KVCacheError(f"cache inputs '{first.past}' and '{p.past}' disagree on the batch "
                               f"({first.past_shape[0]} vs {p.past_shape[0]})")
        if p.past_len != first.past_len:
            raise KVCacheError(f"cache inputs '{first.past}' and '{p.past}' disagree on the past length "
                               f"({first.past_len} vs {p.past_len})")
    if len(news) > 1:
        raise KVCacheError(f"the present outputs add different numbers of tokens ({sorted(news)}); one step "
                           f"writes the same tokens into every layer")
    if len({p.dtype for p in out}) > 1:
        raise KVCacheError(f"cache tensors mix dtypes {sorted({p.dtype for p in out})}")

    def common(vals: Iterable[int | None]) -> int | None:
        s = set(vals)
        return s.pop() if len(s) == 1 else None

    return KVCache(tuple(out), form, first.past_shape[0], first.past_len, news.pop(),
                   common(p.past_shape[p.heads_axis] if p.heads_axis is not None else None for p in out),
                   common(p.past_shape[p.head_size_axis] if p.head_size_axis is not None else None for p in out),
                   first.dtype)


def cache_dims(model) -> dict[str, str]:
    """The symbols an ONNX decoder (a ModelProto) names its dims with, by role, read from its
    declared inputs before import, so a caller can size one decode step with
    ``load_onnx(path, dims={syms["batch"]: B, syms["past"]: L, syms["new"]: 1})``: ``batch`` (axis 0
    of the cache inputs), ``past`` (their other symbolic axis: the past length, or the buffer length
    of a TensorScatter cache) and ``new`` (the symbolic axis of ``input_ids`` or of the first
    integer input that is not a mask, besides the batch). A role the file does not name
    symbolically is left out; cache inputs are those whose names announce a cache."""
    inits = {t.name for t in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in inits and vi.type.HasField("tensor_type")]

    def syms(vi) -> list[tuple[int, str]]:
        return [(a, d.dim_param) for a, d in enumerate(vi.type.tensor_type.shape.dim)
                if not d.HasField("dim_value") and d.dim_param]

    out: dict[str, str] = {}
    for vi in inputs:
        if not announces_cache(vi.name):
            continue
        for axis, sym in syms(vi):
            role = "batch" if axis == 0 else "past"
            out.setdefault(role, sym)
    from onnx import TensorProto
    ints = (TensorProto.INT64, TensorProto.INT32)
    tokens = sorted((vi for vi in inputs if vi.type.tensor_type.elem_type in ints and "mask" not in vi.name.lower()
                     and len(vi.type.tensor_type.shape.dim) == 2), key=lambda vi: vi.name != "input_ids")
    for vi in tokens[:1]:
        for axis, sym in syms(vi):
            if axis == 0:
                out.setdefault("batch", sym)
            elif sym != out.get("batch"):
                out.setdefault("new", sym)
    return out


__all__ = ["KVCache", "KVPair", "KVCacheError", "find_kv_cache", "announces_cache", "cache_dims"]
