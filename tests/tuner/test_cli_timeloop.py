"""accel-tune simulate --timeloop: the --json contract of issue 12 and the readable table."""
import json
from pathlib import Path

import pytest

from sim.validate.timeloop import load_case, write_inputs
from tuner.cli import main

CASE = Path(__file__).resolve().parents[2] / ".." / "shared" / "oracle" / "timeloop" / "tl04_conv1doc_3levelspatial_kp.json"


@pytest.fixture
def tl04(tmp_path):
    if not CASE.exists():
        pytest.skip("shared Timeloop oracle not present")
    case = load_case(CASE)
    return case, [str(p) for p in write_inputs(case, "split", tmp_path)]


def test_json_contract_equals_timeloop(tl04, capsys):
    case, fs = tl04
    assert main(["simulate", "--timeloop", *fs, "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert set(js) == {"cycles", "computes", "energy_pj", "levels"}
    assert isinstance(js["cycles"], int) and isinstance(js["energy_pj"], float)
    for lv in js["levels"]:
        assert set(lv) == {"name", "instances", "utilized_instances", "energy_pj", "tensors"}
        for c in lv["tensors"].values():
            assert set(c) == {"reads", "fills", "updates"} and all(isinstance(v, int) for v in c.values())
    # innermost first, the dummy spatial level left out, totals over the utilized instances
    assert [lv["name"] for lv in js["levels"]] == ["RegisterFile", "GlobalBuffer", "MainMemory"]
    ref = {lv["name"]: lv for lv in case["reference"]["levels"]}
    rf = ref["RegisterFile"]["data_spaces"]["Inputs"]["derived"]
    assert js["levels"][0]["tensors"]["Inputs"]["fills"] == rf["scalar_fills_total"] == 1152 * 16
    assert js["cycles"] == case["reference"]["summary"]["cycles"]


def test_table(tl04, capsys):
    _, fs = tl04
    assert main(["simulate", "--timeloop", *fs]) == 0
    out = capsys.readouterr().out
    assert "Timeloop model: 49,152 computes, 3,072 cycles" in out and "RegisterFile" in out


def test_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "x.yaml"
    bad.write_text("wibble: 1\n")
    for argv in (["simulate", "--timeloop", str(bad)],
                 ["simulate", "--timeloop", str(tmp_path / "missing.yaml")],
                 ["simulate", "--timeloop", str(bad), "--model", "resnet18"],
                 ["simulate", "--hw", "eyeriss-like"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("accel-tune: error:") and err.count("\n") == 1, err


SIMBA = CASE.parent / "ex_simba_like.json"


def test_top_template_with_timeloop_var_equals_timeloop(tmp_path, capsys):
    pytest.importorskip("jinja2")
    if not SIMBA.exists():
        pytest.skip("shared Timeloop oracle not present")
    case = load_case(SIMBA)
    fs = [str(p) for p in write_inputs(case, "split", tmp_path)]
    assert fs[0].endswith("top.yaml.jinja2")
    assert main(["simulate", "--timeloop", *fs, "--timeloop-var", "architecture=simba_like", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["cycles"] == case["reference"]["summary"]["cycles"]
    ref = case["reference"]["summary"]["derived"]["total_energy_pJ_from_fJ_per_compute"]
    assert abs(js["energy_pj"] - ref) <= 1e-3 * ref
    # without the variable, or naming an architecture folder that is not there: one line each
    for extra, words in (([], "'architecture' is undefined"),
                         (["--timeloop-var", "architecture=nope"], "could not find"),
                         (["--timeloop-var", "architecture"], "must be KEY=VALUE"),
                         (["--timeloop-var", "a=1", "--timeloop-var", "a=2"], "given twice"),
                         (["--timeloop-var", "architecture=../../x"], "outside the template's folder")):
        assert main(["simulate", "--timeloop", *fs, *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("accel-tune: error:") and err.count("\n") == 1 and words in err, err


def test_timeloop_var_needs_timeloop(capsys):
    assert main(["simulate", "--model", "resnet18", "--hw", "eyeriss-like", "--timeloop-var", "a=1"]) == 2
    assert "--timeloop-var goes with --timeloop" in capsys.readouterr().err


def test_tile_fidelity_is_the_walk_in_the_same_contract(tmp_path, capsys):
    """--fidelity tile: the same object, the same counts; on Timeloop's eyeriss (bandwidth-limited
    GLB and spads, spads too small for two tiles) more cycles than the closed form, the energy
    more by exactly the leakage of the extra cycles; on tl04 (no bandwidth limit) the same."""
    from sim.validate.timeloop import load_case, write_inputs
    for case_id, slower in (("tl06_mapper_vgg02l5_eyeriss", True), ("tl04_conv1doc_3levelspatial_kp", False)):
        path = CASE.parent / f"{case_id}.json"
        if not path.exists():
            pytest.skip("shared Timeloop oracle not present")
        fs = [str(p) for p in write_inputs(load_case(path), "processed", tmp_path / case_id)]
        out = {}
        for fid in ("analytical", "tile"):
            assert main(["simulate", "--timeloop", *fs, "--fidelity", fid, "--json"]) == 0
            out[fid] = json.loads(capsys.readouterr().out)
        a, t = out["analytical"], out["tile"]
        assert set(t) == set(a) and t["computes"] == a["computes"]
        assert [(lv["name"], lv["tensors"]) for lv in t["levels"]] == [(lv["name"], lv["tensors"]) for lv in a["levels"]]
        assert (t["cycles"] > a["cycles"]) if slower else (t["cycles"] == a["cycles"])
        from sim.timeloop import load
        hier, _, mapping = load(fs)
        leak = sum(lv.leak_pj_per_cycle * mapping.utilized_instances(i) for i, lv in enumerate(hier.levels)
                   if not lv.spatial_only)
        assert t["energy_pj"] - a["energy_pj"] == pytest.approx(leak * (t["cycles"] - a["cycles"]), rel=1e-6, abs=1e-6)
        assert main(["simulate", "--timeloop", *fs, "--fidelity", "tile"]) == 0
        text = capsys.readouterr().out
        assert "tile-level walk:" in text and f"the closed form: {a['cycles']:,} cycles" in text
