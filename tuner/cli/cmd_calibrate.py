"""accel-tune calibrate: fit a learned calibration of the cost model to measured costs and write it
as a calibration file (``tuner.calibration``), for ``--calibration FILE`` of simulate, tune,
partition and sweep.

- ``--host``: times this machine's host ops with onnxruntime in context (``tuner.calibrate_context``:
  each model alone: a plain session for its latency, then a profiled one for each node's time inside
  the real run, the rows adding up to the plain latency) for the built-in models, the zoo's ONNX
  files and the probe models (``tuner.calibrate_probes``: every activation kind, large fully
  connected layers, grouped convolutions, data movement, masks and selections), or for ``--models``
  alone; one node at a time (``tuner.calibrate_host``) only for the ops of a model onnxruntime
  cannot run whole. The fit gives every model the same say (``tuner.calibration.model_weights``).
  What onnxruntime's Loop and If cost of their own is timed first (``tuner.calibrate_control``:
  loops against the same work unrolled) and kept in the file for every ``if`` and ``loop``.
  ``--reference CAL.json``: an earlier host calibration of this machine lends its phase probe's
  lowest latency, so a run spent in a slower phase of the machine is brought to that speed.
- ``--measurements ROWS.jsonl --hw H``: measured device rows (``tuner.calibrate_device``); rows
  without ``measured_s`` are measured by ``--measurer CMD``.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Any

import numpy as np

from tuner.cli import CLIError, print_json
from tuner.cli.common import check_writable
from tuner.cli.progress import add_progress_arg, progress_enabled

# more passes over the models profiled in a slower phase of the machine than most
# (calibrate_context.profile_models), after the three over every model
SLOW_PASSES = 5
# the share of --time-budget within which the passes after the first start their blocks (and after
# which the first pass gives the models left one block and one profiled run)
LATER_PASSES = 0.75
# and within which the passes over the models left in a slower phase start theirs
SLOW_PASSES_END = 0.85


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("calibrate", help="learn a calibration of the cost model from measured costs",
                       description="Fit an XGBoost model of log(measured / analytical) per op and write it as a "
                                   "calibration file: --host times this machine's host ops with onnxruntime; "
                                   "--measurements reads a device's measured rows (JSON lines: op, shape, dtype, "
                                   "measured_s).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--host", action="store_true",
                     help="measure this machine's host ops with onnxruntime, in context (whole models, profiled)")
    src.add_argument("--measurements", metavar="ROWS.jsonl", help="measured device rows (JSON lines)")
    p.add_argument("--hw", metavar="PRESET|FILE",
                   help="with --measurements (required): the hardware the rows were measured on; with --host: "
                        "whose host model is the analytical reference (default: the host model's defaults)")
    p.add_argument("--measurer", metavar="CMD",
                   help="with --measurements: a command that measures a row without measured_s (the row's JSON "
                        "on stdin; prints {\"measured_s\": S})")
    p.add_argument("-o", "--output", required=True, metavar="CAL.json", help="the calibration file to write")
    p.add_argument("--models", nargs="+", metavar="NAME|FILE",
                   help="with --host: built-in models and ONNX files whose ops are timed (default: every built-in "
                        "model, the zoo's ONNX files and the probe models: activations, large fully connected layers, "
                        "grouped convolutions, data movement, masks and selections)")
    p.add_argument("--ops", metavar="OP,...", help="with --host: time only these op kinds (IR names, e.g. conv2d,add)")
    p.add_argument("--max-per-op", type=int, default=100, metavar="N",
                   help="with --host: for the one-node timing of models onnxruntime cannot run whole: at most N "
                        "shapes of one op kind, spread over its sizes (default 100)")
    p.add_argument("--time-budget", type=float, default=270.0, metavar="S",
                   help="with --host: stop timing after S seconds; kinds are visited round-robin, so each keeps "
                        "shapes (default 270)")
    p.add_argument("--min-time", type=float, default=0.1, metavar="S",
                   help="with --host, one-node timing: repeat each op until S seconds and 5 runs (at most 50), after 2 warm-ups; "
                        "the median is kept (default 0.1)")
    p.add_argument("--rounds", type=int, default=5, metavar="N",
                   help="with --host: profiled runs of each whole model, one model at a time (kernel medians "
                        "kept; one once 0.75 of the time budget is spent; default 5)")
    p.add_argument("--reference", metavar="CAL.json",
                   help="with --host: an earlier host calibration of this machine, made when it was steady; the "
                        "lowest latency its phase probe read (the machine's fast phase) holds this one to that speed "
                        "when this run never reaches it")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_progress_arg(p)
    return p


def run(args) -> int:
    check_writable(args.output, "the calibration file")
    if args.host:
        if args.measurer or args.measurements:
            raise CLIError("calibrate: --measurer goes with --measurements, not --host")
        summary = _host(args)
    else:
        if not args.hw:
            raise CLIError("calibrate: --measurements needs --hw (the hardware the rows were measured on)")
        if args.models or args.ops or args.reference:
            raise CLIError("calibrate: --models, --ops and --reference go with --host")
        summary = _device(args)
    ph = summary.get("phases")
    # on stderr with --json too (JSON: "phases")
    if ph and (ph["slow"] or ph["slow_as_a_whole"] or ph["left_out"] or ph.get("profile_slowed")
               or ph.get("block_spread") or ph.get("block_slowed")):
        print(phase_warning(ph), file=sys.stderr)
    if args.json:
        print_json(summary)
        return 0
    f = summary["fit"]
    print(f"calibration ({summary['kind']}, {summary['hardware']}) written to {args.output}: "
          f"{summary['rows']} rows, {len(summary['ops'])} op kinds, data sha256 {summary['data_sha256'][:12]}")
    print(f"  in-sample median error: analytical {f['analytical_median_error']:.1%}, calibrated "
          f"{f['calibrated_median_error']:.1%} (held-out figures: experiments/bench/calibration.py)")
    if summary.get("skipped"):
        print(f"  {len(summary['skipped'])} op(s) skipped, e.g. {summary['skipped'][0]['key'][:80]}: "
              f"{summary['skipped'][0]['reason']}")
    return 0


def _errors(pred: np.ndarray, meas: np.ndarray) -> dict:
    e = np.abs(pred / meas - 1.0)
    return {"median": float(np.median(e)), "worst": float(np.max(e))}


def _fit_summary(cal, samples, measured) -> dict:
    meas = np.asarray(measured)
    a = _errors(np.array([s.analytical_s for s in samples]), meas)
    c = _errors(cal.predict_seconds(samples), meas)
    return {"analytical_median_error": a["median"], "analytical_worst_error": a["worst"],
            "calibrated_median_error": c["median"], "calibrated_worst_error": c["worst"]}


def host_graphs(models: list[str] | None) -> list[tuple[str, Any]]:
    """(label, graph) of what ``calibrate --host`` times: ``models`` (built-in names, ONNX files), or
    every built-in model and the zoo's files plus the probe models (``tuner.calibrate_probes``:
    every activation kind, large fully connected layers, grouped convolutions, data movement, masks
    and selections in context, whatever the sources hold)."""
    from tuner.calibrate_host import default_sources, load_source, source_label
    graphs, labels = [], set()
    for src in models or default_sources():
        label = source_label(src)
        label = label if label not in labels else f"{label}({src})"
        labels.add(label)
        graphs.append((label, load_source(src)))
    if not models:
        from tuner.calibrate_probes import probe_graphs
        graphs += probe_graphs()
    return graphs


def _host(args) -> dict:
    import sim
    from tuner.calibrate_host import TimingOptions, collect_ops, measure_ops, op_key
    from tuner.calibration import (fit_calibration, host_sample, left_out_by_excess, machine_fingerprint, model_weights,
                                   reference_host_of, slow_phase_excess, without_models)
    if args.rounds < 1:
        raise CLIError(f"--rounds must be >= 1, got {args.rounds}")
    if args.max_per_op < 1:
        raise CLIError(f"--max-per-op must be >= 1, got {args.max_per_op}")
    if not (args.time_budget > 0 and math.isfinite(args.time_budget)):
        raise CLIError(f"--time-budget must be > 0 seconds, got {args.time_budget}")
    if not (args.min_time >= 0 and math.isfinite(args.min_time)):
        raise CLIError(f"--min-time must be >= 0 seconds, got {args.min_time}")
    import onnxruntime as ort
    reference_floor, reference_s, reference_split = (
        read_reference(args.reference, machine_fingerprint()["fingerprint"], ort.__version__) if args.reference
        else (float("inf"), {}, {}))
    ort.set_default_logger_severity(3)  # its "unused initializer" notes are not the user's business
    t0 = time.perf_counter()
    host = sim.load_hw(args.hw).host if args.hw else sim.hw.config.HostConfig()
    ops = [o.strip() for o in args.ops.split(",") if o.strip()] if args.ops else None
    graphs = host_graphs(args.models)
    # in context first: whole models with onnxruntime's profiler (tuner.calibrate_context); one-node
    # timing only for the ops of models onnxruntime could not run whole
    from tuner.calibrate_context import (DEFAULT_REST, GATE_SHARE, PHASE_EXPONENT, PHASE_PROBE, PhaseGate,
                                         phase_probe, profile_models, row_samples)
    from tuner.calibrate_control import measure_control, probe_cases
    load_before = os.getloadavg()
    from tqdm import tqdm
    passes = 3  # profile_models' default blocks: one pass over the models per block of plain runs
    # control flow's own cost first: the models' rows leave it out (Profiled.control_s)
    with tqdm(total=len(probe_cases()), desc="calibrate --host (control flow)", unit="pair", file=sys.stderr,
              leave=False, disable=not progress_enabled(args), dynamic_ncols=True) as cf_bar:
        control = measure_control(on_step=lambda _: cf_bar.update(1))
    budget = max(1.0, args.time_budget - (time.perf_counter() - t0))
    # a later block of a model with no block in the machine's fast phase yet waits a little for it
    # (calibrate_context.PhaseGate), and the lowest probe latency read is kept in the file: how fast
    # this machine runs in that phase. A reference's starts it: a run that never reaches that speed
    # has every model brought to it (calibrate_context.phase_corrected). It reads the probe again
    # right after each block too: a block is in the fast phase when the readings on both sides are
    gate = PhaseGate(phase_probe(), floor_s=reference_floor, total_wait_s=GATE_SHARE * LATER_PASSES * budget,
                     read_after=True)
    with tqdm(total=passes * len(graphs), desc="calibrate --host (models in context)", unit="model",
              file=sys.stderr, leave=False, disable=not progress_enabled(args), dynamic_ncols=True) as ctx_bar:
        def tick(label: str) -> None:
            if ctx_bar.n >= ctx_bar.total:  # a pass over the models left in a slower phase
                ctx_bar.total += 1
            ctx_bar.set_postfix_str(label[:40], refresh=False)
            ctx_bar.update(1)
        # the later passes' blocks start within LATER_PASSES of the budget (on a 2-core EPYC the
        # first pass took 101 s, and with passes started only within half of 240 s the models got
        # two blocks each where calibration_unseen.py gives a file three: calibrated 4-15 % slower);
        # the blocks of models still in a slower phase than most within SLOW_PASSES_END, the rest for
        # one-node timing and the fit
        profiled, failed = profile_models(graphs, rounds=args.rounds, budget_s=LATER_PASSES * budget, blocks=passes,
                                          on_step=tick, slow_passes=SLOW_PASSES, slow_budget_s=SLOW_PASSES_END * budget,
                                          control=control, gate=gate, reference=reference_s,
                                          reference_split=reference_split)
    load_after = os.getloadavg()
    ctx = [r for p in profiled for r in p.rows if not ops or r.node.op in ops]
    # each row with the bytes a run of its model touches; a one-node row below with its own (it ran alone)
    samples = row_samples(ctx, host, graphs)
    seconds = [r.seconds for r in ctx]
    rows = [{"op": r.node.op, "key": op_key(r.node), "model": r.model, "node": r.node.name, "measured_s": r.seconds,
             "in_context": True} for r in ctx]
    failed_labels = {lb for lb, _ in failed}
    items = collect_ops([(lb, g) for lb, g in graphs if lb in failed_labels], ops=ops, max_per_op=args.max_per_op)
    if not items and not ctx:
        raise CLIError(f"calibrate: no host op to time ({'none of --ops ' + args.ops if ops else 'the models have none'})")
    bar = tqdm(total=len(items), desc="calibrate --host (one-node)", unit="op", file=sys.stderr, leave=False,
               disable=not progress_enabled(args) or not items, dynamic_ncols=True)
    budget = max(1.0, args.time_budget - (time.perf_counter() - t0))

    def step(h):
        bar.set_postfix_str(h.op, refresh=False)
        bar.update(1)

    measured, skipped, facts = measure_ops(items, TimingOptions(min_time_s=args.min_time), budget_s=budget,
                                           on_step=step) if items else ([], [], {})
    bar.close()
    # timed alone: no activation shares the op's kernel
    samples += [host_sample(m.op.node, host, users=lambda v: ()) for m in measured]
    seconds += [m.seconds for m in measured]
    rows += [{"op": m.op.op, "key": m.op.key, "model": m.op.model, "measured_s": m.seconds, "in_context": False}
             for m in measured]
    skipped = [(lb, f"onnxruntime cannot run the whole model: {why}") for lb, why in failed] + skipped
    if not samples:
        raise CLIError("calibrate: no host op could be timed (" + "; ".join(f"{k}: {r}" for k, r in skipped[:2]) + ")")
    facts = {"intra_op_threads": ort.SessionOptions().intra_op_num_threads, "run_overhead_s": None,
             "dispatch_s": None, **facts, "wall_s": time.perf_counter() - t0,
             "whole_models": {p.model: {"median_s": p.whole_s, "best_s": p.best_s, "profiled_run_s": p.profiled_run_s,
                                        "kernels_s": float(sum(p.kernel_s.values())), "runs": p.runs,
                                        "load": list(p.load), "parallel_speedup": _finite(p.speedup),
                                        "reprofiled": p.reprofiled,
                                        "block_speedups": [_finite(v) for v in p.block_speedups],
                                        "block_probe_s": [_finite(v) for v in p.block_probe_s],
                                        "block_after_s": [_finite(v) for v in p.block_after_s],
                                        "block_s": [_finite(v) for v in p.block_s],
                                        "block_spread": [_finite(v) for v in p.block_spread],
                                        "phase_factor": p.phase_factor, "sha256": p.sha256,
                                        "timed_fast": gate.timed_fast(p), "from_reference": p.from_reference,
                                        "split_from_reference": p.split_from_reference,
                                        # each node's seconds per execution: what a later
                                        # calibration's --reference lends with the latency
                                        "node_s": {r.node.name: r.seconds for r in p.rows}}
                              for p in profiled}}
    fp = machine_fingerprint()
    # every model weighs the same in the fit (tuner.calibration.model_weights); a one-node row
    # counts once in its model's time
    row_models = [r.model for r in ctx] + [m.op.model for m in measured]
    weights = model_weights(row_models, [r.per_run_s for r in ctx] + [m.seconds for m in measured])
    fit_kw = {"kind": "host", "fingerprint": fp["fingerprint"], "hardware": fp["hardware"],
              "rows": rows, "reference_host": reference_host_of(host)}
    # a model timed out of the fast phase (the gate's rule) leaves the fit when it ran slower than
    # the other models' fit predicts (tuner.calibration.SLOW_MODEL_EXCESS). By the speed-up's rule
    # the candidates missed a model timed 2x slow after readings at 1.12-1.27x the floor (K53 of
    # runs.md: the zoo's resnet50 at 74-75 ms, 38 calm, and the fit put six unseen convolutional
    # networks +38 to +67 %; refitted on the gate's rule, 16 / 9 / 15 -> 16 / 15 / 21)
    phases = phases_of(profiled, gate)
    # the reference's floor, and this run's own lowest reading: whether it reached the reference's speed
    reference = {"file": os.path.abspath(args.reference), "probe_floor_s": reference_floor,
                 "own_floor_s": _finite(gate.lowest_s), "latencies": len(reference_s),
                 "splits": len(reference_split),
                 "taken": phases["from_reference"]} if args.reference else None
    excess = slow_phase_excess(samples, seconds, row_models, phases["suspects"], weights, **fit_kw)
    left_out = left_out_by_excess(excess)
    weights = without_models(weights, row_models, [r["op"] for r in rows], left_out)
    cal = fit_calibration(samples, seconds, **fit_kw, weights=weights, control=control,
                          meta={"machine": fp, "onnxruntime": ort.__version__, "session_options": "default",
                                "intra_op_threads": facts["intra_op_threads"], "run_overhead_s": facts["run_overhead_s"],
                                "dispatch_s": facts["dispatch_s"], "in_context_rows": len(ctx),
                                "whole_models": facts["whole_models"], "rest": DEFAULT_REST,
                                "slow_phase_excess": excess, "left_out": left_out,
                                "profiler_overhead_s": profiled[0].overhead_s if profiled else None,
                                "phase_probe": PHASE_PROBE, "phase_probe_floor_s": _finite(gate.floor_s),
                                "phase_reference": reference,
                                "phase_exponent": PHASE_EXPONENT,
                                "timing": "each model alone: plain session (latency), then profiled session; "
                                          "3 passes of plain blocks",
                                "load_average": {"before": list(load_before), "after": list(load_after)},
                                "models": [label for label, _ in graphs], "timing_s": facts["wall_s"]})
    cal.save(args.output)
    kinds: dict[str, int] = {}
    for r in rows:
        kinds[r["op"]] = kinds.get(r["op"], 0) + 1
    return {"output": args.output, "kind": "host", "hardware": cal.hardware, "fingerprint": cal.fingerprint,
            "data_sha256": cal.data_sha256, "rows": len(rows), "ops": kinds,
            "skipped": [{"key": k, "reason": r} for k, r in skipped], "intra_op_threads": facts["intra_op_threads"],
            "run_overhead_s": facts["run_overhead_s"], "dispatch_s": facts["dispatch_s"],
            "onnxruntime": ort.__version__,
            "in_context_rows": len(ctx), "fit": _fit_summary(cal, samples, seconds), "wall_s": time.perf_counter() - t0,
            "control_flow": control.to_json(),
            "phases": {**phases, "left_out": left_out, "probe_floor_s": _finite(gate.floor_s),
                       "waited_s": gate.waited_s, "reference": reference}}


def read_reference(path: str, fingerprint: str, onnxruntime: str
                   ) -> tuple[float, dict[str, float], dict[str, dict[str, float]]]:
    """What the host calibration at ``path`` (``--reference``) lends this one: the phase probe's
    lowest latency, and the latency of each model it timed in the fast phase (sha256 of the ONNX
    bytes -> seconds, ``calibrate_context.phase_corrected``), the latter only when it was timed with
    this ``onnxruntime`` version; and of those models, the seconds of each node in context
    (``whole_models[m].node_s``, node name -> seconds per execution) where the file keeps them: the
    split of the latency between the model's ops (``calibrate_context.with_split``). One measured on
    this machine (``fingerprint``), with this version's probe; one-line errors otherwise."""
    from tuner.calibrate_context import PHASE_PROBE
    from tuner.calibration import read_calibration
    cal = read_calibration(path)
    if cal.kind != "host":
        raise CLIError(f"calibrate: --reference {path} is a {cal.kind} calibration; give a host calibration of "
                       "this machine")
    if cal.fingerprint != fingerprint:
        raise CLIError(f"calibrate: --reference {path} was measured on another machine ({cal.hardware})")
    floor = cal.meta.get("phase_probe_floor_s")
    if cal.meta.get("phase_probe") != PHASE_PROBE or not isinstance(floor, (int, float)) \
            or not (math.isfinite(floor) and floor > 0):
        raise CLIError(f"calibrate: --reference {path} has no lowest latency of this version's phase probe "
                       "(meta.phase_probe_floor_s); use a calibration made by this version")
    whole = cal.meta.get("whole_models") if cal.meta.get("onnxruntime") == onnxruntime else None
    models = [v for v in (whole.values() if isinstance(whole, dict) else ()) if isinstance(v, dict)]
    # a model it timed in the fast phase itself; one it brought there, or took from its own
    # reference, is an estimate or an older run's
    latencies = {v["sha256"]: float(v["median_s"]) for v in models
                 if v.get("timed_fast") is True and isinstance(v.get("sha256"), str)
                 and v["sha256"] and isinstance(v.get("median_s"), (int, float)) and math.isfinite(v["median_s"])
                 and v["median_s"] > 0}
    splits = {v["sha256"]: {n: float(x) for n, x in v["node_s"].items()} for v in models
              if v.get("sha256") in latencies and isinstance(v.get("node_s"), dict)
              and v["node_s"] and all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0
                                      for x in v["node_s"].values())}
    return float(floor), latencies, splits


