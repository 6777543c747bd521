"""Mapping search: on a space small enough to enumerate, the search finds the exhaustive optimum
of a cost computed independently from the mapping; same seed, same result; metrics rank as
Timeloop's optimisation metrics do; the budget is respected."""
import itertools

import numpy as np
import pytest

from sim.hw.hierarchy import Arithmetic, Hierarchy, StorageLevel
from sim.workload.nest import gemm
from sim.mapping.mapspace import neighbours
from tuner.search.mapsearch import Costs, MapSearchConfig, MapSearchError, metric_keys, search
from sim.mapping.mapspace import LevelConstraint
from sim.mapping.mapspace_sim import build_space, to_mapping


def small_problem():
    hier = Hierarchy((StorageLevel("DRAM"), StorageLevel("GLB", capacity_words=40),
                      StorageLevel("RF", capacity_words=6, instances=4, mesh_x=2, mesh_y=2)),
                     Arithmetic("MAC", instances=4, mesh_x=2, mesh_y=2))
    nest = gemm(4, 3, 2)
    cons = (LevelConstraint("DRAM", permutation=("M", "N", "K")),
            LevelConstraint("RF", permutation=("K", "N", "M"), keep=("Weights",), bypass=("Inputs", "Outputs")),
            LevelConstraint("GLB", keep=("Inputs", "Outputs"), bypass=("Weights",)))
    return hier, nest, cons


def synthetic_cost(hier, nest, space):
    """A cost of its own (not the data-movement model): cycles = temporal iterations; energy =
    the iteration box below each level, refetched once per temporal iteration above it, weighted
    by level, plus a price for the dim of the GLB's innermost loop."""
    def run(a):   # sim's arrays: levels outermost first
        t = a.temporal.prod(axis=(1, 2)).astype(float)
        f = (a.temporal * a.spatial_x * a.spatial_y)[:, ::-1]                              # innermost first
        box = np.cumprod(f, axis=1).prod(axis=2)                                          # [n, L]
        above = np.cumprod(a.temporal.prod(axis=2), axis=1)[:, ::-1]                      # levels outside
        above = np.concatenate([above[:, 1:], np.ones((len(a), 1), dtype=above.dtype)], axis=1)
        e = (box * above * (1 + np.arange(box.shape[1]))).sum(axis=1).astype(float)
        glb = a.perm[:, 1, ::-1]
        nonunit = np.take_along_axis(a.temporal[:, 1, :], glb, axis=1) > 1
        first = np.where(nonunit.any(axis=1), glb[np.arange(len(a)), np.argmax(nonunit, axis=1)], 0)
        return Costs(t, e + first)
    return run


def all_rows(space):
    P = space.n_primes
    slot_choices = [np.flatnonzero(space.allowed[j]) for j in range(P)]
    perms = []
    for lv in range(space.n_levels):
        fixed = list(space.perm_fixed[lv])
        free = [d for d in range(space.n_dims) if d not in fixed]
        perms.append([fixed + list(p) for p in itertools.permutations(free)])
    keep_free = [(lv, t) for lv in range(space.n_levels) for t in range(space.n_tensors) if space.keep_forced[lv, t] < 0]
    rows = []
    for slots in itertools.product(*slot_choices):
        for ps in itertools.product(*perms):
            for bits in itertools.product((0, 1), repeat=len(keep_free)):
                keep = np.where(space.keep_forced >= 0, space.keep_forced, 0)
                for (lv, t), b in zip(keep_free, bits):
                    keep[lv, t] = b
                rows.append(np.concatenate([slots, np.concatenate(ps), keep.ravel()]))
    rows = np.array(rows, dtype=np.int64)
    rows = rows[space.valid(rows)]
    _, first = np.unique(space.keys(rows), return_index=True)
    return rows[np.sort(first)]


