"""The one way in: from (workload, HardwareConfig, schedule or mapping) to a kernel's cost, one
public function per fidelity.

- ``analytical_cost(workload, hw, schedules)``: the closed form, for one schedule or a batch (columns);
- ``tile_cost(workload, hw, schedule)``: the tile-level walk of one schedule (the same terms).

Callers keep the forms they use: ``simulate`` (a ``KernelReport`` at either fidelity, assembled
once, in ``_report``, from the terms either function gives), ``simulate_batch`` (``analytical_cost``'s
columns for the search, with validity), ``tile_cycles`` (``tile_cost``'s total) and ``roofline_for``.

Every config is a storage hierarchy (``sim.hw.config_hierarchy.hierarchy_of``: its levels, or
DRAM -> buffer -> array for a config without levels). What the one-level model and the
data-movement model agree on for a one-level config (``experiments/one_level_agreement.py``:
MACs, the compute bound, MAC energy, the array's steady cycles, weight and output DRAM words) is
either taken from the hierarchy for every config (the roofline's compute bound: MACs over the
hierarchy's arithmetic instances, plus the vector unit's work) or left where it is computed per
schedule in vectorised columns. The rest is ONE named branch, ``systolic(workload, hw)``: every
kernel of a config without levels and every vector kernel (no loop nest) on any config is costed
by the one-level systolic model (``analytical`` closed form, ``tile`` walk), because there the
two models differ: SCALE-Sim's fill and drain per fold (and fold overlap), ragged tiles and
folds, K tiles that are not whole channels, the input as the real patch (the nest counts the
bounding box, holes of a stride included), the DMA engine's prologue, stalls and epilogue on one
DRAM port shared by reads and writes (the hierarchy has a read and a write bandwidth and no
latency), SRAM, register and area-based leakage energy, and the vector unit's own kernels.
MAC kernels on a config with levels are costed on its hierarchy (``multilevel``).
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .analytical import ScheduleArrays, buffer_fits, evaluate, leakage_pj, sram_words, vector_cycles, vector_work_cycles
from .analytical import traffic_cycles as systolic_traffic
from ..mapping.footprint import Geometry, cdiv
from ..hw.config import DATAFLOWS, HardwareConfig
from ..hw.config_hierarchy import hierarchy_of
from .report import KernelReport
from ..mapping.schedule import Schedule, ScheduleError
from .multilevel import hierarchy_terms
from .multilevel import traffic_cycles as hierarchy_traffic
from .tile import simulate_tiles
from ..workload.workload import Workload
from ..mapping.defaults import default_schedule

FIDELITIES = ("analytical", "tile")


@lru_cache(maxsize=256)  # pure in two frozen values
def _sustained_dram(hw: HardwareConfig, fraction: float) -> HardwareConfig:
    return hw.with_overrides({"dram.bytes_per_cycle": hw.dram.bytes_per_cycle * fraction})


def vector_hw(wl: Workload, hw: HardwareConfig) -> HardwareConfig:
    """The machine a vector kernel is costed on: ``hw`` with its DRAM at the fraction of peak that
    ``hw.kernels`` says such a kernel sustains (``KernelsConfig.dram_fraction_of``), in words of
    the kernel's element size (the model counts words of ``array.word_bytes``); ``hw`` itself
    for MAC kernels and for machines without a ``kernels`` section."""
    if wl.is_mac or not hw.kernels.active:
        return hw
    # in words of array.word_bytes: elements of another size move word_bytes/dtype_bytes as many
    f = hw.kernels.dram_fraction_of(wl.kind) * hw.array.word_bytes / wl.dtype_bytes
    return hw if f == 1.0 else _sustained_dram(hw, f)


def _check_epilogue(wl: Workload, hw: HardwareConfig, s: Schedule) -> None:
    for op in s.epilogue:
        if op not in wl.epilogue:
            raise ScheduleError(f"schedule fuses '{op}', which is not in the workload's epilogue "
                                f"({', '.join(wl.epilogue) or 'none'})")
        if op not in hw.vector.ops:
            raise ScheduleError(f"cannot fuse '{op}': the vector unit of {hw.name} does not run it")


def _vector_work(wl: Workload, hw: HardwareConfig) -> int:
    return vector_cycles(hw, wl.macs and _out_elems(wl), wl.epilogue) if wl.is_mac else vector_work_cycles(wl, hw)


def systolic(wl: Workload, hw: HardwareConfig) -> bool:
    """The one branch (module docstring): True where the kernel is costed by the one-level
    systolic model, False where on the config's storage hierarchy (a MAC kernel, levels given)."""
    return not (hw.levels and wl.is_mac)


