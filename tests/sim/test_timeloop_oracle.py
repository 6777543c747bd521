"""Timeloop's own statistics (shared/oracle/timeloop, measured output of Timeloop 2024-05) against
the multi-level model through the Timeloop adapter, both input forms; skips without ../shared."""
import subprocess
import sys
from pathlib import Path

import pytest

from sim.validate.timeloop import load_case, validate_case, write_inputs_form_missing

REPO = Path(__file__).resolve().parents[2]
ORACLE = REPO / ".." / "shared" / "oracle" / "timeloop"
CASES = sorted(ORACLE.glob("*.json")) if ORACLE.is_dir() else []
pytestmark = pytest.mark.skipif(not CASES, reason="shared Timeloop oracle not present")


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
@pytest.mark.parametrize("form", ["processed", "split"])
def test_every_count_cycles_and_energy_equal_timeloop(path, form):
    case = load_case(path)
    r = validate_case(case, form)
    if r is None:   # only a case without split files at all (none in the shared oracle today)
        assert form == "split" and write_inputs_form_missing(case)
        pytest.skip("the case has no split files")
    assert "error" not in r, r.get("error")
    assert r["mismatches"] == [], r["mismatches"][:5]
    assert r["counts_equal"] == r["counts"] > 0
    assert r["cycles"] == r["cycles_timeloop"]
    assert r["energy_rel_err"] <= 1e-3


def test_validation_script_table_and_json():
    out = subprocess.run([sys.executable, str(REPO / "experiments" / "validate_timeloop.py"), str(ORACLE)],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "runs exact over" in out.stdout and "tl06_mapper_vgg02l5_eyeriss" in out.stdout
    js = subprocess.run([sys.executable, str(REPO / "experiments" / "validate_timeloop.py"), str(ORACLE), "--json"],
                        capture_output=True, text=True, cwd=REPO)
    import json
    s = json.loads(js.stdout)["summary"]
    assert s["runs_exact"] == s["runs"] >= len(CASES)
    # every case with split files (Jinja2 top templates included) is run in both forms
    assert s["runs"] == 2 * len(CASES) - len(s["without_split_form"])


def test_top_template_cases_are_run_from_the_template(tmp_path):
    pytest.importorskip("jinja2")
    from sim.validate.timeloop import write_inputs
    tops = [p for p in CASES if any(f["role"] == "top_template" for f in load_case(p)["inputs"]["files"])]
    if not tops:
        pytest.skip("no top-template case in the oracle")
    for p in tops:
        case = load_case(p)
        paths = write_inputs(case, "split", tmp_path / case["case_id"])
        assert paths[0].name.endswith(".jinja2") and not write_inputs_form_missing(case)


def _exercise_tree(case, root):
    """The exercises' layout for one top-template case: the template tree, and the run's
    ref_outputs folder with the processed input, map, ERT/ART and a stats.txt holding Timeloop's
    printed numbers (from the oracle's reference)."""
    inp = case["inputs"]
    for f in inp["files"]:
        (root / f["path"]).parent.mkdir(parents=True, exist_ok=True)
        (root / f["path"]).write_text(f["text"])
    out = root / case["source"]["reference_dir"]
    out.mkdir(parents=True)
    for name, key in (("parsed-processed-input.yaml", "parsed_processed_input_yaml"),
                      ("timeloop-mapper.map.yaml", "evaluated_mapping_yaml"),
                      ("timeloop-mapper.ERT.yaml", "ert_yaml"), ("timeloop-mapper.ART.yaml", "art_yaml")):
        (out / name).write_text(inp[key])
    ref = case["reference"]
    lines = []
    for lv in ref["levels"]:
        if lv.get("kind") != "storage" or lv.get("dummy") or not lv.get("printed_in_stats_txt", True):
            continue
        lines.append(f"=== {lv['name']} ===")
        for space, d in (lv.get("data_spaces") or {}).items():
            lines.append(f"    {space}:")
            lines.append(f"        Utilized instances (max)     : {d['utilized_instances_max']}")
            for what in ("reads", "fills", "updates"):
                lines.append(f"        Scalar {what} (per-instance)  : {d[f'scalar_{what}_per_instance']}")
    s = ref["summary"]
    lines += ["Summary Stats", f"Cycles: {s['cycles']}", f"Computes = {s['computes']}",
              f"    Total                   = {s['fJ_per_compute']['Total']}"]
    (out / "timeloop-mapper.stats.txt").write_text("\n".join(lines) + "\n")


def test_exercises_script_runs_example_designs_from_their_template(tmp_path):
    pytest.importorskip("jinja2")
    tops = [load_case(p) for p in CASES if any(f["role"] == "top_template" for f in load_case(p)["inputs"]["files"])]
    if not tops:
        pytest.skip("no top-template case in the oracle")
    for case in tops:
        _exercise_tree(case, tmp_path / "ex")
    script = str(REPO / "experiments" / "timeloop_exercises.py")
    import json
    for extra in ([], ["--template"]):
        out = subprocess.run([sys.executable, script, str(tmp_path / "ex"), "--json", *extra],
                             capture_output=True, text=True, cwd=REPO)
        assert out.returncode == 0, out.stderr
        s = json.loads(out.stdout)["summary"]
        assert s["exact"] == s["dense_cases"] == len(tops), json.loads(out.stdout)["results"]
    # the template run really reads the template's tree: without the architecture it names, the
    # case fails (the processed input would still pass)
    arch = next(f for f in tops[0]["inputs"]["files"] if f["role"] == "arch")
    (tmp_path / "ex" / arch["path"]).unlink()
    out = subprocess.run([sys.executable, script, str(tmp_path / "ex"), "--json", "--template"],
                         capture_output=True, text=True, cwd=REPO)
    assert json.loads(out.stdout)["summary"]["exact"] == len(tops) - 1
