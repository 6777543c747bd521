"""The serving model: the exact growth over every decode step, the collectives' formulas, TP and PP
invariants, memory (fits, max_batch, streaming), weight-only quantization, bad points."""
import numpy as np
import pytest

import sim
from partition.llm.config import BUILTINS
from partition.llm.graph import SplitError
from partition.llm.source import ConfigSource
from sim.graph import collective
from sim.graph.serving import DTYPE_BYTES, ServingError, ServingPoint, serve

GIB = 2 ** 30


@pytest.fixture(scope="module")
def hw():
    return sim.load_hw("cloud-npu").with_overrides({
        "interconnect.max_devices": 8, "interconnect.bytes_per_s": 100e9, "interconnect.latency_s": 3e-6,
        "interconnect.topology": "ring", "interconnect.pj_per_byte": 10.0})


def src(name="llama-3.2-1b"):
    return ConfigSource(BUILTINS[name])


def test_growth_equals_brute_force_over_every_step(hw):
    s = src("gpt2")
    full = serve(s, hw, ServingPoint(2, 5, 8, kv_block=2, dtype="bf16"))
    assert len(full.step_s) == 7
    # each decode step j attends to I + j positions: a point whose prompt is I + j - 1 tokens has it as its one step
    brute = [serve(s, hw, ServingPoint(2, 5 + j - 1, 2, kv_block=2, dtype="bf16")).step_s[0] for j in range(1, 8)]
    np.testing.assert_allclose(full.step_s, brute, rtol=1e-12)
    assert full.e2e_s == pytest.approx(full.ttft_s + sum(brute), rel=1e-12)
    assert np.all(np.diff(full.step_s) >= 0) and full.step_s[-1] > full.step_s[0]  # the context grows


def test_decode_attention_blocks(hw):
    r = serve(src(), hw, ServingPoint(4, 100, 50, kv_block=32, dtype="bf16"))
    ctx = np.arange(101, 150)
    assert r.phases["decode"]["attention_blocks"] == int(np.ceil(ctx / 32).sum())
    assert r.phases["decode"]["context_first"] == 101 and r.phases["decode"]["context_last"] == 149


def test_collective_formulas(hw):
    s, n = 1e6, 4
    ring = collective.all_reduce(s, n, hw)
    assert ring.seconds == pytest.approx(2 * 3 / 4 * s / 100e9 + 2 * 3 * 3e-6)
    assert ring.bytes_sent == pytest.approx(1.5e6)
    sw = collective.all_reduce(s, n, hw.with_overrides({"interconnect.topology": "switch"}))
    assert sw.seconds == pytest.approx(2 * 3 / 4 * s / 100e9 + 2 * 3e-6)
    mesh = collective.all_reduce(s, 8, hw.with_overrides({"interconnect.topology": "mesh"}))
    assert mesh.seconds == pytest.approx(2 * 7 / 8 * s / 100e9 + 2 * (1 + 3) * 3e-6)  # 2 x 4 torus
    assert collective.all_reduce(s, 1, hw).seconds == 0
    assert collective.send(s, hw).seconds == pytest.approx(s / 100e9 + 3e-6)


NCCL_A100 = [["LL", 6.6e-6, 0.6e-6, 0.2], ["LL128", 14.0e-6, 1.9e-6, 0.736], ["Simple", 8.4e-6, 3.4e-6, 0.8]]


@pytest.mark.parametrize("n, nbytes, want_us", [
    # NCCL 2.18's tuning.cc by hand, A100 one node: ring lat = base + 2(n-1) x hw lat, algorithm
    # bandwidth = bus bandwidth x n / 2(n-1), time = lat + bytes / bw; the fastest protocol wins
    (4, 2 * 2**20, 14.0 + 6 * 1.9 + 2 * 2**20 / (220.8e3 * 4 / 6)),          # LL128
    (4, 32 * 2**20, 8.4 + 6 * 3.4 + 32 * 2**20 / (240e3 * 4 / 6)),           # Simple
    (2, 32768, 6.6 + 2 * 0.6 + 32768 / (60e3 * 2 / 2)),                     # LL
    (8, 128 * 14848 * 2, 14.0 + 14 * 1.9 + 128 * 14848 * 2 / (220.8e3 * 8 / 14)),
])
def test_all_reduce_takes_the_fastest_protocol(n, nbytes, want_us):
    a100 = sim.load_hw("a100-sxm-80gb")
    assert [list(p) for p in a100.interconnect.protocols] == NCCL_A100
    c = collective.all_reduce(nbytes, n, a100)
    assert c.seconds * 1e6 == pytest.approx(want_us, rel=1e-12)
    assert c.bytes_sent == pytest.approx(2 * (n - 1) / n * nbytes)
    # the topology no longer matters, and without protocols the switch formula is back
    assert collective.all_reduce(nbytes, n, a100.with_overrides({"interconnect.topology": "ring"})).seconds == c.seconds
    plain = a100.with_overrides({"interconnect.protocols": []})
    assert plain.fingerprint() != a100.fingerprint()
    assert collective.all_reduce(nbytes, n, plain).seconds == pytest.approx(
        2 * (n - 1) / n * nbytes / 300e9 + 2 * 2e-6)
    assert collective.send(nbytes, a100).seconds == collective.send(nbytes, plain).seconds


