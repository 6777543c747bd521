"""Shape-only IR graphs of a decoder: ``B`` sequences x ``T`` new tokens at context ``L`` (the past
``L - T`` tokens and the ``T`` new ones), for one device of a tensor- and pipeline-parallel split.

Prefill is ``T = L = I``; one decode step is ``T = 1`` at context ``L``. Weights are graph inputs
(shapes and dtypes, never arrays: a 180B model builds in megabytes), listed in ``graph.meta['weights']``;
the KV cache is device-resident state: inputs ``layers.<i>.k_cache`` / ``v_cache`` of the whole
context, written in place by ``kv_append`` (the new tokens only) and returned as ``present`` outputs,
listed in ``graph.meta['kv_cache']``.

Tensor parallel (``tp``) is a transformation of the shapes, Megatron-style: each device holds
``heads / tp`` query heads and ``kv_heads / tp`` key/value heads (replicated when ``tp`` is a multiple
of ``kv_heads``), ``ffn / tp`` MLP columns (of every expert), ``ceil(vocab / tp)`` rows of the
embedding and LM head; an ``all_reduce`` follows the attention output projection and the MLP down
projection (one per layer for parallel attention/MLP) and the vocabulary-parallel embedding.
Pipeline parallel takes layers ``[first_layer, first_layer + layers)``; the first stage embeds, a
later stage starts with ``recv``, the last stage ends with the final norm and the LM head on the
last position of each sequence, an earlier one with ``send``.

Every node carries ``meta['part']`` (``embed``, ``layer``, ``head``, ``link``); the nodes whose cost
grows with the context (attention scores, mask, softmax, context product) carry
``meta['attention']``; the head split/merge reshapes and transposes carry ``meta['view']`` (they are
the attention kernel's addressing, not copies)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Graph, Value
from .config import DecoderConfig


class SplitError(ValueError):
    """A tensor/pipeline split the model cannot take (heads not divisible by tp, ...)."""


@dataclass(frozen=True)
class Shard:
    """The per-device sizes of a tensor-parallel split of ``cfg`` over ``tp`` devices."""
    tp: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int

    @classmethod
    def of(cls, cfg: DecoderConfig, tp: int) -> "Shard":
        if tp < 1:
            raise SplitError(f"--tp must be >= 1, got {tp}")
        if cfg.heads % tp:
            raise SplitError(f"--tp {tp}: {cfg.name}'s {cfg.heads} attention heads are not divisible by {tp}")
        if cfg.kv_heads % tp == 0:
            kv = cfg.kv_heads // tp
        elif tp % cfg.kv_heads == 0:
            kv = 1  # each device keeps a copy of the one KV head its query heads share
        else:
            raise SplitError(f"--tp {tp}: {cfg.name}'s {cfg.kv_heads} key/value heads neither divide by {tp} "
                             f"nor divide {tp}")
        if cfg.ffn % tp:
            raise SplitError(f"--tp {tp}: {cfg.name}'s MLP size {cfg.ffn} is not divisible by {tp}")
        return cls(tp, cfg.heads // tp, kv, cfg.ffn // tp, -(-cfg.vocab // tp))

    @property
    def group(self) -> int:
        """Query heads per key/value head on one device."""
        return self.heads // self.kv_heads


def stage_layers(layers: int, pp: int) -> tuple[tuple[int, int], ...]:
    """(first layer, layer count) of each of ``pp`` pipeline stages: as even as possible, the
    earlier stages taking the remainder."""
    if pp < 1:
        raise SplitError(f"--pp must be >= 1, got {pp}")
    if pp > layers:
        raise SplitError(f"--pp {pp}: a model of {layers} layers cannot fill {pp} pipeline stages")
    base, extra = divmod(layers, pp)
    out, start = [], 0
    for s in range(pp):
        n = base + (s < extra)
        out.append((start, n))
        start += n
    return tuple(out)


class _Builder:
    def __init__(self, cfg: DecoderConfig, shard: Shard, batch: int, tokens: int, context: int, dtype: str,
                 name: str):
        self.cfg, self.sh, self.b, self.t, self.l = cfg, shard, batch, tokens, context
        self.dtype = dtype
        self.g = Graph(name)
        self.weights: list[str] = []
        self.kv: list[str] = []
        self.part = "layer"

    def weight(self, name: str, shape) -> Value:
        v = self.g.add_input(name, shape, self.dtype)
        self.weights.append(v.name)
        return v

    def op(self, op: str, ins, attrs=None, name=None, **meta) -> Value:
        n = self.g.add_node(op, list(ins), attrs or {}, name=name)
        n.meta["part"] = self.part
        n.meta.update(meta)
        return n.output

    def dense(self, x: Value, out: int, name: str, bias: bool) -> Value:
        ins = [x, self.weight(f"{name}.weight", (out, x.shape[-1]))]
        if bias:
            ins.append(self.weight(f"{name}.bias", (out,)))
        return self.op("dense", ins, name=name)

    def norm(self, x: Value, name: str) -> Value:
        d = self.cfg.hidden
        if self.cfg.norm == "rms":
            return self.op("rms_norm", [x, self.weight(f"{name}.weight", (d,))], {"epsilon": 1e-5}, name=name)
        return self.op("layer_norm", [x, self.weight(f"{name}.weight", (d,)), self.weight(f"{name}.bias", (d,))],
                       {"axis": -1, "epsilon": 1e-5}, name=name)

    def all_reduce(self, x: Value, name: str) -> Value:
        if self.sh.tp == 1:
            return x
        return self.op("all_reduce", [x], {"group_size": self.sh.tp}, name=name)

    # ------------------------------------------------------------------ attention
    def attention(self, h: Value, i: int, mask: Value) -> Value:
        cfg, sh, b, t, l = self.cfg, self.sh, self.b, self.t, self.l
        dh, g = cfg.head_dim, sh.group
        p = f"layers.{i}.attn"
        q = self.dense(h, sh.heads * dh, f"{p}.q_proj", cfg.qkv_bias)
        k = self.dense(h, sh.kv_heads * dh, f"{p}.k_proj", cfg.qkv_bias)
        v = self.dense(h, sh.kv_heads * dh, f"{p}.v_proj", cfg.qkv_bias)
        view = {"view": True}
        q = self.op("transpose", [self.op("reshape", [q], {"shape": (b, t, sh.heads, dh)}, **view)],
                    {"perm": (0, 2, 1, 3)}, **view)
        k = self.op("transpose", [self.op("reshape", [k], {"shape": (b, t, sh.kv_heads, dh)}, **view)],
                    {"perm": (0, 2, 1, 3)}, **view)
        v = self.op("transpose", [self.op("reshape", [v], {"shape": (b, t, sh.kv_heads, dh)}, **view)],
                    {"perm": (0, 2, 1, 3)}, **view)
        if cfg.positions == "rotary":
            rot = {"position": l - t, "rotary_dim": cfg.rotary_dim, "theta": float(cfg.rope_theta),
                   "interleaved": int(cfg.name == "gpt-j-6b" or cfg.source.endswith("(gptj)"))}
            q = self.op("rotary_embedding", [q], rot, name=f"{p}.rotary_q")
            k = self.op("rotary_embedding", [k], rot, name=f"{p}.rotary_k")
        caches = []
        for which, new in (("k", k), ("v", v)):
            c = self.g.add_input(f"layers.{i}.{which}_cache", (b, sh.kv_heads, l, dh), self.dtype)
            self.kv.append(c.name)
            caches.append(self.op("kv_append", [c, new], name=f"layers.{i}.{which}_append"))
        k_all, v_all = caches
        # GQA: the g query heads of one KV head are rows of one product with that head's keys
        qg = self.op("reshape", [q], {"shape": (b, sh.kv_heads, g * t, dh)}, **view)
        att = {"attention": True}
        s = self.op("batch_matmul", [qg, k_all], {"transpose_b": True}, name=f"{p}.scores", **att)
        s = self.op("add", [s, mask], name=f"{p}.mask", **att)
        pr = self.op("softmax", [s], {"axis": -1}, name=f"{p}.softmax", **att)
        ctx = self.op("batch_matmul", [pr, v_all], name=f"{p}.context", **att)
        ctx = self.op("reshape", [ctx], {"shape": (b, sh.heads, t, dh)}, **view)
        ctx = self.op("transpose", [ctx], {"perm": (0, 2, 1, 3)}, **view)
        ctx = self.op("reshape", [ctx], {"shape": (b, t, sh.heads * dh)}, **view)
        return self.dense(ctx, cfg.hidden, f"{p}.o_proj", cfg.out_bias)

    # ------------------------------------------------------------------ MLP
    def mlp(self, h: Value, i: int) -> Value:
        cfg, sh = self.cfg, self.sh
        p = f"layers.{i}.mlp"
        if cfg.moe:
            return self.moe(h, i)
        if cfg.activation == "silu_gated":
            gate = self.dense(h, sh.ffn, f"{p}.gate_proj", cfg.mlp_bias)
            up = self.dense(h, sh.ffn, f"{p}.up_proj", cfg.mlp_bias)
            a = self.op("mul", [self.op("silu", [gate], name=f"{p}.act"), up], name=f"{p}.gated")
        else:
            a = self.act(self.dense(h, sh.ffn, f"{p}.up_proj", cfg.mlp_bias), f"{p}.act")
        return self.dense(a, cfg.hidden, f"{p}.down_proj", cfg.mlp_bias)

    def act(self, x: Value, name: str) -> Value:
        a = self.cfg.activation
        if a == "relu":
            return self.op("relu", [x], name=name)
        return self.op("gelu", [x], {"approximate": "tanh" if a == "gelu_tanh" else "none"}, name=name)

    def moe(self, h: Value, i: int) -> Value:
        """Top-k routing with tokens spread evenly over the experts (``ceil(B*T*k / E)`` per expert,
        padded): router, softmax and top-k, a gather of each expert's tokens, the experts as batched
        products over stacked weights, a gather back and the weighted sum of the k results."""
        cfg, sh, b, t = self.cfg, self.sh, self.b, self.t
        e, k, d = cfg.experts, cfg.experts_per_token, cfg.hidden
        p = f"layers.{i}.moe"
        n = b * t
        ea = min(e, n * k)      # experts that receive a token (all of them once B*T*k >= E)
        per = -(-n * k // ea)
        logits = self.dense(h, e, f"{p}.router", False)
        probs = self.op("softmax", [logits], {"axis": -1}, name=f"{p}.router_softmax")
        top = self.g.add_node("topk", [probs], {"k": k, "axis": -1}, name=f"{p}.topk")  # values, indices
        top.meta["part"] = self.part
        weights = top.outputs[0]
        flat = self.op("reshape", [h], {"shape": (n, d)}, view=True)
        slots = self.g.add_input(f"{p}.expert_slots", (ea * per,), "int64")
        xe = self.op("reshape", [self.op("gather", [flat, slots], {"axis": 0}, name=f"{p}.dispatch")],
                     {"shape": (ea, per, d)}, view=True)

        def used(w: Value) -> Value:  # the experts that run (expert_slots orders them first)
            return w if ea == e else self.op("slice", [w], {"starts": (0,), "ends": (ea,), "axes": (0,)}, view=True)
        w1 = self.weight(f"{p}.experts.gate_up", (e, d, 2 * sh.ffn) if cfg.activation == "silu_gated" else (e, d, sh.ffn))
        up = self.op("batch_matmul", [xe, used(w1)], name=f"{p}.experts.up")
        if cfg.activation == "silu_gated":
            gate = self.op("slice", [up], {"starts": (0,), "ends": (sh.ffn,), "axes": (2,)}, view=True)
            lin = self.op("slice", [up], {"starts": (sh.ffn,), "ends": (2 * sh.ffn,), "axes": (2,)}, view=True)
            a = self.op("mul", [self.op("silu", [gate], name=f"{p}.act"), lin], name=f"{p}.gated")
        else:
            a = self.act(up, f"{p}.act")
        w2 = self.weight(f"{p}.experts.down", (e, sh.ffn, d))
        y = self.op("reshape", [self.op("batch_matmul", [a, used(w2)], name=f"{p}.experts.down")], {"shape": (ea * per, d)},
                    view=True)
        back = self.g.add_input(f"{p}.token_slots", (n * k,), "int64")
        yk = self.op("reshape", [self.op("gather", [y, back], {"axis": 0}, name=f"{p}.combine")],
                     {"shape": (b, t, k, d)}, view=True)
        wk = self.op("reshape", [weights], {"shape": (b, t, k, 1)}, view=True)
        return self.op("reduce_sum", [self.op("mul", [yk, wk], name=f"{p}.weigh")],
                       {"axes": (2,), "keepdims": 0}, name=f"{p}.sum")

    # ------------------------------------------------------------------ layer
    def layer(self, x: Value, i: int, mask: Value) -> Value:
        cfg = self.cfg
        if cfg.parallel_attn:
            h = self.norm(x, f"layers.{i}.ln_attn" if cfg.parallel_norms == 2 else f"layers.{i}.ln")
            hm = self.norm(x, f"layers.{i}.ln_mlp") if cfg.parallel_norms == 2 else h
            both = self.op("add", [self.attention(h, i, mask), self.mlp(hm, i)], name=f"layers.{i}.parallel_sum")
            return self.op("add", [x, self.all_reduce(both, f"layers.{i}.all_reduce")], name=f"layers.{i}.residual")
        a = self.attention(self.norm(x, f"layers.{i}.input_norm"), i, mask)
        x = self.op("add", [x, self.all_reduce(a, f"layers.{i}.attn_all_reduce")], name=f"layers.{i}.attn_residual")
        m = self.mlp(self.norm(x, f"layers.{i}.post_attention_norm"), i)
        return self.op("add", [x, self.all_reduce(m, f"layers.{i}.mlp_all_reduce")], name=f"layers.{i}.mlp_residual")


def decoder_graph(cfg: DecoderConfig, batch: int, tokens: int, context: int, *, tp: int = 1,
                  first_layer: int = 0, layers: int | None = None, embed: bool | None = None,
                  head: bool | None = None, dtype: str = "float16") -> Graph:
    """One device's graph of ``batch`` sequences x ``tokens`` new tokens at ``context`` (see the
    module docstring). ``layers`` defaults to all of them; ``embed`` / ``head`` default to whether
    the range starts at the first layer / ends at the last."""
    for what, v in (("batch", batch), ("tokens", tokens), ("context", context)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SplitError(f"{what} must be an integer >= 1, got {v!r}")
    if tokens > context:
        raise SplitError(f"{tokens} new tokens exceed the context of {context}")
    n = cfg.layers - first_layer if layers is None else layers
    if not (0 <= first_layer and 1 <= n and first_layer + n <= cfg.layers):
        raise SplitError(f"layers {first_layer}..{first_layer + n - 1} are not layers of {cfg.name} "
                         f"(0..{cfg.layers - 1})")
    embed = first_layer == 0 if embed is None else embed
    head = first_layer + n == cfg.layers if head is None else head
    sh = Shard.of(cfg, tp)
    phase = "prefill" if tokens == context else ("decode" if tokens == 1 else "extend")
    bld = _Builder(cfg, sh, batch, tokens, context, dtype, f"{cfg.name}.{phase}")
    g = bld.g
    d = cfg.hidden
    if embed:
        bld.part = "embed"
        ids = g.add_input("input_ids", (batch, tokens), "int64")
        table = bld.weight("embed_tokens.weight", (sh.vocab, d))
        x = bld.all_reduce(bld.op("gather", [table, ids], {"axis": 0}, name="embed_tokens"), "embed_all_reduce")
        if cfg.positions == "learned":
            pos = g.add_input("position_ids", (batch, tokens), "int64")
            pe = bld.op("gather", [bld.weight("embed_positions.weight", (cfg.max_positions, d)), pos],
                        {"axis": 0}, name="embed_positions")
            x = bld.op("add", [x, pe], name="embed_sum")
    else:
        bld.part = "link"
        x = bld.op("recv", [g.add_input("hidden_in", (batch, tokens, d), dtype)], {"peer": 0}, name="recv")
    bld.part = "layer"
    mask = g.add_input("attention_bias", (1, 1, sh.group * tokens, context), dtype)
    for i in range(first_layer, first_layer + n):
        x = bld.layer(x, i, mask)
    outs = []
    if head:
        bld.part = "head"
        last = bld.op("gather", [x, g.add_const(np.int64(tokens - 1), "last_position")], {"axis": 1},
                      name="last_token") if tokens > 1 else bld.op("reshape", [x], {"shape": (batch, d)}, view=True)
        h = bld.norm(last, "final_norm")
        w = g.node_by_name("embed_tokens").inputs[0] if (cfg.tied_embeddings and embed) else \
            bld.weight("lm_head.weight" if not cfg.tied_embeddings else "embed_tokens.weight", (sh.vocab, d))
        ins = [h, w] + ([bld.weight("lm_head.bias", (sh.vocab,))] if cfg.lm_head_bias else [])
        outs.append(bld.op("dense", ins, name="lm_head"))
    else:
        bld.part = "link"
        outs.append(bld.op("send", [x], {"peer": 1}, name="send"))
    present = [n.output for n in g.nodes if n.op == "kv_append"]
    g.set_outputs(outs + present)
    g.meta.update(model=cfg.name, phase=phase, batch=batch, tokens=tokens, context=context, tp=tp,
                  first_layer=first_layer, layers=n, weights=tuple(bld.weights), kv_cache=tuple(bld.kv),
                  dtype=dtype, source=f"llm:{cfg.name}")
    return g


__all__ = ["decoder_graph", "Shard", "SplitError", "stage_layers"]
