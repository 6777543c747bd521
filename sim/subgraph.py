"""Costing offloaded subgraphs and whole partitioned models.

An external function (``Compiler`` attr) runs on the accelerator as a sequence of kernels: each
``call`` to a composite is one kernel whose main op (conv2d/dense/matmul/...) is the workload and
whose other ops are its fused epilogue; each plain op is a kernel of its own. Between kernels of one
function an intermediate stays on chip when it fits the output (or half the unified) buffer, which
removes its DRAM write and read; otherwise it spills. Each call pays the link transfer of its
non-constant inputs and outputs plus the launch latency. Weights are loaded once, when the module
is loaded, so they count in ``weight_bytes`` / ``weight_load_s`` and not per inference. Host ops
are costed on the host model: max(FLOPs / peak, bytes / bandwidth) + per-op overhead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .hardware import HardwareConfig
from .kernel import simulate
from .report import KernelCost, KernelReport, SubgraphReport
from .schedule import Schedule
from .workload import VIEW_OPS, Workload, WorkloadError

MAIN_OPS = ("conv2d", "dense", "matmul", "batch_matmul", "gemm")


class CostError(ValueError):
    """A graph the cost model cannot handle; names the node."""


def composite_workload(fn: Any) -> tuple[Workload, Any]:
    """The kernel of a composite Function: its main op as the workload, the rest as epilogue."""
    nodes = list(fn.graph.nodes)
    main = next((n for n in nodes if n.op in MAIN_OPS), nodes[0] if nodes else None)
    if main is None:
        raise CostError("composite function has no nodes")
    epi = tuple(n.op for n in nodes if n is not main and n.op not in VIEW_OPS)
    return Workload.from_node(main, epilogue=epi), main


def kernel_workload(node: Any, scope: Mapping[str, Any]) -> Workload:
    """The workload of one top-level node of an external function's body: a composite call is its
    main op with the rest as fused epilogue; any other node is itself. ``scope`` maps callee names
    to Functions. The tuner keys its schedules by this workload's ``key`` and the runtime looks them
    up by it, so both must call this one function."""
    if node.op == "call":
        callee = scope.get(node.attrs.get("callee"))
        if callee is None:
            raise CostError(f"call node {node.name} names unknown function {node.attrs.get('callee')!r}")
        try:
            return composite_workload(callee)[0]
        except WorkloadError as e:
            raise CostError(f"node {node.name}: {e}") from None
    try:
        return Workload.from_node(node)
    except WorkloadError as e:
        raise CostError(str(e)) from None


def _const_bytes(graph: Any) -> int:
    total = sum(int(c.data.nbytes) for c in graph.constants)
    for fn in graph.functions.values():
        total += _const_bytes(fn.graph)
    return total


def _pick_schedule(wl: Workload, hw: HardwareConfig, schedules: Mapping[str, Schedule] | None,
                   cache: dict[str, Schedule]) -> Schedule:
    if schedules and wl.key in schedules:
        return schedules[wl.key]
    if wl.key not in cache:
        cache[wl.key] = Schedule.default(wl, hw)
    return cache[wl.key]


def _kernels(fn: Any, hw: HardwareConfig, schedules, fidelity, cache):
    """(name, op, workload, report, node whose outputs the kernel produces, input values)."""
    g = fn.graph
    out = []
    for node in g.nodes:
        wl = kernel_workload(node, g.functions)
        if node.op == "call":
            label = g.functions[node.attrs["callee"]].attrs.get("Composite", wl.op)
        else:
            label = node.op
        rep = simulate(wl, hw, _pick_schedule(wl, hw, schedules, cache), fidelity)
        out.append((node.name, label, wl, rep, node))
    return out


def simulate_function(function: Any, hw: HardwareConfig, schedules: Mapping[str, Schedule] | None = None,
                      fidelity: str = "analytical", symbol: str | None = None,
                      _cache: dict[str, Schedule] | None = None) -> SubgraphReport:
    """One call of an external function on the accelerator. ``schedules`` maps workload keys to
    schedules (default: ``Schedule.default`` for each)."""
    cache = _cache if _cache is not None else {}
    g = function.graph
    ks = _kernels(function, hw, schedules, fidelity, cache)
    wb = hw.array.word_bytes
    bw = hw.dram.bytes_per_cycle
    on_chip = hw.buffers.output_bytes if not hw.buffers.unified else hw.buffers.unified_bytes // 2
    graph_outs = {id(v) for v in g.outputs}
    saved = [0] * len(ks)  # DRAM bytes each kernel avoids
    spilled = 0
    for i, (_, _, _, _, node) in enumerate(ks):
        for v in node.outputs:
            users = v.users
            if id(v) in graph_outs or not users:
                continue
            nbytes = v.type.size * wb
            if nbytes <= on_chip:
                saved[i] += nbytes  # its write
                for u in users:
                    j = next((k for k, (_, _, _, _, n) in enumerate(ks) if n is u), None)
                    if j is not None:
                        saved[j] += nbytes  # the consumer's read
            else:
                spilled += nbytes
    kernels = []
    cycles = 0
    energy_pj = 0.0
    for (name, label, wl, rep, _), sv in zip(ks, saved):
        if sv:
            # Traffic kept on chip no longer occupies DRAM; the kernel still cannot beat its compute.
            new_total = max(rep.compute_cycles, int(rep.total_cycles - sv / bw))
            e = dict(rep.energy_pj)
            e["dram"] = max(0.0, e["dram"] - sv * hw.energy.dram_pj_per_byte)
            rep = _with(rep, total_cycles=new_total, energy_pj=e,
                        stall_cycles=max(0, new_total - rep.compute_cycles - rep.prologue_cycles - rep.epilogue_cycles),
                        utilization=rep.macs / (hw.pes * new_total) if new_total else 0.0)
        kernels.append(KernelCost(name, label, rep))
        cycles += rep.total_cycles
        energy_pj += sum(rep.energy_pj.values())
    link_bytes = sum(v.type.nbytes for v in g.inputs) + sum(v.type.nbytes for v in g.outputs)
    return SubgraphReport(
        symbol=symbol or function.attrs.get("global_symbol", g.name), kernels=tuple(kernels),
        device_cycles=cycles, device_s=cycles / hw.clock_hz, link_s=link_bytes / hw.link.bytes_per_s,
        launch_s=hw.link.launch_latency_s, link_bytes=link_bytes, spilled_bytes=spilled,
        device_energy_j=energy_pj * 1e-12, link_energy_j=link_bytes * hw.energy.link_pj_per_byte * 1e-12,
        weight_bytes=_const_bytes(g))


def _with(rep: KernelReport, **changes: Any) -> KernelReport:
    from dataclasses import replace
    return replace(rep, **changes)


def host_op_work(node: Any) -> tuple[int, int]:
    """(FLOPs, bytes moved) of one op on the host. Control flow costs its dispatch only: the ops of
    its bodies are costed one by one."""
    from partition.ops import op_cost
    if node.op in ("if", "loop", "call"):
        return 0, 0
    c = op_cost(node)
    return c.flops, c.bytes_in + c.bytes_out


def host_op_seconds(node: Any, hw: HardwareConfig) -> float:
    """Roofline on the host CPU plus its per-op dispatch cost."""
    flops, nbytes = host_op_work(node)
    return max(flops / hw.host.peak_flops, nbytes / hw.host.mem_bytes_per_s) + hw.host.op_overhead_s


def host_op_joules(node: Any, hw: HardwareConfig) -> float:
    """Arithmetic at ``host_pj_per_flop`` plus memory traffic at ``dram_pj_per_byte``."""
    flops, nbytes = host_op_work(node)
    return (flops * hw.energy.host_pj_per_flop + nbytes * hw.energy.dram_pj_per_byte) * 1e-12


@dataclass(frozen=True)
class HostOpCost:
    name: str
    op: str
    seconds: float
    joules: float = 0.0


@dataclass(frozen=True)
class GraphCost:
    """End-to-end cost of one inference of a partitioned model (latency in s, energy in J)."""
    hardware: str
    host_ops: tuple[HostOpCost, ...]
    calls: tuple[SubgraphReport, ...]
    weight_bytes: int

    @property
    def host_s(self) -> float:
        return sum(h.seconds for h in self.host_ops)

    @property
    def link_s(self) -> float:
        return sum(c.link_s for c in self.calls)

    @property
    def launch_s(self) -> float:
        return sum(c.launch_s for c in self.calls)

    @property
    def device_s(self) -> float:
        return sum(c.device_s for c in self.calls)

    @property
    def latency_s(self) -> float:
        return self.host_s + self.link_s + self.launch_s + self.device_s

    @property
    def host_j(self) -> float:
        return sum(h.joules for h in self.host_ops)

    @property
    def energy_j(self) -> float:
        return self.host_j + sum(c.energy_j for c in self.calls)

    def to_dict(self) -> dict[str, Any]:
        return {"hardware": self.hardware, "latency_s": self.latency_s, "energy_j": self.energy_j,
                "host_s": self.host_s, "host_j": self.host_j, "link_s": self.link_s,
                "launch_s": self.launch_s, "device_s": self.device_s, "weight_bytes": self.weight_bytes,
                "host_ops": [{"name": h.name, "op": h.op, "seconds": h.seconds, "joules": h.joules}
                             for h in self.host_ops],
                "calls": [c.to_dict() for c in self.calls]}


def cost_graph(graph: Any, hw: HardwareConfig, schedules: Mapping[str, Schedule] | None = None,
               fidelity: str = "analytical") -> GraphCost:
    """Walk a partitioned graph: host ops on the host model, each call of an external function
    (a ``Compiler`` attr) on the accelerator. A loop body counts its maximum trip count times and an
    if counts its costlier branch (costs are upper bounds, as the IR's data-dependent sizes are)."""
    cache: dict[str, Schedule] = {}
    reports: dict[str, SubgraphReport] = {}

    def walk(g: Any, scope: dict[str, Any], host: list, calls: list) -> None:
        scope = {**scope, **g.functions}
        for node in g.nodes:
            fn = scope.get(node.attrs.get("callee")) if node.op == "call" else None
            if fn is not None and "Compiler" in fn.attrs:
                sym = node.attrs["callee"]
                if sym not in reports:
                    reports[sym] = simulate_function(fn, hw, schedules, fidelity, sym, cache)
                calls.append(reports[sym])
            elif fn is not None:
                walk(fn.graph, scope, host, calls)  # a host-side function: its ops run on the host
            elif node.op == "loop":
                trip = node.inputs[0].data if node.inputs and node.inputs[0].is_const else None
                trips = max(1, int(trip.reshape(-1)[0])) if trip is not None else 1
                h2: list = []
                c2: list = []
                walk(node.attrs["body"], scope, h2, c2)
                host.append(HostOpCost(node.name, node.op, hw.host.op_overhead_s))
                host.extend(h2 * trips)
                calls.extend(c2 * trips)
            elif node.op == "if":
                branches = []
                for key in ("then_branch", "else_branch"):
                    h2, c2 = [], []
                    walk(node.attrs[key], scope, h2, c2)
                    branches.append((GraphCost(hw.name, tuple(h2), tuple(c2), 0).latency_s, h2, c2))
                _, h2, c2 = max(branches, key=lambda b: b[0])
                host.append(HostOpCost(node.name, node.op, hw.host.op_overhead_s))
                host.extend(h2)
                calls.extend(c2)
            else:
                host.append(HostOpCost(node.name, node.op, host_op_seconds(node, hw),
                                       host_op_joules(node, hw)))

    host: list[HostOpCost] = []
    calls: list[SubgraphReport] = []
    walk(graph, {}, host, calls)
    return GraphCost(hw.name, tuple(host), tuple(calls), sum(r.weight_bytes for r in reports.values()))