def test_protocols_are_checked_and_round_trip(tmp_path):
    a100 = sim.load_hw("a100-sxm-80gb")
    for suffix in (".toml", ".yaml", ".json"):
        f = tmp_path / f"a{suffix}"
        a100.save(f)
        back = sim.load_hw(str(f))
        assert back == a100 and back.fingerprint() == a100.fingerprint()
    # 1 and 1.0 are the same config
    ints = a100.with_overrides({"interconnect.protocols": [["S", 0, 0, 1]]})
    floats = a100.with_overrides({"interconnect.protocols": [["S", 0.0, 0.0, 1.0]]})
    assert ints.fingerprint() == floats.fingerprint()
    # a config without the field keeps the fingerprint it had before the field existed
    assert "protocols" not in sim.load_hw("mi210").to_dict()["interconnect"]
    for bad, msg in [([["LL", -1e-6, 0.6e-6, 0.2]], r"protocols\[0\] start-up must be a number from 0 to 1 s"),
                     ([["LL", 1e-6, 0.6e-6, 0.0]], "bandwidth fraction must be a number from 1e-06 to 1"),
                     ([["LL", 1e-6, 0.6e-6]], r"protocols\[0\] must be \[name"),
                     ("LL", "must be a list of"),
                     ([["A", 0, 0, 1]] * 2, "distinct names"),
                     ([["A", 0, float("nan"), 1]], "per-step must be"),
                     ([["A", 0, 0, 1]] * 9, "at most 8")]:
        with pytest.raises(sim.HardwareError, match=msg) as e:
            a100.with_overrides({"interconnect.protocols": bad})
        assert "\n" not in str(e.value)


def test_tp_halves_weights_and_pays_the_all_reduce(hw):
    cfg = BUILTINS["llama-3.2-1b"]
    p1 = ServingPoint(8, 64, 4, dtype="bf16")
    r1 = serve(src(), hw, p1)
    r2 = serve(src(), hw, ServingPoint(8, 64, 4, tp=2, dtype="bf16"))
    norms = (2 * cfg.layers + 1) * cfg.hidden * 2  # replicated RMSNorm weights (bytes)
    assert r2.memory.weights_bytes - norms / 2 == pytest.approx(r1.memory.weights_bytes / 2, rel=1e-9)
    assert r2.memory.kv_bytes == pytest.approx(r1.memory.kv_bytes / 2)
    rows = [k for k in r2.phases["decode"]["kernels"] if k["op"] == "all_reduce"]
    assert len(rows) == 2
    nbytes = 8 * cfg.hidden * 2  # B x hidden x 2 bytes per decode step
    per = 2 * 1 / 2 * nbytes / 100e9 + 2 * 1 * 3e-6
    assert rows[0]["interconnect_s"] == pytest.approx(3 * per)  # 3 decode steps
    assert not [k for k in r1.phases["decode"]["kernels"] if k["op"] == "all_reduce"]


def test_pipeline_bubble_and_stages(hw):
    r1 = serve(src(), hw, ServingPoint(8, 64, 6, dtype="bf16"))
    r4 = serve(src(), hw, ServingPoint(8, 64, 6, pp=4, dtype="bf16"))
    st = r4.phases["stages"]
    assert [s["layers"] for s in st] == [4, 4, 4, 4] and st[0]["embed"] and st[-1]["head"]
    # four stages of a quarter of the layers, each on a quarter of the batch, pipelined: faster first token
    assert r4.ttft_s < r1.ttft_s
    assert r4.memory.weights_bytes < r1.memory.weights_bytes / 2
    assert 0.0 <= r4.phases["decode"]["pipeline_bubble"] < 1.0
    t = np.array([s["prefill_s"] for s in st])
    assert r4.ttft_s == pytest.approx(t.sum() + (r4.point.micro - 1) * t.max())


