"""accel-tune tune --timeloop: the --json contract of issue 13, the written mapping re-evaluated by
simulate --timeloop gives the same cycles and energy, the metric defaults to the mapper section,
constraints hold in the result, and bad input is one line."""
import json
from pathlib import Path

import pytest
import yaml

from tuner.cli import main

ORACLE = Path(__file__).resolve().parents[3] / "shared" / "oracle" / "timeloop"
if not ORACLE.is_dir():
    ORACLE = Path("/work/shared/oracle/timeloop")
pytestmark = pytest.mark.skipif(not ORACLE.is_dir(), reason="../shared/oracle/timeloop is not there")


def case_files(tmp_path, case_id, with_map=False):
    from sim.validate.timeloop import load_case, write_inputs
    files = write_inputs(load_case(ORACLE / f"{case_id}.json"), "processed", tmp_path / case_id)
    return [str(f) for f in files if with_map or not f.name.endswith(".map.yaml")]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract_and_round_trip(tmp_path, capsys):
    files = case_files(tmp_path, "tl05_mapper_conv1doc_3level_null")
    mfile = tmp_path / "best.map.yaml"
    code, out, err = run(capsys, "tune", "--timeloop", *files, "--budget", "1500", "-o", str(mfile), "--json")
    assert code == 0, err
    js = json.loads(out)
    for k, t in (("cycles", int), ("energy_pj", float), ("edp", float), ("mapping_yaml", str),
                 ("evaluations", int), ("seconds", float)):
        assert isinstance(js[k], t), k
    assert js["metric"] == "delay"                 # tl05's mapper: optimization_metric [delay, energy]
    assert 0 < js["evaluations"] <= 1500
    assert js["edp"] == pytest.approx(js["cycles"] * js["energy_pj"])
    assert mfile.read_text() == js["mapping_yaml"]
    # the mapping, given to simulate --timeloop with the same architecture and problem
    code, out, err = run(capsys, "simulate", "--timeloop", *files, str(mfile), "--json")
    assert code == 0, err
    sim_js = json.loads(out)
    assert sim_js["cycles"] == js["cycles"]
    assert sim_js["energy_pj"] == pytest.approx(js["energy_pj"], rel=1e-12)


def test_search_beats_or_matches_timeloops_mapping_with_its_constraints(tmp_path, capsys):
    """tl06 (Eyeriss row-stationary constraints): the found mapping keeps every constraint of the
    processed input and is as good as Timeloop's found mapping for delay (then energy)."""
    from sim.timeloop import evaluate
    from sim.timeloop.files import read_merged
    files = case_files(tmp_path, "tl06_mapper_vgg02l5_eyeriss")
    code, out, err = run(capsys, "tune", "--timeloop", *files, "--budget", "6000", "--json")
    assert code == 0, err
    js = json.loads(out)
    ref = evaluate(case_files(tmp_path, "tl06_mapper_vgg02l5_eyeriss", with_map=True))
    assert (js["cycles"], js["energy_pj"]) <= (ref.cycles, ref.energy_pj)
    directives = yaml.safe_load(js["mapping_yaml"])["mapping"]
    by = {(d["target"], d["type"]): d for d in directives}
    cons = read_merged(files)["architecture_constraints"]["targets"]
    for c in cons:
        if c["type"] == "bypass":
            d = by[(c["target"], "bypass")]
            assert set(c.get("keep", [])) <= set(d["keep"]) and not set(c.get("bypass", [])) & set(d["keep"])
        elif c["type"] == "temporal" and c.get("factors"):
            got = dict(kv.split("=") for kv in by[(c["target"], "temporal")]["factors"].split())
            for kv in c["factors"].split(","):
                k, v = kv.split("=")
                assert got[k] == v, (c["target"], k)


def test_metric_override_and_determinism(tmp_path, capsys):
    files = case_files(tmp_path, "tl05_mapper_conv1doc_3level_null")
    a = json.loads(run(capsys, "tune", "--timeloop", *files, "--budget", "800", "--metric", "energy", "--json")[1])
    b = json.loads(run(capsys, "tune", "--timeloop", *files, "--budget", "800", "--metric", "energy", "--json")[1])
    assert a["metric"] == "energy"
    assert a["mapping_yaml"] == b["mapping_yaml"] and a["energy_pj"] == b["energy_pj"]


def test_table_output(tmp_path, capsys):
    files = case_files(tmp_path, "tl05_mapper_conv1doc_3level_null")
    code, out, _ = run(capsys, "tune", "--timeloop", *files, "--budget", "500")
    assert code == 0
    assert "best mapping for delay" in out and "mapping:" in out and "MainMemory" in out
    assert "time: " in out and "search " in out


@pytest.mark.parametrize("extra, msg", [
    (["--hw", "edge-npu"], "drop --model/--onnx/--hw"),
    (["--budget", "0"], "--budget must be >= 1"),
    (["--time-limit", "-1"], "--time-limit must be > 0"),
    (["--trials", "3"], "use --budget"),
    (["-o", "/no/such/dir/m.yaml"], "does not exist"),
])
def test_bad_arguments_are_one_line(tmp_path, capsys, extra, msg):
    files = case_files(tmp_path, "tl05_mapper_conv1doc_3level_null")
    code, out, err = run(capsys, "tune", "--timeloop", *files, *extra)
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1


