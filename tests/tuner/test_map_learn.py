"""The learned model for mappings under an expensive measurer: with use=never the candidates are
measured in the analytical order; when the measurer disagrees with the analytical model (here it
ranks the reverse way), XGBoost trained between rounds steers the next rounds towards what the
measurer likes, so the best measured beats the analytical order's at the same count; under the
auto policy nothing is trained while the analytical model ranks the measurements right."""
import numpy as np
import pytest

from sim.hw.hierarchy import Arithmetic, Hierarchy, StorageLevel
from sim.workload.nest import conv1d
from tuner.search.map_learn import log_metric, mapping_features, measure_guided
from tuner.search.mapper import movement_evaluator
from sim.mapping.mapspace_sim import build_space
from tuner.search.policy import ModelPolicy


def _three_levels(glb_words: int, rf_words: int) -> Hierarchy:
    """DRAM -> GLB -> 4 RFs on a 4-wide mesh -> 4 MACs."""
    return Hierarchy((StorageLevel("DRAM", read_pj=100.0, fill_pj=100.0, update_pj=100.0),
                      StorageLevel("GLB", capacity_words=glb_words, read_pj=5.0, fill_pj=5.0, update_pj=5.0),
                      StorageLevel("RF", capacity_words=rf_words, instances=4, mesh_x=4, read_pj=0.5, fill_pj=0.5,
                                   update_pj=0.5)),
                     Arithmetic("MAC", instances=4, mesh_x=4, mac_pj=1.0))


def _distinct_rows(space, n: int, seed: int) -> np.ndarray:
    """``n`` sampled rows of ``space``, duplicates dropped, in sampling order."""
    rows = space.sample(n, np.random.default_rng(seed))
    _, first = np.unique(space.keys(rows), return_index=True)
    return rows[np.sort(first)]


@pytest.fixture(scope="module")
def pool():
    hier = _three_levels(512, 16)
    nest = conv1d(8, 8, 3, 16)
    space = build_space(hier, nest)
    rows = _distinct_rows(space, 300, 0)[:120]
    a = space.arrays(rows)
    c = movement_evaluator(hier, nest, space)(a)
    X = mapping_features(hier, nest, a)
    prior = log_metric("energy", c.cycles, c.energy_pj)
    yamls = [f"m{i}" for i in range(len(rows))]        # the fake measurer looks them up
    return yamls, X, prior, c


class Reverse:
    """Measures energy as exp(-analytical log energy) x 1e6: the analytical best is its worst."""
    def __init__(self, c):
        self.c = c
        self.calls = 0

    def measure(self, y):
        self.calls += 1
        i = int(y[1:])
        return float(self.c.cycles[i]), float(1e6 / self.c.energy_pj[i])


class Same:
    def __init__(self, c):
        self.c = c

    def measure(self, y):
        i = int(y[1:])
        return float(self.c.cycles[i]), float(self.c.energy_pj[i])


def test_never_measures_in_the_analytical_order(pool):
    yamls, X, prior, c = pool
    r = measure_guided(Same(c), yamls, X, prior, "energy", 12, 4, ModelPolicy(use="never"))
    assert list(r.measured) == list(np.argsort(prior, kind="stable")[:12])
    assert r.fits == 0 and r.energy_pj == pytest.approx(float(np.exp(prior.min())))


def test_model_follows_a_measurer_that_disagrees(pool):
    yamls, X, prior, c = pool
    m = Reverse(c)
    guided = measure_guided(m, yamls, X, prior, "energy", 24, 6, ModelPolicy(use="always"))
    plain = measure_guided(Reverse(c), yamls, X, prior, "energy", 24, 6, ModelPolicy(use="never"))
    assert m.calls == 24 and guided.fits >= 1 and guided.rounds_ranked_by_model >= 1
    # the model steers towards what the measurer likes (trees do not extrapolate past the rows
    # they saw, so from the prior's end of the pool it gains ground, not the optimum)
    assert guided.energy_pj < plain.energy_pj
    truth = np.sort(1e6 / c.energy_pj)
    assert np.searchsorted(truth, guided.energy_pj) < np.searchsorted(truth, plain.energy_pj)


def test_auto_does_not_train_when_the_prior_ranks_right(pool):
    yamls, X, prior, c = pool
    r = measure_guided(Same(c), yamls, X, prior, "energy", 24, 6, ModelPolicy(use="auto"))
    assert r.fits == 0


def test_tile_words_equal_sims_own_per_mapping(pool):
    """The vectorised tiles equal ``Mapping.tile_words`` row by row (sim's scalar definition)."""
    from tuner.search.map_learn import tile_words
    hier = Hierarchy((StorageLevel("DRAM"), StorageLevel("GLB", capacity_words=4096),
                      StorageLevel("RF", capacity_words=64, instances=4, mesh_x=2, mesh_y=2)),
                     Arithmetic("MAC", instances=4, mesh_x=2, mesh_y=2))
    from sim.workload.nest import conv2d
    nest = conv2d(c=6, m=4, r=3, s=3, p=4, q=6, stride=(2, 1))
    space = build_space(hier, nest)
    a = space.arrays(space.sample(60, np.random.default_rng(3)))
    got = tile_words(nest, a)
    for b in range(len(a)):
        m = a.mapping(hier, nest, b)
        for i in range(len(hier.levels)):
            for s, ds in enumerate(nest.data_spaces):
                assert got[b, i, s] == m.tile_words(nest, i, ds.name)


def _single_buffered(hier, nest, m) -> int:
    """Levels whose kept tiles do not fit twice (computed from sim's Mapping, not the features)."""
    n = 0
    for i, lv in enumerate(hier.levels):
        words = sum(m.tile_words(nest, i, ds.name) for ds in nest.data_spaces if m.keeps(hier, i, ds.name))
        n += lv.capacity_words is not None and 2 * words > lv.capacity_words
    return n


def test_model_learns_what_the_closed_form_averages_away():
    """A measurer that charges single buffering (cycles x 3 per level that cannot hold two of its
    tiles), as the tile walk does: trained on the prior's first 32 of a pool, the model ranks the
    rest better than the prior out of sample, and picks a faster next round."""
    from tuner.search.cost_model import CostModel, CostModelConfig
    from tuner.search.policy import count_pairs
    hier = _three_levels(256, 24)
    nest = conv1d(8, 16, 3, 32)
    space = build_space(hier, nest)
    a = space.arrays(_distinct_rows(space, 1500, 1))
    c = movement_evaluator(hier, nest, space)(a)
    ok = np.flatnonzero(np.isfinite(c.cycles))
    a = a.take(ok)
    prior = log_metric("delay", c.cycles[ok], c.energy_pj[ok])
    y = prior + np.log(3.0) * np.array([_single_buffered(hier, nest, a.mapping(hier, nest, b)) for b in range(len(a))])
    order = np.argsort(prior, kind="stable")
    train, rest = order[:32], order[32:]
    assert np.ptp(y[train] - prior[train]) > 0      # the training rows show the effect
    X = mapping_features(hier, nest, a)
    model = CostModel(CostModelConfig(min_rows=4), X=np.zeros((0, X.shape[1]), np.float32)).fit(
        X[train], y[train], np.zeros(len(train), np.int64), prior[train])
    score = model.predict(X, prior)
    agree = lambda s: count_pairs(s[rest], y[rest]).agreement().value
    assert agree(score) > agree(prior) + 0.05
    nxt = lambda s: rest[np.argsort(s[rest], kind="stable")[:8]]
    assert y[nxt(score)].min() <= y[nxt(prior)].min() and y[nxt(score)].mean() < y[nxt(prior)].mean()
