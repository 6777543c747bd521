"""Device-resident tensors: graph inputs and outputs that live in the accelerator's memory across
inferences (a decoder's KV cache: the step reads last step's cache where it was left, and leaves
the new one there for the next step), so they do not cross the host<->accelerator link per step.

A graph marks them by name in ``graph.meta["device_resident"]`` (a tuple of names of its own inputs
and outputs; ``mark_device_resident`` checks them). What the mark means for costing
(docs/PARTITIONING.md, "Device-resident tensors"):

- an external function's parameter bound to a resident input is already on the device: it does
  not cross (``call_residency``);
- an external function's result that is a resident output and is read by nothing else stays on
  the device: it does not cross;
- a resident input read by a host op must come back over the link once, and a resident output
  made on the host must go over once (``host_crossings``): the mark never makes a host op's
  operands free, it only says where the tensor lives between steps.

The partition search (``tuner.partition_problem``) and the costing of a partitioned graph
(``sim.graph.subgraph.cost_graph``, ``tuner.costing.graph_cost``, the device runtime) use these
three functions, so they agree by construction.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from .ir import Graph, IRError, Node, Value

META_KEY = "device_resident"


def resident_names(graph: Graph) -> frozenset[str]:
    return frozenset(graph.meta.get(META_KEY, ()) or ())


def mark_device_resident(graph: Graph, names: Iterable[str]) -> Graph:
    """Add ``names`` (inputs or outputs of ``graph``) to its device-resident tensors; an unknown
    name raises IRError naming it. Returns ``graph``."""
    names = tuple(dict.fromkeys(names))
    known = {v.name for v in (*graph.inputs, *graph.outputs)}
    bad = [n for n in names if n not in known]
    if bad:
        raise IRError(f"device-resident tensor '{bad[0]}' is not an input or output of graph '{graph.name}'")
    graph.meta[META_KEY] = tuple(dict.fromkeys((*graph.meta.get(META_KEY, ()), *names)))
    return graph


def _is_external(node: Node, functions: Mapping) -> bool:
    fn = functions.get(node.attrs.get("callee")) if node.op == "call" else None
    return fn is not None and "Compiler" in fn.attrs


def resident_inputs(graph: Graph) -> tuple[Value, ...]:
    names = resident_names(graph)
    return tuple(v for v in graph.inputs if v.name in names)


def resident_outputs(graph: Graph) -> tuple[Value, ...]:
    names = resident_names(graph)
    return tuple(dict.fromkeys(v for v in graph.outputs if v.name in names))


def call_residency(graph: Graph, call: Node) -> tuple[frozenset[int], frozenset[int]]:
    """(argument positions, result positions) of a call in ``graph`` (the main graph) that do not
    cross the link: arguments that are resident inputs, and results that are resident outputs read
    by no node (any reader is outside the function, so the result crosses for it anyway)."""
    if not resident_names(graph):
        return frozenset(), frozenset()
    ins = {id(v) for v in resident_inputs(graph)}
    outs = {id(v) for v in resident_outputs(graph)}
    args = frozenset(i for i, v in enumerate(call.inputs) if id(v) in ins)
    results = frozenset(i for i, v in enumerate(call.outputs) if id(v) in outs and not v.users)
    return args, results


def host_crossings(graph: Graph) -> tuple[Value, ...]:
    """Resident tensors that cross the link once per inference because the host touches them: a
    resident input read by a host op (or returned as an output that is not resident), and a
    resident output that no external function produces. In graph order, each once."""
    names = resident_names(graph)
    if not names:
        return ()
    out = []
    outputs = {id(v) for v in graph.outputs}
    res_out = {id(v) for v in resident_outputs(graph)}
    for v in resident_inputs(graph):
        host_read = any(not _is_external(u, graph.functions) for u in v.users)
        if host_read or (id(v) in outputs and id(v) not in res_out):
            out.append(v)
    for v in resident_outputs(graph):
        made_on_device = v.producer is not None and _is_external(v.producer, graph.functions)
        if not made_on_device and not (v.producer is None and v.name in names and v in graph.inputs):
            out.append(v)
    return tuple(dict.fromkeys(out))


__all__ = ["META_KEY", "resident_names", "mark_device_resident", "resident_inputs", "resident_outputs",
           "call_residency", "host_crossings"]
