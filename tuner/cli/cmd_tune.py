"""accel-tune tune: tune kernel schedules and the partition of a model for an accelerator, print
the per-task and end-to-end results beside the baselines, and optionally write the packed plan."""
from __future__ import annotations

import argparse
import os
import math
from pathlib import Path

from tuner.cli import CLIError, print_json
from tuner.cli.common import add_input_shape_arg, check_writable, input_shapes
from tuner.plan import json_safe


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("tune", help="tune schedules and partition; export the plan",
                       description="Tune every offloaded kernel's schedule on the simulator and search the "
                                   "partition (what to offload, how to merge) for the lowest end-to-end "
                                   "latency, energy or energy-delay product. Prints per-task best cycles and "
                                   "roofline fraction, and the plan's latency and energy beside greedy BYOC, "
                                   "all-on-host and default schedules.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="NAME", help="a built-in model (accel-tune models lists them)")
    src.add_argument("--onnx", metavar="FILE", help="an ONNX file")
    add_input_shape_arg(p)
    p.add_argument("--hw", required=True, metavar="PRESET|FILE", help="hardware preset or config file")
    p.add_argument("--trials", type=int, default=None, metavar="N",
                   help="kernel measurements in all (default: 16 per tuning task)")
    p.add_argument("--log", metavar="FILE", help="tuning records (JSON lines), read and appended; a rerun resumes")
    p.add_argument("--objective", choices=("latency", "energy", "edp"), default="latency")
    p.add_argument("-o", "--output", metavar="PLAN", help="write the packed plan (zip archive) here")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (same seed, same plan)")
    p.add_argument("--learned-model", choices=("auto", "always", "never"), default="auto",
                   help="when the XGBoost cost model trains: auto (default: only when the analytical "
                        "prior misranks the measurements and training costs little next to measuring), "
                        "always (every round), never (rank with the analytical prior)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    return p


def _load_graph(args):
    shapes = input_shapes(args)
    if args.model is not None:
        from partition import models
        return models.get(args.model), args.model
    path = Path(args.onnx)
    if not path.is_file():
        raise CLIError(f"ONNX file not found: {args.onnx}")
    from partition import load_onnx
    return load_onnx(str(path), input_shapes=shapes, fold_qdq=args.fold_qdq), path.stem


def run(args) -> int:
    import sim
    from tuner.tune import tune

    if args.trials is not None and args.trials < 0:
        raise CLIError(f"--trials must be >= 0, got {args.trials}")
    if args.output:
        check_writable(args.output, "the plan")
    hw = sim.load_hw(args.hw)
    graph, name = _load_graph(args)
    if args.log:
        # Say so before any tuning time is spent, not after the first measurement.
        log_dir = os.path.dirname(os.path.abspath(args.log))
        if not os.path.isdir(log_dir):
            raise CLIError(f"--log {args.log}: folder {log_dir} does not exist")
    plan = tune(graph, hw, trials=args.trials, log=args.log, objective=args.objective, seed=args.seed,
                progress=not args.json, model_name=name, model_use=args.learned_model)
    if args.output:
        plan.save(args.output)
    if args.json:
        s = plan.summary()
        s["baselines"] = {k: {"latency_s": v["latency_s"], "energy_j": v["energy_j"]}
                          for k, v in s["baselines"].items()}
        s["speedup"] = {k: _ratio(b["latency_s"], plan.latency_s) for k, b in s["baselines"].items()}
        if args.output:
            s["plan_file"] = str(args.output)
        s["timing"] = dict(plan.timing)
        print_json(json_safe(s))
        return 0
    _print_table(plan, args)
    return 0


def _ratio(a: float, b: float):
    return a / b if b > 0 and math.isfinite(a) else None




def _timing_line(t: dict) -> str:
    k = t.get("kernels") or {}
    line = f"time: {t['wall_s']:.2f} s (partition {t['partition_s']:.2f} s, kernels {t['kernels_s']:.2f} s"
    if k:
        fits = k["fits"]
        line += (f": measure {k['measure_s']:.2f} s ({k['measurements']}), train {k['train_s']:.2f} s "
                 f"({fits} fit{'' if fits == 1 else 's'}), score {k['score_s']:.2f} s, "
                 f"generate {k['generate_s']:.2f} s")
    return line + f"; final costing {t['final_s']:.2f} s)"


def _print_table(plan, args) -> None:
    print(f"{plan.model} on {plan.hw.name}: objective {plan.objective}, {plan.trials} measurement(s), "
          f"seed {plan.seed}")
    if plan.tasks:
        print(f"  {'task (workload)':<58} {'x':>4} {'default cyc':>12} {'best cyc':>12} {'speedup':>8} {'roofline':>9}")
        for t in plan.tasks:
            sp = t.default_cycles / t.best_cycles if t.best_cycles else float("nan")
            print(f"  {t.workload[:58]:<58} {t.weight:>4.0f} {t.default_cycles:>12,} {t.best_cycles:>12,} "
                  f"{sp:>7.2f}x {t.roofline_fraction:>8.1%}")
    d = plan.decision
    print(f"partition: {len(d.offloaded)} of {d.offloadable} offloadable unit(s) offloaded in "
          f"{len(plan.cost.functions)} function(s) ({len(d.functions)} call site(s)); greedy BYOC forms "
          f"{d.candidate_regions}")
    b = plan.cost.total
    print(f"  host {b.host_s * 1e3:.3f} ms  link {b.link_s * 1e3:.3f} ms  launch {b.launch_s * 1e3:.3f} ms  "
          f"device {b.device_s * 1e3:.3f} ms")
    print(f"  {'plan':<20} {'latency ms':>12} {'energy mJ':>12} {'plan speedup':>13}")
    rows = [("tuned plan", plan.latency_s, plan.energy_j)]
    rows += [(k, c.latency_s, c.energy_j) for k, c in plan.baselines.items()]
    for label, lat, en in rows:
        sp = lat / plan.latency_s if plan.latency_s > 0 else float("nan")
        print(f"  {label:<20} {lat * 1e3:>12.3f} {en * 1e3:>12.3f} {sp:>12.2f}x")
    print(_timing_line(plan.timing))
    if args.output:
        print(f"plan written to {args.output}")
