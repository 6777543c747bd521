"""``tuner.Plan``: what ``tuner.tune`` decides for one model on one accelerator, with its predicted
cost, and its export as a packed module (docs/FORMAT.md).

A plan holds the source graph, the partitioned graph (host nodes plus calls of external functions),
the partition decision, a schedule per kernel of every external function, the predicted latency and
energy of one inference with the host / link / launch / device split and the cost of each external
function, and the baselines it was compared against."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

import sim
from partition import Graph, graph_hash, write_packed

from sim.graph.subgraph import on_chip_capacity
from sim.graph.transfer import device_bytes

from .costing import Cost, FunctionCost, GraphCost

@dataclass(frozen=True)
class Decision:
    """Which units (top-level nodes after pattern fusion, named by graph path and node name) run on
    the device, and the external functions they form, each a tuple of units in order."""
    offloaded: tuple[tuple[str, str], ...]
    functions: tuple[tuple[tuple[str, str], ...], ...]
    units: int                 # units in the graph
    offloadable: int           # units the target can run
    candidate_regions: int     # regions greedy BYOC forms

    def to_dict(self) -> dict:
        return {"units": self.units, "offloadable": self.offloadable,
                "candidate_regions": self.candidate_regions, "offloaded": len(self.offloaded),
                "functions": [[f"{g}:{n}" for g, n in fn] for fn in self.functions]}


@dataclass(frozen=True)
class TaskSummary:
    """One tuned kernel workload: how often it runs per inference, its best cycles, the default
    schedule's cycles and the roofline fraction of the best."""
    workload: str
    op: str
    weight: float
    best_cycles: int
    default_cycles: int
    roofline_fraction: float
    trials: int

    def to_dict(self) -> dict:
        return {"workload": self.workload, "op": self.op, "weight": self.weight,
                "best_cycles": self.best_cycles, "default_cycles": self.default_cycles,
                "roofline_fraction": self.roofline_fraction, "trials": self.trials}


@dataclass(frozen=True, eq=False)
class Plan:
    model: str
    source: Graph = field(repr=False)
    graph: Graph = field(repr=False)          # partitioned: host nodes + external calls
    hw: sim.HardwareConfig = field(repr=False)
    target: str = ""
    objective: str = "latency"
    offload: str = "cost"                     # tune()'s offload policy: "cost" (searched) or "all" (greedy BYOC)
    decision: Decision | None = None
    schedules: Mapping[str, Mapping[str, sim.Schedule]] = field(default_factory=dict)  # symbol -> kernel -> schedule
    cost: GraphCost | None = None
    baselines: Mapping[str, Cost] = field(default_factory=dict)  # greedy_byoc, all_host, default_schedules
    tasks: tuple[TaskSummary, ...] = ()
    seed: int = 0
    trials: int = 0
    search: Mapping[str, Any] = field(default_factory=dict)      # search statistics
    cost_model: Any = field(default=None, repr=False)            # the tuner's model, for reuse
    # Where tune()'s wall time went (partition, kernel tuning by phase, final costing); not in
    # summary() or the packed module: it differs from run to run.
    timing: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # The learned calibration the costs used (``tuner.calibration.Calibration.describe()``), or None.
    calibration: Mapping[str, Any] | None = None

    # ------------------------------------------------------------------ figures
    @property
    def latency_s(self) -> float:
        return self.cost.total.latency_s

    @property
    def energy_j(self) -> float:
        return self.cost.total.energy_j

    @property
    def functions(self) -> Mapping[str, FunctionCost]:
        return self.cost.functions

    def speedup_over(self, baseline: str) -> float:
        b = self.baselines[baseline]
        return b.latency_s / self.latency_s if self.latency_s > 0 else float("inf")

    # ------------------------------------------------------------------ summary
    def kernels(self):
        """``(FunctionCost, KernelCost, sim.Workload)`` for every kernel of every external function,
        in order; a kernel whose workload cannot be rebuilt from the graph is skipped."""
        from .costing import kernel_workload
        for sym, fc in self.cost.functions.items():
            fn = self.graph.functions.get(sym)
            if fn is None:
                continue
            scope = {**self.graph.functions, **fn.graph.functions}
            nodes = {n.name: n for n in fn.graph.nodes}
            for k in fc.kernels:
                if k.name not in nodes:
                    continue
                try:
                    wl = kernel_workload(nodes[k.name], scope)
                except ValueError:
                    continue
                yield fc, k, wl

    def summary(self) -> dict:
        """A JSON-able description: totals, breakdown, functions and kernels, baselines, tasks."""
        return {
            "model": self.model,
            "hardware": {"name": self.hw.name, "fingerprint": self.hw.fingerprint()},
            "target": self.target,
            "objective": self.objective,
            "offload": self.offload,
            "seed": self.seed,
            "trials": self.trials,
            "latency_s": self.latency_s,
            "energy_j": self.energy_j,
            "edp_js": self.latency_s * self.energy_j,
            "breakdown": self.cost.total.to_dict(),
            "functions": {s: _function_dict(f) for s, f in self.cost.functions.items()},
            "baselines": {k: {"latency_s": c.latency_s, "energy_j": c.energy_j, "breakdown": c.to_dict()}
                          for k, c in self.baselines.items()},
            "partition": self.decision.to_dict() if self.decision else {},
            "tasks": [t.to_dict() for t in self.tasks],
            "search": dict(self.search),
            # Tensors that live on the device across inferences (a decoder's KV cache), not moved
            # per inference (partition.residency).
            "device_resident": list(self.source.meta.get("device_resident", ())),
            "calibrated": self.calibration is not None,
            "calibration": dict(self.calibration) if self.calibration else None,
        }

    # ------------------------------------------------------------------ export
    def save(self, path: str | os.PathLike) -> dict:
        """Write the packed module (docs/FORMAT.md) and return its manifest."""
        hw = self.hw
        externals = {}
        per_fn = {}
        for sym, fc in self.cost.functions.items():
            fn = self.graph.functions[sym]
            externals[sym] = {
                "schedules": {k: s.to_dict() for k, s in self.schedules.get(sym, {}).items()},
                "buffer_plan": buffer_plan(fn.graph, hw),
                "codegen": codegen_options(fn, hw),
                "predicted": {**fc.per_call.to_dict(), "calls": fc.calls, "cycles": fc.cycles,
                              "kernels": {k.name: {"workload": k.workload, "cycles": k.cycles,
                                                   "energy_j": k.energy_j,
                                                   "roofline_fraction": k.roofline_fraction,
                                                   "dram_bytes": k.dram_bytes}
                                          for k in fc.kernels}},
            }
            per_fn[sym] = {"latency_s": fc.per_call.latency_s, "energy_j": fc.per_call.energy_j,
                           "cycles": fc.cycles, "calls": fc.calls}
        summary = self.summary()
        manifest_fields = {
            "model": {"name": self.model, "source_graph_hash": graph_hash(self.source)},
            "hardware": hw.to_dict(),
            "objective": self.objective,
            "predicted": {"latency_s": self.latency_s, "energy_j": self.energy_j,
                          "breakdown": summary["breakdown"], "functions": per_fn},
            "target": self.target,
            "baselines": {k: {"latency_s": v["latency_s"], "energy_j": v["energy_j"]}
                          for k, v in summary["baselines"].items()},
            "plan": {k: summary[k] for k in ("partition", "tasks", "seed", "trials", "search", "offload",
                                             "calibrated", "calibration")},
        }
        return write_packed(path, manifest_fields=json_safe(manifest_fields), host_graph=self.graph,
                            externals=json_safe(externals))


