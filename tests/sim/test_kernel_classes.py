"""``kernels.classes``: a vector kernel kind's sustained DRAM fraction and the fixed time of one
call of it; checked, round-tripped, charged to a kernel costed on its own and not to a serving pass."""
import pytest

import sim
from partition.llm.config import DecoderConfig
from partition.llm.graph import decoder_graph
from sim.graph.phase_kernels import Storage, default_coster, kernel_times
from sim.hw.config import VECTOR_KERNEL_KINDS
from sim.workload.workload import VECTOR_KINDS, Workload

LN = Workload.vector("layer_norm", 4096 * 4096, 4096 * 4096, 6 * 4096 * 4096, 4096, 2, "layer_norm")


def test_the_kinds_are_the_workloads_vector_kinds():
    assert VECTOR_KERNEL_KINDS == VECTOR_KINDS


def test_classes_are_checked_and_round_trip(tmp_path):
    a100 = sim.load_hw("a100-sxm-80gb")
    assert a100.kernels.classes
    for suffix in (".toml", ".yaml", ".json"):
        f = tmp_path / f"a{suffix}"
        a100.save(f)
        back = sim.load_hw(str(f))
        assert back == a100 and back.fingerprint() == a100.fingerprint()
    ints = a100.with_overrides({"kernels.classes": [["softmax", 1, 0]]})
    floats = a100.with_overrides({"kernels.classes": [["softmax", 1.0, 0.0]]})
    assert ints.fingerprint() == floats.fingerprint()
    # a preset without the field keeps the fingerprint it had before the field existed
    assert "classes" not in sim.load_hw("edge-llm-npu").to_dict()["kernels"]
    for bad, msg in [([["gemm", 0.5, 0.0]], r"classes\[0\] kind must be one of elementwise"),
                     ([["softmax", 0.0, 0.0]], r"classes\[0\] DRAM fraction must be a number from 0.001 to 1"),
                     ([["softmax", 0.5, -1e-6]], r"classes\[0\] call overhead must be a number from 0 to 0.01 s"),
                     ([["softmax", 0.5, float("nan")]], "call overhead must be"),
                     ([["softmax", 0.5]], r"classes\[0\] must be \[vector kernel kind"),
                     ([["softmax", 0.5, 0.0]] * 2, "one entry per kind"),
                     ("softmax", "must be a list of")]:
        with pytest.raises(sim.HardwareError, match=msg) as e:
            a100.with_overrides({"kernels.classes": bad})
        assert "\n" not in str(e.value)


def test_a_kernel_on_its_own_pays_its_class_and_a_mac_kernel_does_not():
    """The class's fraction replaces dram_fraction for that kind and its call overhead is added to
    the kernel's cycles as busy time (the floor of an on-chip credit), in every fidelity; other
    kinds and MAC kernels keep theirs."""
    a100 = sim.load_hw("a100-sxm-80gb")
    plain = a100.with_overrides({"kernels.classes": []})
    withc = a100.with_overrides({"kernels.classes": [["layer_norm", 0.935, 40e-6]]})
    for fid in ("analytical", "tile"):
        p, c = sim.simulate(LN, plain, fidelity=fid), sim.simulate(LN, withc, fidelity=fid)
        assert c.total_cycles - p.total_cycles == round(40e-6 * a100.clock_hz)
        assert c.compute_cycles - p.compute_cycles == round(40e-6 * a100.clock_hz)
    # at half the bandwidth the streaming part takes twice as long (the DRAM latency once)
    half = a100.with_overrides({"kernels.classes": [["layer_norm", 0.4675, 0.0]]})
    assert sim.simulate(LN, half).total_cycles == pytest.approx(2 * sim.simulate(LN, plain).total_cycles, rel=0.02)
    sm = Workload.vector("softmax", 4096 * 4096, 4096 * 4096, 5 * 4096 * 4096, 4096, 2, "softmax")
    assert sim.simulate(sm, withc).total_cycles == sim.simulate(sm, plain).total_cycles
    mm = Workload.gemm(256, 256, 256, dtype_bytes=2)
    assert sim.simulate(mm, withc).total_cycles == sim.simulate(mm, plain).total_cycles


def test_a_serving_pass_pays_no_call_overhead():
    """In a decoder layer costed for serving, each norm (a layer_norm kernel) takes what it takes without a call
    overhead: the same with and without one in the preset."""
    cfg = DecoderConfig("tiny", 2, 512, 8, 8, 1024, 1000, max_positions=512)
    a100 = sim.load_hw("a100-sxm-80gb")
    g = decoder_graph(cfg, 4, 64, 64, layers=1)
    st = Storage(2.0, 2.0, 2.0)
    times = []
    for over in (0.0, 40e-6):
        hw = a100.with_overrides({"kernels.classes": [["layer_norm", 0.8, over]]})
        ks = kernel_times(g, hw, default_coster(hw), st, True, None, lambda n: n.op in ("layer_norm", "rms_norm"))
        assert ks
        times.append([k.seconds for k in ks])
    assert times[0] == pytest.approx(times[1], rel=1e-9)
