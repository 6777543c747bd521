"""The GPU and edge-NPU presets: headline figures against the datasheets they cite, the kernels
section (waves, rates per operand width, sustained fractions) against hand computations, and
machines without the section costed exactly as before."""
from __future__ import annotations

import math

import pytest

from sim.cost.kernel import simulate, vector_hw
from sim.cost.multilevel import padded_workload
from sim.hw.config import HardwareError, KernelsConfig, load_hw
from sim.workload.workload import Workload

GIB = 2**30
# (preset, peak fp16 FLOP/s, peak DRAM bytes/s, capacity bytes), typed from the datasheets the
# preset files cite, not computed from them.
DATASHEETS = [
    ("a100-sxm-80gb", 312e12, 2039e9, 80 * GIB),       # NVIDIA A100 datasheet, 80GB SXM
    ("h100-sxm-80gb", 989.4e12, 3.35e12, 80 * GIB),    # NVIDIA H100 datasheet, SXM (dense)
    ("l40s", 362.05e12, 864e9, 48 * GIB),              # NVIDIA L40S datasheet (dense)
    ("mi210", 181.0e12, 1638.4e9, 64 * GIB),           # AMD Instinct MI210 datasheet
    ("edge-llm-npu", 16.4e12, 68.3e9, 8 * GIB),        # its design point: fp16 half of 32.8 TOPS int8
]


def peak_fp16_flops(hw) -> float:
    return hw.pes * 2 * hw.clock_hz * hw.kernels.rate(2)


@pytest.mark.parametrize("name,flops,bw,cap", DATASHEETS)
def test_headline_figures_match_the_datasheet(name, flops, bw, cap):
    hw = load_hw(name)
    assert peak_fp16_flops(hw) == pytest.approx(flops, rel=0.012)
    assert hw.dram.bytes_per_cycle * hw.clock_hz == pytest.approx(bw, rel=0.002)
    top = hw.levels[0]  # the hierarchy's backing store states the same bandwidth, in its words
    assert top.read_bandwidth * top.word_bits / 8 * hw.clock_hz == pytest.approx(bw, rel=0.002)
    assert hw.memory.capacity_bytes == cap


@pytest.mark.parametrize("name,cores", [("a100-sxm-80gb", 108), ("h100-sxm-80gb", 132), ("l40s", 142),
                                        ("mi210", 104)])
def test_a_gpu_is_its_cores_on_the_hierarchy(name, cores):
    """Device memory, one shared L2, then one shared-memory level per SM/CU, then register files."""
    hw = load_hw(name)
    assert len(hw.levels) == 4
    assert hw.level_instances()[:3] == (1, 1, cores)
    assert hw.level_instances()[3] == cores * 4  # 4 tensor/matrix-core sub-partitions each
    assert hw.interconnect.max_devices > 1 and hw.kernels.waves


def test_kernels_section_is_left_out_at_its_default():
    """Existing presets keep their files and fingerprints: no kernels section unless stated."""
    for name in ("eyeriss", "simba-like", "cloud-npu", "edge-npu"):
        assert "kernels" not in load_hw(name).to_dict()
    d = load_hw("a100-sxm-80gb").to_dict()
    assert d["kernels"]["mac_fraction"] == 0.889 and "fitted on" in d["kernels"]["source"]


def test_kernels_fields_are_checked():
    with pytest.raises(HardwareError, match="kernels.mac_fraction"):
        load_hw("a100-sxm-80gb").with_overrides({"kernels.mac_fraction": 1.5})
    with pytest.raises(HardwareError, match="kernels.nope is not a known field"):
        load_hw("a100-sxm-80gb").with_overrides({"kernels.nope": 1})
    assert not KernelsConfig().active


def test_waves_pad_the_larger_output_dim_to_the_core_count():
    a100 = load_hw("a100-sxm-80gb")
    p = padded_workload(Workload.gemm(8192, 4096, 8192, dtype_bytes=2), a100)
    assert (p.d["m"], p.d["n"], p.d["k"]) == (math.ceil(8192 / 108) * 108, 4096, 8192)
    p = padded_workload(Workload.gemm(1, 12288, 4096, dtype_bytes=2), a100)
    assert (p.d["m"], p.d["n"]) == (1, math.ceil(12288 / 108) * 108)
    # a batched product whose batch (sequences x heads) is its largest parallel dim pads the batch
    p = padded_workload(Workload.gemm(1, 129, 128, batch=12288, dtype_bytes=2), a100)
    assert (p.d["b"], p.d["m"], p.d["n"]) == (math.ceil(12288 / 108) * 108, 1, 129)
    already = Workload.gemm(108 * 3, 64, 64, dtype_bytes=2)
    assert padded_workload(already, a100) is already
    npu = load_hw("cloud-npu")  # no kernels section: never padded
    wl = Workload.gemm(1000, 1000, 1000)
    assert padded_workload(wl, npu) is wl


def test_mac_rate_follows_the_operand_width():
    """A compute-bound GEMM: int8 at twice, fp32 (TF32) at half the fp16 time on an A100 [WP],
    once the fixed overhead is taken off; never faster than the peak of its width."""
    hw = load_hw("a100-sxm-80gb").with_overrides({"kernels.mac_overhead_s": 0.0})
    m = n = k = 2048
    t = {b: simulate(Workload.gemm(m, n, k, dtype_bytes=b), hw).latency_s for b in (1, 2, 4)}
    fp16_peak = 2.0 * m * n * k / (hw.pes * 2 * hw.clock_hz)
    assert t[2] >= fp16_peak / hw.kernels.mac_fraction * 0.999
    assert t[1] == pytest.approx(t[2] / 2, rel=0.05)
    assert t[4] == pytest.approx(t[2] * 2, rel=0.05)


