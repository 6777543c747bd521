"""annotate_target: mark each node the target can run (``node.meta["target"] = target.name``).

Composite calls of the target's own patterns are supported by construction; control flow (if,
loop) always stays on the host (its bodies are annotated on their own); any other node asks the
target's support predicate."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import Graph, Node
from .graphs import is_composite_call, nested_graphs

if TYPE_CHECKING:
    from ..targets import Target


def is_offloadable(node: Node, graph: Graph, target: "Target") -> bool:
    if node.op == "call":
        return is_composite_call(node, graph.functions, target.name)
    if node.op in ("if", "loop") or node.subgraphs():
        return False
    return bool(target.is_supported(node))


def annotate_target(graph: Graph, target: "Target") -> Graph:
    """Mutates and returns ``graph``; stale annotations from an earlier run are cleared."""
    for _, g in nested_graphs(graph):
        for n in g.nodes:
            n.meta.pop("target", None)
            if is_offloadable(n, g, target):
                n.meta["target"] = target.name
    return graph
