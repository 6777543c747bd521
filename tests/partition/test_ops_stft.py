"""STFT (stft) and MelWeightMatrix (mel_weight_matrix) against onnxruntime and numpy's FFT frame by
frame; parameters constant or computed at run time (typed by the declared shape); errors; costs."""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper

from test_ops import Const, assert_same, import_error, one_node_model, ort_node, run_op

from partition import interpret, load_onnx
from partition.interpreter import InterpretError
from partition.ir import TensorType
from partition.ops import OPS, OpError


@pytest.fixture
def rng():
    return np.random.default_rng(17)


def _frames_fft(x, step, length, window, onesided):
    """numpy's FFT of each windowed frame, one frame at a time."""
    sig = x[..., 0] + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    n = 1 + (x.shape[1] - length) // step
    out = []
    for f in range(n):
        seg = sig[:, f * step:f * step + length] * (1 if window is None else window)
        y = np.fft.fft(seg, axis=-1)[:, :length // 2 + 1 if onesided else length]
        out.append(np.stack([y.real, y.imag], -1))
    return np.stack(out, 1)


@pytest.mark.parametrize("chan,onesided,step,length,with_window", [
    (1, 1, 8, 16, False), (1, 1, 5, 12, True), (1, 0, 3, 8, True), (2, 0, 4, 10, False)])
def test_stft_vs_ort_and_numpy(rng, chan, onesided, step, length, with_window):
    x = rng.standard_normal((2, 64, chan)).astype(np.float32)
    window = np.hanning(length).astype(np.float32) if with_window else None
    ins = [x, Const(np.array(step, np.int64)), Const(window) if with_window else None,
           Const(np.array(length, np.int64))]
    attrs = {"onesided": onesided}
    model, feeds = one_node_model("STFT", ins, attrs, opset=17)
    g = load_onnx(model.SerializeToString())
    assert [n.op for n in g.nodes] == ["stft"]
    got = interpret(g, feeds)
    assert_same(got, ort_node("STFT", ins, attrs, opset=17))
    np.testing.assert_allclose(got[0], _frames_fft(x.astype(np.float64), step, length, window, onesided),
                               rtol=1e-4, atol=1e-4)


def test_stft_parameters_at_run_time(rng):
    x = rng.standard_normal((1, 40, 1)).astype(np.float32)
    step, length = np.array(6, np.int64), np.array(10, np.int64)
    model, feeds = one_node_model("STFT", [x, step, None, length], {}, opset=17)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("out0", TensorProto.FLOAT, [1, 6, 6, 2]))
    g = load_onnx(model.SerializeToString())
    assert_same(interpret(g, feeds), ort_node("STFT", [x, step, None, length], {}, opset=17))
    feeds["in1"] = np.array(4, np.int64)
    with pytest.raises(InterpretError, match=r"frame_step 4 and frame_length 10 at run time give shape "
                                             r"\[1, 8, 6, 2\], not the declared \[1, 6, 6, 2\]"):
        interpret(g, feeds)


def test_stft_errors_and_cost(rng):
    x = rng.standard_normal((1, 32, 2)).astype(np.float32)
    msg = import_error("STFT", [x, Const(np.array(4, np.int64)), None, Const(np.array(8, np.int64))], {}, opset=17)
    assert "onesided needs a real signal" in msg
    msg = import_error("STFT", [x, Const(np.array(4, np.int64))], {}, opset=17)
    assert "needs a window or a frame_length input" in msg
    with pytest.raises(OpError, match="frame_length 40 within the signal's 32"):
        run_op("stft", [x], {"frame_step": 4, "frame_length": 40, "onesided": False})
    attrs = {"frame_step": 4, "frame_length": 8, "onesided": True}
    c = OPS["stft"].cost([TensorType((1, 32, 1), "float32")], [TensorType((1, 7, 5, 2), "float32")], attrs)
    assert c.flops == 7 * (8 + 5 * 8 * 3) and c.macs == 0


MEL = [(8, 64, 8000, 0.0, 4000.0), (20, 256, 16000, 125.0, 7600.0), (5, 32, 1000, 10.0, 400.0)]


@pytest.mark.parametrize("bins,dft,rate,low,high", MEL)
def test_mel_weight_matrix_vs_ort(bins, dft, rate, low, high):
    ins = [np.array(bins, np.int64), np.array(dft, np.int64), np.array(rate, np.int64),
           np.array(low, np.float32), np.array(high, np.float32)]
    model, feeds = one_node_model("MelWeightMatrix", ins, {}, opset=17)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("out0", TensorProto.FLOAT, [dft // 2 + 1, bins]))
    got = interpret(load_onnx(model.SerializeToString()), feeds)
    assert_same(got, ort_node("MelWeightMatrix", ins, {}, opset=17))
    m = got[0]
    # independent properties: triangular filters, each peaking at 1, in [0, 1]
    assert m.shape == (dft // 2 + 1, bins) and m.min() >= 0 and np.allclose(m.max(axis=0), 1)


def test_mel_weight_matrix_constant_folds_and_checks():
    ins = [Const(np.array(v, t)) for v, t in ((4, np.int64), (16, np.int64), (100, np.int64),
                                               (0.0, np.float32), (50.0, np.float32))]
    model, _ = one_node_model("MelWeightMatrix", ins, {"output_datatype": TensorProto.DOUBLE}, opset=17)
    g = load_onnx(model.SerializeToString())
    assert not list(g.nodes) and g.outputs[0].type == TensorType((9, 4), "float64")
    bad = [Const(np.array(v, t)) for v, t in ((4, np.int64), (16, np.int64), (100, np.int64),
                                               (0.0, np.float32), (500.0, np.float32))]
    assert "above the 9 DFT bins" in import_error("MelWeightMatrix", bad, {}, opset=17)
