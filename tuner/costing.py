"""The end-to-end performance model of a plan (DESIGN.md, "Performance model"), as small pure terms.

- A host op costs the simulator's host model (``sim.graph.subgraph.host_op_seconds`` / ``host_op_joules``:
  a roofline on the host CPU plus its dispatch cost; energy at ``energy.host_pj_per_flop`` and
  ``energy.dram_pj_per_byte``), the same terms the device runtime charges; a composite left on the
  host costs the sum of its ops (it is inlined back into plain ops).
- A call of an external function costs ``link.launch_latency_s`` + its activation inputs and
  outputs over the link in the device's format (``sim.graph.transfer.device_bytes``: float tensors at
  ``array.word_bytes`` per element; ``bytes / link.bytes_per_s``, ``energy.link_pj_per_byte``) +
  the host's conversion of each of them between the graph's format and the device's (host time
  and energy, ``sim.graph.transfer.conversion_seconds``) + the simulated cycles of its kernels / clock.
  Weights are constants of the function, converted and loaded once at module load, so they cross
  the link zero times per inference. Device-resident tensors (a KV cache, ``partition.residency``)
  cross only where the host reads or makes them.
- A kernel is a top-level node of an external function (a composite call, or a single op); its cost
  is the kernel simulator's report under its schedule.

A calibration (``CostOptions.calibration``, a ``tuner.calibration.Calibration``) replaces the host
model of each host op by the measured host's prediction (a host file) or scales each device
kernel's cycles (a device file): in the partition search, the kernel costs and ``graph_cost``
alike, so the partition is decided on the calibrated costs.

``graph_cost`` applies this to a partitioned graph and is the reference the partition search's
fast evaluator is tested against (and what a plan reports).
"""
from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import sim
from sim.graph.subgraph import host_op_joules, host_op_seconds
from sim.graph.transfer import conversion_joules, conversion_seconds, device_bytes
from sim.graph.subgraph import kernel_workload as sim_kernel_workload, scaled_report
from partition import Function, Graph, Node, Value
from partition.ops import subgraph_runs
from partition.residency import call_residency, host_crossings


class CostingError(ValueError):
    """A node that cannot be costed (no workload on the accelerator, unknown callee)."""


@dataclass(frozen=True)
class CostOptions:
    """Modelling choices not in the hardware config. ``fidelity``: kernel simulator fidelity for device costs (``tile`` = the measurement the tuner
    uses, ``analytical`` = the fast model). ``calibration``: a learned calibration of the host
    or device costs (``tuner.calibration``), or None."""
    fidelity: str = "tile"
    calibration: Any = None

    def __post_init__(self):
        if self.fidelity not in ("tile", "analytical"):
            raise CostingError(f"fidelity must be 'tile' or 'analytical', got {self.fidelity!r}")


@dataclass(frozen=True)
class Cost:
    """Seconds and joules of one inference (or one call), split by where they are spent."""
    host_s: float = 0.0
    link_s: float = 0.0
    launch_s: float = 0.0
    device_s: float = 0.0
    host_j: float = 0.0
    link_j: float = 0.0
    device_j: float = 0.0
    link_bytes: float = 0.0
    calls: float = 0.0

    @property
    def latency_s(self) -> float:
        return self.host_s + self.link_s + self.launch_s + self.device_s

    @property
    def energy_j(self) -> float:
        return self.host_j + self.link_j + self.device_j

    def __add__(self, o: "Cost") -> "Cost":
        return Cost(*(a + b for a, b in zip(self._t(), o._t())))

    def scaled(self, k: float) -> "Cost":
        return Cost(*(a * k for a in self._t()))

    def _t(self) -> tuple[float, ...]:
        return (self.host_s, self.link_s, self.launch_s, self.device_s, self.host_j, self.link_j,
                self.device_j, self.link_bytes, self.calls)

    def to_dict(self) -> dict:
        return {"latency_s": self.latency_s, "energy_j": self.energy_j, "host_s": self.host_s,
                "link_s": self.link_s, "launch_s": self.launch_s, "device_s": self.device_s,
                "host_j": self.host_j, "link_j": self.link_j, "device_j": self.device_j,
                "link_bytes": int(round(self.link_bytes)), "calls": int(round(self.calls))}


OBJECTIVES = ("latency", "energy", "edp")


def objective_value(objective: str, latency_s: float, energy_j: float) -> float:
    if objective == "latency":
        return latency_s
    if objective == "energy":
        return energy_j
    if objective == "edp":
        return latency_s * energy_j
    raise CostingError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")


