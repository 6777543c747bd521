"""The simulated device runtime: load a packed module (docs/FORMAT.md) and run it.

    mod = sim.graph.runtime.load("plan.zip")        # read_packed + every external function costed once
    res = mod.run({"x": x})                   # RunResult: outputs and the simulated latency breakdown

Numerics: host ops run with the numpy reference implementation; an external function runs on the
"device", whose numerics are the reference implementation of its body, so outputs equal the
reference interpreter on the source model.

Timing follows what actually ran: every host op executed (inside If branches and Loop bodies too,
once per trip) costs the simulator's host model (``sim.graph.subgraph.host_op_seconds``); every call of an
external function costs one call of its ``SubgraphReport``: launch + link transfers of its
activations in the device's format + its kernels' cycles under the archive's schedules on the
archive's hardware config (``sim.simulate_function``), and the host's conversion of each crossing
tensor (``sim.graph.transfer``) counts in the host's share. Weights are converted and loaded once, at
load time, so they are not per inference. Device-resident tensors (``partition.residency``: a KV
cache) cross only where the host reads or makes them (a row of their own in the breakdown).
Energy adds the host's (``sim.graph.subgraph.host_op_joules`` per op executed) to the accelerator's and the
link's of every call.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from partition import Function, Graph, Interpreter, PackedModule, read_packed
from partition.ir import Node, Value

from ..hw.config import HardwareConfig, HardwareError
from ..cost.report import SubgraphReport
from ..mapping.schedule import Schedule, ScheduleError
from ..cost.kernel import FIDELITIES
from partition.residency import call_residency

from .subgraph import (CostError, host_op_joules, host_op_seconds, kernel_workload, resident_transfers,
                       simulate_function)
from ..workload.workload import WorkloadError

# Ops that pass an integer input through unchanged in value, so an index input can be traced to
# the table it indexes.
_VALUE_PRESERVING = frozenset({"cast", "reshape", "flatten", "squeeze", "unsqueeze", "identity"})
_INDEX_OPS = {"gather": 1, "gather_elements": 1, "gather_nd": 1}


# Host ops + device calls of one run: about 20 s of interpreting at 0.1 ms an op; a built-in model
# executes a few hundred, a recurrent zoo model a few thousand.
DEFAULT_MAX_OPS = 200_000


class RuntimeLoadError(ValueError):
    """A packed module the simulated device cannot run (bad hardware config or schedule); one line."""


class RunInputError(ValueError):
    """Inputs that do not match the module's inputs (names, shapes, dtypes); one line."""


# ------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class FunctionTiming:
    """Every call of one external function during a run. ``per_call`` is the simulator's report
    of one call (cycles, seconds, energy, kernels); totals are ``calls`` times it."""
    symbol: str
    calls: int
    per_call: SubgraphReport

    @property
    def cycles(self) -> int:
        return self.calls * self.per_call.device_cycles

    @property
    def device_s(self) -> float:
        return self.calls * self.per_call.device_s

    @property
    def link_s(self) -> float:
        return self.calls * self.per_call.link_s

    @property
    def launch_s(self) -> float:
        return self.calls * self.per_call.launch_s

    @property
    def latency_s(self) -> float:
        return self.calls * self.per_call.latency_s

    @property
    def energy_j(self) -> float:
        return self.calls * self.per_call.energy_j

    def to_dict(self) -> dict[str, Any]:
        p = self.per_call
        return {"calls": self.calls, "cycles": self.cycles, "device_s": self.device_s,
                "link_s": self.link_s, "launch_s": self.launch_s, "latency_s": self.latency_s,
                "energy_j": self.energy_j,
                "per_call": {"cycles": p.device_cycles, "device_s": p.device_s, "link_s": p.link_s,
                             "launch_s": p.launch_s, "latency_s": p.latency_s, "energy_j": p.energy_j,
                             "link_bytes": p.link_bytes, "spilled_bytes": p.spilled_bytes,
                             "convert_s": p.convert_s}}


