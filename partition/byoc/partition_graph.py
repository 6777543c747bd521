"""partition_graph: outline every region into an external function and call it from the host.

Each region becomes ``Function(attrs={Compiler: <target>, global_symbol: "<target>_main_<i>",
Primitive: 1})`` in the top-level graph's ``functions`` (calls inside If/Loop bodies reach it
through the interpreter's scope, as TVM keeps external functions at module level). The region's
constants move into the function, so its parameters are only activations; its composite functions
move with it. With ``target.share_identical_functions``, regions that are structurally identical
(same ops, attrs, shapes and constants) call one function. Composite calls left on the host (their
region was pruned or kept on the host) are inlined back into plain ops."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import Function, Graph, Node
from .graphs import all_function_names, callee, move_before, nested_graphs
from .merge_regions import region_boundary
from .structural import structural_key

if TYPE_CHECKING:
    from ..targets import Target


def _extract(graph: Graph, nodes: list[Node], name: str):
    inputs, consts, outputs = region_boundary(graph, nodes)
    fg = Graph(name)
    vmap = {id(v): fg.add_input(v.name, v.shape, v.dtype) for v in inputs}
    vmap.update((id(c), fg.add_const(c.data, c.name)) for c in consts)
    for n in nodes:
        nn = fg.add_node(n.op, [vmap[id(v)] for v in n.inputs], dict(n.attrs), name=n.name,
                         out_types=[o.type for o in n.outputs], out_names=[o.name for o in n.outputs])
        vmap.update((id(o), no) for o, no in zip(n.outputs, nn.outputs))
        fn = callee(n, graph.functions)
        if fn is not None:
            fg.functions[n.attrs["callee"]] = fn
    fg.set_outputs([vmap[id(o)] for o in outputs])
    return fg, inputs, outputs


def _replace_with_call(graph: Graph, nodes: list[Node], symbol: str, inputs, outputs) -> Node:
    call = graph.add_node("call", list(inputs), {"callee": symbol}, name=symbol,
                          out_types=[o.type for o in outputs])
    move_before(graph, [call], nodes[0])
    for o, new in zip(outputs, call.outputs):
        graph.replace_all_uses(o, new)
    for n in reversed(nodes):
        graph.erase_node(n)
    # Keep the region's value names on the call's outputs, so graph outputs (what users read from
    # a run) and host-side references keep the model's names.
    for o, new in zip(outputs, call.outputs):
        graph.rename(new, o.name)
    # The call sits where the region began; a host node between the region's nodes that reads a
    # region output must now follow it (legal: regions are convex, so no cycle).
    graph.toposort()
    return call


def inline_call(graph: Graph, node: Node, fn: Function) -> None:
    """Replace a call by the callee's body (used for composites that stay on the host)."""
    body = fn.graph
    vmap = {id(p): a for p, a in zip(body.inputs, node.inputs)}
    vmap.update((id(c), graph.add_const(c.data, c.name)) for c in body.constants)
    new = []
    for n in body.nodes:
        nn = graph.add_node(n.op, [vmap[id(v)] for v in n.inputs], dict(n.attrs), name=n.name,
                            out_types=[o.type for o in n.outputs])
        vmap.update((id(o), no) for o, no in zip(n.outputs, nn.outputs))
        new.append(nn)
    move_before(graph, new, node)
    for o, b in zip(node.outputs, body.outputs):
        graph.replace_all_uses(o, vmap[id(b)])
    graph.erase_node(node)
    for o, b in zip(node.outputs, body.outputs):
        if not vmap[id(b)].is_const and vmap[id(b)] not in graph.inputs:
            graph.rename(vmap[id(b)], o.name)


def _drop_host_composites(graph: Graph) -> None:
    for n in list(graph.nodes):
        fn = callee(n, graph.functions)
        if fn is not None and "Composite" in fn.attrs:
            inline_call(graph, n, fn)
    called = {n.attrs.get("callee") for n in graph.nodes if n.op == "call"}
    for sym in [s for s, f in graph.functions.items() if "Composite" in f.attrs and s not in called]:
        del graph.functions[sym]


def partition_graph(graph: Graph, target: "Target") -> Graph:
    """Mutates and returns ``graph``."""
    taken = all_function_names(graph)
    by_key: dict[str, str] = {}
    index = 0
    for _, g in list(nested_graphs(graph)):
        by_id: dict[int, list[Node]] = {}
        for n in g.nodes:
            if "region" in n.meta:
                by_id.setdefault(n.meta["region"], []).append(n)
        for rid in sorted(by_id):
            nodes = by_id[rid]
            while f"{target.name}_main_{index}" in taken:
                index += 1
            symbol = f"{target.name}_main_{index}"
            fg, inputs, outputs = _extract(g, nodes, symbol)
            key = structural_key(fg)
            if target.share_identical_functions and key in by_key:
                symbol = by_key[key]
            else:
                graph.functions[symbol] = Function(fg, {"Compiler": target.name, "global_symbol": symbol,
                                                        "Primitive": 1})
                taken.add(symbol)
                by_key[key] = symbol
            call = _replace_with_call(g, nodes, symbol, inputs, outputs)
            call.meta["target"] = target.name
        _drop_host_composites(g)
        g.constants = [c for c in g.constants if c.users or any(c is o for o in g.outputs)]
    return graph
