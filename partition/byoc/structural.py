"""A structural key for a graph: equal keys mean the graphs compute the same function of their
inputs (same ops, attrs, wiring, types, constants and callees), whatever the value names."""
from __future__ import annotations

import hashlib
from typing import Any, Mapping

from ..ir import Function, Graph


def structural_key(graph: Graph, scope: Mapping[str, Function] | None = None) -> str:
    """sha256 of a canonical form; constants are compared by content (dtype, shape and bytes)."""
    scope = {**(scope or {}), **graph.functions}
    h = hashlib.sha256()

    def feed(*parts: Any) -> None:
        h.update(repr(parts).encode())
        h.update(b"\x00")

    ref: dict[int, str] = {}
    for i, v in enumerate(graph.inputs):
        ref[id(v)] = f"i{i}"
        feed("in", str(v.type))
    for i, c in enumerate(graph.constants):
        ref[id(c)] = f"c{i}"
        data = hashlib.sha256(c.data.tobytes()).hexdigest()
        feed("const", str(c.type), data)
    for j, n in enumerate(graph.nodes):
        attrs = []
        for k in sorted(n.attrs):
            a = n.attrs[k]
            if isinstance(a, Graph):
                a = structural_key(a, scope)
            elif k == "callee" and n.op == "call" and a in scope:
                fn = scope[a]
                a = (structural_key(fn.graph, scope),
                     sorted((ak, repr(av)) for ak, av in fn.attrs.items() if ak != "global_symbol"))
            attrs.append((k, repr(a)))
        feed("node", n.op, attrs, [ref[id(v)] for v in n.inputs], [str(o.type) for o in n.outputs])
        for k, o in enumerate(n.outputs):
            ref[id(o)] = f"n{j}.{k}"
    feed("out", [ref[id(v)] for v in graph.outputs])
    return h.hexdigest()