@dataclass(frozen=True)
class LatencyBreakdown:
    """Simulated latency (seconds) and energy (joules) of one run, split by where it is spent.
    ``host_s`` / ``host_j``: the host ops executed and the host's conversions of the tensors that
    crossed the link."""
    host_s: float
    host_ops: int                                # host ops executed
    functions: tuple[FunctionTiming, ...]        # external functions called, in first-call order
    host_j: float = 0.0

    @property
    def device_s(self) -> float:
        return sum(f.device_s for f in self.functions)

    @property
    def link_s(self) -> float:
        return sum(f.link_s for f in self.functions)

    @property
    def launch_s(self) -> float:
        return sum(f.launch_s for f in self.functions)

    @property
    def latency_s(self) -> float:
        return self.host_s + self.link_s + self.launch_s + self.device_s

    @property
    def energy_j(self) -> float:
        return self.host_j + sum(f.energy_j for f in self.functions)

    def to_dict(self) -> dict[str, Any]:
        return {"latency_s": self.latency_s, "energy_j": self.energy_j, "host_s": self.host_s,
                "host_j": self.host_j,
                "link_s": self.link_s, "launch_s": self.launch_s, "device_s": self.device_s,
                "host_ops": self.host_ops, "calls": sum(f.calls for f in self.functions),
                "functions": {f.symbol: f.to_dict() for f in self.functions}}


@dataclass(frozen=True)
class RunResult:
    """``outputs``: the module's outputs by name, in graph order (a name the graph returns twice is
    one value, so it appears once)."""
    outputs: Mapping[str, np.ndarray]
    breakdown: LatencyBreakdown

    @property
    def latency_s(self) -> float:
        return self.breakdown.latency_s

    @property
    def energy_j(self) -> float:
        return self.breakdown.energy_j


