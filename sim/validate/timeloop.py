"""The Timeloop reference oracle (``shared/oracle/timeloop/*.json``): write a case's inputs back to
files in either form and compare an evaluation with what Timeloop printed.

Forms: ``processed`` = the front end's ``parsed-processed-input.yaml`` (+ the mapper's map file
for mapper runs) + ERT + ART; ``split`` = the user's arch/problem/map/constraints files + ERT +
ART (a mapper run's found mapping as the map file); a case assembled by a Jinja2 top template
(``top.yaml.jinja2`` with the front end's include functions) is its folder tree and the top
template. The reader renders templates and ``{{ }}`` placeholders itself with the values the
case's run script passed (``variables``: ``jinja_parse_data``).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cost.movement import Evaluation

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
        if write_inputs_form_missing(case):
            return None
        top = [f for f in files if f["role"] == "top_template"]
        if top:
            # the whole folder tree as the run had it; the top template includes the rest
            base = Path(top[0]["path"]).parent
            for f in files:
                rel = Path(f["path"]).relative_to(base) if Path(f["path"]).is_relative_to(base) else None
                if rel is None or ".." in rel.parts:
                    continue
                (out / "tree" / rel).parent.mkdir(parents=True, exist_ok=True)
                (out / "tree" / rel).write_text(f["text"])
            paths.append(out / "tree" / Path(top[0]["path"]).name)
            put("timeloop-mapper.map.yaml", inp["evaluated_mapping_yaml"])
        else:
            roles = [f for f in files if f["role"] in SPLIT_ROLES]
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


def validate_case(case: dict[str, Any], form: str) -> dict[str, Any] | None:
    """One case in one form: every row, the mismatches, and the energy error; None when the case
    has no such form. Inputs we refuse are a result too (``error``), never an exception."""
    import tempfile

    from ..timeloop import TimeloopError, evaluate
    with tempfile.TemporaryDirectory() as td:
        paths = write_inputs(case, form, td)
        if paths is None:
            return None
        try:
            ev = evaluate(paths, variables(case, form))
        except TimeloopError as e:
            return {"case": case["case_id"], "form": form, "error": str(e), "ok": False}
    rows = compare(ev, case)
    bad = [r for r in rows if not r.ok]
    e_ref = case["reference"]["summary"]["derived"]["total_energy_pJ_from_fJ_per_compute"]
    counts = [r for r in rows if r.what in ("reads", "fills", "updates")]
    return {"case": case["case_id"], "form": form, "ok": not bad,
            "counts_equal": sum(r.ok for r in counts), "counts": len(counts),
            "cycles": ev.cycles, "cycles_timeloop": case["reference"]["summary"]["cycles"],
            "energy_pj": ev.energy_pj, "energy_pj_timeloop": e_ref,
            "energy_rel_err": abs(ev.energy_pj - e_ref) / e_ref if e_ref else 0.0,
            "rows": [r.__dict__ | {"ok": r.ok} for r in rows],
            "mismatches": [r.__dict__ for r in bad]}


def validate_dir(folder: str | Path) -> dict[str, Any]:
    """Every ``*.json`` case of the oracle folder in both forms, and a summary."""
    files = sorted(Path(folder).glob("*.json"))
    if not files:
        raise ValueError(f"no Timeloop oracle cases (*.json) in {folder}")
    results = []
    for f in files:
        case = load_case(f)
        for form in ("processed", "split"):
            r = validate_case(case, form)
            if r is not None:
                results.append(r)
    return {"results": results,
            "summary": {"cases": len(files), "runs": len(results), "runs_exact": sum(r["ok"] for r in results),
                        "max_energy_rel_err": max((r.get("energy_rel_err", 1.0) for r in results), default=0.0),
                        "without_split_form": [load_case(f)["case_id"] for f in files
                                               if write_inputs_form_missing(load_case(f))]}}


def variables(case: dict[str, Any], form: str) -> dict[str, Any] | None:
    """The template values the case's run script passed (``source.jinja_parse_data``), for a
    split form with templated files (the processed input is already rendered; the reader refuses
    values no template uses)."""
    if form != "split" or not _templated(case):
        return None
    return case["source"].get("jinja_parse_data") or None


def _templated(case: dict[str, Any]) -> bool:
    return any("{{" in f["text"] or "{%" in f["text"] or "{#" in f["text"] for f in case["inputs"]["files"]
               if f["role"] in SPLIT_ROLES + ("top_template",))


def write_inputs_form_missing(case: dict[str, Any]) -> bool:
    """True when the case has no split form here: no architecture file nor top template, or
    placeholders without the values to fill them, or no jinja2 to render them."""
    files = case["inputs"]["files"]
    if _templated(case):
        try:
            import jinja2  # noqa: F401
        except ImportError:
            return True
        if not case["source"].get("jinja_parse_data"):
            return True
    return not any(f["role"] in ("arch", "top_template") for f in files)
