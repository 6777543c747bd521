"""Does the learned cost model pay for its time? Time to within 1 % of the best schedule, in two
measurement regimes, for five ways of searching (issue 13 item 3).

Regimes (the measured cycles are the same in both: the tile-level simulator):
- ``tile``: the built-in ``TileMeasurer``, in process (about a millisecond per measurement);
- ``external``: ``experiments/adapters/tile_measurer.py`` through ``CommandMeasurer``, a process per
  measurement (a tenth of a second or more: the bench prints the mean it measured and checks it is
  at least 50 ms), standing in for an RTL or cycle-accurate simulator.

Strategies, each given the same budget of measurements per (layer, seed):
- ``random``: uniform samples of the legal space;
- ``no-model``: evolution with measurement as the fitness (``MeasuredEvolution``);
- ``prior``: Ansor-like evolution ranked by the analytical prior alone (``model_use="never"``);
- ``model``: the same, with XGBoost retrained every round and ranking (``model_use="always"``);
- ``auto``: the tuner's default policy (``tuner.search.policy``), which decides from measured time
  and from how well the prior ranks what was measured.

The best known per layer is the fastest of the exhaustive analytical top ``--top`` re-measured
(experiments/bench/search_quality.py) and everything any run measured. Time is wall time from the
start of ``tune_kernels`` (space construction, generation, scoring, training and measurement all
count) to the first measurement within 1 % of it; a run that never gets there counts as its whole
duration and is flagged. Medians over layers x seeds.

    python experiments/bench/model_regimes.py [--regimes tile external] [--seeds 0 1 2]
        [--layers NAME ...] [--hw edge-npu] [--budget-tile 128] [--budget-external 40] [--json] [--out DIR]

Writes config.json, runs.json (every run: its trace of cycles and times) and table.md to DIR
(default experiments/results/model_regimes/).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import sim
from tuner import CommandMeasurer, TileMeasurer, tune_kernels

from search_quality import DEFAULT_LAYERS, exhaustive_optimum, workload_of

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "experiments" / "adapters" / "tile_measurer.py"
STRATEGIES = {  # name -> (search strategy, model use)
    "random": ("random", "never"),
    "no-model": ("measured-evolution", "never"),
    "prior": ("evolution", "never"),
    "model": ("evolution", "always"),
    "auto": ("evolution", "auto"),
}
DEFAULT_BENCH_LAYERS = ("resnet50.res2.3x3", "mobilenet_v2.expand.112", "bert_base.ffn2", "resnet50.res4.3x3")


def measurer_for(regime: str):
    if regime == "tile":
        return TileMeasurer()
    return CommandMeasurer((sys.executable, str(ADAPTER)), timeout_s=120, label="tile-subprocess")


def time_to(trace, times, target: float, end_s: float) -> tuple[float, int | None]:
    """(seconds to the first measurement <= target, its 1-based index); (end_s, None) if never."""
    for k, (c, t) in enumerate(zip(trace, times)):
        if c <= target:
            return t, k + 1
    return end_s, None


def run(layer: dict, hw, regime: str, strategy: str, seed: int, budget: int) -> dict:
    strat, use = STRATEGIES[strategy]
    r = tune_kernels([workload_of(layer)], hw, trials=budget, seed=seed, measurer=measurer_for(regime),
                     progress=False, strategy=strat, model_use=use)
    t = r.tasks[0]
    return {"layer": layer["name"], "regime": regime, "strategy": strategy, "seed": seed, "budget": budget,
            "trace": list(t.trace), "trace_s": list(t.trace_s), "wall_s": r.wall_s,
            "timing": r.timing.to_dict(), "learned_model": r.learned_model}


def summarize(runs: list[dict], best: dict[str, float]) -> list[dict]:
    rows = []
    for regime in dict.fromkeys(r["regime"] for r in runs):
        for strategy in STRATEGIES:
            mine = [r for r in runs if r["regime"] == regime and r["strategy"] == strategy]
            if not mine:
                continue
            hits = [time_to(r["trace"], r["trace_s"], 1.01 * best[r["layer"]], r["wall_s"]) for r in mine]
            meas = sum(r["timing"]["measurements"] for r in mine)
            rows.append({
                "regime": regime, "strategy": strategy, "runs": len(mine),
                "reached": sum(k is not None for _, k in hits),
                "median_s_to_1pct": statistics.median(s for s, _ in hits),
                "median_measurements_to_1pct": statistics.median(k if k is not None else r["budget"] + 1
                                                                 for (_, k), r in zip(hits, mine)),
                "median_final_ratio": statistics.median(min(r["trace"]) / best[r["layer"]] for r in mine),
                "mean_run_s": statistics.fmean(r["wall_s"] for r in mine),
                "ms_per_measurement": 1e3 * sum(r["timing"]["measure_s"] for r in mine) / max(meas, 1),
                "train_share": sum(r["timing"]["train_s"] for r in mine) / max(sum(r["wall_s"] for r in mine), 1e-12),
                "fits": sum(r["timing"]["fits"] for r in mine),
            })
    return rows


def table(rows: list[dict]) -> str:
    out = ["| regime | strategy | reached 1 % | median s to 1 % | median measurements to 1 % | "
           "median final / best | mean run s | ms per measurement | training share | fits |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['regime']} | {r['strategy']} | {r['reached']}/{r['runs']} | {r['median_s_to_1pct']:.3f} | "
                   f"{r['median_measurements_to_1pct']:g} | {r['median_final_ratio']:.4f} | {r['mean_run_s']:.2f} | "
                   f"{r['ms_per_measurement']:.1f} | {100 * r['train_share']:.1f} % | {r['fits']} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--regimes", nargs="+", default=["tile", "external"], choices=["tile", "external"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--layers", nargs="+", default=list(DEFAULT_BENCH_LAYERS))
    ap.add_argument("--hw", default="edge-npu")
    ap.add_argument("--budget-tile", type=int, default=128)
    ap.add_argument("--budget-external", type=int, default=40)
    ap.add_argument("--top", type=int, default=32)
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES))
    ap.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "model_regimes")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    by_name = {L["name"]: L for L in DEFAULT_LAYERS}
    unknown = [n for n in a.layers if n not in by_name]
    if unknown:
        print(f"model_regimes: error: unknown layer(s) {', '.join(unknown)}; known: {', '.join(by_name)}",
              file=sys.stderr)
        return 2
    hw = sim.load_hw(a.hw)
    layers = [by_name[n] for n in a.layers]
    best = {L["name"]: exhaustive_optimum(workload_of(L), hw, a.top, TileMeasurer())[0] for L in layers}
    runs = []
    t0 = time.perf_counter()
    for regime in a.regimes:
        budget = a.budget_tile if regime == "tile" else a.budget_external
        for L in layers:
            for seed in a.seeds:
                for s in a.strategies:
                    r = run(L, hw, regime, s, seed, budget)
                    runs.append(r)
                    print(f"  {regime:8s} {L['name']:26s} seed {seed} {s:9s} best x{min(r['trace']) / best[L['name']]:.4f} "
                          f"in {r['wall_s']:.2f} s ({r['timing']['fits']} fits)", file=sys.stderr, flush=True)
    for r in runs:  # the best known includes what any run found
        best[r["layer"]] = min(best[r["layer"]], min(r["trace"]))
    rows = summarize(runs, best)
    ext = [r for r in rows if r["regime"] == "external"]
    config = {"hw": hw.name, "hw_fingerprint": hw.fingerprint(), "layers": layers, "seeds": a.seeds,
              "budget_tile": a.budget_tile, "budget_external": a.budget_external, "top": a.top,
              "strategies": {s: STRATEGIES[s] for s in a.strategies}, "regimes": a.regimes,
              "external_command": [os.path.relpath(sys.executable), str(ADAPTER.relative_to(ROOT))],
              "python": platform.python_version(), "cpus": os.cpu_count(), "bench_s": time.perf_counter() - t0,
              "best_cycles": best}
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    (a.out / "runs.json").write_text(json.dumps({"runs": runs, "summary": rows}) + "\n")
    md = table(rows)
    (a.out / "table.md").write_text(md + "\n")
    if a.json:
        print(json.dumps({"config": config, "summary": rows}, indent=1))
    else:
        print(md)
    slow_enough = all(r["ms_per_measurement"] >= 50 for r in ext)
    if ext and not slow_enough:
        print("model_regimes: the external measurer took < 50 ms per call", file=sys.stderr)
    return 0 if slow_enough or not ext else 1


if __name__ == "__main__":
    sys.exit(main())
