"""sim/cost/walk.py: the tile-level walk of a multi-level mapping. Its per-level, per-tensor totals
equal the closed form's (sim/cost/movement.py) exactly on random nests, hierarchies and mappings
(the same generator as tests/sim/test_recount.py) at every walk depth; its cycles equal the
closed form's with unbounded bandwidth and are never fewer with bounded ones; small cases are
checked against pipelines worked out by hand."""
import dataclasses
import math
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sim.hw.hierarchy import Arithmetic, Hierarchy, StorageLevel
from sim.mapping.mapping import LevelMapping, Mapping
from sim.cost.movement import evaluate
from sim.workload.nest import gemm
from sim.cost.walk import walk
from tests.sim.test_recount import cases

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _counts(levels):
    return [{n: (c.reads, c.fills, c.updates) for n, c in lv.tensors} for lv in levels]


@SETTINGS
@given(cases(), st.sampled_from([1, 2, 3, 8, 1 << 14]))
def test_counts_equal_the_closed_form_at_every_depth(case, cap):
    hier, nest, mapping = case
    ev = evaluate(hier, nest, mapping)
    w = walk(hier, nest, mapping, max_steps=cap)
    assert _counts(w.evaluation.levels) == _counts(ev.levels)
    assert w.steps <= cap
    # unbounded bandwidths: nothing waits, the walk takes the MACs' temporal iterations
    assert w.cycles == ev.cycles == ev.compute_cycles
    assert w.energy_pj == pytest.approx(ev.energy_pj, rel=1e-12)


@st.composite
def bounded_cases(draw):
    hier, nest, mapping = draw(cases())
    levels = []
    for lv in hier.levels:
        rbw = draw(st.sampled_from([None, 0.5, 1, 2, 4]))
        wbw = draw(st.sampled_from([None, 0.5, 1, 3]))
        cap = draw(st.sampled_from([None, 0, 1]))   # None: unbounded; 0/1: x1 or x2 of the tiles
        words = sum(mapping.tile_words(nest, i, ds.name) for i in [len(levels)] for ds in nest.data_spaces
                    if mapping.keeps(hier, i, ds.name))
        cw = None if cap is None or not levels else words * (1 + cap)
        levels.append(dataclasses.replace(lv, read_bandwidth=rbw, write_bandwidth=wbw, capacity_words=cw,
                                          leak_pj_per_cycle=0.5))
    return Hierarchy(tuple(levels), hier.arithmetic), nest, mapping


@SETTINGS
@given(bounded_cases(), st.sampled_from([1, 4, 1 << 14]))
def test_bounded_bandwidth_walk_never_beats_the_closed_form(case, cap):
    hier, nest, mapping = case
    ev = evaluate(hier, nest, mapping)
    w = walk(hier, nest, mapping, max_steps=cap)
    assert _counts(w.evaluation.levels) == _counts(ev.levels)
    assert w.cycles >= ev.cycles
    # the bound in exact arithmetic (the closed form's float slowdown can round a cycle above it)
    bound = Fraction(ev.compute_cycles)
    for lv, res in zip(hier.levels, ev.levels):
        rd = sum(c.reads for _, c in res.tensors)
        wr = sum(c.fills + c.updates for _, c in res.tensors)
        if lv.read_bandwidth is not None:
            bound = max(bound, rd / Fraction(lv.read_bandwidth))
        if lv.write_bandwidth is not None:
            bound = max(bound, wr / Fraction(lv.write_bandwidth))
    assert w.pipeline_cycles >= bound * (1 - 1e-12)
    # same counts, same access energy; leakage over the walk's cycles
    for a, b in zip(ev.levels, w.evaluation.levels):
        assert b.access_energy_pj == pytest.approx(a.access_energy_pj, rel=1e-12)
        assert b.leak_energy_pj == pytest.approx(0.0 if a.spatial_only else 0.5 * w.cycles * a.utilized_instances)


def _two_level(buffer_words, dram_bw=1.0):
    """gemm M=4 N=1 K=2: DRAM loops over M, the buffer over K, one MAC. Per M step the buffer
    needs a new Inputs row (2 words) and a fresh Outputs word; the Weights (2 words) stay."""
    nest = gemm(4, 1, 2)
    hier = Hierarchy((StorageLevel("DRAM", read_bandwidth=dram_bw, write_bandwidth=dram_bw),
                      StorageLevel("Buffer", capacity_words=buffer_words)), Arithmetic())
    mapping = Mapping((LevelMapping(temporal={"M": 4}), LevelMapping(temporal={"K": 2})))
    return hier, nest, mapping


def test_counts_of_a_small_case_worked_by_hand():
    w = walk(*_two_level(10))
    got = {lv.name: {n: (c.reads, c.fills, c.updates) for n, c in lv.tensors} for lv in w.evaluation.levels}
    assert got["DRAM"] == {"Weights": (2, 0, 0), "Inputs": (8, 0, 0), "Outputs": (0, 0, 4)}
    # MACs read an operand each cycle; the first write of each fresh sum is no read-modify-write
    assert got["Buffer"] == {"Weights": (8, 2, 0), "Inputs": (8, 8, 0), "Outputs": (4, 0, 8)}


