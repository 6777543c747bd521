"""Reading ONNX protobuf objects: element types as numpy dtypes, node attributes as Python values,
and every (sub-)graph of a model."""
from __future__ import annotations

from typing import Any

import numpy as np


def all_graphs(graph):
    """The graph and every sub-graph (If branches, Loop bodies), depth first."""
    from onnx import AttributeProto
    yield graph
    for n in graph.node:
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                yield from all_graphs(a.g)
            elif a.type == AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from all_graphs(g)


def np_dtype(elem_type: int) -> np.dtype:
    from onnx import helper
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def attr_dict(node) -> dict[str, Any]:
    from onnx import helper
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        out[a.name] = v
    return out

