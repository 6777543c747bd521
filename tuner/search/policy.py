"""When the learned cost model trains, and when the search ranks with it: decided from what the
run has measured, so the model is used only where it pays for its time (docs/TUNING.md).

The analytical simulator's log cycles are the model's prior: an untrained model ranks exactly as
they do, at a fraction of the cost (no features, no XGBoost). Training is worth its time only when

1. the prior misranks what was measured: its pairwise order agreement with the measurements, over
   pairs of schedules of one task that differ by more than ``tie`` (closer pairs are ties that do
   not matter), is below ``trust_prior``, or its favourite is not the best: the schedule it ranks
   first among those measured of a task is, on average over the tasks, more than
   ``max_prior_regret`` slower than the fastest measured (the order of the few best is what the
   search lives on, and the pairs with a random sample far behind them can hide it); and
2. training stays a small part of the run: the training seconds so far plus the expected cost of
   the next fit are at most ``model_share`` of the seconds spent measuring. With a measurer that
   takes milliseconds (the tile-level simulator) this allows a fit only every few hundred
   measurements; with one that takes tenths of a second (an RTL simulation, an external tool) it
   allows one every round.

A trained model then ranks only while it is at least as good as the prior on what was measured
after it was trained (out of sample: its predictions are recorded before each measurement).

``use="always"`` trains every round and ranks with the model (Ansor's loop); ``use="never"`` never
trains and ranks with the prior. Both are deterministic; under ``"auto"`` the decisions depend on
measured time, so two runs take the same decisions only when their measurer's speed is on the
same side of the budget.

Nothing here knows about schedule spaces: a multi-level mapper feeds the same ``Evidence`` (its
measured cycles, the prior's and the model's predictions, its time account) and gets the same
``Decision``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

MODEL_USES = ("auto", "always", "never")


class ModelPolicyError(ValueError):
    pass


@dataclass(frozen=True)
class ModelPolicy:
    use: str = "auto"
    trust_prior: float = 0.95    # prior order agreement at or above which the prior is trusted
    max_prior_regret: float = 0.01  # ... and its pick among the measured at most this much slower
    min_pairs: int = 16          # evidence (non-tied pairs) needed to judge a ranking
    model_share: float = 0.25    # training may take at most this share of the measuring time
    tie: float = 0.01            # pairs whose measured cycles differ by less are ties
    # Before the first fit its cost is unknown: these guesses (a 40-tree fit of a few hundred rows
    # on one core; importing XGBoost, when no one in the process has yet) stand in for it until
    # the first fit is measured.
    first_fit_guess_s: float = 0.05
    import_guess_s: float = 0.5

    def __post_init__(self):
        if self.use not in MODEL_USES:
            raise ModelPolicyError(f"learned model use must be one of {', '.join(MODEL_USES)}, got {self.use!r}")
        if not 0.0 <= self.trust_prior <= 1.0:
            raise ModelPolicyError(f"trust_prior must be in [0, 1], got {self.trust_prior!r}")
        if self.max_prior_regret < 0:
            raise ModelPolicyError(f"max_prior_regret must be >= 0, got {self.max_prior_regret!r}")
        if min(self.model_share, self.tie, self.first_fit_guess_s, self.import_guess_s) < 0 or self.min_pairs < 1:
            raise ModelPolicyError("model_share, tie, first_fit_guess_s and import_guess_s must be >= 0, "
                                   "min_pairs >= 1")


@dataclass(frozen=True)
class Agreement:
    """Pairwise order agreement of a ranking with measurements: the share of non-tied pairs (within
    one group) that it orders as measured (a tie in the ranking counts half), and how many pairs."""
    value: float | None
    pairs: int

    def to_dict(self) -> dict:
        return {"value": self.value, "pairs": self.pairs}


@dataclass(frozen=True)
class PairCount:
    """Non-tied pairs a ranking orders as measured (``good``, a ranking tie counting half) out of
    ``total``; counts add up, so a run keeps them incrementally as measurements arrive."""
    good: float = 0.0
    total: int = 0

    def __add__(self, o: "PairCount") -> "PairCount":
        return PairCount(self.good + o.good, self.total + o.total)

    def agreement(self) -> Agreement:
        return Agreement(self.good / self.total if self.total else None, self.total)


def count_pairs(predicted: Sequence[float], log_measured: Sequence[float], new_from: int = 0,
                tie: float = 0.01) -> PairCount:
    """Pairs of ONE group (task) that involve a row at index >= ``new_from`` (so adding new rows to
    a group costs pairs new x all, not all x all). ``predicted``: lower = faster."""
    pred = np.asarray(predicted, dtype=float)
    logm = np.asarray(log_measured, dtype=float)
    n = len(pred)
    if n < 2 or new_from >= n:
        return PairCount()
    new = np.arange(max(new_from, 0), n)
    dm = logm[new][:, None] - logm[None, :]
    dp = pred[new][:, None] - pred[None, :]
    # each pair once: the new row against every earlier row
    mask = (np.arange(n)[None, :] < new[:, None]) & (np.abs(dm) > np.log1p(tie))
    same = np.sign(dm[mask]) == np.sign(dp[mask])
    tied = dp[mask] == 0
    return PairCount(float(same.sum()) + 0.5 * float(tied.sum()), int(mask.sum()))


def order_agreement(predicted: Sequence[float], measured: Sequence[float], groups: Sequence[int],
                    tie: float = 0.01) -> Agreement:
    """``predicted``: any score, lower = faster; ``measured``: cycles; pairs only within a group."""
    pred = np.asarray(predicted, dtype=float)
    logm = np.log(np.asarray(measured, dtype=float))
    grp = np.asarray(groups)
    if not (len(pred) == len(logm) == len(grp)):
        raise ModelPolicyError("order_agreement: predicted, measured and groups differ in length")
    total = PairCount()
    for g in np.unique(grp):
        idx = np.flatnonzero(grp == g)
        total = total + count_pairs(pred[idx], logm[idx], 0, tie)
    return total.agreement()


@dataclass(frozen=True)
class Evidence:
    """What the run knows when it decides (totals over every task sharing the model)."""
    measure_s: float = 0.0          # seconds spent measuring
    train_s: float = 0.0            # seconds spent training (XGBoost's import included)
    last_fit_s: float | None = None # seconds of the most recent fit (None: never fitted)
    rows_at_last_fit: int = 0
    rows: int = 0                   # measured rows the next fit would train on
    prior: Agreement = Agreement(None, 0)        # prior vs every measurement
    prior_regret: float | None = None   # mean over tasks: measured(prior's pick) / best measured - 1
    model: Agreement = Agreement(None, 0)        # model (before measuring) vs later measurements
    prior_on_model_rows: Agreement = Agreement(None, 0)  # the prior on those same rows
    trained: bool = False           # a trained model exists
    backend_loaded: bool = False    # XGBoost is imported in this process already


@dataclass(frozen=True)
class Decision:
    train: bool
    use_model: bool
    reason: str


def expected_fit_s(policy: ModelPolicy, ev: Evidence) -> float:
    """The next fit's cost: the last one scaled by rows (XGBoost's hist method is linear in rows);
    before any fit, the guesses (with the import when XGBoost is not loaded yet)."""
    if ev.last_fit_s is None:
        return policy.first_fit_guess_s + (0.0 if ev.backend_loaded else policy.import_guess_s)
    return ev.last_fit_s * max(ev.rows, 1) / max(ev.rows_at_last_fit, 1)


def _model_pays(policy: ModelPolicy, ev: Evidence) -> bool:
    """A trained model ranks while it does at least as well as the prior on rows measured after it."""
    if not ev.trained:
        return False
    if ev.model.pairs < policy.min_pairs or ev.model.value is None or ev.prior_on_model_rows.value is None:
        return True  # not enough out-of-sample evidence yet: it was trained because the prior misranks
    return ev.model.value >= ev.prior_on_model_rows.value


def decide(policy: ModelPolicy, ev: Evidence) -> Decision:
    if policy.use == "never":
        return Decision(False, False, "forced: never")
    if policy.use == "always":
        return Decision(True, True, "forced: always")
    use = _model_pays(policy, ev)
    p = ev.prior
    if p.pairs < policy.min_pairs or p.value is None:
        return Decision(False, use, f"prior not judged yet ({p.pairs} pairs)")
    regret = ev.prior_regret or 0.0
    if p.value >= policy.trust_prior and regret <= policy.max_prior_regret:
        return Decision(False, use, f"prior ranks the measured schedules (agreement {p.value:.3f}, "
                                    f"its pick {100 * regret:.2f} % off the best)")
    budget = policy.model_share * ev.measure_s
    need = ev.train_s + expected_fit_s(policy, ev)
    if need > budget:
        return Decision(False, use, f"prior misranks (agreement {p.value:.3f}, pick {100 * regret:.1f} % off) but training would take {need:.3g} s "
                                    f"> {policy.model_share:g} x {ev.measure_s:.3g} s measuring")
    return Decision(True, True if not ev.trained else use,
                    f"prior misranks (agreement {p.value:.3f}, pick {100 * regret:.1f} % off); training fits the budget ({need:.3g} <= {budget:.3g} s)")


def pick_regret(predicted: Sequence[float], log_measured: Sequence[float]) -> float | None:
    """How much slower the row ``predicted`` ranks first is than the fastest row (one task)."""
    if len(predicted) < 2:
        return None
    lm = np.asarray(log_measured, dtype=float)
    return float(np.exp(lm[int(np.argmin(np.asarray(predicted, dtype=float)))] - lm.min()) - 1.0)


__all__ = ["MODEL_USES", "pick_regret", "ModelPolicy", "ModelPolicyError", "Agreement", "PairCount", "count_pairs",
           "order_agreement", "Evidence",
           "Decision", "decide", "expected_fit_s"]
