"""sim/mapping/row_stationary.py: Eyeriss's row-stationary mappings in the mapping space. The
chip's own Table III parameters give legal mappings on the eyeriss-chip preset whose PE count is
the chip's measured active PEs (JSSC 2017 Table V) and whose per-PE tiles are the sizes the
paper's PE holds (p x q x S filter weights, a q x S ifmap window, p psums)."""
import pytest

from sim.hw.config import load_hw
from sim.hw.config_hierarchy import hierarchy_of
from sim.mapping.policy import default_mapping
from sim.mapping.row_stationary import RowStationary, row_stationary, row_stationary_candidates
from sim.workload.nest import conv2d, gemm

HIER = hierarchy_of(load_hw("eyeriss-chip"))
ANY = hierarchy_of(load_hw("eyeriss-chip").with_overrides({"mapspace.family": "any"}))


@pytest.mark.parametrize("layer, nest, rs, active", [
    # AlexNet CONV3 and CONV4 at batch 4 with the chip's parameters (Tables III and V)
    ("CONV3", conv2d(c=256, m=384, r=3, s=3, p=13, q=13, n=4), RowStationary(64, 4, 13, 16, 4, 1, 4), 156),
    ("CONV4", conv2d(c=384, m=384, r=3, s=3, p=13, q=13, n=4, groups=2), RowStationary(64, 4, 13, 16, 3, 2, 2), 156),
])
def test_the_chips_mapping_is_legal_and_fills_its_pes(layer, nest, rs, active):
    m = row_stationary(HIER, nest, rs)
    m.check(HIER, nest)
    names = [lv.name for lv in HIER.levels]
    glb = m.levels[names.index("shared_glb")]
    # a PE set is R rows by e columns; t sets for filters and r for channels stack along the rows
    assert dict(glb.spatial_x) == {"P": rs.e} and dict(glb.spatial_y) == {k: v for k, v in
                                                                           (("R", 3), ("M", rs.t), ("C", rs.r)) if v > 1}
    assert m.utilized_instances(len(names) - 1) * 1 == 3 * rs.t * rs.r * rs.e == active
    S = 3
    assert m.tile_words(nest, names.index("weights_spad"), "Weights") == rs.p * rs.q * S
    assert m.tile_words(nest, names.index("ifmap_spad"), "Inputs") == rs.q * S <= 12
    assert m.tile_words(nest, names.index("psum_spad"), "Outputs") == rs.p <= 24
    # the buffer holds the psums of m channels for n ifmaps over the PE set's rows and the row width
    assert m.tile_words(nest, names.index("shared_glb"), "Outputs") == rs.m * rs.n * rs.e * 13


def test_parameters_round_to_divisors():
    """AlexNet CONV1's e = 7 does not divide its 55 ofmap rows: the nearest divisor below, 5."""
    nest = conv2d(c=3, m=96, r=11, s=11, p=55, q=55, n=4, stride=4)
    m = row_stationary(HIER, nest, RowStationary(96, 1, 7, 16, 1, 1, 2))
    glb = m.levels[1]
    assert dict(glb.spatial_x) == {"P": 5} and dict(glb.spatial_y) == {"R": 11}   # 2 x 11 rows > 12: t = 1


def test_not_a_convolution_or_not_the_shape():
    assert row_stationary(HIER, gemm(8, 8, 8), RowStationary(1, 1, 1, 1, 1, 1, 1)) is None
    assert row_stationary_candidates(HIER, gemm(8, 8, 8)) == []
    tall = conv2d(c=4, m=4, r=13, s=3, p=8, q=8)                    # 13 filter rows > 12 PE rows
    assert row_stationary_candidates(HIER, tall) == []
    one_level = hierarchy_of(load_hw("edge-npu"))                   # the buffer feeds the MACs directly
    assert row_stationary_candidates(one_level, conv2d(c=16, m=16, r=3, s=3, p=8, q=8)) == []
    with pytest.raises(ValueError, match="parameter q must be an integer >= 1"):
        RowStationary(1, 1, 1, 1, 0, 1, 1)


def test_candidates_are_legal_and_the_policy_considers_them():
    nest = conv2d(c=64, m=64, r=3, s=3, p=28, q=28)
    cands = row_stationary_candidates(HIER, nest)
    assert 0 < len(cands) <= 128
    for m in cands:
        m.check(HIER, nest)
    from sim.cost.movement import evaluate
    best_rs = min(evaluate(HIER, nest, m).cycles for m in cands)
    chosen, _ = default_mapping(ANY, nest, "delay")      # the whole space holds the RS candidates
    assert evaluate(ANY, nest, chosen).cycles <= best_rs


def test_a_row_stationary_hierarchy_runs_the_best_walked_rs_candidate():
    """eyeriss-chip's mapping space is its compiler's: the default policy returns the RS
    candidate whose tile-level walk is fastest (recomputed here candidate by candidate), for
    every metric the walk's (cycles, energy) rank; a nest RS does not cover keeps the whole space."""
    from sim.cost.walk import walk
    assert HIER.family == "row_stationary" and ANY.family == "any"
    nest = conv2d(c=64, m=64, r=3, s=3, p=28, q=28)
    walked = [(walk(HIER, nest, m), m) for m in row_stationary_candidates(HIER, nest)]
    chosen, stats = default_mapping(HIER, nest, "delay")
    w = walk(HIER, nest, chosen)
    best = min(walked, key=lambda x: (x[0].cycles, x[0].energy_pj))[0]
    assert (w.cycles, w.energy_pj) == pytest.approx((best.cycles, best.energy_pj), rel=1e-12)
    assert stats.evaluations == len(walked)
    energy, _ = default_mapping(HIER, nest, "energy")
    assert walk(HIER, nest, energy).energy_pj == pytest.approx(min(w.energy_pj for w, _ in walked))
    _, free = default_mapping(ANY, nest, "delay")
    assert free.evaluations > len(walked)          # the whole space: samples and descents, not the family
    mm = gemm(64, 64, 64)
    g, _ = default_mapping(HIER, mm, "delay")
    g.check(HIER, mm)


def test_the_mapper_searches_only_the_family():
    """tuner's mapper on a row-stationary hierarchy evaluates exactly the RS candidates (no
    evolution) and returns the best of them by the closed form."""
    from sim.cost.movement import evaluate
    from tuner.search.mapper import search_mapping
    from sim.mapping.mapspace_sim import to_mapping
    nest = conv2d(c=64, m=64, r=3, s=3, p=28, q=28)
    cands = row_stationary_candidates(HIER, nest)
    space, res = search_mapping(HIER, nest, "delay", budget=500, keep_top=3)
    assert res.generations == 0 and res.evaluations <= len(cands)
    costs = {(evaluate(HIER, nest, m).cycles, evaluate(HIER, nest, m).energy_pj) for m in cands}
    best = evaluate(HIER, nest, to_mapping(space, res.genes))
    assert best.cycles == min(c for c, _ in costs)
    for r in res.top:                   # every kept row is one of the candidates (its cost is theirs)
        e = evaluate(HIER, nest, to_mapping(space, r))
        assert any(e.cycles == c and e.energy_pj == pytest.approx(en, rel=1e-12) for c, en in costs)
