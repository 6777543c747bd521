"""The time account: phases per task on a fake clock, nested spans, totals."""
import pytest

from tuner.timing import PHASES, Stopwatch, TimeAccount


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_phases_per_task_and_nested_spans_count_once():
    clock = FakeClock()
    w = Stopwatch(2, clock)
    with w.phase("generate", 0):
        clock.t += 1.0
        with w.phase("score", 0, count=100):   # scoring inside generation is scoring only
            clock.t += 2.0
        clock.t += 0.5
    with w.phase("measure", 1):
        clock.t += 4.0
    with w.phase("train", 1):
        clock.t += 0.25
    w.add("measure", 1, 3.0, count=2)
    a, b = w.account(0), w.account(1)
    assert (a.generate_s, a.score_s, a.scored) == (1.5, 2.0, 100)
    assert (b.measure_s, b.measurements, b.train_s, b.fits) == (7.0, 3, 0.25, 1)
    t = w.total()
    assert t == a + b
    assert t.total_s == pytest.approx(1.5 + 2.0 + 7.0 + 0.25) == clock.t + 3.0
    assert t.to_dict()["total_s"] == t.total_s


def test_time_of_a_span_that_raises_is_still_charged():
    clock = FakeClock()
    w = Stopwatch(1, clock)
    with pytest.raises(RuntimeError):
        with w.phase("measure", 0):
            clock.t += 2.0
            raise RuntimeError("measurer failed")
    assert w.account(0).measure_s == 2.0 and w.account(0).measurements == 1


def test_unknown_phase_is_an_error():
    with pytest.raises(ValueError, match="unknown phase 'fitting'"):
        with Stopwatch(1).phase("fitting", 0):
            pass


def test_line_and_dict():
    a = TimeAccount(generate_s=0.1, score_s=0.2, train_s=0.3, measure_s=0.4, scored=10, fits=1, measurements=8)
    assert set(a.to_dict()) == {"total_s", *(f"{p}_s" for p in PHASES), "scored", "fits", "measurements"}
    assert "measure 0.40 s (8)" in a.line() and "(1 fit)" in a.line()
