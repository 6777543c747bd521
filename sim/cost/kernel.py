"""The kernel-simulation entry points: ``simulate`` (one schedule, either fidelity) and
``simulate_batch`` (the analytical model over many schedules at once)."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable, Mapping

import numpy as np

from .analytical import (ScheduleArrays, buffer_fits, evaluate, fused_roofline_cycles, leakage_pj, roofline_cycles,
                         sram_words, vector_cycles, vector_work_cycles)
from ..mapping.footprint import Geometry
from ..hw.config import DATAFLOWS
from ..hw.config import HardwareConfig
from .report import KernelReport
from ..mapping.schedule import Schedule, ScheduleError
from .multilevel import roofline_cycles as multilevel_roofline
from .multilevel import simulate_multilevel
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


@lru_cache(maxsize=4096)  # pure function of two frozen values
def roofline_for(wl: Workload, hw: HardwareConfig) -> float:
    """The cycles no schedule of the kernel can beat, alone (its operands in DRAM)."""
    if hw.levels and wl.is_mac:
        return multilevel_roofline(wl, hw)
    return roofline_cycles(wl, hw, _vector_work(wl, hw))


def fused_roofline_for(wl: Workload, hw: HardwareConfig, on_chip_bytes: float) -> float:
    """``roofline_for`` of the kernel inside an external function that keeps ``on_chip_bytes`` of
    its DRAM traffic on chip (``analytical.fused_roofline_cycles``)."""
    if not on_chip_bytes:
        return roofline_for(wl, hw)
    if hw.levels and wl.is_mac:
        return multilevel_roofline(wl, hw, on_chip_bytes)
    return fused_roofline_cycles(wl, hw, _vector_work(wl, hw), on_chip_bytes)


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


def simulate(workload: Workload, hw: HardwareConfig, schedule: Schedule | None = None,
             fidelity: str = "analytical") -> KernelReport:
    """Cost one kernel. ``schedule`` defaults to ``default_schedule``; an illegal schedule raises
    ``ScheduleError``."""
    if fidelity not in FIDELITIES:
        raise ValueError(f"fidelity must be one of {', '.join(FIDELITIES)}, got {fidelity!r}")
    hw = vector_hw(workload, hw)
    s = schedule if schedule is not None else default_schedule(workload, hw)
    if s.mapping is not None and not (hw.levels and workload.is_mac):
        raise ScheduleError(f"a schedule's mapping applies to MAC kernels on a machine with storage levels; "
                            f"{workload.key} on {hw.name} has none")
    if hw.levels and workload.is_mac:  # costed on the storage hierarchy: the buffers play no part
        _check_epilogue(workload, hw, s)
        return simulate_multilevel(workload, hw, s, fidelity)
    s.check(workload, hw)
    _check_epilogue(workload, hw, s)
    if fidelity == "tile":
        a = simulate_tiles(workload, hw, s)
        a.update(_sram_and_energy(workload, hw, s, a))
        energy = a.pop("energy")
    else:
        r = evaluate(workload, hw, ScheduleArrays.of([s], workload))
        a = {k: (v[0] if isinstance(v, np.ndarray) else v) for k, v in r.items() if k != "energy"}
        energy = {k: float(v[0]) for k, v in r["energy"].items()}
    total = int(round(a["total_cycles"]))
    pes = hw.pes
    return KernelReport(
        workload=workload.key, hardware=hw.name, schedule=s.to_dict(), fidelity=fidelity,
        total_cycles=total, compute_cycles=int(round(a["compute_cycles"])),
        stall_cycles=int(round(a["stall_cycles"])), prologue_cycles=int(round(a["prologue_cycles"])),
        epilogue_cycles=int(round(a["epilogue_cycles"])), array_cycles=int(a["array_cycles"]),
        vector_cycles=int(a["vector_cycles"]), macs=workload.macs,
        dram_read_bytes=int(round(a["dram_read_bytes"])), dram_write_bytes=int(round(a["dram_write_bytes"])),
        bytes_by_operand={
            "dram": {"ifmap": int(round(a["dram_ifmap_bytes"])), "weight": int(round(a["dram_weight_bytes"])),
                     "output": int(round(a["dram_output_bytes"]))},
            "sram": {"ifmap": int(a["sram_ifmap_bytes"]), "weight": int(a["sram_weight_bytes"]),
                     "output": int(a["sram_output_bytes"])}},
        energy_pj=energy,
        utilization=(workload.macs / (pes * total)) if total else 0.0,
        roofline_cycles=roofline_for(workload, hw), clock_hz=hw.clock_hz, n_tiles=int(a["n_tiles"]))


def tile_cycles(workload: Workload, hw: HardwareConfig, schedule: Schedule) -> int:
    """``simulate(workload, hw, schedule, fidelity="tile").total_cycles`` without the energy terms
    and the report around it: all a tuner's measurement keeps, at about two thirds of the cost.
    An illegal schedule raises ``ScheduleError`` as ``simulate`` does."""
    if hw.levels and workload.is_mac:
        return simulate(workload, hw, schedule, fidelity="tile").total_cycles
    hw = vector_hw(workload, hw)
    schedule.check(workload, hw)
    _check_epilogue(workload, hw, schedule)
    return int(round(simulate_tiles(workload, hw, schedule)["total_cycles"]))


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
    if hw.levels and workload.is_mac:  # the hierarchy's cost: the schedule's mapping, else the default one
        given = schedules if isinstance(schedules, list) else [None] * len(s.tile_m)
        reps = [simulate(workload, hw, g if g is not None and g.mapping is not None else None) for g in given]
        return {"valid": np.ones(len(reps), dtype=bool),
                "total_cycles": np.array([float(r.total_cycles) for r in reps]),
                "compute_cycles": np.array([float(r.compute_cycles) for r in reps]),
                "stall_cycles": np.array([float(r.stall_cycles) for r in reps]),
                "dram_bytes": np.array([float(r.dram_bytes) for r in reps]),
                "energy_pj": np.array([sum(r.energy_pj.values()) for r in reps]),
                "latency_s": np.array([r.latency_s for r in reps]),
                "roofline_cycles": reps[0].roofline_cycles if reps else roofline_for(workload, hw)}
    valid = buffer_fits(workload, hw, s)
    r = evaluate(workload, hw, s)
    total = np.where(valid, r["total_cycles"], np.inf)
    return {"valid": valid, "total_cycles": total, "compute_cycles": r["compute_cycles"],
            "stall_cycles": r["stall_cycles"], "dram_bytes": r["dram_read_bytes"] + r["dram_write_bytes"],
            "energy_pj": np.where(valid, r["energy_pj"], np.inf), "latency_s": total / hw.clock_hz,
            "roofline_cycles": roofline_for(workload, hw)}
