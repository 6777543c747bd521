"""Which XGBoost objective should the cost model use? Leave-one-layer-out comparison on tile-level
measurements.

    python experiments/bench/cost_model_objectives.py [--per-layer N] [--json]

For each benchmark layer (experiments/bench/search_quality.py) on edge-npu and cloud-npu, N schedules
are measured with the tile-level simulator: half uniform samples of the space, half the analytical
simulator's best (the region the search spends its measurements in). For each held-out (layer,
hardware) a model trained on all the others predicts it; the scores are

- pairwise: share of pairs of held-out schedules put in the measured order;
- top1_regret: measured cycles of the predicted-best schedule / the best measured, minus 1;
- top8_regret: the same for the best of the predicted top 8 (one tuning round measures 8).

Compared: the analytical prior alone, ``regression`` (log cycles) and ``rank`` (pairwise), each with
the analytical prior as base margin. Prints the means and writes the configuration with them.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sim  # noqa: E402
from search_quality import DEFAULT_LAYERS, workload_of  # noqa: E402
from tuner import CostModel, CostModelConfig, ScheduleSpace, TileMeasurer  # noqa: E402
from tuner.search.cost_model import group_id  # noqa: E402
from tuner.search.features import featurize  # noqa: E402


def collect(per_layer: int, seed: int):
    rng = np.random.default_rng(seed)
    m = TileMeasurer()
    data = []
    for hw_name in ("edge-npu", "cloud-npu"):
        hw = sim.load_hw(hw_name)
        for layer in DEFAULT_LAYERS:
            wl = workload_of(layer)
            sp = ScheduleSpace.build(wl, hw)
            pool = np.unique(sp.encode(sp.sample(20 * per_layer, rng)))
            genes = sp.decode(pool)
            X, prior = featurize(sp, genes)
            top = np.argsort(prior, kind="stable")[: per_layer // 2]
            rand = rng.choice(np.setdiff1d(np.arange(len(genes)), top), per_layer - len(top), replace=False)
            idx = np.concatenate([top, rand])
            y = np.log([m.measure(wl, hw, s) for s in sp.schedules(genes[idx])])
            data.append({"name": f"{hw_name}/{layer['name']}", "X": X[idx], "prior": prior[idx], "y": y,
                         "g": np.full(len(idx), group_id(wl.key, hw.fingerprint()), dtype=np.int64)})
    return data


def scores(pred, y):
    agree = np.mean(np.sign(pred[:, None] - pred[None, :]) == np.sign(y[:, None] - y[None, :]))
    order = np.argsort(pred, kind="stable")
    best = y.min()
    return {"pairwise": float(agree), "top1_regret": float(np.exp(y[order[0]] - best) - 1),
            "top8_regret": float(np.exp(y[order[:8]].min() - best) - 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-layer", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    data = collect(a.per_layer, a.seed)
    results: dict[str, list[dict]] = {"prior": [], "regression": [], "rank": []}
    for i, held in enumerate(data):
        rest = [d for j, d in enumerate(data) if j != i]
        cat = lambda k: np.concatenate([d[k] for d in rest])  # noqa: E731
        results["prior"].append(scores(held["prior"], held["y"]))
        for obj in ("regression", "rank"):
            model = CostModel(CostModelConfig(objective=obj)).fit(cat("X"), cat("y"), cat("g"), cat("prior"))
            results[obj].append(scores(model.predict(held["X"], held["prior"]), held["y"]))
    summary = {k: {m: statistics.fmean(r[m] for r in v) for m in ("pairwise", "top1_regret", "top8_regret")}
               for k, v in results.items()}
    for k in results:
        summary[k]["worst_top8_regret"] = max(r["top8_regret"] for r in results[k])
    out = {"summary": summary, "per_case": {k: [dict(name=d["name"], **r) for d, r in zip(data, v)]
                                            for k, v in results.items()},
           "config": {"per_layer": a.per_layer, "seed": a.seed, "layers": [l["name"] for l in DEFAULT_LAYERS],
                      "hw": ["edge-npu", "cloud-npu"], "model": CostModelConfig().__dict__}}
    if a.json:
        json.dump(out, sys.stdout, indent=2)
        print()
    else:
        for k, v in summary.items():
            print(f"{k:10s} " + "  ".join(f"{m} {x:.4f}" for m, x in v.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
