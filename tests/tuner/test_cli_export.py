"""accel-tune export: tuned plans on hardware presets as ONNX files that onnxruntime runs to the
original model's outputs; inspect/run read them back with the same numbers; re-importing them with
--onnx gives the same costs; bad input is one line and leaves nothing at the output path."""
from __future__ import annotations

import json
import os
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import sim
import tuner
from partition import interpret, load_onnx, models
from tuner.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _partition_test():
    """tests/partition/test_onnx_export.py, for its helpers (tests are not a package)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_onnx_export_test", ROOT / "tests" / "partition" / "test_onnx_export.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


assert_close = _partition_test().assert_close
ZOO = ROOT / "tests" / "data" / "zoo"
PRESETS = ["edge-npu", "cloud-npu", "tpu-v1-like"]
FAST_MODELS = ["mobilenet_v3_small", "bert_tiny", "ssd_detector"]
SLOW_MODELS = ["resnet18", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "byoc_demo"]


def tuned(graph, hw, path, name):
    plan = tuner.tune(graph, sim.load_hw(hw), trials=4, seed=0, progress=False, model_name=name)
    plan.save(path)
    return plan


def inputs_of(graph, seed=0):
    return list(sim.runtime.example_inputs(graph, seed).values())


def ort_outputs(path, graph, xs):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {v.name: x for v, x in zip(graph.inputs, xs)})


def cli_json(capsys, *argv):
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def export_and_check(graph, xs, hw, tmp_path, name):
    plan = tmp_path / f"{name}.{hw}.plan.zip"
    out = tmp_path / f"{name}.{hw}.onnx"
    tuned(graph, hw, plan, name)
    assert main(["export", str(plan), "-o", str(out)]) == 0
    onnx.checker.check_model(onnx.load(out), full_check=True)
    assert_close(ort_outputs(out, graph, xs), interpret(graph, xs))
    return plan, out


@pytest.mark.parametrize("hw", PRESETS)
@pytest.mark.parametrize("name", FAST_MODELS)
def test_builtin_exports_run_in_onnxruntime(name, hw, tmp_path):
    g = models.get(name)
    export_and_check(g, inputs_of(g), hw, tmp_path, name)


def test_export_json_run_and_inspect_read_it_back(tmp_path, capsys):
    g = models.get("mobilenet_v3_small")
    plan, out = export_and_check(g, inputs_of(g), "edge-npu", tmp_path, "mnv3")
    info = cli_json(capsys, "export", str(plan), "-o", str(out))
    fp = sim.load_hw("edge-npu").fingerprint()
    assert info["hardware_fingerprint"] == fp and info["domains"] == ["accel_tune.edge_npu"]
    assert len(info["regions"]) > 1 and all(r["hardware_fingerprint"] == fp for r in info["regions"])
    ran_plan = cli_json(capsys, "run", str(plan))
    ran_onnx = cli_json(capsys, "run", str(out))
    for k in ("latency_s", "energy_j", "breakdown", "outputs", "predicted"):
        assert ran_onnx[k] == ran_plan[k]
    ins_plan = cli_json(capsys, "inspect", str(plan))
    ins_onnx = cli_json(capsys, "inspect", str(out))
    assert {k: v for k, v in ins_onnx.items() if k != "plan"} == {k: v for k, v in ins_plan.items() if k != "plan"}
    assert ins_onnx["plan"] == str(out)
    # the run's outputs equal onnxruntime's on the same file
    assert main(["run", str(out), "-o", str(tmp_path / "o.npz")]) == 0
    capsys.readouterr()
    with np.load(tmp_path / "o.npz") as z:
        got = [z[k] for k in z.files]
    assert_close(ort_outputs(out, g, inputs_of(g)), got)


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "ssd_detector"])
def test_reimport_inlines_functions_and_costs_the_same(name, tmp_path, capsys):
    g = models.get(name)
    plan, out = tmp_path / "p.zip", tmp_path / "p.onnx"
    tuned(g, "edge-npu", plan, name)
    assert main(["export", str(plan), "-o", str(out)]) == 0
    capsys.readouterr()
    assert not load_onnx(out).functions
    a = cli_json(capsys, "simulate", "--onnx", str(out), "--hw", "edge-npu")
    b = cli_json(capsys, "simulate", "--model", name, "--hw", "edge-npu")
    for k in ("latency_s", "energy_j", "host_s", "link_s", "launch_s", "device_s", "calls"):
        assert a[k] == b[k], k


def _one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("accel-tune: error: ") and err.count("\n") == 1
    return err


def test_bad_input_is_one_line_and_leaves_nothing(tmp_path, capsys):
    g = models.get("byoc_demo")
    plan = tmp_path / "p.zip"
    tuned(g, "edge-npu", plan, "byoc_demo")
    out = tmp_path / "out.onnx"
    # corrupt plan
    data = plan.read_bytes()
    (tmp_path / "trunc.zip").write_bytes(data[: len(data) // 2])
    assert "not a readable zip archive" in _one_line_error(capsys, ["export", str(tmp_path / "trunc.zip"), "-o", str(out)])
    # a plan from a newer format version
    with zipfile.ZipFile(plan) as z:
        members = {n: z.read(n) for n in z.namelist()}
    man = json.loads(members["manifest.json"])
    man["format_version"] = "2.0"
    members["manifest.json"] = json.dumps(man).encode()
    with zipfile.ZipFile(tmp_path / "newer.zip", "w") as z:
        for n, d in members.items():
            z.writestr(n, d)
    assert "format version 2.0 is newer" in _one_line_error(capsys, ["export", str(tmp_path / "newer.zip"), "-o", str(out)])
    # output paths that cannot be written
    assert "does not exist" in _one_line_error(capsys, ["export", str(plan), "-o", str(tmp_path / "nope" / "x.onnx")])
    assert "it is a folder" in _one_line_error(capsys, ["export", str(plan), "-o", str(tmp_path)])
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if not os.access(ro, os.W_OK):  # root writes anywhere
            assert "cannot write" in _one_line_error(capsys, ["export", str(plan), "-o", str(ro / "x.onnx")])
            assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["newer.zip", "p.zip", "ro", "trunc.zip"]
    # inspect/run of a file that is not an exported plan
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    assert "not a readable ONNX file" in _one_line_error(capsys, ["inspect", str(tmp_path / "junk.onnx")])
    assert "not a readable ONNX file" in _one_line_error(capsys, ["run", str(tmp_path / "junk.onnx")])


@pytest.mark.slow
def test_readme_tune_export_run_block(tmp_path_factory, monkeypatch):
    """README's "Export and run a plan" block with ``accel-tune`` being this checkout (the
    installed one may be another tree), checked by tests/tuner/test_cli_run_inspect.py's test."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_readme_test", Path(__file__).with_name("test_cli_run_inspect.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    run_block = mod.test_readme_export_section_runs_as_written
    text = (ROOT / "README.md").read_text().split("## Export and run a plan", 1)[1]
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    assert "accel-tune export out/resnet18.plan.zip -o out/resnet18.onnx" in block
    assert "accel-tune run out/resnet18.onnx" in block
    shim = tmp_path_factory.mktemp("bin")
    (shim / "accel-tune").write_text(f"#!/bin/sh\nexec {sys.executable} -m tuner \"$@\"\n")
    (shim / "accel-tune").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    work = tmp_path_factory.mktemp("readme")
    run_block(work)
    m = onnx.load(work / "out" / "resnet18.onnx")
    assert {f.domain for f in m.functions} == {"accel_tune.edge_npu"}


