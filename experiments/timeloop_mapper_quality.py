"""Quality of accel-tune's mapping search against Timeloop's mapper, case by case.

    python experiments/timeloop_mapper_quality.py ../shared/oracle/timeloop [--exercises DIR]
           [--time-limit 9] [--budget 300000] [--seed 0] [--json] [--out DIR]

For every oracle case whose ``tool`` is ``timeloop-mapper`` (and, with ``--exercises``, every
dense folder of a timeloop-accelergy-exercises checkout holding a ``timeloop-mapper.stats.txt``
and its ``parsed-processed-input.yaml``): the same architecture, problem and constraints (the
processed input Timeloop read, with Accelergy's ERT/ART) and Timeloop's metric (the mapper
section's ``optimization_metrics``) go to ``tune --timeloop``'s search. Timeloop's found mapping is
NOT given to the search (it would seed it). Printed beside Timeloop's result: cycles, energy,
EDP and seconds (ours, wall clock on one core: BLAS threads are pinned to 1 before numpy loads;
Timeloop's own run time is not in its outputs). "as good" compares in the metric's order
(``delay``: cycles then energy; ``energy``: energy then cycles; ``edp``: EDP then cycles).

Our result is re-evaluated with ``sim.cost.movement.evaluate`` (the one-mapping model) and Timeloop's
found mapping with the same model, so both sides are costed alike (the model reproduces
Timeloop's statistics of these mappings: experiments/validate_timeloop.py).

Writes ``--out`` (default experiments/results/timeloop_mapper_quality/): config.json,
results.json, table.md and quality.png (ours / Timeloop per case for cycles, energy and EDP).
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")   # one core, as the goal says

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _search(files: list[Path], time_limit: float, budget: int, seed: int) -> dict:
    from sim.cost.movement import evaluate
    from tuner.cli.timeloop_tune import load_problem
    from tuner.search.mapper import search_mapping
    from sim.mapping.mapspace_sim import to_mapping
    t0 = time.perf_counter()
    prob = load_problem(files)
    space, res = search_mapping(prob.hier, prob.nest, prob.metric, budget=budget, constraints=prob.constraints,
                                seed=seed, time_limit_s=time_limit, spatial_one_axis=True)
    seconds = time.perf_counter() - t0
    # costed as written: the Timeloop mapping file of the best mapping, read back
    import yaml
    from sim.timeloop import mapping_yaml
    from sim.timeloop.mapping import read_mapping
    text = mapping_yaml(prob.hier, prob.nest, to_mapping(space, res.genes))
    ev = evaluate(prob.hier, prob.nest, read_mapping(yaml.safe_load(text)["mapping"], prob.hier, prob.nest))
    return {"metric": prob.metric, "cycles": int(ev.cycles), "energy_pj": float(ev.energy_pj),
            "edp": float(ev.cycles) * float(ev.energy_pj), "seconds": seconds, "evaluations": res.evaluations,
            "utilized_macs": int(ev.utilized_macs), "macs": prob.hier.arithmetic.instances}


def _timeloop_side(files_with_map: list[Path]) -> dict:
    from sim.timeloop import evaluate
    ev = evaluate(files_with_map)
    return {"cycles": int(ev.cycles), "energy_pj": float(ev.energy_pj), "edp": float(ev.cycles) * float(ev.energy_pj)}


def _as_good(metric: str, ours: dict, tl: dict, rtol: float = 1e-9) -> bool:
    key = {"delay": ("cycles", "energy_pj"), "energy": ("energy_pj", "cycles"), "edp": ("edp", "cycles")}[metric]
    for k in key:
        if ours[k] < tl[k] * (1 - rtol):
            return True
        if ours[k] > tl[k] * (1 + rtol):
            return False
    return True


def oracle_cases(folder: Path, tmp: Path):
    from sim.validate.timeloop import load_case, write_inputs
    for p in sorted(folder.glob("*.json")):
        case = load_case(p)
        if case.get("tool") != "timeloop-mapper":
            continue
        files = write_inputs(case, "processed", tmp / case["case_id"])
        without = [f for f in files if not f.name.endswith(".map.yaml")]
        s = case["reference"]["summary"]
        printed = {"cycles": int(s["cycles"]), "energy_pj": float(s["derived"]["total_energy_pJ_from_fJ_per_compute"])}
        yield case["case_id"], without, files, printed


def exercise_cases(root: Path):
    from timeloop_exercises import parse_stats
    for stats in sorted(root.rglob("timeloop-mapper.stats.txt")):
        folder = stats.parent
        if "sparse" in str(folder).lower() or not (folder / "parsed-processed-input.yaml").exists():
            continue
        base = [folder / "parsed-processed-input.yaml", folder / "timeloop-mapper.ERT.yaml",
                folder / "timeloop-mapper.ART.yaml"]
        ref = parse_stats(stats.read_text())
        name = "ex:" + str(folder.relative_to(root)).replace("workspace/", "").replace("/ref_outputs", "") \
            .replace("/ref-output", "").replace("/outputs", "")
        yield name, base, base + [folder / "timeloop-mapper.map.yaml"], {"cycles": ref["cycles"],
                                                                          "energy_pj": ref["energy_pj"]}


def run(cases, time_limit: float, budget: int, seed: int) -> list[dict]:
    rows = []
    for name, without, with_map, printed in cases:
        row = {"case": name, "timeloop_printed": printed}
        try:
            row["timeloop"] = _timeloop_side(with_map)
            row["ours"] = _search(without, time_limit, budget, seed)
        except ValueError as e:   # a construct the reader refuses: reported, never a number
            row["error"] = str(e).splitlines()[0]
            rows.append(row)
            print(f"{name}: {row['error']}", file=sys.stderr)
            continue
        o, t = row["ours"], row["timeloop"]
        row["as_good"] = _as_good(o["metric"], o, t)
        row["ratio"] = {k: o[k] / t[k] for k in ("cycles", "energy_pj", "edp")}
        rows.append(row)
        print(f"{name}: {o['metric']} ours {o['cycles']} cycles {o['energy_pj']:.4g} pJ, Timeloop {t['cycles']} "
              f"cycles {t['energy_pj']:.4g} pJ, EDP x{row['ratio']['edp']:.3f}, {o['seconds']:.1f} s",
              file=sys.stderr)
    return rows


def table(rows: list[dict]) -> str:
    md = ["| case | metric | cycles (ours / Timeloop) | energy pJ (ours / Timeloop) | EDP ours / Timeloop | "
          "MACs used | mappings evaluated | seconds (ours) | as good |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            md.append(f"| {r['case']} | | | | | | | | refused: {r['error']} |")
            continue
        o, t = r["ours"], r["timeloop"]
        md.append(f"| {r['case']} | {o['metric']} | {o['cycles']:,} / {t['cycles']:,} | {o['energy_pj']:.4g} / "
                  f"{t['energy_pj']:.4g} | {r['ratio']['edp']:.3f} | {o['utilized_macs']}/{o['macs']} | "
                  f"{o['evaluations']:,} | {o['seconds']:.1f} | {'yes' if r['as_good'] else 'NO'} |")
    return "\n".join(md) + "\n"


def figure(rows: list[dict], path: Path) -> None:
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    rows = [r for r in rows if "error" not in r]
    fig = Figure(figsize=(max(6.0, 0.6 * len(rows) + 2), 4.0), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    x = np.arange(len(rows))
    for j, (k, label) in enumerate((("cycles", "cycles"), ("energy_pj", "energy"), ("edp", "EDP"))):
        ax.bar(x + (j - 1) * 0.27, [r["ratio"][k] for r in rows], 0.27, label=label)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, [r["case"].replace("ex:", "") for r in rows], rotation=45, fontsize=6, ha="right")
    ax.set_ylabel("accel-tune / Timeloop mapper (lower is better)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("oracle", help="../shared/oracle/timeloop")
    ap.add_argument("--exercises", help="a checkout of timeloop-accelergy-exercises (mapper runs as extra cases)")
    ap.add_argument("--time-limit", type=float, default=9.0,
                    help="search seconds per case (default 9: reading the files and the final check fit in 10)")
    ap.add_argument("--budget", type=int, default=300000, help="mappings per case at most (default 300000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--out", default=str(ROOT / "experiments/results/timeloop_mapper_quality"))
    a = ap.parse_args(argv)
    folder = Path(a.oracle)
    if not folder.is_dir():
        print(f"timeloop_mapper_quality: {folder} is not a folder", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        cases = list(oracle_cases(folder, Path(tmp)))
        if a.exercises:
            cases += list(exercise_cases(Path(a.exercises)))
        rows = run(cases, a.time_limit, a.budget, a.seed)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps({
        "command": ["experiments/timeloop_mapper_quality.py", *(argv if argv is not None else sys.argv[1:])],
        "time_limit_s": a.time_limit, "budget": a.budget, "seed": a.seed, "machine": platform.machine(),
        "python": platform.python_version(), "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")}, indent=2) + "\n")
    (out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    md = table(rows)
    (out / "table.md").write_text(md)
    try:
        figure(rows, out / "quality.png")
    except ImportError:
        print("timeloop_mapper_quality: matplotlib missing, no figure", file=sys.stderr)
    ok = [r for r in rows if "error" not in r]
    summary = {"cases": len(rows), "evaluated": len(ok), "as_good": sum(r["as_good"] for r in ok),
               "max_seconds": max((r["ours"]["seconds"] for r in ok), default=None)}
    if a.json:
        print(json.dumps({"summary": summary, "cases": rows}, indent=2))
    else:
        print(md)
        print(f"as good as Timeloop's mapper on {summary['as_good']} of {summary['evaluated']} cases "
              f"({summary['cases'] - summary['evaluated']} refused); slowest {summary['max_seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