def test_memory_fits_and_max_batch(hw):
    s = src()
    probe = serve(s, hw, ServingPoint(1, 512, 512, dtype="bf16"))
    per_seq = probe.memory.kv_bytes + probe.memory.activation_bytes
    cap = int(probe.memory.weights_bytes + 10.5 * per_seq)
    h = hw.with_overrides({"memory.capacity_bytes": cap})
    r = serve(s, h, ServingPoint(4, 512, 512, dtype="bf16"))
    assert r.memory.fits and r.memory.max_batch == 10 and not r.memory.weights_streamed
    assert serve(s, h, ServingPoint(10, 512, 512, dtype="bf16")).memory.fits
    big = serve(s, h, ServingPoint(11, 512, 512, dtype="bf16"))
    assert not big.memory.fits and big.memory.max_batch == 10 and big.ttft_s > 0  # a result, not an error
    assert big.memory.max_context < 1023


def test_weights_stream_when_only_they_do_not_fit(hw):
    s = src()
    r = serve(s, hw, ServingPoint(1, 64, 4, dtype="bf16"))
    cap = int(r.memory.weights_bytes * 0.5)
    h = hw.with_overrides({"memory.capacity_bytes": cap})
    st = serve(s, h, ServingPoint(1, 64, 4, dtype="bf16"))
    assert st.memory.weights_streamed and st.memory.fits
    per_pass = st.phases["weights_stream_s_per_pass"]
    assert per_pass == pytest.approx(r.memory.weights_bytes / h.link.bytes_per_s)
    assert st.tpot_s >= per_pass and st.tpot_s > r.tpot_s


def test_weight_only_quantization_changes_bytes_not_flops(hw):
    s = src()
    r16 = serve(s, hw, ServingPoint(1, 64, 8, dtype="bf16"))
    r4 = serve(s, hw, ServingPoint(1, 64, 8, dtype="int4"))
    assert r4.compute_dtype == "fp16"
    lin16 = r16.memory.weights_bytes
    assert r4.memory.weights_bytes < 0.3 * lin16
    k16 = {k["name"]: k for k in r16.phases["decode"]["kernels"]}
    k4 = {k["name"]: k for k in r4.phases["decode"]["kernels"]}
    q = "layers.0.mlp.down_proj"
    assert k4[q]["compute_s"] == pytest.approx(k16[q]["compute_s"])   # same MACs
    assert k4[q]["seconds"] <= k16[q]["seconds"]                        # fewer bytes
    assert r4.memory.kv_bytes == r16.memory.kv_bytes


def test_bad_points_one_line(hw):
    s = src()
    for kw, msg in ((dict(batch=0), "batch must be an integer >= 1"),
                    (dict(input_len=-3), "input-len must be"), (dict(output_len=0), "output-len must be"),
                    (dict(dtype="fp64"), "unknown dtype"), (dict(kv_dtype="int3"), "unknown kv dtype")):
        args = dict(batch=1, input_len=8, output_len=8)
        args.update(kw)
        with pytest.raises(ServingError, match=msg):
            ServingPoint(**args)
    with pytest.raises(ServingError, match="computes in fp32, but cloud-npu's array computes in bf16"):
        serve(s, hw, ServingPoint(1, 8, 8, dtype="fp32"))
    with pytest.raises(collective.InterconnectError, match="needs 16 devices"):
        serve(s, hw, ServingPoint(1, 8, 8, tp=16))
    with pytest.raises(collective.InterconnectError, match="has none"):
        serve(s, sim.load_hw("cloud-npu").with_overrides({"interconnect.max_devices": 4}),
              ServingPoint(1, 8, 8, tp=2))
    with pytest.raises(SplitError, match="not divisible by 3"):
        serve(s, hw, ServingPoint(1, 8, 8, tp=3))