def _function_dict(f: FunctionCost) -> dict:
    return {**f.per_call.to_dict(), "calls": f.calls, "cycles": f.cycles,
            "kernels": [{"name": k.name, "op": k.op, "workload": k.workload, "cycles": k.cycles,
                         "energy_j": k.energy_j, "roofline_fraction": k.roofline_fraction,
                         "dram_bytes": k.dram_bytes,
                         "schedule": k.schedule} for k in f.kernels]}


def buffer_plan(body: Graph, hw: sim.HardwareConfig) -> dict:
    """Where each activation of an external function lives on the device: inputs arrive over the
    link into DRAM and outputs leave from DRAM; an intermediate stays on chip (the output buffer,
    or half the unified buffer: ``sim.graph.subgraph.on_chip_capacity``, the rule the costing uses) when
    it fits, else it spills to DRAM. Sizes are in device bytes (``sim.graph.transfer.device_bytes``:
    float tensors at ``array.word_bytes`` per element), the bytes that cross the link."""
    cap = on_chip_capacity(hw)
    ins = {id(v) for v in body.inputs}
    outs = {id(v) for v in body.outputs}
    plan: dict[str, dict] = {}
    for v in [*body.inputs, *(o for n in body.nodes for o in n.outputs)]:
        nbytes = device_bytes(v.type, hw)
        if id(v) in ins:
            kind, where = "input", "dram"
        elif id(v) in outs:
            kind, where = "output", "dram"
        else:
            kind, where = "intermediate", ("sram" if nbytes <= cap else "dram")
        plan[v.name] = {"kind": kind, "bytes": int(nbytes), "where": where}
    return plan


def codegen_options(fn, hw: sim.HardwareConfig) -> dict:
    """What a code generator for the target needs beyond the graph and schedules."""
    comps = sorted({str(f.attrs["Composite"]) for f in fn.graph.functions.values() if "Composite" in f.attrs})
    return {"target": str(fn.attrs.get("Compiler", hw.support.target)),
            "array": [hw.array.rows, hw.array.cols], "dataflows": list(hw.array.dataflows),
            "mac_dtype": hw.array.mac_dtype, "word_bytes": hw.array.word_bytes,
            "vector_ops": list(hw.vector.ops), "composites": comps, "clock_hz": hw.clock_hz}


def json_safe(x: Any) -> Any:
    """Plain JSON types (numpy scalars to Python); non-finite floats (a kernel the device cannot
    run) become None. The one sanitiser for everything accel-tune writes as JSON."""
    if isinstance(x, Mapping):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if np.isfinite(x) else None
    return x


__all__ = ["Plan", "Decision", "TaskSummary", "buffer_plan", "codegen_options"]
