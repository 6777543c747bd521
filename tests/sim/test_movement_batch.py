"""movement_batch (vectorised, closed form) == movement.evaluate (per mapping) on random legal
mappings, and check_batch == Mapping.check on random (often illegal) ones."""

from dataclasses import replace

import numpy as np
import pytest

from sim.hw.hierarchy import Arithmetic, Hierarchy, StorageLevel
from sim.mapping.mapping import LevelMapping, Mapping, MappingError, prime_factors
from sim.cost.movement import evaluate
from sim.cost.engines.batch import OK, MappingArrays, check_batch, evaluate_batch
from sim.cost.engines.jit import available
from sim.workload.nest import batch_matmul, conv1d, conv2d, gemm


def random_mapping(rng, nest, fan, nlev, spatial_prob=0.5, bypass_prob=0.25):
    """Random factorisation of every dim over (temporal, X, Y) slots of every level, within the
    X/Y fan-outs ``fan[i]``; random loop orders; random bypass below the backing store."""
    slots = {d: [[1, 1, 1] for _ in range(nlev)] for d in nest.dim_names}
    used = [[1, 1] for _ in range(nlev)]
    for d, b in nest.dims:
        for p in prime_factors(b):
            i = rng.integers(nlev)
            k = 0
            if rng.random() < spatial_prob:
                axis = rng.integers(2)
                if used[i][axis] * p <= fan[i][axis]:
                    k = 1 + axis
                    used[i][axis] *= p
            slots[d][i][k] *= p
    levels = []
    for i in range(nlev):
        perm = tuple(rng.permutation(list(nest.dim_names)))
        byp = frozenset(ds.name for ds in nest.data_spaces if i > 0 and rng.random() < bypass_prob)
        levels.append(LevelMapping(temporal={d: slots[d][i][0] for d in nest.dim_names}, permutation=perm,
                                   spatial_x={d: slots[d][i][1] for d in nest.dim_names},
                                   spatial_y={d: slots[d][i][2] for d in nest.dim_names}, bypass=byp))
    return Mapping(tuple(levels))


def eyeriss_like(spatial_last=False):
    levels = (StorageLevel("DRAM", block_size=4, read_pj=200, fill_pj=200, update_pj=200),
              StorageLevel("glb", capacity_words=1 << 20, block_size=4, read_pj=6, fill_pj=6, update_pj=6,
                           leak_pj_per_cycle=0.1, read_bandwidth=16, write_bandwidth=16),
              StorageLevel("ifmap", capacity_words=1 << 16, instances=16, mesh_x=4, keeps={"Inputs"},
                           read_pj=1, fill_pj=1, update_pj=1, leak_pj_per_cycle=0.01),
              StorageLevel("weights", capacity_words=1 << 16, instances=16, mesh_x=4, keeps={"Weights"},
                           read_pj=1, fill_pj=1, update_pj=1, cluster_size=4),
              StorageLevel("psum", capacity_words=1 << 16, instances=16, mesh_x=4, keeps={"Outputs"},
                           read_pj=1.5, fill_pj=1.5, update_pj=1.5))
    mac = Arithmetic(instances=64 if spatial_last else 16, mesh_x=8 if spatial_last else 4, mac_pj=2)
    return Hierarchy(levels, mac)


NESTS = [conv2d(c=4, m=8, r=3, s=3, p=6, q=4, stride=1), conv2d(c=2, m=4, r=3, s=1, p=4, q=6, stride=2),
         conv1d(c=4, k=6, r=3, p=12), gemm(12, 8, 6), batch_matmul(2, 4, 6, 4)]


def _legal_arrays(rng, hier, nest, n):
    """``n`` random mappings that pass Mapping.check, and their array form."""
    fan = [hier.fanout(i) for i in range(len(hier.levels))]
    maps = []
    while len(maps) < n:
        m = random_mapping(rng, nest, fan, len(hier.levels))
        try:
            m.check(hier, nest)
        except MappingError:
            continue
        maps.append(m)
    return maps, MappingArrays.from_mappings(hier, nest, maps)