def test_fused_attention_choice(hw):
    s = src()
    auto = serve(s, hw, ServingPoint(2, 256, 4))
    assert auto.phases["prefill"]["attention_form"] == "fused"
    un = serve(s, hw, ServingPoint(2, 256, 4, attention="unfused"))
    assert un.phases["prefill"]["attention_form"] == "unfused" and un.ttft_s > auto.ttft_s
    assert un.memory.activation_bytes > auto.memory.activation_bytes
    tiny = hw.with_overrides({"buffers.unified_bytes": 64 * 1024})
    assert serve(s, tiny, ServingPoint(2, 256, 4)).phases["prefill"]["attention_form"] == "unfused"
    with pytest.raises(ServingError, match="does not fit the on-chip"):
        serve(s, tiny, ServingPoint(2, 256, 4, attention="fused"))


def test_per_block_is_exact_at_one_and_two_blocks(hw):
    from sim.graph.phase_kernels import Storage, default_coster, kernel_times, per_block
    cfg = BUILTINS["llama-3.2-1b"]
    from partition.llm.graph import decoder_graph
    att = lambda n: bool(n.meta.get("attention"))  # noqa: E731
    st = Storage(2.0, 2.0, 2.0)
    c = default_coster(hw)
    one = kernel_times(decoder_graph(cfg, 4, 1, 64, layers=1), hw, c, st, True, None, att)
    two = kernel_times(decoder_graph(cfg, 4, 1, 128, layers=1), hw, c, st, True, None, att)
    for (f, p), k1, k2 in zip(per_block(one, two), one, two):
        assert f.seconds >= 0 and p.seconds >= 0
        assert f.seconds + p.seconds == pytest.approx(k1.seconds, rel=1e-12)
        if k2.seconds <= 2 * k1.seconds:
            assert f.seconds + 2 * p.seconds == pytest.approx(k2.seconds, rel=1e-12)
        assert f.compute_s + f.memory_s == pytest.approx(f.seconds)


@pytest.mark.slow
def test_storage_hierarchy_machine():
    """On a machine with storage levels the MAC kernels run at their default mappings."""
    from partition.llm.config import DecoderConfig
    cfg = DecoderConfig("tiny", 2, 64, 4, 2, 128, 500, max_positions=256)
    r = serve(ConfigSource(cfg), sim.load_hw("simba-like"), ServingPoint(2, 16, 4, dtype="int8"))
    assert r.compute_dtype == "int8" and r.ttft_s > 0 and len(r.step_s) == 3
    assert any(s["source"] == "default mapping" and "mapping" in s for s in r.schedules)


def test_moe_weights_quantized_and_counted(hw):
    cfg = BUILTINS["mixtral-8x7b"]
    r16 = serve(src("mixtral-8x7b"), hw, ServingPoint(1, 16, 2, dtype="bf16"))
    r4 = serve(src("mixtral-8x7b"), hw, ServingPoint(1, 16, 2, dtype="int4"))
    assert r16.memory.weights_bytes == 2 * cfg.params()
    embed = cfg.vocab * cfg.hidden
    norms = (2 * cfg.layers + 1) * cfg.hidden
    # every matrix of a linear layer (experts and router included) at half a byte; the embedding
    # table and the norms stay at the compute type's 2 bytes
    assert r4.memory.weights_bytes == pytest.approx(0.5 * (cfg.params() - embed - norms) + 2 * (embed + norms))


def test_phase_kernels_add_up_to_the_phases(hw):
    cfg = BUILTINS["llama-3.2-1b"]
    r = serve(src(), hw, ServingPoint(4, 300, 20, tp=2, kv_block=64, dtype="bf16"))
    launch = hw.link.launch_latency_s
    for phase, passes in (("prefill", 1), ("decode", 19)):
        ph = r.phases[phase]
        total = cfg.layers * sum(k["seconds"] for k in ph["kernels"]) + sum(k["seconds"] for k in ph["outside_layers"])
        assert total + passes * launch == pytest.approx(ph["seconds"], rel=1e-9)
        for k in ph["kernels"]:
            assert k["compute_s"] + k["memory_s"] + k["interconnect_s"] == pytest.approx(k["seconds"], rel=1e-9)


def test_absurd_sizes_and_learned_positions_one_line(hw):
    with pytest.raises(ServingError, match="input-len must be at most 16,777,216"):
        ServingPoint(1, 10 ** 13, 2)
    from partition.llm.config import ConfigError
    with pytest.raises(ConfigError, match="gpt2 has 1024 learned positions"):
        serve(src("gpt2"), hw, ServingPoint(1, 1020, 8, dtype="bf16"))
    assert serve(src("gpt2"), hw, ServingPoint(1, 1017, 8, dtype="bf16")).ttft_s > 0  # 1024 positions exactly


