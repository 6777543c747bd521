"""Speed and memory of one `accel-tune llm` point, and LLM points per hour.

    python experiments/bench/llm_speed.py [--hw PRESET|FILE] [--profile] [--points 40] [--json]

1. The issue's point, llama-2-70b with --tp 4, B=64, I=2048, O=2048, in a fresh process: CPU seconds
   of start-up (imports, hardware) and of the point itself (``time.process_time``), and the
   process's peak resident memory (``ru_maxrss``). Targets: <= 1 s of CPU after start-up, <= 200 MB.
   Run twice with one tuning log: cold, then with the default schedules/mappings the first run
   kept in the log (on a machine with storage levels choosing them is what a cold point pays).
2. ``--points N`` serving points in one process (models, batches, lengths and tp varied, the
   kernel cache shared as a sweep worker shares it): points per CPU hour on one core; two cores
   run two such workers.
3. ``--sweep``: ``accel-tune sweep --processes 2`` over 6 hardware points x 24 LLM serving points
   (batch 1..64, input 128..2048, output 128..1024): points per hour by the wall clock (on a shared
   machine a lower bound). Target: >= 10,000 points per hour on 2 cores.
4. ``--profile``: cProfile of the point (the 15 costliest functions by cumulative time).

Without ``--hw`` the hardware is cloud-npu with 80 GiB of device memory and an 8-device switch
(300 GB/s per device and direction, 2 us per hop), written next to the results.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_HW = """base = "cloud-npu"
name = "cloud-npu-80g-x8"
description = "cloud-npu with 80 GiB of device memory and an 8-device switch (llm_speed.py)"
[memory]
capacity_bytes = 85899345920
[interconnect]
max_devices = 8
bytes_per_s = 300e9
latency_s = 2e-6
topology = "switch"
pj_per_byte = 10.0
"""

CHILD = r"""
import json, resource, sys, time
t0 = time.process_time()
import sim
from partition.llm.source import source_for
from sim.graph.serving import ServingPoint
from tuner.llm import serve_llm
hw = sim.load_hw(sys.argv[1])
src = source_for("llama-2-70b")
t1 = time.process_time()
r = serve_llm(src, hw, ServingPoint(64, 2048, 2048, tp=4, dtype=sys.argv[2]), log=sys.argv[3])
t2 = time.process_time()
print(json.dumps({"startup_cpu_s": t1 - t0, "point_cpu_s": t2 - t1,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "ttft_ms": r.to_dict()["ttft_ms"], "tpot_ms": r.to_dict()["tpot_ms"],
                  "distinct_kernels": len(r.schedules)}))
"""


def one_point(hw: str, dtype: str, log: str) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", CHILD, hw, dtype, log], capture_output=True, text=True, env=env,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def many_points(hw_path: str, n: int, dtype: str) -> dict:
    import sim
    from partition.llm.source import source_for
    from sim.graph.phase_kernels import default_coster
    from sim.graph.serving import ServingPoint, serve
    hw = sim.load_hw(hw_path)
    coster = default_coster(hw)          # one worker's kernel cache, shared across its points
    models = ["llama-2-7b", "llama-3.1-8b", "mistral-7b", "llama-2-13b", "qwen2.5-7b"]
    grid = [(m, b, i, o, tp) for m in models for b in (1, 8, 32, 64) for i in (128, 512, 2048)
            for o in (128, 1024) for tp in (1, 2)]
    pts = grid[:n]
    t0 = time.process_time()
    for m, b, i, o, tp in pts:
        serve(source_for(m), hw, ServingPoint(b, i, o, tp=tp, dtype=dtype), coster)
    cpu = time.process_time() - t0
    return {"points": len(pts), "cpu_s": cpu, "points_per_cpu_hour": len(pts) / cpu * 3600,
            "points_per_hour_2_cores": 2 * len(pts) / cpu * 3600}


SWEEP = """name = "llm_speed"
base = "{hw}"
[axes]
"dram.bytes_per_cycle" = [512.0, 1024.0, 2048.0]
"array.rows,array.cols" = [64, 128]