ENGINES = ["numpy"] + (["jit-generic", "jit-specialised"] if available() else [])


def _evaluate(hier, nest, arrays, engine):
    """evaluate_batch with the numpy engine or one of the two compiled kernels."""
    if engine == "numpy":
        return evaluate_batch(hier, nest, arrays, engine="numpy")
    return evaluate_batch(hier, nest, arrays, engine="jit", specialise=engine == "jit-specialised")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("nest", NESTS, ids=lambda n: n.name)
@pytest.mark.parametrize("spatial_last", [False, True])
def test_batch_equals_one_by_one(nest, spatial_last, engine):
    hier = eyeriss_like(spatial_last)
    maps, arrays = _legal_arrays(np.random.default_rng(7), hier, nest, 60)
    assert (check_batch(hier, nest, arrays) == OK).all()
    got = _evaluate(hier, nest, arrays, engine)
    for b, m in enumerate(maps):
        ev = evaluate(hier, nest, m)
        assert got.cycles[b] == ev.cycles and got.compute_cycles[b] == ev.compute_cycles
        assert got.energy_pj[b] == pytest.approx(ev.energy_pj, rel=1e-9)
        for i, lv in enumerate(ev.levels):
            assert got.utilized[b, i] == lv.utilized_instances
            tens = dict(lv.tensors)
            for s, ds in enumerate(nest.data_spaces):
                c = tens.get(ds.name)
                want = (c.reads, c.fills, c.updates) if c else (0, 0, 0)
                assert (got.reads[b, i, s], got.fills[b, i, s], got.updates[b, i, s]) == want, (b, lv.name, ds.name)
    # round trip of the array form
    assert arrays.mapping(hier, nest, 0).levels[0].temporal == maps[0].levels[0].temporal


def test_check_batch_agrees_with_mapping_check():
    rng = np.random.default_rng(3)
    nest = NESTS[0]
    hier = eyeriss_like()
    big = [(8, 8)] * len(hier.levels)            # propose fan-outs beyond the hardware on purpose
    maps = [random_mapping(rng, nest, big, len(hier.levels), bypass_prob=0.4) for _ in range(300)]
    arrays = MappingArrays.from_mappings(hier, nest, maps)
    # break some products too
    arrays.temporal[::7, 0, 0] *= 2
    codes = check_batch(hier, nest, arrays)
    for b in range(len(maps)):
        try:
            arrays.mapping(hier, nest, b).check(hier, nest)
            legal = True
        except MappingError:
            legal = False
        assert legal == (codes[b] == OK), b
    assert 0 < (codes == OK).sum() < len(maps)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("block", [1, 2, 3, 8, 6])
def test_block_sizes_power_of_two_or_not(engine, block):
    """The jit divides by a power-of-two block with a shift and by any other with a division:
    energy equal to movement.evaluate for both kinds (and for block 1)."""
    base = eyeriss_like()
    levels = tuple(replace(lv, block_size=block) if i < 3 else lv for i, lv in enumerate(base.levels))
    hier = Hierarchy(levels, base.arithmetic)
    nest = NESTS[0]
    maps, arrays = _legal_arrays(np.random.default_rng(11), hier, nest, 30)
    got = _evaluate(hier, nest, arrays, engine)
    for b, m in enumerate(maps):
        ev = evaluate(hier, nest, m)
        assert got.energy_pj[b] == pytest.approx(ev.energy_pj, rel=1e-9)
        assert got.cycles[b] == ev.cycles