def test_fp8_on_tensor_cores_that_have_it():
    """fp8 runs on a GPU whose ``kernels.dtypes`` lists it, at ``rate_1byte``, with 1-byte weights,
    KV cache and activations; a GPU without it refuses in one line. Independent checks: a decode
    step of one sequence reads every weight byte once, so it is never faster than the weights at
    peak bandwidth, and fp8 saves what half the weight bytes take to read (the simulator times an
    fp8 kernel in its own bytes; halving them again made it too fast); a long prefill is
    compute-bound, so fp8 takes about half fp16's time."""
    h100 = sim.load_hw("h100-sxm-80gb")
    s = src("llama-2-7b")
    with pytest.raises(ServingError, match="computes in fp8, but a100-sxm-80gb's array computes in fp16"):
        serve(s, sim.load_hw("a100-sxm-80gb"), ServingPoint(1, 8, 2, dtype="fp8"))
    r8 = serve(s, h100, ServingPoint(1, 2048, 2, dtype="fp8"))
    r16 = serve(s, h100, ServingPoint(1, 2048, 2, dtype="fp16"))
    assert r8.compute_dtype == "fp8" and r8.to_dict()["kv_dtype"] == "fp8"
    assert r8.memory.weights_bytes == pytest.approx(r16.memory.weights_bytes / 2, rel=1e-6)
    peak_bw = h100.dram.bytes_per_cycle * h100.clock_hz
    layers = r8.memory.weights_bytes - 2 * 32000 * 4096   # the embedding table is gathered, not read
    assert r8.tpot_s >= layers / peak_bw
    # a step's fixed part (launches, a GEMM's set-up) stays; what fp8 saves is half the bytes
    saved = (r16.memory.weights_bytes - r8.memory.weights_bytes) / (peak_bw * h100.kernels.dram_fraction)
    assert r16.tpot_s - r8.tpot_s == pytest.approx(saved, rel=0.15)
    assert r8.ttft_s == pytest.approx(r16.ttft_s / 2, rel=0.2) and r8.ttft_s < r16.ttft_s
    k8 = {k["name"]: k for k in r8.phases["prefill"]["kernels"]}
    assert "x1B" in k8["layers.0.mlp.down_proj"]["workload"]


def test_an_int8_npu_reads_int8_weights_once_per_step_and_fp16_twice_the_bytes():
    """edge-llm-npu computes int8 (and fp16 at half rate, as its kernels.dtypes say). A decode step
    of one sequence is bound by reading the weights once over LPDDR: int8 weights take
    weights_bytes / bandwidth, fp16 twice that (int8 was timed in the graph's 2-byte elements)."""
    npu = sim.load_hw("edge-llm-npu")
    s = src("llama-3.2-1b")
    bw = npu.dram.bytes_per_cycle * npu.clock_hz
    for dtype in ("int8", "fp16"):
        r = serve(s, npu, ServingPoint(1, 64, 4, dtype=dtype))
        assert r.compute_dtype == dtype
        read = r.memory.weights_bytes / bw    # the tied lm_head reads the embedding table too
        assert r.memory.weights_bytes == pytest.approx(1.236e9 * DTYPE_BYTES[dtype], rel=0.01)
        assert read <= r.tpot_s <= 1.25 * read


def test_a_decode_step_streams_the_kv_of_its_positions_on_a_gpu():
    """On a GPU, each decode step reads the KV cache of its context once. So the step time grows
    by the same amount per position, with no jump at a KV-block boundary. That increment is
    about the cache bytes of one position of every sequence at the sustained bandwidth: a decode
    attention kernel parallelises over sequences x heads, so nothing is padded to the SM count."""
    a100 = sim.load_hw("a100-sxm-80gb")
    s = src("llama-2-7b")
    b = 64
    r = serve(s, a100, ServingPoint(b, 128, 300))
    d = np.diff(r.step_s)
    np.testing.assert_allclose(d, d.mean(), rtol=1e-9)
    bw = a100.dram.bytes_per_cycle * a100.clock_hz
    per_position = b * r.memory.kv_bytes_per_token / bw
    assert per_position <= d.mean() <= 1.25 * per_position / a100.kernels.dram_fraction
