"""Structural checks of an ONNX model before import, each failing with one line.

The importer trusts what these establish: the IR version is one onnx defines, every graph is in
SSA form (each value defined once), every declared element type is a known one, attributes have
the types the op's schema gives them, and node inputs have types the op's schema allows (so a
STRING tensor never reaches an arithmetic op, and an int64 never meets a float in an Add).
The onnx checker would say most of this too, but it also refuses what the importer handles on
purpose (stripped weights, external data before it is read), so the rules live here.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .errors import OnnxImportError
from .proto import all_graphs


def _fail(label: str, msg: str) -> ValueError:
    return OnnxImportError(f"{label}: {msg}")


def check_ir_version(model, label: str) -> None:
    """IR versions run 1..onnx.IR_VERSION; 0 means 'not a model' (``_read_model`` says so)."""
    import onnx
    v = int(model.ir_version)
    if v < 0 or v > onnx.IR_VERSION:
        raise _fail(label, f"ir_version {v} is not an ONNX IR version (the installed onnx knows "
                           f"1..{onnx.IR_VERSION})")


def _elem_name(elem_type: int) -> str | None:
    from onnx import TensorProto
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return None


def check_elem_type(elem_type: int, what: str, label: str, *, allow_undefined: bool = False) -> None:
    """An element type onnx defines and numpy can hold (UNDEFINED only where a type is optional)."""
    from onnx import TensorProto, helper
    if elem_type == TensorProto.UNDEFINED and allow_undefined:
        return
    name = _elem_name(elem_type)
    if name is None or elem_type == TensorProto.UNDEFINED:
        raise _fail(label, f"{what} has unknown elem_type {elem_type}")
    try:
        helper.tensor_dtype_to_np_dtype(elem_type)
    except (KeyError, ValueError, TypeError):
        raise _fail(label, f"{what} has elem_type {name}, which has no numpy type") from None


def _text(field, where: str, label: str) -> None:
    """protobuf hands back a string field holding invalid UTF-8 as bytes; names must be text."""
    if not isinstance(field, str):
        raise _fail(label, f"{where}: name {field[:40]!r} is not valid UTF-8 text")


def _check_graph(gp, label: str, where: str) -> None:
    """SSA and element types of one graph (not its sub-graphs: ``check_model`` walks those)."""
    defined: dict[str, str] = {}

    def define(name: str, what: str) -> None:
        if not name:
            return
        if name in defined:
            raise _fail(label, f"value '{name}' is defined twice in {where} (by {defined[name]} and "
                               f"{what}); ONNX graphs are in SSA form")
        defined[name] = what

    inits = set()
    for t in gp.initializer:
        _text(t.name, f"an initializer of {where}", label)
        if t.name in inits:
            raise _fail(label, f"initializer '{t.name}' appears twice in {where}")
        inits.add(t.name)
        check_elem_type(t.data_type, f"initializer '{t.name}'", label)
        if any(int(d) < 0 for d in t.dims):
            raise _fail(label, f"initializer '{t.name}' has negative dims {list(t.dims)}")
        define(t.name, f"initializer '{t.name}'")
    for vi in gp.input:
        if vi.type.HasField("tensor_type"):
            check_elem_type(vi.type.tensor_type.elem_type, f"input '{vi.name}'", label,
                            allow_undefined=vi.name in inits)
        if vi.name not in inits:  # old exporters list initializers as inputs too
            define(vi.name, f"input '{vi.name}'")
    for vi in list(gp.output) + list(gp.value_info):
        if vi.type.HasField("tensor_type"):
            check_elem_type(vi.type.tensor_type.elem_type, f"value '{vi.name}'", label, allow_undefined=True)
    for vi in list(gp.input) + list(gp.output) + list(gp.value_info):
        _text(vi.name, f"a value name in {where}", label)
    for i, n in enumerate(gp.node):
        for field in (n.name, n.op_type, n.domain, *n.input, *n.output):
            _text(field, f"node #{i} of {where}", label)
        who = f"node '{n.name or n.op_type}' (#{i}, {n.op_type})"
        for a in n.attribute:
            _text(a.name, who, label)
            for raw in ([a.s] if a.type == 3 else list(a.strings) if a.type == 8 else []):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise _fail(label, f"{who}: attribute '{a.name}' is not valid UTF-8 text") from None
        for o in n.output:
            define(o, who)


def check_model(model, label: str) -> None:
    """Every check above, over the main graph and every sub-graph."""
    check_ir_version(model, label)
    for k, gp in enumerate(all_graphs(model.graph)):
        _check_graph(gp, label, "the main graph" if k == 0 else f"sub-graph '{gp.name or k}'")


# ---------------------------------------------------------------------------- per node

def _schema(node, opset: int):
    from onnx import defs
    domain = "" if node.domain == "ai.onnx" else node.domain
    try:
        return defs.get_schema(node.op_type, opset, domain)
    except Exception:  # noqa: BLE001 - no schema: an unknown op, which the converter table reports
        return None


_ATTR_TYPE_NAMES = {1: "FLOAT", 2: "INT", 3: "STRING", 4: "TENSOR", 5: "GRAPH", 6: "FLOATS", 7: "INTS",
                    8: "STRINGS", 9: "TENSORS", 10: "GRAPHS", 11: "SPARSE_TENSOR", 12: "SPARSE_TENSORS",
                    13: "TYPE_PROTO", 14: "TYPE_PROTOS"}


def check_node_signature(node, opset: int, fail: Callable[[str], Exception]) -> None:
    """Each attribute of a default-domain node has the type its schema declares (``axis`` given as
    floats is a file error, not a crash in the converter), every required one is there, and the
    node has as many inputs and outputs as the schema allows."""
    schema = _schema(node, opset)
    if schema is not None:
        n_in = len(node.input)
        if n_in > schema.max_input:
            raise fail(f"{n_in} inputs; {node.op_type} takes at most {schema.max_input}")
        formals = list(schema.inputs)
        for i in range(schema.min_input):
            optional = i < len(formals) and formals[i].option == formals[i].option.Optional
            if not optional and (i >= n_in or not node.input[i]):
                raise fail(f"required input {i} is missing ({node.op_type} takes at least {schema.min_input})")
        if len(node.output) > schema.max_output:
            raise fail(f"{len(node.output)} outputs; {node.op_type} has at most {schema.max_output}")
        given = {a.name for a in node.attribute}
        missing = sorted(n for n, a in schema.attributes.items() if a.required and n not in given)
        if missing:
            raise fail(f"missing attribute '{missing[0]}'")
    for a in node.attribute:
        got = _ATTR_TYPE_NAMES.get(int(a.type))
        if got is None:
            raise fail(f"attribute '{a.name}' has unknown type {int(a.type)}")
        if schema is None or a.name not in schema.attributes:
            continue
        want = int(schema.attributes[a.name].type)
        if int(a.type) != want:
            raise fail(f"attribute '{a.name}' is {got}; {node.op_type} expects {_ATTR_TYPE_NAMES.get(want, want)}")


def _type_str(dtype: str) -> str | None:
    from onnx import TensorProto, helper
    try:
        code = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    except (KeyError, TypeError, ValueError):
        return None
    return f"tensor({TensorProto.DataType.Name(code).lower()})"


def check_input_types(node, opset: int, dtypes: list[str | None], fail: Callable[[str], Exception]) -> None:
    """The element types of a default-domain node's inputs against its schema: each type variable
    (``T``) allows a set of types and binds one type across the inputs that share it. ``dtypes``
    holds the numpy dtype name of each input (None where absent)."""
    schema = _schema(node, opset)
    if schema is None or not schema.inputs:
        return
    allowed: dict[str, set[str]] = {tc.type_param_str: set(tc.allowed_type_strs)
                                    for tc in schema.type_constraints}
    bound: dict[str, tuple[str, int]] = {}
    formals = list(schema.inputs)
    for i, dt in enumerate(dtypes):
        if dt is None:
            continue
        if i < len(formals):
            formal = formals[i]
        elif formals[-1].option == formals[-1].option.Variadic:
            formal = formals[-1]
        else:
            return  # more inputs than the schema has; the converter reports it
        ts = _type_str(dt)
        if ts is None:
            continue
        var = formal.type_str
        ok: Any = allowed.get(var, {var})
        if ts not in ok:
            kinds = sorted(ok)
            text = ", ".join(kinds[:4]) + (f" (or {len(kinds) - 4} more)" if len(kinds) > 4 else "")
            raise fail(f"input {i} '{node.input[i]}' is {ts}; {node.op_type} takes {text} there")
        homogeneous = not (formal.option == formal.option.Variadic and not formal.is_homogeneous)
        if var in allowed and homogeneous:
            prev = bound.setdefault(var, (ts, i))
            if prev[0] != ts:
                raise fail(f"input {i} '{node.input[i]}' is {ts} but input {prev[1]} '{node.input[prev[1]]}' "
                           f"is {prev[0]}; {node.op_type} needs both of one type ({var})")
