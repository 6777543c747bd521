"""Schedule space: legal by construction (checked against sim's own Schedule.check), exact size,
uniform sampling, encoding round trips, and operators that keep children legal."""
import itertools

import numpy as np
import pytest

import sim
from sim import LOOP_ORDERS, STANDARD_SPATIAL, Schedule
from tuner.search.space import (DATAFLOW, DB, ORDER, ORIENT, TK, TM, TN, DataflowMutation, DoubleBufferMutation,
                         LoopOrderMutation, MutationMix, ScheduleSpace, SpaceError, TileFactorMutation,
                         UniformCrossover, divisors, tile_candidates)


def small_hw(rows=8, cols=8):
    # Small buffers so the buffer check prunes a real part of the space.
    return sim.load_hw("edge-npu").with_overrides({
        "array.rows": rows, "array.cols": cols, "buffers.ifmap_bytes": 96, "buffers.weight_bytes": 128,
        "buffers.output_bytes": 160})


WL = sim.Workload.gemm(24, 20, 12)
CONV = sim.Workload.conv2d(1, 6, 9, 9, 10, 3, 3, pad=1)


def test_divisors_match_brute_force():
    for d in (1, 7, 12, 36, 97, 3136):
        assert divisors(d) == [i for i in range(1, d + 1) if d % i == 0]


def test_tile_candidates_hold_divisors_and_padded_tiles():
    c = tile_candidates(100, (16,))
    assert set(divisors(100)) <= set(c)
    assert 34 in c          # ceil(100/3): three tiles, the last short (padding waste)
    assert 48 in c          # 34 rounded up to the array extent
    assert {16, 32, 64} <= set(c)
    assert max(c) == 100 and min(c) == 1


