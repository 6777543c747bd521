"""An ONNX decoder exported with its KV cache as a ``DecoderSource`` (``accel-tune llm --model FILE.onnx``).

The file is one decode step: cache inputs (``past_key_values.*``, ``past_key``, a TensorScatter
buffer) and their ``present`` outputs, found by ``partition.onnx.kv_cache``. For a serving point it
gives the graph of ``B`` sequences x ``T`` new tokens at context ``L`` by sizing the file's symbolic
dims (``cache_dims``: batch, past length or cache buffer, new tokens): past ``L - T`` for a
concat-grown cache (0 at prefill: empty cache inputs), a buffer of ``L`` slots for a scatter-written
one. Then, on the imported graph:

- the cache write becomes ``kv_append`` into a device-resident buffer of the whole context (the
  built-in pipeline's in-place write, ``partition.llm.graph``): the step pays for its new tokens,
  never a copy of the cache; the cache inputs are that buffer and are listed in
  ``meta['kv_cache']``;
- the kernels whose shapes change with the past length (scores, mask, softmax, context product,
  and whatever the exporter wrote around them) carry ``meta['attention']``, found by importing the
  same point at a past one token longer and comparing shapes node by node, so the serving model
  costs them per KV block over the growing context exactly as it does the built-ins';
- float constants of more than one element become weight inputs (``meta['weights']``), so the
  serving model counts their bytes in ``--dtype``'s storage; the head split/merge transposes
  (perm ``(0,2,1,3)``, ``(0,1,3,2)``) are views, as in the built-in graphs, and so are a cast to
  the type it already has and an expand to the shape it already has.

The file's layers are not separated (an exporter's layer boundaries are not in the graph): the whole
step is one graph whose nodes carry ``meta['part'] = 'model'`` (costed once per pass), so ``--tp`` and
``--pp`` need a configuration instead. A file traced at one new token (a Reshape with the token
count baked in) cannot be sized at ``T > 1``: its prefill is then costed as ``B x T`` one-token
sequences at the same context, exact for the token-wise kernels, an over-count of the K/V reads of
the attention ones (``describe()['prefill']`` says which).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..ir import Graph, clone_graph
from .config import ConfigError
from .graph import SplitError

_VIEW_PERMS = ((0, 2, 1, 3), (0, 1, 3, 2))


def _import(model, dims: dict[str, int], empty: frozenset[str]) -> Graph:
    from ..onnx.importer import load_onnx
    return load_onnx(model, dims=dims, empty_dims=empty)


@dataclass(frozen=True)
class OnnxSource:
    """A decoder given as an ONNX decode step with its KV cache (see the module docstring)."""
    path: str
    model: Any = field(repr=False, compare=False)       # onnx.ModelProto
    syms: tuple[tuple[str, str], ...] = ()               # role -> the file's dim symbol
    extra_syms: tuple[tuple[str, str], ...] = ()         # other symbols: (symbol, 'context' | 'new')
    form: str = "concat"
    cache_names: tuple[str, ...] = ()
    per_token_elems: int = 0                             # K/V elements of one token, all layers
    n_layers: int = 1
    kv_heads: int | None = None
    head_dim: int | None = None
    cache_dtype: str = "float32"
    multi_token: bool = True
    # graphs already built, by (batch, tokens, context, dtype): a serving point asks for the prefill
    # graph twice (its kernels and its attention); callers get a copy
    built: dict = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: str | Path) -> "OnnxSource":
        """Read ``path``; a file that is not an ONNX decoder with a KV cache of the form the serving
        model reads is one line (ConfigError)."""
        import onnx
        from ..onnx.errors import OnnxImportError
        from ..onnx.kv_cache import cache_dims, find_kv_cache
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"no ONNX file {path}")
        try:
            model = onnx.load(str(p))
        except Exception as e:  # protobuf's DecodeError and friends
            raise ConfigError(f"--model {path}: not a readable ONNX file ({type(e).__name__})") from None
        syms = cache_dims(model)
        extra = _other_symbols(model, syms)
        try:
            with warnings.catch_warnings():  # a file without cache dims warns of its batch: not the error to show
                warnings.simplefilter("ignore")
                probe = {s: 1 for s in syms.values()} | ({syms["past"]: 2} if "past" in syms else {})
                g = _import(model, probe | {sym: 3 if role == "context" else 1 for sym, role in extra}, frozenset())
            kv = find_kv_cache(g)
        except OnnxImportError as e:
            raise ConfigError(f"--model {path}: {e}") from None
        if kv is None:
            raise ConfigError(f"--model {path}: no KV cache (no cache input with its present output); "
                              f"`llm` takes a decode step exported with past_key_values/present, an Attention op "
                              f"with past key/value, or a TensorScatter cache")
        for role in ("batch", "past", "new"):
            if role not in syms:
                what = {"batch": "batch (axis 0 of the cache inputs)", "past": "past length of the cache inputs",
                        "new": "new-token count of input_ids"}[role]
                raise ConfigError(f"--model {path}: the file does not name its {what} with a symbolic dimension, "
                                  f"so it cannot be sized for other batches and contexts")
        bad = [pr for pr in kv.pairs if len(pr.past_shape) != 4 or pr.seq_axis != 2 or pr.kind == "state"]
        if bad:
            raise ConfigError(f"--model {path}: cache input '{bad[0].past}' {list(bad[0].past_shape)} is not a "
                              f"(batch, heads, tokens, head size) key/value cache, the layout `llm` costs")
        per_tok = sum(int(np.prod([d for a, d in enumerate(pr.past_shape) if a not in (0, 2)])) for pr in kv.pairs)
        try:  # a decode step at T = 2 imports only when the file was not traced at one token
            _import(model, {syms["batch"]: 1, syms["past"]: 2, syms["new"]: 2}
                    | {sym: 4 if role == "context" else 2 for sym, role in extra}, frozenset())
            multi = True
        except OnnxImportError:
            multi = False
        return cls(str(p), model, tuple(sorted(syms.items())), extra, kv.form, kv.inputs, per_tok, kv.layers, kv.heads,
                   kv.head_size, kv.dtype, multi)

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def layers(self) -> int:
        return self.n_layers

    # ------------------------------------------------------------------ graphs
    def _sized(self, batch: int, tokens: int, context: int, extra: int = 0) -> Graph:
        from ..onnx.errors import OnnxImportError
        try:
            return self._sized_as_is(batch, tokens, context, extra)
        except OnnxImportError as e:  # e.g. a learned position table shorter than the context
            raise ConfigError(f"{self.name} cannot be sized at {batch} sequences x {tokens} new tokens at context "
                              f"{context + extra}: {e}") from None

    def _sized_as_is(self, batch: int, tokens: int, context: int, extra: int) -> Graph:
        s = dict(self.syms)
        past = context if self.form == "scatter" else context - tokens
        dims = {s["batch"]: batch, s["past"]: past + extra, s["new"]: tokens}
        dims |= {sym: context + extra if role == "context" else tokens for sym, role in self.extra_syms}
        return _import(self.model, dims, frozenset({s["past"]}))

    def graph(self, batch, tokens, context, *, tp=1, first_layer=0, layers=None, embed=None, head=None,
              dtype="float16") -> Graph:
        """The whole step for ``batch`` sequences x ``tokens`` new tokens at ``context``, whatever
        ``layers``, ``embed`` and ``head`` ask: its nodes are part 'model', costed once per pass,
        which is the whole model (``check_split`` admits one device and one stage only)."""
        for what, v in (("batch", batch), ("tokens", tokens), ("context", context)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SplitError(f"{what} must be an integer >= 1, got {v!r}")
        if tokens > context:
            raise SplitError(f"{tokens} new tokens exceed the context of {context}")
        if tp != 1 or first_layer != 0:
            raise SplitError(f"{self.name}: an ONNX decoder is costed as one graph on one device")
        key = (batch, tokens, context, dtype)
        if key not in self.built:
            self.built[key] = self._build(batch, tokens, context, dtype)
        return clone_graph(self.built[key])

    def _build(self, batch: int, tokens: int, context: int, dtype: str) -> Graph:
        folded = tokens > 1 and not self.multi_token
        b, t = (batch * tokens, 1) if folded else (batch, tokens)
        g = self._sized(b, t, context)
        longer = self._sized(b, t, context, extra=1)
        shapes = {n.name: [tuple(v.shape) for v in (*n.inputs, *n.outputs)] for n in longer.nodes}
        _in_place(g)
        for n in g.nodes:
            n.meta["part"] = "model"
            if n.op != "kv_append" and n.name in shapes and shapes[n.name] != [tuple(v.shape) for v in
                                                                               (*n.inputs, *n.outputs)]:
                n.meta["attention"] = True
            if n.op == "transpose" and tuple(n.attrs.get("perm", ())) in _VIEW_PERMS:
                n.meta["view"] = True
            elif n.op in ("cast", "expand") and n.inputs and n.inputs[0].type == n.outputs[0].type:
                n.meta["view"] = True  # a cast to its own type, an expand to its own shape: no data moves
        weights = _weights_as_inputs(g)
        phase = "prefill" if tokens == context else ("decode" if tokens == 1 else "extend")
        g.meta.update(model=self.name, phase=phase, batch=batch, tokens=tokens, context=context, tp=1,
                      first_layer=0, layers=self.layers, weights=weights, kv_cache=self.cache_names,
                      dtype=dtype, folded_prefill=folded)
        return g

    # ------------------------------------------------------------------ checks and sizes
    def check_split(self, tp: int, pp: int) -> None:
        if tp != 1 or pp != 1:
            raise SplitError(f"--tp {tp} --pp {pp}: {self.name} is an ONNX decoder, costed whole on one device; "
                             f"tensor/pipeline parallel needs its configuration (a built-in name or config.json)")

    def check_context(self, tokens: int) -> None:
        """Nothing to check: a learned position table is a constant the file slices, not a
        declared size (docs/LLM.md)."""

    def kv_bytes_per_token(self, elem_bytes: float) -> float:
        """K and V of every layer for one token of one sequence, read from the cache's shapes."""
        return self.per_token_elems * elem_bytes

    def params(self) -> int:
        """Elements of the float initializers of more than one element (the weights)."""
        from onnx import TensorProto
        floats = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE)
        return int(sum(int(np.prod(t.dims)) for t in self.model.graph.initializer
                       if t.data_type in floats and len(t.dims) and int(np.prod(t.dims)) > 1))

    def describe(self) -> dict[str, Any]:
        out = next((o for o in self.model.graph.output if o.name not in set(self._presents())), None)
        vocab = None
        if out is not None and out.type.tensor_type.shape.dim:
            d = out.type.tensor_type.shape.dim[-1]
            vocab = int(d.dim_value) if d.HasField("dim_value") else None
        return {"name": self.name, "params": self.params(), "layers": self.layers, "kv_heads": self.kv_heads,
                "head_dim": self.head_dim, "vocab": vocab, "kv_form": self.form, "kv_dtype": self.cache_dtype,
                "kv_cache_inputs": list(self.cache_names),
                "dims": dict(self.syms) | {sym: f"{role} (from the input's role)" for sym, role in self.extra_syms},
                "prefill": "multi-token graph" if self.multi_token else
                           "folded: B x T one-token sequences (the file was traced at one new token)",
                "source": f"onnx:{self.path}"}

    def _presents(self) -> list[str]:
        return [o.name for o in self.model.graph.output if o.name.lower().startswith("present")]


