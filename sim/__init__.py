"""Hardware configs, workloads, schedules, kernel simulators, subgraph costing and the device runtime.

    hw = sim.load_hw("edge-npu")                       # or a TOML/YAML/JSON file
    wl = sim.Workload.conv2d(1, 64, 56, 56, 64, 3, 3, pad=1)
    s = sim.Schedule.default(wl, hw)                   # or Schedule.scalesim(wl, hw)
    rep = sim.simulate(wl, hw, s, fidelity="tile")     # KernelReport
    res = sim.simulate_batch(wl, hw, [s, ...])         # arrays, analytical
"""
from . import presets
from .analytical import ScheduleArrays
from .hardware import HardwareConfig, HardwareError, load_hw
from .kernel import simulate, simulate_batch, tile_cycles
from .report import KernelCost, KernelReport, SubgraphReport
from .schedule import LOOP_ORDERS, STANDARD_SPATIAL, Schedule, ScheduleError, check
from .workload import Workload, WorkloadError

__all__ = ["HardwareConfig", "HardwareError", "load_hw", "presets", "Workload", "WorkloadError",
           "Schedule", "ScheduleError", "ScheduleArrays", "check", "LOOP_ORDERS", "STANDARD_SPATIAL",
           "simulate", "simulate_batch", "tile_cycles", "KernelReport", "KernelCost", "SubgraphReport"]

from .subgraph import CostError, GraphCost, cost_graph, simulate_function  # noqa: E402

__all__ += ["simulate_function", "cost_graph", "GraphCost", "CostError"]

from . import runtime  # noqa: E402
from .runtime import load  # noqa: E402

__all__ += ["runtime", "load"]