# ------------------------------------------------------------------------------------- module
@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True, eq=False)
class LoadedModule:
    """A packed module ready to run on the simulated device. ``reports``: one call of each external
    function, simulated at load time with ``schedules`` (symbol -> kernel name -> Schedule) on
    ``hw``."""
    path: str
    packed: PackedModule = field(repr=False)
    hw: HardwareConfig = field(repr=False)
    schedules: Mapping[str, Mapping[str, Schedule]] = field(repr=False)
    reports: Mapping[str, SubgraphReport] = field(repr=False)
    fidelity: str = "tile"
    # Calls of the host graph whose arguments or results are device-resident
    # (partition.residency): node id -> (symbol, residency key, that call's report).
    resident_calls: Mapping[int, tuple[str, tuple, SubgraphReport]] = field(default_factory=dict, repr=False)
    # Device-resident tensors the host reads or makes: their transfers, once per run.
    resident_moves: SubgraphReport | None = field(default=None, repr=False)

    @property
    def graph(self) -> Graph:
        return self.packed.host_graph

    @property
    def manifest(self) -> dict:
        return self.packed.manifest

    @property
    def inputs(self) -> tuple[InputSpec, ...]:
        return tuple(InputSpec(v.name, tuple(v.shape), v.dtype) for v in self.graph.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v.name for v in self.graph.outputs))

    def check_inputs(self, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[str, np.ndarray]:
        """The inputs by name as arrays of the declared dtypes; RunInputError names the first
        problem (unknown or missing name, wrong shape, a dtype that does not convert exactly).
        An input of another dtype is cast only when every value survives the cast unchanged
        (int64 token ids to int32, 3.0 to 3, float64 that holds float32 values), with a one-line
        warning; otherwise it is refused, never rounded silently."""
        specs = self.inputs
        if not isinstance(inputs, Mapping):
            inputs = list(inputs)
            if len(inputs) != len(specs):
                raise RunInputError(f"the module takes {len(specs)} input(s) "
                                    f"({', '.join(s.name for s in specs)}), got {len(inputs)}")
            inputs = {s.name: a for s, a in zip(specs, inputs)}
        names = [s.name for s in specs]
        unknown = [k for k in inputs if k not in names]
        if unknown:
            raise RunInputError(f"unknown input(s) {', '.join(map(repr, unknown))}; "
                                f"the module takes {', '.join(names)}")
        missing = [n for n in names if n not in inputs]
        if missing:
            raise RunInputError(f"missing input(s) {', '.join(map(repr, missing))}; "
                                f"the module takes {', '.join(names)}")
        out = {}
        for s in specs:
            a = np.asarray(inputs[s.name])
            if tuple(a.shape) != s.shape:
                raise RunInputError(f"input {s.name!r}: expected shape {list(s.shape)}, got {list(a.shape)}")
            out[s.name] = _as_dtype(a, np.dtype(s.dtype), s.name)
        return out

    def run(self, inputs: Mapping[str, Any] | Sequence[Any], max_ops: int = DEFAULT_MAX_OPS) -> RunResult:
        """Run one inference: ``inputs`` by name (or a list in input order). More than ``max_ops``
        host ops and device calls raise RunLimitError (Loop trip counts are data)."""
        args = self.check_inputs(inputs)
        g = self.graph
        externals = {s: g.functions[s] for s in self.reports}
        trace = _Trace(self.hw, max_ops, {k: (sym, key) for k, (sym, key, _) in self.resident_calls.items()})
        values = _DeviceInterpreter(g, None, externals=externals, trace=trace).run(
            [args[v.name] for v in g.inputs])
        outputs = {}
        for v, a in zip(g.outputs, values):
            outputs.setdefault(v.name, np.asarray(a))
        variants = {(sym, key): rep for sym, key, rep in self.resident_calls.values()}
        fns = tuple(FunctionTiming(s[0], n, variants[s]) if isinstance(s, tuple) else
                    FunctionTiming(s, n, self.reports[s]) for s, n in trace.calls.items())
        if self.resident_moves is not None:
            fns = fns + (FunctionTiming(self.resident_moves.symbol, 1, self.resident_moves),)
        # The host converts every crossing tensor between the graph's format and the device's.
        conv_s = sum(f.calls * f.per_call.convert_s for f in fns)
        conv_j = sum(f.calls * f.per_call.convert_j for f in fns)
        return RunResult(outputs, LatencyBreakdown(trace.host_s + conv_s, trace.host_ops, fns, trace.host_j + conv_j))


def _as_dtype(a: np.ndarray, want: np.dtype, name: str) -> np.ndarray:
    if a.dtype == want:
        return a
    if a.dtype.kind not in "biufc" or (a.dtype.kind == "c" and want.kind != "c"):
        raise RunInputError(f"input {name!r}: expected dtype {want.name}, got {a.dtype.name}")
    with np.errstate(all="ignore"):
        b = a.astype(want)
        back = b.astype(a.dtype)
    changed = int(np.count_nonzero(~((back == a) | (np.isnan(back) & np.isnan(a))))) if a.dtype.kind in "fc" \
        else int(np.count_nonzero(back != a))
    if changed:
        raise RunInputError(f"input {name!r}: expected dtype {want.name}, got {a.dtype.name}, and {changed:,} of "
                            f"{a.size:,} values would change in the cast; convert them yourself "
                            f"(e.g. .astype(np.{want.name}))")
    warnings.warn(f"input {name!r}: cast from {a.dtype.name} to {want.name} (every value is exact)",
                  stacklevel=4)
    return b


def load(path: str | os.PathLike, fidelity: str = "tile") -> LoadedModule:
    """Read and verify a packed module (``partition.read_packed``: any fault is one
    PackedFormatError line), rebuild its hardware config and schedules, and simulate one call of
    every external function. ``fidelity``: the kernel simulator (``tile``, the measurement the
    tuner reports, or ``analytical``)."""
    if fidelity not in FIDELITIES:
        raise RuntimeLoadError(f"fidelity must be one of {', '.join(FIDELITIES)}, got {fidelity!r}")
    packed = read_packed(path)
    hw = hardware_of(packed.manifest)
    schedules: dict[str, dict[str, Schedule]] = {}
    reports: dict[str, SubgraphReport] = {}
    for sym, doc in packed.externals.items():
        fn = packed.function(sym)
        member = packed.manifest["externals"][sym]
        schedules[sym] = schedules_of(doc.get("schedules", {}), member)
        reports[sym] = _simulate(sym, fn, hw, schedules[sym], fidelity, member)
    host = packed.host_graph
    resident_calls = {}
    for node in host.nodes:
        sym = node.attrs.get("callee") if node.op == "call" else None
        if sym in reports:
            res = call_residency(host, node)
            if res[0] or res[1]:
                key = (tuple(sorted(res[0])), tuple(sorted(res[1])))
                rep = _simulate(sym, packed.function(sym), hw, schedules[sym], fidelity,
                                packed.manifest["externals"][sym], res)
                resident_calls[id(node)] = (sym, key, rep)
    return LoadedModule(os.fspath(path), packed, hw, schedules, reports, fidelity, resident_calls,
                        resident_transfers(host, hw))


def hardware_of(manifest: Mapping[str, Any]) -> HardwareConfig:
    """The manifest's hardware as a valid, complete HardwareConfig (``run`` and ``inspect`` refuse
    an archive without one): every section and field present, each within its range. An empty
    or partial object would otherwise become the built-in defaults: a different machine, silently."""
    hw_doc = manifest.get("hardware")
    if not isinstance(hw_doc, Mapping):
        raise RuntimeLoadError("manifest.json: hardware must be an object")
    if "base" in hw_doc:
        # 'base' names a preset or a file to start from; an archive must not make us read local files.
        raise RuntimeLoadError("manifest.json: hardware must be a complete config, without 'base'")
    try:
        return HardwareConfig.from_dict(hw_doc, complete=True)
    except (HardwareError, TypeError, ValueError) as e:
        raise RuntimeLoadError(f"manifest.json: hardware is not a valid hardware config: {e}") from None


_SCHEDULE_TYPES = {"dataflow": str, "spatial": list, "tile_m": int, "tile_n": int, "tile_k": int,
                   "loop_order": str, "double_buffer": bool, "epilogue": list}


def schedules_of(docs: Mapping[str, Any], member: str) -> dict[str, Schedule]:
    """Every schedule complete and of the JSON types ``Schedule.to_dict`` writes: a missing field
    must not become a default, nor a string "relu" an epilogue of four one-letter ops."""
    out = {}
    for kernel, d in docs.items():
        where = f"{member}: schedule of kernel {kernel!r}"
        if not isinstance(d, Mapping):
            raise RuntimeLoadError(f"{where} must be an object")
        missing = [k for k in _SCHEDULE_TYPES if k not in d]
        if missing:
            raise RuntimeLoadError(f"{where} lacks {', '.join(missing)}")
        for k, t in _SCHEDULE_TYPES.items():
            v = d[k]
            if not isinstance(v, t) or (t is int and isinstance(v, bool)) or (
                    t is list and not all(isinstance(x, str) for x in v)):
                raise RuntimeLoadError(f"{where}: {k} must be {'a list of strings' if t is list else t.__name__}, "
                                       f"got {_short(v)}")
        try:
            out[kernel] = Schedule.from_dict(dict(d))
        except (ScheduleError, TypeError) as e:
            raise RuntimeLoadError(f"{where}: {e}") from None
    return out


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _simulate(sym: str, fn: Function, hw: HardwareConfig, schedules: Mapping[str, Schedule],
              fidelity: str, member: str, resident: tuple = (frozenset(), frozenset())) -> SubgraphReport:
    """``simulate_function`` picks schedules by workload key; the archive gives them by kernel
    name, so each is checked against its kernel's workload and re-keyed."""
    by_key: dict[str, tuple[str, Schedule]] = {}
    try:
        for node in fn.graph.nodes:
            s = schedules.get(node.name)
            if s is None:
                continue
            wl = kernel_workload(node, fn.graph.functions)
            try:
                s.check(wl, hw)
            except ScheduleError as e:
                raise RuntimeLoadError(f"{member}: schedule of kernel {node.name!r} cannot run on "
                                       f"{hw.name}: {e}") from None
            prev = by_key.get(wl.key)
            if prev is not None and prev[1] != s:
                raise RuntimeLoadError(f"{member}: kernels {prev[0]!r} and {node.name!r} share one workload "
                                       f"but have different schedules; the simulator keys schedules by workload")
            by_key[wl.key] = (node.name, s)
        return simulate_function(fn, hw, {k: s for k, (_, s) in by_key.items()}, fidelity, sym, resident=resident)
    except (CostError, WorkloadError, ScheduleError) as e:
        raise RuntimeLoadError(f"{member}: the device cannot run @{sym}: {e}") from None


# ------------------------------------------------------------------------------------- execution
class RunLimitError(ValueError):
    """A run that executes more ops than its budget (``max_ops``); one line."""


class _Trace:
    """What one run executed: host seconds and ops, and calls per external symbol. Lives for one
    ``run`` call only. ``max_ops`` bounds host ops plus device calls: a Loop's trip count is data
    in the archive, and 10**12 trips of a two-op body would otherwise run for days."""

    def __init__(self, hw: HardwareConfig, max_ops: int, resident: Mapping[int, tuple] | None = None):
        self.hw = hw
        self.max_ops = max_ops
        self.resident = resident or {}   # call node id -> (symbol, residency key)
        self.host_s = 0.0
        self.host_j = 0.0
        self.host_ops = 0
        self.calls: dict[str, int] = {}
        self.executed = 0

    def _count(self) -> None:
        self.executed += 1
        if self.executed > self.max_ops:
            raise RunLimitError(f"the run executed more than {self.max_ops:,} ops (host ops and device calls), "
                                f"its budget: a Loop of that many trips? (accel-tune run --max-ops N)")

    def host(self, node: Node) -> None:
        self._count()
        self.host_s += host_op_seconds(node, self.hw)
        self.host_j += host_op_joules(node, self.hw)
        self.host_ops += 1

    def call(self, sym: str, node: Node | None = None) -> None:
        self._count()
        key = self.resident.get(id(node), sym) if node is not None else sym
        self.calls[key] = self.calls.get(key, 0) + 1


class _DeviceInterpreter(Interpreter):
    """The reference interpreter, recording each host op it executes and each call of an external
    function (which it runs by the plain reference interpreter: the device's numerics)."""

    def __init__(self, graph: Graph, functions: Mapping[str, Function] | None = None, *,
                 externals: Mapping[str, Function], trace: _Trace):
        super().__init__(graph, functions)
        self.externals = externals
        self.trace = trace

    def run_node(self, node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        if node.op == "call":
            sym = node.attrs.get("callee")
            fn = self.functions.get(sym)
            # Identity, not name: a nested graph may define a local function of the same name.
            if fn is not None and self.externals.get(sym) is fn:
                self.trace.call(sym, node)
                return Interpreter(fn.graph, self.functions).run(args, bounded=True)
            # A host-side function (e.g. a composite left on the host): its ops run on the host,
            # counted one by one as run_subgraph walks them.
            return super().run_node(node, args)
        self.trace.host(node)
        return super().run_node(node, args)

    def run_subgraph(self, graph: Graph, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        return _DeviceInterpreter(graph, self.functions, externals=self.externals,
                                  trace=self.trace).run(args, bounded=True)


# ------------------------------------------------------------------------------------- inputs
def example_inputs(module: LoadedModule | Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic inputs of the right shapes and dtypes: floats standard normal; an integer
    input used as indices into a constant table (token ids into an embedding) uniform over the
    table's rows; an integer or bool input whose name says it is a mask all ones; any other
    integer input uniform in [0, 10); bools random."""
    g = module.graph if isinstance(module, LoadedModule) else module
    rng = np.random.default_rng(seed)
    out = {}
    for v in g.inputs:
        dt = np.dtype(v.dtype)
        shape = tuple(v.shape)
        if dt.kind == "f":
            out[v.name] = rng.standard_normal(shape).astype(dt)
        elif dt.kind in "iu" or dt.kind == "b":
            if "mask" in v.name.lower():
                out[v.name] = np.ones(shape, dt)
            elif dt.kind == "b":
                out[v.name] = rng.random(shape) < 0.5
            else:
                hi = _index_bound(v, g) or 10
                out[v.name] = rng.integers(0, hi, size=shape).astype(dt)
        else:
            out[v.name] = rng.standard_normal(shape).astype(dt)
    return out


def _index_bound(v: Value, g: Graph, depth: int = 0) -> int | None:
    """The smallest row count of a constant table that ``v`` indexes (following value-preserving
    ops and calls into function bodies), or None."""
    if depth > 8:
        return None
    bounds = []
    for node in dict.fromkeys(v.users):
        if node.op in _INDEX_OPS and len(node.inputs) > 1 and node.inputs[1] is v:
            data = node.inputs[0]
            axis = int(node.attrs.get("axis", 0)) if node.op != "gather_nd" else 0
            if data.is_const and data.shape:
                bounds.append(int(data.shape[axis % len(data.shape)]))
        elif node.op in _VALUE_PRESERVING:
            bounds.append(_index_bound(node.outputs[0], g, depth + 1))
        elif node.op == "call":
            fn = g.functions.get(node.attrs.get("callee"))
            if fn is not None:
                for p, a in zip(fn.graph.inputs, node.inputs):
                    if a is v:
                        bounds.append(_index_bound(p, fn.graph, depth + 1))
    bounds = [b for b in bounds if b]
    return min(bounds) if bounds else None


__all__ = ["load", "hardware_of", "schedules_of", "RunLimitError", "DEFAULT_MAX_OPS", "LoadedModule", "RunResult", "LatencyBreakdown", "FunctionTiming", "InputSpec",
           "RuntimeLoadError", "RunInputError", "example_inputs", "FIDELITIES"]
