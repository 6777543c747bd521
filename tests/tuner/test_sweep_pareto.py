"""Exact Pareto fronts: equal to an O(n^2) brute force on random and adversarial inputs."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tuner.sweep import dominates, pareto_front, pareto_mask


def brute_force(c: np.ndarray) -> list[int]:
    out = []
    for i in range(len(c)):
        if np.isnan(c[i]).any():
            continue
        if not any(j != i and not np.isnan(c[j]).any() and np.all(c[j] <= c[i]) and np.any(c[j] < c[i])
                   for j in range(len(c))):
            out.append(i)
    return out


def test_hand_example_two_objectives():
    c = [[1, 5], [2, 3], [3, 3], [4, 1], [2, 4], [5, 5]]
    # [3,3] is dominated by [2,3]; [2,4] by [2,3]; [5,5] by all of the front.
    assert pareto_front(c).tolist() == [0, 1, 3]
    assert pareto_mask(c).tolist() == [True, True, False, True, False, False]


def test_duplicates_stay_and_nan_rows_drop():
    c = [[1, 2], [1, 2], [0, 3], [np.nan, 0], [2, 2]]
    assert pareto_front(c).tolist() == [0, 1, 2]


def test_dominates_is_strict():
    assert dominates([1, 2], [1, 3]) and not dominates([1, 3], [1, 3]) and not dominates([0, 4], [1, 3])


def test_shapes():
    assert pareto_front(np.zeros((0, 3))).tolist() == []
    assert pareto_front([[3.0]]).tolist() == [0]
    assert pareto_front([[3.0], [1.0], [1.0]]).tolist() == [1, 2]
    with pytest.raises(ValueError, match="2-D"):
        pareto_front([1, 2, 3])


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 5).flatmap(lambda k: st.lists(
    st.lists(st.one_of(st.integers(0, 4).map(float), st.just(np.nan)) if k > 1 else st.integers(0, 4).map(float),
             min_size=k, max_size=k), min_size=0, max_size=40)))
def test_matches_brute_force_with_ties(rows):
    # Small integer values force many ties and duplicates, the hard cases for a front algorithm.
    c = np.array(rows, dtype=float).reshape(len(rows), len(rows[0]) if rows else 2)
    assert pareto_front(c).tolist() == brute_force(c)


@pytest.mark.parametrize("k", [2, 3, 4, 6])
def test_matches_brute_force_random_continuous(k):
    rng = np.random.default_rng(k)
    c = rng.random((300, k))
    assert pareto_front(c).tolist() == brute_force(c)


def test_anti_correlated_front_is_everything():
    x = np.linspace(0, 1, 200)
    c = np.stack([x, 1 - x, np.full_like(x, 2.0)], axis=1)
    assert pareto_front(c).tolist() == list(range(200))
