"""Exact Pareto fronts (minimisation) over any number of objectives.

A point is on the front when no other point is at least as good in every objective and strictly
better in one. Equal points do not dominate each other, so duplicates of a front point are all on
the front. Rows with a NaN are never on the front (a failed evaluation is not a design choice).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return bool(np.all(a <= b) and np.any(a < b))


def pareto_front(costs: "np.ndarray | Sequence[Sequence[float]]") -> np.ndarray:
    """Indices (ascending) of the non-dominated rows of an (n, k) array, all objectives minimised.

    Rows are visited in lexicographic order: whoever dominates a row sorts before it, and
    dominance is transitive, so checking each row against the front found so far is exact."""
    c = np.asarray(costs, dtype=float)
    if c.ndim != 2:
        raise ValueError(f"costs must be a 2-D array (points x objectives), got shape {c.shape}")
    n, k = c.shape
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    ok = ~np.isnan(c).any(axis=1)
    idx = np.flatnonzero(ok)
    order = idx[np.lexsort(c[idx].T[::-1])]
    front = np.empty((0, k))
    keep: list[int] = []
    for i in order:
        row = c[i]
        if front.shape[0]:
            le = np.all(front <= row, axis=1)
            lt = np.any(front < row, axis=1)
            if np.any(le & lt):
                continue
        front = np.vstack([front, row])
        keep.append(int(i))
    return np.array(sorted(keep), dtype=np.int64)


def pareto_mask(costs: "np.ndarray | Sequence[Sequence[float]]") -> np.ndarray:
    c = np.asarray(costs, dtype=float)
    m = np.zeros(c.shape[0], dtype=bool)
    m[pareto_front(c)] = True
    return m
