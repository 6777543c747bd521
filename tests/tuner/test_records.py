"""Tuning records: JSON lines round trip, truncated last line skipped with a warning, resume without
re-measuring, best-record lookup."""
import json
import warnings

import pytest

import sim
from tuner.search.measure import AnalyticalMeasurer
from tuner.records import Record, RecordsError, append_record, best_record, best_records, load_records, select
from tuner.tune_kernels import tune_kernels

HW = sim.load_hw("edge-npu")
WL = sim.Workload.gemm(64, 48, 32)


def rec(tile_m, cycles, wl=WL, fp="f1", measurer="tile"):
    return Record(wl.key, fp, sim.Schedule("os", ("m", "n"), tile_m, 16, 16, "mnk", True), cycles, measurer)


def test_round_trip(tmp_path):
    log = tmp_path / "t.jsonl"
    rs = [rec(16, 900.0), rec(32, 700.0), rec(64, 800.0, fp="f2")]
    for r in rs:
        append_record(log, r)
    assert load_records(log) == tuple(rs)
    assert all(json.loads(line)["workload"] == WL.key for line in log.read_text().splitlines())
    assert load_records(tmp_path / "missing.jsonl") == ()


def test_truncated_last_line_is_skipped_with_a_warning_then_appends_cleanly(tmp_path):
    log = tmp_path / "t.jsonl"
    append_record(log, rec(16, 900.0))
    append_record(log, rec(32, 700.0))
    text = log.read_text()
    log.write_text(text[: len(text) - 25])      # killed mid-write
    with pytest.warns(UserWarning, match="skipped a truncated last line"):
        assert load_records(log) == (rec(16, 900.0),)
    append_record(log, rec(48, 650.0))          # cuts the fragment off, so the log reads cleanly again
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_records(log) == (rec(16, 900.0), rec(48, 650.0))


def test_corrupt_middle_line_is_an_error_naming_the_line(tmp_path):
    log = tmp_path / "t.jsonl"
    append_record(log, rec(16, 900.0))
    with open(log, "a") as f:
        f.write("{not json}\n")
    append_record(log, rec(32, 700.0))
    with pytest.raises(RecordsError, match=r"t.jsonl line 2 is not a tuning record"):
        load_records(log)


def test_best_record_lookup():
    rs = [rec(16, 900.0), rec(32, 700.0), rec(48, 700.0), rec(64, 100.0, fp="f2"), rec(8, 50.0, measurer="rtl")]
    assert best_record(rs, WL.key, "f1", "tile").schedule.tile_m == 32    # ties: the first measured
    assert best_record(rs, WL.key, "f2").cycles == 100.0
    assert best_record(rs, WL.key, "f1").cycles == 50.0
    assert best_record(rs, "other", "f1") is None
    assert len(select(rs, hw_fingerprint="f1", measurer="tile")) == 3


def test_bad_cycles_are_rejected(tmp_path):
    log = tmp_path / "t.jsonl"
    line = json.loads(rec(16, 900.0).to_json())
    line["cycles"] = -1
    log.write_text(json.dumps(line) + "\n")
    with pytest.raises(RecordsError, match="cycles must be a positive number"):
        load_records(log)


def test_resume_does_not_remeasure(tmp_path):
    log = tmp_path / "t.jsonl"
    m = AnalyticalMeasurer()
    first = tune_kernels([WL], HW, trials=16, log=log, seed=3, measurer=m, progress=False)
    assert first.measurements == 16 and len(load_records(log)) == 16
    again = tune_kernels([WL], HW, trials=16, log=log, seed=3, measurer=m, progress=False)
    assert again.measurements == 0 and again.reused == 16
    assert again.tasks[0].cycles == first.tasks[0].cycles and again.tasks[0].schedule == first.tasks[0].schedule
    more = tune_kernels([WL], HW, trials=24, log=log, seed=3, measurer=m, progress=False)
    assert more.measurements == 8
    keys = [r.key for r in load_records(log)]
    assert len(keys) == 24 == len(set(keys))
    assert more.tasks[0].cycles <= first.tasks[0].cycles
    other_hw = tune_kernels([WL], sim.load_hw("cloud-npu"), trials=8, log=log, measurer=m, progress=False)
    assert other_hw.reused == 0 and other_hw.measurements == 8


def test_best_records_ranks_every_workload_on_one_hardware():
    b = sim.Workload.gemm(8, 8, 8)
    rs = [rec(16, 90.0, measurer="default"), rec(32, 120.0), rec(16, 70.0, wl=b), rec(16, 10.0, wl=b, fp="f2")]
    best = best_records(rs, "f1")
    assert {k: r.cycles for k, r in best.items()} == {WL.key: 90.0, b.key: 70.0}
    # a real measurer's record before a cached default, whatever their cycles (what `llm --log` takes)
    real_first = best_records(rs, "f1", rank=lambda r: (r.measurer == "default", r.cycles))
    assert real_first[WL.key].cycles == 120.0 and real_first[WL.key].measurer == "tile"
