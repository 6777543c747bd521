"""Search efficiency: the tuner (evolution ranked by the analytical prior or the learned model, as its
policy decides) vs random search vs evolution without the cost model,
at equal measurement budgets, against the exhaustive optimum per layer. Runs the tuner engineer's
benchmark (experiments/bench/search_quality.py --json) and draws its result.

    python experiments/fig_search_efficiency.py [--hw edge-npu] [--budget N] [extra search_quality args]

Writes experiments/results/fig_search_efficiency/: config.json, search_quality.json (the benchmark's
output as is), search_efficiency.png (cycles / optimum per layer for each strategy) and table.md.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "experiments/bench/search_quality.py"
STRATEGIES = (("tuned_cycles", "tuner (default model policy)"), ("no_model_cycles", "evolution, no model"),
              ("random_cycles", "random search"))


def figure(data: dict, path: Path) -> None:
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    layers = data["layers"]
    fig = Figure(figsize=(max(6.0, 0.45 * len(layers) + 2), 3.8), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    x = np.arange(len(layers))
    w = 0.8 / len(STRATEGIES)
    for j, (key, name) in enumerate(STRATEGIES):
        v = [(L[key] / L["optimum_cycles"]) if L.get(key) and L.get("optimum_cycles") else np.nan for L in layers]
        ax.bar(x + (j - 1) * w, v, w, label=name)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, [f"{L['name']} @ {L['hw']}" if L.get("hw") else L["name"] for L in layers],
                  rotation=60, fontsize=6, ha="right")
    ax.set_ylabel("best cycles found / exhaustive optimum")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "experiments/results/fig_search_efficiency"))
    a, extra = ap.parse_known_args(argv)
    if not BENCH.exists():
        print(f"fig_search_efficiency: {BENCH} is not there yet", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(BENCH), "--json", *extra]
    (out / "config.json").write_text(json.dumps({"command": cmd[1:]}, indent=2) + "\n")
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        print(r.stderr[-2000:], file=sys.stderr)
        return r.returncode
    data = json.loads(r.stdout)
    (out / "search_quality.json").write_text(json.dumps(data, indent=2) + "\n")
    figure(data, out / "search_efficiency.png")
    md = ["| layer | optimum cycles | " + " | ".join(n for _, n in STRATEGIES) + " | measurements |",
          "|---|---|" + "---|" * len(STRATEGIES) + "---|"]
    for L in data["layers"]:
        md.append(f"| {L['name']} @ {L.get('hw', '')} | {L['optimum_cycles']} | " + " | ".join(
            f"{L[k] / L['optimum_cycles']:.3f}" if L.get(k) else "" for k, _ in STRATEGIES) + f" | {L.get('measurements', '')} |")
    (out / "table.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    print(json.dumps(data.get("summary", {}), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
