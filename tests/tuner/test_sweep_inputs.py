"""Sweep specs as untrusted input: huge ranges and grids are refused or visited lazily, config-file
faults are one line, and a budget (--limit) never enumerates a space it will not evaluate."""
from __future__ import annotations

import json
import tracemalloc

import pytest

from tuner.cli import main
from tuner.sweep import SpecError, enumerate_space, load_spec, parse_spec, point_at
from tuner.sweep.runner import _rows_beyond
from tuner.sweep.space import EAGER_POINTS, eval_key
from tuner.sweep.spec import MAX_AXIS_VALUES, MAX_POINTS, MAX_TOTAL_AXIS_VALUES


def _spec(**over):
    d = {"name": "s", "base": "edge-npu", "trials": 0, "models": [{"name": "byoc_demo"}]}
    d.update(over)
    return d


def _err(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accel-tune: error: "), lines
    return lines[0]


# ------------------------------------------------------------------------------------- ranges and grids
@pytest.mark.parametrize("rng", [
    {"start": 1, "stop": 1_000_000_000, "step": 1},
    {"start": -1.7e308, "stop": 1.7e308, "step": 1e-300},        # the span overflows to inf
    {"start": 1, "stop": 1e300, "factor": 1.000001},
    {"start": 1e-300, "stop": 1e300, "factor": 1.0001},
])
def test_huge_ranges_are_refused_without_being_built(rng):
    tracemalloc.start()
    with pytest.raises(SpecError, match=f"expands to more than {MAX_AXIS_VALUES:,} values"):
        parse_spec(_spec(axes={"array.rows": rng}))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20 * 2**20  # a billion values would be gigabytes


def test_all_axes_together_are_capped():
    """Each value is checked against the base when the spec loads; 37 axes of 10,000 values each
    would take a minute, so the total is bounded too."""
    big = {"start": 1, "stop": 4000, "step": 1}
    with pytest.raises(SpecError, match=f'axes."vector.lanes": the axes list more than {MAX_TOTAL_AXIS_VALUES:,}'):
        parse_spec(_spec(axes={"array.rows": big, "array.cols": big, "dram.latency_cycles": {**big, "stop": 10_000},
                               "vector.lanes": big}))


@pytest.mark.parametrize("rng, values", [
    ({"start": 8, "stop": 32, "step": 8}, [8, 16, 24, 32]),
    ({"start": 8, "stop": 30, "step": 8}, [8, 16, 24]),
    ({"start": 4, "stop": 64, "factor": 2}, [4, 8, 16, 32, 64]),
    ({"start": 1.0, "stop": 2.0, "step": 0.5}, [1.0, 1.5, 2.0]),
])
def test_ranges_expand_as_documented(rng, values):
    s = parse_spec(_spec(axes={"dram.bytes_per_cycle" if isinstance(rng["start"], float) else "array.rows": rng}))
    assert [v[0] for v in s.axes[0].values] == values


@pytest.mark.parametrize("bad, msg", [
    ({"start": 1, "stop": 10 ** 400, "step": 1}, "stop must be a finite number"),
    ({"start": 1, "stop": 8, "step": float("nan")}, "step must be a finite number"),
    ({"start": 1, "stop": 8, "factor": 1}, "needs factor > 1"),
    ({"start": 8, "stop": 1, "step": 1}, "needs step > 0 and stop >= start"),
])
def test_bad_ranges_are_one_line(bad, msg):
    with pytest.raises(SpecError, match=msg):
        parse_spec(_spec(axes={"array.rows": bad}))


BIG = {"array.rows": {"start": 1, "stop": 2000, "step": 1}, "array.cols": {"start": 1, "stop": 2000, "step": 1}}


def test_a_four_million_point_grid_with_a_limit_is_visited_lazily():
    s = parse_spec(_spec(axes=BIG))
    assert s.grid_size == 4_000_000
    sp = enumerate_space(s, limit=1)
    assert not sp.complete and sp.examined == EAGER_POINTS and len(sp.points) == EAGER_POINTS
    assert [p.index for p in sp.points[:3]] == [0, 1, 2]
    # points already done do not count toward the limit
    done = {p.index for p in sp.points[:EAGER_POINTS + 5]}
    sp2 = enumerate_space(s, limit=3, done=lambda p: p.index in done or p.index < EAGER_POINTS + 5)
    assert sp2.examined == EAGER_POINTS + 8 and not sp2.complete


def test_a_huge_grid_without_a_limit_is_refused_in_one_line():
    s = parse_spec(_spec(axes=BIG))
    with pytest.raises(SpecError, match=f"4,000,000 points, more than the {MAX_POINTS:,}"):
        enumerate_space(s)
    # random sampling of the same grid is fine: only `count` points are made
    r = parse_spec(_spec(axes=BIG, sampling={"method": "random", "count": 5}))
    sp = enumerate_space(r)
    assert len(sp.points) == 5 and sp.complete and sp.examined == 5


def test_random_count_is_capped():
    with pytest.raises(SpecError, match="sampling.count must be an integer from 1 to 100,000"):
        parse_spec(_spec(axes=BIG, sampling={"method": "random", "count": 10**6}))


def test_small_spaces_stay_exact_under_a_limit():
    s = parse_spec(_spec(axes={"array.rows": [8, 16, 32]}))
    sp = enumerate_space(s, limit=1)
    assert sp.complete and len(sp.points) == 3


def test_cli_limit_one_on_four_million_points(tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(_spec(axes=BIG)))
    assert main(["sweep", str(spec), "-o", str(tmp_path / "o"), "--limit", "1", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["evaluated"] == 1 and s["remaining"] is None and s["grid_size"] == 4_000_000
    assert s["examined"] == EAGER_POINTS
    rows = [json.loads(x) for x in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["index"] == 0 and rows[0]["latency_s"] > 0
    # the text form says more points remain, without counting them
    assert main(["sweep", str(spec), "-o", str(tmp_path / "o"), "--limit", "0"]) == 0
    out = capsys.readouterr().out
    assert "4,000,000-point grid" in out and "more remaining" in out


def test_rows_past_a_lazy_stop_stay_in_the_tables():
    s = parse_spec(_spec(axes=BIG))
    blob = "settings"
    far = point_at(s, 3_999_999)
    done = {eval_key(far.key, blob): {"index": 3_999_999, "key": eval_key(far.key, blob)},
            "stale": {"index": 5, "key": "stale"},                   # another point's key at index 5
            "out-of-grid": {"index": 4_000_000, "key": "out-of-grid"}}
    rows = _rows_beyond(s, done, set(), blob)
    assert [r["index"] for r in rows] == [3_999_999]


@pytest.mark.parametrize("argv, msg", [
    (["--limit", "-1"], "--limit must be >= 0, got -1"),
    (["--processes", "0"], "--processes must be >= 1"),
    (["--workers", "0"], "--workers must be >= 1"),
])
def test_bad_run_options(tmp_path, capsys, argv, msg):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(_spec()))
    assert main(["sweep", str(spec), "-o", str(tmp_path / "o"), *argv]) == 2
    assert msg in _err(capsys)
    assert not (tmp_path / "o").exists()  # refused before anything is written


# ------------------------------------------------------------------------------------- files
def test_yaml_alias_bomb_is_refused(tmp_path, capsys):
    bomb = "name: s\nbase: edge-npu\nx0: &x0 [a, a, a, a, a, a, a, a, a, a]\n" + "".join(
        f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 10)}]\n" for i in range(1, 9))
    p = tmp_path / "s.yaml"
    p.write_text(bomb)
    assert main(["sweep", str(p), "-o", str(tmp_path / "o")]) == 2
    assert "anchors and aliases" in _err(capsys)


def test_a_key_given_twice_is_refused(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text("name: s\nbase: edge-npu\ntrials: 1\ntrials: 100\nmodels: [byoc_demo]\n")
    assert main(["sweep", str(p), "-o", str(tmp_path / "o")]) == 2
    assert "line 4: key 'trials' appears twice in one mapping" in _err(capsys)


def test_base_naming_the_spec_itself(tmp_path, capsys):
    p = tmp_path / "s.toml"
    p.write_text('base = "s.toml"\n[[models]]\nname = "byoc_demo"\n')
    assert main(["sweep", str(p), "-o", str(tmp_path / "o")]) == 2
    assert "base: hardware config" in _err(capsys)


@pytest.mark.parametrize("hw, needle", [
    ('base = "hw.toml"\n', "base cycle"),
    *((f'base = "edge-npu"\n[link]\nbytes_per_s = {v}\n', "hardware.link.bytes_per_s must be")
      for v in ("inf", "nan", "-inf", "1e-300", "1e300")),
])
def test_base_hardware_file_faults(tmp_path, capsys, hw, needle):
    (tmp_path / "hw.toml").write_text(hw)
    p = tmp_path / "s.toml"
    p.write_text('base = "hw.toml"\n[[models]]\nname = "byoc_demo"\n')
    assert main(["sweep", str(p), "-o", str(tmp_path / "o")]) == 2
    assert needle in _err(capsys)


def test_spec_that_is_dev_zero_or_binary(tmp_path, capsys):
    (tmp_path / "z.toml").symlink_to("/dev/zero")
    assert main(["sweep", str(tmp_path / "z.toml"), "-o", str(tmp_path / "o")]) == 2
    assert "is not a regular file" in _err(capsys)
    (tmp_path / "b.yaml").write_bytes(b"\xff\xd8\xff\xe0JFIF")
    assert main(["sweep", str(tmp_path / "b.yaml"), "-o", str(tmp_path / "o")]) == 2
    assert f"sweep spec {tmp_path / 'b.yaml'} is not UTF-8 text" in _err(capsys)


@pytest.mark.parametrize("over, msg", [
    ({"models": [{"name": "byoc_demo", "label": "../../etc/x"}]}, "models[0].label must not contain '/'"),
    ({"models": [{"name": "byoc_demo", "label": ".hidden"}]}, "start with '.'"),
    ({"name": "a\nb"}, "name must be printable text"),
    ({"name": "x" * 101}, "name must be printable text of at most 100"),
    ({"trials": 10**6}, "trials must be an integer from 0 to 100,000"),
    ({"seed": -1}, "seed must be an integer from 0"),
    ({"base": "edge\x00npu"}, "base must name a hardware preset or file"),
    ({"constraints": {"max_area_mm2": 10**400}}, "constraints.max_area_mm2 must be a finite number"),
])
def test_bad_values(over, msg):
    with pytest.raises(SpecError, match=msg.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        parse_spec(_spec(**over))


def test_spec_files_round_trip_through_the_reader(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("name: s\nbase: edge-npu\ntrials: 0\naxes:\n  array.rows: [8, 16]\nmodels: [byoc_demo]\n")
    assert load_spec(p).grid_size == 2
