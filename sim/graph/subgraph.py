"""Costing offloaded subgraphs and whole partitioned models.

An external function (``Compiler`` attr) runs on the accelerator as a sequence of kernels: each
``call`` to a composite is one kernel whose main op (conv2d/dense/matmul/...) is the workload and
whose other ops are its fused epilogue; each plain op is a kernel of its own. Between kernels of one
function an intermediate stays on chip when it fits the output buffer (half the unified buffer;
``on_chip_capacity``), which removes its DRAM write and its readers' DRAM reads: each kernel is
credited those bytes, at most the DRAM bytes it writes and the DRAM bytes it reads of operands
other than constant weights (``on_chip_credit``), and costs ``max(compute, total - credit /
bandwidth)`` cycles (``credited_cycles``); its roofline is then the fused bound
(``sim.cost.kernel.fused_roofline_for``), so no kernel beats its bound. Otherwise the intermediate
spills. Each call pays the link transfer of its non-constant inputs and outputs in the device's
format plus the launch latency, and the host converts each crossing tensor between the graph's
format and the device's (``sim.graph.transfer``: the one bytes-per-element rule), less the
device-resident tensors of the call (``partition.residency``: a KV cache stays on the device; the
host's reads and writes of such tensors are ``resident_transfers``). Weights are loaded
once, when the module is loaded, so they count in ``weight_bytes`` and not per inference. Host
ops are costed on the host model: max(FLOPs / peak, bytes / bandwidth) + per-op overhead.

A learned calibration (``tuner.calibration``) is passed down as two optional callables, never
held globally: ``host_seconds(node, hw)`` replaces the host model of one host op, and
``kernel_scale(workload, report, hw)`` multiplies one device kernel's cycles (before the on-chip
credit of its function).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import AbstractSet, Any, Callable, Mapping

from ..hw.config import HardwareConfig
from ..cost.kernel import fused_roofline_for, simulate
from ..cost.report import KernelCost, KernelReport, SubgraphReport
from ..mapping.schedule import Schedule
from .transfer import (array_device_bytes, conversion_joules, conversion_seconds, device_bytes, host_pass_joules,
                       host_pass_seconds)
from ..workload.workload import VIEW_OPS, Workload, WorkloadError
from ..mapping.defaults import default_schedule
from ..workload.from_ir import workload_of

MAIN_OPS = ("conv2d", "dense", "matmul", "batch_matmul", "gemm")


class CostError(ValueError):
    """A graph the cost model cannot handle; names the node."""


def _main_node(fn: Any) -> Any:
    nodes = list(fn.graph.nodes)
    main = next((n for n in nodes if n.op in MAIN_OPS), nodes[0] if nodes else None)
    if main is None:
        raise CostError("composite function has no nodes")
    return main


def composite_workload(fn: Any) -> tuple[Workload, Any]:
    """The kernel of a composite Function: its main op as the workload, the rest as epilogue."""
    main = _main_node(fn)
    epi = tuple(n.op for n in fn.graph.nodes if n is not main and n.op not in VIEW_OPS)
    return workload_of(main, epilogue=epi), main


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
        return workload_of(node)
    except WorkloadError as e:
        raise CostError(str(e)) from None


def weight_is_const(node: Any, scope: Mapping[str, Any]) -> bool:
    """Whether the second operand of a kernel's main op (a MAC kernel's weight) is a constant,
    which no intermediate can replace (so its DRAM reads are never credited)."""
    main, args = node, list(node.inputs)
    if node.op == "call":
        callee = scope.get(node.attrs.get("callee"))
        if callee is None:
            return False
        main = _main_node(callee)
        params = {id(v): i for i, v in enumerate(callee.graph.inputs)}
        if len(main.inputs) < 2:
            return False
        w = main.inputs[1]
        if w.is_const:
            return True
        i = params.get(id(w))
        return i is not None and i < len(args) and args[i].is_const
    return len(args) > 1 and args[1].is_const


# ------------------------------------------------------------------------------ on-chip credit
def on_chip_capacity(hw: HardwareConfig) -> int:
    """Bytes an intermediate may take and still stay on chip between two kernels of one function:
    the output buffer, or half the unified buffer (the other half holds the next kernel's tiles)."""
    b = hw.buffers
    return b.unified_bytes // 2 if b.unified else b.output_bytes


def on_chip_caps(dram_read: float, dram_write: float, dram_weight: float, weight_const: bool) -> tuple[float, float]:
    """The most keeping operands on chip can save of one kernel: (its DRAM reads less constant
    weights, its DRAM writes)."""
    return max(0.0, dram_read - (dram_weight if weight_const else 0.0)), float(dram_write)


def on_chip_credit(read_saved: float, write_saved: float, caps: tuple[float, float]) -> float:
    """DRAM bytes a kernel no longer moves: the bytes of its inputs and outputs kept on chip, each
    side at most what it moves (a strided reader never read all of its input). Non-decreasing in
    both saved amounts (the exact partition search's bound relies on it)."""
    return min(read_saved, caps[0]) + min(write_saved, caps[1])


def credited_cycles(cycles: float, compute_cycles: float, credit: float, bw: float) -> int:
    """Traffic kept on chip no longer occupies DRAM; the kernel still cannot beat its compute."""
    return max(int(compute_cycles), int(cycles - credit / bw)) if credit else int(cycles)


def credited_joules(joules: float, dram_pj: float, credit: float, pj_per_byte: float) -> float:
    return joules - min(dram_pj, credit * pj_per_byte) * 1e-12 if credit else joules


def _fused(rep: KernelReport, wl: Workload, hw: HardwareConfig, reads: float, writes: float) -> KernelReport:
    """The kernel's report inside its function, ``reads`` and ``writes`` DRAM bytes kept on chip."""
    credit = reads + writes
    total = credited_cycles(rep.total_cycles, rep.compute_cycles, credit, hw.dram.bytes_per_cycle)
    # The saving comes off the time DMA was exposed: the stall first, then the last store, then
    # the first load, so the four parts still add up to the total.
    cut = rep.total_cycles - total
    parts = {}
    for name in ("stall_cycles", "epilogue_cycles", "prologue_cycles"):
        take = min(cut, getattr(rep, name))
        parts[name] = getattr(rep, name) - take
        cut -= take
    e = dict(rep.energy_pj)
    e["dram"] = max(0.0, e.get("dram", 0.0) - credit * hw.energy.dram_pj_per_byte)
    # bytes_by_operand keeps the kernel's traffic alone: which operand a read credit comes off is
    # not tracked, only how much.
    return replace(rep, total_cycles=total, energy_pj=e, **parts,
                   dram_read_bytes=int(round(rep.dram_read_bytes - reads)),
                   dram_write_bytes=int(round(rep.dram_write_bytes - writes)),
                   utilization=rep.macs / (hw.pes * total) if total else 0.0,
                   roofline_cycles=fused_roofline_for(wl, hw, credit))


def _const_bytes(graph: Any, hw: HardwareConfig) -> int:
    """Weights of a function as the device stores them (converted once, at load time)."""
    total = sum(array_device_bytes(c.data, hw) for c in graph.constants)
    for fn in graph.functions.values():
        total += _const_bytes(fn.graph, hw)
    return total


def _pick_schedule(wl: Workload, hw: HardwareConfig, schedules: Mapping[str, Schedule] | None,
                   cache: dict[str, Schedule]) -> Schedule:
    if schedules and wl.key in schedules:
        return schedules[wl.key]
    if wl.key not in cache:
        cache[wl.key] = default_schedule(wl, hw)
    return cache[wl.key]


def scaled_report(rep: KernelReport, k: float) -> KernelReport:
    """A kernel report with its time multiplied by ``k`` (a calibration): the steady state and the
    stall absorb the change, so the four parts still add up to the total."""
    if k == 1.0:
        return rep
    total = max(1, int(round(rep.total_cycles * k)))
    compute = max(1, int(round(rep.compute_cycles * k))) if rep.compute_cycles else 0
    pro = min(rep.prologue_cycles, total)
    epi = min(rep.epilogue_cycles, total - pro)
    compute = min(compute, total - pro - epi)
    return replace(rep, total_cycles=total, compute_cycles=compute, prologue_cycles=pro, epilogue_cycles=epi,
                   stall_cycles=total - pro - epi - compute,
                   utilization=rep.utilization * rep.total_cycles / total)


def _kernels(fn: Any, hw: HardwareConfig, schedules, fidelity, cache, kernel_scale=None):
    """(name, op, workload, report, node whose outputs the kernel produces)."""
    g = fn.graph
    out = []
    for node in g.nodes:
        wl = kernel_workload(node, g.functions)
        if node.op == "call":
            label = g.functions[node.attrs["callee"]].attrs.get("Composite", wl.op)
        else:
            label = node.op
        rep = simulate(wl, hw, _pick_schedule(wl, hw, schedules, cache), fidelity)
        if kernel_scale is not None:
            rep = scaled_report(rep, kernel_scale(wl, rep, hw))
        out.append((node.name, label, wl, rep, node))
    return out


def simulate_function(function: Any, hw: HardwareConfig, schedules: Mapping[str, Schedule] | None = None,
                      fidelity: str = "analytical", symbol: str | None = None,
                      _cache: dict[str, Schedule] | None = None,
                      resident: tuple[AbstractSet[int], AbstractSet[int]] = (frozenset(), frozenset()),
                      kernel_scale: Callable[[Workload, KernelReport, HardwareConfig], float] | None = None
                      ) -> SubgraphReport:
    """One call of an external function on the accelerator. ``schedules`` maps workload keys to
    schedules (default: ``default_schedule`` for each). ``resident``: (parameter positions, result
    positions) that stay in device memory at this call (``partition.residency.call_residency``:
    a KV cache read and written in place), so they do not cross the link. ``kernel_scale``: a
    calibration's factor on each kernel's cycles."""
    cache = _cache if _cache is not None else {}
    g = function.graph
    ks = _kernels(function, hw, schedules, fidelity, cache, kernel_scale)
    cap = on_chip_capacity(hw)
    graph_outs = {id(v) for v in g.outputs}
    index = {id(k[4]): i for i, k in enumerate(ks)}
    read_saved = [0] * len(ks)
    write_saved = [0] * len(ks)
    spilled = 0
    for i, (_, _, _, _, node) in enumerate(ks):
        for v in node.outputs:
            if id(v) in graph_outs or not v.users:
                continue
            nbytes = device_bytes(v.type, hw)
            if nbytes <= cap:
                write_saved[i] += nbytes
                for u in v.users:  # once per use: a node reading it twice reads it twice
                    j = index.get(id(u))
                    if j is not None:
                        read_saved[j] += nbytes
            else:
                spilled += nbytes
    kernels = []
    cycles = 0
    energy_pj = 0.0
    for i, (name, label, wl, rep, node) in enumerate(ks):
        dram = rep.bytes_by_operand["dram"]
        caps = on_chip_caps(rep.dram_read_bytes, rep.dram_write_bytes, dram["weight"],
                            weight_is_const(node, g.functions))
        reads, writes = min(read_saved[i], caps[0]), min(write_saved[i], caps[1])
        if reads or writes:
            rep = _fused(rep, wl, hw, reads, writes)
        kernels.append(KernelCost(name, label, rep))
        cycles += rep.total_cycles
        energy_pj += sum(rep.energy_pj.values())
    crossing = ([v.type for i, v in enumerate(g.inputs) if i not in resident[0]]
                + [v.type for j, v in enumerate(g.outputs) if j not in resident[1]])
    link_bytes = sum(device_bytes(t, hw) for t in crossing)
    return SubgraphReport(
        symbol=symbol or function.attrs.get("global_symbol", g.name), kernels=tuple(kernels),
        device_cycles=cycles, device_s=cycles / hw.clock_hz, link_s=link_bytes / hw.link.bytes_per_s,
        launch_s=hw.link.launch_latency_s, link_bytes=link_bytes, spilled_bytes=spilled,
        device_energy_j=energy_pj * 1e-12, link_energy_j=link_bytes * hw.energy.link_pj_per_byte * 1e-12,
        weight_bytes=_const_bytes(g, hw), convert_s=sum(conversion_seconds(t, hw) for t in crossing),
        convert_j=sum(conversion_joules(t, hw) for t in crossing))


RESIDENT_SYMBOL = "(device-resident tensors)"


def resident_transfers(graph: Any, hw: HardwareConfig) -> SubgraphReport | None:
    """The link transfers of device-resident tensors the host touches (``partition.residency.
    host_crossings``: a resident input a host op reads, a resident output the host makes), once per
    inference, as a report with no kernels and no launch; None when there are none."""
    from partition.residency import host_crossings
    types = [v.type for v in host_crossings(graph)]
    if not types:
        return None
    nbytes = sum(device_bytes(t, hw) for t in types)
    return SubgraphReport(
        symbol=RESIDENT_SYMBOL, kernels=(), device_cycles=0, device_s=0.0, link_s=nbytes / hw.link.bytes_per_s,
        launch_s=0.0, link_bytes=nbytes, spilled_bytes=0, device_energy_j=0.0,
        link_energy_j=nbytes * hw.energy.link_pj_per_byte * 1e-12, weight_bytes=0,
        convert_s=sum(conversion_seconds(t, hw) for t in types), convert_j=sum(conversion_joules(t, hw) for t in types))


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
    return host_pass_seconds(*host_op_work(node), hw)


def host_op_joules(node: Any, hw: HardwareConfig) -> float:
    """Arithmetic at ``host_pj_per_flop`` plus memory traffic at ``dram_pj_per_byte``."""
    return host_pass_joules(*host_op_work(node), hw)


@dataclass(frozen=True)
class HostOpCost:
    name: str
    op: str
    seconds: float
    joules: float = 0.0


@dataclass(frozen=True)
class GraphCost:
    """End-to-end cost of one inference of a partitioned model (latency in s, energy in J). The
    host's share is its ops plus its conversions of the tensors crossing the link."""
    hardware: str
    host_ops: tuple[HostOpCost, ...]
    calls: tuple[SubgraphReport, ...]
    weight_bytes: int

    @property
    def convert_s(self) -> float:
        return sum(c.convert_s for c in self.calls)

    @property
    def host_s(self) -> float:
        return sum(h.seconds for h in self.host_ops) + self.convert_s

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
        return sum(h.joules for h in self.host_ops) + sum(c.convert_j for c in self.calls)

    @property
    def energy_j(self) -> float:
        return self.host_j + sum(c.energy_j for c in self.calls)

    def to_dict(self) -> dict[str, Any]:
        return {"hardware": self.hardware, "latency_s": self.latency_s, "energy_j": self.energy_j,
                "host_s": self.host_s, "host_j": self.host_j, "convert_s": self.convert_s, "link_s": self.link_s,
                "launch_s": self.launch_s, "device_s": self.device_s, "weight_bytes": self.weight_bytes,
                "host_ops": [{"name": h.name, "op": h.op, "seconds": h.seconds, "joules": h.joules}
                             for h in self.host_ops],
                "calls": [c.to_dict() for c in self.calls]}


def cost_graph(graph: Any, hw: HardwareConfig, schedules: Mapping[str, Schedule] | None = None,
               fidelity: str = "analytical",
               host_seconds: Callable[[Any, HardwareConfig], float] | None = None,
               kernel_scale: Callable[[Workload, KernelReport, HardwareConfig], float] | None = None) -> GraphCost:
    """Walk a partitioned graph: host ops on the host model, each call of an external function
    (a ``Compiler`` attr) on the accelerator. A loop body counts its maximum trip count times and an
    if counts its costlier branch (costs are upper bounds, as the IR's data-dependent sizes are).
    ``host_seconds`` / ``kernel_scale``: a calibration (module docstring)."""
    from partition.ops import loop_trip_bound
    from partition.residency import call_residency
    host_time = host_seconds or host_op_seconds
    cache: dict[str, Schedule] = {}
    reports: dict[tuple, SubgraphReport] = {}

    def walk(g: Any, scope: dict[str, Any], host: list, calls: list) -> None:
        scope = {**scope, **g.functions}
        for node in g.nodes:
            fn = scope.get(node.attrs.get("callee")) if node.op == "call" else None
            if fn is not None and "Compiler" in fn.attrs:
                sym = node.attrs["callee"]
                res = call_residency(g, node)
                key = (sym, *map(tuple, map(sorted, res)))
                if key not in reports:
                    reports[key] = simulate_function(fn, hw, schedules, fidelity, sym, cache, resident=res,
                                                     kernel_scale=kernel_scale)
                calls.append(reports[key])
            elif fn is not None:
                walk(fn.graph, scope, host, calls)  # a host-side function: its ops run on the host
            elif node.op == "loop":
                trips = loop_trip_bound(node)
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
                host.append(HostOpCost(node.name, node.op, host_time(node, hw),
                                       host_op_joules(node, hw)))

    host: list[HostOpCost] = []
    calls: list[SubgraphReport] = []
    walk(graph, {}, host, calls)
    moved = resident_transfers(graph, hw)
    if moved is not None:
        calls.append(moved)
    weights = {key[0]: r.weight_bytes for key, r in reports.items()}  # once per function, whatever its calls
    return GraphCost(hw.name, tuple(host), tuple(calls), sum(weights.values()))
