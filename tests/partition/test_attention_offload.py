"""Attention and RMSNormalization import into ops the accelerator presets offload: the fully-masked
row guard (a host `where`) only where a row can be fully masked, RMSNormalization's reciprocal as a
division; results still equal onnx's reference, and on cloud-npu causal attention is one region."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from partition import interpret, load_onnx


def _attention_model(shape, attrs, mask=None, opset=23):
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(shape)) for n in "qkv"]
    inits = [] if mask is None else [numpy_helper.from_array(mask, "m")]
    node = helper.make_node("Attention", ["q", "k", "v"] + (["m"] if mask is not None else []), ["y"], **attrs)
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _check(m, shape, rng):
    feeds = {n: rng.standard_normal(shape).astype(np.float32) for n in "qkv"}
    g = load_onnx(m.SerializeToString())
    got = interpret(g, feeds)[0]
    np.testing.assert_allclose(got, ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-5, atol=1e-6)
    return g, got


def test_causal_attention_has_no_host_guard():
    rng = np.random.default_rng(5)
    g, _ = _check(_attention_model((1, 2, 6, 4), {"is_causal": 1}), (1, 2, 6, 4), rng)
    assert [n.op for n in g.nodes] == ["mul", "mul", "batch_matmul", "add", "softmax", "batch_matmul"]


def test_a_mask_that_hides_a_whole_row_keeps_the_guard():
    rng = np.random.default_rng(6)
    mask = np.ones((6, 6), bool)
    mask[2] = False  # query 2 sees no key: its output is 0, not NaN
    g, got = _check(_attention_model((1, 2, 6, 4), {}, mask), (1, 2, 6, 4), rng)
    assert "where" in [n.op for n in g.nodes]
    assert (got[:, :, 2] == 0).all()


def test_rms_norm_uses_no_reciprocal():
    rng = np.random.default_rng(7)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 8])
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-1, epsilon=1e-3)
    g = helper.make_graph([node], "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 8])],
                          initializer=[numpy_helper.from_array(rng.random(8).astype(np.float32), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 10
    feeds = {"x": rng.standard_normal((2, 5, 8)).astype(np.float32)}
    ir = load_onnx(m.SerializeToString())
    assert "reciprocal" not in [n.op for n in ir.nodes]
    np.testing.assert_array_equal(interpret(ir, feeds)[0], ReferenceEvaluator(m).run(None, feeds)[0])


@pytest.mark.slow
def test_causal_attention_is_one_accelerator_region_on_cloud_npu():
    import sim
    import tuner
    g = load_onnx(_attention_model((1, 8, 256, 64), {"is_causal": 1}).SerializeToString())
    plan = tuner.tune(g, sim.load_hw("cloud-npu"), trials=2, seed=0, progress=False, model_name="attention")
    assert len(plan.cost.functions) == 1
    assert plan.latency_s < 0.6 * plan.baselines["all_host"].latency_s
