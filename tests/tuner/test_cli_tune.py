"""accel-tune tune: --json keys, the plan file, same seed same output, one-line errors."""
from __future__ import annotations

import json

import pytest

from partition import read_packed
from tuner.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_keys_and_plan_file(capsys, tmp_path):
    plan = tmp_path / "p.zip"
    code, out, err = _run(capsys, "tune", "--model", "byoc_demo", "--hw", "cloud-npu", "--trials", "4",
                          "--json", "-o", str(plan))
    assert code == 0, err
    d = json.loads(out)
    assert d["latency_s"] > 0 and d["energy_j"] > 0
    assert set(d["baselines"]) == {"greedy_byoc", "all_host", "default_schedules"}
    for b in d["baselines"].values():
        assert set(b) == {"latency_s", "energy_j"}
        assert d["latency_s"] <= b["latency_s"] * (1 + 1e-12)
    pm = read_packed(plan)
    assert pm.manifest["predicted"]["latency_s"] == pytest.approx(d["latency_s"])
    assert pm.manifest["model"]["name"] == "byoc_demo"


def test_same_seed_same_output(capsys):
    args = ("tune", "--model", "byoc_demo", "--hw", "edge-npu", "--trials", "4", "--seed", "5", "--json")
    _, a, _ = _run(capsys, *args)
    _, b, _ = _run(capsys, *args)
    a, b = json.loads(a), json.loads(b)
    a.pop("timing"), b.pop("timing")   # wall time differs from run to run; nothing else may
    assert a == b


def test_json_and_table_account_the_time(capsys):
    _, out, _ = _run(capsys, "tune", "--model", "byoc_demo", "--hw", "edge-npu", "--trials", "8", "--json")
    t = json.loads(out)["timing"]
    k = t["kernels"]
    assert k["measurements"] == 8 and k["fits"] == 0          # the tile measurer is cheap: no training
    for phase in ("generate_s", "score_s", "train_s", "measure_s"):
        assert k[phase] >= 0
    assert k["total_s"] == pytest.approx(k["generate_s"] + k["score_s"] + k["train_s"] + k["measure_s"])
    assert k["total_s"] <= k["wall_s"] <= t["kernels_s"] + 1e-9
    assert t["partition_s"] + t["kernels_s"] + t["final_s"] == pytest.approx(t["wall_s"])
    assert sum(x["measurements"] for x in k["tasks"].values()) == 8
    _, out, _ = _run(capsys, "tune", "--model", "byoc_demo", "--hw", "edge-npu", "--trials", "8",
                     "--learned-model", "always", "--json")
    assert json.loads(out)["timing"]["kernels"]["fits"] == 1
    _, out, _ = _run(capsys, "tune", "--model", "byoc_demo", "--hw", "edge-npu", "--trials", "8")
    line = next(ln for ln in out.splitlines() if ln.startswith("time: "))
    assert "measure" in line and "(8)" in line and "train" in line and "(0 fits)" in line


def test_table_output(capsys):
    code, out, _ = _run(capsys, "tune", "--model", "byoc_demo", "--hw", "cloud-npu", "--trials", "4")
    assert code == 0
    for label in ("tuned plan", "greedy_byoc", "all_host", "default_schedules", "roofline"):
        assert label in out


