"""accel-tune simulate: cost a model end to end on an accelerator (default schedules, greedy BYOC
partition): per-layer cycles, latency, energy, utilization, roofline fraction and the
host/link/device split."""
from __future__ import annotations

import argparse

from tuner.cli import CLIError, print_json
from tuner.cli.common import add_model_args, load_graph
from tuner.cli.progress import Steps, add_progress_arg


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("simulate", help="simulate a model on an accelerator",
                       description="Partition the model for the accelerator's op/pattern support, give every "
                                   "offloaded kernel its default schedule and cost one inference.")
    add_model_args(p)
    p.add_argument("--hw", required=True, metavar="PRESET|FILE", help="hardware preset or config file")
    p.add_argument("--fidelity", choices=("analytical", "tile"), default="analytical")
    p.add_argument("--json", action="store_true", help="print the whole breakdown as JSON")
    add_progress_arg(p)
    return p



def run(args) -> int:
    import sim
    from partition import partition_for
    hw = sim.load_hw(args.hw)
    with Steps(args, "simulate", 3) as steps:
        steps.step(f"loading {args.model or args.onnx}")
        graph = load_graph(args)
        try:
            target = hw.partition_target()
        except ValueError as e:
            raise CLIError(f"hardware {hw.name}: {e}") from None
        steps.step("partitioning")
        pg = partition_for(graph, target)
        steps.step(f"costing ({args.fidelity} kernel simulator)")
        cost = sim.cost_graph(pg, hw, fidelity=args.fidelity)
    if args.json:
        print_json({"model": args.model or args.onnx, **cost.to_dict()})
        return 0
    print(f"{args.model or args.onnx} on {hw.name} ({args.fidelity}): latency {cost.latency_s * 1e3:.3f} ms, "
          f"energy {cost.energy_j * 1e3:.3f} mJ")
    print(f"  host {cost.host_s * 1e3:.3f} ms ({len(cost.host_ops)} ops)  link {cost.link_s * 1e3:.3f} ms  "
          f"launch {cost.launch_s * 1e3:.3f} ms  device {cost.device_s * 1e3:.3f} ms ({len(cost.calls)} calls)  "
          f"weights {cost.weight_bytes / 2**20:.1f} MiB loaded once")
    print(f"  {'kernel':<40} {'op':<32} {'cycles':>11} {'util':>6} {'roofline':>8} {'energy uJ':>10}")
    seen = set()
    for call in cost.calls:
        if call.symbol in seen:
            continue
        seen.add(call.symbol)
        for k in call.kernels:
            r = k.report
            print(f"  {k.name[:40]:<40} {k.op[:32]:<32} {r.total_cycles:>11,} {r.utilization:>6.1%} "
                  f"{r.roofline_fraction:>8.1%} {r.energy_j * 1e6:>10.2f}")
    return 0
