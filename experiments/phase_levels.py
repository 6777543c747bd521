"""The machine's phases as ``calibrate --host`` reads them, against models' latencies (issue 19).

Loops over a few built-in models and calibration probes for ``--seconds``: before each model, one
reading of the phase probe (``calibrate_context.phase_reading``: its latency on one intra-op thread
and with the default options), then a block of the model's plain runs (``_plain_blocks``, as the
calibration times one). Prints how the probe's default latency splits into levels against its
lowest reading (fast: within ``FAST_GAP``; middle: within 1.2x; slow: above), how long each level
lasts, and each model's median latency at the middle and slow levels over its fast-level median:
whether one factor could bring a slow block back to the fast phase (docs/TUNING.md, ``PhaseGate``);
and the exponent by which a block's latency follows the probe's (``PHASE_EXPONENT``), with the
spread of the blocks at each level before and after that correction; and each model's own
exponent, with the spread were each model corrected by its own (what one exponent cannot take out).

    python experiments/phase_levels.py --seconds 300 [--jsonl readings.jsonl] [--json]
    python experiments/phase_levels.py --from experiments/results/phase_levels/readings.jsonl

Run it with nothing else on the machine.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODELS = ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "bert_tiny", "bert_small",
          "byoc_demo", "probe:64x56x56", "probe:512x7x7", "probe:movement:128x28x28", "probe:dense:4096x4096",
          "probe:grouped:64x56x56", "probe:depthwise:128x28x28", "probe:classifier:1280x1000x8")
MIDDLE = 1.2   # readings up to this over the floor (and above FAST_GAP) are the middle level


def level(default_s: float, floor_s: float) -> str:
    from tuner.calibrate_context import in_fast_phase
    return "fast" if in_fast_phase(default_s, floor_s) else "middle" if default_s <= MIDDLE * floor_s else "slow"


def summary(readings: list[dict]) -> dict:
    """Levels, how long they last (seconds) and each model's latency per level over its fast one."""
    floor = min(r["default_s"] for r in readings)
    levels = [level(r["default_s"], floor) for r in readings]
    per = (readings[-1]["t"] - readings[0]["t"]) / max(1, len(readings) - 1)
    spans: dict[str, list[float]] = {"fast": [], "middle": [], "slow": []}
    for k, g in itertools.groupby(levels):
        spans[k].append(len(list(g)) * per)
    models: dict[str, dict[str, list[float]]] = {}
    for r, lv in zip(readings, levels):
        models.setdefault(r["model"], {"fast": [], "middle": [], "slow": []})[lv].append(r["model_s"])
    ratios = {m: {lv: (float(np.median(v[lv]) / np.median(v["fast"])) if v[lv] and v["fast"] else None)
                  for lv in ("middle", "slow")} | {"fast_s": float(np.median(v["fast"])) if v["fast"] else None}
              for m, v in models.items()}
    # a block over its model's fast median against the probe over its floor, both in logs: the
    # least-squares exponent through (1, 1) (calibrate_context.PHASE_EXPONENT), and each level's
    # blocks between the 10th and 90th percentile, as measured and brought to the fast phase by it
    pairs = [(np.log(r["default_s"] / floor), np.log(r["model_s"] / ratios[r["model"]]["fast_s"]), lv, r["model"])
             for r, lv in zip(readings, levels) if ratios[r["model"]]["fast_s"]]
    x, y = (np.array([p[i] for p in pairs]) for i in (0, 1))
    exponent = float(x @ y / (x @ x)) if len(pairs) and x @ x > 0 else None

    # each model's own exponent, and the spread were each corrected by its own: how much of the
    # spread one exponent for all models leaves is the models' differing slowdowns
    names = np.array([p[3] for p in pairs])
    own = np.zeros(len(pairs))
    for m in set(names):
        i = names == m
        e_m = float(x[i] @ y[i] / (x[i] @ x[i])) if x[i] @ x[i] > 0 else 0.0
        ratios[m]["exponent"] = e_m
        own[i] = e_m

    def spread(v):
        return [float(np.exp(np.percentile(v, 10))), float(np.exp(np.percentile(v, 90)))] if len(v) else None
    by_level = {lv: np.array([p[2] == lv for p in pairs], dtype=bool) for lv in ("fast", "middle", "slow")}
    return {"readings": len(readings), "floor_s": floor, "exponent": exponent,
            "spread": {lv: spread(y[m]) for lv, m in by_level.items()},
            "spread_corrected": {lv: spread(y[m] - (exponent or 0.0) * x[m]) for lv, m in by_level.items()},
            "spread_own": {lv: spread(y[m] - own[m] * x[m]) for lv, m in by_level.items()},
            "share": {k: levels.count(k) / len(levels) for k in spans},
            "mean_span_s": {k: float(np.mean(v)) if v else None for k, v in spans.items()},
            "max_span_s": {k: float(max(v)) if v else None for k, v in spans.items()},
            "models": ratios}


