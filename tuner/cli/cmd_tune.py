"""accel-tune tune: tune kernel schedules and the partition of a model for an accelerator, print
the per-task and end-to-end results beside the baselines, and optionally write the packed plan."""
from __future__ import annotations

import argparse
import os
import math
from pathlib import Path

from tuner.cli import CLIError, print_json
from tuner.cli.common import (add_calibration_arg, add_input_shape_arg, check_writable, input_dims, input_shapes,
                               load_calibration_arg)
from tuner.cli.progress import add_progress_arg, progress_enabled
from tuner.plan import json_safe


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("tune", help="tune schedules and partition; export the plan",
                       description="Tune every offloaded kernel's schedule on the simulator and search the "
                                   "partition (what to offload, how to merge) for the lowest end-to-end "
                                   "latency, energy or energy-delay product. Prints per-task best cycles and "
                                   "roofline fraction, and the plan's latency and energy beside greedy BYOC, "
                                   "all-on-host and default schedules.")
    # --timeloop replaces the model and the hardware; run() checks that exactly one input is given
    src = p.add_mutually_exclusive_group(required=False)
    src.add_argument("--model", metavar="NAME", help="a built-in model (accel-tune models lists them)")
    src.add_argument("--onnx", metavar="FILE", help="an ONNX file")
    add_input_shape_arg(p)
    p.add_argument("--hw", metavar="PRESET|FILE", help="hardware preset or config file (with --model/--onnx)")
    p.add_argument("--timeloop", nargs="+", metavar="FILE",
                   help="search the best mapping of a Timeloop v0.4 architecture + problem (+ constraints, "
                        "mapper section) with Accelergy ERT/ART, merged by top-level key; prints it and "
                        "writes it as a Timeloop mapping file with -o")
    p.add_argument("--metric", choices=("edp", "energy", "delay"), default=None,
                   help="with --timeloop: what the mapping search minimises (default: the mapper section's "
                        "optimization_metrics, else edp)")
    p.add_argument("--budget", type=int, default=None, metavar="N",
                   help="with --timeloop: mappings to evaluate (default 30000; the search is deterministic "
                        "for a seed and a budget); with --model/--onnx on a hardware with storage levels: "
                        "mappings to evaluate per MAC kernel (default 6000)")
    p.add_argument("--measure-command", metavar="CMD",
                   help="with --timeloop: an external measurer of mappings, run with a Timeloop mapping file "
                        "as its last argument, printing JSON with cycles and energy_pj (e.g. 'accel-tune "
                        "simulate --json --timeloop ARCH PROB ERT'); the search's best --measure-top "
                        "mappings are measured and the best measured wins; with --model/--onnx: the "
                        "measurer of every kernel measurement, given one JSON object on stdin (workload, "
                        "hardware, schedule; on storage levels the schedule's 'mapping'), printing "
                        "{\"cycles\": N} (docs/TUNING.md)")
    p.add_argument("--measure", choices=("tile",), default=None,
                   help="with --timeloop: measure the search's best --measure-top mappings in process with the "
                        "tile-level walk (sim.cost.walk: pipeline fill, drain, bursts, single buffering) and keep the "
                        "best measured (instead of --measure-command)")
    p.add_argument("--measure-top", type=int, default=None, metavar="K",
                   help="with --measure or --measure-command: how many of the best predicted mappings to measure "
                        "(default 8 with --timeloop, 4 per MAC kernel with --model/--onnx on storage levels)")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="with --timeloop: stop the search after S seconds even if the budget is not spent")
    p.add_argument("--trials", type=int, default=None, metavar="N",
                   help="kernel measurements in all (default: 16 per tuning task)")
    p.add_argument("--log", metavar="FILE", help="tuning records (JSON lines), read and appended; a rerun resumes")
    p.add_argument("--objective", choices=("latency", "energy", "edp"), default="latency")
    p.add_argument("--offload", choices=("cost", "all"), default=None,
                   help="with --model/--onnx: what decides the partition: cost (default: offload what the "
                        "simulated costs say pays, searched with the tuned kernels) or all (greedy BYOC's "
                        "partition, every supported op on the device; only the kernels are tuned)")
    p.add_argument("-o", "--output", metavar="PLAN", help="write the packed plan (zip archive) here; with "
                                                          "--timeloop, the mapping (Timeloop YAML)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (same seed, same plan)")
    p.add_argument("--learned-model", choices=("auto", "always", "never"), default="auto",
                   help="when the XGBoost cost model trains: auto (default: only when the analytical "
                        "prior misranks the measurements and training costs little next to measuring), "
                        "always (every round), never (rank with the analytical prior)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    add_calibration_arg(p)
    add_progress_arg(p)
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
    return load_onnx(str(path), input_shapes=shapes, fold_qdq=args.fold_qdq, dims=input_dims(args)), path.stem


def run(args) -> int:
    if args.timeloop:
        if args.model or args.onnx or args.hw:
            raise CLIError("tune: --timeloop takes the whole problem from its files; drop --model/--onnx/--hw")
        if args.log or args.trials is not None or args.offload is not None:
            raise CLIError("tune: --log, --trials and --offload apply to --model/--onnx; with --timeloop use --budget")
        if args.calibration:
            raise CLIError("tune: --calibration applies to --model/--onnx, not --timeloop")
        from tuner.cli.timeloop_tune import run_timeloop_tune
        return run_timeloop_tune(args)
    if not (args.model or args.onnx):
        raise CLIError("tune: one of the arguments --model --onnx --timeloop is required")
    if not args.hw:
        raise CLIError("tune: the following arguments are required: --hw")
    if any(v is not None for v in (args.metric, args.time_limit, args.measure)):
        raise CLIError("tune: --metric, --time-limit and --measure apply to --timeloop (use --objective with "
                       "--model/--onnx)")
    import sim
    from tuner.tune import tune

    if args.trials is not None and args.trials < 0:
        raise CLIError(f"--trials must be >= 0, got {args.trials}")
    if args.output:
        check_writable(args.output, "the plan")
    hw = sim.load_hw(args.hw)
    cal = load_calibration_arg(args, hw)
    if not hw.multilevel and (args.budget is not None or args.measure_top is not None):
        raise CLIError(f"tune: --budget and --measure-top with --model/--onnx apply to hardware with storage "
                       f"levels (mapping search); {hw.name} has none")
    if args.budget is not None and args.budget < 1:
        raise CLIError(f"--budget must be >= 1, got {args.budget}")
    if args.measure_top is not None and (args.measure_top < 1 or args.measure_command is None):
        raise CLIError("--measure-top needs --measure-command and must be >= 1")
    measurer = None
    if args.measure_command is not None:
        from tuner.search.measure import CommandMeasurer, MeasureError
        try:
            measurer = CommandMeasurer(args.measure_command)
        except MeasureError as e:
            raise CLIError(str(e)) from None
    graph, name = _load_graph(args)
    if args.log:
        # Say so before any tuning time is spent, not after the first measurement.
        log_dir = os.path.dirname(os.path.abspath(args.log))
        if not os.path.isdir(log_dir):
            raise CLIError(f"--log {args.log}: folder {log_dir} does not exist")
    plan = tune(graph, hw, trials=args.trials, log=args.log, objective=args.objective, seed=args.seed,
                progress=progress_enabled(args), model_name=name, model_use=args.learned_model,
                measurer=measurer, map_budget=args.budget, measure_top=args.measure_top,
                offload=args.offload or "cost", calibration=cal)
    if args.output:
        plan.save(args.output)
    if args.json:
        s = plan.summary()
        s["baselines"] = {k: {"latency_s": v["latency_s"], "energy_j": v["energy_j"]}
                          for k, v in s["baselines"].items()}
        s["speedup"] = {k: _ratio(b["latency_s"], plan.latency_s) for k, b in s["baselines"].items()}
        # Each baseline's objective over the plan's: latency, energy or EDP, as --objective says.
        s["gain"] = {k: _gain(args.objective, c, plan.cost.total) for k, c in plan.baselines.items()}
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


def task_label(key: str) -> str:
    """A short, complete name for a workload key: every dimension that is not its default is
    shown, so two different workloads never read the same (``conv2d(n=1,c=64,h=56,...)x4B|add+relu``
    -> ``conv 1x64x56x56 k256 1x1 +add+relu``). A key of another shape is shown whole."""
    import re
    m = re.fullmatch(r"(\w+)\(([^)]*)\)x(\d+)B(?:\|(.*))?", key)
    if m is None:
        return key
    kind, args, nbytes, epi = m.groups()
    try:
        d = {k: int(v) for k, v in (a.split("=") for a in args.split(",") if a)}
    except ValueError:
        return key
    if kind == "conv2d" and len(d) == 16:
        text = f"conv {d['n']}x{d['c']}x{d['h']}x{d['w']} k{d['k']} {d['r']}x{d['s']}"
        st = (d["stride_h"], d["stride_w"])
        text += "" if st == (1, 1) else f" s{st[0]}" if st[0] == st[1] else f" s{st[0]}x{st[1]}"
        pads = (d["pad_t"], d["pad_l"], d["pad_b"], d["pad_r"])
        text += "" if not any(pads) else f" p{pads[0]}" if len(set(pads)) == 1 else f" p{','.join(map(str, pads))}"
        dil = (d["dil_h"], d["dil_w"])
        text += "" if dil == (1, 1) else f" d{dil[0]}" if dil[0] == dil[1] else f" d{dil[0]}x{dil[1]}"
        text += "" if d["groups"] == 1 else f" g{d['groups']}"
    elif kind == "gemm" and len(d) == 4:
        text = f"gemm {d['m']}x{d['n']}x{d['k']}" + ("" if d["b"] == 1 else f" b{d['b']}")
    else:
        text = f"{kind}({args})"
    if nbytes != "4":
        text += f" {nbytes}B"
    return text + (f" +{epi}" if epi else "")


def _gain(objective: str, base, plan) -> float:
    from tuner.costing import objective_value
    b = objective_value(objective, base.latency_s, base.energy_j)
    v = objective_value(objective, plan.latency_s, plan.energy_j)
    return b / v if v > 0 else float("nan")


def _print_table(plan, args) -> None:
    cal = f", calibrated ({plan.calibration['kind']})" if plan.calibration else ""
    print(f"{plan.model} on {plan.hw.name}: objective {plan.objective}, {plan.trials} measurement(s), "
          f"seed {plan.seed}{cal}")
    if plan.tasks:
        labels = [task_label(t.workload) for t in plan.tasks]
        w = max(len("task (workload)"), *map(len, labels))
        print(f"  {'task (workload)':<{w}} {'x':>4} {'default cyc':>12} {'best cyc':>12} {'speedup':>8} {'roofline':>9}")
        for t, label in zip(plan.tasks, labels):
            sp = t.default_cycles / t.best_cycles if t.best_cycles else float("nan")
            print(f"  {label:<{w}} {t.weight:>4.0f} {t.default_cycles:>12,} {t.best_cycles:>12,} "
                  f"{sp:>7.2f}x {t.roofline_fraction:>8.1%}")
    d = plan.decision
    policy = "greedy BYOC's, --offload all" if plan.offload == "all" else "decided by cost"
    print(f"partition ({policy}): {len(d.offloaded)} of {d.offloadable} offloadable unit(s) offloaded in "
          f"{len(plan.cost.functions)} function(s) ({len(d.functions)} call site(s)); greedy BYOC forms "
          f"{d.candidate_regions}")
    b = plan.cost.total
    print(f"  host {b.host_s * 1e3:.3f} ms  link {b.link_s * 1e3:.3f} ms  launch {b.launch_s * 1e3:.3f} ms  "
          f"device {b.device_s * 1e3:.3f} ms")
    gain = f"{plan.objective} gain"
    print(f"  {'plan':<20} {'latency ms':>12} {'energy mJ':>12} {'EDP mJ*ms':>12} {gain:>15}")
    rows = [("tuned plan", plan.cost.total)] + list(plan.baselines.items())
    for label, c in rows:
        g = _gain(plan.objective, c, plan.cost.total)
        print(f"  {label:<20} {c.latency_s * 1e3:>12.3f} {c.energy_j * 1e3:>12.3f} "
              f"{c.latency_s * c.energy_j * 1e6:>12.4g} {g:>14.2f}x")
    print(f"  ({gain}: a row's {plan.objective} over the tuned plan's)")
    print(_timing_line(plan.timing))
    if args.output:
        print(f"plan written to {args.output}")
