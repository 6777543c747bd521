"""Frozen results of the kernel simulators."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class KernelReport:
    """One kernel on one accelerator under one schedule. Cycles are accelerator clock cycles.

    ``total_cycles = prologue_cycles + compute_cycles + stall_cycles + epilogue_cycles``: the first
    tile's load, the busy time of the array/vector unit, the steady-state time DMA was not hidden,
    and the last output tile's store. ``steady_cycles`` (compute + stall) is what SCALE-Sim calls
    total cycles (it loads the first buffer before cycle 0 and drains the last after the end).
    """
    workload: str
    hardware: str
    schedule: dict[str, Any]
    fidelity: str
    total_cycles: int
    compute_cycles: int
    stall_cycles: int
    prologue_cycles: int
    epilogue_cycles: int
    array_cycles: int
    vector_cycles: int
    macs: int
    dram_read_bytes: int
    dram_write_bytes: int
    bytes_by_operand: dict[str, dict[str, int]]  # level ('dram', 'sram') -> operand -> bytes
    energy_pj: dict[str, float]                  # component -> pJ
    utilization: float                           # MACs / (PEs x total cycles)
    roofline_cycles: float
    clock_hz: float
    n_tiles: int = 1
    # On a hierarchical machine (sim.cost.multilevel): the mapping the MAC kernel ran with; None else.
    mapping: dict[str, Any] | None = None

    @property
    def steady_cycles(self) -> int:
        return self.compute_cycles + self.stall_cycles

    @property
    def latency_s(self) -> float:
        return self.total_cycles / self.clock_hz

    @property
    def energy_j(self) -> float:
        return sum(self.energy_pj.values()) * 1e-12

    @property
    def dram_bytes(self) -> int:
        return self.dram_read_bytes + self.dram_write_bytes

    @property
    def roofline_fraction(self) -> float:
        """Achieved fraction of the roofline bound (1.0 = as fast as this hardware allows)."""
        return self.roofline_cycles / self.total_cycles if self.total_cycles else 1.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["mapping"] is None:  # one-buffer machines: the report's keys as they always were
            del d["mapping"]
        d.update(steady_cycles=self.steady_cycles, latency_s=self.latency_s, energy_j=self.energy_j,
                 roofline_fraction=self.roofline_fraction)
        return d


@dataclass(frozen=True)
class KernelCost:
    """One kernel inside a subgraph: its report and where it sits."""
    name: str
    op: str
    report: KernelReport


@dataclass(frozen=True)
class SubgraphReport:
    """An external function on the accelerator (one call): its kernels, on-chip vs spilled
    intermediates, link transfers and launch overhead. Seconds and joules. ``link_bytes`` and
    ``weight_bytes`` are in the device's format (``sim.graph.transfer.device_bytes``); ``convert_s`` /
    ``convert_j`` are the host's conversions of the crossing tensors between the graph's format
    and the device's: host work, so callers add them to the host's share (they are not in
    ``latency_s`` / ``energy_j``, which are the call's launch, link and device)."""
    symbol: str
    kernels: tuple[KernelCost, ...]
    device_cycles: int
    device_s: float
    link_s: float
    launch_s: float
    link_bytes: int
    spilled_bytes: int
    device_energy_j: float
    link_energy_j: float
    weight_bytes: int
    convert_s: float = 0.0
    convert_j: float = 0.0

    @property
    def latency_s(self) -> float:
        return self.device_s + self.link_s + self.launch_s

    @property
    def energy_j(self) -> float:
        return self.device_energy_j + self.link_energy_j

    def to_dict(self) -> dict[str, Any]:
        return {"symbol": self.symbol, "device_cycles": self.device_cycles, "device_s": self.device_s,
                "link_s": self.link_s, "launch_s": self.launch_s, "latency_s": self.latency_s,
                "link_bytes": self.link_bytes, "spilled_bytes": self.spilled_bytes,
                "weight_bytes": self.weight_bytes, "energy_j": self.energy_j,
                "convert_s": self.convert_s, "convert_j": self.convert_j,
                "kernels": [{"name": k.name, "op": k.op, **k.report.to_dict()} for k in self.kernels]}