@pytest.mark.skipif(not available(), reason="numba not installed")
@pytest.mark.parametrize("engine", ["jit-generic", "jit-specialised"])
def test_jit_unpackable_keys_fall_back_one_by_one(engine):
    """When a data space's rank vector does not pack into one int64 the jit's one-comparison keys
    would be wrong: every row must then be flagged and evaluated by movement.evaluate."""
    from sim.cost.engines.batch import _structure
    hier = eyeriss_like()
    nest = NESTS[1]
    maps, arrays = _legal_arrays(np.random.default_rng(5), hier, nest, 12)
    st = _structure(hier, nest)
    st.packable = False
    try:
        got = _evaluate(hier, nest, arrays, engine)
    finally:
        st.packable = True
    assert got.fallback == len(maps)
    want = evaluate_batch(hier, nest, arrays, engine="numpy")
    assert np.array_equal(got.reads, want.reads) and np.array_equal(got.cycles, want.cycles)


@pytest.mark.skipif(not available(), reason="numba not installed")
@pytest.mark.parametrize("engine", ["jit-generic", "jit-specialised"])
def test_jit_flags_spatial_factors_where_a_level_does_not_fan_out(engine):
    """Both kernels count distinct tiles only where a level fans out; a row with a spatial factor
    elsewhere (not legal, but evaluate_batch must not answer it silently wrong) is flagged and
    evaluated one by one, like movement.evaluate(check=False)."""
    hier = eyeriss_like()
    nest = NESTS[0]
    maps, arrays = _legal_arrays(np.random.default_rng(13), hier, nest, 20)
    rows = []
    for b in range(len(maps)):
        d = int(np.argmax(arrays.temporal[b, 0] % 2 == 0))    # a dim with an even DRAM factor
        if arrays.temporal[b, 0, d] % 2 == 0:
            arrays.temporal[b, 0, d] //= 2
            arrays.spatial_x[b, 0, d] *= 2                       # DRAM has no fan-out
            rows.append(b)
    assert rows
    got = _evaluate(hier, nest, arrays, engine)
    assert got.fallback == len(rows)
    for b in rows:
        ev = evaluate(hier, nest, arrays.mapping(hier, nest, b), check=False)
        assert got.cycles[b] == ev.cycles and got.energy_pj[b] == pytest.approx(ev.energy_pj, rel=1e-12)
    keep = [b for b in range(len(maps)) if b not in rows]
    want = evaluate_batch(hier, nest, arrays.take(keep), engine="numpy")
    assert np.array_equal(got.reads[keep], want.reads) and np.array_equal(got.cycles[keep], want.cycles)


@pytest.mark.skipif(not available(), reason="numba not installed")
def test_jit_kernel_per_shape_cached_on_disk(tmp_path, monkeypatch):
    """One kernel per (hierarchy, nest) shape, whatever the bounds; its source is written to the
    cache directory (numba caches the compiled code next to it); without a writable directory
    it is compiled in memory, with the same results."""
    from sim.cost.engines import jit as movement_jit
    from sim.cost.engines.batch import _structure
    from sim.cost.engines.jitgen import source
    hier = Hierarchy((StorageLevel("DRAM", block_size=2, read_pj=100, fill_pj=100, update_pj=100),
                      StorageLevel("buf", capacity_words=1 << 12, instances=4, mesh_x=2, read_pj=2, fill_pj=2,
                                   update_pj=3, read_bandwidth=1, write_bandwidth=1)),
                     Arithmetic(instances=8, mesh_x=4, mac_pj=1))
    small, other = gemm(12, 8, 6), gemm(16, 4, 10)
    shape = movement_jit.shape_of(_structure(hier, small))
    assert movement_jit.shape_of(_structure(hier, other)) == shape          # bounds are arguments
    monkeypatch.setattr(movement_jit, "_KERNELS", {})
    monkeypatch.setenv("ACCEL_TUNE_JIT_CACHE", str(tmp_path / "jit"))
    assert movement_jit.kernel_for(shape)[1] is False       # not compiled: small batches go generic
    for nest in (small, other):
        maps, arrays = _legal_arrays(np.random.default_rng(17), hier, nest, 25)
        got = evaluate_batch(hier, nest, arrays, engine="jit", specialise=True)
        want = evaluate_batch(hier, nest, arrays, engine="numpy")
        assert np.array_equal(got.reads, want.reads) and np.array_equal(got.updates, want.updates)
        assert np.array_equal(got.cycles, want.cycles) and np.allclose(got.energy_pj, want.energy_pj, rtol=1e-12)
    files = list((tmp_path / "jit").glob("mvk_*.py"))
    assert len(files) == 1 and files[0].read_text() == source(shape)
    assert list((tmp_path / "jit" / "__pycache__").glob("mvk_*.nbc"))
    assert movement_jit.kernel_for(shape)[1] is True
    monkeypatch.setattr(movement_jit, "_KERNELS", {})        # a new process: compiled on disk
    assert movement_jit.kernel_for(shape)[1] is True
    # no writable directory: compiled in memory
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(movement_jit, "_KERNELS", {})
    monkeypatch.setenv("ACCEL_TUNE_JIT_CACHE", str(blocker / "jit"))
    maps, arrays = _legal_arrays(np.random.default_rng(19), hier, small, 25)
    got = evaluate_batch(hier, small, arrays, engine="jit", specialise=True)
    want = evaluate_batch(hier, small, arrays, engine="numpy")
    assert np.array_equal(got.fills, want.fills) and np.array_equal(got.cycles, want.cycles)