def measure(seconds: float, jsonl: str | None) -> list[dict]:
    """The readings and model latencies of ``seconds`` of the loop (each also written to ``jsonl``)."""
    import onnxruntime as ort
    from tuner.calibrate_context import _plain_blocks, exported, phase_probe, phase_reading
    from tuner.cli.cmd_calibrate import host_graphs
    ort.set_default_logger_severity(3)
    graphs = [(label, exported(g)) for label, g in host_graphs(None) if label in MODELS]
    probe = phase_probe()
    out = open(jsonl, "w") if jsonl else None
    readings: list[dict] = []
    end = time.time() + seconds
    while time.time() < end:
        for label, (data, inputs) in graphs:
            r = phase_reading(model=probe)
            m = float(np.median(_plain_blocks(data, inputs, 3, 0, 0.2, 7, 200, 1)[0]))
            readings.append({"t": time.time(), "model": label, "one_s": r.one_s, "default_s": r.default_s,
                             "model_s": m})
            if out:
                out.write(json.dumps(readings[-1]) + "\n")
    return readings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--jsonl", help="also write every reading here")
    ap.add_argument("--from", dest="src", help="summarise the readings of an earlier run (its --jsonl) instead")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    readings = [json.loads(line) for line in open(a.src)] if a.src else measure(a.seconds, a.jsonl)
    s = summary(readings)
    if a.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"{s['readings']} readings; the probe's lowest default latency {s['floor_s'] * 1e3:.3f} ms")
    for k in ("fast", "middle", "slow"):
        print(f"  {k:6s} {s['share'][k]:5.1%} of readings, runs of {s['mean_span_s'][k] or 0:.1f} s on average, "
              f"at most {s['max_span_s'][k] or 0:.0f} s")
    if s["exponent"] is not None:
        print(f"a block over its model's fast median ~ (the probe over its floor) ** {s['exponent']:.2f}; "
              "blocks between the 10th and 90th percentile, as measured -> brought to the fast phase:")
        for k in ("fast", "middle", "slow"):
            a_, b_ = s["spread"][k] or (float("nan"),) * 2, s["spread_corrected"][k] or (float("nan"),) * 2
            c_ = s["spread_own"][k] or (float("nan"),) * 2
            print(f"  {k:6s} {a_[0]:.2f}-{a_[1]:.2f}x -> {b_[0]:.2f}-{b_[1]:.2f}x "
                  f"(each model by its own exponent: {c_[0]:.2f}-{c_[1]:.2f}x)")
    print(f"{'model':30s} {'fast ms':>8s} {'middle':>7s} {'slow':>7s} {'exponent':>8s}")
    for m, v in s["models"].items():
        f = lambda x: f"{x:6.2f}x" if x else "     - "  # noqa: E731
        e = f"{v['exponent']:8.2f}" if "exponent" in v else "       -"
        print(f"{m:30s} {(v['fast_s'] or float('nan')) * 1e3:8.3f} {f(v['middle'])} {f(v['slow'])} {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
