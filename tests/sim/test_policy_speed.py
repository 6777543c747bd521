"""The default mapping policy made cheaper without changing its answer (issue 20, item 7): the
bincount form of ``Mapspace.factors``, the batched ``_pack`` and the deferred numba import give the
same numbers as the forms they replace."""
import subprocess
import sys

import numpy as np
import pytest

import sim
from sim.cost import multilevel as ml
from sim.hw.config_hierarchy import hierarchy_of
from sim.mapping import policy
from sim.mapping.mapspace_sim import build_space
from sim.mapping.policy import default_mapping
from sim.workload.workload import Workload


def _pack_one_at_a_time(primes, fan, rng):
    """The subset-product search as it was written before: one insertion at a time."""
    reach = {1: ()}
    for k in rng.permutation(len(primes)):
        g, f = primes[k]
        for prod, used in list(reach.items()):
            q = prod * f
            if q <= fan and q not in reach:
                reach[q] = used + (g,)
    best = max(reach) if rng.random() < 0.85 else int(rng.choice(list(reach)))
    return list(reach[best])


def test_pack_matches_one_insertion_at_a_time():
    gen = np.random.default_rng(7)
    for case in range(400):
        n = int(gen.integers(0, 30))
        # mostly 2s, as GEMM dims are; primes above the fan-out (19, 607) never add a product
        pool = [2, 2, 2, 3, 3, 5, 7, 19, 607] if case % 2 else [2, 2, 2, 2, 19, 607]
        primes = [(int(g), int(gen.choice(pool))) for g in gen.permutation(40)[:n]]
        fan = int(gen.choice([1, 4, 12, 14, 16, 27, 108, 128, 132]))
        got = policy._pack(primes, fan, np.random.default_rng(case))
        want = _pack_one_at_a_time(primes, fan, np.random.default_rng(case))
        assert got == want


def test_factors_bincount_equals_the_per_gene_product():
    """A 2^17-long dim has 17 genes of one prime: the bincount path (rows x genes >= 4096) must
    give each cell the product of the primes in it, counted here gene by gene."""
    hw = sim.load_hw("a100-sxm-80gb")
    space = build_space(hierarchy_of(hw), ml.kernel_nest(Workload.gemm(131072, 2048, 8192, dtype_bytes=2), hw))
    rows = space.sample(300, np.random.default_rng(1))
    assert len(rows) * space.n_primes >= 4096
    slots, _, _ = space.split(rows)
    want = np.ones((len(rows), 3 * space.n_levels, space.n_dims), dtype=np.int64)
    for r in range(len(rows)):
        for j in range(space.n_primes):
            want[r, slots[r, j], space.prime_dim[j]] *= space.prime_val[j]
    got = space.factors(rows)
    assert got.dtype == np.int64 and (got == want).all()
    assert (got.prod(axis=(1, 2)) == np.prod(space.prime_val)).all()     # every prime placed once


# (cycles, energy pJ, evaluations) of the default mapping, recorded with the policy before these
# changes (main at 05fc282): the same search must find the same mapping
PINNED = [
    ("a100-sxm-80gb", (96, 200, 300), (130.0, 9112780.8, 1014)),
    ("a100-sxm-80gb", (1, 4096, 4096), (23256.0, 1054498176.0, 1237)),
    ("edge-llm-npu", (1, 4096, 4096), (245701.0, 605476126.72, 695)),
    ("simba-like", (96, 200, 300), (22500.0, 15495415.601400001, 550)),
]


@pytest.mark.parametrize("preset,mnk,want", PINNED)
def test_default_mapping_unchanged_on_gemms(preset, mnk, want, monkeypatch):
    from sim.cost.engines import batch
    # the numpy form throughout: the jit kernel's energies may differ in the last bit, which can
    # break a tie between two mappings of equal cycles differently
    monkeypatch.setattr(batch, "_jit_worth_asking", lambda: False)
    hw = sim.load_hw(preset)
    _, stats = default_mapping(hierarchy_of(hw), ml.kernel_nest(Workload.gemm(*mnk, dtype_bytes=2), hw))
    assert stats.cycles == want[0] and stats.evaluations == want[2]
    assert stats.energy_pj == pytest.approx(want[1], rel=1e-12)


