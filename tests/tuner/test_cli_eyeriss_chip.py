"""`accel-tune tune --onnx LAYER.onnx --hw eyeriss-chip --offload all --json` on a one-Conv ONNX
file (built here with onnx.helper) reports the device time of the convolution: its tuned kernel's
cycles at the chip's 200 MHz, never more than the default mapping's, and the conv2d is costed on
the chip's storage levels (issue 19, part 2)."""
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tuner.cli import main  # noqa: E402


def _one_conv(path, n=2, c=32, m=48, hw=13):
    """One Conv (no bias) like AlexNet's CONV5 made small: 3x3, pad 1, batch n."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((m, c, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])],
                          "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, m, hw, hw])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def test_one_conv_reports_the_chips_device_time(tmp_path, capsys):
    f = _one_conv(tmp_path / "layer.onnx")
    assert main(["tune", "--onnx", str(f), "--hw", "eyeriss-chip", "--offload", "all", "--trials", "8",
                 "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["hardware"]["name"] == "eyeriss-chip" and js["offload"] == "all"
    [fn] = js["functions"].values()
    [kernel] = fn["kernels"]
    assert kernel["workload"].startswith("conv2d(n=2,c=32,h=13,w=13,k=48,r=3,s=3")
    device = js["breakdown"]["device_s"]
    assert device > 0 and device == pytest.approx(kernel["cycles"] / 200e6, rel=1e-12)
    [task] = js["tasks"]
    assert task["best_cycles"] == kernel["cycles"] <= task["default_cycles"]
    # no faster than the MACs allow on 168 PEs, nor than the 1.2 words/cycle link moves the layer's
    # ifmap, weights and ofmap once
    macs = 2 * 48 * 32 * 9 * 13 * 13
    words = 2 * 32 * 13 * 13 + 48 * 32 * 9 + 2 * 48 * 13 * 13
    assert kernel["cycles"] >= max(macs / 168, words / 1.2 / 2)   # read and write ports run side by side
