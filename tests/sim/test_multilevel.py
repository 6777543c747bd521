"""MAC kernels on hierarchical hardware: nest -> searched mapping -> the movement model -> the
kernel report, and the search against Timeloop's own mapper."""
import math

import time

import pytest

import sim
from sim.hw.config_hierarchy import hierarchy_of
from sim.mapping.mapping import Mapping
from sim.mapping.policy import MappingPolicyError, PolicyConfig, default_mapping
from sim.cost.movement import evaluate
from sim.cost.multilevel import kernel_mapping
from sim.workload.nest import gemm, nest_from_workload

WORKLOADS = [
    sim.Workload.conv2d(1, 64, 28, 28, 96, 3, 3, pad=1),
    sim.Workload.conv2d(1, 32, 56, 56, 32, 3, 3, pad=1, groups=32),          # depthwise
    sim.Workload.conv2d(1, 64, 14, 14, 128, 3, 3, stride=2, pad=1, groups=4),  # grouped, strided
    sim.Workload.gemm(1, 1000, 512),                                          # dense
    sim.Workload.gemm(128, 64, 64, batch=12),                                 # batch matmul
]


@pytest.mark.parametrize("preset", ["eyeriss", "simba-like"])
@pytest.mark.parametrize("wl", WORKLOADS, ids=lambda w: w.key[:40])
def test_report_is_the_movement_model_of_a_legal_mapping(preset, wl):
    hw = sim.load_hw(preset)
    rep = sim.simulate(wl, hw)
    m, stats, ev = kernel_mapping(wl, hw)
    hier, nest = hierarchy_of(hw), nest_from_workload(wl)
    m.check(hier, nest)                                      # legal: factors, fan-outs, capacities
    again = evaluate(hier, nest, m)
    assert rep.total_cycles == again.cycles and rep.array_cycles == again.cycles
    assert rep.macs == wl.macs == again.computes
    # the MACs cannot beat the array; the report's roofline is a bound the kernel respects
    assert rep.total_cycles >= math.ceil(wl.macs / hw.pes)
    assert rep.roofline_cycles <= rep.total_cycles
    # energy: the model's MAC, access and leakage energy, nothing else (no epilogue here)
    assert sum(rep.energy_pj.values()) == pytest.approx(again.energy_pj, rel=1e-12)
    assert rep.energy_pj["dram"] == pytest.approx(again.levels[0].access_energy_pj)
    # DRAM bytes: the outermost level's reads and (output) updates at its word width
    top = again.levels[0]
    wb = hier.levels[0].word_bits // 8
    assert rep.dram_read_bytes == sum(c.reads for _, c in top.tensors) * wb
    assert rep.dram_write_bytes == sum(c.updates for _, c in top.tensors) * wb
    # every operand is read from DRAM at least once (compulsory traffic)
    assert rep.dram_read_bytes >= (nest.size("Inputs") + nest.size("Weights")) * wb
    assert rep.mapping["utilized_macs"] == again.utilized_macs <= hw.pes
    assert stats.evaluations >= 1


def test_tile_fidelity_walks_the_same_mapping_and_the_schedule_does_not_matter():
    """``tile`` is the walk of the mapping the closed form costs (sim/cost/walk.py): the same access
    energy and DRAM bytes, at least as many cycles, leakage over its own cycles, and its parts
    (fill, compute, stall, drain) add up to its total."""
    from sim.cost.multilevel import kernel_walk
    hw = sim.load_hw("eyeriss")
    wl = sim.Workload.conv2d(1, 64, 28, 28, 64, 3, 3, pad=1)
    a = sim.simulate(wl, hw, fidelity="analytical")
    t = sim.simulate(wl, hw, fidelity="tile")
    w = kernel_walk(wl, hw)
    assert t.total_cycles == w.cycles >= a.total_cycles == w.analytical_cycles
    assert t.total_cycles == t.prologue_cycles + t.compute_cycles + t.stall_cycles + t.epilogue_cycles
    assert t.prologue_cycles > 0 and t.epilogue_cycles > 0       # the first tiles load, the last psums drain
    assert (t.dram_read_bytes, t.dram_write_bytes) == (a.dram_read_bytes, a.dram_write_bytes)
    for k in ("mac", "sram", "dram"):
        assert t.energy_pj[k] == pytest.approx(a.energy_pj[k], rel=1e-12)
    assert t.energy_pj["leakage"] == pytest.approx(a.energy_pj["leakage"] * t.total_cycles / a.total_cycles)
    other = sim.Schedule("os", ("m", "n"), 64, 64, 64, "kmn", True)   # would overflow nothing here
    assert sim.simulate(wl, hw, other).total_cycles == a.total_cycles
    assert sim.tile_cycles(wl, hw, other) == t.total_cycles
    b = sim.simulate_batch(wl, hw, [sim.default_schedule(wl, hw), other])
    assert list(b["total_cycles"]) == [a.total_cycles] * 2 and b["valid"].all()


def test_fused_epilogue_adds_its_vector_cycles():
    hw = sim.load_hw("eyeriss")
    wl = sim.Workload.conv2d(1, 64, 28, 28, 64, 3, 3, pad=1)
    plain = sim.simulate(wl, hw)
    fused = sim.simulate(wl.with_epilogue(("bias_add", "relu")), hw)
    outs = 64 * 28 * 28
    assert fused.vector_cycles == math.ceil(2 * outs / hw.vector.lanes)
    assert fused.total_cycles == plain.total_cycles + fused.vector_cycles
    assert fused.energy_pj["vector"] == pytest.approx(2 * outs * hw.energy.vector_op_pj)


