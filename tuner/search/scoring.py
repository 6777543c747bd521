"""Scorers: how a search ranks candidate schedules of one space (lower = faster).

- ``PriorScorer``: the analytical simulator's log cycles alone. No features, no XGBoost: an
  untrained cost model ranks exactly like this, so this is what the search uses whenever the
  learned model is not (``tuner.search.policy``).
- ``ModelScorer``: features + the learned ``CostModel``'s prediction.

``scorer_for(model)`` picks one. Two scorers compare equal exactly when they rank the same way
(the same trained model, or both the prior), which lets a search keep scores across rounds while
its scorer does not change.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from .cost_model import CostModel
from .features import analytical_log_cycles, featurize
from .space import ScheduleSpace


class Scorer(Protocol):
    def __call__(self, space: ScheduleSpace, genes: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class PriorScorer:
    def __call__(self, space: ScheduleSpace, genes: np.ndarray) -> np.ndarray:
        return analytical_log_cycles(space, genes)


@dataclass(frozen=True)
class ModelScorer:
    model: CostModel  # compared by identity (CostModel has eq=False): a retrained model is another scorer

    def __call__(self, space: ScheduleSpace, genes: np.ndarray) -> np.ndarray:
        X, prior = featurize(space, genes)
        return self.model.predict(X, prior)


def scorer_for(model: "CostModel | Scorer | None") -> Scorer:
    """The prior for ``None`` or an untrained model, the model's scorer for a trained one; any
    other scorer is returned as is."""
    if model is None:
        return PriorScorer()
    if isinstance(model, CostModel):
        return ModelScorer(model) if model.trained else PriorScorer()
    return model


@dataclass(frozen=True, eq=False)
class TimedScorer:
    """A scorer whose calls are charged to the ``score`` phase of one task (``tuner.timing``).
    Equal to another timed scorer of an equal inner scorer, so it does not defeat score caching."""
    inner: Scorer
    span: Callable  # count -> context manager, e.g. lambda n: stopwatch.phase("score", task, n)

    def __call__(self, space: ScheduleSpace, genes: np.ndarray) -> np.ndarray:
        with self.span(len(genes)):
            return self.inner(space, genes)

    def __eq__(self, other) -> bool:
        return isinstance(other, TimedScorer) and self.inner == other.inner

    def __hash__(self) -> int:
        return hash(self.inner)


__all__ = ["Scorer", "PriorScorer", "ModelScorer", "scorer_for", "TimedScorer"]
