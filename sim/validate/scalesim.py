"""Our simulator against SCALE-Sim result files: per case, ours vs theirs on the same terms."""
from __future__ import annotations

from typing import Any

from ..cost.kernel import simulate
from .scalesim_files import hardware_of, load_cases, workload_of
from ..mapping.schedule import Schedule
from ..mapping.defaults import scalesim_schedule

KEYS = ("compute_cycles", "total_cycles", "stall_cycles", "dram_read_bytes", "dram_write_bytes")


def compare_case(case: dict[str, Any], fidelity: str = "tile") -> dict[str, Any]:
    """``total_cycles`` on both sides is SCALE-Sim's definition: compute + stall, with the first
    buffer fill before cycle 0 and the last drain after the end (ours: ``steady_cycles``)."""
    wl, hw = workload_of(case), hardware_of(case)
    r = simulate(wl, hw, scalesim_schedule(wl, hw, case["dataflow"]), fidelity=fidelity)
    wb = case.get("word_bytes", 1)
    ours = {"compute_cycles": r.compute_cycles, "total_cycles": r.steady_cycles, "stall_cycles": r.stall_cycles,
            "dram_read_bytes": r.dram_read_bytes, "dram_write_bytes": r.dram_write_bytes}
    theirs = {"compute_cycles": case["compute_cycles"], "total_cycles": case["total_cycles"],
              "stall_cycles": case["stall_cycles"],
              "dram_read_bytes": sum(case["dram_reads"].values()) * wb,
              "dram_write_bytes": sum(case["dram_writes"].values()) * wb}
    return {"id": case["id"], "ours": ours, "scalesim": theirs,
            "ours_total_incl_prefetch": r.total_cycles,
            "scalesim_total_incl_prefetch": case.get("total_cycles_incl_prefetch"),
            "sram_regime": case.get("sram_regime"), "scalesim_wall_s": case.get("wall_s")}


def rel_err(a: float, b: float) -> float:
    return abs(a - b) / b if b else float(a != b)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    comp = [rel_err(r["ours"]["compute_cycles"], r["scalesim"]["compute_cycles"]) for r in rows]
    nostall = [r for r in rows if r["scalesim"]["stall_cycles"] == 0]
    stall = [r for r in rows if r["scalesim"]["stall_cycles"] > 0]
    tot_ns = [rel_err(r["ours"]["total_cycles"], r["scalesim"]["total_cycles"]) for r in nostall]
    return {
        "cases": len(rows),
        "compute_max_rel_err": max(comp, default=0.0),
        "compute_within_0.5pct": sum(e <= 0.005 for e in comp),
        "no_stall_cases": len(nostall),
        "no_stall_total_max_rel_err": max(tot_ns, default=0.0),
        "no_stall_total_within_2pct": sum(e <= 0.02 for e in tot_ns),
        "stall_cases": len(stall),
        "stall_total_ratio_ours_over_scalesim": [round(r["ours"]["total_cycles"] / r["scalesim"]["total_cycles"], 4) for r in stall],
        "stall_dram_read_ratio_ours_over_scalesim": [
            round(r["ours"]["dram_read_bytes"] / max(1, r["scalesim"]["dram_read_bytes"]), 4) for r in stall],
    }


def validate_file(path: str, fidelity: str = "tile") -> dict[str, Any]:
    rows = [compare_case(c, fidelity) for c in load_cases(path)]
    return {"cases": rows, "summary": summarize(rows)}
