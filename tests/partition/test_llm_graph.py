"""Shape-only decoder graphs: weights are inputs (no arrays), the KV cache is device state, FLOPs of
a decode step, tensor-parallel shards, and the numerics of the LLM ops."""
import numpy as np
import pytest

from partition.llm.config import BUILTINS
from partition.llm.graph import Shard, SplitError, decoder_graph, stage_layers
from partition.llm.source import ConfigSource, source_for
from partition.ops import OPS, op_cost


def _weight_elems(g):
    return sum(v.type.size for v in g.inputs if v.name in g.meta["weights"])


@pytest.mark.parametrize("name", ["gpt2", "llama-2-7b", "mixtral-8x7b", "falcon-180b", "gpt-j-6b"])
def test_graph_weights_are_the_params(name):
    cfg = BUILTINS[name]
    g = decoder_graph(cfg, 2, 1, 16, layers=2, embed=True, head=True)
    g.lint()
    assert not g.constants or all(c.data.size == 1 for c in g.constants)  # no weight arrays
    per_layer = cfg.layer_params()
    assert _weight_elems(g) == cfg.params() - (cfg.layers - 2) * per_layer


def test_180b_builds_without_weight_arrays():
    g = decoder_graph(BUILTINS["falcon-180b"], 64, 1, 4096)
    assert _weight_elems(g) == BUILTINS["falcon-180b"].params()
    assert sum(c.data.nbytes for c in g.constants) <= 64  # only scalars: the weights are shapes


def test_kv_bytes_per_token_llama_2_7b():
    # 2 (K and V) x 32 layers x 4096 (32 heads x 128) x 2 bytes = 512 KiB
    assert ConfigSource(BUILTINS["llama-2-7b"]).kv_bytes_per_token(2) == 2 * 32 * 4096 * 2 == 512 * 1024
    g = decoder_graph(BUILTINS["llama-2-7b"], 1, 1, 1)
    kv = sum(v.type.size for v in g.inputs if v.name in g.meta["kv_cache"])
    assert kv * 2 == 512 * 1024


@pytest.mark.parametrize("name", ["llama-2-7b", "llama-3.1-8b", "gpt2", "mixtral-8x7b"])
def test_decode_flops_are_two_per_active_param(name):
    cfg = BUILTINS[name]
    b, ctx = 4, 8
    g = decoder_graph(cfg, b, 1, ctx)
    flops = sum(op_cost(n).flops for n in g.nodes if n.op in ("dense", "batch_matmul")
                and not n.meta.get("attention"))
    emb = cfg.vocab * cfg.hidden * (0 if cfg.tied_embeddings else 1) + \
        (cfg.max_positions * cfg.hidden if cfg.positions == "learned" else 0)
    matrices = cfg.active_params() - emb - cfg.vocab * cfg.hidden * (1 if not cfg.tied_embeddings else 0)
    # the input embedding is a gather (no FLOPs); every other matrix does 2 FLOPs per weight per token
    assert flops / (2 * b) == pytest.approx(cfg.active_params() - cfg.vocab * cfg.hidden
                                            - (cfg.max_positions * cfg.hidden if cfg.positions == "learned" else 0)
                                            + (cfg.vocab * cfg.hidden if cfg.tied_embeddings else 0), rel=0.002)
    assert matrices > 0


def test_attention_flops_grow_with_context():
    cfg = BUILTINS["llama-2-7b"]
    f = {}
    for ctx in (100, 200):
        g = decoder_graph(cfg, 1, 1, ctx)
        f[ctx] = sum(op_cost(n).flops for n in g.nodes if n.meta.get("attention") and n.op == "batch_matmul")
    assert f[200] == 2 * f[100] == 2 * (2 * 2 * cfg.layers * cfg.heads * cfg.head_dim * 100)


def test_tp_halves_weights_and_adds_all_reduce():
    cfg = BUILTINS["llama-2-7b"]
    g1 = decoder_graph(cfg, 1, 1, 8, layers=1)
    g2 = decoder_graph(cfg, 1, 1, 8, layers=1, tp=2)
    norms = 2 * cfg.hidden  # RMSNorm weights are replicated
    assert _weight_elems(g2) - norms / 2 == pytest.approx((_weight_elems(g1)) / 2, rel=1e-6)
    assert [n.op for n in g1.nodes].count("all_reduce") == 0
    ar = lambda g, part: [n.op for n in g.nodes if n.meta["part"] == part].count("all_reduce")  # noqa: E731
    assert ar(g2, "layer") == 2 and ar(g2, "embed") == 1  # attention, MLP; the vocabulary-parallel embedding
    g3 = decoder_graph(BUILTINS["gpt-j-6b"], 1, 1, 8, layers=1, tp=2)
    assert ar(g3, "layer") == 1  # parallel attention + MLP: one