[[models]]
llm = "llama-2-7b"
batch = [1, 8, 32, 64]
input_len = [128, 512, 2048]
output_len = [128, 1024]
dtype = "{dtype}"
"""


def sweep_rate(hw_path: str, dtype: str, tmp: str) -> dict:
    spec = Path(tmp) / "llm_speed.toml"
    spec.write_text(SWEEP.format(hw=hw_path, dtype=dtype))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tuner", "sweep", str(spec), "-o", str(Path(tmp) / "sweep"),
                    "--processes", "2", "--json"], check=True, capture_output=True, env=env)
    wall = time.perf_counter() - t0
    rows = [json.loads(x) for x in (Path(tmp) / "sweep" / "results.jsonl").read_text().splitlines()]
    n = sum(len(r["models"]) for r in rows)
    return {"points": n, "wall_s": wall, "points_per_hour_wall": n / wall * 3600,
            "errors": sum(r["error"] is not None for r in rows)}


def profile(hw_path: str, dtype: str) -> str:
    import cProfile
    import io
    import pstats

    import sim
    from partition.llm.source import source_for
    from sim.graph.serving import ServingPoint, serve
    hw = sim.load_hw(hw_path)
    src = source_for("llama-2-70b")
    pr = cProfile.Profile()
    pr.enable()
    serve(src, hw, ServingPoint(64, 2048, 2048, tp=4, dtype=dtype))
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(15)
    return s.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", help="preset or file (default: cloud-npu with 80 GiB and 8 linked devices)")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--points", type=int, default=40)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        hw = args.hw
        if hw is None:
            hw = os.path.join(tmp, "cloud-npu-80g-x8.toml")
            Path(hw).write_text(DEFAULT_HW)
        log = os.path.join(tmp, "records.jsonl")
        res = {"hardware": args.hw or DEFAULT_HW, "dtype": args.dtype, "point": one_point(hw, args.dtype, log),
               "point_cached": one_point(hw, args.dtype, log)}
        if args.points:
            res["sweep"] = many_points(hw, args.points, args.dtype)
        if args.sweep:
            res["sweep_2_processes"] = sweep_rate(hw, args.dtype, tmp)
        prof = profile(hw, args.dtype) if args.profile else None
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    p = res["point"]
    print(f"llama-2-70b --tp 4, B=64, I=2048, O=2048 on {args.hw or 'cloud-npu-80g-x8'}:")
    print(f"  start-up {p['startup_cpu_s']:.2f} s CPU; the point {p['point_cpu_s']:.3f} s CPU (target <= 1 s); "
          f"peak memory {p['peak_rss_mb']:.0f} MB (target <= 200 MB); {p['distinct_kernels']} distinct kernels")
    print(f"  TTFT {p['ttft_ms']:.1f} ms, TPOT {p['tpot_ms']:.3f} ms")
    c = res["point_cached"]
    print(f"  again with the defaults kept in the log: the point {c['point_cpu_s']:.3f} s CPU, peak memory "
          f"{c['peak_rss_mb']:.0f} MB, TTFT {c['ttft_ms']:.1f} ms, TPOT {c['tpot_ms']:.3f} ms")
    if "sweep" in res:
        s = res["sweep"]
        print(f"  {s['points']} varied points in one worker: {s['cpu_s']:.2f} s CPU, "
              f"{s['points_per_cpu_hour']:,.0f} points per CPU hour, {s['points_per_hour_2_cores']:,.0f} on 2 cores")
    if "sweep_2_processes" in res:
        s = res["sweep_2_processes"]
        print(f"  accel-tune sweep --processes 2: {s['points']} LLM points in {s['wall_s']:.1f} s wall (start-up "
              f"included): {s['points_per_hour_wall']:,.0f} points/hour (target >= 10,000); errors {s['errors']}")
    if prof:
        print(prof)
    return 0


if __name__ == "__main__":
    sys.exit(main())
