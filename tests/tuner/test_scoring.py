"""Scorers: the prior is exactly what an untrained model predicts; equality means same ranking."""
import numpy as np

import sim
from tuner.search.cost_model import CostModel
from tuner.search.features import featurize
from tuner.search.scoring import ModelScorer, PriorScorer, TimedScorer, scorer_for
from tuner.search.space import ScheduleSpace
from tuner.timing import Stopwatch

HW = sim.load_hw("edge-npu")
WL = sim.Workload.conv2d(1, 16, 14, 14, 32, 3, 3, pad=1)


def test_prior_is_the_untrained_models_prediction_and_the_analytical_cycles():
    sp = ScheduleSpace.build(WL, HW)
    g = sp.sample(64, np.random.default_rng(0))
    X, prior = featurize(sp, g)
    assert np.array_equal(PriorScorer()(sp, g), CostModel().predict(X, prior))
    cycles = sim.simulate_batch(WL, HW, sp.arrays(g))["total_cycles"]
    assert np.allclose(np.exp(PriorScorer()(sp, g)), np.maximum(cycles, 1))


def test_scorer_for_and_equality():
    sp = ScheduleSpace.build(WL, HW)
    g = sp.sample(40, np.random.default_rng(1))
    X, prior = featurize(sp, g)
    y = prior + 0.3 * (g[:, 5] == 0)            # a loop-order effect the prior does not see
    m = CostModel().fit(X, y, np.zeros(len(y), dtype=np.int64), prior)
    assert scorer_for(None) == PriorScorer() == scorer_for(CostModel())
    assert scorer_for(m) == ModelScorer(m) and scorer_for(m) != ModelScorer(CostModel().fit(X, y, np.zeros(len(y), dtype=np.int64), prior))
    assert np.array_equal(scorer_for(m)(sp, g), m.predict(X, prior))
    w = Stopwatch(1)
    timed = TimedScorer(PriorScorer(), lambda n: w.phase("score", 0, n))
    assert timed == TimedScorer(PriorScorer(), None) and timed != TimedScorer(ModelScorer(m), None)
    timed(sp, g)
    assert w.account(0).scored == 40 and w.account(0).score_s > 0