@pytest.mark.parametrize("argv, needle", [
    (["tune", "--model", "nope", "--hw", "edge-npu"], "unknown model 'nope'"),
    (["tune", "--onnx", "/no/such/file.onnx", "--hw", "edge-npu"], "ONNX file not found"),
    (["tune", "--model", "byoc_demo", "--hw", "no-such-hw"], "no hardware preset or file"),
    (["tune", "--model", "byoc_demo", "--hw", "edge-npu", "--trials", "-3"], "--trials must be >= 0"),
    (["tune", "--model", "byoc_demo", "--hw", "edge-npu", "--fold-qdq"], "--fold-qdq applies to quantized --onnx"),
    (["tune", "--model", "byoc_demo", "--hw", "edge-npu", "-o", "/no/such/dir/p.zip"], "does not exist"),
    (["tune", "--model", "byoc_demo", "--hw", "edge-npu", "--log", "/no/such/dir/log.jsonl"],
     "folder /no/such/dir does not exist"),
])
def test_bad_input_one_line(capsys, argv, needle):
    code, out, err = _run(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accel-tune: error:") and needle in lines[0]


def test_hardware_that_runs_nothing(capsys, tmp_path):
    cfg = tmp_path / "hw.toml"
    cfg.write_text('base = "edge-npu"\n[array]\nword_bytes = 2\n[buffers]\nifmap_bytes = 1\nweight_bytes = 1\noutput_bytes = 1\n')
    code, _, err = _run(capsys, "tune", "--model", "resnet18", "--hw", str(cfg))
    assert code == 2
    assert "cannot run any kernel" in err and len(err.strip().splitlines()) == 1


def _dynamic_model(path, dims):
    """Conv + ReLU on an input declared with ``dims`` (ints or symbolic names)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return str(path)


def test_dynamic_batch_defaults_to_one_and_input_shape_sets_it(capsys, tmp_path):
    f = _dynamic_model(tmp_path / "dyn.onnx", ["batch", 3, 16, 16])
    with pytest.warns(UserWarning, match=r"dynamic dimension 0 \('batch'\) set to 1"):
        code, out, err = _run(capsys, "tune", "--onnx", f, "--hw", "edge-npu", "--trials", "2", "--json")
    assert code == 0
    one = json.loads(out)
    code, out, _ = _run(capsys, "tune", "--onnx", f, "--hw", "edge-npu", "--trials", "2", "--json",
                        "--input-shape", "x=4,3,16,16")
    four = json.loads(out)
    assert code == 0
    # four images move four times the activations over the link
    assert four["breakdown"]["link_bytes"] == 4 * one["breakdown"]["link_bytes"]


def test_input_shape_reads_commas_or_x_as_the_docs_say():
    from argparse import Namespace

    from tuner.cli.common import input_shapes
    assert input_shapes(Namespace(input_shape=["pixel_values=1,3,224,224"])) == {"pixel_values": (1, 3, 224, 224)}
    assert input_shapes(Namespace(input_shape=["pixel_values=1x3x224x224"])) == {"pixel_values": (1, 3, 224, 224)}
    assert input_shapes(Namespace(input_shape=["a=b=2,3"])) == {"a=b": (2, 3)}


@pytest.mark.parametrize("dims, extra, needle", [
    (["batch", 3, "h", "w"], [], "dynamic dimension 'h' at axis 2"),
    (["batch", 3, 16, 16], ["--input-shape", "x=1,3,15,16"], "dimension 2 is 16 in the model"),
    (["batch", 3, 16, 16], ["--input-shape", "x=1,3,16"], "has rank 3"),
    (["batch", 3, 16, 16], ["--input-shape", "z=1,3,16,16"], "which the model does not take"),
    (["batch", 3, 16, 16], ["--input-shape", "x"], "expected NAME=D0,D1"),
    (["batch", 3, 16, 16], ["--input-shape", "x=0,3,16,16"], "must be >= 1"),
    # a placeholder among the dimensions is refused, never read as a shorter shape
    (["batch", 3, "h", 16], ["--input-shape", "x=1,3,x,16"], "dimension 2 is 'x', not an integer"),
    (["batch", 3, 16, 16], ["--input-shape", "x=1,3,,16"], "dimension 2 is '', not an integer"),
    (["batch", 3, 16, 16], ["--input-shape", "x=1,3,16,-16"], "dimension 3 is '-16', not an integer"),
    (["batch", 3, 16, 16], ["--input-shape", "x=1x3x16"], "has rank 3"),
])
@pytest.mark.filterwarnings("ignore:input 'x'")
def test_input_shape_errors_are_one_line(capsys, tmp_path, dims, extra, needle):
    f = _dynamic_model(tmp_path / "dyn.onnx", dims)
    code, _, err = _run(capsys, "tune", "--onnx", f, "--hw", "edge-npu", *extra)
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("accel-tune: error:")]
    assert code == 2 and len(lines) == 1 and needle in lines[0]
