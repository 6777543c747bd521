"""Reading SCALE-Sim result files (the format of shared/oracle/scalesim.jsonl) into our objects."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..hw.config import HardwareConfig
from ..workload.workload import Workload


class OracleError(ValueError):
    """A SCALE-Sim result file that cannot be read."""


def load_cases(path: str | Path, only_ok: bool = True) -> list[dict[str, Any]]:
    p = Path(path)
    try:
        lines = p.read_text().splitlines()
    except OSError as e:
        raise OracleError(f"cannot read {p}: {e.strerror}") from None
    cases = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            c = json.loads(line)
        except json.JSONDecodeError as e:
            raise OracleError(f"{p}:{i}: not JSON ({e.msg})") from None
        for key in ("id", "layer", "array_rows", "array_cols", "dataflow", "sram_kb", "bandwidth_words_per_cycle"):
            if key not in c:
                raise OracleError(f"{p}:{i}: case lacks '{key}'")
        if only_ok and c.get("status") != "ok":
            continue
        cases.append(c)
    return cases


def workload_of(case: dict[str, Any]) -> Workload:
    L = case["layer"]
    if L["kind"] == "conv":
        return Workload.conv2d(L["N"], L["C"], L["H"], L["W"], L["K"], L["R"], L["S"],
                               stride=L["stride"], pad=L["pad"], dtype_bytes=1)
    if L["kind"] == "gemm":
        return Workload.gemm(L["M"], L["N"], L["K"], dtype_bytes=1)
    raise OracleError(f"case {case['id']}: unknown layer kind {L['kind']!r}")


def hardware_of(case: dict[str, Any]) -> HardwareConfig:
    """SCALE-Sim's machine: its array and dataflow, 1-byte words, a fill and drain per fold,
    its three SRAMs, and its three per-operand DRAM channels summed into our one shared port."""
    kb = case["sram_kb"]
    bw = case["bandwidth_words_per_cycle"] * case.get("word_bytes", 1)
    return HardwareConfig.from_dict({
        "name": f"scalesim[{case['id']}]",
        "array": {"rows": case["array_rows"], "cols": case["array_cols"], "dataflows": [case["dataflow"]],
                  "word_bytes": case.get("word_bytes", 1), "fold_overlap": False},
        "buffers": {"ifmap_bytes": kb["ifmap"] * 1024, "weight_bytes": kb["filter"] * 1024,
                    "output_bytes": kb["ofmap"] * 1024, "unified_bytes": 0},
        "dram": {"bytes_per_cycle": 3.0 * bw, "latency_cycles": 1},
    }, base=HardwareConfig.from_dict({"name": "scalesim"}))