def compute_bound(wl: Workload, hw: HardwareConfig) -> float:
    """The cycles the kernel's work takes with nothing waiting, on any config: its MACs over the
    arithmetic instances of the hierarchy the config is, plus the vector unit's work (a MAC
    kernel's fused epilogue, or a vector kernel's whole work). With a ``kernels`` section, a MAC
    kernel on the hierarchy runs at its operand width's peak rate."""
    arith = hierarchy_of(hw).arithmetic.instances
    if hw.kernels.active and not systolic(wl, hw):
        return float(math.ceil(wl.macs / arith / hw.kernels.rate(wl.dtype_bytes)) + _vector_work(wl, hw))
    return float(cdiv(wl.macs, arith) + _vector_work(wl, hw))


def _traffic_bound(wl: Workload, hw: HardwareConfig, on_chip_bytes: float | None) -> float:
    if systolic(wl, hw):
        return systolic_traffic(wl, hw, on_chip_bytes)
    return hierarchy_traffic(wl, hw, on_chip_bytes or 0.0)


@lru_cache(maxsize=4096)  # pure function of two frozen values
def roofline_for(wl: Workload, hw: HardwareConfig) -> float:
    """The cycles no schedule of the kernel can beat, alone (its operands in DRAM): the compute
    bound, or the compulsory traffic through the outermost level (``systolic``: one port)."""
    return max(compute_bound(wl, hw), _traffic_bound(wl, hw, None))


def fused_roofline_for(wl: Workload, hw: HardwareConfig, on_chip_bytes: float) -> float:
    """``roofline_for`` of the kernel inside an external function that keeps ``on_chip_bytes`` of
    its DRAM traffic on chip: the traffic term drops by what stays on chip."""
    if not on_chip_bytes:
        return roofline_for(wl, hw)
    return max(compute_bound(wl, hw), _traffic_bound(wl, hw, on_chip_bytes))


def _out_elems(wl: Workload) -> int:
    g, m, n, _ = wl.gemm_view()
    return g * m * n


def _sram_and_energy(wl: Workload, hw: HardwareConfig, s: Schedule, t: dict) -> dict:
    """Buffer traffic and energy for a tile-level result (DRAM bytes and cycles from the walk)."""
    wb = hw.array.word_bytes
    e = hw.energy
    dram = t["dram_read_bytes"] + t["dram_write_bytes"]
    if wl.is_mac:
        geo = Geometry.of(wl)
        df = DATAFLOWS.index(s.dataflow)
        sw = {k: float(np.asarray(v).ravel()[0]) * wb for k, v in
              sram_words(geo, hw, df, s.transposed, s.tile_m, s.tile_n, s.tile_k).items()}
        out_elems = geo.g * geo.m * geo.n
        vec_ops = out_elems * len(wl.epilogue)
        vec = vector_cycles(hw, out_elems, wl.epilogue)
        array_cycles = t["compute_cycles"] - vec
    else:
        d = wl.d
        sw = {"ifmap": float(d["in_elems"] * wb), "weight": 0.0, "output": float(d["out_elems"] * wb)}
        vec_ops = d["ops"] + d["special_ops"]
        array_cycles, vec = 0, t["compute_cycles"]
    energy = {"mac": wl.macs * e.mac_pj, "register": wl.macs * 3 * wb * e.reg_pj_per_byte,
              "sram": (sum(sw.values()) + dram) * e.sram_pj_per_byte, "dram": dram * e.dram_pj_per_byte,
              "vector": vec_ops * e.vector_op_pj, "leakage": float(leakage_pj(hw, t["total_cycles"]))}
    return {"sram_ifmap_bytes": sw["ifmap"], "sram_weight_bytes": sw["weight"], "sram_output_bytes": sw["output"],
            "array_cycles": max(0, array_cycles), "vector_cycles": vec, "energy": energy}


def _resolve(workload: Workload, hw: HardwareConfig, schedule: Schedule | None) -> Schedule:
    """The schedule to cost (``default_schedule`` when None), checked: ``ScheduleError``."""
    s = schedule if schedule is not None else default_schedule(workload, hw)
    if s.mapping is not None and systolic(workload, hw):
        raise ScheduleError(f"a schedule's mapping applies to MAC kernels on a machine with storage levels; "
                            f"{workload.key} on {hw.name} has none")
    if systolic(workload, hw):   # on the hierarchy the one-buffer tiles play no part
        s.check(workload, hw)
    _check_epilogue(workload, hw, s)
    return s