def _rotated(names: list[str]) -> list[tuple[str, str]]:
    """Each name with one of PRESETS in turn: every name and every preset exported, in a third of
    the time of every pair (the suite's 10 minutes on a 2-core host)."""
    return [(n, PRESETS[i % len(PRESETS)]) for i, n in enumerate(names)]


@pytest.mark.slow
def test_every_zoo_file_on_one_of_three_presets(tmp_path):
    """Every zoo file, tuned on one of three presets in turn, exports and matches the interpreter
    in onnxruntime."""
    t0 = time.perf_counter()
    pairs = _rotated(sorted(p.name for p in ZOO.glob("*.onnx")))
    assert {hw for _, hw in pairs} == set(PRESETS)
    for fname, hw in pairs:
        g = load_onnx(ZOO / fname)
        data = np.load(ZOO / (fname.split(".")[0] + ".npz"))
        xs = [data[f"in_{i}"].astype(v.dtype) for i, v in enumerate(g.inputs)]
        export_and_check(g, xs, hw, tmp_path, fname.replace(".", "_"))
    print(f"{len(pairs)} zoo files on {len(PRESETS)} presets in {time.perf_counter() - t0:.1f} s")


@pytest.mark.slow
@pytest.mark.parametrize("name,hw", _rotated(SLOW_MODELS))
def test_more_builtins_on_one_of_three_presets(name, hw, tmp_path):
    g = models.get(name)
    export_and_check(g, inputs_of(g), hw, tmp_path, name)