def test_vector_kernels_stream_at_the_sustained_fraction_in_bytes_of_their_elements():
    hw = load_hw("a100-sxm-80gb")
    sm = Workload.vector("softmax", 1 << 24, 1 << 24, 4 << 24, 1 << 24, dtype_bytes=2, op="softmax")
    assert vector_hw(sm, hw).dram.bytes_per_cycle == pytest.approx(hw.dram.bytes_per_cycle * 0.468)
    ln32 = Workload.vector("layer_norm", 1 << 24, 1 << 24, 6 << 24, 4096, dtype_bytes=4, op="layer_norm")
    # fp32 elements on a machine of 2-byte words: half as many words per cycle, at the fraction the
    # preset's classes state for layer_norm (dram_fraction for a kind without one)
    assert hw.kernels.dram_fraction_of("layer_norm") == 0.799
    assert vector_hw(ln32, hw).dram.bytes_per_cycle == pytest.approx(hw.dram.bytes_per_cycle * 0.799 / 2)
    red = Workload.vector("reduce", 1 << 24, 1, 1 << 24, 1, dtype_bytes=2, op="reduce_sum")
    assert vector_hw(red, hw).dram.bytes_per_cycle == pytest.approx(hw.dram.bytes_per_cycle * 0.935)
    bytes_moved = 2 * (1 << 24) * 2
    t = simulate(sm, hw).latency_s
    assert t >= bytes_moved / (hw.dram.bytes_per_cycle * hw.clock_hz * 0.468) * 0.999
    npu = load_hw("cloud-npu")
    assert vector_hw(sm, npu) is npu


@pytest.mark.parametrize("dtype_bytes", [1, 2, 4])
def test_a_kernel_is_never_faster_than_its_roofline_at_its_width(dtype_bytes):
    hw = load_hw("a100-sxm-80gb")
    wl = Workload.gemm(16, 4096, 4096, dtype_bytes=dtype_bytes)  # weight-bound
    r = simulate(wl, hw)
    peak_bw = hw.dram.bytes_per_cycle * hw.clock_hz
    assert r.roofline_cycles <= r.total_cycles
    assert r.latency_s >= 4096 * 4096 * dtype_bytes / peak_bw


def test_extra_mac_dtypes_are_stated_checked_and_left_out_when_empty():
    """``kernels.dtypes`` names what the tensor cores also compute (H100 and L40S: fp8, per their
    datasheets; the A100 has no fp8). Empty, it is absent from files and fingerprints, and a
    complete (packed) config written before the field existed still loads."""
    assert load_hw("h100-sxm-80gb").kernels.dtypes == ("fp8",) == load_hw("l40s").kernels.dtypes
    a100 = load_hw("a100-sxm-80gb")
    assert a100.kernels.dtypes == () and "dtypes" not in a100.to_dict()["kernels"]
    assert "dtypes" in a100.to_dict(every_section=True)["kernels"]
    assert load_hw("h100-sxm-80gb").to_dict()["kernels"]["dtypes"] == ["fp8"]
    old = a100.to_dict(every_section=True)
    del old["kernels"]["dtypes"]
    back = type(a100).from_dict(old, complete=True)
    assert back == a100 and back.fingerprint() == a100.fingerprint()
    with pytest.raises(HardwareError, match="kernels.dtypes must be a list of names from int4, int8"):
        a100.with_overrides({"kernels.dtypes": ["fp9"]})


def test_an_on_chip_credit_never_takes_a_gemms_set_up_or_its_compute():
    """A fused attention product keeps its scores on chip (a DRAM credit); what is left is never
    below the MACs at the sustained rate plus the kernel's fixed set-up, so the marginal KV block
    of a prefill costs at least its own MACs (it once came out at half of them, the credit of the
    two-block kernel eating the set-up the one-block kernel kept)."""
    from partition.llm.config import DecoderConfig
    from partition.llm.source import ConfigSource
    from sim.graph.phase_kernels import Storage, default_coster, kernel_times, per_block
    from sim.graph.subgraph import credited_cycles
    hw = load_hw("a100-sxm-80gb")
    rep = simulate(Workload.gemm(256, 256, 128, batch=192, dtype_bytes=2), hw)
    floor = math.ceil(hw.kernels.mac_overhead_s * hw.clock_hz)
    assert rep.compute_cycles >= floor
    assert credited_cycles(rep.total_cycles, rep.compute_cycles, 1e12, hw.dram.bytes_per_cycle) >= floor
    src = ConfigSource(DecoderConfig("mha", 1, 6144, 48, 48, 24576, 1000, max_positions=4096))
    att = lambda n: bool(n.meta.get("attention"))  # noqa: E731
    st, c = Storage(2.0, 2.0, 2.0), default_coster(hw)
    one = kernel_times(src.graph(8, 256, 256, layers=1, embed=False, head=False), hw, c, st, True, None, att)
    two = kernel_times(src.graph(8, 256, 512, layers=1, embed=False, head=False), hw, c, st, True, None, att)
    peak = hw.pes * hw.clock_hz * hw.kernels.mac_fraction        # MACs per second, sustained
    for f, p in per_block(one, two):
        if f.op == "batch_matmul":
            assert p.seconds >= 8 * 48 * 256 * 256 * 128 / peak * 0.95, f.name   # was 0.5x
