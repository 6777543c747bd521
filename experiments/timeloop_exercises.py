"""Run every dense Timeloop exercise that has reference outputs through the multi-level model and
compare with what Timeloop printed.

    python experiments/timeloop_exercises.py PATH/TO/timeloop-accelergy-exercises [--json]

A checkout of Accelergy-Project/timeloop-accelergy-exercises (MIT licence). For every folder with a
``parsed-processed-input.yaml`` and a ``*.stats.txt`` (sparse designs, whose paths name
``sparse``, are left out: the model is dense): the processed input, the mapper's ``*.map.yaml``
for mapper runs, and Accelergy's ERT/ART from the same folder are evaluated with
``sim.timeloop.evaluate``; every printed level's scalar reads, fills and updates per instance and
utilized instances, the cycles and the energy (fJ/Compute Total x Computes, 0.1 % tolerance) are
compared. A case our reader refuses is reported with its one-line reason.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

from sim.timeloop import TimeloopError, evaluate

_ROWS = {"Scalar reads (per-instance)": "reads", "Scalar fills (per-instance)": "fills",
         "Scalar updates (per-instance)": "updates", "Utilized instances (max)": "utilized_instances"}


def parse_stats(text: str) -> dict:
    """Per level and data space the printed counts, plus cycles, computes and total energy."""
    levels: dict[str, dict[str, dict[str, int]]] = {}
    level = space = None
    for line in text.splitlines():
        m = re.match(r"^=== (.+) ===$", line.strip())
        if m:
            level, space = m.group(1), None
            levels.setdefault(level, {})
            continue
        if line.strip() == "Summary Stats":
            break
        m = re.match(r"^    (\S[^:]*):$", line)
        if m and level is not None:
            space = m.group(1)
            continue
        m = re.match(r"^\s+(.+?)\s*:\s*([-\d.e+]+)", line)
        if m and level is not None and space is not None and m.group(1) in _ROWS:
            levels[level].setdefault(space, {})[_ROWS[m.group(1)]] = int(float(m.group(2)))
    summary = text[text.index("Summary Stats"):]
    cycles = int(re.search(r"^Cycles: (\d+)", summary, re.M).group(1))
    computes = int(re.search(r"^Computes = (\d+)", summary, re.M).group(1))
    fj = float(re.search(r"^\s+Total\s+= ([\d.]+)", summary, re.M).group(1))
    return {"levels": levels, "cycles": cycles, "computes": computes, "energy_pj": fj * computes / 1000.0}


def run_case(folder: Path) -> dict:
    stats = sorted(folder.glob("timeloop-*.stats.txt"))
    if not stats:
        return {"case": str(folder), "error": "no stats.txt"}
    prefix = stats[0].name[: -len(".stats.txt")]
    files = [folder / "parsed-processed-input.yaml"]
    if (folder / f"{prefix}.map.yaml").exists() and prefix.endswith("mapper"):
        files.append(folder / f"{prefix}.map.yaml")
    files += [folder / f"{prefix}.ERT.yaml", folder / f"{prefix}.ART.yaml"]
    ref = parse_stats(stats[0].read_text())
    try:
        ev = evaluate(files)
    except TimeloopError as e:
        return {"case": str(folder), "error": str(e), "ok": False}
    mine = {lv.name: lv for lv in ev.levels}
    diffs, n = [], 0
    for name, spaces in ref["levels"].items():
        if name not in mine:
            if name != ev.levels and spaces:   # the compute level prints no data spaces
                diffs.append(f"{name}: not a storage level of ours")
            continue
        lv = mine[name]
        got = dict(lv.tensors)
        for space, counts in spaces.items():
            c = got.get(space)
            for what, v in counts.items():
                n += 1
                ours = lv.utilized_instances if what == "utilized_instances" else (getattr(c, what) if c else None)
                if c is None or ours != v:
                    diffs.append(f"{name} {space} {what}: ours {ours} timeloop {v}")
    ok_cycles = ev.cycles == ref["cycles"]
    e_err = abs(ev.energy_pj - ref["energy_pj"]) / ref["energy_pj"] if ref["energy_pj"] else 0.0
    if not ok_cycles:
        diffs.append(f"cycles: ours {ev.cycles} timeloop {ref['cycles']}")
    if ev.computes != ref["computes"]:
        diffs.append(f"computes: ours {ev.computes} timeloop {ref['computes']}")
    if not e_err <= 1e-3:
        diffs.append(f"energy: ours {ev.energy_pj:.2f} timeloop {ref['energy_pj']:.2f} pJ")
    return {"case": str(folder), "ok": not diffs, "counts_compared": n, "cycles": ev.cycles,
            "cycles_timeloop": ref["cycles"], "energy_pj": ev.energy_pj, "energy_pj_timeloop": ref["energy_pj"],
            "energy_rel_err": e_err, "diffs": diffs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="a checkout of timeloop-accelergy-exercises")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    root = Path(a.folder)
    cases = sorted(f.parent for f in root.rglob("parsed-processed-input.yaml") if "sparse" not in str(f.relative_to(root)))
    if not cases:
        print(f"timeloop_exercises: error: no parsed-processed-input.yaml under {root}", file=sys.stderr)
        return 2
    results = [run_case(c) for c in cases]
    results = [r for r in results if r.get("error") != "no stats.txt"]
    exact = sum(bool(r.get("ok")) for r in results)
    summary = {"cases": len(results), "exact": exact,
               "max_energy_rel_err": max((r.get("energy_rel_err", math.inf) for r in results), default=0.0)}
    if a.json:
        json.dump({"results": results, "summary": summary}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for r in results:
        rel = str(Path(r["case"]).relative_to(root))
        if "error" in r:
            print(f"REFUSED {rel}: {r['error']}")
        else:
            print(f"{'exact' if r['ok'] else 'DIFF ':5s} {rel}  ({r['counts_compared']} counts, cycles {r['cycles']}, "
                  f"energy err {r['energy_rel_err']:.1e})")
            for d in r["diffs"][:6]:
                print(f"      {d}")
    print(f"{exact}/{len(results)} dense exercises exact; max energy error {summary['max_energy_rel_err']:.2e}")
    return 0 if exact == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