def test_auto_rents_numpy_until_a_cold_compile_would_pay(monkeypatch):
    """engine='auto' with a cold jit kernel evaluates in numpy (same numbers) and counts the CPU
    time it spends; once that reaches the cold compile's cost, or as soon as the kernel is ready
    (compiled in process or cached on disk), it runs the jit kernel."""
    from sim.cost.engines import batch as movement_batch
    from sim.cost.engines import jit as movement_jit
    if not available():
        pytest.skip("numba not installed")
    hier, nest = eyeriss_like(), conv2d(c=8, m=8, r=3, s=3, p=6, q=6)
    _, a = _legal_arrays(np.random.default_rng(3), hier, nest, 32)
    calls = []
    real_run = movement_jit.run
    monkeypatch.setattr(movement_jit, "run", lambda *x, **k: calls.append(1) or real_run(*x, **k))
    monkeypatch.setattr(movement_batch, "_NUMPY_SPENT", [0.0])
    monkeypatch.setattr(movement_jit, "generic_ready", lambda: False)
    cold = evaluate_batch(hier, nest, a)
    assert calls == [] and movement_batch._NUMPY_SPENT[0] > 0
    want = evaluate_batch(hier, nest, a, engine="numpy")
    assert (cold.cycles == want.cycles).all() and (cold.reads == want.reads).all()
    spent = movement_batch._NUMPY_SPENT[0]
    evaluate_batch(hier, nest, a, engine="numpy")              # only auto's numpy time counts
    assert movement_batch._NUMPY_SPENT[0] == spent
    movement_batch._NUMPY_SPENT[0] = movement_jit.COLD_COMPILE_S
    bought = evaluate_batch(hier, nest, a)
    assert calls == [1] and (bought.cycles == want.cycles).all()
    movement_batch._NUMPY_SPENT[0] = 0.0
    monkeypatch.setattr(movement_jit, "generic_ready", lambda: True)
    evaluate_batch(hier, nest, a)
    assert calls == [1, 1]


def test_generic_ready_reads_numbas_cache():
    """In a process whose generic kernel has run, it is ready; the answer is a plain bool."""
    from sim.cost.engines import jit as movement_jit
    if not available():
        pytest.skip("numba not installed")
    hier, nest = eyeriss_like(), conv2d(c=8, m=8, r=3, s=3, p=6, q=6)
    evaluate_batch(hier, nest, _legal_arrays(np.random.default_rng(4), hier, nest, 4)[1], engine="jit", specialise=False)
    assert movement_jit.generic_ready() is True