def phase_warning(ph: dict) -> str:
    """The one-line warning of a host calibration with models profiled in a slower phase
    (``phases_of``, with ``left_out``). When most were, the models kept ran slow too: on a 2-core
    EPYC, three calibrations with 52-55 of 88 models read slow predicted the median model 8-16 %
    high, one of them VGG-16-BN +94 % (docs/TUNING.md, the sixteenth session), where the others'
    rows carry a few slow ones. Most models can be timed out of the fast phase while their
    speed-ups read fast (K39: 79 of 88 with no block in it, 42 read slow by the speed-up). The
    models brought to the fast phase by the probe's latency (``calibrate_context.phase_corrected``)
    are counted with the largest cut: the correction centres a slow period's blocks, which still
    spread over 0.72-1.36x of their fast latency (experiments/results/phase_levels/)."""
    from tuner.calibrate_context import BLOCK_GAP, BLOCK_SPREAD, FAST_GAP, PROFILE_GAP, in_fast_phase
    out = ph.get("left_out", [])
    never = ph.get("no_fast_block", [])
    never = (f"; {len(never)} had no block timed with the phase probe within {FAST_GAP:.2f}x its lowest latency "
             f"({ph['probe_floor_s'] * 1e3:.3f} ms)" if never and ph.get("probe_floor_s") else "")
    slowest = (f" (slowest {ph['slowest']}: onnxruntime's threads sped a small model up {ph['speedup_min']:.2f}x "
               f"against {ph['speedup_reference']:.2f}x in its faster phase)" if ph["slow"] else "")
    sus = ph.get("suspects", ph["slow"])
    left = (f"; {len(out)} of the {len(sus)} timed out of the fast phase ran slower than the other models predict "
            "and were left out of the fit" if out else "")
    moved = ph.get("phase_corrected", [])
    moved = (f"; {len(moved)} were brought to the fast phase by the phase probe's latency (the largest cut "
             f"x{ph['phase_factor_min']:.2f}), which takes out the bias of a slow period but not its spread"
             if moved else "")
    prof = ph.get("profile_slowed", [])
    prof = (f"; {len(prof)} kept a profile whose kernels ran over {PROFILE_GAP:.1f}x their model's plain latency"
            if prof else "")
    slowed = ph.get("block_slowed", [])
    slowed = (f"; {len(slowed)} ran a block over {BLOCK_GAP:.1f}x their profiled runs, not counted as timed in the "
              "fast phase" if slowed else "")
    spread = ph.get("block_spread", [])
    spread = (f"; {len(spread)} had a block whose median run was over {BLOCK_SPREAD:.1f}x its fastest, its slower "
              "runs left out" if spread else "")
    took = ph.get("from_reference", [])
    took = (f"; {len(took)} took the latency the reference timed them at in the fast phase" if took else "")
    carry = (", and most models were timed in a slower phase" if ph.get("slow_as_a_whole")
             else ", the others' rows carry it")
    ref = ph.get("reference")
    reached = (f"; this run's lowest reading {ref['own_floor_s'] * 1e3:.3f} ms against the reference's "
               f"{ref['probe_floor_s'] * 1e3:.3f}" if ref and ref.get("own_floor_s")
               and not in_fast_phase(ref["own_floor_s"], ref["probe_floor_s"]) else "")
    advice = ("rerun calibrate when the machine is steady" if ref else
              "rerun calibrate when the machine is steady, or with --reference an earlier calibration made then")
    return (f"warning: {len(ph['slow'])} model(s) profiled in a slower phase of the machine{slowest}{left}{never}"
            f"{carry}{prof}{slowed}{spread}{moved}{took}{reached}: {advice}")


