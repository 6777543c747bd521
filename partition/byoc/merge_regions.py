"""merge_compiler_regions: group annotated nodes into regions (``node.meta["region"] = id``).

Adjacent supported nodes (producer and user) merge greedily in topological order, repeated until
nothing changes, and a merge is legal only if it cannot create a cycle once every region becomes
one call: no path may leave the merged region, pass through a node outside it (a host node or
another region) and come back. Reachability is precomputed as bitsets over nodes and kept closed
under region contraction as regions grow, so each legality check is a few integer operations.

Control flow stays on the host; each If/Loop body gets its own regions. Regions are numbered in a
stable order (graph, then body, by first node), the target's prune policy drops regions not worth
offloading, and ``keep_on_host`` drops the chosen region ids (so a tuner can try partitions).
Dropping a region never makes another one illegal, so the other ids and regions stay the same.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, AbstractSet, Callable

from ..ir import Graph, IRError, Node
from ..ops import get_op
from .graphs import nested_graphs

if TYPE_CHECKING:
    from ..targets import Target


class RegionError(IRError):
    pass


@dataclass(frozen=True)
class Region:
    """A candidate region: value names it reads (activations and constants apart) and writes."""
    id: int
    graph: str
    nodes: tuple[str, ...]
    inputs: tuple[str, ...]
    constants: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass
class _Group:
    mask: int
    desc: int   # nodes reachable from the group (closed under contraction of other groups)
    anc: int    # nodes that reach the group


def _reachability(nodes: list[Node]) -> tuple[list[int], list[int]]:
    index = {id(n): i for i, n in enumerate(nodes)}
    desc = [0] * len(nodes)
    anc = [0] * len(nodes)
    for i, n in enumerate(nodes):
        for v in n.inputs:
            if v.producer is not None and id(v.producer) in index:
                p = index[id(v.producer)]
                anc[i] |= anc[p] | (1 << p)
    for i in range(len(nodes) - 1, -1, -1):
        for o in nodes[i].outputs:
            for u in o.users:
                j = index.get(id(u))
                if j is not None:
                    desc[i] |= desc[j] | (1 << j)
    return desc, anc


def form_regions(graph: Graph, offloaded: Callable[[Node], bool]) -> list[list[Node]]:
    """Maximal cycle-free groups of ``offloaded`` nodes of one graph (no recursion into bodies),
    each in topological order, ordered by first node."""
    nodes = graph.nodes
    desc, anc = _reachability(nodes)
    sup = [offloaded(n) for n in nodes]
    index = {id(n): i for i, n in enumerate(nodes)}
    parent = list(range(len(nodes)))
    groups = {i: _Group(1 << i, desc[i], anc[i]) for i in range(len(nodes)) if sup[i]}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def try_merge(a: int, b: int) -> bool:
        ga, gb = groups[a], groups[b]
        m = ga.mask | gb.mask
        d = (ga.desc | gb.desc) & ~m
        an = (ga.anc | gb.anc) & ~m
        if d & an:
            return False  # some node outside is both after and before the merged group: a cycle
        del groups[b]
        parent[b] = a
        groups[a] = _Group(m, d, an)
        for g in groups.values():
            if g is groups[a]:
                continue
            if g.desc & m:
                g.desc |= m | d
            if g.anc & m:
                g.anc |= m | an
        return True

    changed = True
    while changed:
        changed = False
        for i, n in enumerate(nodes):
            if not sup[i]:
                continue
            for v in n.inputs:
                j = index.get(id(v.producer)) if v.producer is not None else None
                if j is None or not sup[j]:
                    continue
                a, b = find(j), find(i)
                if a != b and try_merge(min(a, b), max(a, b)):
                    changed = True
    members: dict[int, list[Node]] = {}
    for i, n in enumerate(nodes):
        if sup[i]:
            members.setdefault(find(i), []).append(n)
    return sorted(members.values(), key=lambda ns: index[id(ns[0])])


def _no_compute(nodes: list[Node]) -> bool:
    return all(n.op != "call" and (get_op(n.op).category == "data" or n.op == "identity") for n in nodes)


def worth_offloading(policy: str, nodes: list[Node]) -> bool:
    """The named prune policies: ``none`` keeps every region; ``no_compute`` drops regions made
    only of data-movement ops."""
    if policy == "none":
        return True
    if policy == "no_compute":
        return not _no_compute(nodes)
    raise RegionError(f"unknown prune policy {policy!r}")


def merge_compiler_regions(graph: Graph, target: "Target",
                           keep_on_host: AbstractSet[int] = frozenset()) -> Graph:
    """Mutates and returns ``graph``: sets ``meta["region"]`` on every offloaded node."""
    ids = itertools.count()
    seen: list[int] = []
    for _, g in nested_graphs(graph):
        for n in g.nodes:
            n.meta.pop("region", None)
    for _, g in nested_graphs(graph):
        for grp in form_regions(g, lambda n: n.meta.get("target") == target.name):
            if not worth_offloading(target.prune_policy, grp):
                continue
            rid = next(ids)
            seen.append(rid)
            if rid in keep_on_host:
                continue
            for n in grp:
                n.meta["region"] = rid
    unknown = sorted(set(keep_on_host) - set(seen))
    if unknown:
        have = f"0..{len(seen) - 1}" if seen else "none"
        raise RegionError(f"keep_on_host names unknown region id(s) {', '.join(map(str, unknown))}; "
                          f"candidate regions: {have}")
    return graph


def regions(graph: Graph) -> tuple[Region, ...]:
    """The regions marked in ``graph`` (after merge_compiler_regions), by id."""
    out = []
    for path, g in nested_graphs(graph):
        by_id: dict[int, list[Node]] = {}
        for n in g.nodes:
            if "region" in n.meta:
                by_id.setdefault(n.meta["region"], []).append(n)
        for rid, ns in by_id.items():
            inputs, consts, outputs = region_boundary(g, ns)
            out.append(Region(rid, path, tuple(n.name for n in ns), tuple(v.name for v in inputs),
                              tuple(c.name for c in consts), tuple(v.name for v in outputs)))
    return tuple(sorted(out, key=lambda r: r.id))


def region_boundary(graph: Graph, nodes: list[Node]):
    """(activation inputs, constants, outputs) of a group of nodes, each in first-use order."""
    member = {id(n) for n in nodes}
    graph_outs = {id(v) for v in graph.outputs}
    inputs, consts, outputs, seen = [], [], [], set()
    for n in nodes:
        for v in n.inputs:
            if (v.producer is not None and id(v.producer) in member) or id(v) in seen:
                continue
            seen.add(id(v))
            (consts if v.is_const and v.producer is None else inputs).append(v)
    for n in nodes:
        for o in n.outputs:
            if id(o) in graph_outs or any(id(u) not in member for u in o.users):
                outputs.append(o)
    return inputs, consts, outputs
