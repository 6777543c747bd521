"""accel-tune simulate: cost a model end to end on an accelerator (default schedules, greedy BYOC
partition): per-layer cycles, latency, energy, utilization, roofline fraction and the
host/link/device split. With ``--timeloop FILE...`` it evaluates a Timeloop architecture +
problem + mapping instead (``tuner.cli.timeloop_sim``)."""
from __future__ import annotations

import argparse

from tuner.cli import CLIError, print_json
from tuner.cli.common import add_calibration_arg, add_model_args, load_calibration_arg, load_graph
from tuner.cli.progress import Steps, add_progress_arg


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("simulate", help="simulate a model on an accelerator",
                       description="Partition the model for the accelerator's op/pattern support, give every "
                                   "offloaded kernel its default schedule and cost one inference.")
    add_model_args(p)
    # --timeloop replaces the model and the hardware: neither group is required by argparse, run()
    # checks that exactly one of the two inputs is given
    for group in p._mutually_exclusive_groups:
        group.required = False
    p.add_argument("--timeloop", nargs="+", metavar="FILE",
                   help="Timeloop v0.4 YAML files (arch, problem, mapping, or the processed input) and "
                        "Accelergy ERT/ART, merged by top-level key; prints Timeloop's per-level statistics")
    p.add_argument("--timeloop-var", action="append", default=[], metavar="KEY=VALUE",
                   help="a value for the Jinja2 templates among the --timeloop files (timeloopfe's "
                        "jinja_parse_data, e.g. architecture=simba_like for the exercises' top.yaml.jinja2); repeatable")
    p.add_argument("--hw", metavar="PRESET|FILE", help="hardware preset or config file (with --model/--onnx)")
    p.add_argument("--fidelity", choices=("analytical", "tile"), default="analytical")
    p.add_argument("--json", action="store_true", help="print the whole breakdown as JSON")
    add_calibration_arg(p)
    add_progress_arg(p)
    return p



def run(args) -> int:
    if args.timeloop:
        if args.calibration:
            raise CLIError("simulate: --calibration applies to --model/--onnx, not --timeloop")
        if args.model or args.onnx or args.hw:
            raise CLIError("simulate: --timeloop takes the whole problem from its files; drop --model/--onnx/--hw")
        from tuner.cli.timeloop_sim import run_timeloop
        return run_timeloop(args)
    if args.timeloop_var:
        raise CLIError("simulate: --timeloop-var goes with --timeloop")
    if not (args.model or args.onnx):
        raise CLIError("simulate: one of the arguments --model --onnx --timeloop is required")
    if not args.hw:
        raise CLIError("simulate: the following arguments are required: --hw")
    import sim
    from partition import partition_for
    hw = sim.load_hw(args.hw)
    cal = load_calibration_arg(args, hw)
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
        cal = cal.for_graph(graph) if cal is not None else None
        cost = sim.cost_graph(pg, hw, fidelity=args.fidelity,
                              host_seconds=cal.host_seconds if cal is not None else None,
                              kernel_scale=cal.kernel_scale if cal is not None else None)
    if args.json:
        print_json({"model": args.model or args.onnx, **cost.to_dict(), "calibrated": cal is not None,
                    "calibration": cal.describe() if cal is not None else None})
        return 0
    label = f"{args.fidelity}, calibrated ({cal.kind})" if cal is not None else args.fidelity
    print(f"{args.model or args.onnx} on {hw.name} ({label}): latency {cost.latency_s * 1e3:.3f} ms, "
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
