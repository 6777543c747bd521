"""Run every dense Timeloop exercise that has reference outputs through the multi-level model and
compare with what Timeloop printed.

    python experiments/timeloop_exercises.py PATH/TO/timeloop-accelergy-exercises [--json]

A checkout of Accelergy-Project/timeloop-accelergy-exercises (MIT licence). Every folder with a
``parsed-processed-input.yaml`` and a ``*.stats.txt`` is a case: the processed input, the mapper's
``*.map.yaml`` for mapper runs, and Accelergy's ERT/ART from the same folder are evaluated with
``sim.timeloop.evaluate``; every printed level's scalar reads, fills and updates per instance and
utilized instances, the cycles and the energy (fJ/Compute Total x Computes, 0.1 % tolerance) are
compared. Sparse cases (densities, sparse optimizations, metadata storage: the reader refuses
them with one line, the model being dense) are listed apart and not counted; any other refusal
counts as a failure.

With ``--template`` every case under a folder holding timeloopfe's ``top.yaml.jinja2`` (the
exercises' ``example_designs``: ``<top>/<design>/ref_outputs/<problem>/``) is evaluated from the
user's inputs instead of the processed input: the top template rendered by the reader with
``architecture=<design>`` (what the exercises' run script passes), plus the same map, ERT and ART
files; cases with no such template, or a problem folder other than ``default_problem`` (whose
value the template cannot be told), are left out.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

from sim.timeloop import TimeloopError, evaluate

SPARSE_WORDS = ("densities", "sparse_optimizations", "metadata storage")
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


def template_input(folder: Path) -> tuple[Path, dict[str, str]] | None:
    """The top template and its variables for ``<top>/<design>/ref_outputs/default_problem``."""
    if folder.parent.name not in ("ref_outputs", "outputs") or folder.name != "default_problem":
        return None
    design = folder.parent.parent
    for top in design.parents:
        if (top / "top.yaml.jinja2").is_file():
            return top / "top.yaml.jinja2", {"architecture": design.relative_to(top).as_posix()}
    return None


def run_case(folder: Path, from_template: bool = False) -> dict:
    stats = sorted(folder.glob("timeloop-*.stats.txt"))
    if not stats:
        return {"case": str(folder), "error": "no stats.txt"}
    prefix = stats[0].name[: -len(".stats.txt")]
    files = [folder / "parsed-processed-input.yaml"]
    variables = None
    if from_template:
        found = template_input(folder)
        if found is None:
            return {"case": str(folder), "error": "no stats.txt"}   # not a template case: left out
        files, variables = [found[0]], found[1]
    if (folder / f"{prefix}.map.yaml").exists() and prefix.endswith("mapper"):
        files.append(folder / f"{prefix}.map.yaml")
    files += [folder / f"{prefix}.ERT.yaml", folder / f"{prefix}.ART.yaml"]
    try:
        ev = evaluate(files, variables)
    except TimeloopError as e:
        return {"case": str(folder), "error": str(e), "ok": False}
    try:
        ref = parse_stats(stats[0].read_text())
    except (AttributeError, ValueError):
        return {"case": str(folder), "error": f"cannot read {stats[0].name}", "ok": False}
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
    p.add_argument("--template", action="store_true",
                   help="evaluate example designs from their top.yaml.jinja2 instead of the processed input")
    a = p.parse_args(argv)
    root = Path(a.folder)
    cases = sorted(f.parent for f in root.rglob("parsed-processed-input.yaml"))
    if not cases:
        print(f"timeloop_exercises: error: no parsed-processed-input.yaml under {root}", file=sys.stderr)
        return 2
    results = [run_case(c, a.template) for c in cases]
    for r in results:
        r["sparse"] = "error" in r and any(w in r["error"] for w in SPARSE_WORDS)
    results = [r for r in results if r.get("error") != "no stats.txt"]
    dense = [r for r in results if not r["sparse"]]
    exact = sum(bool(r.get("ok")) for r in dense)
    summary = {"dense_cases": len(dense), "exact": exact, "sparse_refused": len(results) - len(dense),
               "max_energy_rel_err": max((r.get("energy_rel_err", math.inf) for r in dense), default=0.0)}
    if a.json:
        json.dump({"results": results, "summary": summary}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for r in results:
        rel = str(Path(r["case"]).relative_to(root))
        if r["sparse"]:
            print(f"sparse  {rel} (not counted): {r['error']}")
        elif "error" in r:
            print(f"REFUSED {rel}: {r['error']}")
        else:
            print(f"{'exact' if r['ok'] else 'DIFF ':5s} {rel}  ({r['counts_compared']} counts, cycles {r['cycles']}, "
                  f"energy err {r['energy_rel_err']:.1e})")
            for d in r["diffs"][:6]:
                print(f"      {d}")
    print(f"{exact}/{len(dense)} dense exercises exact; max energy error {summary['max_energy_rel_err']:.2e}; "
          f"{summary['sparse_refused']} sparse ones refused")
    return 0 if exact == len(dense) else 1


if __name__ == "__main__":
    sys.exit(main())
