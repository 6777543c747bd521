"""Fuzz at scale: every fuzz family (tests/fuzz/test_fuzz_*.py) with many more cases than the test
suite runs, and the outcome counts per family.

    python experiments/bench/fuzz.py [--fuzz-cases 500] [--fuzz-seed 100000] [--workers 2]
                                     [--families hw sweep packed onnx] [--json]

Each family builds case i from seed ``fuzz-seed + i`` and runs it through the real CLI in-process
under the harness's time and memory bound (tests/fuzz/conftest.py). An ending is ``ok`` (exit 0
with sane numbers), ``error`` (exit 2 and one ``accel-tune: error:`` line; the standalone reader's
family ``packed_reader``: exit 1 and one ``read_packed: error:`` line) or ``bad`` (a traceback, a
hang, memory blow-up, several lines, a wrong exit status, an insane number or an expectation
missed, e.g. a valid file refused). A family may run several commands per case, so its count
of endings can exceed the number of cases. The default seed is far from the suite's (0), so these
cases are ones the suite never ran.

Writes experiments/results/fuzz/{config.json,results.json}; exit status 1 when any ending is bad,
with the failing case ids (rerun one with ``python -m pytest 'ID' --fuzz-cases N --fuzz-seed S``).
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "experiments" / "results" / "fuzz"
KINDS = ("cases", "ok", "error", "bad")


def family_files(only: list[str] | None) -> list[Path]:
    files = sorted(p for p in (ROOT / "tests" / "fuzz").glob("test_fuzz_*.py") if p.name != "test_fuzz_harness.py")
    if only:
        files = [p for p in files if p.stem.removeprefix("test_fuzz_") in only]
    return files


def run(files: list[Path], cases: int, seed: int, workers: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        report = Path(d) / "report"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *map(str, files),
               f"--fuzz-cases={cases}", f"--fuzz-seed={seed}", f"--fuzz-report={report}"]
        if workers > 1:
            cmd += ["-n", str(workers)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        counts: dict[str, Counter] = {}
        slowest: dict[str, float] = {}
        for f in Path(d).glob("report.*"):
            for fam, c in json.loads(f.read_text()).items():
                slowest[fam] = max(slowest.get(fam, 0.0), c.pop("slowest_s", 0.0))
                counts.setdefault(fam, Counter()).update(c)
    failed = re.findall(r"^FAILED (\S+)", proc.stdout, flags=re.M)
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr.strip()[-300:]
    return {"families": {fam: {**{k: int(c.get(k, 0)) for k in KINDS}, "slowest_s": slowest[fam]}
                         for fam, c in sorted(counts.items())},
            "failed_tests": failed, "pytest_summary": tail, "pytest_exit": proc.returncode, "wall_s": round(wall, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fuzz-cases", type=int, default=500, help="cases per family")
    ap.add_argument("--fuzz-seed", type=int, default=100_000, help="seed of case 0")
    ap.add_argument("--workers", type=int, default=2, help="pytest-xdist workers")
    ap.add_argument("--families", nargs="*", help="run only these (hw, sweep, packed, onnx, ...)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--no-write", action="store_true", help="do not write experiments/results/fuzz")
    a = ap.parse_args(argv)
    files = family_files(a.families)
    if not files:
        ap.error("no fuzz family matches")
    config = {"fuzz_cases": a.fuzz_cases, "fuzz_seed": a.fuzz_seed, "workers": a.workers,
              "families": [p.name for p in files], "python": platform.python_version(),
              "machine": f"{platform.machine()}, {platform.system()}"}
    res = run(files, a.fuzz_cases, a.fuzz_seed, a.workers)
    if not a.no_write:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        (OUT / "results.json").write_text(json.dumps(res, indent=2) + "\n")
    if a.json:
        print(json.dumps({"config": config, **res}, indent=2))
    else:
        print(f"{a.fuzz_cases} cases per family from seed {a.fuzz_seed}, {a.workers} worker(s), "
              f"{res['wall_s']:.0f} s wall")
        print(f"{'family':<15} {'runs':>8} {'ok':>7} {'error':>7} {'bad':>5} {'slowest s':>10}")
        for fam, c in res["families"].items():
            print(f"{fam:<15} {c['cases']:>8} {c['ok']:>7} {c['error']:>7} {c['bad']:>5} {c['slowest_s']:>10.2f}")
        print(f"pytest: {res['pytest_summary']}")
        for t in res["failed_tests"]:
            print(f"  bad: {t}")
    bad = sum(c["bad"] for c in res["families"].values())
    return 1 if bad or res["pytest_exit"] not in (0,) else 0


if __name__ == "__main__":
    sys.exit(main())
