"""The README's sweep figure: ResNet-50 + BERT-base on an edge design space
(experiments/sweeps/edge_rn50_bert.toml), Pareto fronts of latency, energy and area.

    python experiments/fig_sweep_edge.py [--spec FILE] [--workers N] [--limit N]

Writes experiments/results/fig_sweep_edge/: sweep/ (the sweep folder: results, spec, versions; rerun
to resume), report.html, pareto.png (the README figure, also copied to docs/figures/), front.md (the
front as a Markdown table), findings.md (what the README quotes) and config.json.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pareto_png(rows, labels, path: Path) -> None:
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from tuner.sweep import pareto_front
    fig = Figure(figsize=(4.2 * len(labels), 3.8), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(labels), squeeze=False)[0]
    area = np.array([r["area_mm2"] for r in rows])
    for ax, lab in zip(axes, labels):
        lat = np.array([r["models"][lab]["latency_s"] * 1e3 for r in rows])
        en = np.array([r["models"][lab]["energy_j"] * 1e3 for r in rows])
        sc = ax.scatter(area, lat, c=en, cmap="viridis", s=22, norm=_lognorm(en))
        f = pareto_front(np.stack([area, lat], axis=1))
        o = f[np.argsort(area[f])]
        ax.step(area[o], lat[o], where="post", color="crimson", lw=1.2, label="area-latency front")
        ax.scatter(area[o], lat[o], s=60, facecolors="none", edgecolors="crimson")
        ax.set_yscale("log")
        ax.set_xlabel("area (mm²)")
        ax.set_ylabel(f"{lab} latency (ms)")
        ax.grid(alpha=0.3, which="both")
        fig.colorbar(sc, ax=ax, label=f"{lab} energy (mJ)")
        ax.legend(fontsize=7, loc="upper right")
    fig.savefig(path)


def _lognorm(v):
    from matplotlib.colors import LogNorm
    return LogNorm(vmin=max(min(v), 1e-12), vmax=max(v)) if max(v) / max(min(v), 1e-12) > 10 else None


def front_md(rows, labels) -> str:
    from tuner.sweep import objective_matrix, pareto_front
    idx = pareto_front(objective_matrix(rows))
    params = list(rows[0]["params"])
    head = ["#"] + [p.split(".")[-1] if p.count(",") == 0 else p for p in params] + ["area mm²"]
    head += [f"{lab} ms" for lab in labels] + [f"{lab} mJ" for lab in labels]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i in sorted(idx, key=lambda i: rows[i]["latency_s"]):
        r = rows[i]
        cells = [str(r["index"])] + [f"{r['params'][p]:g}" if isinstance(r["params"][p], (int, float))
                                     else str(r["params"][p]) for p in params] + [f"{r['area_mm2']:.2f}"]
        cells += [f"{r['models'][lab]['latency_s'] * 1e3:.3g}" for lab in labels]
        cells += [f"{r['models'][lab]['energy_j'] * 1e3:.3g}" for lab in labels]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def findings_md(rows, labels) -> str:
    """What the README says about this sweep, computed from the rows: latency range of each model per
    host-link class, and where the fastest point spends its time."""
    lines = ["| host link | points | " + " | ".join(f"{lab} ms (min-max)" for lab in labels) + " |",
             "|---|---|" + "---|" * len(labels)]
    for bw in sorted({r["params"]["link.bytes_per_s"] for r in rows}):
        sel = [r for r in rows if r["params"]["link.bytes_per_s"] == bw]
        cells = [f"{min(r['models'][lab]['latency_s'] for r in sel) * 1e3:.1f}-"
                 f"{max(r['models'][lab]['latency_s'] for r in sel) * 1e3:.1f}" for lab in labels]
        lines.append(f"| {bw / 1e6:g} MB/s | {len(sel)} | " + " | ".join(cells) + " |")
    lines.append("")
    for lab in labels:
        best = min(rows, key=lambda r: r["models"][lab]["latency_s"])
        m = best["models"][lab]
        parts = ", ".join(f"{k} {v['latency_s'] * 1e3:.1f} ms" for k, v in m["breakdown"].items())
        p = best["params"]
        lines.append(f"- fastest {lab}: point {best['index']} ({p['array.rows']}x{p['array.cols']} array, "
                     f"{p['dram.bytes_per_cycle']:g} B/cycle DRAM, {p['link.bytes_per_s'] / 1e6:g} MB/s link, "
                     f"{best['area_mm2']:.2f} mm²): {m['latency_s'] * 1e3:.1f} ms = {parts}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(ROOT / "experiments/sweeps/edge_rn50_bert.toml"))
    ap.add_argument("--workers", type=int, default=2, help="Dask LocalCluster workers (0: this process)")
    ap.add_argument("--limit", type=int, help="at most N new points this run (rerun to continue)")
    ap.add_argument("--out", default=str(ROOT / "experiments/results/fig_sweep_edge"))
    a = ap.parse_args(argv)
    from tuner.sweep import load_spec, run_sweep
    from tuner.sweep.report import report_dir
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = load_spec(a.spec)
    (out / "config.json").write_text(json.dumps({"spec_file": str(Path(a.spec).resolve().relative_to(ROOT)),
                                                 "workers": a.workers, "limit": a.limit,
                                                 "spec": spec.to_dict()}, indent=2) + "\n")
    res = run_sweep(spec, out / "sweep", workers=a.workers or None, progress=True, limit=a.limit)
    rows = [r for r in res.rows if r.get("error") is None]
    labels = [m.label for m in spec.models]
    report_dir(out / "sweep", out / "report.html")
    pareto_png(rows, labels, out / "pareto.png")
    (out / "front.md").write_text(front_md(rows, labels))
    (out / "findings.md").write_text(findings_md(rows, labels))
    figs = ROOT / "docs" / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    shutil.copy(out / "pareto.png", figs / "sweep_edge_pareto.png")
    print(f"{len(rows)} points ({res.new} new), {len(res.space.points) - len(res.rows)} remaining; "
          f"wrote {out}/report.html, pareto.png, front.md, findings.md")
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
