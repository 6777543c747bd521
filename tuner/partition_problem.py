"""The partition problem: the units a search decides (top-level nodes after pattern fusion, in the
main graph and in control-flow bodies), their host and device costs, the values between them,
and a fast evaluator of a decision.

A decision is the set of units run on the device. The external functions follow from it the way
the BYOC pipeline forms them: adjacent device units merge into one function as far as no cycle
forms between functions (``partition.byoc.form_regions``). Merging two adjacent device units never
costs more than calling them apart (one launch and no round trip over the link instead of two), so
the offload set alone decides the plan.

Cost of a decision = host units on the host model + per function call: launch, every activation
input it reads from outside (once per function that reads it) and every output read outside it
(once), over the link in the device's format with the host's conversion of each crossing
(``sim.graph.transfer``), and its kernels on the device (``tuner.costing``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Iterable

import numpy as np

import sim
from partition import Graph, clone_graph
from partition.byoc import form_regions, partition_graph
from partition.byoc.merge_regions import _reachability
from partition.byoc.graphs import nested_graphs
from partition.residency import resident_inputs, resident_outputs
from partition.byoc.pipeline import region_passes, run_passes
from partition.ops import subgraph_runs

from sim.graph.subgraph import (credited_cycles, credited_joules, on_chip_capacity, on_chip_caps, on_chip_credit,
                          weight_is_const)
from sim.graph.transfer import conversion_joules, conversion_seconds, device_bytes

from .costing import (Cost, CostOptions, KernelCoster, host_unit_cost, kernel_workload,
                      objective_value)


# Entries each of a Problem's memos keeps at most (``_function_part``, ``_components``, ``_split``):
# a search of a large cluster forms a few new functions per move, so this bounds a long search's memory.
_MAX_PARTS = 200_000
_UNSET = object()   # a memo's miss, where None is a value (``_components``: the functions would form a cycle)


class PartitionSearchError(ValueError):
    pass


def _cyclic(groups: list[tuple[int, int]]) -> bool:
    """Whether functions (node mask, nodes reachable from it) depend on each other in a cycle once
    each is contracted to one call: a depends on b when a's reach meets b (transitively)."""
    n = len(groups)
    after = [[j for j in range(n) if j != i and groups[i][1] & groups[j][0]] for i in range(n)]
    state = [0] * n
    for s in range(n):
        if state[s]:
            continue
        stack = [(s, iter(after[s]))]
        state[s] = 1
        while stack:
            v, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[v] = 2
                stack.pop()
            elif state[nxt] == 1:
                return True
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, iter(after[nxt])))
    return False


@dataclass(frozen=True)
class Unit:
    index: int
    graph: str          # path of its graph (``main``, ``main/loop_3.body``)
    name: str           # node name in that graph
    op: str             # op, or the composite name of a composite call
    offloadable: bool
    weight: float       # executions per inference


@dataclass(frozen=True)
class ValueEdge:
    """An activation between units: ``producer`` unit index (-1: a graph input), consumer unit
    indices (each once), its bytes on the link and the device (``sim.graph.transfer.device_bytes``),
    whether the graph returns it, and the host's conversion of one crossing (seconds, joules)."""
    producer: int
    consumers: tuple[int, ...]
    nbytes: int
    is_output: bool
    weight: float
    uses: tuple[int, ...] = ()   # uses by each consumer (a node may read a value twice)
    convert_s: float = 0.0
    convert_j: float = 0.0
    resident_in: bool = False    # a device-resident graph input (partition.residency): on the device
    resident_out: bool = False   # a device-resident graph output: must end on the device


