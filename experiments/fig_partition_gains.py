"""Partition gains: end-to-end latency of the tuned plan (kernel tuning + partition search) against
greedy BYOC (offload every supported op, maximal merge), all-on-host and default schedules, per
built-in model and preset.

    python experiments/fig_partition_gains.py [--presets edge-npu tpu-v1-like] [--trials N] [--models ...]

Writes experiments/results/fig_partition_gains/: config.json, results.json (per model and preset:
latency and energy of the plan and of every baseline), speedup.png (speedup over greedy BYOC) and
table.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(models, presets, trials, seed) -> list[dict]:
    import sim
    import tuner
    from partition.models import get
    out = []
    for name in models:
        g = get(name)
        for preset in presets:
            hw = sim.load_hw(preset)
            t0 = time.perf_counter()
            plan = tuner.tune(g, hw, trials=trials, seed=seed, progress=False)
            row = {"model": name, "preset": preset, "latency_s": plan.latency_s, "energy_j": plan.energy_j,
                   "tune_s": time.perf_counter() - t0,
                   "baselines": {k: {"latency_s": c.latency_s, "energy_j": c.energy_j}
                                 for k, c in plan.baselines.items()}}
            row["speedup"] = {k: v["latency_s"] / plan.latency_s for k, v in row["baselines"].items()}
            out.append(row)
            print(f"{name:>13} {preset:>12}: {plan.latency_s * 1e3:9.3f} ms, " + ", ".join(
                f"{k} x{v:.2f}" for k, v in row["speedup"].items()), flush=True)
    return out


def figure(rows, presets, path: Path) -> None:
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    models = list(dict.fromkeys(r["model"] for r in rows))
    fig = Figure(figsize=(8.5, 3.6), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    w = 0.8 / len(presets)
    x = np.arange(len(models))
    for j, p in enumerate(presets):
        v = [next((r["speedup"].get("greedy_byoc", np.nan) for r in rows
                   if r["model"] == m and r["preset"] == p), np.nan) for m in models]
        ax.bar(x + (j - (len(presets) - 1) / 2) * w, v, w, label=p)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, models, rotation=20, fontsize=8)
    ax.set_ylabel("speedup over greedy BYOC")
    ax.set_yscale("log")
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    top = max((r["speedup"].get("greedy_byoc", 1.0) for r in rows), default=1.0)
    ax.yaxis.set_major_locator(FixedLocator([t for t in (1, 1.25, 1.5, 2, 3, 4, 6, 8) if t <= top * 1.05]))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.grid(axis="y", alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.savefig(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=None, help="default: every built-in model")
    ap.add_argument("--presets", nargs="+", default=["edge-npu", "tpu-v1-like"])
    ap.add_argument("--trials", type=int, default=None, help="tuning budget per model (default: tune's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "experiments/results/fig_partition_gains"))
    a = ap.parse_args(argv)
    if a.models is None:
        from partition.models import list_models
        a.models = [m.name for m in list_models()]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(vars(a), indent=2) + "\n")
    rows = measure(a.models, a.presets, a.trials, a.seed)
    (out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    figure(rows, a.presets, out / "speedup.png")
    md = ["| model | preset | tuned ms | greedy BYOC ms | all host ms | default schedules ms | vs greedy | vs host |",
          "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = r["baselines"]
        md.append(f"| {r['model']} | {r['preset']} | {r['latency_s'] * 1e3:.3g} | "
                  f"{b.get('greedy_byoc', {}).get('latency_s', float('nan')) * 1e3:.3g} | "
                  f"{b.get('all_host', {}).get('latency_s', float('nan')) * 1e3:.3g} | "
                  f"{b.get('default_schedules', {}).get('latency_s', float('nan')) * 1e3:.3g} | "
                  f"{r['speedup'].get('greedy_byoc', float('nan')):.2f}x | {r['speedup'].get('all_host', float('nan')):.2f}x |")
    (out / "table.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
