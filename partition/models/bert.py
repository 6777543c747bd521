"""BERT encoders with the pooler (the transformers BertModel layout, post-LayerNorm, exact GELU)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..builder import GraphBuilder
from ..ir import Graph, Value


@dataclass(frozen=True)
class BertConfig:
    layers: int
    hidden: int
    heads: int
    intermediate: int
    seq: int = 128
    vocab: int = 30522
    max_positions: int = 512
    type_vocab: int = 2


CONFIGS = {
    "bert_base": BertConfig(layers=12, hidden=768, heads=12, intermediate=3072),
    "bert_tiny": BertConfig(layers=2, hidden=128, heads=2, intermediate=512),
}


def _heads(b: GraphBuilder, x: Value, cfg: BertConfig, perm: tuple[int, ...], name: str) -> Value:
    dh = cfg.hidden // cfg.heads
    y = b.reshape(x, shape=(1, cfg.seq, cfg.heads, dh), name=f"{name}.split_heads")
    return b.transpose(y, perm=perm, name=f"{name}.transpose")


def _layer(b: GraphBuilder, h: Value, mask: Value, cfg: BertConfig, name: str) -> Value:
    dh = cfg.hidden // cfg.heads
    q = _heads(b, b.dense(h, cfg.hidden, name=f"{name}.attention.query"), cfg, (0, 2, 1, 3), f"{name}.q")
    k = _heads(b, b.dense(h, cfg.hidden, name=f"{name}.attention.key"), cfg, (0, 2, 3, 1), f"{name}.k")
    v = _heads(b, b.dense(h, cfg.hidden, name=f"{name}.attention.value"), cfg, (0, 2, 1, 3), f"{name}.v")
    scores = b.matmul(q, k, name=f"{name}.scores")
    scores = b.mul(scores, b.const(np.float32(1.0 / np.sqrt(dh)), f"{name}.scale"), name=f"{name}.scaled")
    probs = b.softmax(b.add(scores, mask, name=f"{name}.masked"), axis=-1, name=f"{name}.softmax")
    ctx = b.matmul(probs, v, name=f"{name}.context")
    ctx = b.transpose(ctx, perm=(0, 2, 1, 3), name=f"{name}.merge")
    ctx = b.reshape(ctx, shape=(1, cfg.seq, cfg.hidden), name=f"{name}.merge_heads")
    attn = b.dense(ctx, cfg.hidden, name=f"{name}.attention.output")
    h = b.layer_norm(b.add(attn, h, name=f"{name}.attention.residual"), name=f"{name}.attention.LayerNorm")
    f = b.gelu(b.dense(h, cfg.intermediate, name=f"{name}.intermediate"), approximate="none",
               name=f"{name}.gelu")
    f = b.dense(f, cfg.hidden, name=f"{name}.output")
    return b.layer_norm(b.add(f, h, name=f"{name}.output.residual"), name=f"{name}.output.LayerNorm")


def build(name: str, seed: int = 0) -> Graph:
    cfg = CONFIGS[name]
    b = GraphBuilder.for_model(name, seed)
    ids = b.input("input_ids", (1, cfg.seq), "int64")
    mask_in = b.input("attention_mask", (1, cfg.seq), "int64")

    # Embeddings: tables at std 0.02 as in BERT's initializer; token types are all segment 0.
    word = b.gather(b.normal("embeddings.word_embeddings.weight", (cfg.vocab, cfg.hidden), 0.02), ids,
                    axis=0, name="embeddings.word")
    pos = b.gather(b.normal("embeddings.position_embeddings.weight", (cfg.max_positions, cfg.hidden), 0.02),
                   b.const(np.arange(cfg.seq, dtype=np.int64)[None], "position_ids"), axis=0,
                   name="embeddings.position")
    typ = b.gather(b.normal("embeddings.token_type_embeddings.weight", (cfg.type_vocab, cfg.hidden), 0.02),
                   b.const(np.zeros((1, cfg.seq), dtype=np.int64), "token_type_ids"), axis=0,
                   name="embeddings.token_type")
    emb = b.add(b.add(word, pos, name="embeddings.add"), typ, name="embeddings.add_1")
    h = b.layer_norm(emb, name="embeddings.LayerNorm")

    # Extended mask: 0 where attended, -10000 where masked, broadcast over heads and queries.
    m = b.cast(mask_in, dtype="float32", name="mask.cast")
    m = b.reshape(m, shape=(1, 1, 1, cfg.seq), name="mask.reshape")
    m = b.sub(b.const(np.float32(1.0), "mask.one"), m, name="mask.invert")
    mask = b.mul(m, b.const(np.float32(-10000.0), "mask.neg_inf"), name="mask.bias")

    for i in range(cfg.layers):
        h = _layer(b, h, mask, cfg, f"encoder.layer.{i}")
    cls = b.gather(h, b.const(np.int64(0), "cls_index"), axis=1, name="pooler.cls")
    pooled = b.tanh(b.dense(cls, cfg.hidden, name="pooler.dense"), name="pooler.tanh")
    return b.finish([h, pooled], model=name)
