"""Resize with coordinate_transformation_mode tf_crop_and_resize: against onnxruntime for every
mode, roi over all axes or over `axes` (either order), extrapolation outside the input, a roi
computed at run time, and its one-line errors."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from test_ops import Const, assert_same, import_error, one_node_model, ort_node

from partition import interpret, load_onnx
from partition.interpreter import InterpretError

CROP = {"coordinate_transformation_mode": "tf_crop_and_resize"}


@pytest.fixture
def rng():
    return np.random.default_rng(23)


def _vs_ort(inputs, attrs, opset=19):
    model, feeds = one_node_model("Resize", inputs, attrs, opset=opset)
    g = load_onnx(model.SerializeToString())
    got = interpret(g, feeds)
    assert_same(got, ort_node("Resize", inputs, attrs, opset=opset))
    return got[0]


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("roi,sizes", [([0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8], [1, 2, 3, 3]),
                                       ([0, 0, 0.1, 0.2, 1, 1, 0.9, 0.7], [1, 2, 5, 7]),
                                       ([0, 0, 0.3, 0.0, 1, 1, 0.3, 1.0], [1, 2, 1, 4])])
def test_crop_and_resize_vs_ort(rng, mode, roi, sizes):
    x = rng.standard_normal((1, 2, 6, 5)).astype(np.float32)
    _vs_ort([x, Const(np.array(roi, np.float32)), None, Const(np.array(sizes, np.int64))], {**CROP, "mode": mode})


@pytest.mark.parametrize("axes,roi", [([2, 3], [0.2, 0.3, 0.9, 0.8]), ([3, 2], [0.3, 0.2, 0.8, 0.9])])
def test_crop_and_resize_axes_in_either_order(rng, axes, roi):
    x = rng.standard_normal((2, 1, 4, 6)).astype(np.float32)
    sizes = [3, 4] if axes == [2, 3] else [4, 3]
    got = _vs_ort([x, Const(np.array(roi, np.float32)), None, Const(np.array(sizes, np.int64))],
                  {**CROP, "mode": "linear", "axes": axes})
    assert got.shape == (2, 1, 3, 4)


def test_crop_and_resize_extrapolates_outside_the_input(rng):
    x = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    roi = np.array([0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7], np.float32)
    got = _vs_ort([x, Const(roi), None, Const(np.array([1, 1, 3, 3], np.int64))],
                  {**CROP, "mode": "linear", "extrapolation_value": 10.0})
    # independently: rows sample 0.4*3 + i*(1.2-0.4)*3/2 = 1.2, 2.4, 3.6 and columns
    # 0.6*3 + j*(1.7-0.6)*3/2 = 1.8, 3.45, 5.1; beyond 3 (the last pixel) is outside
    inside = np.array([[1, 0, 0], [1, 0, 0], [0, 0, 0]], bool)
    np.testing.assert_array_equal(got[0, 0] == 10.0, ~inside)


def test_crop_and_resize_roi_at_run_time(rng):
    x = rng.standard_normal((1, 1, 5, 5)).astype(np.float32)
    roi = np.array([0, 0, 0.2, 0.1, 1, 1, 0.8, 0.9], np.float32)
    sizes = Const(np.array([1, 1, 3, 4], np.int64))
    model, feeds = one_node_model("Resize", [x, roi, None, sizes], {**CROP, "mode": "linear"}, opset=19)
    g = load_onnx(model.SerializeToString())
    assert_same(interpret(g, feeds), ort_node("Resize", [x, roi, None, sizes], {**CROP, "mode": "linear"}, opset=19))
    feeds["in1"] = np.array([0.5, 0, 0.2, 0.1, 1, 1, 0.8, 0.9], np.float32)  # crops the batch axis
    with pytest.raises(InterpretError, match="cropping the batch or channel axis is not supported"):
        interpret(g, feeds)


def test_crop_and_resize_sizes_and_roi_both_at_run_time(rng):
    x = rng.standard_normal((1, 1, 5, 5)).astype(np.float32)
    roi, sizes = np.array([0.2, 0.1, 0.8, 0.9], np.float32), np.array([3, 4], np.int64)
    attrs = {**CROP, "mode": "nearest", "axes": [2, 3]}
    model, feeds = one_node_model("Resize", [x, roi, None, sizes], attrs, opset=19)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("out0", TensorProto.FLOAT, [1, 1, 3, 4]))
    g = load_onnx(model.SerializeToString())
    assert_same(interpret(g, feeds), ort_node("Resize", [x, roi, None, sizes], attrs, opset=19))


def test_crop_and_resize_errors(rng):
    x = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    sizes = Const(np.array([1, 1, 2, 2], np.int64))
    msg = import_error("Resize", [x, None, None, sizes], {**CROP, "mode": "linear"}, opset=19)
    assert "tf_crop_and_resize needs the roi input" in msg
    msg = import_error("Resize", [x, Const(np.array([0, 0, 0.5], np.float32)), None, sizes], CROP, opset=19)
    assert "roi [0.0, 0.0, 0.5] needs 8 values" in msg
