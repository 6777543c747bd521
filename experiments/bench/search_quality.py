"""Search quality: the tuner against the exhaustive optimum of the schedule space, and against random
search and evolution without the cost model at equal budgets.

    python experiments/bench/search_quality.py [--layers FILE] [--hw PRESET ...] [--budget N] [--json]

Per layer and hardware preset:

- optimum: every legal schedule of ``tuner.ScheduleSpace`` costed with the analytical simulator,
  the ``--top`` best re-measured with the measurer (tile-level simulator); the fastest of those;
- tuned: ``tuner.tune_kernels`` as it runs by default (evolution ranked by the analytical prior or the
  learned model, as its model-use policy decides; ``--model-use`` forces either) with ``--budget``
  measurements;
- random / no_model: ``RandomSearch`` and ``MeasuredEvolution`` with the same budget;
- measurements_to_2pct: measurements the tuner needed to come within 2 % of the optimum;
- reach_random: measurements the tuner needed to match random search's final result, and
  ``fewer_x`` = budget / reach_random.

A layers file is a JSON list of ``{"name", "op": "conv2d"|"gemm", ...}`` with the keyword arguments
of ``sim.Workload.conv2d`` / ``sim.Workload.gemm``. ``--json`` prints one object with ``layers`` (one
entry per layer and preset) and ``summary``, plus the full configuration under ``config``.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import numpy as np

import sim
from tuner import ScheduleSpace, TileMeasurer, tune_kernels

# >= 12 layers from ResNet-50, MobileNetV2 and BERT-base (batch 1, sequence 128).
DEFAULT_LAYERS = [
    {"name": "resnet50.conv1", "op": "conv2d", "n": 1, "c": 3, "h": 224, "w": 224, "k": 64, "r": 7, "s": 7, "stride": 2, "pad": 3},
    {"name": "resnet50.res2.1x1a", "op": "conv2d", "n": 1, "c": 64, "h": 56, "w": 56, "k": 64, "r": 1, "s": 1},
    {"name": "resnet50.res2.3x3", "op": "conv2d", "n": 1, "c": 64, "h": 56, "w": 56, "k": 64, "r": 3, "s": 3, "pad": 1},
    {"name": "resnet50.res2.1x1b", "op": "conv2d", "n": 1, "c": 64, "h": 56, "w": 56, "k": 256, "r": 1, "s": 1},
    {"name": "resnet50.res3.3x3s2", "op": "conv2d", "n": 1, "c": 128, "h": 56, "w": 56, "k": 128, "r": 3, "s": 3, "stride": 2, "pad": 1},
    {"name": "resnet50.res4.3x3", "op": "conv2d", "n": 1, "c": 256, "h": 14, "w": 14, "k": 256, "r": 3, "s": 3, "pad": 1},
    {"name": "resnet50.res5.1x1b", "op": "conv2d", "n": 1, "c": 512, "h": 7, "w": 7, "k": 2048, "r": 1, "s": 1},
    {"name": "resnet50.fc", "op": "gemm", "m": 1, "n": 1000, "k": 2048},
    {"name": "mobilenet_v2.dw3x3.112", "op": "conv2d", "n": 1, "c": 32, "h": 112, "w": 112, "k": 32, "r": 3, "s": 3, "pad": 1, "groups": 32},
    {"name": "mobilenet_v2.expand.112", "op": "conv2d", "n": 1, "c": 16, "h": 112, "w": 112, "k": 96, "r": 1, "s": 1},
    {"name": "mobilenet_v2.dw3x3s2.56", "op": "conv2d", "n": 1, "c": 144, "h": 56, "w": 56, "k": 144, "r": 3, "s": 3, "stride": 2, "pad": 1, "groups": 144},
    {"name": "mobilenet_v2.project.14", "op": "conv2d", "n": 1, "c": 384, "h": 14, "w": 14, "k": 64, "r": 1, "s": 1},
    {"name": "mobilenet_v2.head", "op": "conv2d", "n": 1, "c": 320, "h": 7, "w": 7, "k": 1280, "r": 1, "s": 1},
    {"name": "bert_base.qkv", "op": "gemm", "m": 128, "n": 2304, "k": 768},
    {"name": "bert_base.attn_out", "op": "gemm", "m": 128, "n": 768, "k": 768},
    {"name": "bert_base.ffn1", "op": "gemm", "m": 128, "n": 3072, "k": 768},
    {"name": "bert_base.ffn2", "op": "gemm", "m": 128, "n": 768, "k": 3072},
    {"name": "bert_base.scores", "op": "gemm", "m": 128, "n": 128, "k": 64, "batch": 12},
    {"name": "bert_base.context", "op": "gemm", "m": 128, "n": 64, "k": 128, "batch": 12},
]
DEFAULT_PRESETS = ("edge-npu", "cloud-npu")


class LayersError(ValueError):
    pass


def workload_of(layer: dict) -> sim.Workload:
    if not isinstance(layer, dict) or "name" not in layer or "op" not in layer:
        raise LayersError(f"each layer must be an object with 'name' and 'op', got {layer!r}")
    args = {k: v for k, v in layer.items() if k not in ("name", "op")}
    ctor = {"conv2d": sim.Workload.conv2d, "gemm": sim.Workload.gemm}.get(layer["op"])
    if ctor is None:
        raise LayersError(f"layer {layer['name']}: op must be 'conv2d' or 'gemm', got {layer['op']!r}")
    try:
        return ctor(**args)
    except TypeError as e:
        raise LayersError(f"layer {layer['name']}: {e}") from None


def read_layers(path: str) -> list[dict]:
    try:
        with open(path) as f:
            layers = json.load(f)
    except OSError as e:
        raise LayersError(f"cannot read layers file {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise LayersError(f"layers file {path} is not JSON: {e.msg} (line {e.lineno})") from None
    if not isinstance(layers, list) or not layers:
        raise LayersError(f"layers file {path} must hold a non-empty JSON list")
    for layer in layers:
        workload_of(layer)
    return layers


def exhaustive_optimum(wl: sim.Workload, hw: sim.HardwareConfig, top: int, measurer) -> tuple[float, int]:
    """(best measured cycles among the analytical top ``top``, legal schedules enumerated)."""
    space = ScheduleSpace.build(wl, hw)
    best_cost = np.zeros(0)
    best_genes = np.zeros((0, 7), dtype=np.int64)
    n = 0
    for chunk in space.enumerate():
        cost = sim.simulate_batch(wl, hw, space.arrays(chunk))["total_cycles"]
        n += len(chunk)
        cost = np.concatenate([best_cost, cost])
        genes = np.concatenate([best_genes, chunk])
        keep = np.lexsort((space.encode(genes), cost))[:top]
        best_cost, best_genes = cost[keep], genes[keep]
    measured = [measurer.measure(wl, hw, s) for s in space.schedules(best_genes)]
    return min(measured), n


def first_reach(trace, target: float) -> int | None:
    """1-based index of the first measurement at or below ``target``."""
    for i, c in enumerate(trace):
        if c <= target:
            return i + 1
    return None


def run_layer(layer: dict, hw: sim.HardwareConfig, budget: int, top: int, seed: int, model_use: str = "auto") -> dict:
    wl = workload_of(layer)
    m = TileMeasurer()
    t0 = time.perf_counter()
    opt, enumerated = exhaustive_optimum(wl, hw, top, m)
    t1 = time.perf_counter()
    runs = {}
    for strat in ("evolution", "random", "measured-evolution"):
        r = tune_kernels([wl], hw, trials=budget, seed=seed, measurer=m, progress=False, strategy=strat,
                         model_use=model_use)
        runs[strat] = r.tasks[0]
    t2 = time.perf_counter()
    tuned, rnd, nom = runs["evolution"], runs["random"], runs["measured-evolution"]
    reach = first_reach(tuned.trace, rnd.cycles)
    return {"name": layer["name"], "hw": hw.name, "workload": wl.key, "space_size": enumerated,
            "optimum_cycles": opt, "tuned_cycles": tuned.cycles, "measurements": tuned.measurements,
            "random_cycles": rnd.cycles, "no_model_cycles": nom.cycles,
            "tuned_ratio": tuned.cycles / opt, "random_ratio": rnd.cycles / opt, "no_model_ratio": nom.cycles / opt,
            "measurements_to_2pct": first_reach(tuned.trace, 1.02 * opt),
            "random_measurements_to_2pct": first_reach(rnd.trace, 1.02 * opt),
            "no_model_measurements_to_2pct": first_reach(nom.trace, 1.02 * opt),
            "reach_random": reach, "fewer_x": (rnd.measurements / reach) if reach else None,
            "seconds": {"exhaustive": round(t1 - t0, 2), "searches": round(t2 - t1, 2)}}


def summarize(rows: list[dict], budget: int) -> dict:
    fewer = [r["fewer_x"] for r in rows if r["fewer_x"] is not None]
    to2 = [r["measurements_to_2pct"] for r in rows]
    return {"cases": len(rows),
            "all_tuned_within_2pct": all(r["tuned_ratio"] <= 1.02 for r in rows),
            "worst_tuned_ratio": max(r["tuned_ratio"] for r in rows),
            "geomean_tuned_ratio": math.exp(statistics.fmean(math.log(r["tuned_ratio"]) for r in rows)),
            "geomean_random_ratio": math.exp(statistics.fmean(math.log(r["random_ratio"]) for r in rows)),
            "geomean_no_model_ratio": math.exp(statistics.fmean(math.log(r["no_model_ratio"]) for r in rows)),
            "max_measurements_to_2pct": None if None in to2 else max(to2),
            "median_measurements_to_2pct": None if None in to2 else statistics.median(to2),
            "cases_never_within_2pct": sum(x is None for x in to2),
            "min_fewer_x": min(fewer) if len(fewer) == len(rows) else None,
            "median_fewer_x": statistics.median(fewer) if fewer else None,
            "cases_fewer_ge_5x": sum(f >= 5 for f in fewer),
            "budget": budget}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", help="JSON list of layers (default: built-in ResNet-50, MobileNetV2, BERT-base layers)")
    p.add_argument("--hw", action="append", help="hardware preset or file (repeatable; default: edge-npu and cloud-npu)")
    p.add_argument("--budget", type=int, default=200, help="measurements per search (default 200)")
    p.add_argument("--top", type=int, default=32, help="analytical best re-measured for the optimum (default 32)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-use", choices=("auto", "always", "never"), default="auto",
                   help="the tuner's learned-model policy (default: auto, as tune_kernels)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    try:
        if a.budget < 1 or a.top < 1:
            raise LayersError("--budget and --top must be >= 1")
        layers = read_layers(a.layers) if a.layers else DEFAULT_LAYERS
        hws = [sim.load_hw(h) for h in (a.hw or DEFAULT_PRESETS)]
    except ValueError as e:
        print(f"search_quality: error: {e}", file=sys.stderr)
        return 2
    rows = []
    for hw in hws:
        for layer in layers:
            row = run_layer(layer, hw, a.budget, a.top, a.seed, a.model_use)
            rows.append(row)
            if not a.json:
                print(f"{hw.name:10s} {row['name']:26s} opt {row['optimum_cycles']:>11.0f}  tuned x{row['tuned_ratio']:.4f} "
                      f"(2% after {row['measurements_to_2pct']})  random x{row['random_ratio']:.4f}  "
                      f"no-model x{row['no_model_ratio']:.4f}  reach-random {row['reach_random']} "
                      f"({row['fewer_x'] and round(row['fewer_x'], 1)}x fewer)", flush=True)
    summary = summarize(rows, a.budget)
    config = {"layers": layers, "hw": [h.name for h in hws], "hw_fingerprints": [h.fingerprint() for h in hws],
              "budget": a.budget, "top": a.top, "seed": a.seed, "measurer": "tile", "model_use": a.model_use}
    if a.json:
        json.dump({"layers": rows, "summary": summary, "config": config}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
