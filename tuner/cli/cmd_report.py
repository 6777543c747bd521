"""accel-tune report: one self-contained HTML report of a sweep folder."""
from __future__ import annotations

import argparse

from tuner.cli import CLIError, print_json
from tuner.cli.progress import Steps, add_progress_arg


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("report", help="write an offline HTML report (Pareto, breakdowns, roofline) of a sweep",
                       description="Read a sweep output folder and write one HTML file with the figures "
                                   "embedded (opens offline): Pareto scatter, latency/energy breakdown of "
                                   "the best points, roofline of tuned kernels, search efficiency, tables.")
    p.add_argument("dir", metavar="DIR", help="a folder written by accel-tune sweep")
    p.add_argument("-o", "--out", metavar="HTML", help="report file (default DIR/report.html)")
    p.add_argument("--json", action="store_true", help="print {path, points, pareto, figures}")
    add_progress_arg(p)
    return p


def run(args) -> int:
    try:
        import matplotlib  # noqa: F401 - the figures need it; say so before reading anything
    except ImportError:
        raise CLIError("accel-tune report needs matplotlib: pip install 'accel-tune[plot]'") from None
    from tuner.sweep.report import FIGURES, report_dir
    with Steps(args, "report", len(FIGURES)) as steps:
        path, rep = report_dir(args.dir, args.out, on_figure=steps.step)
    if args.json:
        print_json({"path": str(path), "points": rep.points, "pareto": list(rep.pareto),
                    "figures": [f.id for f in rep.figures], "bytes": len(rep.html)})
    else:
        print(f"wrote {path}: {rep.points} points, {len(rep.pareto)} on the Pareto front, "
              f"figures: {', '.join(f.id for f in rep.figures)}")
    return 0