@pytest.mark.parametrize("wl", [WL, CONV], ids=["gemm", "conv"])
def test_space_is_exactly_the_legal_schedules(wl):
    hw = small_hw()
    sp = ScheduleSpace.build(wl, hw, max_tiles=10**9)
    legal = 0
    for df, tm, tn, tk, order, db in itertools.product(sp.dataflows, sp.tiles_m, sp.tiles_n, sp.tiles_k,
                                                      LOOP_ORDERS, (True, False)):
        s = Schedule(df, STANDARD_SPATIAL[df], tm, tn, tk, order, db, sp.epilogue)
        legal += s.fits(wl, hw)
    assert sp.size == legal
    assert 0 < sp.size < sp.raw_size          # the buffers really prune
    rows = np.concatenate(list(sp.enumerate(chunk=64)))
    assert len(rows) == sp.size == len(np.unique(sp.encode(rows)))
    for s in sp.schedules(rows[:: max(1, len(rows) // 200)]):
        s.check(wl, hw)


def test_orientation_only_on_non_square_arrays():
    assert ScheduleSpace.build(WL, small_hw(8, 8)).orientations == (False,)
    sp = ScheduleSpace.build(WL, small_hw(4, 8))
    assert sp.orientations == (False, True)
    transposed = [s for s in sp.schedules(sp.sample(200, np.random.default_rng(0))) if s.transposed]
    assert transposed and all(s.spatial == STANDARD_SPATIAL[s.dataflow][::-1] for s in transposed)


def test_only_supported_dataflows():
    hw = small_hw().with_overrides({"array.dataflows": ["os"]})
    sp = ScheduleSpace.build(WL, hw)
    assert sp.dataflows == ("os",)


def test_tile_count_cap_prunes_many_tile_schedules():
    hw = sim.load_hw("edge-npu")
    wl = sim.Workload.conv2d(1, 64, 56, 56, 64, 3, 3, pad=1)
    sp = ScheduleSpace.build(wl, hw, max_tiles=256)
    _, m, n, k = wl.gemm_view()
    for s in sp.schedules(sp.sample(500, np.random.default_rng(1))):
        assert -(-m // s.tile_m) * -(-n // s.tile_n) * -(-k // s.tile_k) <= 256


def test_sampling_is_uniform_over_legal_points():
    sp = ScheduleSpace.build(sim.Workload.gemm(6, 4, 4), small_hw())
    g = sp.sample(60 * sp.size, np.random.default_rng(2))
    assert sp.is_valid(g).all()
    _, counts = np.unique(sp.encode(g), return_counts=True)
    assert len(counts) == sp.size
    # 60 expected per point: a chi-square statistic far above its df means non-uniform.
    chi2 = ((counts - 60.0) ** 2 / 60.0).sum()
    assert chi2 < sp.size + 6 * np.sqrt(2 * sp.size)


def test_encode_decode_and_genes_of_round_trip():
    sp = ScheduleSpace.build(CONV, small_hw(4, 8))
    g = sp.sample(300, np.random.default_rng(3))
    assert (sp.decode(sp.encode(g)) == g).all()
    for row in g[:50]:
        assert (sp.genes_of(sp.schedule(row)) == row).all()
    outside = sp.schedule(g[0]).replace(tile_m=max(sp.tiles_m) + 1)
    assert sp.genes_of(outside) is None


def test_vector_workload_space():
    wl = sim.Workload.vector("elementwise", 1000, 1000, 1000)
    sp = ScheduleSpace.build(wl, sim.load_hw("cloud-npu"))
    assert sp.tiles_n == sp.tiles_k == (1,) and 1000 in sp.tiles_m
    for s in sp.schedules(sp.sample(20, np.random.default_rng(0))):
        s.check(wl, sp.hw)


def test_nothing_fits_is_one_clear_error():
    hw = small_hw().with_overrides({"array.word_bytes": 2, "buffers.output_bytes": 1})
    with pytest.raises(SpaceError, match="no tile of gemm.* fits the buffers"):
        ScheduleSpace.build(WL, hw)


@pytest.fixture
def space():
    return ScheduleSpace.build(CONV, small_hw(4, 8))


def test_every_operator_keeps_children_legal(space):
    rng = np.random.default_rng(4)
    g = space.sample(400, rng)
    for op in (TileFactorMutation(), LoopOrderMutation(), DataflowMutation(), DoubleBufferMutation(), MutationMix()):
        child = op(space, g, rng)
        assert space.is_valid(child).all(), op
    child = UniformCrossover()(space, g, space.sample(400, rng), rng)
    assert space.is_valid(child).all()


def test_tile_factor_mutation_moves_one_tile(space):
    rng = np.random.default_rng(5)
    g = space.sample(400, rng)
    child = TileFactorMutation()(space, g, rng)
    changed = child != g
    assert changed[:, [DATAFLOW, ORIENT, ORDER, DB]].sum() == 0
    assert changed[:, [TM, TN, TK]].sum(axis=1).max() == 1
    assert changed.any()


def test_loop_order_mutation_swaps_two_loops(space):
    rng = np.random.default_rng(6)
    g = space.sample(200, rng)
    child = LoopOrderMutation()(space, g, rng)
    for a, b in zip(g[:, ORDER], child[:, ORDER]):
        oa, ob = space.loop_orders[a], space.loop_orders[b]
        assert sorted(oa) == sorted(ob) and sum(x != y for x, y in zip(oa, ob)) == 2
    assert (np.delete(child, ORDER, axis=1) == np.delete(g, ORDER, axis=1)).all()


def test_dataflow_mutation_changes_mapping_only(space):
    rng = np.random.default_rng(7)
    g = space.sample(200, rng)
    child = DataflowMutation()(space, g, rng)
    mapping = (child[:, DATAFLOW] != g[:, DATAFLOW]) | (child[:, ORIENT] != g[:, ORIENT])
    assert mapping.all()
    assert (child[:, [TM, TN, TK, ORDER, DB]] == g[:, [TM, TN, TK, ORDER, DB]]).all()


def test_crossover_genes_come_from_parents(space):
    rng = np.random.default_rng(8)
    a, b = space.sample(300, rng), space.sample(300, rng)
    c = UniformCrossover()(space, a, b, rng)
    assert ((c == a) | (c == b)).all()