# ------------------------------------------------------------------------------------------ host
def host_op_cost(node: Node, hw: sim.HardwareConfig, opts: CostOptions, source=None, users=None) -> Cost:
    """One primitive op on the host. Control-flow nodes cost their dispatch only (their bodies are
    costed node by node). ``source`` (value -> value): where an input really comes from, and
    ``users`` (value -> nodes): which nodes really read a value, for a calibration's context
    features (``host_unit_cost``)."""
    cal = opts.calibration
    seconds = cal.host_seconds(node, hw, source, users) if cal is not None else host_op_seconds(node, hw)
    return Cost(host_s=seconds, host_j=host_op_joules(node, hw))


def host_unit_cost(node: Node, scope: Mapping[str, Function], hw: sim.HardwareConfig,
                   opts: CostOptions, bind: Mapping[int, Value] | None = None,
                   sinks: Mapping[int, tuple] | None = None, hops: dict[int, tuple] | None = None) -> Cost:
    """A top-level node on the host: a composite call is inlined, so it costs its body's ops.
    A node costs the same inside a composite as in the graph it came from: a calibration's
    context features (a constant input's bytes, a MAC producer, the activation fused into a MAC
    op's kernel) see through the composite's parameters to the call's arguments and through a
    composite's outputs to the node inside that made them (``bind``: id(parameter) -> argument),
    and from a composite's output to its call's readers (``sinks``: id(body output) -> (the
    call's output, its scope, its sinks); ``hops``: the same for the composites ``_source``
    stepped into)."""
    bind, sinks = bind or {}, sinks or {}
    hops = {} if hops is None else hops
    fn = scope.get(node.attrs.get("callee")) if node.op == "call" else None
    if fn is not None and "Composite" in fn.attrs:
        inner = {**scope, **fn.graph.functions}
        args = {id(p): _source(a, scope, bind, sinks, hops) for p, a in zip(fn.graph.inputs, node.inputs)}
        outs = {id(o): (co, scope, sinks) for o, co in zip(fn.graph.outputs, node.outputs)}
        total = Cost()
        for n in fn.graph.nodes:
            total = total + host_unit_cost(n, inner, hw, opts, args, outs, hops)
        return total
    seen = ChainMap(sinks, hops)
    return host_op_cost(node, hw, opts, lambda v: _source(v, scope, bind, sinks, hops),
                        lambda v: _readers(v, scope, seen))


def _source(v: Value, scope: Mapping[str, Function], bind: Mapping[int, Value],
            sinks: Mapping[int, tuple] | None = None, hops: dict[int, tuple] | None = None) -> Value:
    """The value ``v`` stands for: a composite's parameter is its call's argument, and a composite
    call's output is the body value that makes it (its producer is the op that did the work).
    Each body output it steps to goes in ``hops`` with where its call's output goes (as
    ``sinks``), so that ``_readers`` can step back out."""
    v = bind.get(id(v), v)
    sinks = sinks or {}
    while v.producer is not None and v.producer.op == "call":
        fn = scope.get(v.producer.attrs.get("callee"))
        if fn is None or "Composite" not in fn.attrs:
            break
        i = next((k for k, o in enumerate(v.producer.outputs) if o is v), None)
        if i is None or i >= len(fn.graph.outputs):
            break
        body = {id(o): (co, scope, sinks) for o, co in zip(fn.graph.outputs, v.producer.outputs)}
        if hops is not None:
            hops.update(body)
        v, scope, sinks = fn.graph.outputs[i], {**scope, **fn.graph.functions}, body
    return v


def _readers(v: Value, scope: Mapping[str, Function], sinks: Mapping[int, tuple]) -> list[Node]:
    """The nodes that read ``v`` once composites are inlined: a composite call reading it stands for
    the body nodes reading that parameter, and a composite's output is read also where its call's
    output is."""
    out: list[Node] = []
    for u in v.users:
        fn = scope.get(u.attrs.get("callee")) if u.op == "call" else None
        if fn is None or "Composite" not in fn.attrs:
            out.append(u)
            continue
        inner = {**scope, **fn.graph.functions}
        for a, p in zip(u.inputs, fn.graph.inputs):
            if a is v:
                out += _readers(p, inner, {})
    if id(v) in sinks:
        out += _readers(*sinks[id(v)])
    return out


# ---------------------------------------------------------------------------------------- device
def kernel_workload(node: Node, scope: Mapping[str, Function]) -> sim.Workload:
    """The workload of one kernel (``sim.graph.subgraph.kernel_workload``: the one definition the device
    runtime also uses to find a kernel's tuned schedule)."""
    try:
        return sim_kernel_workload(node, scope)
    except ValueError as e:
        raise CostingError(str(e)) from None


