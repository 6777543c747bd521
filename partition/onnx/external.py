"""Reading ONNX external data (``.data`` files beside the model) without trusting the file.

onnx's own loader follows ``location`` wherever it points; a model is untrusted input, so here a
location must name a regular file inside the model's folder (after resolving ``..`` and symlinks),
and ``offset``/``length`` must lie within that file and match the tensor's size. Every failure is
one line naming the tensor and the file.
"""
from __future__ import annotations

import os

import numpy as np

from .errors import OnnxImportError
from .proto import all_graphs


def _fail(label: str, msg: str) -> ValueError:
    return OnnxImportError(f"{label}: {msg}")


def _tensors(model):
    """Every TensorProto that may carry external data: initializers and tensor-valued attributes
    (Constant nodes), in the main graph and every sub-graph."""
    for g in all_graphs(model.graph):
        yield from g.initializer
        for n in g.node:
            for a in n.attribute:
                if a.HasField("t"):
                    yield a.t
                yield from a.tensors


def has_external(model) -> bool:
    from onnx import TensorProto
    return any(t.data_location == TensorProto.EXTERNAL for t in _tensors(model))


def _int_field(value: str, key: str, tensor: str, label: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise _fail(label, f"tensor '{tensor}': external data {key} '{value}' is not an integer") from None
    if n < 0:
        raise _fail(label, f"tensor '{tensor}': external data {key} {n} is negative")
    return n


def resolve_location(location: str, base_dir: str, tensor: str, label: str) -> str:
    """The real path of ``location`` when it is a regular file inside ``base_dir``; else one line."""
    if not location:
        raise _fail(label, f"tensor '{tensor}' is stored externally but names no location")
    if "\0" in location or os.path.isabs(location) or os.path.splitdrive(location)[0]:
        raise _fail(label, f"tensor '{tensor}': external data location '{location}' is not a path "
                           f"relative to the model's folder; refused")
    root = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, path]) != root:
        raise _fail(label, f"tensor '{tensor}': external data location '{location}' points outside the "
                           f"model's folder; refused")
    if not os.path.exists(path):
        raise _fail(label, f"tensor '{tensor}': external data file '{location}' is missing "
                           f"(looked in {root})")
    if not os.path.isfile(path):
        raise _fail(label, f"tensor '{tensor}': external data location '{location}' is not a regular file")
    return path


_SUB_BYTE_BITS = {"INT4": 4, "UINT4": 4, "FLOAT4E2M1": 4, "INT2": 2, "UINT2": 2}


def _expected_bytes(t) -> int | None:
    """Bytes a tensor of ``t``'s dims and type occupies as raw data (None for variable-size types)."""
    from onnx import TensorProto, helper
    if t.data_type == TensorProto.STRING:
        return None
    try:
        dt = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
    except (KeyError, ValueError, TypeError):
        return None
    count = 1
    for d in t.dims:
        count *= int(d)
    # Sub-byte types are packed: two 4-bit (four 2-bit) elements per byte.
    bits = _SUB_BYTE_BITS.get(TensorProto.DataType.Name(t.data_type))
    if bits is not None:
        return (count * bits + 7) // 8
    return count * dt.itemsize


def load_external(model, base_dir: str | None, label: str) -> None:
    """Read every external tensor of ``model`` into ``raw_data`` (in place), refusing locations
    outside ``base_dir`` and ranges outside the file. ``base_dir`` None (a model given as bytes)
    makes any external tensor an error, since there is no folder to read it from."""
    from onnx import TensorProto
    for t in _tensors(model):
        if t.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        if base_dir is None:
            raise _fail(label, f"tensor '{t.name}' keeps its data in external file '{info.get('location', '')}'; "
                               f"load the model from its path so the file can be found")
        path = resolve_location(info.get("location", ""), base_dir, t.name, label)
        size = os.path.getsize(path)
        offset = _int_field(info.get("offset", "0"), "offset", t.name, label)
        length = (_int_field(info["length"], "length", t.name, label) if "length" in info
                  else max(0, size - offset))
        if offset + length > size:
            raise _fail(label, f"tensor '{t.name}': external data range [{offset}, {offset + length}) lies "
                               f"beyond the end of '{info['location']}' ({size} bytes)")
        want = _expected_bytes(t)
        if want is not None and want != length:
            raise _fail(label, f"tensor '{t.name}': external data holds {length} bytes; "
                               f"its shape {list(t.dims)} needs {want}")
        with open(path, "rb") as f:
            f.seek(offset)
            t.raw_data = f.read(length)
        t.data_location = TensorProto.DEFAULT
        del t.external_data[:]