def test_bad_files_are_one_line(tmp_path, capsys):
    p = tmp_path / "x.yaml"
    p.write_text("problem: {}\n")
    code, _, err = run(capsys, "tune", "--timeloop", str(p))
    assert code == 2 and err.startswith("accel-tune: error:") and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "tune", "--timeloop", str(tmp_path / "missing.yaml"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    files = case_files(tmp_path, "tl05_mapper_conv1doc_3level_null")
    bad = tmp_path / "cons.yaml"
    bad.write_text("mapspace_constraints:\n  targets:\n  - {target: GlobalBuffer, type: utilization, min: 0.5}\n")
    code, _, err = run(capsys, "tune", "--timeloop", *files, str(bad))
    assert code == 2 and "utilization" in err and len(err.strip().splitlines()) == 1


def test_model_tune_still_needs_model_and_hw(capsys):
    code, _, err = run(capsys, "tune", "--hw", "edge-npu")
    assert code == 2 and "--model --onnx --timeloop" in err
    code, _, err = run(capsys, "tune", "--model", "byoc_demo")
    assert code == 2 and "--hw" in err


def test_external_command_measures_the_best_predicted(tmp_path, capsys):
    """The measurer is our own simulate --timeloop run as an external command: the best measured
    of the top candidates is returned with the command's numbers, which equal the model's."""
    import shlex
    import sys
    files = case_files(tmp_path, "tl05_mapper_conv1doc_3level_null")
    cmd = shlex.join([sys.executable, "-m", "tuner", "simulate", "--json", "--timeloop", *files])
    code, out, err = run(capsys, "tune", "--timeloop", *files, "--budget", "400", "--measure-command", cmd,
                         "--measure-top", "3", "--json")
    assert code == 0, err
    js = json.loads(out)
    assert js["measured"] == 3 and js["learned_model"]["fits"] == 0   # the command agrees with the prior
    assert js["cycles"] == js["model_cycles"] and js["energy_pj"] == pytest.approx(js["model_energy_pj"])
    code, _, err = run(capsys, "tune", "--timeloop", *files, "--budget", "50", "--measure-command", "false")
    assert code == 2 and "failed with exit status 1" in err and len(err.strip().splitlines()) == 1


def test_timeloop_options_need_timeloop(capsys):
    code, _, err = run(capsys, "tune", "--model", "byoc_demo", "--hw", "edge-npu", "--metric", "delay")
    assert code == 2 and "apply to --timeloop" in err
    # --budget with a model is the mapping budget per MAC kernel: only where there are storage levels
    code, _, err = run(capsys, "tune", "--model", "byoc_demo", "--hw", "edge-npu", "--budget", "5")
    assert code == 2 and "apply to hardware with storage levels" in err and len(err.strip().splitlines()) == 1


def test_json_accounts_the_wall_time(tmp_path, capsys):
    """timing: the phases are measured, not derived from one another: a measurer that sleeps 0.1 s
    a call shows at least 0.1 s per measurement in measure_s, and the phases add up to the total."""
    import sys
    files = case_files(tmp_path, "tl05_mapper_conv1doc_3level_null")
    js = json.loads(run(capsys, "tune", "--timeloop", *files, "--budget", "300", "--json")[1])
    t = js["timing"]
    assert t["measurements"] == 0 and t["measure_s"] == 0 and t["train_s"] == 0 and t["fits"] == 0
    assert t["search_s"] > 0 and t["evaluations"] == js["evaluations"]
    slow = tmp_path / "slow.py"
    slow.write_text("import json, sys, time\ntime.sleep(0.1)\nassert open(sys.argv[1]).read().startswith('mapping:')\n"
                    "print(json.dumps({'cycles': 2000, 'energy_pj': 5e4}))\n")
    code, out, err = run(capsys, "tune", "--timeloop", *files, "--budget", "300", "--measure-command",
                         f"{sys.executable} {slow}", "--measure-top", "4", "--json")
    assert code == 0, err
    t = json.loads(out)["timing"]
    assert t["measurements"] == 4 and t["measure_s"] >= 0.4
    parts = [t[k] for k in ("read_s", "search_s", "pool_s", "measure_s", "train_s", "rank_s", "other_s")]
    assert min(parts) >= 0 and sum(parts) == pytest.approx(t["total_s"], rel=1e-9, abs=1e-9)
    assert json.loads(out)["measure_seconds"] == t["measure_s"]


def test_the_walk_measures_the_best_predicted(tmp_path, capsys):
    """--measure tile: the search's best K are measured by the tile-level walk in process; the
    winner's numbers are the walk's, which simulate --timeloop --fidelity tile gives again for the
    written mapping, and the walk never reports fewer cycles than the model."""
    files = case_files(tmp_path, "tl06_mapper_vgg02l5_eyeriss")
    mfile = tmp_path / "best.map.yaml"
    code, out, err = run(capsys, "tune", "--timeloop", *files, "--budget", "300", "--measure", "tile",
                         "--measure-top", "4", "-o", str(mfile), "--json")
    assert code == 0, err
    js = json.loads(out)
    assert js["measured"] == 4 and js["cycles"] >= js["model_cycles"]
    code, out, err = run(capsys, "simulate", "--timeloop", *files, str(mfile), "--fidelity", "tile", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert again["cycles"] == js["cycles"] and again["energy_pj"] == pytest.approx(js["energy_pj"], rel=1e-9)
    code, _, err = run(capsys, "tune", "--timeloop", *files, "--measure", "tile", "--measure-command", "true")
    assert code == 2 and "one measurer" in err
    code, _, err = run(capsys, "tune", "--model", "byoc_demo", "--hw", "edge-npu", "--measure", "tile")
    assert code == 2 and "apply to --timeloop" in err
