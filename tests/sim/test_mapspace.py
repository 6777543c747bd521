"""Multi-level mapspace: every sampled, mutated and crossed mapping is legal by sim's own
independent check (``Mapping.check``: factor products, fan-out, capacity, backing store) and
respects the user's constraints; operators change mappings; keys identify mappings."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sim.hw.hierarchy import Arithmetic, Hierarchy, StorageLevel
from sim.mapping.mapping import MappingError
from sim.workload.nest import conv1d, conv2d, gemm
from sim.mapping.mapspace import (FactorMove, FactorSwap, KeepFlip, LevelConstraint, MapMutationMix, MapspaceError, MapUniformCrossover, PermutationSwap)
from sim.mapping.mapspace_sim import build_space, from_mapping, to_mapping


def three_level(glb=64, rf=8, pes=(4, 2)):
    return Hierarchy((StorageLevel("DRAM"),
                      StorageLevel("GLB", capacity_words=glb),
                      StorageLevel("RF", capacity_words=rf, instances=pes[0] * pes[1], mesh_x=pes[0],
                                   mesh_y=pes[1], keeps=frozenset({"Weights", "Outputs"}))),
                     Arithmetic("MAC", instances=pes[0] * pes[1], mesh_x=pes[0], mesh_y=pes[1]))


def check_row(space, hier, nest, row, constraints=()):
    m = to_mapping(space, row)
    m.check(hier, nest)                       # sim's check, independent of the mapspace's
    for c in constraints:
        i = hier.index(c.level)
        lm = m.levels[i]
        for d, f in c.temporal:
            assert lm.t(d) == f
        for d, f in c.spatial:
            assert lm.s(d) == f
        for d in c.spatial_x:
            assert lm.sy(d) == 1
        for d in c.spatial_y:
            assert lm.sx(d) == 1
        if c.permutation:
            inner_first = list(lm.permutation)[::-1]
            assert inner_first[:len(c.permutation)] == list(c.permutation)
        for t in c.keep:
            assert m.keeps(hier, i, t)
        for t in c.bypass:
            assert not m.keeps(hier, i, t)
    return m


@st.composite
def problems(draw):
    kind = draw(st.sampled_from(["gemm", "conv1d", "conv2d"]))
    small = st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16])
    if kind == "gemm":
        nest = gemm(draw(small), draw(small), draw(small))
    elif kind == "conv1d":
        nest = conv1d(draw(small), draw(small), draw(st.sampled_from([1, 3])), draw(small),
                      stride=draw(st.sampled_from([1, 2])))
    else:
        nest = conv2d(draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([2, 4, 8])), 3, 3,
                      draw(st.sampled_from([2, 4, 7])), draw(st.sampled_from([2, 4])))
    mx, my = draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2, 3]))
    glb = draw(st.sampled_from([32, 128, 1024]))
    rf = draw(st.sampled_from([2, 4, 16]))
    levels = [StorageLevel("DRAM"), StorageLevel("GLB", capacity_words=glb)]
    if draw(st.booleans()):
        levels.append(StorageLevel("PEs", instances=mx * my, mesh_x=mx, mesh_y=my, spatial_only=True))
    levels.append(StorageLevel("RF", capacity_words=rf, instances=mx * my, mesh_x=mx, mesh_y=my,
                               keeps=draw(st.sampled_from([None, frozenset({"Weights"}),
                                                           frozenset({"Outputs", "Inputs"})]))))
    hier = Hierarchy(tuple(levels), Arithmetic("MAC", instances=mx * my, mesh_x=mx, mesh_y=my))
    dims = list(nest.dim_names)
    cons = []
    d = draw(st.sampled_from(dims))
    divs = [f for f in range(1, nest.bounds[d] + 1) if nest.bounds[d] % f == 0]
    if draw(st.booleans()):
        cons.append(LevelConstraint("GLB", temporal=((d, draw(st.sampled_from(divs))),)))
    if draw(st.booleans()):
        perm = draw(st.permutations(dims))
        cons.append(LevelConstraint("DRAM", permutation=tuple(perm[:draw(st.integers(1, len(dims)))])))
    if draw(st.booleans()):
        cons.append(LevelConstraint("GLB", bypass=("Weights",), keep=("Outputs",)))
    if draw(st.booleans()):
        half = draw(st.integers(0, len(dims)))
        cons.append(LevelConstraint(levels[-2].name if levels[-2].spatial_only else "GLB",
                                    spatial_x=tuple(dims[:half]), spatial_y=tuple(dims[half:])))
    return hier, nest, tuple(cons)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.integers(0, 2**32 - 1))
def test_sampled_mutated_crossed_mappings_are_legal_and_constrained(prob, seed):
    hier, nest, cons = prob
    rng = np.random.default_rng(seed)
    try:
        space = build_space(hier, nest, cons)
        rows = space.sample(24, rng)
    except MapspaceError:
        # Then no legal mapping exists: with every free factor at DRAM, fixed factors or the
        # forced keeps overflow a level. sim's check must agree on that mapping.
        space = build_space(hier, nest, cons)
        anchor = space._anchor()
        with pytest.raises(MappingError):
            to_mapping(space, anchor).check(hier, nest)
        return
    assert space.valid(rows).all()
    kids = [MapMutationMix()(space, rows, rng), FactorMove()(space, rows, rng), FactorSwap()(space, rows, rng),
            PermutationSwap()(space, rows, rng), KeepFlip()(space, rows, rng),
            MapUniformCrossover()(space, rows, rows[::-1].copy(), rng)]
    for batch in [rows] + kids:
        assert space.valid(batch).all()
        for row in batch:
            m = check_row(space, hier, nest, row, cons)
            back = from_mapping(space, hier, m)
            assert space.keys(back[None])[0] == space.keys(row[None])[0]


def test_valid_rejects_what_sim_rejects():
    """Rows the space calls illegal are illegal for sim too, and the reverse (capacity, fan-out)."""
    hier, nest = three_level(glb=24, rf=3, pes=(2, 2)), gemm(4, 4, 4)
    space = build_space(hier, nest)
    rng = np.random.default_rng(0)
    raw = space._raw(400, rng)
    ok = space.valid(raw)
    assert 0 < ok.sum() < len(raw)
    for row, good in zip(raw, ok):
        try:
            to_mapping(space, row).check(hier, nest)
            legal = True
        except MappingError:
            legal = False
        assert legal == good


def test_operators_explore():
    hier, nest = three_level(glb=256, rf=16), conv1d(8, 8, 3, 16)
    space = build_space(hier, nest)
    rng = np.random.default_rng(1)
    rows = space.sample(200, rng)
    assert len(np.unique(space.keys(rows))) > 150
    for op in (FactorMove(), FactorSwap(), PermutationSwap(), KeepFlip()):
        kids = op(space, rows, rng)
        changed = (space.keys(kids) != space.keys(rows)).mean()
        assert changed > 0.1, op
    kids = MapUniformCrossover()(space, rows, rows[::-1].copy(), rng)
    assert (space.keys(kids) != space.keys(rows)).mean() > 0.3


def test_sampling_is_reproducible():
    hier, nest = three_level(), gemm(8, 6, 4)
    space = build_space(hier, nest)
    a = space.sample(50, np.random.default_rng(7))
    b = space.sample(50, np.random.default_rng(7))
    assert (a == b).all()


def test_keys_ignore_unit_loop_order_and_equal_primes():
    hier, nest = three_level(), gemm(4, 1, 1)
    space = build_space(hier, nest)
    row = space.sample(1, np.random.default_rng(0))[0]
    other = row.copy()
    slots, perms, _ = space.split(other[None])
    # swap the two primes of M (both 2): the same factors
    j = np.flatnonzero(space.prime_dim == 0)
    other[j[0]], other[j[1]] = row[j[1]], row[j[0]]
    # N and K have factor 1 everywhere: their order is irrelevant
    base = space.n_primes
    for lv in range(space.n_levels):
        p = list(other[base + lv * 3: base + lv * 3 + 3])
        iN, iK = p.index(1), p.index(2)
        p[iN], p[iK] = 2, 1
        other[base + lv * 3: base + lv * 3 + 3] = p
    assert space.keys(other[None])[0] == space.keys(row[None])[0]


def test_constraint_errors_name_the_problem():
    hier, nest = three_level(), gemm(8, 6, 4)
    with pytest.raises(MapspaceError, match="not a storage level"):
        build_space(hier, nest, (LevelConstraint("L9", temporal=(("M", 2),)),))
    with pytest.raises(MapspaceError, match="dim 'Z'"):
        build_space(hier, nest, (LevelConstraint("GLB", temporal=(("Z", 2),)),))
    with pytest.raises(MapspaceError, match="does not divide"):
        build_space(hier, nest, (LevelConstraint("GLB", temporal=(("M", 3),)),))
    with pytest.raises(MapspaceError, match="data space 'Psums'"):
        build_space(hier, nest, (LevelConstraint("GLB", bypass=("Psums",)),))
    with pytest.raises(MapspaceError, match="outermost"):
        build_space(hier, nest, (LevelConstraint("DRAM", bypass=("Weights",)),))
    with pytest.raises(MapspaceError, match="no loop for dim M"):
        build_space(hier, nest, tuple(LevelConstraint(lv, temporal=(("M", 1),), spatial=(("M", 1),))
                                      for lv in ("DRAM", "GLB", "RF")))


def test_no_fit_is_one_error():
    hier = three_level(glb=1, rf=1)
    space = build_space(hier, gemm(4, 4, 4), (LevelConstraint("GLB", keep=("Weights", "Inputs")),))
    with pytest.raises(MapspaceError, match="no mapping fits"):
        space.sample(4, np.random.default_rng(0))