def _other_symbols(model, syms: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """Plain symbols of the inputs besides batch, past and new that a decode step's structure
    settles: the last axis of a mask input is the context (optimum's ``total_sequence_length``),
    an axis after the batch of an integer ``position*`` input is the new tokens."""
    from onnx import TensorProto
    known = set(syms.values())
    inits = {t.name for t in model.graph.initializer}
    out: dict[str, str] = {}
    for vi in model.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        dims = vi.type.tensor_type.shape.dim
        name = vi.name.lower()
        for axis, d in enumerate(dims):
            sym = d.dim_param if not d.HasField("dim_value") else ""
            if not sym or sym in known or not sym.replace("_", "").isalnum():
                continue
            if "mask" in name and axis == len(dims) - 1:
                out.setdefault(sym, "context")
            elif "position" in name and axis >= 1 and vi.type.tensor_type.elem_type in (TensorProto.INT64,
                                                                                         TensorProto.INT32):
                out.setdefault(sym, "new")
    return tuple(sorted(out.items()))


def _in_place(g: Graph) -> None:
    """Every cache write (concat of past and new, or TensorScatter) becomes ``kv_append`` into a
    buffer of the whole context, named as the cache input it replaces."""
    from ..onnx.kv_cache import find_kv_cache
    kv = find_kv_cache(g)
    by_present = {p.present: p for p in kv.pairs}
    for out in list(g.outputs):
        pr = by_present.get(out.name)
        if pr is None:
            continue
        v = out
        while v.producer is not None and v.producer.op not in ("concat", "tensor_scatter"):
            v = v.producer.inputs[0]
        node = v.producer
        past = next(x for x in g.inputs if x.name == pr.past)
        new = node.inputs[-1] if node.op == "concat" else node.inputs[1]
        buf = past if node.op == "tensor_scatter" else g.add_input(f"{pr.past}.context", v.shape, v.dtype)
        app = g.add_node("kv_append", [buf, new], {}, name=f"{node.name}.kv_append")
        g.replace_all_uses(v, app.output)
        g.erase_node(node)
        g.rename(app.output, v.name)  # the present output keeps its name (device-resident marks)
        g.eliminate_dead_code()      # the copies (identity, one-input concat) between past and the write
        if buf is not past:
            if past.users:
                raise ConfigError(f"cache input '{pr.past}' is read outside its write; `llm` costs a cache "
                                  f"written in place")
            g.inputs.remove(past)
            g._names.discard(past.name)
            g.rename(buf, pr.past)
    g.eliminate_dead_code()
    g.toposort()


def _weights_as_inputs(g: Graph) -> tuple[str, ...]:
    """Float constants of more than one element become graph inputs (shapes only), in order."""
    names = []
    for c in list(g.constants):
        if np.dtype(c.dtype).kind != "f" or c.type.size <= 1 or not c.users:
            continue
        w = g.add_input(f"{c.name}.weight", c.shape, c.dtype)
        g.replace_all_uses(c, w)
        names.append(w.name)
    g.constants = [c for c in g.constants if c.users]
    return tuple(names)


__all__ = ["OnnxSource"]
