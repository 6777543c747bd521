"""partition.onnx.gelu_fusion: the exact GELU written out as ONNX ops imports as one ``gelu`` node,
with onnxruntime's numbers; anything short of exactly that function stays as it was."""
import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from partition import load_onnx
from partition.interpreter import interpret

SHAPE = [2, 3, 8]


def _model(nodes, consts, outputs=("y",)):
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in consts.items()]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def torch_form(div=math.sqrt(2.0), half=0.5, last_x="x"):
    """torch.onnx (TorchScript) of F.gelu: Div -> Erf -> Add 1 -> Mul x -> Mul 0.5."""
    n = [helper.make_node("Div", ["x", "s2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
         helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", [last_x, "a"], ["m"]),
         helper.make_node("Mul", ["m", "half"], ["y"])]
    return n, {"s2": div, "one": 1.0, "half": half}


def hf_form():
    """x * 0.5 * (1.0 + erf(x * (1/sqrt 2))): the 0.5 first, the scale as a multiplication."""
    n = [helper.make_node("Mul", ["x", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
         helper.make_node("Add", ["one", "e"], ["a"]), helper.make_node("Mul", ["x", "half"], ["h"]),
         helper.make_node("Mul", ["h", "a"], ["y"])]
    return n, {"r2": 1.0 / math.sqrt(2.0), "one": 1.0, "half": 0.5}


def half_first():
    """((1 + erf) * 0.5) * x"""
    n = [helper.make_node("Div", ["x", "s2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
         helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["a", "half"], ["m"]),
         helper.make_node("Mul", ["x", "m"], ["y"])]
    return n, {"s2": math.sqrt(2.0), "one": 1.0, "half": 0.5}


def _reference(data: bytes, x: np.ndarray) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(data).run(None, {"x": x})


@pytest.mark.parametrize("form", [torch_form, hf_form, half_first])
def test_each_written_out_gelu_imports_as_one_node_with_onnxruntimes_numbers(form, monkeypatch):
    nodes, consts = form()
    data = _model(nodes, consts)
    g = load_onnx(data)
    assert [n.op for n in g.nodes] == ["gelu"] and not g.constants
    import partition.onnx.importer as importer
    monkeypatch.setattr(importer, "fuse_erf_gelu", lambda graph: 0)
    unfused = load_onnx(data)
    assert len(unfused.nodes) == 5 and g.outputs[0].name == unfused.outputs[0].name  # the output keeps its name
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32) * 3
    got = interpret(g, {"x": x})
    got = list(got.values())[0] if isinstance(got, dict) else got[0]
    want = _reference(data, x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    ref = x * 0.5 * (1 + np.vectorize(math.erf)(x.astype(np.float64) / math.sqrt(2)))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["div by 2", "half is 0.4", "another x", "erf used twice", "sum an output"])
def test_anything_short_of_the_exact_function_is_left_alone(case):
    if case == "div by 2":
        nodes, consts = torch_form(div=2.0)
        outs = ("y",)
    elif case == "half is 0.4":
        nodes, consts = torch_form(half=0.4)
        outs = ("y",)
    elif case == "another x":
        nodes, consts = torch_form(last_x="x2")
        nodes = [helper.make_node("Neg", ["x"], ["x2"])] + nodes
        outs = ("y",)
    elif case == "erf used twice":
        nodes, consts = torch_form()
        outs = ("y", "e")
    else:
        nodes, consts = torch_form()
        outs = ("y", "a")
    data = _model(nodes, consts, outs)
    g = load_onnx(data)
    ops = [n.op for n in g.nodes]
    assert "gelu" not in ops and "erf" in ops
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    got = interpret(g, {"x": x})
    got = list(got.values()) if isinstance(got, dict) else list(got)
    for a, b in zip(got, _reference(data, x)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_the_zoo_bert_has_its_gelus_fused():
    from pathlib import Path
    f = Path(__file__).resolve().parents[3] / "shared" / "models" / "bert_small.shapes.onnx"
    if not f.exists():
        pytest.skip("../shared/models absent")
    import onnx
    erfs = sum(n.op_type == "Erf" for n in onnx.load(str(f), load_external_data=False).graph.node)
    g = load_onnx(str(f))
    ops = [n.op for n in g.nodes]
    assert erfs > 0 and ops.count("gelu") == erfs and "erf" not in ops
