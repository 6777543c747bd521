"""ONNX's backend conformance suite (as the installed onnx ships or generates it) through
``load_onnx`` + ``interpret``: counts per outcome and per refusal reason.

    python experiments/onnx_conformance.py            # a markdown table (docs/IR.md publishes it)
    python experiments/onnx_conformance.py --json     # the counts and every non-passing case
    python experiments/onnx_conformance.py --list wrong,internal   # the cases with those outcomes
"""
from __future__ import annotations

import argparse
import json
import sys

from partition.onnx import conformance as oc
from tuner.cli.progress import add_progress_arg, progress_enabled


def _table(summary: dict, onnx_version: str) -> str:
    reasons = {key: text for key, text, _ in oc.REFUSAL_REASONS}
    rows = [f"ONNX backend conformance suite (onnx {onnx_version}: "
            f"{', '.join(f'{k} {sum(v.values())}' for k, v in sorted(summary['kinds'].items()))}; "
            f"{summary['cases']} cases)", "", "| outcome | cases |", "|---|---:|"]
    rows += [f"| {s} | {n} |" for s, n in summary["outcomes"].items()]
    rows += ["", "| refusal reason | meaning | cases |", "|---|---|---:|"]
    rows += [f"| {k} | {reasons[k]} | {n} |" for k, n in summary["refusal_reasons"].items()]
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of markdown tables")
    ap.add_argument("--list", default="", help="comma-separated outcomes whose cases to list")
    add_progress_arg(ap)
    args = ap.parse_args(argv)
    why = oc.available()
    if why:
        print(f"accel-tune: error: the conformance suite is not available: {why}", file=sys.stderr)
        return 2
    import onnx
    from tqdm import tqdm
    cases = oc.load_cases()
    with tqdm(total=len(cases), desc="conformance", unit="case", file=sys.stderr,
              disable=not progress_enabled(args), leave=False) as bar:
        outcomes = oc.run_suite(cases, lambda i, n: bar.update(1))
    summary = oc.summarize(outcomes)
    wanted = {s for s in args.list.split(",") if s}
    if args.json:
        summary["onnx"] = onnx.__version__
        summary["not_passing"] = [{"name": o.name, "kind": o.kind, "status": o.status, "reason": o.reason,
                                   "message": o.message} for o in outcomes if o.status != "pass"]
        print(json.dumps(summary, indent=1))
        return 0
    print(_table(summary, onnx.__version__))
    for o in outcomes:
        if o.status in wanted:
            print(f"{o.status}\t{o.kind}/{o.name}\t{o.reason}\t{o.message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
