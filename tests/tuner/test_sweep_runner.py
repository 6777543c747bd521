"""Running sweeps: rows agree with tuning each point directly, resume after a kill loses nothing
finished, one process, a local pool and a LocalCluster of two Dask workers give the same rows, and
a folder belongs to one hardware base."""
from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuner.sweep import SweepError, enumerate_space, load_spec, parse_spec, pareto_front, read_rows, run_sweep
from tuner.sweep.runner import objective_matrix

TRIALS = 4


def _spec_dict(**over):
    d = {"name": "tiny", "base": "edge-npu", "seed": 1, "trials": TRIALS, "share_cost_model": False,
         "warm_start": False,
         "axes": {"array.rows,array.cols": [8, 16], "dram.bytes_per_cycle": [4.0, 16.0]},
         "models": [{"name": "bert_tiny"}]}
    d.update(over)
    return d


def _write_spec(tmp_path: Path, **over) -> Path:
    p = tmp_path / "spec.json"
    p.write_text(json.dumps(_spec_dict(**over)))
    return p


def test_rows_match_tuning_each_point_directly(tmp_path):
    import tuner
    from partition.models import get, model_stats
    from partition.ops import op_cost
    spec = parse_spec(_spec_dict(axes={"array.rows,array.cols": [8, 16]}))
    res = run_sweep(spec, tmp_path / "out", progress=False)
    assert res.new == 2 and res.skipped == 0 and not res.failed
    g = get("bert_tiny")
    macs = model_stats(g).macs
    for p, r in zip(enumerate_space(spec).points, res.rows):
        plan = tuner.tune(g, p.hw, trials=TRIALS, objective="latency", seed=1, progress=False)
        m = r["models"]["bert_tiny"]
        assert m["latency_s"] == pytest.approx(plan.latency_s, rel=1e-12)
        assert m["energy_j"] == pytest.approx(plan.energy_j, rel=1e-12)
        assert r["latency_s"] == m["latency_s"] and r["edp"] == pytest.approx(m["latency_s"] * m["energy_j"])
        # Only the accelerator's MACs count: the model's minus those of the ops left on the host.
        host_macs = sum(op_cost(n).macs for n in plan.graph.nodes
                        if not (n.op == "call" and "Compiler" in plan.graph.functions[n.attrs["callee"]].attrs))
        assert m["utilization"] == pytest.approx((macs - host_macs) / (p.hw.pes * p.hw.clock_hz * plan.latency_s))
        assert 0 < m["utilization"] <= 1
        assert r["area_mm2"] == pytest.approx(p.hw.area_mm2()) and r["params"]["array.rows"] == p.hw.array.rows
    # The written tables agree with the rows.
    with open(tmp_path / "out" / "results.csv") as f:
        table = list(csv.DictReader(f))
    assert [float(t["latency_s"]) for t in table] == [r["latency_s"] for r in res.rows]
    front = json.loads((tmp_path / "out" / "pareto.json").read_text())["all"]["points"]
    assert front == sorted(res.rows[i]["index"] for i in pareto_front(objective_matrix(list(res.rows))))
    assert json.loads((tmp_path / "out" / "version.json").read_text())["accel-tune"]
    assert json.loads((tmp_path / "out" / "spec.json").read_text())["settings"]["seed"] == 1
    # The report of real rows has every figure: the plan's breakdown and tuned kernels are in them.
    from tuner.sweep.report import build_report
    assert [f.id for f in build_report(list(res.rows)).figures] == ["pareto", "area", "breakdown", "roofline", "search"]
    bd = res.rows[0]["models"]["bert_tiny"]["breakdown"]
    assert sum(v["latency_s"] for v in bd.values()) == pytest.approx(res.rows[0]["latency_s"])


