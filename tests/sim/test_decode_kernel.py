"""The decode attention kernel an engine runs (grouped or per query head) and the 16-bit links of an
fp8 engine, checked against the bounds computed here from shapes and the preset's numbers."""
import pytest

import sim
from partition.llm.config import DecoderConfig
from partition.llm.graph import decoder_graph
from partition.llm.source import ConfigSource
from sim.graph import collective
from sim.graph.phase_kernels import Storage, default_coster, kernel_times
from sim.graph.serving import ServingError, ServingPoint, serve

# 16 query heads over 2 KV heads of 32: eight query heads per KV head, like llama-2-70b's
GQA = DecoderConfig("gqa", 2, 512, 16, 2, 1024, 1000, max_positions=4096)
MHA = DecoderConfig("mha", 2, 512, 16, 16, 1024, 1000, max_positions=4096)


@pytest.fixture(scope="module")
def a100():
    return sim.load_hw("a100-sxm-80gb")


def _attention_products(cfg, hw, per_head, b=64, ctx=512):
    g = decoder_graph(cfg, b, 1, ctx, layers=1)
    st = Storage(2.0, 2.0, 2.0)
    att = lambda n: bool(n.meta.get("attention"))  # noqa: E731
    ks = kernel_times(g, hw, default_coster(hw), st, True, None, att, per_head)
    nodes = {n.name: n for n in g.nodes}
    return {k.name: (k, nodes[k.name]) for k in ks if k.op == "batch_matmul"}


def test_a_per_head_kernel_rereads_the_kv_through_l2_and_computes_on_the_vector_unit(a100):
    """Each product of a per-head kernel takes the longest of the grouped kernel's time, 8 x the
    K (or V) bytes at the L2's read bandwidth and its MACs at one per CUDA core per clock, each
    with the per-kernel overhead; here the L2 bound is the longest, so the kernel is slower."""
    b, ctx, dh = 64, 512, 32
    grouped = _attention_products(GQA, a100, 0, b, ctx)
    per = _attention_products(GQA, a100, 8, b, ctx)
    kv_bytes = b * 2 * ctx * dh * 2.0                       # B x KV heads x context x head size, fp16
    l2_bytes_per_s = 2560 * 2 * 1.41e9                      # the preset's L2: 2560 16-bit words per clock
    macs = b * 16 * ctx * dh                                # every query head x every key x head size
    vec = macs / (6912 * 1.41e9)
    over = 18e-6
    assert set(per) == {"layers.0.attn.scores", "layers.0.attn.context"}
    for name, (k, _) in per.items():
        g = grouped[name][0]
        want = max(g.seconds, over + 8 * kv_bytes / l2_bytes_per_s, over + vec)
        assert k.seconds == pytest.approx(want, rel=1e-9)
        assert k.seconds > g.seconds                        # the L2 re-reads bind
        assert k.compute_s == pytest.approx(vec, rel=1e-9)  # scalar FMAs, not the tensor cores
        assert k.compute_s + k.memory_s == pytest.approx(k.seconds)
        # seven more reads of the KV at the L2's energy per byte (64 pJ per 128-byte line)
        assert k.energy_j - g.energy_j == pytest.approx(7 * kv_bytes * 0.5e-12, rel=1e-9)


def test_per_head_and_grouped_are_one_kernel_with_one_query_head_per_kv_head(a100):
    """With one query head per KV head the per-head kernel reads the cache once: the same time."""
    pt = dict(batch=32, input_len=256, output_len=8)
    g = serve(ConfigSource(MHA), a100, ServingPoint(**pt))
    p = serve(ConfigSource(MHA), a100, ServingPoint(**pt, decode_attention="per-head"))
    assert p.phases["decode"]["query_heads_per_kv_head"] == 1
    assert p.tpot_s == pytest.approx(g.tpot_s, rel=1e-12) and p.ttft_s == g.ttft_s


def test_per_head_slows_only_the_decode_of_a_gqa_model(a100):
    pt = dict(batch=64, input_len=512, output_len=16)
    g = serve(ConfigSource(GQA), a100, ServingPoint(**pt))
    p = serve(ConfigSource(GQA), a100, ServingPoint(**pt, decode_attention="per-head"))
    assert p.ttft_s == g.ttft_s                             # prefill runs a context (flash) kernel
    assert p.tpot_s > g.tpot_s
    d = p.to_dict()["phases"]["decode"]
    assert d["decode_kernel"] == "per-head" and d["query_heads_per_kv_head"] == 8
    assert g.to_dict()["phases"]["decode"]["decode_kernel"] == "grouped"     # auto: 8 per KV head
    with pytest.raises(ServingError, match="^decode attention must be one of auto, grouped, per-head, got 'flash'$"):
        ServingPoint(1, 8, 2, decode_attention="flash")


def test_auto_decodes_per_head_where_no_grouped_kernel_fits_the_group(a100):
    """29 query heads per KV head (Falcon-180B's group) is no group a grouped kernel is built
    for: auto is the per-head kernel, and 1-8 or 16 per KV head the grouped one."""
    from sim.graph.serving import decode_kernel
    assert [decode_kernel("auto", g) for g in (1, 4, 7, 8, 16)] == ["grouped"] * 5
    assert [decode_kernel("auto", g) for g in (12, 29, 32)] == ["per-head"] * 3
    assert decode_kernel("grouped", 29) == "grouped" and decode_kernel("per-head", 1) == "per-head"
    cfg = DecoderConfig("g29", 2, 1856, 58, 2, 2048, 1000, max_positions=4096)
    pt = dict(batch=64, input_len=512, output_len=8)
    auto = serve(ConfigSource(cfg), a100, ServingPoint(**pt))
    per = serve(ConfigSource(cfg), a100, ServingPoint(**pt, decode_attention="per-head"))
    grouped = serve(ConfigSource(cfg), a100, ServingPoint(**pt, decode_attention="grouped"))
    d = auto.to_dict()["phases"]["decode"]
    assert d["decode_kernel"] == "per-head" and d["query_heads_per_kv_head"] == 29
    assert auto.tpot_s == per.tpot_s > grouped.tpot_s


def test_an_fp8_engine_all_reduces_16_bit_activations():
    """fp8 GEMMs, fp16 on the links: the prefill all-reduce of B x I x hidden elements costs what
    NCCL's model gives for 2 bytes each, the same as in an fp16 run."""
    h100 = sim.load_hw("h100-sxm-80gb")
    b, i = 2, 128
    rows = {}
    for dtype in ("fp8", "fp16"):
        r = serve(ConfigSource(GQA), h100, ServingPoint(b, i, 2, tp=2, dtype=dtype))
        rows[dtype] = {k["name"]: k for k in r.phases["prefill"]["kernels"]}
    want = collective.all_reduce(b * i * 512 * 2.0, 2, h100).seconds
    for dtype in ("fp8", "fp16"):
        assert rows[dtype]["layers.0.mlp_all_reduce"]["seconds"] == pytest.approx(want, rel=1e-12)
    # the GEMMs themselves stay fp8
    assert "x1B" in rows["fp8"]["layers.0.mlp.down_proj"]["workload"]
