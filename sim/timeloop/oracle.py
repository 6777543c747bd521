"""The Timeloop reference oracle (``shared/oracle/timeloop/*.json``): write a case's inputs back to
files in either form and compare an evaluation with what Timeloop printed.

Forms: ``processed`` = the front end's ``parsed-processed-input.yaml`` (+ the mapper's map file
for mapper runs) + ERT + ART; ``split`` = the user's arch/problem/map/constraints files + ERT +
ART (a mapper run's found mapping as the map file). Cases assembled by a Jinja2 top template have
no split form here (``None``): their split files are only meaningful after rendering.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..movement import Evaluation

ENERGY_RTOL = 1e-3      # the bar: total energy within 0.1 %
SPLIT_ROLES = ("arch", "problem", "mapping", "constraints")


def load_case(path: str | Path) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)


def write_inputs(case: dict[str, Any], form: str, out_dir: str | Path) -> list[Path] | None:
    """The case's input files in ``form`` written under ``out_dir`` (None: no such form)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    inp = case["inputs"]
    mapper_run = case["tool"] == "timeloop-mapper"
    paths: list[Path] = []

    def put(name: str, text: str) -> None:
        p = out / name
        p.write_text(text)
        paths.append(p)

    if form == "processed":
        put("parsed-processed-input.yaml", inp["parsed_processed_input_yaml"])
        if mapper_run:
            put("timeloop-mapper.map.yaml", inp["evaluated_mapping_yaml"])
    elif form == "split":
        files = inp["files"]
        if any(f["role"] == "top_template" for f in files):
            return None
        roles = [f for f in files if f["role"] in SPLIT_ROLES]
        if not any(f["role"] == "arch" for f in roles):
            return None
        for i, f in enumerate(roles):
            put(f"{i:02d}_{f['role']}_{Path(f['path']).name}", f["text"])
        if mapper_run or not any(f["role"] == "mapping" for f in roles):
            put("timeloop-mapper.map.yaml", inp["evaluated_mapping_yaml"])
    else:
        raise ValueError(f"form must be 'processed' or 'split', got {form!r}")
    put("timeloop.ERT.yaml", inp["ert_yaml"])
    put("timeloop.ART.yaml", inp["art_yaml"])
    return paths


@dataclass(frozen=True)
class Row:
    level: str
    tensor: str
    what: str           # reads / fills / updates / utilized_instances / cycles / energy_pj
    ours: float
    timeloop: float

    @property
    def ok(self) -> bool:
        if self.what == "energy_pj":
            return math.isclose(self.ours, self.timeloop, rel_tol=ENERGY_RTOL)
        return self.ours == self.timeloop


def compare(ev: Evaluation, case: dict[str, Any]) -> list[Row]:
    """Every per-level per-tensor count (totals over utilized instances), cycles and total
    energy, ours against Timeloop's; a tensor Timeloop printed and we did not keep counts as a
    row with ours = -1."""
    ref = case["reference"]
    rows: list[Row] = []
    by_name = {lv["name"]: lv for lv in ref["levels"] if lv.get("kind") == "storage" and not lv.get("dummy")}
    mine = {lv.name: lv for lv in ev.levels if not lv.spatial_only}
    for name, rl in by_name.items():
        lv = mine.get(name)
        for tensor, rd in (rl.get("data_spaces") or {}).items():
            der = rd["derived"]
            got = dict(lv.tensors).get(tensor) if lv else None
            u = lv.utilized_instances if lv else 0
            for what, key in (("reads", "scalar_reads_total"), ("fills", "scalar_fills_total"),
                              ("updates", "scalar_updates_total")):
                ours = getattr(got, what) * u if got else -1
                rows.append(Row(name, tensor, what, ours, der[key]))
            rows.append(Row(name, tensor, "utilized_instances", u if got else -1, rd["utilized_instances_max"]))
    rows.append(Row("-", "-", "cycles", ev.cycles, ref["summary"]["cycles"]))
    rows.append(Row("-", "-", "computes", ev.computes, ref["summary"]["computes"]))
    rows.append(Row("-", "-", "energy_pj", ev.energy_pj, ref["summary"]["derived"]["total_energy_pJ_from_fJ_per_compute"]))
    return rows
