"""Helpers every BYOC pass shares: visiting a graph and its control-flow bodies, and looking up
the function a call node names."""
from __future__ import annotations

from typing import Iterator, Mapping

from ..ir import Function, Graph, Node


def nested_graphs(graph: Graph, path: str | None = None) -> Iterator[tuple[str, Graph]]:
    """``graph`` and every If/Loop body inside it, depth first in node order, with a stable path
    such as ``main/if_3.then_branch``. Function bodies are not visited: passes treat them as opaque."""
    path = path or graph.name
    yield path, graph
    for n in graph.nodes:
        for key, sg in n.attrs.items():
            if isinstance(sg, Graph):
                yield from nested_graphs(sg, f"{path}/{n.name}.{key}")


def callee(node: Node, scope: Mapping[str, Function]) -> Function | None:
    if node.op != "call":
        return None
    return scope.get(node.attrs.get("callee"))


def is_composite_call(node: Node, scope: Mapping[str, Function], target_name: str | None = None) -> bool:
    fn = callee(node, scope)
    if fn is None or "Composite" not in fn.attrs:
        return False
    return target_name is None or str(fn.attrs["Composite"]).startswith(target_name + ".")


def all_function_names(graph: Graph) -> set[str]:
    """Every function symbol defined anywhere under ``graph`` (so new symbols can avoid them)."""
    names: set[str] = set()
    stack = [graph]
    while stack:
        g = stack.pop()
        names.update(g.functions)
        stack.extend(fn.graph for fn in g.functions.values())
        stack.extend(sg for n in g.nodes for sg in n.subgraphs())
    return names


def fresh_symbol(base: str, taken: set[str]) -> str:
    i = 0
    while f"{base}_{i}" in taken:
        i += 1
    name = f"{base}_{i}"
    taken.add(name)
    return name


def move_before(graph: Graph, moved: list[Node], anchor: Node) -> None:
    """Put ``moved`` (nodes just appended with ``add_node``) in front of ``anchor`` in the node list."""
    ids = {id(n) for n in moved}
    rest = [n for n in graph.nodes if id(n) not in ids]
    pos = next(i for i, n in enumerate(rest) if n is anchor)
    graph.nodes = rest[:pos] + moved + rest[pos:]
