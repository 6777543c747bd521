"""Exact optima of the partition problem, to verify the search.

- ``exhaustive``: every subset of the offloadable units, each costed by the full evaluator
  (``Problem.cost``). 2^n evaluations: for graphs with at most ``MAX_EXHAUSTIVE`` offloadable units.
  The only exact method here for EDP (a product of sums, so clusters do not separate).
- ``optimum`` (latency or energy): a function never spans two clusters (connected groups of
  offloadable units), so the cost is ``fixed_cost`` plus one term per cluster
  (``Problem.cluster_cost``) and each cluster is minimised alone, by branch and bound
  (``cluster_optimum``). The sum is checked against the full evaluator on the combined set
  (``certified``); it differs only when functions of different clusters would close a cycle, which
  the full evaluator resolves by a different merge.
- ``cluster_enumeration``: the same per-cluster minimum by enumerating all 2^|c| subsets of each
  cluster (clusters of at most ``MAX_CLUSTER`` units); an independent check of the branch and bound.

Why the branch and bound is exact. It fixes the cluster's units one at a time in topological order
(device or host) and prunes a partial assignment only when a lower bound on the cost of *every*
completion, whatever functions the evaluator then forms, is not below the best complete
assignment found so far (costed by ``cluster_cost`` itself). The bound is a sum of terms, each at
most the matching term of ``cluster_cost`` for any completion (D = units fixed on the device,
H = fixed on the host, U = not yet fixed):

* device time/energy of a unit on the device: the kernel's cycles
  ``max(compute, int(total - credit / bw))`` and energy ``e - min(dram, credit * pJ)`` with
  ``credit = min(reads saved, read cap) + min(writes saved, write cap)``
  (``sim.graph.subgraph.on_chip_credit``), non-increasing in the bytes saved on chip on either side,
  taken at the most any completion can save. An
  intermediate is kept on chip only when its producer and all its readers are in one function
  (so none of them is on the host), it is not a model output and it fits the output buffer; the
  bound credits every such intermediate with no endpoint in H and no host unit (in H, or not
  offloadable) on a path between its producer and a reader.
* host, device and link together: the minimum over all completions of host cost (exact) + the
  device bound above + a link bound, found exactly as a minimum s-t cut (the classic offloading
  cut, scipy's max flow; capacities scaled to integers and floored, so still a lower bound). The
  link bound per value (its bytes on the link plus the host's conversion: the cost of one
  crossing): once when its producer is on the host (in H, outside the cluster, or
  a graph input) and some reader on the device; once when its producer is on the device and
  the model returns it or some reader is on the host. ``cluster_cost`` charges at least that (a
  host-produced value crosses once per reading function, a device-produced one once if read
  outside its function). Both terms are "some member of a set differs from one unit", which
  one auxiliary vertex per value and direction makes an exact cut term, so the cut is the exact
  minimum of this relaxation, not a further approximation of it. Added to the cut: a value whose
  producer and some reader are both in D with a host unit on a path between them (so in two
  functions: functions are convex) enters the reader's function over the link, which the cut,
  seeing both ends on the device side, never charges.
* launches: functions only ever merge units joined by a value edge (producer and reader) or by
  reading one value (siblings) (``Problem.groups``, ``partition.byoc.form_regions``), so each
  connected component, under those relations, of D + U that holds a unit of D holds at least one
  whole function: their number is a lower bound on the calls. A relation between two units with a
  host unit on a path between them is dropped: no convex function holds both.

Latency is the sum of these non-negative terms (energy: the same without launches), and the cut
and the launch count bound different terms, so their sum never exceeds the cost of any
completion, and pruning at ``bound >= best * (1 - 1e-12)`` can only discard plans that are not
better than the best by more than that relative margin. At a leaf the bound is not trusted:
the plan is costed by ``cluster_cost``. So the result is the minimum of ``cluster_cost`` over all
2^|c| subsets, to a relative 1e-12. Topological order makes cut edges appear in the bound as soon
as both ends are fixed, which is what keeps CNN chains and attention blocks (a handful of live
values at any point) small to search; ``max_nodes`` bounds the work and raises when exceeded,
never returning an unproven answer.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_flow

from sim.graph.subgraph import credited_cycles, credited_joules, on_chip_credit

from .costing import Cost, objective_value
from .partition_problem import PartitionSearchError, Problem

MAX_EXHAUSTIVE = 16
MAX_CLUSTER = 16
MAX_NODES = 200_000
_REL = 1e-12


@dataclass(frozen=True)
class ExactResult:
    device: frozenset[int]
    cost: Cost
    score: float
    evaluations: int
    certified: bool


def _subsets(items: tuple[int, ...]):
    for r in range(len(items) + 1):
        for c in combinations(items, r):
            yield frozenset(c)


def exhaustive(problem: Problem, objective: str = "latency", limit: int = MAX_EXHAUSTIVE) -> ExactResult:
    off = tuple(i for i in range(len(problem.units)) if problem.offloadable[i])
    if len(off) > limit:
        raise PartitionSearchError(f"exhaustive search needs at most {limit} offloadable units, "
                                   f"the graph has {len(off)}")
    best, best_s, n = frozenset(), None, 0
    for s in _subsets(off):
        v = problem.score(s, objective)
        n += 1
        if best_s is None or v < best_s:
            best, best_s = s, v
    return ExactResult(best, problem.cost(best), best_s, n, True)


class _Bound:
    """The lower bound of the module docstring for one cluster and objective (latency or energy),
    over states 1 (device), 0 (host), -1 (not fixed) indexed by position in the cluster's
    topological order."""

    def __init__(self, problem: Problem, k: int, objective: str):
        p = problem
        self.latency = objective == "latency"
        self.members = tuple(sorted(p.clusters[k], key=lambda i: p._pos[i]))
        local = {u: j for j, u in enumerate(self.members)}
        self.n = n = len(self.members)
        hw = p.hw
        self.bw, self.pj, self.clock = hw.dram.bytes_per_cycle, hw.energy.dram_pj_per_byte, hw.clock_hz
        src = p._host_s if self.latency else p._host_j
        self.host = [float(src[u]) for u in self.members]
        self.w = [float(p._w[u]) for u in self.members]
        self.cyc = [p._cyc[u] for u in self.members]
        self.ccyc = [p._ccyc[u] for u in self.members]
        self.dram_pj = [p._dram_pj[u] for u in self.members]
        self.dev_e = [p._dev_e[u] for u in self.members]
        self.caps = [p._caps[u] for u in self.members]
        per_byte = 1 / hw.link.bytes_per_s if self.latency else hw.energy.link_pj_per_byte * 1e-12
        # Functions are convex, so two units with a host unit on a path between them are never in
        # one function. ``_apart(a, b)``: the graph positions on such paths, cut by the units host
        # in every plan (not offloadable) and, per node, the cluster's units fixed on the host.
        path = p.units[self.members[0]].graph if n else None
        desc, anc = (p._desc[path], p._anc[path]) if n else ([], [])
        pos = [p._pos[u] for u in self.members]
        self.bit = [1 << q for q in pos]
        self.always_host = sum(1 << p._pos[u] for u in p._graph_units[path] if not p.offloadable[u]) if n else 0

        one_graph = all(p.units[u].graph == path for u in self.members)

        def _apart(a: int, b: int) -> int:
            if not one_graph:  # positions are per graph: claim nothing across graphs
                return 0
            return (desc[pos[a]] & anc[pos[b]]) | (desc[pos[b]] & anc[pos[a]])

        # Intermediates that can stay on chip: (their endpoints, bytes credited to each endpoint,
        # positions whose host unit puts a reader in another function than the producer).
        self.savable = []
        # Values from a cluster unit to cluster readers: (producer, ((reader, apart mask), ...), c).
        # Read by a device unit in another function, such a value enters that function over the
        # link: a crossing the cut never charges (it sees both ends on the device side).
        self.separable = []
        # The link as a cut problem. Vertices: 0 = device side (source), 1 = host side (sink),
        # 2 + j = unit j, then one auxiliary vertex per (value, direction); an arc (a, b, c)
        # costs c when a is on the device side and b on the host side. For a value produced on
        # the host side and read by units R: aux a with r -> a (inf) for r in R and a -> producer
        # (c): c exactly when some reader is on the device and the producer on the host. For a
        # value produced in the cluster: aux b with producer -> b (c), b -> r (inf): c exactly
        # when the producer is on the device and some reader on the host.
        inf = -1.0
        arcs: list[tuple[int, int, float]] = []
        nv = 2 + n
        for e in p._cluster_edges[k]:
            prod = local.get(e.producer, -1) if e.producer >= 0 else -1
            readers = tuple(local[c] for c in e.consumers if c in local)
            outside = len(readers) < len(e.consumers)
            c = (e.nbytes * per_byte + (e.convert_s if self.latency else e.convert_j)) * e.weight
            if prod >= 0 and not outside and not e.is_output and e.consumers and e.nbytes <= p._on_chip:
                # (unit, 0 = its write / 1 = a read, bytes)
                credit = [(prod, 0, e.nbytes)] + [(local[x], 1, e.nbytes * k2) for x, k2 in zip(e.consumers, e.uses)]
                apart = 0
                for r in readers:
                    apart |= _apart(prod, r)
                self.savable.append(((prod, *readers), credit, apart))
            if e.resident_in or e.resident_out:
                # A device-resident tensor (partition.residency) crosses when the host touches it:
                # c when a cluster reader of a resident input is on the host side, or when the
                # producer of a resident output is. Crossings the bound cannot place (into another
                # function) are left out: a lower bound may only undercount.
                if e.resident_in and readers and not outside:
                    arcs.append((0, nv, c))
                    arcs.extend((nv, 2 + r, inf) for r in readers)
                    nv += 1
                if e.resident_out and prod >= 0:
                    arcs.append((0, 2 + prod, c))
                    if outside:
                        arcs.append((2 + prod, 1, c))
                continue
            if prod >= 0 and readers and c > 0:
                self.separable.append((prod, tuple((r, _apart(prod, r)) for r in readers), c))
            if prod >= 0 and (outside or e.is_output):
                arcs.append((2 + prod, 1, c))
            elif prod >= 0 and readers:
                arcs.append((2 + prod, nv, c))
                arcs.extend((nv, 2 + r, inf) for r in readers)
                nv += 1
            if readers:
                arcs.append((nv, 2 + prod if prod >= 0 else 1, c))
                arcs.extend((2 + r, nv, inf) for r in readers)
                nv += 1
        self.nv = nv
        # Integer capacities (scipy's max flow): floors of the scaled costs keep it a lower bound.
        total = sum(self.host) + sum(self._device(j, 0.0, 0.0) for j in range(n)) + sum(c for *_, c in arcs if c > 0)
        # a cluster that costs nothing (units costing counts no time, as an if's branch it does
        # not count, partition.ops.subgraph_runs) has nothing to scale
        self.scale = 2.0 ** 28 / total if total > 0 else 1.0
        self.inf = 2 ** 30
        self.arc_rows = np.array([a for a, _, _ in arcs], dtype=np.int64)
        self.arc_cols = np.array([b for _, b, _ in arcs], dtype=np.int64)
        self.arc_caps = np.array([self.inf if c < 0 else int(c * self.scale) for *_, c in arcs], dtype=np.int64)
        self.host_caps = np.array([int(h * self.scale) for h in self.host], dtype=np.int64)
        # Relations functions can merge along: producer -> reader, and readers of one value.
        self.links = []
        for j, u in enumerate(self.members):
            self.links.extend((local[q], j) for q in p._preds[u] if q in local)
        for readers in (p._shared[path] if n else ()):
            r = [local[c] for c in readers if c in local]
            self.links.extend((r[0], c) for c in r[1:])
        self.between = [_apart(a, b) for a, b in self.links]
        self.call_cost = (self.w[0] * hw.link.launch_latency_s if n else 0.0) if self.latency else 0.0

    def _device(self, j: int, reads: float, writes: float) -> float:
        credit = on_chip_credit(reads, writes, self.caps[j])
        cyc = credited_cycles(self.cyc[j], self.ccyc[j], credit, self.bw)
        en = credited_joules(self.dev_e[j], self.dram_pj[j], credit, self.pj)
        return cyc * self.w[j] / self.clock if self.latency else en * self.w[j]

    def __call__(self, st: list[int]) -> float:
        n = self.n
        host = self.always_host
        for j in range(n):
            if st[j] == 0:
                host |= self.bit[j]
        saved = [[0.0, 0.0] for _ in range(n)]   # per unit: writes, reads
        for ends, credit, apart in self.savable:
            if all(st[x] != 0 for x in ends) and not apart & host:
                for x, side, b in credit:
                    saved[x][side] += b
        extra = 0.0
        for prod, readers, c in self.separable:
            if st[prod] == 1 and any(st[r] == 1 and apart & host for r, apart in readers):
                extra += c
        units = np.arange(2, 2 + n, dtype=np.int64)
        dev_caps = np.array([int(self._device(j, saved[j][1], saved[j][0]) * self.scale) for j in range(n)],
                            dtype=np.int64)
        fixed_d = [2 + j for j in range(n) if st[j] == 1]
        fixed_h = [2 + j for j in range(n) if st[j] == 0]
        rows = np.concatenate([self.arc_rows, np.zeros(n, np.int64), units,
                               np.zeros(len(fixed_d), np.int64), np.array(fixed_h, np.int64)])
        cols = np.concatenate([self.arc_cols, units, np.ones(n, np.int64),
                               np.array(fixed_d, np.int64), np.ones(len(fixed_h), np.int64)])
        caps = np.concatenate([self.arc_caps, self.host_caps, dev_caps,
                               np.full(len(fixed_d) + len(fixed_h), self.inf, np.int64)])
        g = csr_array((caps.astype(np.int32), (rows, cols)), shape=(self.nv, self.nv))
        cut = maximum_flow(g, 0, 1).flow_value / self.scale + extra
        if not self.call_cost:
            return cut
        parent = list(range(n))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for (a, b), between in zip(self.links, self.between):
            if st[a] != 0 and st[b] != 0 and not between & host:
                ra, rb = find(a), find(b)
                if ra != rb:
                    parent[rb] = ra
        return cut + len({find(j) for j in range(n) if st[j] == 1}) * self.call_cost


def cluster_optimum(problem: Problem, k: int, objective: str = "latency",
                    max_nodes: int = MAX_NODES, hint: frozenset[int] = frozenset()) -> tuple[frozenset[int], Cost, int]:
    """The subset of cluster ``k`` minimising ``objective`` (latency or energy) of
    ``cluster_cost(k, subset)``, by branch and bound (exact; see the module docstring). Returns
    (subset, its cluster cost, search nodes). Raises PartitionSearchError past ``max_nodes``.
    ``hint`` (e.g. a heuristic's device set) is one more starting incumbent: a good one prunes
    sooner, and the proof does not depend on where the incumbent came from."""
    if objective not in ("latency", "energy"):
        raise PartitionSearchError(f"branch and bound needs a separable objective (latency or energy), "
                                   f"got {objective!r}")
    bound = _Bound(problem, k, objective)
    members, n = bound.members, bound.n

    def value(c: Cost) -> float:
        return c.latency_s if objective == "latency" else c.energy_j

    best_set, best_c, best_v = None, None, None
    for s in (frozenset(), frozenset(members), frozenset(i for i in members if i in problem.greedy_set),
              frozenset(i for i in members if i in hint)):
        c = problem.cluster_cost(k, s)
        v = value(c)
        if best_v is None or v < best_v:
            best_set, best_c, best_v = s, c, v
    nodes = 0
    st = [-1] * n
    stack: list[tuple[int, int, float]] = []   # (depth, choice, bound): DFS without recursion

    def push_children(depth: int) -> None:
        out = []
        for choice in (1, 0):
            st[depth] = choice
            out.append((bound(st), choice))
        st[depth] = -1
        for lb, choice in sorted(out, reverse=True):   # the lower bound is popped first
            stack.append((depth, choice, lb))

    if n:
        push_children(0)
    while stack:
        depth, choice, lb = stack.pop()
        if lb >= best_v * (1 - _REL):
            continue
        nodes += 1
        if nodes > max_nodes:
            raise PartitionSearchError(f"exact optimum of a cluster of {n} units needs more than "
                                       f"{max_nodes} branch-and-bound nodes")
        for j in range(depth + 1, n):
            st[j] = -1
        st[depth] = choice
        if depth == n - 1:
            s = frozenset(members[j] for j in range(n) if st[j] == 1)
            c = problem.cluster_cost(k, s)
            v = value(c)
            if v < best_v:
                best_set, best_c, best_v = s, c, v
            continue
        push_children(depth + 1)
    return best_set, best_c, nodes


def _separable(problem: Problem, objective: str, solve) -> ExactResult:
    objective_value(objective, 0.0, 0.0)
    chosen: list[frozenset[int]] = []
    total = problem.fixed_cost()
    n = 0
    for k in range(len(problem.clusters)):
        best, best_c, evals = solve(k)
        chosen.append(best)
        total = total + best_c
        n += evals
    device = frozenset().union(*chosen) if chosen else frozenset()
    cost = problem.cost(device)
    want = objective_value(objective, total.latency_s, total.energy_j)
    got = objective_value(objective, cost.latency_s, cost.energy_j)
    return ExactResult(device, cost, got, n, abs(got - want) <= 1e-9 * max(abs(want), 1e-30))


def optimum(problem: Problem, objective: str = "latency", max_nodes: int = MAX_NODES,
            hint: frozenset[int] = frozenset()) -> ExactResult:
    """Exact optimum by per-cluster branch and bound (latency, energy); EDP: ``exhaustive``.
    ``evaluations`` counts branch-and-bound nodes; ``hint`` seeds each cluster's incumbent."""
    if objective == "edp":
        return exhaustive(problem, objective)  # EDP is a product: clusters do not separate
    return _separable(problem, objective,
                      lambda k: cluster_optimum(problem, k, objective, max_nodes, hint))


def cluster_enumeration(problem: Problem, objective: str = "latency", limit: int = MAX_CLUSTER) -> ExactResult:
    """The per-cluster minimum by enumerating every subset of every cluster (latency, energy)."""
    objective_value(objective, 0.0, 0.0)
    if objective == "edp":
        raise PartitionSearchError("cluster enumeration needs a separable objective (latency or energy)")
    big = [len(c) for c in problem.clusters if len(c) > limit]
    if big:
        raise PartitionSearchError(f"cluster enumeration needs clusters of at most {limit} offloadable "
                                   f"units, the graph has one of {max(big)}")

    def solve(k: int):
        best, best_s, best_c, n = frozenset(), None, None, 0
        for s in _subsets(problem.clusters[k]):
            c = problem.cluster_cost(k, s)
            v = objective_value(objective, c.latency_s, c.energy_j)
            n += 1
            if best_s is None or v < best_s:
                best, best_s, best_c = s, v, c
        return best, best_c, n

    return _separable(problem, objective, solve)


__all__ = ["ExactResult", "exhaustive", "optimum", "cluster_optimum", "cluster_enumeration",
           "MAX_EXHAUSTIVE", "MAX_CLUSTER", "MAX_NODES"]
