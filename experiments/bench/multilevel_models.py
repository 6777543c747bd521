"""Every built-in model on the hierarchical presets, end to end: ``accel-tune simulate``, ``tune``
(writing a packed plan) and ``run`` (loading it and running one inference), each in its own
process, as a user would run them.

    python experiments/bench/multilevel_models.py [--models M ...] [--presets P ...] [--trials N]
                                                  [--only simulate] [--objective O] [--baseline RESULTS.json]
                                                  [--out DIR] [--json]

Per case: the exit status of each command, CPU seconds of each (``RUSAGE_CHILDREN``, which other
jobs on a shared machine inflate far less than wall time) and wall seconds, simulate's latency and
device energy (greedy offload of everything offloadable, default mappings), the tuned plan's latency
and energy and how many units it offloads, and whether ``run`` reproduced the plan's predicted
latency. Results go to ``results.json`` and ``table.md`` in DIR (default
experiments/results/multilevel_models/). Exit status 1 when any command failed.

``--only simulate`` runs ``simulate`` alone (the default mapping policy's figures); ``--objective``
is passed to ``tune`` (latency, energy or edp). ``--baseline`` adds, per case, the ratio of this
run's simulate latency, energy and CPU seconds (and the tuned plan's, when both runs tuned) to
those of an earlier ``results.json`` (e.g. one made by an export of the commit before a change,
run from that export), and ``compare.md`` with the table.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "experiments" / "results" / "multilevel_models"
PRESETS = ("eyeriss", "simba-like")


def _cli(args: list[str]) -> tuple[int, dict | None, float, float, str]:
    """(exit status, parsed --json output, CPU s, wall s, last stderr line) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", "import sys; from tuner.cli import entry; sys.exit(entry())", *args],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        out = json.loads(p.stdout) if p.returncode == 0 else None
    except json.JSONDecodeError:
        out = None
    err = (p.stderr.strip().splitlines() or [""])[-1][:200]
    return p.returncode, out, cpu, wall, err


def run_case(model: str, preset: str, trials: int, tmp: Path, only_simulate: bool = False,
             objective: str = "latency") -> dict:
    plan = tmp / f"{model}.{preset}.zip"
    rc_s, sim_out, cpu_s, wall_s, err_s = _cli(["simulate", "--model", model, "--hw", preset, "--json"])
    skipped = (0, None, 0.0, 0.0, "")
    rc_t, tune_out, cpu_t, wall_t, err_t = skipped if only_simulate else _cli(
        ["tune", "--model", model, "--hw", preset, "--trials", str(trials), "--objective", objective, "-o", str(plan),
         "--json"])
    rc_r, run_out, cpu_r, wall_r, err_r = (skipped if only_simulate else _cli(["run", str(plan), "--json"])
                                          if rc_t == 0 else (None, None, 0.0, 0.0, "not run: tune failed"))
    row = {"model": model, "preset": preset,
           "simulate": {"rc": rc_s, "cpu_s": cpu_s, "wall_s": wall_s, "error": err_s if rc_s else None},
           "tune": {"rc": rc_t, "cpu_s": cpu_t, "wall_s": wall_t, "error": err_t if rc_t else None},
           "run": {"rc": rc_r, "cpu_s": cpu_r, "wall_s": wall_r, "error": err_r if rc_r else None}}
    if sim_out:
        row["simulate"].update(latency_s=sim_out["latency_s"], device_s=sim_out["device_s"],
                               energy_j=sim_out["energy_j"])
    if tune_out:
        row["tune"].update(latency_s=tune_out["latency_s"], energy_j=tune_out["energy_j"],
                           offloaded=tune_out["partition"].get("offloaded"),
                           tuning_s=tune_out.get("timing", {}).get("wall_s"))
    if run_out and tune_out:
        row["run"].update(latency_s=run_out["latency_s"], over_plan=run_out["latency_s"] / tune_out["latency_s"])
    return row


