"""A size computed at run time whose value onnx's symbolic shape inference ties to a declared output
shape (an expanded window function's Range) imports typed by that shape and matches onnxruntime;
one it cannot tie stays the one-line static-input error; a wrong value at run time is one line."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from partition import interpret, load_onnx
from partition.interpreter import InterpretError
from partition.onnx.importer import OnnxImportError


def _window_like(out_shape, reduce: bool = False):
    """size -> Range(0, size, 1) -> * (2 pi / size) -> cos, plus 0.5 * the same angles: elementwise
    with scalars and with each other (as HannWindow's function body is) -> the output."""
    c = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.float32)))  # noqa: E731
    nodes = [c("zero", 0.0), c("one", 1.0), c("tau", 2 * np.pi), c("half", 0.5),
             helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
             helper.make_node("Range", ["zero", "nf", "one"], ["r"]),
             helper.make_node("Div", ["tau", "nf"], ["inc"]),
             helper.make_node("Mul", ["r", "inc"], ["ang"]),
             helper.make_node("Cos", ["ang"], ["cs"]),
             helper.make_node("Mul", ["half", "ang"], ["ha"]),
             helper.make_node("Add", ["cs", "ha"], ["y" if not reduce else "t"])]
    if reduce:
        nodes.append(helper.make_node("ReduceSum", ["t"], ["y"], keepdims=0))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("n", TensorProto.INT64, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    return m


def test_range_sized_by_a_declared_output_imports_and_matches_ort():
    m = _window_like([7])
    g = load_onnx(m.SerializeToString())
    assert "range" in [n.op for n in g.nodes]
    feeds = {"n": np.array(7, np.int64)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(interpret(g, feeds)[0], want, rtol=1e-6, atol=1e-6)
    # another size at run time than the declared one: one line naming the node
    with pytest.raises(InterpretError, match=r"node r \(range\).*\[9\] exceeds its bound \[7\]"):
        interpret(g, {"n": np.array(9, np.int64)})
    with pytest.raises(InterpretError, match=r"shape \[5\].*not the declared \[7\]"):
        interpret(g, {"n": np.array(5, np.int64)})


def test_a_size_not_tied_to_any_declared_shape_stays_an_error():
    # the output is a sum (a scalar): nothing fixes the Range's length
    with pytest.raises(OnnxImportError, match=r"\(Range\): start/limit/delta input .* computed at run time"):
        load_onnx(_window_like([], reduce=True).SerializeToString())
    # no declared output shape at all
    with pytest.raises(OnnxImportError, match=r"computed at run time"):
        load_onnx(_window_like(None).SerializeToString())
