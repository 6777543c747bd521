"""Simulator vs SCALE-Sim: compute and total cycles of every `ok` case in shared/oracle/scalesim.jsonl
(SCALE-Sim 3.0.0 runs), with our tile-level simulator under SCALE-Sim's own mapping.

    python experiments/fig_scalesim.py [--oracle FILE]

Writes experiments/results/fig_scalesim/: config.json, cases.csv (one row per case), summary.json
(error statistics), scalesim.png (ours vs SCALE-Sim, log-log, with the y = x line) and table.md.
Our "steady" cycles (compute + stall) are what SCALE-Sim calls total cycles (it loads the first
buffer before cycle 0 and drains the last after the end).
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ORACLE = ROOT.parent / "shared" / "oracle" / "scalesim.jsonl"


def compare(cases) -> list[dict]:
    """One flat row per case from ``sim.validate.scalesim.compare_case`` (the comparison the validation
    script and tests use), with the layer and array named for the table."""
    from sim.validate.scalesim import compare_case
    rows = []
    for c in cases:
        r = compare_case(c, fidelity="tile")
        ours, theirs = r["ours"], r["scalesim"]
        rows.append({"id": c["id"], "layer": c["layer"].get("name", c["layer"]["kind"]),
                     "array": f"{c['array_rows']}x{c['array_cols']}", "dataflow": c["dataflow"],
                     "sram": c.get("sram_regime", ""), "bw": c["bandwidth_words_per_cycle"],
                     "scalesim_compute": theirs["compute_cycles"], "ours_compute": ours["compute_cycles"],
                     "scalesim_total": theirs["total_cycles"], "ours_steady": ours["total_cycles"],
                     "compute_err": ours["compute_cycles"] / theirs["compute_cycles"] - 1,
                     "total_err": ours["total_cycles"] / theirs["total_cycles"] - 1,
                     "scalesim_wall_s": c.get("wall_s")})
    return rows


def figure(rows, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(8.4, 3.9), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    a1, a2 = fig.subplots(1, 2)
    for ax, ours, theirs, title in ((a1, "ours_compute", "scalesim_compute", "compute cycles"),
                                    (a2, "ours_steady", "scalesim_total", "total cycles (compute + stall)")):
        for j, df in enumerate(("os", "ws", "is")):
            sel = [r for r in rows if r["dataflow"] == df]
            ax.scatter([r[theirs] for r in sel], [r[ours] for r in sel], s=18, color=f"C{j}", label=df)
        lo = min(min(r[theirs], r[ours]) for r in rows) * 0.7
        hi = max(max(r[theirs], r[ours]) for r in rows) * 1.4
        ax.plot([lo, hi], [lo, hi], color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"SCALE-Sim {title}")
        ax.set_ylabel(f"accel-tune {title}")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, title="dataflow", title_fontsize=7)
    fig.savefig(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--oracle", default=str(DEFAULT_ORACLE))
    ap.add_argument("--out", default=str(ROOT / "experiments/results/fig_scalesim"))
    a = ap.parse_args(argv)
    from sim.validate.scalesim_files import load_cases
    cases = load_cases(a.oracle)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps({"oracle": a.oracle, "cases": len(cases), "fidelity": "tile",
                                                 "schedule": "sim.scalesim_schedule"}, indent=2) + "\n")
    rows = compare(cases)
    with open(out / "cases.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    ce = [abs(r["compute_err"]) for r in rows]
    te = [abs(r["total_err"]) for r in rows]
    summary = {"cases": len(rows), "compute_exact": sum(1 for r in rows if r["ours_compute"] == r["scalesim_compute"]),
               # SCALE-Sim ends its count one cycle early (folds x cycles per fold - 1).
               "compute_within_1_cycle": sum(1 for r in rows if abs(r["ours_compute"] - r["scalesim_compute"]) <= 1),
               "compute_abs_err_max": max(ce), "total_abs_err_median": statistics.median(te),
               "total_abs_err_mean": statistics.mean(te), "total_abs_err_max": max(te),
               "total_within_5pct": sum(1 for e in te if e <= 0.05),
               "scalesim_wall_s_total": sum(r["scalesim_wall_s"] or 0 for r in rows)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    figure(rows, out / "scalesim.png")
    md = ["| cases | compute cycles within 1 cycle | total cycles: median abs error | mean | max | within 5 % |",
          "|---|---|---|---|---|---|",
          f"| {summary['cases']} | {summary['compute_within_1_cycle']} | {summary['total_abs_err_median']:.2%} | "
          f"{summary['total_abs_err_mean']:.2%} | {summary['total_abs_err_max']:.2%} | {summary['total_within_5pct']} |"]
    (out / "table.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