def call_overhead_cycles(workload: Workload, hw: HardwareConfig) -> int:
    """The fixed cycles of one call of a vector kernel of its kind on a machine whose ``kernels``
    section states one (``KernelsConfig.classes``: a compiled op's dispatch, measured on its own);
    0 for MAC kernels and other machines. Counted as busy time, as a GEMM's set-up is
    (``compute_cycles``: the floor no on-chip credit goes below)."""
    if workload.is_mac or not hw.kernels.active:
        return 0
    return int(round(hw.kernels.call_overhead_of(workload.kind) * hw.clock_hz))


def _plus_overhead(terms: dict[str, Any], ov: int) -> dict[str, Any]:
    if ov:
        terms["total_cycles"] = terms["total_cycles"] + ov
        terms["compute_cycles"] = terms["compute_cycles"] + ov
    return terms


def analytical_cost(workload: Workload, hw: HardwareConfig,
               schedules: "Sequence[Schedule | None] | ScheduleArrays") -> dict[str, Any]:
    """The closed-form cost terms of each schedule, as columns keyed as
    ``sim.cost.analytical.evaluate`` keys them (``energy``: a column per component). Nothing is
    checked here (``simulate`` checks one schedule, ``simulate_batch`` flags the batch). On the
    hierarchy a schedule's mapping is costed, or the kernel's default one (None, or a schedule
    without a mapping); there the columns also hold ``mapping`` (a list of the report's dicts)."""
    if systolic(workload, hw):
        s = schedules if isinstance(schedules, ScheduleArrays) else ScheduleArrays.of(schedules, workload)
        return _plus_overhead(evaluate(workload, hw, s), call_overhead_cycles(workload, hw))
    given = [None] * len(schedules) if isinstance(schedules, ScheduleArrays) else list(schedules)
    rows = [hierarchy_terms(workload, hw, g if g is not None and g.mapping is not None
                            else default_schedule(workload, hw), "analytical") for g in given]
    out: dict[str, Any] = {k: np.array([r[k] for r in rows]) for k in rows[0] if k not in ("energy", "mapping")}
    out["energy"] = {k: np.array([r["energy"][k] for r in rows]) for k in rows[0]["energy"]}
    out["mapping"] = [r["mapping"] for r in rows]
    return out


def tile_cost(workload: Workload, hw: HardwareConfig, schedule: Schedule, energy: bool = True) -> dict[str, Any]:
    """The tile-level cost terms of one (checked) schedule, keyed as ``analytical_cost``'s columns, one
    value each. ``energy=False`` leaves out the buffer traffic and energy terms of the systolic
    walk (a tuner's measurement keeps only the cycles)."""
    if not systolic(workload, hw):
        return hierarchy_terms(workload, hw, schedule, "tile")
    a = _plus_overhead(simulate_tiles(workload, hw, schedule), call_overhead_cycles(workload, hw))
    if energy:
        a.update(_sram_and_energy(workload, hw, schedule, a))
    return a


def _row(cols: dict[str, Any], i: int) -> dict[str, Any]:
    r = {k: (v[i] if isinstance(v, (np.ndarray, list)) else v) for k, v in cols.items() if k != "energy"}
    r["energy"] = {k: float(v[i]) for k, v in cols["energy"].items()}
    return r


def _report(workload: Workload, hw: HardwareConfig, s: Schedule, fidelity: str, a: dict[str, Any]) -> KernelReport:
    """The report of one kernel from either model's terms (one value each)."""
    total = int(round(a["total_cycles"]))
    return KernelReport(
        workload=workload.key, hardware=hw.name, schedule=s.to_dict(), fidelity=fidelity,
        total_cycles=total, compute_cycles=int(round(a["compute_cycles"])),
        stall_cycles=int(round(a["stall_cycles"])), prologue_cycles=int(round(a["prologue_cycles"])),
        epilogue_cycles=int(round(a["epilogue_cycles"])), array_cycles=int(a["array_cycles"]),
        vector_cycles=int(a["vector_cycles"]), macs=workload.macs,
        dram_read_bytes=int(round(a["dram_read_bytes"])), dram_write_bytes=int(round(a["dram_write_bytes"])),
        bytes_by_operand={level: {op: int(round(a[f"{level}_{op}_bytes"])) for op in ("ifmap", "weight", "output")}
                          for level in ("dram", "sram")},
        energy_pj=a["energy"],
        utilization=(workload.macs / (hw.pes * total)) if total else 0.0,
        roofline_cycles=roofline_for(workload, hw), clock_hz=hw.clock_hz, n_tiles=int(a["n_tiles"]),
        mapping=a.get("mapping"))


