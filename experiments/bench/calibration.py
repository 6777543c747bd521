"""Does the learned calibration pay? (issue 19, part 3)

1. Host: every node of the built-in models and the zoo's ONNX files, timed *in context* on this
   machine: each whole model run alone by onnxruntime (a plain session with the default options for
   its latency, then a profiled session for its kernels; ``tuner.calibrate_context``, the code
   behind ``accel-tune calibrate --host``), each node's share of the model's plain latency. The
   figures are given for each way of sharing the run's rest (``share_rest``: equal per node, in
   proportion to kernel time, a per-node constant learned across models); the tables use the
   default (``DEFAULT_REST``). Errors |predicted / measured - 1| of the analytical host model
   (the default ``HostConfig``), then of the calibration, each row predicted by a calibration
   that never saw it:
   - held out by op kind: for each kind, fit on the other kinds, predict this one;
   - held out by model family (resnet, mobilenet, efficientnet, bert, detector, control): fit on
     the rows of the other families whose shapes no model of the family contains.
   Target: calibrated median error <= half the analytical one. Without ``--models``, the rows of
   the probe models that ``calibrate --host`` adds to its default sources (``tuner.calibrate_probes``:
   every activation kind behind a convolution) are in every fit; they are not models of the tables.
2. Whole models: the predicted all-on-host latency (``graph_cost`` of the unpartitioned graph,
   what ``tune --calibration CAL.json --json`` reports as ``baselines.all_host.latency_s``)
   against onnxruntime's median latency of the whole model in a plain session (default session
   options, no profiler, one session open at a time), with three calibrations: fitted on every
   row (in-sample: what ``calibrate --host``, which times these models, gives ``tune``); with the
   model held out (no row of any of its op and shape pairs, from any model: a model the
   calibration never saw); with its family held out (stricter still).
   Target: within 20 % in-sample and on the real networks never seen (the family column is
   reported too, and byoc_demo, a toy, held out: ``TOYS``).
3. Partition decisions: ``tune --trials 0`` (default schedules) with and without the
   calibration fitted on all the host data, on presets whose host model differs: the offloaded
   units and the plan's latency.
4. Device: the measured A100 operator rows (``../shared/oracle/llm/measured_ops.jsonl``) costed
   on ``--device-hw`` (default ``cloud-npu``; ``a100-sxm-80gb`` when that preset exists), held
   out by op kind and by sweep (the source CSV the rows come from).

    python experiments/bench/calibration.py [--json] [--out DIR] [--models M ...] [--rounds N]

It ends with the two targets, MET or NOT MET, on one line each.

The timings share the machine with whatever else runs: the load average before and after is
written with the results (DIR, default experiments/results/calibration/: results.json, and
rows.jsonl.gz, every timed row with the fit's features, to look into a run offline).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
ORACLE = ROOT.parent / "shared" / "oracle" / "llm" / "measured_ops.jsonl"
FAMILIES = ("resnet", "mobilenet", "efficientnet", "bert", "detector", "control")


# The second half is "real models the calibration never saw": byoc_demo is TVM's 19 us
# control-flow demo (ten ops on 8 x 8 x 8 tensors, random weights), which the bench still holds out
# and prints, but not a real network. Its ops take 0.01-3 us each and onnxruntime's profiler
# records whole microseconds (truncated: the same op reads the same integer run after run), so
# how its 19 us split over its ops is known to about 1 us an op, and a fit that never saw it
# predicts it within +-30 % (docs/TUNING.md, "Where target 2 stands after the ninth session").
TOYS = frozenset({"byoc_demo"})


def family(label: str) -> str:
    if label.startswith("probe:"):
        return "probe"
    for f, words in (("resnet", ("resnet",)), ("mobilenet", ("mobilenet",)), ("efficientnet", ("efficientnet",)),
                     ("bert", ("bert",)), ("detector", ("ssd", "detector")), ("control", ("byoc",))):
        if any(w in label for w in words):
            return f
    return label


def errors(pred, meas) -> dict:
    e = np.abs(np.asarray(pred) / np.asarray(meas) - 1.0)
    return {"rows": int(len(e)), "median": float(np.median(e)), "worst": float(np.max(e))}


# ------------------------------------------------------------------------------------ host data
def host_data(sources: list[str], rounds: int, probes: bool = True):
    """Whole models, each alone: its plain latency, then its kernels under onnxruntime's profiler;
    each node's time in context (``tuner.calibrate_context``); with ``probes``, the probe models
    ``calibrate --host`` adds to its default sources (their rows train, they are not a model
    of the whole-model table)."""
    from tuner.calibrate_context import profile_models
    from tuner.calibrate_host import load_source, op_key, source_label, walk_nodes
    graphs, seen = [], set()
    for src in sources:
        label = source_label(src)
        label = f"zoo:{label}" if src.endswith(".onnx") else label
        label = label if label not in seen else f"{label}#{len(seen)}"
        seen.add(label)
        graphs.append((label, load_source(src)))
    if probes:  # what `calibrate --host` adds to its default sources (tuner.calibrate_probes)
        from tuner.calibrate_probes import probe_graphs
        graphs += probe_graphs()
    fam_of_key: dict[str, set[str]] = {}
    for label, g in graphs:
        for n in walk_nodes(g):
            fam_of_key.setdefault(op_key(n), set()).add(family(label))
    t0 = time.perf_counter()
    # the passes calibrate --host makes over the models left in a slower phase than most
    from tuner.cli.cmd_calibrate import SLOW_PASSES
    from tuner.calibrate_control import measure_control
    control = measure_control()  # as calibrate --host: control flow's own cost, out of the rows
    # as calibrate --host, a later block waits for the machine's fast phase (no budget here, so no
    # share of one to stop at), and each block is read on both sides
    from tuner.calibrate_context import PhaseGate, phase_probe
    gate = PhaseGate(phase_probe(), read_after=True)
    profiled, failed = profile_models(graphs, rounds=rounds, slow_passes=SLOW_PASSES, control=control, gate=gate)
    return graphs, profiled, failed, time.perf_counter() - t0, fam_of_key, control, gate


def fit(samples, meas, ref, weights=None, control=None):
    """A host calibration of ``samples``; ``weights`` as ``calibrate --host`` gives them
    (``calibrate_context.row_weights``: every model the same); ``control``: the measured cost of
    control flow (``tuner.calibrate_control``), which ``calibrate --host`` keeps in the file."""
    from tuner.calibration import fit_calibration
    return fit_calibration(samples, meas, kind="host", fingerprint="bench", hardware="bench", rows=[],
                           reference_host=ref, weights=weights, control=control)


def left_out_models(profiled, graphs, ref_host, ref, gate) -> list[str]:
    """The models ``calibrate --host`` leaves out of its fit (``tuner.calibration.slow_phase_excess``,
    ``left_out_by_excess``; its candidates by the timing's ``gate``), judged on the rows with the
    default rest."""
    from tuner.calibrate_context import (DEFAULT_REST, UNNAMED_TO_NEXT, per_node_rest, row_samples, row_weights,
                                         with_rest)
    from tuner.calibration import left_out_by_excess, slow_phase_excess
    from tuner.cli.cmd_calibrate import phases_of
    prof = [with_rest(p, DEFAULT_REST, per_node_rest(profiled), UNNAMED_TO_NEXT) for p in profiled]
    rows = [r for p in prof for r in p.rows]
    return left_out_by_excess(slow_phase_excess(
        row_samples(rows, ref_host, graphs), [r.seconds for r in rows], [r.model for r in rows],
        phases_of(profiled, gate)["suspects"], row_weights(rows), kind="host", fingerprint="bench", hardware="bench",
        rows=[], reference_host=ref))


def held_out(samples, meas, groups_of, ref, weights=None) -> np.ndarray:
    """Each row predicted by a calibration fitted without its group(s): ``groups_of[i]`` is the set
    of groups row i belongs to; a row is held out of the fit for group G when G is in its set."""
    pred = np.full(len(samples), np.nan)
    every = sorted(set().union(*groups_of))
    for g in every:
        test = [i for i in range(len(samples)) if g in groups_of[i]]
        train = [i for i in range(len(samples)) if g not in groups_of[i]]
        if not test or len(train) < 8:
            continue
        cal = fit([samples[i] for i in train], [meas[i] for i in train], ref,
                  None if weights is None else [weights[i] for i in train])
        p = cal.predict_seconds([samples[i] for i in test])
        for i, v in zip(test, p):
            # a row in several groups keeps the prediction of the first group that held it out
            pred[i] = v if np.isnan(pred[i]) else pred[i]
    return pred


def evaluate(mode, graphs, profiled, failed, fam_of_key, ref_host, ref, preset, unnamed=None, control=None,
             left_out=()):
    """The held-out figures with the run's rest shared out by ``mode`` (``calibrate_context.share_rest``).
    For ``learned`` the per-node constant comes only from the models a calibration is fitted on.
    ``left_out``: the models every fit leaves out (``left_out_models``)."""
    import sim
    from tuner.calibrate_context import UNNAMED_TO_NEXT, per_node_rest, row_samples, row_weights, with_rest
    from tuner.calibrate_host import op_key
    unnamed = UNNAMED_TO_NEXT if unnamed is None else unnamed
    from tuner.costing import CostOptions, KernelCoster, graph_cost
    c_all = per_node_rest(profiled)
    prof = [with_rest(p, mode, c_all, unnamed) for p in profiled]
    rows = [r for p in prof for r in p.rows]
    samples = row_samples(rows, ref_host, graphs)
    meas = [r.seconds for r in rows]
    analytical = [s.analytical_s for s in samples]
    # a row is held out with its op kind; by family: with every family whose models hold its shape
    by_kind = held_out(samples, meas, [{r.node.op} for r in rows], ref, row_weights(rows, left_out))
    fams = sorted({family(label) for label, _ in graphs})
    # by family: the rows of the other families, their rest shared with the constant of those models only
    by_family = np.full(len(rows), np.nan)
    cal_wo = {}
    for f in fams:
        train_models = [p for p in profiled if family(p.model) != f]
        c = per_node_rest(train_models)
        tr = [r for p in train_models for r in with_rest(p, mode, c, unnamed).rows
              if f not in fam_of_key.get(op_key(r.node), set())]
        if len(tr) < 8:
            continue
        cal_wo[f] = fit(row_samples(tr, ref_host, graphs), [r.seconds for r in tr], ref,
                        row_weights(tr, left_out), control)
        test = [i for i, r in enumerate(rows) if family(r.model) == f or f in fam_of_key.get(op_key(r.node), set())]
        pred = cal_wo[f].predict_seconds([samples[i] for i in test])
        for i, v in zip(test, pred):
            by_family[i] = v if np.isnan(by_family[i]) else by_family[i]
    ok_k, ok_f = ~np.isnan(by_kind), ~np.isnan(by_family)
    host = {
        "rest": mode, "per_node_rest_s": c_all if mode == "learned" else None,
        "rows": len(rows), "op_kinds": len({r.node.op for r in rows}), "skipped": len(failed),
        "analytical": errors(analytical, meas),
        "held_out_by_op_kind": {"analytical": errors(np.array(analytical)[ok_k], np.array(meas)[ok_k]),
                                "calibrated": errors(by_kind[ok_k], np.array(meas)[ok_k])},
        "held_out_by_family": {"analytical": errors(np.array(analytical)[ok_f], np.array(meas)[ok_f]),
                               "calibrated": errors(by_family[ok_f], np.array(meas)[ok_f])},
    }
    per_kind = {}
    for kind in sorted({r.node.op for r in rows}):
        idx = [i for i, r in enumerate(rows) if r.node.op == kind and ok_k[i]]
        if idx:
            per_kind[kind] = {"rows": len(idx),
                              "analytical": errors([analytical[i] for i in idx], [meas[i] for i in idx])["median"],
                              "calibrated": errors(by_kind[idx], [meas[i] for i in idx])["median"]}
    host["per_kind_median"] = per_kind
    # -- whole models, three ways: the calibration fitted on every row (what ``tune --calibration``
    # gets from ``calibrate --host`` on these models); the model held out (no row of its own op
    # and shape, from any model); its family held out (as above: every row of the family's models
    # and every row whose shape a model of the family holds)
    from tuner.calibrate_host import walk_nodes
    hw0 = sim.load_hw(preset)
    whole = []
    graph_of = dict(graphs)
    full = fit(samples, meas, ref, row_weights(rows, left_out), control)
    keys_of = {label: {op_key(n) for n in walk_nodes(g)} for label, g in graphs}
    for label, why in failed:
        whole.append({"model": label, "error": why[:120]})
    for p in prof:
        if family(p.model) == "probe":
            continue
        g, f = graph_of[p.model], family(p.model)
        got = p.whole_s
        row = {"model": p.model, "family": f, "measured_s": got, "best_run_s": p.best_s, "runs": p.runs,
               "profiled_run_s": p.profiled_run_s, "kernels_s": float(sum(p.kernel_s.values())),
               "nodes": len(p.kernel_s), "load": list(p.load), "parallel_speedup": p.speedup}
        row["analytical_s"] = graph_cost(g, KernelCoster(hw0), CostOptions(fidelity="analytical")).total.latency_s

        def predicted(cal) -> float:
            opts = CostOptions(fidelity="analytical", calibration=cal.for_graph(g))
            return graph_cost(g, KernelCoster(hw0, opts=opts), opts).total.latency_s
        row["in_sample_s"] = predicted(full)
        row["in_sample_error"] = row["in_sample_s"] / got - 1.0
        others = [q for q in profiled if q.model != p.model]
        c = per_node_rest(others)
        tr = [r for q in others for r in with_rest(q, mode, c, unnamed).rows if op_key(r.node) not in keys_of[p.model]]
        row["model_held_out_s"] = predicted(fit(row_samples(tr, ref_host, graphs), [r.seconds for r in tr], ref,
                                                row_weights(tr, left_out), control))
        row["model_held_out_error"] = row["model_held_out_s"] / got - 1.0
        if f in cal_wo:
            row["calibrated_s"] = predicted(cal_wo[f])
            row["calibrated_error"] = row["calibrated_s"] / got - 1.0
            row["calibrated_error_vs_best_run"] = row["calibrated_s"] / p.best_s - 1.0
        row["analytical_error"] = row["analytical_s"] / got - 1.0
        whole.append(row)
    return host, whole


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "calibration"))
    ap.add_argument("--models", nargs="+", help="built-in names / ONNX files (default: all + the zoo)")
    ap.add_argument("--rounds", type=int, default=7, help="profiled runs of each whole model, alone (kernel medians)")
    ap.add_argument("--presets", nargs="+", default=["edge-npu", "tpu-v1-like", "cloud-npu"])
    ap.add_argument("--decision-models", nargs="+",
                    default=["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "bert_tiny",
                             "ssd_detector"])
    ap.add_argument("--device-hw", default=None)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    import sim
    from tuner.calibrate_host import default_sources
    from tuner.calibrate_context import (DEFAULT_REST, REST_MODES, UNNAMED_TO_NEXT, per_node_rest, row_samples,
                                         row_weights, with_rest)
    from tuner.calibration import reference_host_of

    t0 = time.perf_counter()
    load_before = os.getloadavg()
    ref_host = sim.hw.config.HostConfig()
    ref = reference_host_of(ref_host)
    sources = args.models or default_sources()
    graphs, profiled, failed, wall, fam_of_key, control, gate = host_data(sources, args.rounds,
                                                                          probes=not args.models)
    left_out = left_out_models(profiled, graphs, ref_host, ref, gate)
    modes = {}
    for mode in REST_MODES:
        modes[mode] = evaluate(mode, graphs, profiled, failed, fam_of_key, ref_host, ref, args.presets[0],
                               control=control, left_out=left_out)
    # the kernels with no IR name (reorders, SkipLayerNormalization) to the node that runs next, or in the rest
    alt = f"{DEFAULT_REST}, unnamed kernels {'in the rest' if UNNAMED_TO_NEXT else 'to the next node'}"
    modes[alt] = evaluate(DEFAULT_REST, graphs, profiled, failed, fam_of_key, ref_host, ref, args.presets[0],
                          unnamed=not UNNAMED_TO_NEXT, control=control, left_out=left_out)
    host, whole = modes[DEFAULT_REST]
    host["timing"] = {"wall_s": wall, "rounds": args.rounds, "failed": failed, "alone": True}
    host["left_out"] = left_out
    host["control_flow"] = control.to_json()
    host["rest_modes"] = {m: {"by_op_kind": h["held_out_by_op_kind"], "by_family": h["held_out_by_family"],
                              "whole_within_20": sum(abs(w["calibrated_error"]) <= 0.2 for w in wl if "calibrated_error" in w),
                              "whole_within_20_in_sample": sum(abs(w["in_sample_error"]) <= 0.2 for w in wl
                                                               if "in_sample_error" in w),
                              "whole_within_20_model_held_out": sum(abs(w["model_held_out_error"]) <= 0.2 for w in wl
                                                                    if "model_held_out_error" in w),
                              "whole_median_abs_error": float(np.median([abs(w["calibrated_error"]) for w in wl
                                                                         if "calibrated_error" in w])),
                              "per_node_rest_s": h.get("per_node_rest_s")}
                          for m, (h, wl) in modes.items()}
    prof = [with_rest(p, DEFAULT_REST, per_node_rest(profiled), UNNAMED_TO_NEXT) for p in profiled]
    rows = [r for p in prof for r in p.rows]
    samples = row_samples(rows, ref_host, graphs)
    meas = [r.seconds for r in rows]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    save_rows(out / "rows.jsonl.gz", prof, samples)

    # -- partition decisions, calibration on all the host data
    from tuner.tune import tune
    full = fit(samples, meas, ref, row_weights(rows, left_out), control)
    decisions = []
    for preset in args.presets:
        for name in args.decision_models:
            g = next((gr for label, gr in graphs if label == name), None)
            if g is None:
                continue
            rows = {}
            for tag, cal in (("analytical", None), ("calibrated", full)):
                try:
                    p = tune(g, preset, trials=0, progress=False, calibration=cal)
                except ValueError as e:
                    rows[tag] = {"error": str(e).splitlines()[0]}
                    continue
                rows[tag] = {"offloaded": len(p.decision.offloaded), "of": p.decision.offloadable,
                             "latency_s": p.latency_s, "all_host_s": p.baselines["all_host"].latency_s}
            if "offloaded" in rows.get("analytical", {}) and "offloaded" in rows.get("calibrated", {}):
                rows["moved"] = rows["analytical"]["offloaded"] != rows["calibrated"]["offloaded"]
            decisions.append({"preset": preset, "model": name, **rows})

    # -- device rows
    device = device_rows(args.device_hw)
    load_after = os.getloadavg()
    result = {"host": host, "whole_models": whole, "decisions": decisions, "device": device,
              "config": {"sources": sources, "rounds": args.rounds, "reference_host": ref,
                         "presets": args.presets, "python": platform.python_version(),
                         "onnxruntime": ort.__version__, "cpu_count": os.cpu_count(),
                         "load_before": load_before, "load_after": load_after,
                         "wall_s": time.perf_counter() - t0}}
    (out / "results.json").write_text(json.dumps(result, indent=1, default=float))
    if args.json:
        print(json.dumps(result, indent=1, default=float))
        return 0
    report(result)
    return 0


def save_rows(path: Path, prof, samples) -> None:
    """The timed data, so a run's figures can be looked into and refitted offline: a line per
    model (its plain latency, control flow, phase) and a line per row (its node, op and shape key,
    in-context seconds per execution, executions, matched kernel time and the fit's features,
    ``tuner.calibration.OpSample``), in the order of ``samples``."""
    import gzip
    from dataclasses import asdict
    from tuner.calibrate_host import op_key
    it = iter(samples)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for p in prof:
            f.write(json.dumps({"model": p.model, "whole_s": p.whole_s, "best_s": p.best_s, "control_s": p.control_s,
                                "parallel_speedup": p.speedup, "load": list(p.load), "runs": p.runs}) + "\n")
            for r in p.rows:
                f.write(json.dumps({"model": p.model, "node": r.node.name, "op": r.node.op, "key": op_key(r.node),
                                    "seconds": r.seconds, "executions": r.executions, "kernel_s": r.kernel_s,
                                    "sample": asdict(next(it))}) + "\n")


def device_rows(hw_name: str | None) -> dict:
    import sim
    from tuner.calibrate_device import read_rows, row_sample
    from tuner.calibration import fit_calibration
    if not ORACLE.exists():
        return {"skipped": f"{ORACLE} not found"}
    rows = read_rows(str(ORACLE))
    name = hw_name or ("a100-sxm-80gb" if "a100-sxm-80gb" in sim.hw.presets.names() else "cloud-npu")
    hw = sim.load_hw(name)
    samples = [row_sample(r, hw) for r in rows]
    meas = np.array([r.measured_s for r in rows])
    analytical = np.array([s.analytical_s for s in samples])
    out = {"hw": name, "rows": len(rows), "analytical": errors(analytical, meas)}
    sweep_of = sweeps(rows)
    for tag, group in (("held_out_by_op_kind", lambda r: r.op), ("held_out_by_sweep", lambda r: sweep_of[r.line])):
        pred = np.full(len(rows), np.nan)
        for gname in sorted({group(r) for r in rows}):
            test = [i for i, r in enumerate(rows) if group(r) == gname]
            train = [i for i, r in enumerate(rows) if group(r) != gname]
            if len(train) < 4:
                continue
            cal = fit_calibration([samples[i] for i in train], meas[train], kind="device", fingerprint="bench",
                                  hardware=name, rows=[])
            pred[test] = cal.predict_seconds([samples[i] for i in test])
        ok = ~np.isnan(pred)
        out[tag] = {"analytical": errors(analytical[ok], meas[ok]), "calibrated": errors(pred[ok], meas[ok])}
    return out


def sweeps(rows) -> dict:
    """Each row's sweep: its op and the (dimension, value) it shares with the most rows of that op
    (``matmul K=12288`` while M varies, ``softmax M=4096`` while N varies)."""
    count: dict = {}
    for r in rows:
        for kv in r.shape.items():
            count[(r.op, kv)] = count.get((r.op, kv), 0) + 1
    return {r.line: f"{r.op} {max(r.shape.items(), key=lambda kv: (count[(r.op, kv)], kv))}" for r in rows}


def report(r: dict) -> None:
    h = r["host"]
    print(f"host: {h['rows']} op instances of {h['op_kinds']} kinds timed with onnxruntime "
          f"({h['timing']['wall_s']:.0f} s; {h['skipped']} skipped); errors |pred/measured - 1|:")
    print(f"  {'':<24} {'analytical median':>18} {'worst':>9} {'calibrated median':>18} {'worst':>9}")
    for tag in ("held_out_by_op_kind", "held_out_by_family"):
        a, c = h[tag]["analytical"], h[tag]["calibrated"]
        print(f"  {tag:<24} {a['median']:>18.1%} {a['worst']:>9.1f} {c['median']:>18.1%} {c['worst']:>9.1f}"
              f"   ({c['rows']} rows; target calibrated <= half: {'met' if c['median'] <= a['median'] / 2 else 'NOT met'})")
    print("the run's rest shared out by (calibrate_context.share_rest; the results above and below use "
          f"{h['rest']!r}):")
    for m, v in h.get("rest_modes", {}).items():
        print(f"  {m:<8} by op kind {v['by_op_kind']['calibrated']['median']:6.1%} (analytical "
              f"{v['by_op_kind']['analytical']['median']:6.1%}), by family {v['by_family']['calibrated']['median']:6.1%}, "
              f"whole models within 20 %: {v.get('whole_within_20_in_sample', '-')} in-sample, "
              f"{v.get('whole_within_20_model_held_out', '-')} model held out, {v['whole_within_20']} family held out "
              f"(median |error| {v['whole_median_abs_error']:.1%})"
              + (f", per-node rest {v['per_node_rest_s'] * 1e6:.1f} us" if v.get("per_node_rest_s") else ""))
    print("whole models, all on the host, vs onnxruntime's latency (ms; calibrated: fitted on every row = in-sample, "
          "with the model held out, with its family held out):")
    print(f"  {'model':<26} {'measured':>9} {'analytical':>11} {'err':>7} {'in-sample':>10} {'err':>6} "
          f"{'model out':>10} {'err':>6} {'family out':>11} {'err':>6} {'best run':>9} {'err':>6}")
    for w in r["whole_models"]:
        if "error" in w:
            print(f"  {w['model']:<26} onnxruntime: {w['error']}")
            continue
        c = w.get("calibrated_s")
        print(f"  {w['model']:<26} {w['measured_s'] * 1e3:>9.3f} {w['analytical_s'] * 1e3:>11.2f} "
              f"{w['analytical_error']:>+7.0%} {w['in_sample_s'] * 1e3:>10.3f} {w['in_sample_error']:>+6.0%} "
              f"{w['model_held_out_s'] * 1e3:>10.3f} {w['model_held_out_error']:>+6.0%} "
              + (f"{c * 1e3:>11.3f} {w['calibrated_error']:>+6.0%} "
                 f"{w['best_run_s'] * 1e3:>9.3f} {w['calibrated_error_vs_best_run']:>+6.0%}" if c else ""))
    within = [w for w in r["whole_models"] if "calibrated_error" in w]
    n20 = sum(abs(w["calibrated_error"]) <= 0.2 for w in within)
    rows = [w for w in r["whole_models"] if "in_sample_error" in w]
    n_in = sum(abs(w["in_sample_error"]) <= 0.2 for w in rows)
    n_mo = sum(abs(w["model_held_out_error"]) <= 0.2 for w in rows)
    print(f"  within 20 % of the median: in-sample {n_in} of {len(rows)}, model held out {n_mo} of {len(rows)}, "
          f"family held out {n20} of {len(within)} calibrated, "
          f"{sum(abs(w['analytical_error']) <= 0.2 for w in within)} of {len(within)} analytical; of the best run: "
          f"{sum(abs(w['calibrated_error_vs_best_run']) <= 0.2 for w in within)} calibrated; of the profiled run "
          f"(the session the rows come from): "
          f"{sum(abs(w['calibrated_s'] / w['profiled_run_s'] - 1) <= 0.2 for w in within if 'profiled_run_s' in w)}")
    print("partition decisions (tune --trials 0), offloaded units analytical -> calibrated host:")
    for d in r["decisions"]:
        a, c = d.get("analytical", {}), d.get("calibrated", {})
        if "offloaded" not in a or "offloaded" not in c:
            continue
        print(f"  {d['preset']:<12} {d['model']:<20} {a['offloaded']:>3} -> {c['offloaded']:>3} of {a['of']:<4} "
              f"latency {a['latency_s'] * 1e3:9.3f} -> {c['latency_s'] * 1e3:9.3f} ms  all-host "
              f"{a['all_host_s'] * 1e3:9.3f} -> {c['all_host_s'] * 1e3:9.3f} ms{'  MOVED' if d.get('moved') else ''}")
    dv = r["device"]
    if "skipped" in dv:
        print(f"device: skipped ({dv['skipped']})")
    else:
        device_report(dv)
    print(f"(load average before {r['config']['load_before'][0]:.1f}, after {r['config']['load_after'][0]:.1f} "
          f"on {r['config']['cpu_count']} CPUs; wall {r['config']['wall_s']:.0f} s; left out of the fits, timed out of "
          f"the fast phase and slower than the other models predict: {', '.join(h.get('left_out', [])) or 'none'})")
    k = h["held_out_by_op_kind"]
    print(f"TARGET 1 (host, held out by op kind: calibrated median <= half the analytical): "
          f"{k['calibrated']['median']:.1%} vs {k['analytical']['median']:.1%} -> "
          f"{'MET' if k['calibrated']['median'] <= k['analytical']['median'] / 2 else 'NOT MET'}")
    real = [w for w in rows if w["model"] not in TOYS]
    n_real = sum(abs(w["model_held_out_error"]) <= 0.2 for w in real)
    met = rows and n_in == len(rows) and n_real == len(real)
    toys = "; ".join(f"{w['model']} held out {w['model_held_out_error']:+.0%}" for w in rows if w["model"] in TOYS)
    print(f"TARGET 2 (whole models within 20 % of onnxruntime's median: the zoo and built-ins with the calibration "
          f"of them, {n_in} of {len(rows)}; each real network never seen (model held out), {n_real} of {len(real)}"
          f"{f' ({toys}: a toy, not a real network)' if toys else ''}; family never seen, {n20} of {len(within)}) -> "
          f"{'MET' if met else 'NOT MET'} (in-sample, and the real networks held out)")


def device_report(dv: dict) -> None:
    print(f"device: {dv['rows']} measured A100 rows costed on {dv['hw']}; analytical median "
          f"{dv['analytical']['median']:.1%}, worst {dv['analytical']['worst']:.1%}")
    for tag in ("held_out_by_op_kind", "held_out_by_sweep"):
        a, c = dv[tag]["analytical"], dv[tag]["calibrated"]
        print(f"  {tag:<22} analytical median {a['median']:.1%} worst {a['worst']:.1%}; calibrated median "
              f"{c['median']:.1%} worst {c['worst']:.1%}")


if __name__ == "__main__":
    sys.exit(main())
