"""The learned-model policy: pairwise order agreement against hand counts, incremental counting,
and each branch of the decision from synthetic evidence."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tuner.search.policy import (Agreement, Evidence, ModelPolicy, ModelPolicyError, count_pairs, decide, pick_regret,
                                expected_fit_s, order_agreement)


def brute_agreement(pred, meas, groups, tie):
    good = total = 0
    for i, j in itertools.combinations(range(len(pred)), 2):
        if groups[i] != groups[j] or abs(math.log(meas[i]) - math.log(meas[j])) <= math.log1p(tie):
            continue
        total += 1
        if pred[i] == pred[j]:
            good += 0.5
        elif (pred[i] < pred[j]) == (meas[i] < meas[j]):
            good += 1
    return (good / total if total else None), total


def test_agreement_by_hand():
    # pairs (0,1) and (0,2) ordered as measured, (1,2) reversed; task 1's pair is within 1 %: a tie
    a = order_agreement([1, 2, 3, 5, 6], [10, 30, 20, 100, 100.5], [0, 0, 0, 1, 1])
    assert a == Agreement(2 / 3, 3)
    # a tie in the ranking counts half
    assert order_agreement([1, 1], [10, 20], [0, 0]) == Agreement(0.5, 1)
    assert order_agreement([1], [10], [0]) == Agreement(None, 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 400), st.integers(0, 2)), min_size=0, max_size=30),
       st.integers(0, 30))
def test_incremental_counts_equal_the_brute_force_count(rows, split):
    pred = [float(p) for p, _, _ in rows]
    meas = [float(m) for _, m, _ in rows]
    groups = [g for _, _, g in rows]
    want = brute_agreement(pred, meas, groups, 0.01)
    a = order_agreement(pred, meas, groups)
    assert (a.value, a.pairs) == pytest.approx(want)
    # counting a group's rows in two steps gives the same as counting them at once
    g0 = [i for i, g in enumerate(groups) if g == 0]
    p0, m0 = [pred[i] for i in g0], [math.log(meas[i]) for i in g0]
    k = min(split, len(g0))
    two = count_pairs(p0[:k], m0[:k], 0) + count_pairs(p0, m0, k)
    one = count_pairs(p0, m0, 0)
    assert (two.good, two.total) == (one.good, one.total)


POLICY = ModelPolicy(trust_prior=0.9, min_pairs=10, model_share=0.25, first_fit_guess_s=0.05, import_guess_s=0.5)


def ev(**kw):
    base = dict(measure_s=10.0, train_s=0.0, prior=Agreement(0.6, 100), backend_loaded=True, rows=100)
    base.update(kw)
    return Evidence(**base)


def test_forced_uses():
    assert decide(ModelPolicy(use="never"), ev()).train is False
    d = decide(ModelPolicy(use="always"), ev(prior=Agreement(1.0, 100)))
    assert d.train and d.use_model


def test_prior_that_ranks_the_measurements_is_trusted_however_cheap_training_is():
    d = decide(POLICY, ev(prior=Agreement(0.95, 100), measure_s=1e6))
    assert not d.train and not d.use_model and "prior ranks" in d.reason
    d = decide(POLICY, ev(prior=Agreement(0.2, 5)))            # too few pairs to judge
    assert not d.train and "not judged" in d.reason


def test_misranking_prior_trains_when_the_budget_allows():
    assert decide(POLICY, ev(measure_s=10.0)).train            # 0.05 s guess <= 0.25 x 10 s
    assert not decide(POLICY, ev(measure_s=0.1)).train         # 0.05 > 0.025
    # XGBoost not imported yet: the import is part of the first fit's cost
    assert not decide(POLICY, ev(measure_s=1.0, backend_loaded=False)).train   # 0.55 > 0.25
    assert decide(POLICY, ev(measure_s=3.0, backend_loaded=False)).train       # 0.55 <= 0.75
    # after fits: what training has cost so far counts, and the next fit scales with rows
    e = ev(measure_s=4.0, train_s=0.9, last_fit_s=0.1, rows_at_last_fit=100, rows=200, trained=True)
    assert expected_fit_s(POLICY, e) == pytest.approx(0.2)
    assert not decide(POLICY, e).train                          # 0.9 + 0.2 > 1.0
    assert decide(POLICY, ev(measure_s=4.5, train_s=0.9, last_fit_s=0.1, rows_at_last_fit=100, rows=200,
                             trained=True)).train               # 1.1 <= 1.125


def test_a_trained_model_ranks_only_while_it_beats_the_prior_out_of_sample():
    kw = dict(trained=True, measure_s=0.0, prior=Agreement(0.6, 100))
    assert decide(POLICY, ev(**kw, model=Agreement(0.5, 3))).use_model          # too little evidence yet
    assert decide(POLICY, ev(**kw, model=Agreement(0.8, 50), prior_on_model_rows=Agreement(0.7, 50))).use_model
    assert not decide(POLICY, ev(**kw, model=Agreement(0.6, 50), prior_on_model_rows=Agreement(0.7, 50))).use_model


def test_bad_policies_are_one_line_errors():
    with pytest.raises(ModelPolicyError, match="must be one of auto, always, never"):
        ModelPolicy(use="sometimes")
    with pytest.raises(ModelPolicyError, match="trust_prior"):
        ModelPolicy(trust_prior=1.5)
    with pytest.raises(ModelPolicyError, match=">= 0"):
        ModelPolicy(model_share=-1)
    with pytest.raises(ModelPolicyError, match="differ in length"):
        order_agreement([1, 2], [1], [0, 0])


def test_a_prior_whose_pick_is_not_the_best_is_not_trusted_even_if_it_orders_most_pairs():
    assert pick_regret([3.0, 1.0, 2.0], np.log([100.0, 125.0, 110.0])) == pytest.approx(0.25)
    assert pick_regret([1.0], [0.0]) is None
    good_order = Agreement(0.99, 200)
    assert not decide(POLICY, ev(prior=good_order, prior_regret=0.0, measure_s=1e6)).train
    d = decide(POLICY, ev(prior=good_order, prior_regret=0.05, measure_s=1e6))
    assert d.train and "5.0 % off" in d.reason
