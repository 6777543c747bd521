"""The tile-level walk (``sim.cost.walk``) beside the closed form (``sim.cost.movement``, equal to Timeloop)
on every Timeloop oracle case: cycles of both, the steps walked, the walk's pipeline fill and
drain, and whether every per-level, per-tensor count is the same (it must be).

    python experiments/walk_timeloop.py ../shared/oracle/timeloop [--json] [--max-steps N]

Each case is read from the front end's processed input (+ the mapper's map for mapper runs), the
form every case has. Prints a Markdown table (docs/SIMULATOR.md quotes it); the JSON goes to
experiments/results/walk_timeloop/latest.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from sim.cost.movement import evaluate
from sim.timeloop import load
from sim.validate.timeloop import load_case, write_inputs
from sim.cost.walk import DEFAULT_MAX_STEPS, walk

OUT = Path(__file__).resolve().parent / "results" / "walk_timeloop"


def _counts(ev) -> list:
    return [(lv.name, [(n, c.reads, c.fills, c.updates) for n, c in lv.tensors]) for lv in ev.levels]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="the Timeloop oracle folder (one JSON per case)")
    ap.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    folder = Path(a.folder)
    paths = sorted(folder.glob("*.json"))
    if not paths:
        print(f"walk_timeloop: error: no case files in {folder}", file=sys.stderr)
        return 2
    rows = []
    for path in paths:
        case = load_case(path)
        with tempfile.TemporaryDirectory() as tmp:
            files = write_inputs(case, "processed", tmp)
            if files is None:
                continue
            hier, nest, mapping = load([str(f) for f in files])
        ev = evaluate(hier, nest, mapping, check=False)
        w = walk(hier, nest, mapping, max_steps=a.max_steps, check=False)
        limited = [lv.name for lv in hier.levels if lv.read_bandwidth is not None or lv.write_bandwidth is not None]
        rows.append({"case": path.stem, "analytical_cycles": ev.cycles, "walk_cycles": w.cycles,
                     "ratio": w.cycles / ev.cycles, "steps": w.steps, "fill_cycles": w.fill_cycles,
                     "drain_cycles": w.drain_cycles, "counts_equal": _counts(ev) == _counts(w.evaluation),
                     "bandwidth_limited_levels": limited,
                     "energy_pj": w.energy_pj, "analytical_energy_pj": ev.energy_pj})
    out = {"max_steps": a.max_steps, "cases": rows}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "latest.json").write_text(json.dumps(out, indent=2) + "\n")
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"| case | closed form cycles | walk cycles | walk / closed form | steps walked | fill | drain "
          f"| counts equal | bandwidth-limited levels |")
    print("|---|---:|---:|---:|---:|---:|---:|:---:|---|")
    for r in rows:
        print(f"| {r['case']} | {r['analytical_cycles']:,} | {r['walk_cycles']:,} | {r['ratio']:.3f} | "
              f"{r['steps']:,} | {r['fill_cycles']:,.0f} | {r['drain_cycles']:,.1f} | "
              f"{'yes' if r['counts_equal'] else 'NO'} | {', '.join(r['bandwidth_limited_levels']) or 'none'} |")
    return 0 if all(r["counts_equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