class Problem:
    """Built once per (graph, hardware); device costs come from a ``KernelCoster`` and can be
    swapped (``with_coster``) after tuning without rebuilding the rest. Read-only after __init__
    but for memos: each function's cost (``_function_part``), each unit set's functions
    (``_components``) and each non-convex component's pieces (``_split``)."""

    def __init__(self, graph: Graph, hw: sim.HardwareConfig, coster: KernelCoster | None = None,
                 opts: CostOptions = CostOptions(), merge_siblings: bool = True):
        self.hw = hw
        self.merge_siblings = merge_siblings
        self.opts = opts
        self.target = hw.partition_target()
        self.source = graph
        self.prepared = run_passes(clone_graph(graph), self.target, region_passes())
        self.graphs: dict[str, Graph] = {}
        self.scopes: dict[str, dict] = {}
        units: list[Unit] = []
        self._node_unit: dict[int, int] = {}
        host = []
        workloads: list[sim.Workload | None] = []
        greedy: list[int] = []
        self._wconst: list[bool] = []
        coster = coster or KernelCoster(hw, opts=opts)
        self._walk(self.prepared, {}, self.prepared.name, 1.0, units, host, workloads, greedy, coster)
        self.units = tuple(units)
        self.host = tuple(host)
        self.workloads = tuple(workloads)
        self.greedy_set = frozenset(greedy)
        self.offloadable = np.array([u.offloadable for u in units], dtype=bool)
        self.edges = tuple(self._edges())
        self._shared: dict[str, list[tuple[int, ...]]] = {p: [] for p in self.graphs}
        for e in self.edges:
            readers = tuple(c for c in e.consumers if self.offloadable[c])
            if len(readers) > 1:
                self._shared[units[readers[0]].graph].append(readers)
        self._graph_units = {p: [] for p in self.graphs}
        self._pos = [0] * len(units)
        for u in units:
            self._pos[u.index] = len(self._graph_units[u.graph])
            self._graph_units[u.graph].append(u.index)
        self._preds: list[tuple[int, ...]] = [()] * len(units)
        self._desc: dict[str, list[int]] = {}
        self._anc: dict[str, list[int]] = {}
        succs: list[list[int]] = [[] for _ in units]
        for path, g in self.graphs.items():
            desc, anc = _reachability(g.nodes)
            self._desc[path], self._anc[path] = desc, anc
            for n in g.nodes:
                self._preds[self._node_unit[id(n)]] = tuple(dict.fromkeys(
                    self._node_unit[id(v.producer)] for v in n.inputs if v.producer is not None))
                for p in self._preds[self._node_unit[id(n)]]:
                    succs[p].append(self._node_unit[id(n)])
        self._succs = tuple(tuple(s) for s in succs)
        # Per graph, by position: the positions of a unit's producers and readers in that graph.
        self._adj: dict[str, list[int]] = {}
        for path, us in self._graph_units.items():
            adj = [0] * len(us)
            for i in us:
                for j in (*self._preds[i], *succs[i]):
                    if self.units[j].graph == path:
                        adj[self._pos[i]] |= 1 << self._pos[j]
            self._adj[path] = adj
        # Units that read a graph input or write a graph output border the host whatever the plan.
        boundary = [False] * len(units)
        for e in self.edges:
            if e.producer < 0:
                for c in e.consumers:
                    boundary[c] = True
            elif e.is_output:
                boundary[e.producer] = True
        self._boundary = tuple(boundary)
        self.clusters = self._clusters()
        self._pieces: dict[frozenset[int], tuple] = {}
        self._comps: dict[tuple[str, int, bool], tuple | None] = {}
        self.cluster_of = {i: k for k, c in enumerate(self.clusters) for i in c}
        unit_edges: list[list[int]] = [[] for _ in units]
        for ei, e in enumerate(self.edges):
            for i in dict.fromkeys((e.producer, *e.consumers)):
                if i >= 0:
                    unit_edges[i].append(ei)
        self._unit_edges = tuple(tuple(x) for x in unit_edges)
        self._resident = tuple(ei for ei, e in enumerate(self.edges) if e.resident_in or e.resident_out)
        cluster_edges: list[list[int]] = [[] for _ in self.clusters]
        for ei, e in enumerate(self.edges):
            for k in sorted({self.cluster_of[i] for i in (e.producer, *e.consumers) if i in self.cluster_of}):
                cluster_edges[k].append(ei)
        self._cluster_edges = tuple(tuple(self.edges[ei] for ei in x) for x in cluster_edges)
        resident = set(self._resident)
        self._cluster_resident = tuple(tuple(ei for ei in x if ei in resident) for x in cluster_edges)
        self.coster: KernelCoster | None = None
        self.device: tuple[Cost | None, ...] = ()
        self._set_coster(coster)

    # --------------------------------------------------------------------------- construction
    def _walk(self, g: Graph, scope: dict, path: str, weight: float, units, host, workloads, greedy, coster):
        scope = {**scope, **g.functions}
        self.graphs[path] = g
        self.scopes[path] = scope
        for n in g.nodes:
            i = len(units)
            off = n.meta.get("target") == self.target.name
            wl = None
            if off:
                try:
                    wl = kernel_workload(n, scope)
                    if coster is not None:
                        coster(wl)
                except ValueError:  # no simulator model of it, or no schedule fits the hardware
                    off, wl = False, None
            fn = scope.get(n.attrs.get("callee")) if n.op == "call" else None
            op = str(fn.attrs.get("Composite")) if fn is not None and "Composite" in fn.attrs else n.op
            units.append(Unit(i, path, n.name, op, off, weight))
            self._wconst.append(off and weight_is_const(n, scope))
            self._node_unit[id(n)] = i
            host.append(host_unit_cost(n, scope, self.hw, self.opts))
            workloads.append(wl)
            if off and "region" in n.meta:
                greedy.append(i)
            for key, runs in subgraph_runs(n, scope).items():
                self._walk(n.attrs[key], scope, f"{path}/{n.name}.{key}", weight * runs, units, host, workloads,
                           greedy, coster)

    def _edges(self) -> Iterable[ValueEdge]:
        hw = self.hw
        for path, g in self.graphs.items():
            w = self.units[self._node_unit[id(g.nodes[0])]].weight if g.nodes else 1.0
            outs = {id(v) for v in g.outputs}
            res_in = {id(v) for v in resident_inputs(g)}
            res_out = {id(v) for v in resident_outputs(g)}
            for v in g.values():
                if v.is_const and v.producer is None:
                    continue
                prod = self._node_unit[id(v.producer)] if v.producer is not None else -1
                all_uses = [self._node_unit[id(u)] for u in v.users]
                cons = tuple(dict.fromkeys(all_uses))
                if not cons and id(v) not in outs:
                    continue
                yield ValueEdge(prod, cons, device_bytes(v.type, hw), id(v) in outs, w,
                                tuple(all_uses.count(c) for c in cons), conversion_seconds(v.type, hw),
                                conversion_joules(v.type, hw), id(v) in res_in, id(v) in res_out)

    def _clusters(self) -> tuple[tuple[int, ...], ...]:
        """Connected components of the offloadable units (edges between two offloadable units).
        A function never spans two clusters, so the cost splits into one term per cluster plus the
        host cost of the units no target can run."""
        parent = list(range(len(self.units)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for i in range(len(self.units)):
            if self.offloadable[i]:
                for p in self._preds[i]:
                    if self.offloadable[p]:
                        a, b = find(p), find(i)
                        if a != b:
                            parent[max(a, b)] = min(a, b)
        for readers in (r for rs in self._shared.values() for r in rs):
            for j in readers[1:]:
                a, b = find(readers[0]), find(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
        comps: dict[int, list[int]] = {}
        for i in range(len(self.units)):
            if self.offloadable[i]:
                comps.setdefault(find(i), []).append(i)
        return tuple(tuple(c) for c in sorted(comps.values(), key=lambda c: c[0]))

    def _set_coster(self, coster: KernelCoster) -> None:
        self.coster = coster
        results = [coster(wl) if wl is not None else None for wl in self.workloads]
        self.device = tuple(coster.device_cost(wl) if wl is not None else None for wl in self.workloads)
        self._w = np.array([u.weight for u in self.units])
        self._host_s = np.array([c.host_s for c in self.host]) * self._w
        self._host_j = np.array([c.host_j for c in self.host]) * self._w
        self._cyc = [r.cycles if r else 0 for r in results]
        self._ccyc = [r.compute_cycles if r else 0 for r in results]
        self._dram_pj = [r.dram_pj if r else 0.0 for r in results]
        self._dev_e = [r.energy_j if r else 0.0 for r in results]
        self._caps = [on_chip_caps(r.dram_read_bytes, r.dram_write_bytes, r.dram_weight_bytes, wc) if r else (0.0, 0.0)
                      for r, wc in zip(results, self._wconst)]
        self._on_chip = on_chip_capacity(self.hw)
        self._parts: dict[frozenset[int], tuple[float, ...]] = {}

    def with_coster(self, coster: KernelCoster) -> "Problem":
        """The same problem with other kernel costs (e.g. tuned schedules)."""
        other = object.__new__(Problem)
        other.__dict__.update(self.__dict__)
        other._set_coster(coster)
        return other

    # --------------------------------------------------------------------------- decisions
    def unit_of(self, graph_path: str, node_name: str) -> int:
        for u in self.units:
            if u.graph == graph_path and u.name == node_name:
                return u.index
        raise KeyError(f"no unit {node_name} in {graph_path}")

    def check_set(self, device: AbstractSet[int]) -> frozenset[int]:
        bad = [i for i in device if not (0 <= i < len(self.units)) or not self.units[i].offloadable]
        if bad:
            raise PartitionSearchError(f"unit(s) {bad[:5]} cannot run on the device")
        return frozenset(device)

    def groups(self, device: AbstractSet[int], siblings: bool | None = None) -> list[list[int]]:
        """The external functions a device set forms (unit indices per function, in order).
        Connected device units merge while the merged function stays convex (no path leaves it and
        comes back); with ``siblings`` (default: the problem's ``merge_siblings``), functions that
        read the same activation then merge too when the union stays convex, so that activation
        crosses the link once and one launch is saved (BYOC's maximal merge joins only producer
        and consumer). No two functions may depend on each other in a cycle: if the fast path would
        make one, that graph falls back to the pipeline's own greedy merge (``form_regions``),
        which checks every merge against reachability closed under contraction."""
        sib = self.merge_siblings if siblings is None else siblings
        out: list[list[int]] = []
        for path, g in self.graphs.items():
            idx = [i for i in self._graph_units[path] if i in device]
            if not idx:
                continue
            comps = self._components(path, idx, sib)
            if comps is None:
                comps = [[self._node_unit[id(n)] for n in grp]
                         for grp in form_regions(g, lambda n: self._node_unit[id(n)] in device)]
            out.extend(comps)
        return out

    def _components(self, path: str, idx: list[int], siblings: bool = False) -> list[list[int]] | None:
        """Convex pieces of the connected components of the device units of one graph (merged
        further by shared inputs with ``siblings``), or None when they would form a cycle.
        Memoised by unit set: a search's starting points and passes revisit sets."""
        left = 0
        for i in idx:
            left |= 1 << self._pos[i]
        key = (path, left, siblings)
        out = self._comps.get(key, _UNSET)
        if out is _UNSET:
            out = self._components_now(path, left, siblings)
            if len(self._comps) > _MAX_PARTS:
                self._comps.clear()
            self._comps[key] = out
        return None if out is None else [list(c) for c in out]

    def _components_now(self, path: str, left: int, siblings: bool) -> tuple[tuple[int, ...], ...] | None:
        desc, anc, adj, at = self._desc[path], self._anc[path], self._adj[path], self._graph_units[path]
        pieces: list[list] = []   # [units, mask, desc, anc], components in order of their first unit
        while left:
            # Grow the component of the first unit left, a frontier of bits at a time.
            m = front = left & -left
            d = a = 0
            while front:
                grow = 0
                while front:
                    b = front & -front
                    front ^= b
                    k = b.bit_length() - 1
                    grow |= adj[k]
                    d |= desc[k]
                    a |= anc[k]
                front = grow & left & ~m
                m |= front
            left &= ~m
            members = []
            rest = m
            while rest:
                b = rest & -rest
                rest ^= b
                members.append(at[b.bit_length() - 1])
            if (d & ~m) & (a & ~m):
                pieces.extend(list(q) for q in self._split(members))
            else:
                pieces.append([members, m, d, a])
        if siblings and len(pieces) > 1:
            pieces = self._merge_siblings(path, pieces)
        if len(pieces) > 1 and _cyclic([(q[1], q[2] & ~q[1]) for q in pieces]):
            return None
        pos = self._pos
        return tuple(sorted((tuple(sorted(q[0], key=lambda u: pos[u])) for q in pieces), key=lambda c: pos[c[0]]))

    def _merge_siblings(self, path: str, pieces: list[list]) -> list[list]:
        """Merge pieces whose units read one activation, in value order, while the union is
        convex and the pieces stay acyclic."""
        piece_of = {u: k for k, q in enumerate(pieces) for u in q[0]}
        for readers in self._shared[path]:
            ks = list(dict.fromkeys(piece_of[u] for u in readers if u in piece_of))
            for b in ks[1:]:
                a = next(piece_of[u] for u in readers if u in piece_of)
                if a == b or pieces[a] is None or pieces[b] is None:
                    continue
                m = pieces[a][1] | pieces[b][1]
                d = pieces[a][2] | pieces[b][2]
                an = pieces[a][3] | pieces[b][3]
                if (d & ~m) & (an & ~m):
                    continue
                trial = [q for k, q in enumerate(pieces) if q is not None and k not in (a, b)]
                trial.append([None, m, d, an])
                if _cyclic([(q[1], q[2] & ~q[1]) for q in trial]):
                    continue
                pieces[a] = [pieces[a][0] + pieces[b][0], m, d, an]
                for u in pieces[b][0]:
                    piece_of[u] = a
                pieces[b] = None
        return [q for q in pieces if q is not None]

    def _split(self, members: list[int]) -> tuple[tuple[list[int], int, int, int], ...]:
        """Convex pieces of a non-convex component: units in topological order join the pieces
        of their device producers when the union stays convex (else the first such piece that
        stays convex, else a new piece). Returns (units, mask, descendants, ancestors) per piece,
        memoised by unit set: a search's moves leave most components as they were (efficientnet_b0
        on cloud-npu splits 1,954 distinct components in 10,058 calls). Callers copy, never edit."""
        key = frozenset(members)
        out = self._pieces.get(key)
        if out is None:
            out = self._split_now(members)
            if len(self._pieces) > _MAX_PARTS:
                self._pieces.clear()
            self._pieces[key] = out
        return out

    def _split_now(self, members: list[int]) -> tuple[tuple[list[int], int, int, int], ...]:
        pos = self._pos
        path = self.units[members[0]].graph
        desc, anc = self._desc[path], self._anc[path]
        piece_of: dict[int, int] = {}
        pieces: list = []   # [units, mask, desc, anc], or None once merged into another
        for i in sorted(members, key=lambda i: pos[i]):
            k = pos[i]
            cands = list(dict.fromkeys(piece_of[p] for p in self._preds[i] if p in piece_of))
            options = ([cands] if len(cands) > 1 else []) + [[c] for c in cands]
            for opt in options:
                m, d, a = 1 << k, desc[k], anc[k]
                for c in opt:
                    m |= pieces[c][1]
                    d |= pieces[c][2]
                    a |= pieces[c][3]
                if (d & ~m) & (a & ~m):
                    continue
                keep = opt[0]
                units = pieces[keep][0]
                for c in opt[1:]:
                    for u in pieces[c][0]:
                        piece_of[u] = keep
                    units.extend(pieces[c][0])
                    pieces[c] = None
                units.append(i)
                piece_of[i] = keep
                pieces[keep] = [units, m, d, a]
                break
            else:
                piece_of[i] = len(pieces)
                pieces.append([[i], 1 << k, desc[k], anc[k]])
        return tuple((sorted(p[0], key=lambda u: pos[u]), p[1], p[2], p[3]) for p in pieces if p is not None)

    def cost(self, device: AbstractSet[int], siblings: bool | None = None) -> Cost:
        """End-to-end cost of one inference with ``device`` units offloaded (fast evaluator)."""
        groups = self.groups(frozenset(device), siblings)
        return self._assemble(range(len(self.units)), groups, self._resident)

    def _assemble(self, units: Iterable[int], groups: list[list[int]], resident: tuple[int, ...]) -> Cost:
        """The cost of ``units`` when ``groups`` (functions of those units) run on the device: the
        host units, each function's part (``_function_part``) and the crossings of the
        device-resident values that no single function decides."""
        gid = {i: k for k, grp in enumerate(groups) for i in grp}
        host = [i for i in units if i not in gid]
        cyc = dev_j = link = conv_s = conv_j = calls = 0.0
        for grp in groups:
            p = self._function_part(grp)
            cyc += p[0]
            dev_j += p[1]
            link += p[2]
            conv_s += p[3]
            conv_j += p[4]
            calls += p[5]
        for ei in resident:
            e = self.edges[ei]
            crossings = self._resident_crossings(e, gid)
            if crossings:
                link += crossings * e.nbytes * e.weight
                conv_s += crossings * e.convert_s * e.weight
                conv_j += crossings * e.convert_j * e.weight
        hw = self.hw
        return Cost(host_s=float(self._host_s[host].sum()) + conv_s, host_j=float(self._host_j[host].sum()) + conv_j,
                    device_s=cyc / hw.clock_hz, device_j=dev_j,
                    link_s=link / hw.link.bytes_per_s, link_j=link * hw.energy.link_pj_per_byte * 1e-12,
                    launch_s=calls * hw.link.launch_latency_s, link_bytes=link, calls=calls)

    def _function_part(self, grp: list[int]) -> tuple[float, float, float, float, float, float]:
        """What one function adds whatever else runs on the device: its kernels (weighted cycles,
        joules), crediting the intermediates it keeps on chip as ``sim.simulate_function`` does (an
        intermediate stays on chip when every reader is in the function, the model does not return
        it, and it fits ``sim.graph.subgraph.on_chip_capacity``), the bytes and the host's conversion
        of every value it reads from outside or sends out, and its calls. Each depends on the
        function's units alone (a value crosses once into each function that reads
        it and once out of the function that makes it), so a search that changes one function
        costs only that one: the parts are memoised by unit set."""
        key = frozenset(grp)
        part = self._parts.get(key)
        if part is not None:
            return part
        eids = sorted({ei for i in grp for ei in self._unit_edges[i]})
        reads: dict[int, float] = {}
        writes: dict[int, float] = {}
        link = conv_s = conv_j = 0.0
        for ei in eids:
            e = self.edges[ei]
            if e.resident_in:
                continue
            if e.producer >= 0 and e.producer in key:
                inside = all(c in key for c in e.consumers)
                crosses = not inside or (e.is_output and not e.resident_out)
                if inside and e.consumers and not e.is_output and e.nbytes <= self._on_chip:
                    writes[e.producer] = writes.get(e.producer, 0) + e.nbytes
                    for c, k in zip(e.consumers, e.uses):
                        reads[c] = reads.get(c, 0) + e.nbytes * k
            else:
                crosses = any(c in key for c in e.consumers)
            if crosses:
                link += e.nbytes * e.weight
                conv_s += e.convert_s * e.weight
                conv_j += e.convert_j * e.weight
        hw = self.hw
        bw = hw.dram.bytes_per_cycle
        pj = hw.energy.dram_pj_per_byte
        cycles_w = joules = 0.0
        for i in grp:
            credit = on_chip_credit(reads.get(i, 0), writes.get(i, 0), self._caps[i])
            cycles_w += credited_cycles(self._cyc[i], self._ccyc[i], credit, bw) * self._w[i]
            joules += credited_joules(self._dev_e[i], self._dram_pj[i], credit, pj) * self._w[i]
        part = (cycles_w, joules, link, conv_s, conv_j, float(self.units[grp[0]].weight))
        if len(self._parts) >= _MAX_PARTS:
            self._parts.clear()
        self._parts[key] = part
        return part

    @staticmethod
    def _resident_crossings(e: ValueEdge, gid) -> int:
        """Crossings of a device-resident value that depend on the whole decision, not on one
        function (``partition.residency``, the rule the costing of a partitioned graph applies): a
        resident input starts on the device and crosses once when a host unit reads it or the
        model returns it to the host; a resident output made on the host crosses once to the
        device."""
        if e.resident_in:
            host_read = any(c not in gid for c in e.consumers)
            return 1 if host_read or (e.is_output and not e.resident_out) else 0
        if e.resident_out and (e.producer < 0 or e.producer not in gid):
            return 1
        return 0

    def fixed_cost(self) -> Cost:
        """Host cost of the units no target can run (the same in every decision)."""
        off = self.offloadable
        return Cost(host_s=float(self._host_s[~off].sum()), host_j=float(self._host_j[~off].sum()))

    def cluster_cost(self, k: int, device: AbstractSet[int], siblings: bool | None = None) -> Cost:
        """The part of ``cost`` that cluster ``k`` decides: its units on the host or the device,
        its functions' launches and the transfers into and out of them. ``device`` may hold units
        of other clusters; only this cluster's are read. Summed over clusters plus ``fixed_cost``
        it equals ``cost`` whenever the functions form as components (no fallback merge)."""
        members = self.clusters[k]
        on = [i for i in members if i in device]
        path = self.units[members[0]].graph
        sib = self.merge_siblings if siblings is None else siblings
        groups = self._components(path, on, sib) if on else []
        if groups is None:
            g = self.graphs[path]
            mine = set(on)
            groups = [[self._node_unit[id(n)] for n in grp]
                      for grp in form_regions(g, lambda n: self._node_unit[id(n)] in mine)]
        return self._assemble(members, groups, self._cluster_resident[k])

    def score(self, device: AbstractSet[int], objective: str) -> float:
        c = self.cost(device)
        return objective_value(objective, c.latency_s, c.energy_j)

    # --------------------------------------------------------------------------- materialise
    def materialize(self, device: AbstractSet[int], siblings: bool | None = None) -> Graph:
        """The partitioned graph of a decision: every function the device set forms is outlined
        into an external function of the hardware's target (``partition.byoc.partition_graph``)."""
        device = self.check_set(device)
        g = clone_graph(self.prepared)
        by_path = dict(nested_graphs(g))
        for _, sg in by_path.items():
            for n in sg.nodes:
                n.meta.pop("region", None)
        for rid, grp in enumerate(self.groups(device, siblings)):
            for i in grp:
                u = self.units[i]
                by_path[u.graph].node_by_name(u.name).meta["region"] = rid
        return run_passes(g, self.target, [("partition_graph", partition_graph)])


__all__ = ["Problem", "Unit", "ValueEdge", "PartitionSearchError"]
