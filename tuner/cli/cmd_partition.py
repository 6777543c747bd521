"""accel-tune partition: partition a model for a target and show the result, with the candidate
region ids that ``--keep-on-host`` takes."""
from __future__ import annotations

import argparse

from tuner.cli import CLIError, print_json
from tuner.cli.common import add_calibration_arg, add_model_args, load_calibration_arg, load_graph


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("partition", help="partition a model into host ops and offloaded functions",
                       description="Partition a built-in model or an ONNX file for an offload target "
                                   "and print the partitioned graph, what was offloaded and the candidate "
                                   "regions greedy BYOC forms, with the ids --keep-on-host takes.")
    add_model_args(p)
    p.add_argument("--target", required=True, metavar="NAME|HW",
                   help="a built-in offload target (npu-gemm, npu-full), or a hardware preset or config "
                        "file: its support section is the target and functions are named after it, as in "
                        "a tuned plan")
    p.add_argument("--keep-on-host", metavar="IDS", default="",
                   help="comma-separated candidate region ids to leave on the host (partition prints "
                        "them: 'candidate regions')")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_calibration_arg(p)
    return p


def _keep_ids(text: str) -> frozenset[int]:
    try:
        return frozenset(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise CLIError(f"--keep-on-host takes comma-separated integers, got {text!r}") from None


def resolve_hw(name: str):
    """The hardware a ``--target`` names, or None for a built-in target."""
    from partition import targets
    if name in targets.names():
        return None
    import sim
    return sim.load_hw(name)


def resolve_target(name: str):
    """A built-in target by name, else the target of a hardware preset or file."""
    from partition import targets
    if name in targets.names():
        return targets.get(name)
    import sim
    try:
        hw = sim.load_hw(name)
    except sim.HardwareError as e:
        if "no hardware preset or file named" in str(e):
            raise CLIError(f"--target {name!r} is neither a built-in target ({', '.join(targets.names())}) "
                           f"nor a hardware preset ({', '.join(sim.hw.presets.names())}) or file") from None
        raise
    try:
        return hw.partition_target()
    except ValueError as e:
        raise CLIError(f"hardware {hw.name}: {e}") from None


def run(args) -> int:
    from partition.byoc import candidate_regions, partition_for, summarize

    target = resolve_target(args.target)
    cal, cost = None, None
    if args.calibration:
        hw = resolve_hw(args.target)
        if hw is None:
            raise CLIError("partition: --calibration needs --target to be a hardware preset or file (it costs "
                           "the partition on that hardware)")
        cal = load_calibration_arg(args, hw)
    graph = load_graph(args)
    part = partition_for(graph, target, keep_on_host=_keep_ids(args.keep_on_host))
    if cal is not None:
        # what the calibration changes here: the partition's predicted cost, host and device
        import sim
        cal = cal.for_graph(graph)
        cost = sim.cost_graph(part, hw, host_seconds=cal.host_seconds, kernel_scale=cal.kernel_scale)
    s = summarize(part)
    regions = candidate_regions(graph, target)
    if args.json:
        extra = {"calibrated": cal is not None}
        if cost is not None:
            extra["calibration"] = cal.describe()
            extra["cost"] = {k: v for k, v in cost.to_dict().items() if k not in ("host_ops", "calls")}
        print_json({"model": args.model or args.onnx, "target": target.name, **s.to_json(), **extra,
                    "candidate_regions": [{"id": r.id, "graph": r.graph, "nodes": list(r.nodes),
                                           "inputs": list(r.inputs), "outputs": list(r.outputs)}
                                          for r in regions],
                    "device_resident": list(graph.meta.get("device_resident", ())),
                    "kv_cache": graph.meta.get("kv_cache")})
        return 0
    print(part)
    print()
    print(f"target {target.name}: {len(s.functions)} external function(s), "
          f"{s.offloaded_ops} op(s) offloaded, {len(s.host_ops)} on the host, "
          f"{s.macs_offloaded_pct:.1f}% of {s.macs_total} MACs offloaded")
    for f in s.functions:
        print(f"  @{f.symbol}: {f.calls} call(s), {len(f.ops)} ops, {f.macs_per_call} MACs/call"
              + (f", composites {', '.join(sorted(set(f.composites)))}" if f.composites else ""))
    kv = graph.meta.get("kv_cache")
    if kv:
        print(f"KV cache ({kv['form']}): {kv['layers']} layer(s), batch {kv['batch']}, past {kv['past_len']}, "
              f"{kv['new_tokens']} new token(s), {kv['heads']} head(s) of {kv['head_size']}; its "
              f"{2 * len(kv['pairs'])} tensors stay on the device (no link transfer per step)")
    print(f"candidate regions ({len(regions)}; --keep-on-host ID,... leaves them on the host):")
    for r in regions:
        nodes = ", ".join(r.nodes[:4]) + (f", ... ({len(r.nodes)} nodes)" if len(r.nodes) > 4 else "")
        print(f"  {r.id:>4}  {r.graph}: {nodes}")
    if cost is not None:
        print(f"calibrated ({cal.kind}) cost on {hw.name}: latency {cost.latency_s * 1e3:.3f} ms (host "
              f"{cost.host_s * 1e3:.3f} ms, device {cost.device_s * 1e3:.3f} ms)")
    return 0
