"""Hardware configs, workloads, schedules, kernel simulators, subgraph costing and the device runtime.

    hw = sim.load_hw("edge-npu")                       # or a TOML/YAML/JSON file
    wl = sim.Workload.conv2d(1, 64, 56, 56, 64, 3, 3, pad=1)
    s = sim.default_schedule(wl, hw)                   # or sim.scalesim_schedule(wl, hw)
    rep = sim.simulate(wl, hw, s, fidelity="tile")     # KernelReport
    res = sim.simulate_batch(wl, hw, [s, ...])         # arrays, analytical

Sub-packages, one concern each (their docstrings say what they own):
``hw`` (configs, presets, the storage hierarchy, config files), ``workload`` (what a kernel
computes: workloads, loop nests, from IR nodes), ``mapping`` (how it runs: one-level schedules,
multi-level mappings, mapspaces, default policies), ``cost`` (the models: analytical, tile walk,
data movement and its engines, the kernel entry points), ``graph`` (subgraphs, transfers, the
device runtime), ``timeloop`` (the Timeloop adapter) and ``validate`` (the oracle readers).
"""
from .hw import presets
from .hw.config import HardwareConfig, HardwareError, load_hw
from .workload.workload import Workload, WorkloadError
from .workload.from_ir import workload_of
from .mapping.schedule import LOOP_ORDERS, STANDARD_SPATIAL, Schedule, ScheduleError, check
from .mapping.defaults import default_schedule, scalesim_schedule
from .cost.analytical import ScheduleArrays
from .cost.kernel import simulate, simulate_batch, tile_cycles
from .cost.report import KernelCost, KernelReport, SubgraphReport
from .graph.subgraph import CostError, GraphCost, cost_graph, simulate_function
from .graph import runtime
from .graph.runtime import load

__all__ = ["HardwareConfig", "HardwareError", "load_hw", "presets", "Workload", "WorkloadError", "workload_of",
           "Schedule", "ScheduleError", "ScheduleArrays", "check", "LOOP_ORDERS", "STANDARD_SPATIAL",
           "default_schedule", "scalesim_schedule",
           "simulate", "simulate_batch", "tile_cycles", "KernelReport", "KernelCost", "SubgraphReport",
           "simulate_function", "cost_graph", "GraphCost", "CostError", "runtime", "load"]

from partition.moved import alias_modules  # noqa: E402

# Module paths before issue 21 (sim/ was one flat folder); they import, warning, for one release.
# sim.workload, sim.mapping and sim.validate became packages: their __init__ forwards the old names.
alias_modules({
    "sim.hardware": "sim.hw.config",
    "sim.configfile": "sim.hw.configfile",
    "sim.hierarchy": "sim.hw.hierarchy",
    "sim.hw_hierarchy": "sim.hw.config_hierarchy",
    "sim.presets": "sim.hw.presets",
    "sim.workload_ir": "sim.workload.from_ir",
    "sim.nest": "sim.workload.nest",
    "sim.schedule": "sim.mapping.schedule",
    "sim.defaults": "sim.mapping.defaults",
    "sim.footprint": "sim.mapping.footprint",
    "sim.mapspace": "sim.mapping.mapspace",
    "sim.mapspace_sim": "sim.mapping.mapspace_sim",
    "sim.mapping_policy": "sim.mapping.policy",
    "sim.analytical": "sim.cost.analytical",
    "sim.tile": "sim.cost.tile",
    "sim.kernel": "sim.cost.kernel",
    "sim.multilevel": "sim.cost.multilevel",
    "sim.movement": "sim.cost.movement",
    "sim.movement_batch": "sim.cost.engines.batch",
    "sim.movement_jit": "sim.cost.engines.jit",
    "sim.movement_jitgen": "sim.cost.engines.jitgen",
    "sim.movement_jitloop": "sim.cost.engines.jitloop",
    "sim.walk": "sim.cost.walk",
    "sim.walk_pipeline": "sim.cost.walk_pipeline",
    "sim.report": "sim.cost.report",
    "sim.subgraph": "sim.graph.subgraph",
    "sim.transfer": "sim.graph.transfer",
    "sim.runtime": "sim.graph.runtime",
    "sim.oracle": "sim.validate.scalesim_files",
    "sim.recount": "sim.validate.recount",
    "sim.timeloop.oracle": "sim.validate.timeloop",
})
