"""col2im (ONNX Col2Im) and max_unpool (ONNX MaxUnpool) against onnxruntime and an independent
loop, their shapes given as constants or computed at run time, their one-line errors and costs."""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper

from test_ops import Const, assert_same, import_error, one_node_model, ort_node, run_op

from partition import interpret, load_onnx
from partition.interpreter import InterpretError
from partition.ir import TensorType
from partition.ops import OpError, infer_types


@pytest.fixture
def rng():
    return np.random.default_rng(18)


def _loop_col2im(x, image, block, strides, pads, dil):
    """torch.nn.Fold, one element at a time."""
    n = len(image)
    padded = [image[i] + pads[i] + pads[n + i] for i in range(n)]
    grid = [(padded[i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(n)]
    c = x.shape[1] // math.prod(block)
    out = np.zeros((x.shape[0], c, *padded), np.float64)
    for b in range(x.shape[0]):
        for ch in range(c):
            for k, off in enumerate(np.ndindex(*block)):
                for l, pos in enumerate(np.ndindex(*grid)):
                    at = tuple(p * s + o * d for p, s, o, d in zip(pos, strides, off, dil))
                    out[(b, ch) + at] += x[b, ch * math.prod(block) + k, l]
    crop = tuple(slice(pads[i], pads[i] + image[i]) for i in range(n))
    return out[(slice(None), slice(None)) + crop]


COL2IM = [  # image, block, strides, pads, dilations
    ((5, 5), (2, 2), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((6, 7), (3, 2), (2, 1), (1, 0, 1, 2), (1, 2)),
    ((4, 9), (1, 3), (1, 3), (0, 1, 0, 1), (1, 1)),
]


@pytest.mark.parametrize("image,block,strides,pads,dil", COL2IM)
def test_col2im_vs_ort_and_a_loop(rng, image, block, strides, pads, dil):
    n = len(image)
    grid = [(image[i] + pads[i] + pads[n + i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(n)]
    x = rng.standard_normal((2, 3 * math.prod(block), math.prod(grid))).astype(np.float32)
    attrs = {"strides": list(strides), "pads": list(pads), "dilations": list(dil)}
    ins = [x, Const(np.array(image, np.int64)), Const(np.array(block, np.int64))]
    model, feeds = one_node_model("Col2Im", ins, attrs, opset=18)
    g = load_onnx(model.SerializeToString())
    assert [n.op for n in g.nodes] == ["col2im"]
    got = interpret(g, feeds)[0]
    assert_same([got], ort_node("Col2Im", ins, attrs, opset=18), exact=False)
    np.testing.assert_allclose(got, _loop_col2im(x, image, block, strides, pads, dil), rtol=1e-5, atol=1e-5)


def test_col2im_3d_and_cost(rng):
    image, block = (3, 4, 5), (2, 2, 3)
    x = rng.standard_normal((1, 2 * 12, 2 * 3 * 3)).astype(np.float32)
    got = run_op("col2im", [x], {"image_shape": image, "block_shape": block})[0]
    assert got.shape == (1, 2, 3, 4, 5)
    np.testing.assert_allclose(got, _loop_col2im(x, image, block, (1,) * 3, (0,) * 6, (1,) * 3), rtol=1e-5, atol=1e-5)
    from partition.ops import OPS
    c = OPS["col2im"].cost([TensorType(x.shape, "float32")], [TensorType(got.shape, "float32")],
                           {"image_shape": image, "block_shape": block})
    assert (c.macs, c.flops, c.bytes_out) == (0, x.size, got.nbytes)


def test_col2im_shapes_at_run_time_use_the_declared_shape(rng):
    x = rng.standard_normal((1, 4, 16)).astype(np.float32)
    image, block = np.array([5, 5], np.int64), np.array([2, 2], np.int64)
    model, feeds = one_node_model("Col2Im", [x, image, block], {}, opset=18)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("out0", TensorProto.FLOAT, [1, 1, 5, 5]))
    g = load_onnx(model.SerializeToString())
    np.testing.assert_allclose(interpret(g, feeds)[0], ort_node("Col2Im", [x, image, block], {}, opset=18)[0],
                               rtol=1e-6)
    feeds["in1"] = np.array([3, 9], np.int64)  # another image of 16 blocks at run time: one line
    with pytest.raises(InterpretError, match=r"col2im: .*give shape \[1, 1, 3, 9\], not the declared \[1, 1, 5, 5\]"):
        interpret(g, feeds)
    # without a declared shape it is the usual static-input error naming the node
    model, _ = one_node_model("Col2Im", [x, image, block], {}, opset=18)
    with pytest.raises(Exception, match="computed at run time"):
        load_onnx(model.SerializeToString())


@pytest.mark.parametrize("image,block,match", [((5, 5), (2, 2), "gives? 16|give 16"), ((2, 2), (3, 3), "does not fit"),
                                               ((5,), (2, 2), "same number")])
def test_col2im_errors(rng, image, block, match):
    x = rng.standard_normal((1, 4, 9)).astype(np.float32)
    with pytest.raises(OpError, match=match) as e:
        infer_types("col2im", [TensorType(x.shape, "float32")],
                    {"image_shape": image, "block_shape": block})
    assert "\n" not in str(e.value)


def _pool_unpool_model(shape, kernel, strides, pads):
    n = len(kernel)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    pool = helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=kernel, strides=strides, pads=pads)
    unpool = helper.make_node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=kernel, strides=strides, pads=pads)
    g = helper.make_graph([pool, unpool], "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])
    m.ir_version = 10
    return m, n


@pytest.mark.parametrize("shape,kernel,strides,pads", [((2, 3, 8, 6), [2, 2], [2, 2], [0, 0, 0, 0]),
                                                       ((1, 2, 7, 7), [3, 3], [2, 2], [1, 1, 1, 1])])
def test_max_unpool_inverts_max_pool_as_onnxruntime(rng, shape, kernel, strides, pads):
    import onnxruntime as ort
    m, _ = _pool_unpool_model(shape, kernel, strides, pads)
    x = rng.standard_normal(shape).astype(np.float32)
    g = load_onnx(m.SerializeToString())
    assert "max_unpool" in [n.op for n in g.nodes]
    got = interpret(g, {"x": x})[0]
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    # independent: each maximum sits where it was, every other element is 0
    assert got.shape[:2] == x.shape[:2] and np.isin(got[got != 0], x).all()


def test_max_unpool_output_shape(rng):
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    i = np.array([[[[5, 7], [13, 15]]]], np.int64)
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    same = [x, i, Const(np.array([1, 1, 4, 4], np.int64))]
    model, feeds = one_node_model("MaxUnpool", same, attrs, opset=22)
    got = interpret(load_onnx(model.SerializeToString()), feeds)
    assert_same(got, ort_node("MaxUnpool", same, attrs, opset=22), exact=True)
    msg = import_error("MaxUnpool", [x, i, Const(np.array([1, 1, 5, 5], np.int64))], attrs, opset=22)
    assert "output_shape [1, 1, 5, 5] other than the inferred [1, 1, 4, 4] is not supported" in msg
    with pytest.raises(OpError, match="outside the 16 elements"):
        run_op("max_unpool", [x, i * 2], {"out": (1, 1, 4, 4)})
