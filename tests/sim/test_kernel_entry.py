"""The one way in (sim.cost.kernel): one public function per fidelity, one named branch.

``analytical_cost`` and ``tile_cost`` give the terms ``simulate`` reports; ``systolic`` names the
kernels the one-level model costs; the roofline's compute bound is taken from the hierarchy a
config converts to, and equals MACs over the PEs plus the vector unit's work counted by hand.
"""
import math

import numpy as np
import pytest

import sim
from sim import Schedule, ScheduleError, Workload
from sim.cost.kernel import (analytical_cost, compute_bound, fused_roofline_for, roofline_for, simulate, systolic,
                             tile_cost, tile_cycles)
from sim.mapping.mapping import LevelMapping, Mapping

GEMM = Workload.gemm(64, 96, 128, epilogue=("bias_add", "relu"))
CONV = Workload.conv2d(1, 16, 14, 14, 32, 3, 3, pad=1)
VEC = Workload.vector("elementwise", 4096, 4096, 4096)


@pytest.fixture(scope="module")
def edge():
    return sim.load_hw("edge-npu")


@pytest.fixture(scope="module")
def eyeriss():
    return sim.load_hw("eyeriss")


def test_the_branch_names_what_the_one_level_model_costs(edge, eyeriss):
    assert not edge.levels and eyeriss.levels
    assert systolic(GEMM, edge) and systolic(CONV, edge) and systolic(VEC, edge)
    assert not systolic(GEMM, eyeriss) and not systolic(CONV, eyeriss)
    assert systolic(VEC, eyeriss)                     # no loop nest: the vector unit's kernel


@pytest.mark.parametrize("hw_name", ["edge-npu", "eyeriss"])
@pytest.mark.parametrize("wl", [GEMM, CONV], ids=["gemm", "conv"])
def test_each_fidelity_is_what_simulate_reports(hw_name, wl):
    hw = sim.load_hw(hw_name)
    s = sim.default_schedule(wl, hw)
    a = analytical_cost(wl, hw, [s, s])
    rep = simulate(wl, hw, s, "analytical")
    assert len(a["total_cycles"]) == 2 and a["total_cycles"][0] == a["total_cycles"][1]
    assert rep.total_cycles == int(round(a["total_cycles"][0]))
    assert rep.dram_read_bytes == int(round(a["dram_read_bytes"][0]))
    assert rep.energy_pj == {k: float(v[0]) for k, v in a["energy"].items()}
    t = tile_cost(wl, hw, s)
    trep = simulate(wl, hw, s, "tile")
    assert trep.total_cycles == int(round(t["total_cycles"])) == tile_cycles(wl, hw, s)
    assert trep.energy_pj == t["energy"]
    assert (rep.mapping is None) == systolic(wl, hw)


@pytest.mark.parametrize("hw_name", ["edge-npu", "eyeriss", "tpu-v1-like"])
def test_compute_bound_is_macs_over_pes_plus_vector_work(hw_name):
    hw = sim.load_hw(hw_name)
    v = hw.vector
    # bias_add and relu are one cycle per element and lane (neither is special)
    epi = math.ceil(2 * 64 * 96 / v.lanes)
    assert compute_bound(GEMM, hw) == math.ceil(64 * 96 * 128 / (hw.array.rows * hw.array.cols)) + epi
    assert compute_bound(VEC, hw) == math.ceil(4096 / v.lanes)


def test_one_level_roofline_is_one_shared_dram_port(edge):
    wl = Workload.gemm(64, 96, 128)
    wb = edge.array.word_bytes
    traffic = math.ceil((64 * 128 + 128 * 96 + 64 * 96) * wb / edge.dram.bytes_per_cycle)
    assert roofline_for(wl, edge) == max(compute_bound(wl, edge), traffic)
    # keeping bytes on chip lowers the traffic term only (floored, as the costing floors)
    kept = 4096.0
    floor = math.floor(((64 * 128 + 128 * 96 + 64 * 96) * wb - kept) / edge.dram.bytes_per_cycle)
    assert fused_roofline_for(wl, edge, kept) == max(compute_bound(wl, edge), floor)


def test_hierarchy_roofline_has_a_read_and_a_write_port(eyeriss):
    from sim.hw.config_hierarchy import hierarchy_of
    wl = Workload.gemm(64, 96, 128)
    top = hierarchy_of(eyeriss).levels[0]
    reads, writes = 64 * 128 + 128 * 96, 64 * 96
    traffic = math.floor(max(reads / top.read_bandwidth, writes / top.write_bandwidth) + 1e-9)  # whole cycles
    assert roofline_for(wl, eyeriss) == max(compute_bound(wl, eyeriss), traffic)


def test_a_mapping_on_a_one_level_config_is_refused_by_every_entry(edge):
    s = sim.default_schedule(GEMM, edge).replace(mapping=Mapping((LevelMapping(),)))
    with pytest.raises(ScheduleError, match="storage levels"):
        simulate(GEMM, edge, s)
    with pytest.raises(ScheduleError, match="storage levels"):
        tile_cycles(GEMM, edge, s)


def test_batch_flags_what_does_not_fit_and_costs_the_rest(edge):
    s = sim.default_schedule(GEMM, edge)
    big = s.replace(tile_m=10**6)
    r = sim.simulate_batch(GEMM, edge, [s, big])
    assert r["valid"].tolist() == [True, False]
    assert r["total_cycles"][0] == simulate(GEMM, edge, s).total_cycles and np.isinf(r["total_cycles"][1])
