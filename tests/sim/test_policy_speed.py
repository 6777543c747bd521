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
    for case in range(200):
        n = int(gen.integers(0, 14))
        primes = [(int(g), int(gen.choice([2, 2, 2, 3, 3, 5, 7]))) for g in gen.permutation(40)[:n]]
        fan = int(gen.choice([1, 4, 12, 14, 27, 108, 128, 132]))
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
