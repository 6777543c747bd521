"""Run ONNX files through the whole tool and report the first step that fails for each.

    python experiments/zoo/check.py DIR [--presets P ...] [--trials N] [--json] [--out RESULTS_DIR]

For every DIR/*.onnx (e.g. written by experiments/zoo/export.py): import; interpret and compare with
the reference outputs in DIR/NAME.npz when present (rtol 1e-3, atol 1e-4: torch and numpy differ in
float32 summation order), or with ``--against ort`` with onnxruntime's on the example input and
``--extra-inputs`` more seeded inputs (so data-dependent output sizes are compared on several); then per preset: tune (partition search + kernel tuning), save the packed
plan, load it back and run it on the example input, and compare the run's outputs with the
interpreter's. A step that raises is reported as its one-line message: the aim is that each is
either a pass or a clear, deliberate "unsupported" message, never a traceback.

Every hardware preset by default. Writes its configuration and rows to RESULTS_DIR (default
experiments/results/zoo/: config.json, results.json).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _close(got, want, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape} != {want.shape}")
    if not np.allclose(got, want, rtol=1e-3, atol=1e-4, equal_nan=True):
        err = np.max(np.abs(got.astype(np.float64) - want))
        raise AssertionError(f"{what}: max abs error {err:.3g}")


def _ort_outputs(path: Path, xs: list) -> list:
    """onnxruntime's outputs for inputs ``xs`` (stripped weights filled as the importer fills them)."""
    import onnx
    import onnxruntime as ort

    from partition.onnx.importer import fill_stripped
    model = onnx.load(str(path))
    model = fill_stripped(model) if any(p.key == "weights_stripped" for p in model.metadata_props) else model
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1  # the CPU is shared
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})


def _more_inputs(xs: list, n: int) -> list[list]:
    """``n`` further seeded inputs like ``xs``: floats uniform in [0, 1) (images), integers kept."""
    rng = np.random.default_rng(7)
    return [[rng.random(x.shape).astype(x.dtype) if x.dtype.kind == "f" else x for x in xs] for _ in range(n)]


def check_file(path: Path, presets: list[str], trials: int, against: str = "torch", extra: int = 2) -> dict:
    import sim
    import tuner
    from partition import interpret, load_onnx

    row: dict = {"file": path.name}
    step = "import"
    try:
        g = load_onnx(str(path))
        ref = path.with_name(path.name.split(".")[0] + ".npz")
        if ref.exists():
            data = np.load(ref)
            xs = [data[k] for k in sorted(k for k in data.files if k.startswith("in_"))]
            xs = [x.astype(v.dtype) for x, v in zip(xs, g.inputs)]
        else:
            xs = list(sim.graph.runtime.example_inputs(g).values())
        step = "interpret"
        outs = interpret(g, xs)
        if ref.exists() and against == "torch":
            for i, o in enumerate(outs):
                _close(o, data[f"out_{i}"], f"output {i} vs torch")
        if against == "ort":
            # the example input and a few more: data-dependent output sizes must agree too
            step = "ort"
            for k, ins in enumerate([xs] + _more_inputs(xs, extra)):
                got = outs if k == 0 else interpret(g, ins)
                for i, (o, w) in enumerate(zip(got, _ort_outputs(path, ins))):
                    _close(o, w, f"input {k} output {i} vs onnxruntime")
            row["inputs_vs_ort"] = 1 + extra
        row["nodes"] = len(list(g.nodes))
        for preset in presets:
            step = f"tune[{preset}]"
            plan = tuner.tune(g, sim.load_hw(preset), trials=trials, seed=0, progress=False,
                              model_name=path.name)
            row[preset] = {"latency_s": plan.latency_s, "functions": len(plan.cost.functions),
                           "speedup_greedy": plan.speedup_over("greedy_byoc")}
            with tempfile.TemporaryDirectory() as d:
                step = f"save[{preset}]"
                plan.save(Path(d) / "p.zip")
                step = f"run[{preset}]"
                mod = sim.graph.runtime.load(Path(d) / "p.zip")
                res = mod.run(xs)
                for i, (o, w) in enumerate(zip(res.outputs.values(), outs)):
                    _close(o, w, f"run output {i} vs interpreter")
        row["status"] = "ok"
    except Exception as e:  # noqa: BLE001 - reported per file
        row["status"] = "fail"
        row["step"] = step
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        if not isinstance(e, (ValueError, AssertionError)):
            row["where"] = traceback.format_exc().strip().splitlines()[-3].strip()
    return row


def main(argv=None) -> int:
    import os
    import platform

    import sim
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--presets", nargs="*", default=list(sim.hw.presets.names()),
                    help="hardware presets (default: every preset)")
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--against", choices=("torch", "ort"), default="torch",
                    help="reference outputs: torch's (NAME.npz) or onnxruntime's on the example input "
                         "and --extra-inputs more seeded ones")
    ap.add_argument("--extra-inputs", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "zoo"),
                    help="where config.json and results.json go")
    a = ap.parse_args(argv)
    rows = []
    for p in sorted(Path(a.dir).glob("*.onnx")):
        if a.only and p.name.split(".")[0] not in a.only:
            continue
        r = check_file(p, a.presets, a.trials, a.against, a.extra_inputs)
        rows.append(r)
        if not a.json:
            extra = " ".join(f"{k}={v['latency_s'] * 1e3:.3f}ms/x{v['speedup_greedy']:.2f}" for k, v in r.items()
                             if isinstance(v, dict))
            msg = extra if r["status"] == "ok" else f"{r['step']}: {r['error']}" + (f"  @ {r['where']}" if 'where' in r else "")
            print(f"{r['file']:>34}  {r['status']:4}  {msg}", flush=True)
    ok = sum(r["status"] == "ok" for r in rows)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(
        {"dir": str(Path(a.dir).resolve().relative_to(ROOT)) if Path(a.dir).resolve().is_relative_to(ROOT) else a.dir,
         "presets": a.presets, "trials": a.trials, "only": a.only, "python": platform.python_version(),
         "cpus": os.cpu_count()}, indent=2) + "\n")
    (out / "results.json").write_text(json.dumps({"rows": rows, "ok": ok, "total": len(rows)}, indent=2) + "\n")
    if a.json:
        print(json.dumps({"rows": rows, "ok": ok, "total": len(rows)}, indent=2))
    else:
        print(f"{ok}/{len(rows)} files pass every step")
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