@dataclass(frozen=True)
class KernelResult:
    """A kernel's cost under one schedule (one call), alone: its inputs read from and its outputs
    written to DRAM. ``compute_cycles``, ``dram_pj`` and the DRAM bytes bound what keeping an
    operand on chip saves (``sim.graph.subgraph.on_chip_caps``)."""
    workload: sim.Workload
    schedule: sim.Schedule
    cycles: int
    energy_j: float
    roofline_fraction: float
    compute_cycles: int = 0
    dram_pj: float = 0.0
    dram_read_bytes: int = 0
    dram_write_bytes: int = 0
    dram_weight_bytes: int = 0


class KernelCoster:
    """Costs kernels on one hardware config: the schedule of a workload is ``schedules[key]``
    when given (tuned), else ``default_schedule``. Results are memoised per workload key; the
    object is otherwise immutable (its inputs are frozen), so it may be shared."""

    def __init__(self, hw: sim.HardwareConfig, schedules: Mapping[str, sim.Schedule] | None = None,
                 opts: CostOptions = CostOptions()):
        self.hw = hw
        self.schedules = dict(schedules or {})
        self.opts = opts
        self._memo: dict[str, KernelResult] = {}

    def schedule_for(self, wl: sim.Workload) -> sim.Schedule:
        return self(wl).schedule

    def __call__(self, wl: sim.Workload) -> KernelResult:
        """The kernel under the better (fewer cycles) of its given schedule and the default one,
        so tuning never makes a kernel slower than not tuning; a given schedule with a mapping
        (a storage hierarchy's MAC kernel) is used as it is. Raises ``sim.ScheduleError`` when
        no schedule of the workload fits the hardware."""
        r = self._memo.get(wl.key)
        if r is None:
            given = self.schedules.get(wl.key)
            # a tuned mapping was chosen for the plan's objective, seeded with the default one
            # (tuner.tune_mappings): it is used as given, not second-guessed on cycles alone
            cands = [given] if given is not None and given.mapping is not None else [sim.default_schedule(wl, self.hw)]
            if given is not None and given != cands[0]:
                cands.append(given)
            cal = self.opts.calibration
            for s in cands:
                rep = sim.simulate(wl, self.hw, s, fidelity=self.opts.fidelity)
                if cal is not None:
                    rep = scaled_report(rep, cal.kernel_scale(wl, rep, self.hw))
                k = KernelResult(wl, s, rep.total_cycles, rep.energy_j, rep.roofline_fraction,
                                 rep.compute_cycles, float(rep.energy_pj.get("dram", 0.0)), rep.dram_read_bytes,
                                 rep.dram_write_bytes, rep.bytes_by_operand["dram"]["weight"])
                if r is None or k.cycles < r.cycles:
                    r = k
            self._memo[wl.key] = r
        return r

    def device_cost(self, wl: sim.Workload) -> Cost:
        r = self(wl)
        return Cost(device_s=r.cycles / self.hw.clock_hz, device_j=r.energy_j)


def crossing_cost(t, hw: sim.HardwareConfig) -> Cost:
    """One tensor (a ``TensorType``) crossing the link once: its bytes in the device's format over
    the link, and the host's conversion between the graph's format and the device's."""
    nbytes = device_bytes(t, hw)
    return Cost(link_s=nbytes / hw.link.bytes_per_s, link_j=nbytes * hw.energy.link_pj_per_byte * 1e-12,
                link_bytes=nbytes, host_s=conversion_seconds(t, hw), host_j=conversion_joules(t, hw))


def launch_cost(hw: sim.HardwareConfig) -> Cost:
    return Cost(launch_s=hw.link.launch_latency_s, calls=1.0)


# ------------------------------------------------------------------------------ partitioned graph
@dataclass(frozen=True)
class KernelCost:
    """A kernel inside its function: cycles, energy, roofline fraction and DRAM bytes with the
    intermediates its function keeps on chip credited."""
    name: str
    workload: str
    op: str
    schedule: dict
    cycles: int
    energy_j: float
    roofline_fraction: float
    dram_bytes: int = 0


@dataclass(frozen=True)
class FunctionCost:
    """One call of an external function: its cost (launch, link, device) and its kernels."""
    symbol: str
    calls: float                 # calls per inference (loop trips included)
    per_call: Cost
    kernels: tuple[KernelCost, ...]

    @property
    def cycles(self) -> int:
        return int(sum(k.cycles for k in self.kernels))


@dataclass(frozen=True)
class GraphCost:
    total: Cost
    functions: dict = field(default_factory=dict)   # symbol -> FunctionCost


