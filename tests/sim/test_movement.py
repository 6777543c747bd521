"""The closed-form counting model against pencil-and-paper counts (the Timeloop oracle README's
worked examples and its stride-reset example), plus energy, cycles and the JSON shape."""
import pytest

from sim.hw.hierarchy import Arithmetic, Hierarchy, StorageLevel
from sim.mapping.mapping import LevelMapping, Mapping
from sim.cost.movement import delta_sum, distinct_tiles, evaluate
from sim.workload.nest import DataSpace, Nest, conv1d


def conv1d_rp():
    # Weights[r], Inputs[r+p], Outputs[p] (Timeloop's tutorial Conv1D)
    return Nest("c1", (("R", 3), ("P", 16)), (
        DataSpace("Weights", ((("R", 1),),)),
        DataSpace("Inputs", ((("R", 1), ("P", 1)),)),
        DataSpace("Outputs", ((("P", 1),),), True)))


def test_one_level_buffer_tl00():
    h = Hierarchy((StorageLevel("Buffer", capacity_words=64, read_pj=0.42564, fill_pj=0.42564, update_pj=0.42564,
                                leak_pj_per_cycle=0.000861),), Arithmetic(mac_pj=0.845))
    m = Mapping((LevelMapping(temporal={"R": 3, "P": 16}, permutation=("P", "R")),))
    ev = evaluate(h, conv1d_rp(), m)
    b = ev.levels[0]
    assert (b.tensor("Weights").reads, b.tensor("Weights").fills) == (48, 0)
    assert (b.tensor("Inputs").reads, b.tensor("Inputs").fills) == (48, 0)
    o = b.tensor("Outputs")
    assert (o.reads, o.fills, o.updates) == (32, 0, 48)
    assert ev.cycles == 48
    # 20.43 + 20.43 + 34.05 + 40.56 + 0.04 (README worked example)
    assert ev.energy_pj == pytest.approx(115.51, abs=0.01)


def test_two_level_output_stationary_tl01():
    h = Hierarchy((
        StorageLevel("MainMemory", block_size=8, read_pj=43.353054, fill_pj=30.878292, update_pj=30.878292),
        StorageLevel("Buffer", capacity_words=64, read_pj=0.42564, fill_pj=0.42564, update_pj=0.42564)),
        Arithmetic(mac_pj=0.845))
    m = Mapping((LevelMapping(temporal={"P": 16}), LevelMapping(temporal={"R": 3})))
    ev = evaluate(h, conv1d_rp(), m)
    mm, buf = ev.levels
    assert (buf.tensor("Weights").fills, buf.tensor("Weights").reads) == (3, 48)
    assert (buf.tensor("Inputs").fills, buf.tensor("Inputs").reads) == (18, 48)   # 3 + 15 x 1 (halo reuse)
    o = buf.tensor("Outputs")
    assert (o.reads, o.fills, o.updates) == (32, 0, 48)
    assert (mm.tensor("Weights").reads, mm.tensor("Inputs").reads) == (3, 18)
    assert (mm.tensor("Outputs").reads, mm.tensor("Outputs").fills, mm.tensor("Outputs").updates) == (0, 0, 16)
    # MainMemory block of 8: ceil(3/8) + ceil(18/8) read vectors, ceil(16/8) update vectors
    assert mm.access_energy_pj == pytest.approx(43.353054 * 4 + 30.878292 * 2)


def test_stride_reset_rule_tl04_register_file():
    # README rule 2: 16-word Inputs tile slides along R (16 + 1 + 1) per (C, K) pair, the K step
    # that wraps R costs the whole tile again: 18 x 2 x 32 = 1152 (an exact delta would be 704)
    ds = conv1d(c=32, k=32, r=3, p=16).data_space("Inputs")
    extents = (1, 1, 16)               # N, C, R+P
    loops = [("C", 32, 1), ("K", 2, 16), ("R", 3, 1)]
    assert delta_sum(ds, extents, loops) == 1152