@pytest.mark.parametrize("cap", [4, 8])
def test_pipeline_worked_by_hand(cap):
    """DRAM moves 1 word/cycle. Step m: Inputs row (2 words) in, the previous output out (1 word,
    on the write port: the step takes max(2, 1) = 2); step 0 also loads the Weights: 4 cycles.
    Double-buffered (capacity 10 >= 2 x 5 words): the load of row m+1 overlaps the 2 compute
    cycles of row m: 4 (fill) + 4 x 2 (compute) + 1 (the last output drains) = 13. Single-buffered
    (capacity 5): every load waits for the compute before it: 4 + 2 + 3 x (2 + 2) + 1 = 19. The
    closed form: DRAM reads 10 words at 1 word/cycle = 10 cycles. Walking the K loop too (cap 8)
    changes nothing: the buffer's tiles change only with M."""
    for words, expect in ((10, 13), (5, 19)):
        hier, nest, mapping = _two_level(words)
        w = walk(hier, nest, mapping, max_steps=cap)
        assert w.steps == cap and w.cycles == expect and w.analytical_cycles == 10
        assert w.fill_cycles == 4 and w.drain_cycles == 1
    # with unbounded bandwidth nothing waits: the 8 MAC cycles
    assert walk(*_two_level(5, dram_bw=None), max_steps=cap).cycles == 8


def test_pipeline_is_the_scan_on_random_loop_nests(monkeypatch):
    """The exact shortcut over repeating loop iterations equals the plain step-by-step scan."""
    import numpy as np
    from sim.cost import walk_pipeline as walk_mod
    monkeypatch.setattr(walk_mod, "_LEAF", 1)      # look for repeats at every loop
    rng = np.random.default_rng(7)
    for _ in range(400):
        shape = tuple(int(x) for x in rng.integers(1, 6, rng.integers(0, 5)))
        n = math.prod(shape)
        idx = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), int)
        code = np.zeros(n, int)
        for k in range(len(shape)):        # jobs repeat from iteration 1 of each loop, as deltas do
            code = code * 2 + np.minimum(idx[k], 1)
        cells = 2 ** len(shape)
        block = rng.integers(1, 4, cells).astype(float)[code]
        engines = []
        for j in range(int(rng.integers(0, 4))):
            step = np.where(rng.random(cells) < 0.6, rng.integers(0, 9, cells) / 2, 0.0)[code]
            if rng.random() < 0.3:
                step = np.roll(step, 1)     # drains land a step later
            blk = np.where(rng.random(cells) < 0.3, rng.integers(0, 5, cells).astype(float), 0.0)[code]
            block = np.maximum(block, blk)
            feeders = tuple(int(i) for i in range(j) if rng.random() < 0.5)
            engines.append((step, blk, float(rng.integers(0, 3)), int(rng.integers(1, 3)), feeders))
        fast = walk_mod.pipeline(engines, block, shape)
        plain = walk_mod.pipeline(engines, block, ())
        assert fast == pytest.approx(plain, rel=1e-12)


def test_compute_bound_double_buffered_is_the_closed_form_plus_fill_and_drain():
    """At 2 words/cycle every step's transfer (1 cycle) hides under the previous row's 2 compute
    cycles: the walk is the closed form's 8 cycles plus the fill (4 words: 2 cycles) and the last
    output's drain (1 word: 0.5 cycle), rounded up: 11."""
    w = walk(*_two_level(10, dram_bw=2.0))
    assert w.analytical_cycles == 8 and w.fill_cycles == 2 and w.drain_cycles == 0.5
    assert w.pipeline_cycles == 8 + 2 + 0.5 and w.cycles == 11


def test_bad_input_is_one_line():
    from sim.mapping.mapping import MappingError
    hier, nest, mapping = _two_level(10)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="max_steps must be an integer >= 1"):
            walk(hier, nest, mapping, max_steps=bad)
    with pytest.raises(MappingError, match="capacity of 4"):       # the mapping is checked first
        walk(*_two_level(4))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_counts_equal_with_an_output_reached_through_a_sum(data):
    """A transposed conv1d, O[k, p + r] += W[k, c, r] * I[c, p]: output tiles of different steps
    overlap, so which words are fresh is not the plain-dims rule; the walk's totals still equal
    the closed form's at every depth."""
    from sim.mapping.mapping import prime_factors
    from sim.workload.nest import DataSpace, Nest
    nest = Nest("tconv1d", (("C", 2), ("K", 2), ("R", 3), ("P", 4)), (
        DataSpace("Weights", ((("K", 1),), (("C", 1),), (("R", 1),))),
        DataSpace("Inputs", ((("C", 1),), (("P", 1),))),
        DataSpace("Outputs", ((("K", 1),), (("P", 1), ("R", 1))), read_write=True)))
    nlev = data.draw(st.integers(1, 3))
    facs = {d: [1] * nlev for d in nest.dim_names}
    for d, b in nest.dims:
        for p in prime_factors(b):
            facs[d][data.draw(st.integers(0, nlev - 1))] *= p
    mapping = Mapping(tuple(LevelMapping(temporal={d: facs[d][i] for d in nest.dim_names},
                                         permutation=tuple(data.draw(st.permutations(list(nest.dim_names)))))
                            for i in range(nlev)))
    hier = Hierarchy(tuple(StorageLevel(f"L{i}") for i in range(nlev)), Arithmetic())
    ev = evaluate(hier, nest, mapping)
    for cap in (1, 3, 1 << 14):
        assert _counts(walk(hier, nest, mapping, max_steps=cap).evaluation.levels) == _counts(ev.levels)