def test_auto_engine_leaves_numba_unimported_in_a_short_run():
    """Costing one GEMM on a GPU preset (a few hundred batches, well under ``JIT_LOAD_S`` of numpy)
    must not import numba: its import alone costs about half a CPU-second and 100 MB."""
    code = ("import sys, sim\n"
            "from sim.cost.multilevel import kernel_mapping\n"
            "from sim.workload.workload import Workload\n"
            "kernel_mapping(Workload.gemm(64, 256, 512, dtype_bytes=2), sim.load_hw('a100-sxm-80gb'))\n"
            "print('numba' in sys.modules, 'sim.cost.engines.jit' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def _neighbours_as_before(space, row):
    """Every single change of ``row``, filtered by ``Mapspace.valid``: ``neighbours`` as it was
    written before it vectorised the prime moves and checked only limits."""
    P, D = space.n_primes, space.n_dims
    row = np.asarray(row)
    parts, moved = [], set()
    for j in range(P):
        group = (int(space.prime_dim[j]), int(space.prime_val[j]), int(row[j]), space.allowed[j].tobytes())
        if group in moved:
            continue
        moved.add(group)
        to = np.flatnonzero(space.allowed[j])
        to = to[to != row[j]]
        r = np.repeat(row[None, :], len(to), axis=0)
        r[:, j] = to
        parts.append(r)
    i, k = np.triu_indices(D, 1)
    for lv in range(space.n_levels):
        free = i >= len(space.perm_fixed[lv])
        a, b = P + lv * D + i[free], P + lv * D + k[free]
        r = np.repeat(row[None, :], len(a), axis=0)
        at = np.arange(len(a))
        r[at, a], r[at, b] = row[b], row[a]
        parts.append(r)
    flips = P + space.n_levels * D + np.flatnonzero((space.keep_forced < 0).ravel())
    r = np.repeat(row[None, :], len(flips), axis=0)
    r[np.arange(len(flips)), flips] ^= 1
    parts.append(r)
    nb = np.concatenate(parts).astype(np.int64)
    return nb[space.valid(nb)]


@pytest.mark.parametrize("preset", ["a100-sxm-80gb", "simba-like", "eyeriss", "edge-llm-npu"])
def test_neighbours_equal_the_valid_single_changes(preset):
    from sim.mapping.mapspace import neighbours
    hw = sim.load_hw(preset)
    space = build_space(hierarchy_of(hw), ml.kernel_nest(Workload.gemm(96, 200, 360, dtype_bytes=2), hw))
    for row in space.sample(20, np.random.default_rng(3)):
        got, want = neighbours(space, row), _neighbours_as_before(space, row)
        assert got.shape == want.shape and (got == want).all()


NESTS = [(1, 4096, 4096), (64, 8192, 1024), (96, 200, 300), (1, 50257, 768), (128, 8, 324), (2052, 256, 128)]


@pytest.mark.parametrize("preset,metric", [(p, "delay") for p in ("a100-sxm-80gb", "mi210", "simba-like", "eyeriss",
                                                                   "edge-llm-npu", "cloud-npu")]
                         + [("a100-sxm-80gb", "energy"), ("simba-like", "edp")])
def test_descents_side_by_side_change_no_answer(preset, metric, monkeypatch):
    """``_lockstep`` evaluates the descents' steps side by side ahead of them; the descents, run
    one after the other as before, must end where they ended without it, after as many
    evaluations (rows taken from the costs evaluated ahead count as evaluated)."""
    from sim.cost.engines import batch
    monkeypatch.setattr(batch, "_jit_worth_asking", lambda: False)
    hw = sim.load_hw(preset)
    hier = hierarchy_of(hw)
    nests = [ml.kernel_nest(Workload.gemm(*mnk, dtype_bytes=2), hw) for mnk in NESTS]
    with_ahead = [default_mapping(hier, n, metric) for n in nests]
    monkeypatch.setattr(policy, "_lockstep", lambda best, starts, steps: {})
    for nest, (m, stats) in zip(nests, with_ahead):
        m0, stats0 = default_mapping(hier, nest, metric)
        assert m == m0
        assert (stats.cycles, stats.energy_pj, stats.evaluations) == (stats0.cycles, stats0.energy_pj, stats0.evaluations)


def test_random_perms_are_the_row_at_a_time_draws_with_pinned_loops():
    """The packed sampler's loop orders, drawn for all rows at once, are the orders it drew a row
    at a time (``_perm_fill`` of one ``L x D`` draw per row), pinned loops innermost included."""
    from sim.mapping.mapspace import LevelConstraint
    hw = sim.load_hw("simba-like")
    hier = hierarchy_of(hw)
    nest = ml.kernel_nest(Workload.gemm(96, 200, 300, dtype_bytes=2), hw)
    pin = LevelConstraint(level=hier.names[1], permutation=tuple(nest.dim_names[:2]))
    space = build_space(hier, nest, [pin])
    assert any(space.perm_fixed)
    rng = np.random.default_rng(5)
    want = np.stack([np.stack([space._perm_fill(lv, o) for lv, o in
                               enumerate(np.argsort(rng.random((space.n_levels, space.n_dims)), axis=1))])
                     for _ in range(30)])
    got = policy._random_perms(space, 30, np.random.default_rng(5))
    assert (got == want).all()