@pytest.mark.parametrize("metric", ["edp", "energy", "delay"])
def test_search_finds_the_exhaustive_optimum(metric):
    hier, nest, cons = small_problem()
    space = build_space(hier, nest, cons)
    rows = all_rows(space)
    cost = synthetic_cost(hier, nest, space)
    allc = cost(space.arrays(rows))
    p, s = metric_keys(metric, allc)
    best = np.lexsort((s, p))[0]
    res = search(space, cost, metric, MapSearchConfig(evaluations=len(rows) // 3, population=64, seed=1))
    assert res.evaluations <= len(rows) // 3
    rc = Costs(np.array([res.cycles]), np.array([res.energy_pj]))
    assert metric_keys(metric, rc)[0][0] == pytest.approx(p[best])
    assert metric_keys(metric, rc)[1][0] == pytest.approx(s[best])
    to_mapping(space, res.genes).check(hier, nest)


def test_same_seed_same_result():
    hier, nest, cons = small_problem()
    space = build_space(hier, nest, cons)
    cost = synthetic_cost(hier, nest, space)
    a = search(space, cost, "edp", MapSearchConfig(evaluations=120, population=32, seed=5))
    b = search(space, cost, "edp", MapSearchConfig(evaluations=120, population=32, seed=5))
    assert (a.genes == b.genes).all() and a.evaluations == b.evaluations and a.history == b.history


def test_metric_keys_rank_like_timeloop():
    c = Costs(np.array([10.0, 10.0, 5.0]), np.array([3.0, 2.0, 7.0]))
    assert np.lexsort(metric_keys("delay", c)[::-1])[0] == 2       # fewest cycles
    assert np.lexsort(metric_keys("energy", c)[::-1])[0] == 1      # least energy
    assert np.lexsort(metric_keys("edp", c)[::-1])[0] == 1         # 20 < 30 < 35
    with pytest.raises(MapSearchError, match="metric"):
        metric_keys("area", c)


def test_neighbours_are_legal_single_changes():
    hier, nest, cons = small_problem()
    space = build_space(hier, nest, cons)
    row = space.sample(1, np.random.default_rng(3))[0]
    nb = neighbours(space, row)
    assert len(nb) > 0 and space.valid(nb).all()
    assert ((nb != row).sum(axis=1) <= 2).all()   # one prime moved, one swap or one bit


def test_rejected_mappings_never_win():
    hier, nest, cons = small_problem()
    space = build_space(hier, nest, cons)
    cost = synthetic_cost(hier, nest, space)

    def picky(a):
        c = cost(a)
        bad = a.spatial_x.prod(axis=(1, 2)) * a.spatial_y.prod(axis=(1, 2)) < 2   # refuses no parallelism
        return Costs(np.where(bad, np.inf, c.cycles), np.where(bad, np.inf, c.energy_pj))
    res = search(space, picky, "energy", MapSearchConfig(evaluations=200, population=32))
    assert np.isfinite(res.energy_pj)
    assert to_mapping(space, res.genes).utilized_macs() >= 2


def test_a_fully_constrained_space_has_one_mapping():
    """Every factor, order and keep bit fixed (Timeloop's 'baked' exercise): the search
    evaluates that one mapping and stops."""
    hier, nest, _ = small_problem()
    cons = (LevelConstraint("DRAM", temporal=(("M", 1), ("N", 3), ("K", 1)), permutation=("M", "N", "K")),
            LevelConstraint("GLB", temporal=(("M", 2), ("N", 1), ("K", 2)), spatial=(("M", 1), ("N", 1), ("K", 1)),
                            permutation=("M", "N", "K"), keep=("Inputs", "Outputs", "Weights")),
            LevelConstraint("RF", temporal=(("M", 2), ("N", 1), ("K", 1)), spatial=(("M", 1), ("N", 1), ("K", 1)),
                            permutation=("M", "N", "K"), keep=("Weights",), bypass=("Inputs", "Outputs")))
    space = build_space(hier, nest, cons)
    res = search(space, synthetic_cost(hier, nest, space), "edp", MapSearchConfig(evaluations=50, population=8))
    assert res.evaluations == 1
    m = to_mapping(space, res.genes)
    assert (m.levels[0].t("N"), m.levels[1].t("M"), m.levels[1].t("K"), m.levels[2].t("M")) == (3, 2, 2, 2)


def _every_single_change(space, row):
    """Brute force: every row one gene-change away (a prime moved, two free loops swapped, a free
    keep bit flipped), legal ones only."""
    out = []
    P, D = space.n_primes, space.n_dims
    for j in range(P):
        for s in np.flatnonzero(space.allowed[j]):
            if s != row[j]:
                r = row.copy()
                r[j] = s
                out.append(r)
    for lv in range(space.n_levels):
        for i in range(len(space.perm_fixed[lv]), D):
            for k in range(i + 1, D):
                r = row.copy()
                b = P + lv * D
                r[b + i], r[b + k] = row[b + k], row[b + i]
                out.append(r)
    kb = P + space.n_levels * D
    for col in np.flatnonzero((space.keep_forced < 0).ravel()):
        r = row.copy()
        r[kb + col] ^= 1
        out.append(r)
    nb = np.stack(out)
    return nb[space.valid(nb)]


@pytest.mark.parametrize("dims", [(64, 128, 256), (8, 96, 40), (1, 2048, 16)])
def test_neighbours_are_each_mapping_one_change_away_once(dims):
    """Equal primes of a dim in one slot are interchangeable: neighbours moves only the first, and
    still gives every mapping of the brute-force single changes, first seen in the same order."""
    from sim.hw.config_hierarchy import hierarchy_of
    from sim.hw.config import load_hw
    from sim.cost.multilevel import kernel_nest
    from sim.workload.workload import Workload
    hw = load_hw("a100-sxm-80gb")
    hier = hierarchy_of(hw)
    nest = kernel_nest(Workload.gemm(*dims, dtype_bytes=2), hw)
    space = build_space(hier, nest)
    for seed in range(3):
        row = space.sample(1, np.random.default_rng(seed))[0]
        got = neighbours(space, row)
        want = _every_single_change(space, row)
        assert len(got) < len(want)                       # the interchangeable moves are left out
        first = [list(dict.fromkeys(k.tobytes() for k in space.keys(r))) for r in (got, want)]
        assert first[0] == first[1]                       # the same mappings, first seen in the same order
