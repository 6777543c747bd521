"""accel-tune partition: text and JSON output, and one-line errors."""
from __future__ import annotations

from pathlib import Path
import json
import os

import pytest

from partition import models
from partition.models.stats import count_macs
from tuner.cli import main

SHARED = str(Path(__file__).resolve().parents[3] / "shared" / "models")  # ../shared beside the checkout


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_for_builtin_model(capsys):
    rc, out, err = run(capsys, "partition", "--model", "byoc_demo", "--target", "npu-full", "--json")
    assert rc == 0 and err == ""
    d = json.loads(out)
    assert d["target"] == "npu-full" and d["model"] == "byoc_demo"
    syms = [f["symbol"] for f in d["functions"]]
    assert syms == [f"npu-full_main_{i}" for i in range(len(syms))] and syms
    # byoc_demo: the loop and the int64 counter compare stay on the host.
    assert {"loop", "if", "less"} <= set(d["host_ops"])
    assert "conv2d" not in d["host_ops"]
    assert any(f["ops"] == ["conv2d", "bias_add", "relu"] for f in d["functions"])
    assert d["macs_total"] == count_macs(models.get("byoc_demo"))
    assert d["macs_offloaded"] == d["macs_total"] and d["macs_offloaded_pct"] == 100.0
    assert d["num_functions"] == len(d["functions"]) and d["host_op_count"] == len(d["host_ops"])


def test_text_output_has_graph_and_summary(capsys):
    rc, out, err = run(capsys, "partition", "--model", "resnet18", "--target", "npu-gemm")
    assert rc == 0
    assert "def @npu-gemm_main_0(" in out and "Compiler='npu-gemm'" in out
    assert "graph resnet18(" in out
    assert "3 on the host" in out and "100.0% of 1814073344 MACs offloaded" in out


@pytest.mark.skipif(not os.path.isdir(SHARED), reason="shared models not present")
def test_onnx_file(capsys):
    rc, out, err = run(capsys, "partition", "--onnx", f"{SHARED}/tiny_detector_topk.onnx",
                       "--target", "npu-gemm", "--json")
    assert rc == 0
    d = json.loads(out)
    assert "topk" in d["host_ops"] and all("conv2d" in f["ops"] for f in d["functions"])


def test_keep_on_host(capsys):
    rc, out, _ = run(capsys, "partition", "--model", "byoc_demo", "--target", "npu-full", "--json")
    n = len(json.loads(out)["functions"])
    rc, out, _ = run(capsys, "partition", "--model", "byoc_demo", "--target", "npu-full", "--json",
                     "--keep-on-host", "0")
    assert rc == 0 and len(json.loads(out)["functions"]) == n - 1


@pytest.mark.parametrize("argv, msg", [
    (["--model", "byoc_demo", "--target", "tpu"],
     "--target 'tpu' is neither a built-in target (npu-gemm, npu-full) nor a hardware preset"),
    (["--model", "nope", "--target", "npu-gemm"], "unknown model 'nope'"),
    (["--onnx", "/no/such.onnx", "--target", "npu-gemm"], "no such ONNX file"),
    (["--model", "byoc_demo", "--target", "npu-gemm", "--keep-on-host", "x"], "--keep-on-host takes"),
    (["--model", "byoc_demo", "--target", "npu-gemm", "--keep-on-host", "9"], "unknown region id(s) 9"),
])
def test_errors_are_one_line(capsys, argv, msg):
    rc, out, err = run(capsys, "partition", *argv)
    assert rc == 2 and out == ""
    assert err.startswith("accel-tune: error: ") and msg in err and err.count("\n") == 1
