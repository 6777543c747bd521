"""Simulator speed: analytical schedule evaluations per second (batch), the fixed cost of one
small analytical call (batches of 1 and 32 schedules mixing dataflows, orientations and loop
orders, as search and sweeps issue them), tile-level kernel simulations per second on ResNet-50 and
BERT-base layers, one long tile walk (31,360 tiles), and the per-layer speed-up over SCALE-Sim.

    python experiments/bench/sim_speed.py [--json] [--batch 200000] [--hw edge-npu]

Rates are per CPU second of this process (``time.process_time``): on a shared machine wall time
also counts the time other processes hold the core; both are reported.
SCALE-Sim's time per layer comes from running it when the ``scalesim`` package is installed, else
from the ``wall_s`` it measured on this machine for the same layer and array (shared/oracle).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import sim
from sim import Schedule, ScheduleArrays, Workload
from sim import default_schedule, scalesim_schedule, workload_of

ORACLE = Path(__file__).resolve().parents[2] / ".." / "shared" / "oracle" / "scalesim.jsonl"


def model_layers(name: str) -> list[Workload]:
    """Unique MAC workloads of a built-in model."""
    from partition import models
    g = models.get(name)
    seen: dict[str, Workload] = {}
    for _, node in g.walk():
        if node.op in ("conv2d", "dense", "matmul", "batch_matmul", "gemm"):
            wl = workload_of(node)
            seen.setdefault(wl.key, wl)
    return list(seen.values())


def random_schedules(wl: Workload, hw, n: int, rng) -> ScheduleArrays:
    g, m, nn, k = wl.gemm_view()
    dfs = [sim.hw.config.DATAFLOWS.index(d) for d in hw.array.dataflows]
    return ScheduleArrays(rng.choice(dfs, n), rng.random(n) < 0.5, rng.integers(1, m + 1, n),
                          rng.integers(1, nn + 1, n), rng.integers(1, k + 1, n), rng.integers(0, 6, n),
                          rng.random(n) < 0.8, np.zeros(n, dtype=np.int64))


def bench_analytical(layers, hw, batch: int, rng) -> dict:
    rates, walls = [], []
    for wl in layers:
        s = random_schedules(wl, hw, batch, rng)
        sim.simulate_batch(wl, hw, s)  # warm
        t, w = time.process_time(), time.perf_counter()
        r = sim.simulate_batch(wl, hw, s)
        rates.append(batch / (time.process_time() - t))
        walls.append(batch / (time.perf_counter() - w))
        assert np.isfinite(r["total_cycles"]).any()
    return {"layers": len(layers), "batch": batch, "median_evals_per_s": statistics.median(rates),
            "min_evals_per_s": min(rates), "max_evals_per_s": max(rates),
            "median_evals_per_wall_s": statistics.median(walls)}


def bench_small_batches(layers, hw, sizes=(1, 32), calls: int = 200, rng=None) -> dict:
    """Median over layers of the CPU (and wall) time of one ``simulate_batch`` call."""
    out = {}
    for b in sizes:
        cpu, wall = [], []
        for wl in layers:
            batches = [random_schedules(wl, hw, b, rng) for _ in range(20)]
            sim.simulate_batch(wl, hw, batches[0])
            t, w = time.process_time(), time.perf_counter()
            for i in range(calls):
                sim.simulate_batch(wl, hw, batches[i % len(batches)])
            cpu.append((time.process_time() - t) / calls)
            wall.append((time.perf_counter() - w) / calls)
        out[f"batch_{b}"] = {"median_cpu_us_per_call": statistics.median(cpu) * 1e6,
                             "max_cpu_us_per_call": max(cpu) * 1e6,
                             "median_wall_us_per_call": statistics.median(wall) * 1e6,
                             "evals_per_cpu_s": b / statistics.median(cpu)}
    return {"layers": len(layers), "calls_per_layer": calls, **out}


def bench_long_tile_walk(hw) -> dict:
    """ResNet-50's 7x7 stem in 16x16x16 tiles: a long walk shows how the tile simulator scales."""
    wl = Workload.conv2d(1, 3, 224, 224, 64, 7, 7, stride=2, pad=3)
    s = default_schedule(wl, hw)
    s = Schedule(s.dataflow, s.spatial, 16, 16, 16, "nkm", True, s.epilogue)
    t, w = time.process_time(), time.perf_counter()
    r = sim.simulate(wl, hw, s, fidelity="tile")
    return {"n_tiles": r.n_tiles, "cpu_s": time.process_time() - t, "wall_s": time.perf_counter() - w}


