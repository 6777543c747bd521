"""Low-precision (float16/bfloat16) Softmax and LogSoftmax follow the spec's function body: every
intermediate (x - max, exp, the sum, its log) is a tensor of the input type. Checked bit for bit
against numpy's own float16 arithmetic step by step, against onnx's reference evaluator through
Attention (and its expanded function body), and that the rule is not a no-op (one rounding at the
end differs on the same data)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from test_ops import one_node_model, run_op

from partition import interpret, load_onnx


@pytest.fixture
def rng():
    return np.random.default_rng(14)


def _numpy_half_softmax(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    """The opset-13 function body in numpy's native float16 arithmetic, one op at a time; the sum
    accumulates in float32 (numpy does so along a contiguous axis, not along others) and is then a
    float16 tensor."""
    z = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(z)
    s = np.sum(e, axis=axis, keepdims=True, dtype=np.float32).astype(np.float16)
    return z - np.log(s) if log else e / s


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,axis", [((2, 3, 4, 6), -1), ((5, 7), 0), ((3, 17, 2), 1)])
def test_float16_softmax_is_the_function_body_in_float16(rng, log, shape, axis):
    x = (rng.standard_normal(shape) * 4).astype(np.float16)
    got = run_op("log_softmax" if log else "softmax", [x], {"axis": axis})[0]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, _numpy_half_softmax(x, axis, log))


def test_float16_softmax_rule_differs_from_one_rounding(rng):
    # The staged rounding is observable: on enough data some element differs by an ulp from
    # float32 math rounded once (so the test above could fail on the old rule).
    x = rng.random((64, 6)).astype(np.float16)
    once = run_op("softmax", [x.astype(np.float32)], {"axis": -1})[0].astype(np.float16)
    got = run_op("softmax", [x], {"axis": -1})[0]
    assert (got != once).any()
    np.testing.assert_allclose(got.astype(np.float32), once.astype(np.float32), rtol=2e-3)


def test_float16_softmax_masked_rows(rng):
    x = rng.random((3, 5)).astype(np.float16)
    x[0, 2:] = -np.inf
    x[1] = -np.inf  # every key masked: NaN, as IEEE gives it (Attention's guard zeroes such rows)
    got = run_op("softmax", [x], {"axis": -1})[0]
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got, _numpy_half_softmax(x, -1, False))
    assert (got[0, 2:] == 0).all() and np.isnan(got[1]).all()


def test_bfloat16_softmax_rounds_each_step(rng):
    bf = ml_dtypes.bfloat16
    x = (rng.standard_normal((4, 9)) * 3).astype(bf)
    # ml_dtypes' bfloat16 ufuncs round each result; the sum accumulated in float32 then rounded
    z = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(z)
    s = np.sum(e.astype(np.float32), axis=-1, keepdims=True).astype(bf)
    got = run_op("softmax", [x], {"axis": -1})[0]
    assert got.dtype == bf
    np.testing.assert_array_equal(got.astype(np.float32), (e / s).astype(np.float32))


@pytest.mark.parametrize("attrs,opset", [({"is_causal": 1}, 23), ({}, 23), ({"is_causal": 1, "scale": 0.3}, 24)])
def test_float16_attention_matches_the_reference_bit_for_bit(rng, attrs, opset):
    q = rng.random((2, 3, 4, 8)).astype(np.float16)
    k = rng.random((2, 3, 6, 8)).astype(np.float16)
    v = rng.random((2, 3, 6, 8)).astype(np.float16)
    model, feeds = one_node_model("Attention", [q, k, v], attrs, opset=opset)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("out0", 10, [2, 3, 4, 8]))
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    g = load_onnx(model.SerializeToString())
    np.testing.assert_array_equal(interpret(g, feeds)[0], want)


# ---------------------------------------------------------------------------- Cast to float8_e8m0fnu

def _e8m0_inputs(rng):
    x = np.concatenate([rng.standard_normal(500).astype(np.float32) * 10.0 ** rng.integers(-30, 30, 500),
                        np.array([0.0, -0.0, 1.0, 1.5, 1.75, 3.0, 2.0 ** -127, 2.0 ** -149, 3.4e38, 2.0 ** 127,
                                  np.inf, -np.inf, np.nan, -2.5], np.float32)])
    return x.astype(np.float32)


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("src", [np.float32, np.float16])
def test_cast_to_e8m0_as_the_onnx_reference(rng, mode, saturate, src):
    from onnx.numpy_helper import to_float8e8m0
    x = _e8m0_inputs(rng).astype(src)
    model, feeds = one_node_model("Cast", [x], {"to": 24, "saturate": saturate, "round_mode": mode}, opset=25)
    got = interpret(load_onnx(model.SerializeToString()), feeds)[0]
    assert got.dtype == ml_dtypes.float8_e8m0fnu
    want = to_float8e8m0(x.astype(np.float32), bool(saturate), mode)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_cast_to_e8m0_by_hand():
    x = np.array([1.0, 1.5, 3.0, 0.75, 2.0 ** 127 * 1.5], np.float32)
    up = run_op("cast", [x], {"dtype": "float8_e8m0fnu", "saturate": True, "round_mode": "up"})[0]
    # 1 -> 2^0; 1.5 -> 2^1; 3 -> 2^2; 0.75 -> 2^0; above 2^127 saturates at 2^127
    np.testing.assert_array_equal(up.astype(np.float32), [1.0, 2.0, 4.0, 1.0, 2.0 ** 127])
    down = run_op("cast", [x], {"dtype": "float8_e8m0fnu", "saturate": False, "round_mode": "down"})[0]
    np.testing.assert_array_equal(down.astype(np.float32), [1.0, 1.0, 2.0, 0.5, 2.0 ** 127])
    nan = run_op("cast", [x[4:]], {"dtype": "float8_e8m0fnu", "saturate": False, "round_mode": "up"})[0]
    assert np.isnan(nan.astype(np.float32)).all()