def simulate(workload: Workload, hw: HardwareConfig, schedule: Schedule | None = None,
             fidelity: str = "analytical") -> KernelReport:
    """Cost one kernel. ``schedule`` defaults to ``default_schedule``; an illegal schedule raises
    ``ScheduleError``."""
    if fidelity not in FIDELITIES:
        raise ValueError(f"fidelity must be one of {', '.join(FIDELITIES)}, got {fidelity!r}")
    hw = vector_hw(workload, hw)
    s = _resolve(workload, hw, schedule)
    terms = tile_cost(workload, hw, s) if fidelity == "tile" else _row(analytical_cost(workload, hw, [s]), 0)
    return _report(workload, hw, s, fidelity, terms)


def tile_cycles(workload: Workload, hw: HardwareConfig, schedule: Schedule) -> int:
    """``simulate(workload, hw, schedule, fidelity="tile").total_cycles`` without the energy terms
    and the report around it: all a tuner's measurement keeps, at about two thirds of the cost.
    An illegal schedule raises ``ScheduleError`` as ``simulate`` does."""
    hw = vector_hw(workload, hw)
    s = _resolve(workload, hw, schedule)
    return int(round(tile_cost(workload, hw, s, energy=False)["total_cycles"]))


def simulate_batch(workload: Workload, hw: HardwareConfig,
                   schedules: "Iterable[Schedule] | ScheduleArrays | Mapping[str, Any]") -> dict[str, np.ndarray]:
    """Analytical cost of many schedules at once. Takes a list of Schedules, a ``ScheduleArrays``
    or a mapping of its columns. Returns arrays: ``valid`` (fits the buffers, dataflow supported),
    ``total_cycles`` (inf where not valid), ``compute_cycles``, ``stall_cycles``, ``dram_bytes``,
    ``energy_pj``, ``latency_s``, ``roofline_cycles`` (a scalar)."""
    hw = vector_hw(workload, hw)
    if isinstance(schedules, ScheduleArrays):
        s = schedules
    elif isinstance(schedules, Mapping):
        s = ScheduleArrays.from_mapping(schedules)
    else:
        schedules = list(schedules)
        s = ScheduleArrays.of(schedules, workload)
    if not systolic(workload, hw):  # the hierarchy's cost: the schedule's mapping, else the default one
        given = schedules if isinstance(schedules, list) else [None] * len(s.tile_m)
        for g in given:
            if g is not None and g.mapping is not None:
                _check_epilogue(workload, hw, g)
        cols = analytical_cost(workload, hw, given) if given else None
        reps = [_report(workload, hw, g if g is not None and g.mapping is not None else default_schedule(workload, hw),
                        "analytical", _row(cols, i)) for i, g in enumerate(given)]
        return {"valid": np.ones(len(reps), dtype=bool),
                "total_cycles": np.array([float(r.total_cycles) for r in reps]),
                "compute_cycles": np.array([float(r.compute_cycles) for r in reps]),
                "stall_cycles": np.array([float(r.stall_cycles) for r in reps]),
                "dram_bytes": np.array([float(r.dram_bytes) for r in reps]),
                "energy_pj": np.array([sum(r.energy_pj.values()) for r in reps]),
                "latency_s": np.array([r.latency_s for r in reps]),
                "roofline_cycles": reps[0].roofline_cycles if reps else roofline_for(workload, hw)}
    valid = buffer_fits(workload, hw, s)
    r = analytical_cost(workload, hw, s)
    total = np.where(valid, r["total_cycles"], np.inf)
    return {"valid": valid, "total_cycles": total, "compute_cycles": r["compute_cycles"],
            "stall_cycles": r["stall_cycles"], "dram_bytes": r["dram_read_bytes"] + r["dram_write_bytes"],
            "energy_pj": np.where(valid, r["energy_pj"], np.inf), "latency_s": total / hw.clock_hz,
            "roofline_cycles": roofline_for(workload, hw)}