def test_invalid_splits_one_line():
    with pytest.raises(SplitError, match="12 attention heads are not divisible by 5"):
        Shard.of(BUILTINS["gpt2"], 5)
    with pytest.raises(SplitError, match="key/value heads"):
        Shard.of(BUILTINS["qwen2.5-7b"], 7)   # 28 heads / 7 ok, 4 KV heads neither divide nor divided
    assert Shard.of(BUILTINS["llama-2-70b"], 16).kv_heads == 1  # 8 KV heads replicated over 16
    with pytest.raises(SplitError, match="cannot fill 13 pipeline stages"):
        stage_layers(12, 13)
    assert stage_layers(80, 3) == ((0, 27), (27, 27), (54, 26))


def test_pipeline_stage_graphs():
    cfg = BUILTINS["llama-3.2-1b"]
    mid = decoder_graph(cfg, 2, 1, 4, first_layer=4, layers=2)
    assert mid.nodes[0].op == "recv" and "send" in [n.op for n in mid.nodes] and "lm_head" not in [n.name for n in mid.nodes]
    last = decoder_graph(cfg, 2, 1, 4, first_layer=14, layers=2)
    assert last.nodes[-1].name == "lm_head"


def test_onnx_model_unreadable(tmp_path):
    p = tmp_path / "m.onnx"
    p.write_bytes(b"x")
    with pytest.raises(ValueError, match="not a readable ONNX file"):
        source_for(str(p))


# ---------------------------------------------------------------------------- op numerics
def test_rms_norm_reference():
    x = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
    g = np.linspace(0.5, 1.5, 8).astype(np.float32)
    y = OPS["rms_norm"].compute([x, g], {"epsilon": 1e-6})[0]
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * g
    np.testing.assert_allclose(y, ref, rtol=1e-5)


def test_rotary_embedding():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
    op = OPS["rotary_embedding"].compute
    y = op([x], {"position": 3})[0]
    # a rotation keeps each pair's norm; position 0 leaves the first token unchanged
    h = 4
    np.testing.assert_allclose(y[..., :h] ** 2 + y[..., h:] ** 2, x[..., :h] ** 2 + x[..., h:] ** 2, rtol=1e-5)
    np.testing.assert_allclose(op([x], {"position": 0})[0][:, :, 0], x[:, :, 0], rtol=1e-6)
    # the angle of pair i at position p is p * 10000^(-2i/d): hand-computed for pair 1, token 0
    ang = 3 * 10000 ** (-2 / 8)
    a, b = x[0, 0, 0, 1], x[0, 0, 0, 5]
    np.testing.assert_allclose(y[0, 0, 0, [1, 5]], [a * np.cos(ang) - b * np.sin(ang),
                                                    b * np.cos(ang) + a * np.sin(ang)], rtol=1e-5)
    part = op([x], {"position": 2, "rotary_dim": 4, "interleaved": 1})[0]
    np.testing.assert_array_equal(part[..., 4:], x[..., 4:])
    np.testing.assert_allclose(part[..., 0] ** 2 + part[..., 1] ** 2, x[..., 0] ** 2 + x[..., 1] ** 2, rtol=1e-5)


def test_kv_append_and_all_reduce():
    cache = np.zeros((1, 2, 4, 3), np.float32)
    new = np.ones((1, 2, 1, 3), np.float32)
    out = OPS["kv_append"].compute([cache, new], {})[0]
    assert out[:, :, 3].sum() == 6 and out[:, :, :3].sum() == 0
    a, b = np.ones((2, 2), np.float32), np.full((2, 2), 2, np.float32)
    np.testing.assert_array_equal(OPS["all_reduce"].compute([a, b], {"group_size": 2})[0], a + b)
    g = decoder_graph(BUILTINS["gpt2"], 1, 1, 4, layers=1)
    app = next(n for n in g.nodes if n.op == "kv_append")
    assert op_cost(app).bytes_in == app.inputs[1].type.nbytes  # in place: the new token only
