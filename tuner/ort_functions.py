"""Naming the kernels of the ops onnxruntime runs as their ONNX function body.

onnxruntime has no CPU kernel for some ops that ONNX defines as a function of other ops (with
onnxruntime 1.32: HardSwish, Mish, GroupNormalization). It inlines their bodies and names the new
nodes ``<OpType>_<counter>`` (``Softplus_60``, ``Tanh_61``, ``Mul_62`` for a Mish), so their
kernels carry no trace of the node they came from: in the calibration's profiles they went to
the run's rest, shared over every node, and the node itself was left at zero. On the activation
probes (``tuner.calibrate_probes``) that was a fifth to a third of their kernel time.

``name_function_bodies`` inlines those bodies itself, the way onnxruntime would, with the body's
nodes named ``<node name>/<OpType>_<i>``: the kernels then match the node by name
(``calibrate_context.attribute``), and onnxruntime runs the same kernels (same count, same
fusions: checked on mobilenet_v3_small, whose HardSwish after a convolution is fused into it
either way). Which ops onnxruntime inlines is asked of the installed onnxruntime, one op kind at
a time (``runs_as_function``), not listed here.
"""
from __future__ import annotations

import functools
from typing import Any, Mapping

import numpy as np


def _function_op(op_type: str, opset: int) -> bool:
    import onnx.defs
    try:
        s = onnx.defs.get_schema(op_type, opset, "")
    except Exception:  # noqa: BLE001 - onnx raises SchemaError for an unknown op
        return False
    return bool(s.has_function or s.has_context_dependent_function)


def _one_node(node: Any, types: Mapping[str, tuple[int, tuple[int, ...]]], opsets: list) -> Any:
    """A model of ``node`` alone, each input a graph input of its type (None if one is unknown)."""
    import onnx
    from onnx import helper
    ins = []
    for x in node.input:
        if x == "":
            continue
        if x not in types:
            return None
        elem, shape = types[x]
        ins.append(helper.make_tensor_value_info(x, elem, list(shape)))
    outs = [helper.make_value_info(o, onnx.TypeProto()) for o in node.output if o]
    return helper.make_model(helper.make_graph([node], "one", ins, outs), opset_imports=opsets)


@functools.lru_cache(maxsize=None)
def _probe(model_bytes: bytes, node_name: str) -> bool:
    """Whether onnxruntime runs the one-node model's node as a kernel of its own (named after it)."""
    from onnx import load_from_string
    from .calibrate_context import _is_kernel, _kernel_name, _profiled_events
    from .calibrate_host import random_feed
    feed = random_feed(load_from_string(model_bytes).graph.input, np.random.default_rng(0))
    try:
        events = _profiled_events(model_bytes, feed, 1)
    except Exception:  # noqa: BLE001 - an op onnxruntime cannot run alone: leave it as it is
        return True
    return any(_kernel_name(e["name"]).startswith(node_name) for e in events if _is_kernel(e))


def runs_as_function(node: Any, types: Mapping[str, tuple[int, tuple[int, ...]]], opsets: list) -> bool:
    """Whether onnxruntime inlines ``node`` (an op ONNX defines as a function, run alone on inputs
    of its types, gives no kernel named after it)."""
    opset = next((o.version for o in opsets if o.domain in ("", "ai.onnx")), 0)
    if node.domain not in ("", "ai.onnx") or not _function_op(node.op_type, opset):
        return False
    one = _one_node(node, types, opsets)
    if one is None:
        return False
    one.graph.node[0].name = "fn_probe"   # a copy of the node: make_graph copies
    return not _probe(one.SerializeToString(), "fn_probe")


def name_function_bodies(model: Any, types: Mapping[str, tuple[int, tuple[int, ...]]]) -> Any:
    """``model`` (a ModelProto, changed in place and returned) with each top-level node that
    onnxruntime would inline replaced by its function body, the body's nodes named
    ``<node name>/<OpType>_<i>`` and its inner values ``<node name>/<value>``. ``types``: value
    name -> (ONNX element type, shape) of the values the nodes read."""
    import onnx
    from onnx import inliner
    opsets = list(model.opset_import)
    inlined: dict[str, bool] = {}
    out = []
    for n in model.graph.node:
        if n.op_type not in inlined:
            inlined[n.op_type] = runs_as_function(n, types, opsets)
        one = _one_node(n, types, opsets) if inlined[n.op_type] else None
        if one is None:
            out.append(n)
            continue
        try:
            body = inliner.inline_selected_functions(one, [(n.domain, n.op_type)], inline_schema_functions=True).graph
        except Exception:  # noqa: BLE001 - a body onnx cannot expand here: onnxruntime inlines it, unnamed
            out.append(n)
            continue
        keep = set(n.input) | set(n.output)

        def rename(v: str, keep=keep, prefix=n.name) -> str:
            return v if v in keep or v == "" else f"{prefix}/{v}"
        for i, b in enumerate(body.node):
            nb = onnx.NodeProto()
            nb.CopyFrom(b)
            nb.name = f"{n.name}/{b.op_type}_{i}"
            nb.input[:] = [rename(v) for v in b.input]
            nb.output[:] = [rename(v) for v in b.output]
            out.append(nb)
        for init in body.initializer:
            t = onnx.TensorProto()
            t.CopyFrom(init)
            t.name = rename(init.name)
            model.graph.initializer.append(t)
    del model.graph.node[:]
    model.graph.node.extend(out)
    return model


def ir_types(graph: Any) -> dict[str, tuple[int, tuple[int, ...]]]:
    """value name -> (ONNX element type, shape) of every value of an IR graph and its bodies (the
    exporter keeps the IR's value names)."""
    from onnx.helper import np_dtype_to_tensor_dtype
    out: dict[str, tuple[int, tuple[int, ...]]] = {}
    for _, n in graph.walk():
        for v in (*n.inputs, *n.outputs):
            try:
                out[v.name] = (int(np_dtype_to_tensor_dtype(np.dtype(v.dtype))), tuple(int(d) for d in v.shape))
            except (TypeError, KeyError, ValueError):  # a dtype numpy does not name: left out
                continue
    return out
