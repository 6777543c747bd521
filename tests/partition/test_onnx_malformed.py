"""Malformed ONNX files and untrusted external data: each refused with one line naming the problem,
never a traceback, never read outside the model's folder; valid external data still loads."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.external_data_helper import set_external_data  # noqa: E402

from partition import interpret  # noqa: E402
from partition.onnx.importer import OnnxImportError, load_onnx  # noqa: E402

ZOO = Path(__file__).resolve().parents[1] / "data" / "zoo"


def _model(nodes, inits=(), *, opset=17, x_shape=(1, 4), y_shape=(1, 4), x_type=TensorProto.FLOAT):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", x_type, list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))],
                          initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _error(model_or_path) -> str:
    src = model_or_path.SerializeToString() if hasattr(model_or_path, "SerializeToString") else model_or_path
    with pytest.raises(OnnxImportError) as e:
        load_onnx(src)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


# ---------------------------------------------------------------------------- graph structure

def test_two_nodes_defining_one_value_are_refused():
    m = _model([helper.make_node("Relu", ["x"], ["t"], name="a"), helper.make_node("Neg", ["x"], ["t"], name="b"),
                helper.make_node("Relu", ["t"], ["y"], name="c")])
    msg = _error(m)
    assert "'t' is defined twice" in msg and "'a'" in msg and "'b'" in msg and "SSA" in msg


def test_a_node_redefining_a_graph_input_is_refused():
    m = _model([helper.make_node("Relu", ["x"], ["x"], name="a"), helper.make_node("Relu", ["x"], ["y"])])
    assert "'x' is defined twice" in _error(m)


def test_ssa_is_checked_inside_sub_graphs():
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["u"]), helper.make_node("Neg", ["x"], ["u"])],
                             "then_g", [], [helper.make_tensor_value_info("u", TensorProto.FLOAT, [1, 4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["v"])], "else_g", [],
                              [helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 4])])
    cond = numpy_helper.from_array(np.array(True), "c")
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], [cond])
    msg = _error(m)
    assert "'u' is defined twice" in msg and "then_g" in msg


def test_string_initializer_where_a_float_tensor_is_expected_is_refused():
    w = helper.make_tensor("w", TensorProto.STRING, [1, 4], [b"a", b"b", b"c", b"d"])
    msg = _error(_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [w]))
    assert msg.startswith("node 'add' (Add): input 1 'w' is tensor(string)")


def test_mixed_input_types_of_one_type_variable_are_refused():
    w = numpy_helper.from_array(np.ones((1, 4), np.int64), "w")
    msg = _error(_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [w]))
    assert "is tensor(int64) but input 0 'x' is tensor(float)" in msg


@pytest.mark.parametrize("ir", [99999, -5, 1 << 40])
def test_bogus_ir_version_is_refused(ir):
    m = _model([helper.make_node("Relu", ["x"], ["y"])])
    m.ir_version = ir
    assert f"ir_version {ir} is not an ONNX IR version" in _error(m)


def test_wrong_typed_attribute_is_refused():
    idx = numpy_helper.from_array(np.zeros((1, 4), np.int64), "i")
    n = helper.make_node("GatherElements", ["x", "i"], ["y"], name="ge")
    n.attribute.append(helper.make_attribute("axis", [1.0, 2.0]))
    assert _error(_model([n], [idx])) == "node 'ge' (GatherElements): attribute 'axis' is FLOATS; GatherElements expects INT"


def test_unknown_elem_types_are_refused():
    m = _model([helper.make_node("Relu", ["x"], ["y"])])
    m.graph.input[0].type.tensor_type.elem_type = 77
    assert "input 'x' has unknown elem_type 77" in _error(m)
    w = numpy_helper.from_array(np.ones((1, 4), np.float32), "w")
    w.data_type = 99
    assert "initializer 'w' has unknown elem_type 99" in _error(_model([helper.make_node("Add", ["x", "w"], ["y"])], [w]))


def test_checks_leave_valid_models_alone():
    """Initializers listed as graph inputs too (old exporters) and outputs without a declared type
    are valid; a well-typed Add imports and computes x + w."""
    w = numpy_helper.from_array(np.full((1, 4), 2.0, np.float32), "w")
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [w])
    m.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 4]))
    m.graph.output[0].type.tensor_type.elem_type = 0
    g = load_onnx(m.SerializeToString())
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    np.testing.assert_array_equal(interpret(g, [x])[0], x + 2)


def test_a_device_file_is_not_read(tmp_path):
    link = tmp_path / "zero.onnx"
    link.symlink_to("/dev/zero")
    assert "is not a regular file" in _error(str(link))


# ---------------------------------------------------------------------------- external data

def _external_model(folder: Path, *, location="w.data", offset=None, length=None, write=True,
                    data=None) -> Path:
    """x + w with w (1x4 float32) stored in ``location`` relative to ``folder``."""
    w = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32) if data is None else data
    t = numpy_helper.from_array(w, "w")
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [t])
    init = m.graph.initializer[0]
    if write:
        (folder / location).parent.mkdir(parents=True, exist_ok=True)
        (folder / location).write_bytes(w.tobytes())
    set_external_data(init, location, offset=offset, length=length)
    init.ClearField("raw_data")
    init.data_location = TensorProto.EXTERNAL
    path = folder / "m.onnx"
    path.write_bytes(m.SerializeToString())
    return path


def test_valid_external_data_loads_and_computes(tmp_path):
    p = _external_model(tmp_path, location="sub/w.data")
    g = load_onnx(str(p))
    np.testing.assert_array_equal(interpret(g, [np.zeros((1, 4), np.float32)])[0], [[1, 2, 3, 4]])


def test_missing_external_file_is_named(tmp_path):
    p = _external_model(tmp_path, location="weights.bin", write=False)
    msg = _error(str(p))
    assert "external data file 'weights.bin' is missing" in msg and "'w'" in msg


@pytest.mark.parametrize("location", ["../outside.data", "../../etc/passwd", "sub/../../outside.data"])
def test_location_outside_the_folder_is_refused(tmp_path, location):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "outside.data").write_bytes(np.ones(4, np.float32).tobytes())
    p = _external_model(folder, location=location, write=False)
    assert "points outside the model's folder; refused" in _error(str(p))


def test_absolute_location_is_refused(tmp_path):
    target = tmp_path / "abs.data"
    target.write_bytes(np.ones(4, np.float32).tobytes())
    p = _external_model(tmp_path, location=str(target), write=False)
    assert "is not a path relative to the model's folder; refused" in _error(str(p))


def test_symlink_escaping_the_folder_is_refused(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    secret = tmp_path / "secret.data"
    secret.write_bytes(np.ones(4, np.float32).tobytes())
    (folder / "w.data").symlink_to(secret)
    p = _external_model(folder, location="w.data", write=False)
    assert "points outside the model's folder; refused" in _error(str(p))


def test_symlink_to_a_device_inside_the_folder_is_refused(tmp_path):
    (tmp_path / "dev").mkdir()
    p = _external_model(tmp_path, location="w.data", write=False)
    (tmp_path / "w.data").symlink_to("/dev/zero")
    assert "outside the model's folder" in _error(str(p))


@pytest.mark.parametrize("offset,length,want", [
    (8, 16, "range [8, 24) lies beyond the end of 'w.data' (16 bytes)"),
    (0, 1 << 40, "beyond the end"),
    (0, 8, "holds 8 bytes; its shape [1, 4] needs 16"),
])
def test_offsets_and_lengths_beyond_the_file_are_refused(tmp_path, offset, length, want):
    p = _external_model(tmp_path, offset=offset, length=length)
    assert want in _error(str(p))


def test_non_numeric_offset_is_refused(tmp_path):
    p = _external_model(tmp_path)
    m = onnx.load(str(p), load_external_data=False)
    m.graph.initializer[0].external_data.add(key="offset", value="lots")
    p.write_bytes(m.SerializeToString())
    assert "offset 'lots' is not an integer" in _error(str(p))


def test_external_data_without_a_folder_is_an_error(tmp_path):
    p = _external_model(tmp_path)
    assert "load the model from its path" in _error(p.read_bytes())


def test_zoo_dynamo_exports_with_external_data_still_load():
    """The torch dynamo exporter writes its weights to NAME.onnx.data beside the model."""
    path = ZOO / "espcn.dynamo.onnx"
    assert os.path.exists(str(path) + ".data")
    g = load_onnx(str(path))
    assert any(c.data.size > 100 for c in g.constants)


# ---------------------------------------------------------------------------- found by the fuzz family

def test_node_signature_against_the_schema():
    """Too few or too many inputs, and a required attribute missing (an op type swapped under a
    node), are one line naming the node, not a crash in the converter."""
    m = _model([helper.make_node("Reshape", ["x"], ["y"], name="r")])
    assert _error(m) == "node 'r' (Reshape): required input 1 is missing (Reshape takes at least 2)"
    m = _model([helper.make_node("Relu", ["x", "x"], ["y"], name="r")])
    assert _error(m) == "node 'r' (Relu): 2 inputs; Relu takes at most 1"
    m = _model([helper.make_node("Loop", ["", "", "x"], ["y"], name="l")])
    assert _error(m) == "node 'l' (Loop): missing attribute 'body'"


def test_names_that_are_not_utf8_are_refused():
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="relu")])
    raw = m.SerializeToString().replace(b"relu", b"r\xf1lu")
    with pytest.raises(OnnxImportError, match="is not valid UTF-8 text"):
        load_onnx(raw)


def test_stripped_weights_declaring_huge_or_negative_dims_are_refused():
    from partition.onnx.importer import MAX_FILL_ELEMENTS
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[MAX_FILL_ELEMENTS + 1])
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [w])
    m.metadata_props.add(key="weights_stripped", value="true")
    assert "filling more than" in _error(m)
    w2 = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-1, 4])
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [w2])
    m.metadata_props.add(key="weights_stripped", value="true")
    assert "initializer 'w' has negative dims [-1, 4]" in _error(m)
