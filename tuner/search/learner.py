"""The learned model's side of a tuning run: what was measured, how well the prior and the model
rank it, what training costs, and the policy's decision after each round (``tuner.search.policy``).

One ``Learner`` serves every task of a run (the cost model is shared). The search asks it for the
scorer to rank with (``scorer()``), tells it each round's measurements (``add``), and lets it decide
and train (``step``). It is what a multi-level mapper reuses with its own space: it needs of a space
only ``genes_of``, and features and the prior from ``tuner.search.features``.
"""
from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np

from sim import Schedule

from .cost_model import CostModel, load_xgboost
from .features import analytical_log_cycles, featurize
from .policy import Evidence, ModelPolicy, PairCount, count_pairs, decide, pick_regret
from .scoring import ModelScorer, PriorScorer
from .space import ScheduleSpace
from ..timing import Stopwatch


class Learner:
    """The learned model's side of one run: every measured row (task, genes, log cycles, the prior's
    and, when the model ranked, the model's score of it before it was measured), the rows the model
    has not been given yet, and what fitting has cost. Decisions come from ``model_policy``."""

    def __init__(self, model: CostModel, spaces: Sequence[ScheduleSpace], groups: Sequence[int],
                 policy: ModelPolicy, watch: Stopwatch):
        self.model, self.spaces, self.groups, self.policy, self.watch = model, spaces, groups, policy, watch
        n = len(spaces)
        # Per task: measured gene rows, log cycles, prior scores; and the rows the model ranked
        # before they were measured (log cycles, model scores, prior scores).
        self.genes: list[list[np.ndarray]] = [[] for _ in range(n)]
        self.logm: list[list[float]] = [[] for _ in range(n)]
        self.prior: list[list[float]] = [[] for _ in range(n)]
        self.oos: list[tuple[list[float], list[float], list[float]]] = [([], [], []) for _ in range(n)]
        self.pairs = {"prior": PairCount(), "model": PairCount(), "prior_on_model_rows": PairCount()}
        self.regret: list[float | None] = [None] * n   # per task: pick_regret of the prior
        self.pending: dict[int, int] = {}     # task -> rows at its end not given to the model yet
        self.last_fit_s: float | None = None
        self.rows_at_last_fit = 0
        self.using = model.trained            # whether the search ranks with the model now
        self.rounds = self.model_rounds = 0
        self.reason = "no decision yet"

    def scorer(self):
        return ModelScorer(self.model) if self.using and self.model.trained else PriorScorer()

    def add(self, i: int, schedules: Sequence[Schedule], cycles: Sequence[float], scored_by_model: bool) -> None:
        """Rows measured for task ``i``; their prior (and model) scores are computed here, charged
        to the ``score`` phase, and the pairs they form with the task's earlier rows are counted."""
        space, tie = self.spaces[i], self.policy.tie
        rows = [(g, c) for g, c in ((space.genes_of(s), c) for s, c in zip(schedules, cycles)) if g is not None]
        if not rows:
            return
        genes = np.stack([g for g, _ in rows])
        with self.watch.phase("score", i, len(genes)):
            prior = analytical_log_cycles(space, genes)
            ms = ModelScorer(self.model)(space, genes) if scored_by_model else None
        logm = [float(np.log(c)) for _, c in rows]
        old = len(self.logm[i])
        self.genes[i] += list(genes)
        self.logm[i] += logm
        self.prior[i] += prior.tolist()
        self.pairs["prior"] += count_pairs(self.prior[i], self.logm[i], old, tie)
        self.regret[i] = pick_regret(self.prior[i], self.logm[i])
        if ms is not None:
            om, oms, op = self.oos[i]
            old = len(om)
            om += logm
            oms += ms.tolist()
            op += prior.tolist()
            self.pairs["model"] += count_pairs(oms, om, old, tie)
            self.pairs["prior_on_model_rows"] += count_pairs(op, om, old, tie)
        self.pending[i] = self.pending.get(i, 0) + len(genes)

    def prior_regret(self) -> float | None:
        r = [x for x in self.regret if x is not None]
        return float(np.mean(r)) if r else None

    def evidence(self) -> Evidence:
        tot = self.watch.total()
        return Evidence(measure_s=tot.measure_s, train_s=tot.train_s, last_fit_s=self.last_fit_s,
                        rows_at_last_fit=self.rows_at_last_fit,
                        rows=self.model.n_rows + sum(self.pending.values()),
                        prior=self.pairs["prior"].agreement(), prior_regret=self.prior_regret(),
                        model=self.pairs["model"].agreement(),
                        prior_on_model_rows=self.pairs["prior_on_model_rows"].agreement(),
                        trained=self.model.trained, backend_loaded="xgboost" in sys.modules)

    def step(self, i: int, uses_model: bool) -> None:
        """After a round of task ``i``: decide, and train if the policy says so."""
        self.rounds += 1
        if not uses_model:
            return
        d = decide(self.policy, self.evidence())
        self.reason = d.reason
        if d.train and self.pending:
            with self.watch.phase("train", i):
                load_xgboost()  # charged to training, but not to the fit whose cost predicts the next
                t1 = self.watch.clock()
                self.model = self.model.fit(*self._pending_rows())
                self.last_fit_s = self.watch.clock() - t1
                self.rows_at_last_fit = self.model.n_rows
        self.using = d.use_model and self.model.trained
        self.model_rounds += int(self.using)

    def _pending_rows(self):
        """Features of the rows not yet given to the model, one batch per task."""
        parts = []
        for i, k in sorted(self.pending.items()):
            X, prior = featurize(self.spaces[i], np.stack(self.genes[i][-k:]))
            parts.append((X, np.asarray(self.logm[i][-k:]), np.full(k, self.groups[i], dtype=np.int64), prior))
        self.pending = {}
        return tuple(np.concatenate([p[k] for p in parts]) for k in range(4))

    def final_model(self) -> CostModel:
        """The model with every measured row (trained or not): a later run or fit starts from it."""
        if self.pending:
            # Featurising for later is scoring work, not training (nothing is fitted here).
            with self.watch.phase("score", next(iter(self.pending)), count=0):
                self.model = self.model.add_rows(*self._pending_rows())
        return self.model

    def summary(self, uses_model: bool) -> dict[str, Any]:
        ev = self.evidence()
        return {"policy": self.policy.use if uses_model else "unused", "fits": self.watch.total().fits,
                "rounds": self.rounds, "rounds_ranked_by_model": self.model_rounds,
                "prior_agreement": ev.prior.to_dict(), "prior_pick_regret": ev.prior_regret,
                "model_agreement": ev.model.to_dict(),
                "prior_agreement_on_model_rows": ev.prior_on_model_rows.to_dict(), "last_decision": self.reason}