def test_stationary_then_moving_fetches_whole_tile():
    ds = DataSpace("I", ((("A", 1),),))
    # outer loop A moves a 4-wide tile by 1 (halo), inner loop B does not index I: each A step
    # follows a stationary B step, so the whole tile is fetched: 4 x 5, not 4 + 4
    assert delta_sum(ds, (4,), [("A", 5, 1), ("B", 3, 1)]) == 20
    assert delta_sum(ds, (4,), [("B", 3, 1), ("A", 5, 1)]) == 4 + 4 + 2 * (4 + 4)


def test_distinct_tiles_multicast_and_diagonal():
    ds = DataSpace("I", ((("C", 1),), (("S", 1), ("Q", 1))))
    assert distinct_tiles(ds, [("M", 4, 1)]) == 1             # M does not index I: multicast
    assert distinct_tiles(ds, [("C", 3, 1), ("M", 4, 1)]) == 3
    assert distinct_tiles(ds, [("S", 3, 1), ("Q", 4, 1)]) == 6   # same level diagonal: q+s takes 6 values


def test_json_contract_shape_innermost_first():
    h = Hierarchy((StorageLevel("Main"), StorageLevel("net", spatial_only=True),
                   StorageLevel("RF", instances=4, capacity_words=100)), Arithmetic(instances=4))
    nest = conv1d(c=2, k=4, r=3, p=8)
    m = Mapping((LevelMapping(temporal={"C": 2}), LevelMapping(spatial_x={"K": 4}),
                 LevelMapping(temporal={"R": 3, "P": 8})))
    js = evaluate(h, nest, m).to_json()
    assert [lv["name"] for lv in js["levels"]] == ["RF", "Main"]
    assert js["computes"] == nest.macs and js["cycles"] == nest.macs // 4
    rf = js["levels"][0]
    assert rf["utilized_instances"] == 4
    assert rf["tensors"]["Outputs"]["updates"] == nest.macs      # totals over 4 instances
    assert set(rf["tensors"]["Weights"]) == {"reads", "fills", "updates"}


def test_bandwidth_slows_cycles():
    h = Hierarchy((StorageLevel("Main", read_bandwidth=0.5), StorageLevel("Buf")), Arithmetic())
    nest = conv1d(c=1, k=1, r=1, p=8)
    m = Mapping((LevelMapping(temporal={"P": 8}), LevelMapping()))
    ev = evaluate(h, nest, m)
    # Main reads 8 Inputs + 1 Weight in 8 compute cycles at 0.5 word/cycle: 18 cycles
    assert ev.compute_cycles == 8 and ev.cycles == 18


def test_spatial_innermost_loop_credits_stationary_operands():
    # Timeloop's 2024 interface tutorial: buffer -> spatial-only level fanning M out to 8 MACs.
    # The innermost loop of the nest is spatial, so operands reach the MACs as deltas of the
    # spatial box: Inputs (not indexed by M) stay put while the buffer's M loop runs and are read
    # once per 4 M steps; Weights change every cycle (8 per cycle, one per MAC).
    nest = Nest("mm", (("M", 32), ("P", 6)), (
        DataSpace("Weights", ((("M", 1),),)),
        DataSpace("Inputs", ((("P", 1),),)),
        DataSpace("Outputs", ((("M", 1),), (("P", 1),)), True)))
    h = Hierarchy((StorageLevel("Buffer"), StorageLevel("pe", spatial_only=True, instances=1)),
                  Arithmetic(instances=8))
    m = Mapping((LevelMapping(temporal={"P": 6, "M": 4}, permutation=("P", "M")),
                 LevelMapping(spatial_x={"M": 8})))
    ev = evaluate(h, nest, m)
    buf = ev.levels[0]
    assert ev.cycles == 24
    assert buf.tensor("Inputs").reads == 6            # one per P value, not one per cycle (24)
    assert buf.tensor("Weights").reads == 24 * 8
    assert buf.tensor("Outputs").updates == 24 * 8