def bench_tile(layers, hw, reps: int = 10) -> dict:
    per, walls, tiles = [], [], []
    for wl in layers:
        s = default_schedule(wl, hw)
        sim.simulate(wl, hw, s, fidelity="tile")
        t, w = time.process_time(), time.perf_counter()
        for _ in range(reps):
            r = sim.simulate(wl, hw, s, fidelity="tile")
        per.append((time.process_time() - t) / reps)
        walls.append((time.perf_counter() - w) / reps)
        tiles.append(r.n_tiles)
    return {"layers": len(layers), "median_sims_per_s": 1.0 / statistics.median(per),
            "median_sims_per_wall_s": 1.0 / statistics.median(walls),
            "slowest_sims_per_s": 1.0 / max(per), "median_tiles": statistics.median(tiles),
            "max_tiles": max(tiles)}


def bench_vs_scalesim() -> dict | None:
    if not ORACLE.exists():
        return None
    from sim.validate.scalesim_files import hardware_of, load_cases, workload_of
    try:
        import scalesim  # noqa: F401
        source = "scalesim installed, but this script times only the oracle's recorded runs"
    except ImportError:
        source = "oracle wall_s (SCALE-Sim 3.0.0 measured on this machine)"
    rows = []
    for c in load_cases(ORACLE):
        wl, hw = workload_of(c), hardware_of(c)
        s = scalesim_schedule(wl, hw, c["dataflow"])
        sim.simulate(wl, hw, s, fidelity="tile")
        t = time.perf_counter()  # wall time, as SCALE-Sim's was measured
        for _ in range(5):
            sim.simulate(wl, hw, s, fidelity="tile")
        ours = (time.perf_counter() - t) / 5
        rows.append({"id": c["id"], "ours_s": ours, "scalesim_s": c["wall_s"], "speedup": c["wall_s"] / ours})
    sp = [r["speedup"] for r in rows]
    return {"source": source, "cases": len(rows), "median_speedup": statistics.median(sp),
            "min_speedup": min(sp), "rows": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    p.add_argument("--batch", type=int, default=200_000)
    p.add_argument("--hw", default="edge-npu")
    a = p.parse_args(argv)
    hw = sim.load_hw(a.hw)
    rng = np.random.default_rng(0)
    rn50 = model_layers("resnet50")
    bert = model_layers("bert_base")
    out = {
        "config": {"hw": hw.name, "loadavg_1min_at_start": os.getloadavg()[0], "hw_fingerprint": hw.fingerprint(), "batch": a.batch,
                   "numpy": np.__version__, "python": sys.version.split()[0]},
        "analytical": bench_analytical(rn50[:8], hw, a.batch, rng),
        "analytical_small_batches": bench_small_batches(rn50[:8], hw, rng=rng),
        "tile_long_walk": bench_long_tile_walk(hw),
        "tile_resnet50": bench_tile(rn50, hw),
        "tile_bert_base": bench_tile(bert, hw),
        "vs_scalesim": bench_vs_scalesim(),
    }
    if a.json:
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    an, tr, tb, vs = out["analytical"], out["tile_resnet50"], out["tile_bert_base"], out["vs_scalesim"]
    sb, lw = out["analytical_small_batches"], out["tile_long_walk"]
    print(f"hardware {hw.name}; load average at start {out['config']['loadavg_1min_at_start']:.1f}; rates per CPU second")
    print(f"analytical: {an['median_evals_per_s']:,.0f} schedule evaluations/s (median over {an['layers']} "
          f"ResNet-50 layers, batches of {an['batch']:,}; min {an['min_evals_per_s']:,.0f})")
    for b in ("batch_1", "batch_32"):
        print(f"analytical, {b.replace('_', ' of ')}: {sb[b]['median_cpu_us_per_call']:,.0f} us CPU per call "
              f"(median over {sb['layers']} layers; {sb[b]['median_wall_us_per_call']:,.0f} us wall)")
    print(f"tile, one long walk: {lw['n_tiles']:,} tiles in {lw['cpu_s']:.3f} s CPU")
    print(f"tile, ResNet-50 ({tr['layers']} layers): median {tr['median_sims_per_s']:,.0f} sims/s, slowest "
          f"{tr['slowest_sims_per_s']:,.0f} sims/s (median {tr['median_tiles']} tiles; "
          f"{tr['median_sims_per_wall_s']:,.0f} per wall second)")
    print(f"tile, BERT-base ({tb['layers']} layers): median {tb['median_sims_per_s']:,.0f} sims/s, slowest "
          f"{tb['slowest_sims_per_s']:,.0f} sims/s")
    if vs:
        print(f"vs SCALE-Sim ({vs['source']}): median {vs['median_speedup']:,.0f}x faster per layer, "
              f"min {vs['min_speedup']:,.0f}x over {vs['cases']} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