def function_cost(symbol: str, fn: Function, scope: Mapping[str, Function], coster: KernelCoster,
                  resident: tuple = (frozenset(), frozenset())) -> FunctionCost:
    """One call of an external function: ``sim.simulate_function`` with the coster's schedule of
    every kernel (intermediates kept on chip where they fit), plus launch, link and the host's
    conversions of the crossing tensors (less the device-resident ones of the call, ``resident``:
    ``partition.residency.call_residency``)."""
    hw = coster.hw
    inner = {**scope, **fn.graph.functions}
    chosen = {}
    for n in fn.graph.nodes:
        r = coster(kernel_workload(n, inner))
        chosen[r.workload.key] = r.schedule
    cal = coster.opts.calibration
    rep = sim.simulate_function(fn, hw, chosen, fidelity=coster.opts.fidelity, symbol=symbol, resident=resident,
                                kernel_scale=cal.kernel_scale if cal is not None else None)
    total = Cost(host_s=rep.convert_s, host_j=rep.convert_j, link_s=rep.link_s, launch_s=rep.launch_s,
                 device_s=rep.device_s, link_j=rep.link_energy_j, device_j=rep.device_energy_j,
                 link_bytes=rep.link_bytes, calls=1.0)
    kernels = tuple(KernelCost(k.name, k.report.workload, k.op, k.report.schedule, k.report.total_cycles,
                               k.report.energy_j, k.report.roofline_fraction, k.report.dram_bytes)
                    for k in rep.kernels)
    return FunctionCost(symbol, 0.0, total, kernels)


def graph_cost(graph: Graph, coster: KernelCoster, opts: CostOptions = CostOptions()) -> GraphCost:
    """Cost of one inference of a partitioned graph: host nodes on the host model, calls of
    external functions (``Compiler`` attr) as launch + transfers + kernels. A loop body counts once
    per trip of its constant trip bound, an if the branch a constant condition takes or else the
    slower one (the branch taken is known only at run time: ``partition.ops.subgraph_runs``).
    A host calibration not yet bound to a model (``Calibration.for_graph``) is bound to ``graph``."""
    if opts.calibration is not None and opts.calibration.model_bytes is None:
        # the coster's calibration only scales device kernels, which the model's bytes leave alone
        opts = replace(opts, calibration=opts.calibration.for_graph(graph))
    hw = coster.hw
    externals = {s: f for s, f in graph.functions.items() if "Compiler" in f.attrs}
    # A function's report is of its first call's residency (device-resident arguments and results,
    # partition.residency); a call with another residency is costed on its own.
    first: dict[str, tuple] = {}
    for n in graph.nodes:
        sym = n.attrs.get("callee") if n.op == "call" else None
        if sym in externals and sym not in first:
            first[sym] = call_residency(graph, n)
    per_fn = {s: function_cost(s, f, graph.functions, coster, first.get(s, (frozenset(), frozenset())))
              for s, f in externals.items()}
    variants: dict[tuple, Cost] = {}
    calls = {s: 0.0 for s in externals}

    def call_cost(g: Graph, n: Node, sym: str) -> Cost:
        res = call_residency(g, n) if g is graph else (frozenset(), frozenset())
        if res == first.get(sym, (frozenset(), frozenset())):
            return per_fn[sym].per_call
        key = (sym, tuple(sorted(res[0])), tuple(sorted(res[1])))
        if key not in variants:
            variants[key] = function_cost(sym, externals[sym], graph.functions, coster, res).per_call
        return variants[key]

    def visit(g: Graph, scope: Mapping[str, Function], weight: float) -> Cost:
        scope = {**scope, **g.functions}
        total = Cost()
        for n in g.nodes:
            sym = n.attrs.get("callee") if n.op == "call" else None
            if sym in externals:
                calls[sym] += weight
                total = total + call_cost(g, n, sym).scaled(weight)
                continue
            total = total + host_unit_cost(n, scope, hw, opts).scaled(weight)
            if n.op in ("loop", "if"):
                for k, runs in subgraph_runs(n, scope).items():
                    total = total + visit(n.attrs[k], scope, weight * runs)
        return total

    total = visit(graph, {}, 1.0)
    for v in host_crossings(graph):  # device-resident tensors the host reads or makes
        total = total + crossing_cost(v.type, hw)
    fns = {s: FunctionCost(s, calls[s], per_fn[s].per_call, per_fn[s].kernels) for s in externals}
    return GraphCost(total, fns)


__all__ = ["CostOptions", "Cost", "CostingError", "OBJECTIVES", "objective_value", "host_op_cost",
           "host_unit_cost", "kernel_workload", "KernelCoster", "KernelResult", "crossing_cost",
           "launch_cost", "graph_cost", "GraphCost", "FunctionCost", "KernelCost"]