def table(rows: list[dict]) -> str:
    head = ("| model | preset | simulate CPU s | latency ms (all offloaded) | tune CPU s | tuned latency ms | "
            "energy mJ | offloaded | run / plan latency |\n|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        s, t, u = r["simulate"], r["tune"], r["run"]
        lines.append(f"| {r['model']} | {r['preset']} | {s['cpu_s']:.1f} | "
                     f"{s.get('latency_s', float('nan')) * 1e3:.3f} | {t['cpu_s']:.1f} | "
                     f"{t.get('latency_s', float('nan')) * 1e3:.3f} | {t.get('energy_j', float('nan')) * 1e3:.3f} | "
                     f"{t.get('offloaded', '-')} | {u.get('over_plan', float('nan')):.4f} |")
    return head + "\n".join(lines) + "\n"


def compare(rows: list[dict], base: list[dict]) -> tuple[str, dict]:
    """Per case and in total: this run's simulate latency, energy and CPU seconds over the
    baseline's (a ratio < 1 is better)."""
    old = {(r["model"], r["preset"]): r["simulate"] for r in base}
    head = ("| model | preset | latency ms before / after | ratio | energy mJ before / after | ratio | "
            "CPU s before / after |\n|---|---|---|---|---|---|---|\n")
    lines, tot = [], {"cpu_before": 0.0, "cpu_after": 0.0, "worse_latency": []}
    for r in rows:
        b, a = old.get((r["model"], r["preset"])), r["simulate"]
        if not b or "latency_s" not in b or "latency_s" not in a:
            continue
        lr, er = a["latency_s"] / b["latency_s"], a["energy_j"] / b["energy_j"]
        tot["cpu_before"] += b["cpu_s"]
        tot["cpu_after"] += a["cpu_s"]
        if lr > 1 + 1e-9:
            tot["worse_latency"].append(f"{r['model']}/{r['preset']}")
        lines.append(f"| {r['model']} | {r['preset']} | {b['latency_s'] * 1e3:.3f} / {a['latency_s'] * 1e3:.3f} | "
                     f"{lr:.4f} | {b['energy_j'] * 1e3:.3f} / {a['energy_j'] * 1e3:.3f} | {er:.4f} | "
                     f"{b['cpu_s']:.1f} / {a['cpu_s']:.1f} |")
    lines.append(f"| total | | | | | | {tot['cpu_before']:.1f} / {tot['cpu_after']:.1f} |")
    text = head + "\n".join(lines) + "\n"
    old_t = {(r["model"], r["preset"]): r["tune"] for r in base}
    tuned = [(r, old_t.get((r["model"], r["preset"]))) for r in rows]
    tuned = [(r, b) for r, b in tuned if b and "latency_s" in b and "latency_s" in r["tune"]]
    if tuned:
        text += ("\n| model | preset | tuned latency ms before / after | ratio | tuned energy mJ before / after | "
                 "ratio | tune CPU s before / after | run / plan |\n|---|---|---|---|---|---|---|---|\n")
        for r, b in tuned:
            a = r["tune"]
            text += (f"| {r['model']} | {r['preset']} | {b['latency_s'] * 1e3:.3f} / {a['latency_s'] * 1e3:.3f} | "
                     f"{a['latency_s'] / b['latency_s']:.4f} | {b['energy_j'] * 1e3:.3f} / {a['energy_j'] * 1e3:.3f} | "
                     f"{a['energy_j'] / b['energy_j']:.4f} | {b['cpu_s']:.1f} / {a['cpu_s']:.1f} | "
                     f"{r['run'].get('over_plan', float('nan')):.4f} |\n")
    return text, tot


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--presets", nargs="*", default=list(PRESETS))
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--only", choices=["simulate"])
    ap.add_argument("--objective", choices=["latency", "energy", "edp"], default="latency")
    ap.add_argument("--baseline", help="an earlier results.json to compare simulate's figures with")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from partition.models import list_models
    models = a.models or [m.name for m in list_models()]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for preset in a.presets:
            for m in models:
                rows.append(run_case(m, preset, a.trials, Path(tmp), a.only == "simulate", a.objective))
                r = rows[-1]
                print(f"  {m} on {preset}: simulate rc={r['simulate']['rc']} {r['simulate']['cpu_s']:.1f} s CPU, "
                      f"tune rc={r['tune']['rc']} {r['tune']['cpu_s']:.1f} s CPU, run rc={r['run']['rc']}",
                      file=sys.stderr)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"trials": a.trials, "objective": a.objective, "rows": rows},
                                                 indent=1) + "\n")
    (out / "table.md").write_text(table(rows))
    print(json.dumps(rows) if a.json else table(rows), end="")
    if a.baseline:
        text, tot = compare(rows, json.loads(Path(a.baseline).read_text())["rows"])
        (out / "compare.md").write_text(text)
        print(text if not a.json else "", end="")
        print(f"simulate CPU s before {tot['cpu_before']:.1f}, after {tot['cpu_after']:.1f}; "
              f"latency worse in: {', '.join(tot['worse_latency']) or 'none'}", file=sys.stderr)
    failed = [r for r in rows if any(r[c]["rc"] for c in ("simulate", "tune", "run"))]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