def test_search_meets_timeloops_mapper_on_its_own_eyeriss_case():
    """tl06: Timeloop's mapper found 5,505,024 cycles (all 168 PEs busy) at 2.7644e9 pJ on VGG02
    layer 5; the default mapping policy reaches the same cycles at no more energy on the same
    machine."""
    from test_hw_levels_oracle import ORACLE, EYERISS_AS_TIMELOOP, _case, _nest, _with_timeloops_networks
    if not ORACLE.is_dir():
        pytest.skip("../shared/oracle/timeloop is not here")
    case = _case("tl06_mapper_vgg02l5_eyeriss")
    hw = _with_timeloops_networks(sim.load_hw("eyeriss").with_overrides(EYERISS_AS_TIMELOOP))
    hier, nest = hierarchy_of(hw), _nest(case)
    m, stats = default_mapping(hier, nest, "delay")
    ev = evaluate(hier, nest, m)                      # checks the mapping too
    ref = case["reference"]["summary"]
    assert ev.cycles == ref["cycles"] == 5505024
    assert ev.energy_pj <= ref["derived"]["total_energy_pJ_from_fJ_per_compute"]
    assert (stats.cycles, stats.energy_pj) == (ev.cycles, pytest.approx(ev.energy_pj))


def test_a_level_too_small_for_any_tile_is_bypassed():
    """The mapspace's keep bits are free where the level may keep: a buffer of one word holds
    nothing and every tensor goes around it (sim's own check agrees)."""
    hw = sim.load_hw("eyeriss").with_overrides({"levels.shared_glb.capacity_words": 1})
    hier, nest = hierarchy_of(hw), gemm(8, 8, 8)
    m, _ = default_mapping(hier, nest)
    m.check(hier, nest)
    glb = hier.names.index("shared_glb")
    assert not any(m.keeps(hier, glb, ds.name) for ds in nest.data_spaces)


def test_policy_is_deterministic_metric_checked_and_follows_the_metric():
    hier = hierarchy_of(sim.load_hw("simba-like"))
    nest = gemm(64, 96, 48)
    cfg = PolicyConfig(samples=32, steps=2)
    a = default_mapping(hier, nest, "energy", cfg)
    b = default_mapping(hier, nest, "energy", cfg)
    assert a[0] == b[0] and isinstance(a[0], Mapping)
    # the statistics' seconds are the search's own wall time (a descent's start row once shadowed it)
    t0 = time.perf_counter()
    s = default_mapping(hier, nest, "delay", cfg)[1]
    assert isinstance(s.seconds, float) and 0.0 <= s.seconds <= time.perf_counter() - t0
    d = default_mapping(hier, nest, "delay", cfg)
    ea, ed = evaluate(hier, nest, a[0]), evaluate(hier, nest, d[0])
    assert ea.energy_pj <= ed.energy_pj and ed.cycles <= ea.cycles
    with pytest.raises(MappingPolicyError, match="mapping metric must be one of delay, energy, edp, got 'fast'"):
        default_mapping(hier, nest, "fast")


def test_policy_is_no_worse_than_the_best_of_many_random_mappings():
    """On a small space, the policy's mapping is at least as fast as the best of 4000 random
    legal mappings, each costed by the movement model one by one (not the batch the policy uses)."""
    import numpy as np
    from sim.mapping.mapspace_sim import build_space, to_mapping
    hier = hierarchy_of(sim.load_hw("simba-like"))
    nest = gemm(4, 6, 2)
    space = build_space(hier, nest)
    rows = np.unique(space.sample(4000, np.random.default_rng(1)), axis=0)
    best = min(evaluate(hier, nest, to_mapping(space, r)).cycles for r in rows)
    m, _ = default_mapping(hier, nest)
    assert evaluate(hier, nest, m).cycles <= best


def test_one_point_schedule_space_for_mac_kernels_on_a_hierarchy():
    from tuner.search.space import ScheduleSpace
    hw = sim.load_hw("eyeriss")
    wl = sim.Workload.conv2d(1, 64, 28, 28, 64, 3, 3, pad=1)
    assert ScheduleSpace.build(wl, hw).size == 1
    assert ScheduleSpace.build(wl, sim.load_hw("eyeriss-like")).size > 1


def test_tile_fidelity_walks_a_given_mapping_not_the_default():
    """A schedule that carries a mapping (a tuned plan's) is walked as given: its cycles are the
    walk of that mapping, which differs from the default mapping's walk."""
    import dataclasses
    from sim.cost.walk import walk
    hw = sim.load_hw("eyeriss")
    wl = sim.Workload.conv2d(1, 64, 28, 28, 64, 3, 3, pad=1)
    hier, nest = hierarchy_of(hw), nest_from_workload(wl)
    default, _, _ = kernel_mapping(wl, hw)
    # another legal mapping: a row-stationary one the default did not pick and that walks otherwise
    from sim.mapping.row_stationary import row_stationary_candidates
    base = walk(hier, nest, default).cycles
    other = next(m for m in row_stationary_candidates(hier, nest) if walk(hier, nest, m).cycles != base)
    assert other != default
    s = dataclasses.replace(sim.default_schedule(wl, hw), mapping=other)
    t = sim.simulate(wl, hw, s, fidelity="tile")
    w = walk(hier, nest, other)
    assert t.total_cycles == w.cycles and t.prologue_cycles == int(w.fill_cycles)
    assert t.total_cycles != walk(hier, nest, default).cycles
    assert sim.simulate(wl, hw, s, fidelity="analytical").total_cycles == evaluate(hier, nest, other).cycles
