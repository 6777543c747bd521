"""accel-tune partition: partition a model for a target and show the result."""
from __future__ import annotations

import argparse

from tuner.cli import CLIError, print_json
from tuner.cli.common import add_model_args, load_graph


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("partition", help="partition a model into host ops and offloaded functions",
                       description="Partition a built-in model or an ONNX file for an offload target "
                                   "and print the partitioned graph and what was offloaded.")
    add_model_args(p)
    p.add_argument("--target", required=True, metavar="NAME", help="offload target, e.g. npu-gemm, npu-full")
    p.add_argument("--keep-on-host", metavar="IDS", default="",
                   help="comma-separated candidate region ids to leave on the host")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return p


def _keep_ids(text: str) -> frozenset[int]:
    try:
        return frozenset(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise CLIError(f"--keep-on-host takes comma-separated integers, got {text!r}") from None



def run(args) -> int:
    from partition import targets
    from partition.byoc import partition_for, summarize

    target = targets.get(args.target)
    graph = load_graph(args)
    part = partition_for(graph, target, keep_on_host=_keep_ids(args.keep_on_host))
    s = summarize(part)
    if args.json:
        print_json({"model": args.model or args.onnx, "target": target.name, **s.to_json()})
        return 0
    print(part)
    print()
    print(f"target {target.name}: {len(s.functions)} external function(s), "
          f"{s.offloaded_ops} op(s) offloaded, {len(s.host_ops)} on the host, "
          f"{s.macs_offloaded_pct:.1f}% of {s.macs_total} MACs offloaded")
    for f in s.functions:
        print(f"  @{f.symbol}: {f.calls} call(s), {len(f.ops)} ops, {f.macs_per_call} MACs/call"
              + (f", composites {', '.join(sorted(set(f.composites)))}" if f.composites else ""))
    return 0