def phases_of(profiled, gate: Any = None) -> dict:
    """The machine's phases over the profiles the fit keeps (``calibrate_context.parallel_speedup``):
    the lowest, median and highest speed-up, the faster phase's (``phase_reference``), the models
    profiled again, and the models whose profile is from a slower phase
    (``calibrate_context.slower_than_most``), which the calibration carries unless it leaves them
    out of the fit (``tuner.calibration.SLOW_MODEL_EXCESS``); with the calibration's ``gate``
    (``calibrate_context.PhaseGate``: its rule on the probe's latency), the models with no block in
    the fast phase; whether most models were in either list; and the models whose times were
    brought to the fast phase (``calibrate_context.phase_corrected``), with the lowest factor."""
    from tuner.calibrate_context import BLOCK_SPREAD, phase_reference, profile_slowed, slower_than_most
    sp = {p.model: p.speedup for p in profiled if math.isfinite(p.speedup)}
    mid = float(np.median(list(sp.values()))) if sp else float("nan")
    slow = slower_than_most(sp)
    never = sorted(p.model for p in profiled if not gate.timed_fast(p)) if gate is not None else []
    # the models the fit may leave out (``slow_phase_excess``): by the gate's rule, those with no
    # block in the fast phase or profiled out of it, but for one that took the latency an earlier
    # calibration timed it at in that phase (``--reference``); without a gate, those read slow by the speed-up
    suspects = sorted(p.model for p in profiled if not gate.in_phase(p) and not p.from_reference) \
        if gate is not None else slow
    return {"speedup_min": _finite(min(sp.values(), default=float("nan"))),
            "slowest": min(sp, key=sp.get, default=None), "speedup_median": _finite(mid),
            "speedup_max": _finite(max(sp.values(), default=float("nan"))),
            "speedup_reference": _finite(phase_reference(sp)),
            "reprofiled": sorted(p.model for p in profiled if p.reprofiled), "slow": slow, "no_fast_block": never,
            "suspects": suspects,
            # profiles slower than their models' blocks (``calibrate_context.profile_slowed``)
            "profile_slowed": sorted(p.model for p in profiled if profile_slowed(p)) if gate is not None else [],
            # a block slower than its model's profile (``calibrate_context.block_slowed``)
            "block_slowed": sorted(p.model for p in profiled if any(p.block_slowed)),
            # a block's slower runs left out (``calibrate_context.block_latency``)
            "block_spread": sorted(p.model for p in profiled if any(v > BLOCK_SPREAD for v in p.block_spread)),
            # most models read slow (``phase_warning``)
            "slow_as_a_whole": 2 * max(len(slow), len(never)) > len(profiled),
            # brought to the fast phase (``calibrate_context.phase_corrected``)
            "phase_corrected": sorted(p.model for p in profiled if p.phase_factor < 1.0 and not p.from_reference),
            # or to the latency an earlier calibration timed them at in the fast phase
            "from_reference": sorted(p.model for p in profiled if p.from_reference),
            # and its split between the model's nodes (``calibrate_context.with_split``)
            "split_from_reference": sorted(p.model for p in profiled if p.split_from_reference),
            "phase_factor_min": _finite(min((p.phase_factor for p in profiled if not p.from_reference),
                                            default=1.0))}


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _device(args) -> dict:
    import sim
    from tuner.calibrate_device import measure_with, read_rows, row_record, row_sample
    from tuner.calibration import fit_calibration
    t0 = time.perf_counter()
    hw = sim.load_hw(args.hw)
    rows = read_rows(args.measurements, need_measured=args.measurer is None)
    if args.measurer:
        rows = measure_with(args.measurer, rows, args.measurements)
    samples = [row_sample(r, hw) for r in rows]
    measured = [r.measured_s for r in rows]
    cal = fit_calibration(samples, measured, kind="device", fingerprint=hw.fingerprint(), hardware=hw.name,
                          rows=[row_record(r) for r in rows], meta={"measurements": args.measurements})
    cal.save(args.output)
    kinds: dict[str, int] = {}
    for r in rows:
        kinds[r.op] = kinds.get(r.op, 0) + 1
    return {"output": args.output, "kind": "device", "hardware": hw.name, "fingerprint": cal.fingerprint,
            "data_sha256": cal.data_sha256, "rows": len(rows), "ops": kinds, "skipped": [],
            "fit": _fit_summary(cal, samples, measured), "wall_s": time.perf_counter() - t0}
