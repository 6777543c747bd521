"""A host calibration against onnxruntime on this machine, on real models it never saw (issue 19:
"the same must hold on real models the calibration never saw") or on those it timed: each model's
predicted all-on-host latency, as ``accel-tune tune --calibration CAL.json --json`` reports it
(``baselines.all_host.latency_s``), against onnxruntime's latency of the *file itself* on this
machine (default session options, one session open at a time; 3 passes over all the files, each
a fresh session with a block of runs of at least 0.2 s and 7 runs, the lowest block median: the
way ``calibrate --host`` times a model, ``tuner.calibrate_context``; up to 8 passes for a file
whose block was timed out of the machine's fast phase or off the calibration's memory bus,
``measured_s``). A file whose kept block was still timed out of that phase after every pass (the
phase probe over ``FAST_GAP`` times the calibration's lowest latency), or with the memory bus
slower or faster than during the calibration (its 64 MB fully connected probe, timed before each
pass: ``BUS_GAP``), is named and counted apart as well.

    accel-tune calibrate --host -o host.cal.json            # the built-in models and ../shared/models
    python experiments/zoo/export.py /tmp/full --set hf-full # DistilBERT-base, GPT-2, ViT-B/16 (needs torch)
    python experiments/calibration_unseen.py host.cal.json /tmp/full/*.ts.onnx [--hw edge-npu] [--json]
    python experiments/calibration_unseen.py host.cal.json --seen   # the models the calibration timed

Prints one row per model (measured, analytical, calibrated, error) and how many are within 20 %.
With ``--seen`` (or built-in model names in place of files) it checks the issue's first half, "on
the zoo and built-in models", the same way: each model exported as ``calibrate --host`` exports it
and timed apart from the calibration, minutes or hours after it, as a user's ``tune`` would be.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


# The memory bus: the calibration's 64 MB fully connected probe, timed before each pass over the
# files. The compute phase probe does not see the bus move: 20 minutes after a calibration this
# probe ran 2.48 ms against its 1.53, at a compute speed-up of 1.82-1.91x, and AlexNet (weights
# streamed from DRAM) came out -31 % (2026-11-30, runs.md J1).
BUS_PROBE = (4096, 4096)
# a pass whose bus probe ran this much slower, or faster, than the calibration's is off its bus: a
# calibration timed on a slow bus (its probe at 2.59 ms) put EfficientNet-B1 +22 % (runs.md, J4).
# Such a pass's block is timed again (``measured_s``): K48's check measured RegNetY-400MF at 9.7 ms
# (7.2-7.5 on every other check) after a phase reading in the fast phase, its bus probe at 1.29x.
BUS_GAP = 1.25


def bus_moved(bus_s: float, bus_ref: float) -> bool:
    """Whether a pass's bus probe latency ``bus_s`` is off the calibration's ``bus_ref`` by more
    than ``BUS_GAP`` either way (False when either is unknown)."""
    return bool(np.isfinite(bus_s) and np.isfinite(bus_ref) and bus_ref > 0
                and not 1 / BUS_GAP <= bus_s / bus_ref <= BUS_GAP)


def bus_probe() -> tuple[bytes, list]:
    """The calibration's bus probe (``calibrate_probes.dense_probe``) exported as ``calibrate
    --host`` exports it: (ONNX bytes, graph inputs)."""
    from tuner.calibrate_context import exported
    from tuner.calibrate_probes import dense_probe
    return exported(dense_probe(*BUS_PROBE)[1])


def calibration_bus(cal) -> float:
    """The bus probe's latency in a host calibration's timing (seconds; nan for a file without it)."""
    from tuner.calibrate_probes import dense_label
    v = (cal.meta.get("whole_models") or {}).get(dense_label(*BUS_PROBE))
    return float(v["median_s"]) if isinstance(v, dict) and isinstance(v.get("median_s"), (int, float)) else float("nan")


# How long a block of the passes that time a file again waits for the fast phase (a check has no
# budget to keep; the gate still stops waiting after GATE_MISSES waits in a row that found none).
# With calibrate --host's 2 s, K45's check of the 17 seen models (runs.md, eighteenth session) ended
# its 8 passes with MobileNetV3-Large at 5.02 ms, the probe at 0.31 ms (1.37x its floor), against
# 3.6-4.0 ms on every other check.
RETIME_WAIT_S = 10.0


def measured_s(paths: list[str], passes: int = 3, most: int = 8, bus: tuple[bytes, list] | None = None,
               floor_s: float = float("inf"), bus_ref: float = float("nan")) -> tuple[dict[str, tuple], dict[str, str]]:
    """(path -> (lowest block median, fastest run) of onnxruntime on the file, seconds; the
    machine's phase just before that block: the phase probe's speed-up and its default latency
    (``calibrate_context.phase_reading``), and whether that latency was in the fast phase
    (``PhaseGate.is_fast`` against the lowest latency of the calibration and of this timing); the
    latency of the ``bus`` probe (``bus_probe``) before the pass of that block, nan without it;
    path -> why onnxruntime could not run it). The passes go over every file in turn, each a fresh
    session, so a slow phase of the machine (seen here: tens of seconds with one model 1.5x its
    other runs) slows one block of a file, not all. A slow phase can outlast the ``passes`` (one
    did, 2026-11-29: every block of every file at 1.50-1.59x, ShuffleNet 2.41 ms against 1.41):
    then up to ``most`` passes in all time again the files whose kept block was not timed in the
    fast phase, or (given the calibration's ``bus_ref``) in a pass whose bus probe was off it by
    more than ``BUS_GAP``, each block after a wait of up to ``RETIME_WAIT_S`` for the fast phase.
    Each block waits a little for that phase, as the calibration's later blocks do
    (``calibrate_context.PhaseGate``, from ``floor_s``: the calibration's lowest probe latency,
    ``calibration_floor``), so a check holds its files to the machine speed its calibration
    measured. The rule is the gate's, the one ``calibrate --host`` waits and times again by: the
    speed-up (``slower_than_most``) read 1.6-1.8x, "fast", at slow default latencies while resnet50
    ran 75 ms against 39 (experiments/results/phase_levels/), and three checks of K41-K43
    (runs.md, seventeenth session) measured RegNetY-400MF, EfficientNet-B3, MobileViT and T5 at
    1.2-1.35x their usual latency with few of them named."""
    import onnx
    from tuner.calibrate_context import PhaseGate, _plain_blocks, phase_probe
    gate = PhaseGate(phase_probe(), floor_s=floor_s)
    blocks: dict[str, list] = {p: [] for p in paths}
    phase: dict[str, list] = {p: [] for p in paths}
    buses: dict[str, list] = {p: [] for p in paths}
    errors: dict[str, str] = {}

    def kept(p: str) -> int:
        return int(np.argmin([np.median(b) for b in blocks[p]]))

    def off(p: str) -> bool:
        i = kept(p)
        return not gate.is_fast(phase[p][i].default_s) or bus_moved(buses[p][i], bus_ref)

    def slow() -> list[str]:
        return [p for p in paths if p not in errors and blocks[p] and off(p)]
    for n in range(max(passes, most)):
        todo = [p for p in paths if p not in errors] if n < passes else slow()
        if not todo:
            break
        if n == passes:   # the passes that time again wait longer (RETIME_WAIT_S), from the same floor
            gate = PhaseGate(gate.probe, floor_s=gate.floor_s, max_wait_s=RETIME_WAIT_S)
        bus_s = float(np.median(_plain_blocks(*bus, 2, 0, 0.05, 5, 50, 1)[0])) if bus else float("nan")
        for path in todo:
            try:  # onnxruntime opens the path itself: a file with external data works too
                inputs = onnx.load(path, load_external_data=False).graph.input
                phase[path].append(gate.read())
                buses[path].append(bus_s)
                blocks[path] += _plain_blocks(str(path), inputs, 3, 0, 0.2, 7, 200, 1)
            except Exception as e:  # noqa: BLE001 - one file onnxruntime cannot run is reported
                errors[path] = str(e).splitlines()[0][:160]
    times = {}
    for p, bl in blocks.items():
        if p not in errors:
            i = kept(p)
            r = phase[p][i]
            times[p] = (float(np.median(bl[i])), min(min(b) for b in bl), r.speedup, buses[p][i], r.default_s,
                        gate.is_fast(r.default_s))
    return times, errors


def calibration_phase(cal) -> float:
    """The faster phase's speed-up during a host calibration's timing (``phase_reference`` of the
    speed-ups its file records for each model; nan for a file without them, or whose speed-ups are
    of another phase probe than ``calibrate_context.PHASE_PROBE``)."""
    from tuner.calibrate_context import PHASE_PROBE, phase_reference
    if cal.meta.get("phase_probe") != PHASE_PROBE:
        return float("nan")
    whole = cal.meta.get("whole_models") or {}
    return phase_reference({m: float(v["parallel_speedup"]) for m, v in whole.items()
                            if isinstance(v, dict) and isinstance(v.get("parallel_speedup"), (int, float))})


def calibration_floor(cal) -> float:
    """The lowest phase probe latency of a host calibration's timing (seconds; inf for a file
    without it, or of another probe than ``calibrate_context.PHASE_PROBE``)."""
    from tuner.calibrate_context import PHASE_PROBE
    v = cal.meta.get("phase_probe_floor_s")
    return float(v) if cal.meta.get("phase_probe") == PHASE_PROBE and isinstance(v, (int, float)) else float("inf")


def earlier_times(path: str, models: list[tuple[str, str]]) -> tuple[dict[str, tuple], dict[str, str]]:
    """``measured_s``'s answer for ``models`` ((label, path) pairs) read from an earlier ``--json``
    check at ``path`` (its rows matched by model label): the measurements it made, with its phase
    (its bus reading was against its own calibration's, so none here); a model it did not measure
    is named in the failures."""
    with open(path) as f:
        rows = {r["model"]: r for r in json.load(f)["rows"] if "measured_s" in r}
    times, failed = {}, {}
    for label, p in models:
        r = rows.get(label)
        if r is None:
            failed[p] = f"not measured in {path}"
            continue
        # its bus reading was against another calibration's: not compared with this one's (nan)
        times[p] = (float(r["measured_s"]), float(r["best_run_s"]), float(r["parallel_speedup"]), float("nan"),
                    float(r["probe_s"]), not r["slower_phase"])
    return times, failed


def sources(names: list[str], seen: bool, tmp: str) -> tuple[list[tuple[str, str, object]], dict[str, str]]:
    """(label, the path onnxruntime times, the graph costed) of each model; label -> why it could not
    be read. An existing file is timed as it is. A built-in model's name, and with ``seen`` every
    model ``calibrate --host`` times by default (``default_sources``: the built-ins and the zoo's
    files, whose weights may be stripped), is exported the way ``calibrate --host`` exports it
    (``calibrate_context.exported``) into ``tmp``."""
    from partition import load_onnx
    from tuner.calibrate_context import exported
    from tuner.calibrate_host import default_sources, load_source
    out, errors = [], {}

    def export(label: str, g) -> None:
        path = os.path.join(tmp, f"{len(out)}.onnx")
        with open(path, "wb") as f:
            f.write(exported(g)[0])
        out.append((label, path, g))
    # a zoo file by its file name with --seen: the zoo holds one network as two files
    todo = [(os.path.basename(n), n, os.path.exists(n)) for n in names]
    todo += [(os.path.basename(s) if os.path.exists(s) else s, s, False) for s in (default_sources() if seen else [])]
    for label, name, as_is in todo:
        try:
            if as_is:
                out.append((label, name, load_onnx(name)))
            else:
                export(label, load_source(name))
        except Exception as e:  # noqa: BLE001 - one model that cannot be read is reported
            errors[label] = str(e).splitlines()[0][:160]
    return out, errors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("calibration", help="a host calibration file (accel-tune calibrate --host)")
    ap.add_argument("onnx", nargs="*", help="ONNX files (weights inside or as external data beside them) or built-in "
                                            "model names")
    ap.add_argument("--seen", action="store_true", help="also every model calibrate --host times by default (the "
                                                        "built-ins and ../shared/models): the issue's 'on the zoo and "
                                                        "built-in models'")
    ap.add_argument("--hw", default="edge-npu", help="the preset tune runs with (the host file's costs do not depend on it)")
    ap.add_argument("--measured", metavar="CHECK.json",
                    help="take each model's measurement from an earlier --json check of the same files (matched "
                         "by model) instead of timing them: this calibration's predictions against that check's "
                         "measurements, e.g. one made on a calm machine")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_intermixed_args(argv)  # files and names before or after --seen
    if not a.onnx and not a.seen:
        ap.error("give ONNX files or model names, or --seen")
    warnings.simplefilter("ignore")
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    import sim
    from tuner.calibration import CalibrationError, load_calibration
    from tuner.tune import tune
    hw = sim.load_hw(a.hw)
    try:
        cal = load_calibration(a.calibration, hw)
    except CalibrationError as e:
        print(f"calibration_unseen: error: {e}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        models, errors = sources(a.onnx, a.seen, tmp)
        costed = {}
        for label, path, g in models:
            try:
                costed[path] = (tune(g, hw, trials=0, progress=False, calibration=cal).baselines["all_host"].latency_s,
                                tune(g, hw, trials=0, progress=False).baselines["all_host"].latency_s, len(g.nodes))
            except Exception as e:  # noqa: BLE001 - one model that cannot be costed is reported
                errors[label] = str(e).splitlines()[0][:160]
        # the graphs are not needed for the timing: free them (bert_base's weights are 0.4 GB)
        models = [(label, path) for label, path, _ in models if path in costed]
        g = None
        reference, bus_ref, floor = calibration_phase(cal), calibration_bus(cal), calibration_floor(cal)
        if a.measured:
            try:
                times, failed = earlier_times(a.measured, models)
            except (OSError, ValueError, KeyError, TypeError) as e:
                print(f"calibration_unseen: error: --measured {a.measured}: {e}", file=sys.stderr)
                return 2
        else:
            times, failed = measured_s([p for _, p in models], bus=bus_probe() if np.isfinite(bus_ref) else None,
                                       floor_s=floor, bus_ref=bus_ref)
    rows = []
    for label, path in models:  # in the order given, then the models that could not be read
        if path in failed:
            rows.append({"model": label, "error": failed[path]})
            continue
        (pred, ana, nodes), (got, best, speedup, bus_s, probe_s, fast) = costed[path], times[path]
        ratio = bus_s / bus_ref if np.isfinite(bus_s) and np.isfinite(bus_ref) else None
        rows.append({"model": label, "measured_s": got, "best_run_s": best, "parallel_speedup": speedup,
                     "probe_s": probe_s, "slower_phase": not fast,
                     "bus_ratio": ratio, "bus_moved": bus_moved(bus_s, bus_ref),
                     "analytical_s": ana, "calibrated_s": pred, "calibrated_error": pred / got - 1.0,
                     "analytical_error": ana / got - 1.0, "nodes": nodes})
    rows += [{"model": label, "error": why} for label, why in errors.items()]
    ok = [r for r in rows if "calibrated_error" in r]
    within = sum(abs(r["calibrated_error"]) <= 0.2 for r in ok)
    # a file still timed out of the fast phase after every pass measures the machine's phase, not
    # the calibration: counted apart (measured_s, PhaseGate's rule)
    slow = [r for r in ok if r["slower_phase"]]
    # so does one timed with the memory bus slower or faster than during the calibration (BUS_GAP)
    in_phase = [r for r in ok if not r["slower_phase"] and not r["bus_moved"]]
    within_in_phase = sum(abs(r["calibrated_error"]) <= 0.2 for r in in_phase)
    if a.json:
        print(json.dumps({"rows": rows, "within_20": within, "of": len(ok), "within_20_in_phase": within_in_phase,
                          "of_in_phase": len(in_phase), "calibration": a.calibration,
                          "calibration_speedup": reference if np.isfinite(reference) else None,
                          "calibration_bus_s": bus_ref if np.isfinite(bus_ref) else None,
                          "calibration_probe_floor_s": floor if np.isfinite(floor) else None,
                          "load_average": os.getloadavg()}, indent=1))
        return 0
    # speedup: onnxruntime's threads on a small model just before the block kept (the phase of the
    # machine: 1.8x in the fast phase of the VM of docs/TUNING.md, 1.5-1.6x in the slow one)
    print(f"{'model':<34} {'measured ms':>12} {'analytical ms':>14} {'err':>7} {'calibrated ms':>14} {'err':>7} "
          f"{'speedup':>8} {'probe ms':>9}")
    for r in rows:
        if "error" in r:
            print(f"{r['model']:<34} {r['error']}")
            continue
        print(f"{r['model']:<34} {r['measured_s'] * 1e3:>12.3f} {r['analytical_s'] * 1e3:>14.2f} "
              f"{r['analytical_error']:>+7.0%} {r['calibrated_s'] * 1e3:>14.3f} {r['calibrated_error']:>+7.0%} "
              f"{r['parallel_speedup']:>7.2f}x {r['probe_s'] * 1e3:>9.3f}")
    from tuner.calibrate_context import FAST_GAP
    phase = f"; the calibration's faster phase {reference:.2f}x" if np.isfinite(reference) else ""
    floor_ms = (f"the calibration's lowest latency, {floor * 1e3:.3f} ms" if np.isfinite(floor)
                else "this timing's lowest latency")
    print(f"within 20 %: {within} of {len(ok)} (load average {os.getloadavg()[0]:.1f}{phase})")
    if slow:
        names = ", ".join(r["model"] for r in ok if r["slower_phase"])
        print(f"timed out of the machine's fast phase after every pass (the phase probe over {FAST_GAP:.2f}x "
              f"{floor_ms}): {names}")
    if any(r["bus_moved"] for r in ok):
        names = ", ".join(f"{r['model']} ({r['bus_ratio']:.2f}x)" for r in ok if r["bus_moved"])
        print(f"timed with the memory bus slower or faster than during the calibration (its {BUS_PROBE[0]}x"
              f"{BUS_PROBE[1]} probe over the calibration's): {names}")
    if len(in_phase) < len(ok):
        print(f"within 20 % of the {len(in_phase)} timed in the calibration's phase and bus: {within_in_phase}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