def test_resume_after_kill_loses_no_finished_point(tmp_path):
    spec_path = _write_spec(tmp_path)
    out = tmp_path / "out"
    res_file = out / "results.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "tuner", "sweep", str(spec_path), "-o", str(out),
                             "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if res_file.exists() and res_file.read_text().count("\n") >= 1:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = res_file.read_text().splitlines()
    assert 1 <= len(before) < 4, "the sweep finished before the kill; the test needs a slower point"
    # A kill in the middle of a write leaves half a line behind.
    with res_file.open("a") as f:
        f.write(before[0][: len(before[0]) // 2])
    with pytest.warns(UserWarning, match="truncated"):
        res = run_sweep(load_spec(spec_path), out, progress=False)
    assert res.skipped == len(before) and res.new == 4 - len(before) and not res.failed
    after = [ln for ln in res_file.read_text().splitlines() if ln.strip()]
    # Every finished line survives byte for byte, and each point appears exactly once.
    assert after[: len(before)] == before
    with pytest.warns(UserWarning, match="truncated"):
        rows = read_rows(res_file)
    assert len(rows) == 4 and len({r["key"] for r in rows}) == 4
    # A third run finds nothing left to do.
    with pytest.warns(UserWarning, match="truncated"):
        again = run_sweep(load_spec(spec_path), out, progress=False)
    assert again.new == 0 and again.skipped == 4


def test_warm_start_seeds_later_points_with_real_measurements(tmp_path):
    from tuner.records import load_records
    spec = parse_spec(_spec_dict(axes={"array.rows,array.cols": [8, 16]}, warm_start=True, trials=6))
    res = run_sweep(spec, tmp_path / "o", progress=False)
    first, second = res.rows
    assert first["models"]["bert_tiny"]["warm_start_seeds"] == 0
    seeds = second["models"]["bert_tiny"]["warm_start_seeds"]
    assert seeds > 0
    # The seeds are records of the second point's own hardware, written before its search, and
    # they count against its budget: total measurements stay at the trials asked for.
    recs = load_records(tmp_path / "o" / "records" / f"{second['point']}.bert_tiny.jsonl")
    assert {r.hw_fingerprint for r in recs} == {second["hw_fingerprint"]}
    first_best = {k["workload"] for k in first["models"]["bert_tiny"]["kernels"]}
    assert {r.workload_key for r in recs[:seeds]} <= first_best
    assert second["models"]["bert_tiny"]["measurements"] == 6


def test_folder_of_another_sweep_is_refused(tmp_path):
    run_sweep(parse_spec(_spec_dict(axes={"array.rows": [8]})), tmp_path / "o", progress=False)
    with pytest.raises(SweepError, match="holds results of a sweep with other models"):
        run_sweep(parse_spec(_spec_dict(axes={"array.rows": [8]}, trials=TRIALS + 1)), tmp_path / "o",
                  progress=False)


def test_bad_engine_options():
    spec = parse_spec(_spec_dict())
    with pytest.raises(SweepError, match="not both"):
        run_sweep(spec, "/nonexistent/x", workers=2, scheduler="tcp://x:1", progress=False)
    with pytest.raises(SweepError, match="--workers must be >= 1"):
        run_sweep(spec, "/nonexistent/x", workers=0, progress=False)


def test_cli_json_and_limit(tmp_path, capsys):
    from tuner.cli import main
    spec_path = _write_spec(tmp_path)
    assert main(["sweep", str(spec_path), "-o", str(tmp_path / "o"), "--limit", "1", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["evaluated"] == 1 and s["remaining"] == 3 and s["points"] == 4
    assert main(["sweep", str(tmp_path / "missing.toml"), "-o", str(tmp_path / "o")]) == 2
    assert "accel-tune: error: cannot read sweep spec" in capsys.readouterr().err
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    assert main(["sweep", str(spec_path), "-o", str(a_file)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a file; give -o a folder" in err[0]


def test_a_point_that_cannot_run_is_a_finished_row_with_its_error(tmp_path):
    # A machine that offloads nothing cannot be tuned: tune refuses that point, the sweep records
    # why and carries on; a rerun does not retry it.
    spec = parse_spec(_spec_dict(axes={"support.ops,support.patterns": [[[], []], [["dense", "matmul"], []]]}))
    res = run_sweep(spec, tmp_path / "o", progress=False)
    bad, good = res.rows
    assert "offloads none of the ops" in bad["error"] and bad["latency_s"] is None
    assert good["error"] is None and good["latency_s"] > 0
    assert json.loads((tmp_path / "o" / "pareto.json").read_text())["all"]["points"] == [good["index"]]
    assert run_sweep(spec, tmp_path / "o", progress=False).new == 0


def _comparable(rows):
    """A row without the fields that say how it was run (timings, worker)."""
    return [{k: v for k, v in r.items() if k not in ("eval_s", "worker")}
            | {"models": {lab: {k: v for k, v in m.items() if k != "tune_s"} for lab, m in r["models"].items()}}
            for r in rows]


def _files(out):
    return {f: (out / f).read_text() for f in ("pareto.json",)}


@pytest.mark.slow
def test_same_spec_same_rows_on_every_engine_with_warm_start_and_shared_model(tmp_path):
    """Warm start and the shared cost model on (the defaults): the rows and fronts of one process,
    a local pool of two and a Dask LocalCluster of two are identical, and so are those of a run
    cut short (--limit) and resumed."""
    from tuner.sweep.runner import CHAIN
    spec = parse_spec(_spec_dict(share_cost_model=True, warm_start=True,
                                 axes={"array.rows,array.cols": [8, 16, 32], "dram.bytes_per_cycle": [4.0, 16.0]}))
    assert len(enumerate_space(spec).points) == 6 > CHAIN  # two chains, the second after the first
    inline = run_sweep(spec, tmp_path / "inline", progress=False)
    assert inline.new == 6 and not inline.failed
    # Later points of a chain really learned from earlier ones (else this test proves nothing).
    assert any(r["models"]["bert_tiny"]["warm_start_seeds"] > 0 for r in inline.rows)
    assert [r["chain_after"] for r in inline.rows] == [[], [0], [0, 1], [0, 1, 2], [], [4]]
    pool = run_sweep(spec, tmp_path / "pool", processes=2, progress=False)
    dask = run_sweep(spec, tmp_path / "dask", workers=2, progress=False)
    first = run_sweep(spec, tmp_path / "resumed", progress=False, limit=2)
    resumed = run_sweep(spec, tmp_path / "resumed", processes=2, progress=False)
    assert first.new == 2 and resumed.new == 4
    want = _comparable(inline.rows)
    for res in (pool, dask, resumed):
        assert not res.failed
        assert _comparable(res.rows) == want
        assert _files(Path(res.out_dir)) == _files(Path(inline.out_dir))
    assert len({r["worker"] for r in pool.rows}) == 2  # both processes did work


def test_folder_belongs_to_one_hardware_base(tmp_path, capsys):
    from tuner.cli import main
    out = tmp_path / "out"
    run_sweep(parse_spec(_spec_dict(trials=0)), out, progress=False, limit=1)
    other = tmp_path / "base.toml"
    other.write_text('base = "edge-npu"\n[link]\nbytes_per_s = 2e9\n')
    spec = parse_spec(_spec_dict(trials=0, base=str(other)))
    with pytest.raises(SweepError, match="other base hardware"):
        run_sweep(spec, out, progress=False)
    # Unchanged rows: nothing was appended from the other hardware.
    assert len(read_rows(out / "results.jsonl")) == 1
    p = tmp_path / "spec.json"
    p.write_text(json.dumps(_spec_dict(trials=0, base=str(other))))
    assert main(["sweep", str(p), "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("accel-tune: error:") and "other base hardware" in err[0]
    # The same base written another way (a file equal to the preset) is the same hardware.
    same = tmp_path / "same.toml"
    same.write_text('base = "edge-npu"\n')
    assert run_sweep(parse_spec(_spec_dict(trials=0, base=str(same))), out, progress=False, limit=1).new == 1


def test_folder_refuses_an_edited_onnx_model(tmp_path):
    """The folder remembers each ONNX model's content: a file edited in place is another model."""
    import onnx
    from onnx import TensorProto, helper
    f = tmp_path / "m.onnx"

    def save(doc: str) -> None:
        g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8, doc_string=doc)
        onnx.save(m, f)
    save("first")
    spec = parse_spec(_spec_dict(trials=0, models=[{"onnx": str(f), "label": "m"}]))
    out = tmp_path / "out"
    assert run_sweep(spec, out, progress=False, limit=0).new == 0
    assert run_sweep(spec, out, progress=False, limit=0).new == 0  # unchanged: accepted
    save("edited")
    with pytest.raises(SweepError, match="other ONNX model files"):
        run_sweep(spec, out, progress=False, limit=0)


def test_sweep_over_a_hierarchy_varies_levels_and_reports_area(tmp_path):
    """Per-level sizes, bandwidths and fan-out as sweep axes on a hierarchical preset: every point
    is the base with exactly those level fields changed, its area counts the PEs and per-PE
    levels the fan-out gives, and each row is what tuning that machine directly gives."""
    import tuner
    from partition.models import get
    from sim import load_hw
    axes = {"levels.DRAM.read_bandwidth": [2.0, 8.0], "array.cols,levels.shared_glb.fanout_x": [7, 14],
            "levels.weights_spad.capacity_words": [224]}
    spec = parse_spec(_spec_dict(base="eyeriss", axes=axes, models=[{"name": "byoc_demo"}]))
    pts = enumerate_space(spec).points
    assert len(pts) == 4
    base = load_hw("eyeriss")
    for p in pts:
        v = dict(p.values)
        hw = p.hw
        assert hw.levels[0].read_bandwidth == v["levels.DRAM.read_bandwidth"]
        glb = next(lv for lv in hw.levels if lv.name == "shared_glb")
        assert glb.fanout_x == hw.array.cols == v["array.cols,levels.shared_glb.fanout_x".split(",")[0]]
        assert hw.level_instances()[2] == hw.array.cols * hw.array.rows   # the spads: one per PE
        # area: the base's, less the PEs and spads the narrower array drops
        per_pe = base.area.pe_mm2 + sum(lv.area_um2 + lv.area_um2_per_word * lv.capacity_words
                                        for lv in base.levels[2:]) * 1e-6
        assert hw.area_mm2() == pytest.approx(base.area_mm2() - (14 - hw.array.cols) * 12 * per_pe)
    res = run_sweep(spec, tmp_path / "out", progress=False)
    assert res.new == 4 and not res.failed
    for p, r in zip(pts, res.rows):
        plan = tuner.tune(get("byoc_demo"), p.hw, trials=TRIALS, objective="latency", seed=1, progress=False)
        assert r["models"]["byoc_demo"]["latency_s"] == pytest.approx(plan.latency_s, rel=1e-12)
        assert r["area_mm2"] == pytest.approx(p.hw.area_mm2())
    from tuner.sweep.report import build_report
    rep = build_report(list(res.rows))
    assert "area" in [f.id for f in rep.figures]
    assert "DRAM.read_bandwidth=" in rep.html  # a level's field is named with its level in the tables
