"""Sweep throughput: hardware points per hour for ResNet-50 (per-layer schedule search and
partition search on every point), with one Dask worker and with two, on this machine.

    python experiments/bench/sweep_speed.py [--points 24] [--trials 24] [--model resnet50] [--json]

Writes experiments/results/sweep_speed/{config.json,results.json}. The points are drawn at random
from an edge design space (array shape, buffers, DRAM bandwidth, clock); both runs evaluate the
same points into fresh folders, so nothing is reused from disk between them: what carries over is
the warm start and the cost model along each chain of points (tuner.sweep.runner).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def space(points: int, model: str, trials: int, seed: int) -> dict:
    return {
        "name": "sweep_speed", "base": "edge-npu", "objective": "latency", "seed": seed,
        "sampling": {"method": "random", "count": points},
        "axes": {"array.rows": [8, 16, 32, 64], "array.cols": [8, 16, 32, 64],
                 "buffers.ifmap_bytes": [65536, 131072, 262144],
                 "buffers.weight_bytes": [98304, 196608, 393216],
                 "dram.bytes_per_cycle": [4.0, 8.0, 11.0, 16.0, 32.0],
                 "clock.freq_mhz": [400.0, 500.0, 800.0]},
        "models": [{"name": model, "trials": trials}],
    }


def run(d: dict, workers: int, out: Path) -> dict:
    """``workers`` Dask workers (cluster start-up not timed); 0: in this process."""
    from tuner.sweep import parse_spec, run_sweep
    from tuner.sweep.runner import dask_client
    spec = parse_spec(d)
    client = dask_client(workers, None) if workers else None
    try:
        if client is not None:
            client.wait_for_workers(workers)
        t0 = time.perf_counter()
        res = run_sweep(spec, out, client=client, progress=False)
        wall = time.perf_counter() - t0
    finally:
        if client is not None:
            cluster = client.cluster
            client.close()
            cluster.close()
    rows = list(res.rows)
    meas = [sum(m.get("measurements", 0) or 0 for m in r["models"].values()) for r in rows]
    evals = [r["eval_s"] for r in rows]
    half = max(1, len(rows) // 2)
    return {"workers": workers, "points": len(rows), "errors": sum(1 for r in rows if r.get("error")),
            "failed": list(res.failed), "wall_s": wall, "points_per_hour": len(rows) / wall * 3600,
            "eval_s_mean": statistics.mean(evals), "eval_s_first_half": statistics.mean(evals[:half]),
            "eval_s_second_half": statistics.mean(evals[half:] or evals[:half]),
            "measurements_mean": statistics.mean(meas),
            "latency_s": {r["index"]: r["latency_s"] for r in rows}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=24)
    ap.add_argument("--trials", type=int, default=24, help="measurements per point for the model")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "experiments/results/sweep_speed"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    d = space(a.points, a.model, a.trials, a.seed)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    config = {"spec": d, "cpus": os.cpu_count(), "python": sys.version.split()[0],
              "command": "python experiments/bench/sweep_speed.py " + " ".join(argv or sys.argv[1:])}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tmp = Path(tempfile.mkdtemp(prefix="sweep_speed_"))
    try:
        one = run(d, 1, tmp / "w1")
        two = run(d, 2, tmp / "w2")
        # The same points in this process with nothing carried between them, at the same budget
        # and at twice it: what reuse buys (quality per measurement) and what it costs (time).
        cold = run({**d, "share_cost_model": False, "warm_start": False}, 0, tmp / "cold")
        cold2 = run({**d, "share_cost_model": False, "warm_start": False,
                     "models": [{"name": a.model, "trials": 2 * a.trials}]}, 0, tmp / "cold2")
        reuse = run(d, 0, tmp / "reuse")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def ratio(x, y):
        r = [x["latency_s"][k] / y["latency_s"][k] for k in x["latency_s"] if k in y["latency_s"]]
        return {"mean": statistics.mean(r), "worst": max(r)} if r else None
    res = {"one_worker": one, "two_workers": two, "speedup": one["wall_s"] / two["wall_s"],
           "ablation_one_process": {
               "reuse": reuse, "no_reuse": cold, "no_reuse_twice_the_trials": cold2,
               "latency_reuse_over_no_reuse": ratio(reuse, cold),
               "latency_reuse_over_no_reuse_twice_the_trials": ratio(reuse, cold2)},
           "load_avg_1min_at_end": os.getloadavg()[0],
           "targets": {"points_per_hour_2_cores": 1000, "speedup_2_over_1": 1.7}}
    (out / "results.json").write_text(json.dumps(res, indent=2) + "\n")
    if a.json:
        json.dump(res, sys.stdout, indent=2)
        print()
    else:
        ab = res["ablation_one_process"]
        for name, r in (("1 Dask worker", one), ("2 Dask workers", two), ("in process, reuse", ab["reuse"]),
                        ("in process, no reuse", ab["no_reuse"]),
                        (f"in process, no reuse, {2 * a.trials} trials", ab["no_reuse_twice_the_trials"])):
            print(f"{name}: {r['points']} points of {a.model} in {r['wall_s']:.1f} s = "
                  f"{r['points_per_hour']:.0f} points/hour; mean {r['eval_s_mean']:.2f} s/point "
                  f"(first half {r['eval_s_first_half']:.2f}, second half {r['eval_s_second_half']:.2f}); "
                  f"{r['measurements_mean']:.0f} measurements/point")
        r1, r2 = ab["latency_reuse_over_no_reuse"], ab["latency_reuse_over_no_reuse_twice_the_trials"]
        print(f"speedup of 2 workers over 1: {res['speedup']:.2f}x")
        print(f"plan latency, reuse / no reuse: mean {r1['mean']:.4f}, worst {r1['worst']:.4f}; reuse / no reuse "
              f"with {2 * a.trials} trials: mean {r2['mean']:.4f}, worst {r2['worst']:.4f}; "
              f"load average at the end {res['load_avg_1min_at_end']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
