"""accel-tune sweep: evaluate a hardware design space from a spec file, resumably."""
from __future__ import annotations

import argparse
import sys

from tuner.cli import CLIError, print_json
from tuner.cli.common import add_calibration_arg, load_calibration_arg


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("sweep", help="tune models on every point of a hardware design space (Pareto front)",
                       description="Evaluate every design point of a sweep spec (TOML or YAML; see "
                                   "docs/SWEEPS.md): tune each model on the point's hardware, then write "
                                   "results.jsonl, results.csv, pareto.json, spec.json and version.json to "
                                   "DIR. Rerunning with the same DIR skips finished points.")
    p.add_argument("spec", metavar="SPEC", help="sweep spec file (.toml, .yaml or .json)")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="output folder (created; reused to resume)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--workers", type=int, metavar="N",
                   help="start a dask.distributed LocalCluster of N single-threaded worker processes")
    g.add_argument("--scheduler", metavar="ADDRESS", help="use an existing Dask cluster (tcp://host:8786)")
    g.add_argument("--processes", type=int, default=1, metavar="N",
                   help="local worker processes without Dask (default 1: in this process)")
    p.add_argument("--limit", type=int, metavar="N",
                   help="evaluate at most N new points this run (0: only rewrite the tables); a large grid is "
                        "then enumerated only as far as needed")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print a JSON summary (counts, files, Pareto rows)")
    add_calibration_arg(p)
    return p


def run(args) -> int:
    from tuner.sweep import load_spec, run_sweep
    if args.processes is not None and args.processes < 1:
        raise CLIError(f"--processes must be >= 1, got {args.processes}")
    if args.limit is not None and args.limit < 0:
        raise CLIError(f"--limit must be >= 0, got {args.limit}")
    if args.workers is not None and args.workers < 1:
        raise CLIError(f"--workers must be >= 1, got {args.workers}")
    cal = load_calibration_arg(args)
    if cal is not None and cal.kind != "host":
        raise CLIError("sweep: --calibration takes a host calibration (calibrate --host); a device calibration is "
                       "tied to one hardware config and the sweep varies it")
    spec = load_spec(args.spec)
    res = run_sweep(spec, args.out, processes=args.processes or 1, workers=args.workers,
                    scheduler=args.scheduler, progress=not args.no_progress and not args.json,
                    limit=args.limit, calibration=cal)
    front = [r for r in res.rows if r["index"] in set(res.pareto)]
    summary = {
        "out_dir": res.out_dir, "spec": spec.name, "points": len(res.space.points),
        "grid_size": res.space.grid_size, "rejected_by_constraints": res.space.rejected,
        "evaluated": res.new, "skipped_finished": res.skipped, "failed": list(res.failed),
        "errors": sum(1 for r in res.rows if r.get("error")),
        # Unknown (null) when a limit stopped the enumeration of a large space early.
        "remaining": len(res.space.points) - len(res.rows) if res.space.complete else None,
        "examined": res.space.examined,
        "wall_s": res.wall_s,
        "calibrated": cal is not None,
        "files": {k: f"{res.out_dir}/{k}" for k in ("results.jsonl", "results.csv", "pareto.json",
                                                     "spec.json", "version.json")},
        "pareto": [{"index": r["index"], "params": r["params"], "area_mm2": r["area_mm2"],
                    "latency_s": r["latency_s"], "energy_j": r["energy_j"], "edp": r["edp"]} for r in front],
    }
    if args.json:
        print_json(summary)
    else:
        if res.space.complete:
            points = f"{summary['points']} points ({summary['rejected_by_constraints']} rejected by constraints)"
            remaining = f"{summary['remaining']} remaining"
        else:
            points = f"{res.space.grid_size:,}-point grid, {res.space.examined:,} examined"
            remaining = "more remaining (rerun to carry on)"
        print(f"{spec.name}: {points}, {res.new} evaluated now, {res.skipped} already done, "
              f"{remaining}, {res.wall_s:.1f} s -> {res.out_dir}")
        print(f"Pareto front (latency, energy, area): {len(front)} points")
        print(f"{'#':>5}  {'area mm2':>9}  {'latency ms':>11}  {'energy mJ':>10}  parameters")
        for r in sorted(front, key=lambda r: r["latency_s"]):
            ps = ", ".join(f"{k}={v}" for k, v in r["params"].items())
            print(f"{r['index']:>5}  {r['area_mm2']:>9.3f}  {r['latency_s'] * 1e3:>11.4g}  "
                  f"{r['energy_j'] * 1e3:>10.4g}  {ps}")
    for f in res.failed:
        print(f"accel-tune: warning: {f}", file=sys.stderr)
    return 1 if res.failed else 0
