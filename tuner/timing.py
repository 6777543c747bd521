"""Where a tuning run's wall time goes: candidate generation, scoring, model training, measurement.

The learned model has to pay for its time (docs/TUNING.md, "When the learned model trains"), so the
tuner accounts each phase per task and in total and the model-use policy reads the account. Any
search (the one-level tuner today, a multi-level mapper later) can keep one: a ``Stopwatch`` is
told which phase and which task each span of time belongs to; ``account`` / ``total`` give frozen
``TimeAccount`` values.

Wall time (``time.perf_counter``), not CPU time: an external measurer's time is spent in another
process, and that is exactly what the policy must weigh against training.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Callable, Iterator

PHASES = ("generate", "score", "train", "measure")


@dataclass(frozen=True)
class TimeAccount:
    """Seconds per phase and how many times each ran.

    ``generate_s``: proposing candidates (sampling, mutation, crossover, de-duplication) without the
    scoring inside it; ``score_s``: ranking candidates (features, the analytical prior, model
    predictions); ``train_s``: fitting the cost model (loading XGBoost included); ``measure_s``:
    the measurer. ``scored``: rows scored; ``fits``: model fits; ``measurements``: measurer calls."""
    generate_s: float = 0.0
    score_s: float = 0.0
    train_s: float = 0.0
    measure_s: float = 0.0
    scored: int = 0
    fits: int = 0
    measurements: int = 0

    @property
    def total_s(self) -> float:
        return self.generate_s + self.score_s + self.train_s + self.measure_s

    @property
    def model_s(self) -> float:
        """Time the learned model costs: training (scoring with the prior is cheap and needed anyway)."""
        return self.train_s

    def __add__(self, other: "TimeAccount") -> "TimeAccount":
        return TimeAccount(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def to_dict(self) -> dict:
        return {"total_s": self.total_s, "generate_s": self.generate_s, "score_s": self.score_s,
                "train_s": self.train_s, "measure_s": self.measure_s, "scored": self.scored,
                "fits": self.fits, "measurements": self.measurements}

    def line(self) -> str:
        """One line for the text output."""
        return (f"{self.total_s:.2f} s: measure {self.measure_s:.2f} s ({self.measurements}), "
                f"train {self.train_s:.2f} s ({self.fits} fit{'s' if self.fits != 1 else ''}), "
                f"score {self.score_s:.2f} s, generate {self.generate_s:.2f} s")


class Stopwatch:
    """Accumulates wall seconds per (task, phase). ``clock`` is injectable so tests and policies can
    run on a fake clock. Spans may nest: a phase inside another is taken out of the outer one (the
    scoring done inside candidate generation counts as scoring only)."""

    def __init__(self, n_tasks: int, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self._s = [dict.fromkeys(PHASES, 0.0) for _ in range(n_tasks)]
        self._n = [dict.fromkeys(PHASES, 0) for _ in range(n_tasks)]
        self._stack: list[list[float]] = []   # per open span: [start, time spent in nested spans]

    @contextmanager
    def phase(self, name: str, task: int, count: int = 1) -> Iterator[None]:
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}; phases are {', '.join(PHASES)}")
        span = [self.clock(), 0.0]
        self._stack.append(span)
        try:
            yield
        finally:
            self._stack.pop()
            elapsed = self.clock() - span[0]
            self._s[task][name] += elapsed - span[1]
            self._n[task][name] += count
            if self._stack:
                self._stack[-1][1] += elapsed

    def add(self, name: str, task: int, seconds: float, count: int = 1) -> None:
        """Charge time measured elsewhere (e.g. by a measurer that reports its own)."""
        self._s[task][name] += seconds
        self._n[task][name] += count

    def account(self, task: int) -> TimeAccount:
        s, n = self._s[task], self._n[task]
        return TimeAccount(s["generate"], s["score"], s["train"], s["measure"], n["score"], n["train"],
                           n["measure"])

    def total(self) -> TimeAccount:
        s = {p: sum(t[p] for t in self._s) for p in PHASES}
        n = {p: sum(t[p] for t in self._n) for p in PHASES}
        return TimeAccount(s["generate"], s["score"], s["train"], s["measure"], n["score"], n["train"],
                           n["measure"])


__all__ = ["PHASES", "TimeAccount", "Stopwatch"]
