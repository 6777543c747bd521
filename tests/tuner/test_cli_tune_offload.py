"""Issue 19 (B): `accel-tune tune --offload all` keeps greedy BYOC's partition (every supported op
on the device) and tunes its kernels; the default, `--offload cost`, decides the partition by cost."""
import json
import zipfile

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import sim  # noqa: E402
from tuner.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def one_conv(tmp_path_factory):
    """One Conv (with bias) of 16 channels on a 16x16 image: too small to pay for the trip."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")]
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], "one_conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 16])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    path = tmp_path_factory.mktemp("offload") / "conv.onnx"
    onnx.save(model, str(path))
    return path


def _json(argv, capsys):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("hw", ["eyeriss", "edge-npu"])
def test_offload_all_puts_the_conv_on_the_device(one_conv, hw, tmp_path, capsys):
    base = ["tune", "--onnx", str(one_conv), "--hw", hw, "--trials", "8", "--json"]
    cost = _json(base, capsys)
    # decided by cost, the conv stays on the host: the link and the launch cost more than it saves
    assert cost["offload"] == "cost" and cost["partition"]["offloaded"] == 0
    assert cost["breakdown"]["device_s"] == 0 and cost["functions"] == {}
    assert cost["baselines"]["greedy_byoc"]["latency_s"] > cost["baselines"]["all_host"]["latency_s"] == cost["latency_s"]
    untimed = {k: v for k, v in cost.items() if k != "timing"}
    assert {k: v for k, v in _json(base + ["--offload", "cost"], capsys).items() if k != "timing"} == untimed

    plan_file = tmp_path / "plan.zip"
    js = _json(base + ["--offload", "all", "-o", str(plan_file)], capsys)
    assert js["offload"] == "all" and js["plan_file"] == str(plan_file)
    assert js["partition"]["offloaded"] == js["partition"]["offloadable"] == 1
    [fn] = js["functions"].values()
    [kernel] = fn["kernels"]
    assert kernel["op"].endswith("conv2d_bias") and kernel["workload"].startswith("conv2d(n=1,c=16,h=16")
    # the device time is the tuned kernel's cycles at the accelerator's clock, and it was tuned
    freq_hz = sim.load_hw(hw).clock.freq_mhz * 1e6
    assert js["breakdown"]["device_s"] > 0
    assert js["breakdown"]["device_s"] == pytest.approx(kernel["cycles"] / freq_hz, rel=1e-12)
    [task] = js["tasks"]
    assert task["best_cycles"] == kernel["cycles"] <= task["default_cycles"] and task["trials"] > 0
    # the plan is greedy BYOC with the tuned kernels: its cost is the greedy baseline's, and the
    # packed plan run back on the simulated device takes that long
    greedy = js["baselines"]["greedy_byoc"]
    assert js["latency_s"] == pytest.approx(greedy["latency_s"], rel=1e-12)
    assert js["energy_j"] == pytest.approx(greedy["energy_j"], rel=1e-12)
    assert js["baselines"]["all_host"] == cost["baselines"]["all_host"]
    with zipfile.ZipFile(plan_file) as z:
        assert json.loads(z.read("manifest.json"))["plan"]["offload"] == "all"
    ran = _json(["run", str(plan_file), "--json"], capsys)
    assert ran["latency_s"] == pytest.approx(greedy["latency_s"], rel=1e-9)
    assert ran["breakdown"]["device_s"] == pytest.approx(js["breakdown"]["device_s"], rel=1e-9)


def test_offload_table_and_errors(one_conv, tmp_path, capsys):
    assert main(["tune", "--onnx", str(one_conv), "--hw", "edge-npu", "--trials", "4", "--offload", "all"]) == 0
    assert "partition (greedy BYOC's, --offload all): 1 of 1 offloadable unit(s) offloaded" in capsys.readouterr().out
    bad = tmp_path / "x.yaml"
    bad.write_text("problem: {}\n")
    assert main(["tune", "--timeloop", str(bad), "--offload", "all"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("accel-tune: error:") and err.count("\n") == 1 and "--offload apply to --model/--onnx" in err
    with pytest.raises(SystemExit) as e:   # argparse's refusal of an unknown choice
        main(["tune", "--onnx", str(one_conv), "--hw", "edge-npu", "--offload", "some"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("accel-tune: error:") and err.count("\n") == 1 and "--offload" in err


def test_unknown_policy_from_python(one_conv):
    from partition import load_onnx
    from tuner.tune import OFFLOAD_POLICIES, TuneError, tune
    assert OFFLOAD_POLICIES == ("cost", "all")
    with pytest.raises(TuneError, match="unknown offload policy 'some'; choose one of cost, all"):
        tune(load_onnx(str(one_conv)), "edge-npu", trials=0, offload="some", progress=False)
