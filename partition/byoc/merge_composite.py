"""merge_composite: replace each match of the target's pattern table by a call to a composite
function (attrs ``Composite=<entry name>``, ``PartitionedFromPattern=<op chain>``) kept in the
functions of the graph where the match is (``composite_<i>``).

Entries are tried by priority (highest first); for one entry, candidate roots are visited from the
last node back to the first, so a pattern whose tail is optional matches its longest form before
its shorter form can claim the head. Matches never overlap: a matched node is gone once outlined."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import Function, Graph
from ..patterns import Match, PatternEntry, by_priority, match
from .graphs import all_function_names, fresh_symbol, move_before, nested_graphs

if TYPE_CHECKING:
    from ..targets import Target


def outline_match(graph: Graph, m: Match, entry: PatternEntry, symbol: str) -> None:
    """Move the nodes of ``m`` into a composite function and call it where the match's root was."""
    fg = Graph(symbol)
    vmap = {id(v): fg.add_input(v.name, v.shape, v.dtype) for v in m.inputs}
    for n in m.nodes:
        nn = fg.add_node(n.op, [vmap[id(v)] for v in n.inputs], dict(n.attrs), name=n.name,
                         out_types=[o.type for o in n.outputs], out_names=[o.name for o in n.outputs])
        vmap.update((id(o), no) for o, no in zip(n.outputs, nn.outputs))
    fg.set_outputs([vmap[id(m.root)]])
    graph.functions[symbol] = Function(fg, {"Composite": entry.name, "PartitionedFromPattern": m.op_chain})
    call = graph.add_node("call", list(m.inputs), {"callee": symbol}, name=symbol, out_types=[m.root.type])
    move_before(graph, [call], m.root.producer)
    graph.replace_all_uses(m.root, call.output)
    root_name = m.root.name
    for n in reversed(m.nodes):
        graph.erase_node(n)
    graph.rename(call.output, root_name)  # the fused value keeps the model's name


def _merge_in(graph: Graph, table: tuple[PatternEntry, ...], taken: set[str]) -> None:
    for entry in table:
        gone: set[int] = set()
        for node in reversed(list(graph.nodes)):
            if id(node) in gone or len(node.outputs) != 1:
                continue
            m = match(entry.pattern, node.output, graph.outputs)
            if m is None or not entry.check(m):
                continue
            outline_match(graph, m, entry, fresh_symbol("composite", taken))
            gone.update(id(n) for n in m.nodes)


def merge_composite(graph: Graph, target: "Target") -> Graph:
    """Mutates and returns ``graph`` (If/Loop bodies included)."""
    table = by_priority(target.patterns)
    taken = all_function_names(graph)
    for _, g in list(nested_graphs(graph)):
        _merge_in(g, table, taken)
    return graph
