"""Mapping search vs random sampling of the same mapspace, at equal evaluation budgets.

    python experiments/bench/mapper_search_efficiency.py ../shared/oracle/timeloop [--budgets 1000,5000,20000]
           [--seeds 0,1,2] [--json]

For every ``timeloop-mapper`` case of the oracle (its processed input, constraints and metric,
without Timeloop's mapping): the best metric value (the mapper's first optimisation metric) found
by ``tuner.search.mapsearch.search`` and by uniform-ish random sampling (``Mapspace.sample``: the same
legal generator the search starts from) with the same number of evaluations, each over the given
seeds; and Timeloop's found mapping for reference. Each cell: the metric over Timeloop's, mean over
the seeds, and in brackets the tie-breaking key over Timeloop's (energy for delay: when both reach
the same cycles, that is where they differ). Counts, not seconds: the figures do not depend
on the machine. Prints a table (or JSON) and writes nothing else.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np


def run_case(files, with_map, budgets, seeds):
    from sim.timeloop import evaluate
    from tuner.cli.timeloop_tune import load_problem
    from tuner.search.mapper import movement_evaluator
    from tuner.search.mapsearch import Costs, MapSearchConfig, metric_keys, search
    from sim.mapping.mapspace_sim import build_space

    prob = load_problem(files)
    space = build_space(prob.hier, prob.nest, prob.constraints, spatial_one_axis=True)
    ev = movement_evaluator(prob.hier, prob.nest, space)
    def key(cyc, en):
        p, s = metric_keys(prob.metric, Costs(np.asarray(cyc, dtype=float), np.asarray(en, dtype=float)))
        return p, s

    tl = evaluate(with_map)
    tl_key = [float(k[0]) for k in key([tl.cycles], [tl.energy_pj])]
    out = {"metric": prob.metric, "timeloop": tl_key, "budgets": {}}
    for b in budgets:
        s_keys, r_keys = [], []
        for seed in seeds:
            res = search(space, ev, prob.metric, MapSearchConfig(evaluations=b, seed=seed,
                                                                  population=min(1024, max(64, b // 8))))
            s_keys.append([float(k[0]) for k in key([res.cycles], [res.energy_pj])])
            rng = np.random.default_rng(seed)
            best = (np.inf, np.inf)
            left = b
            while left > 0:
                rows = space.sample(min(left, 4096), rng)
                p, s = key(*(lambda c: (c.cycles, c.energy_pj))(ev(space.arrays(rows))))
                i = int(np.lexsort((s, p))[0])
                best = min(best, (float(p[i]), float(s[i])))
                left -= len(rows)
            r_keys.append(list(best))
        out["budgets"][b] = {"search": s_keys, "random": r_keys}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("oracle")
    ap.add_argument("--budgets", default="1000,5000,20000")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    from sim.validate.timeloop import load_case, write_inputs
    budgets = [int(x) for x in a.budgets.split(",")]
    seeds = [int(x) for x in a.seeds.split(",")]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for p in sorted(Path(a.oracle).glob("*.json")):
            case = load_case(p)
            if case.get("tool") != "timeloop-mapper":
                continue
            files = write_inputs(case, "processed", Path(tmp) / case["case_id"])
            results[case["case_id"]] = run_case([f for f in files if not f.name.endswith(".map.yaml")], files,
                                                budgets, seeds)
            print(case["case_id"], "done", file=sys.stderr)
    if a.json:
        print(json.dumps({"budgets": budgets, "seeds": seeds, "cases": results}, indent=2))
        return 0
    second = {"delay": "energy", "energy": "cycles", "edp": "cycles"}
    print("| case | metric (tie-break) | budget | search / Timeloop | random / Timeloop |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        t = r["timeloop"]
        for b, v in r["budgets"].items():
            cells = []
            for who in ("search", "random"):
                k = np.array(v[who])
                cells.append(f"{np.mean(k[:, 0]) / t[0]:.3f} ({np.mean(k[:, 1]) / t[1]:.3f})")
            print(f"| {name} | {r['metric']} ({second[r['metric']]}) | {b:,} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
