"""The fuzz harness: every malformed input must end in success or in one `accel-tune: error:` line,
within a time and a memory bound.

A family is one test module ``tests/fuzz/test_<family>.py`` with a test taking the ``fuzz_case``
index (0 .. ``--fuzz-cases`` - 1); it builds case ``fuzz_case`` deterministically from
``fuzz_seed + fuzz_case``, runs it through ``cli([...])`` (the real CLI, in this process) and
hands the outcome to ``fuzz_check(family, label, outcome)``, which records it and fails the test
on a bad ending. Success is only half the check: a family also asserts the numbers it got are
sane (finite, positive, within physical ranges) when its case was meant to be valid.

``--fuzz-cases`` (default 24 per family in the suite) and ``--fuzz-seed`` pick the cases;
``--fuzz-report PATH`` writes the outcome counts per family as JSON (one file per xdist worker,
``PATH.<worker>``, with each family's slowest case in seconds); ``experiments/bench/fuzz.py`` runs
many more cases and prints the counts.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import signal
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

import pytest

ERROR_PREFIX = "accel-tune: error: "
WARNING_PREFIX = "accel-tune: warning: "


def pytest_addoption(parser):
    g = parser.getgroup("fuzz")
    g.addoption("--fuzz-cases", type=int, default=24, help="cases per fuzz family")
    g.addoption("--fuzz-seed", type=int, default=0, help="first seed of the fuzz cases")
    g.addoption("--fuzz-report", default=None, help="write outcome counts per family as JSON here")


def pytest_generate_tests(metafunc):
    if "fuzz_case" in metafunc.fixturenames:
        n = metafunc.config.getoption("--fuzz-cases")
        metafunc.parametrize("fuzz_case", range(n))


@pytest.fixture
def fuzz_seed(request) -> int:
    return request.config.getoption("--fuzz-seed")


@dataclass(frozen=True)
class Outcome:
    """How one CLI run ended. ``kind``: 'ok' (exit 0), 'error' (exit 2 and exactly one
    ``accel-tune: error:`` line besides one-line warnings), or 'bad:<why>' (anything else)."""
    rc: int | None
    out: str
    err: str
    seconds: float
    kind: str

    @property
    def bad(self) -> bool:
        return self.kind.startswith("bad")


class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that no `except Exception` in the code under test
    swallows it."""


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def _bounded(timeout_s: float, mem_bytes: int):
    """Run the body under a wall-clock alarm and an address-space cap of ``mem_bytes`` more than
    the process already maps; both are restored afterwards."""
    def on_alarm(signum, frame):
        raise _Timeout()
    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _vm_bytes() + mem_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGALRM, old_handler)


def classify(rc: int | None, err: str, raised: str | None) -> str:
    if raised:
        return f"bad:{raised}"
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if ln.strip()]
    # Progress bars (tqdm) and one-line warnings may precede the result.
    lines = [ln for ln in lines if not ln.startswith(WARNING_PREFIX) and not re.search(r"\d+%\|", ln)]
    if rc == 0:
        return "ok" if not any("Traceback" in ln for ln in lines) else "bad:traceback on stderr"
    if rc == 2:
        if len(lines) == 1 and lines[0].startswith(ERROR_PREFIX):
            return "error"
        return f"bad:exit 2 with {len(lines)} stderr lines"
    return f"bad:exit {rc}"


@pytest.fixture
def cli(capfd):
    """``cli(argv, timeout_s=30, mem_gib=2) -> Outcome``: ``accel-tune argv`` in this process."""
    from tuner.cli import main

    def run(argv: list[str], timeout_s: float = 30.0, mem_gib: float = 2.0) -> Outcome:
        capfd.readouterr()
        t0 = time.perf_counter()
        rc: int | None = None
        raised = None
        try:
            with _bounded(timeout_s, int(mem_gib * 2**30)):
                rc = main([str(a) for a in argv])
        except _Timeout:
            raised = f"timeout after {timeout_s:g} s"
        except MemoryError:
            raised = "memory bound exceeded"
        except SystemExit as e:  # argparse usage errors
            rc = e.code if isinstance(e.code, int) else 2
        except BaseException as e:  # noqa: BLE001 - a traceback is exactly what the fuzz looks for
            raised = f"{type(e).__name__}: {str(e).strip()[:200]}"
        seconds = time.perf_counter() - t0
        cap = capfd.readouterr()
        return Outcome(rc, cap.out, cap.err, seconds, classify(rc, cap.err, raised))
    return run


_COUNTS: dict[str, Counter] = defaultdict(Counter)
_SLOWEST: dict[str, float] = defaultdict(float)  # family -> longest case, seconds (wall clock)


@pytest.fixture
def fuzz_check():
    """``fuzz_check(family, label, outcome)``: record the outcome; fail on a bad ending."""
    def check(family: str, label: str, outcome: Outcome) -> Outcome:
        _COUNTS[family][outcome.kind if not outcome.bad else "bad"] += 1
        _COUNTS[family]["cases"] += 1
        _SLOWEST[family] = max(_SLOWEST[family], outcome.seconds)
        assert not outcome.bad, (f"{family} case {label!r}: {outcome.kind}; exit {outcome.rc}; "
                                 f"stderr: {outcome.err.strip()[-800:]}")
        return outcome
    return check


def pytest_sessionfinish(session):
    path = session.config.getoption("--fuzz-report", default=None)
    if not path or not _COUNTS:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"{path}.{worker}", "w") as f:
        json.dump({fam: {**dict(c), "slowest_s": round(_SLOWEST[fam], 3)} for fam, c in _COUNTS.items()},
                  f, indent=1, sort_keys=True)


def pytest_terminal_summary(terminalreporter):
    if _COUNTS and not os.environ.get("PYTEST_XDIST_WORKER"):
        terminalreporter.write_line("fuzz outcomes: " + "; ".join(
            f"{fam}: {dict(c)}" for fam, c in sorted(_COUNTS.items())))
