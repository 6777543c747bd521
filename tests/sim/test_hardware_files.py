"""Hardware config files as untrusted input, and the range of every field: each fault is one line
naming the file or the field, and every accepted config gives finite derived figures."""
import math
import os
from dataclasses import fields

import pytest
from hypothesis import given, settings, strategies as st

import sim
from sim.hw.configfile import MAX_CONFIG_BYTES
from sim.hw.config import (MAX_BASE_DEPTH, HardwareConfig, HardwareError, _SECTIONS, field_rules, load_hw)
from sim import default_schedule

RULES = {path: rule for path, rule, _ in field_rules()}
NUMERIC = {p: r for p, r in RULES.items() if r.kind in ("int", "num")}


def _one_line(e) -> str:
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 400
    return msg


# ------------------------------------------------------------------------------------- base chains
def test_base_naming_the_file_itself_is_a_cycle(tmp_path):
    p = tmp_path / "self.toml"
    p.write_text('base = "self.toml"\n[array]\nrows = 8\n')
    with pytest.raises(HardwareError) as e:
        load_hw(p)
    assert "base cycle" in _one_line(e) and _one_line(e).count("self.toml") == 2


def test_cycle_of_three_files_is_named_in_order(tmp_path):
    for a, b in (("a", "b"), ("b", "c"), ("c", "a")):
        (tmp_path / f"{a}.yaml").write_text(f"base: {b}.yaml\n")
    with pytest.raises(HardwareError) as e:
        load_hw(tmp_path / "a.yaml")
    msg = _one_line(e)
    chain = msg.split("base cycle: ")[1].split(" -> ")
    assert [os.path.basename(c) for c in chain] == ["a.yaml", "b.yaml", "c.yaml", "a.yaml"]


def test_base_file_is_relative_to_the_including_file_and_chains_override_in_order(tmp_path, monkeypatch):
    (tmp_path / "hw").mkdir()
    (tmp_path / "hw" / "root.toml").write_text('base = "edge-npu"\n[array]\nrows = 8\ncols = 8\n')
    (tmp_path / "hw" / "mid.json").write_text('{"base": "root.toml", "array": {"cols": 12}}')
    (tmp_path / "leaf.yaml").write_text("base: hw/mid.json\nclock: {freq_mhz: 250}\n")
    monkeypatch.chdir("/")  # relative to the including file, not the working folder
    hw = load_hw(tmp_path / "leaf.yaml")
    edge = load_hw("edge-npu")
    assert (hw.array.rows, hw.array.cols, hw.clock.freq_mhz) == (8, 12, 250.0)
    assert hw.dram == edge.dram and hw.support == edge.support


def test_missing_base_file_names_the_including_file(tmp_path):
    p = tmp_path / "a.toml"
    p.write_text('base = "nope.toml"\n')
    with pytest.raises(HardwareError, match=r"no hardware preset or file named 'nope.toml' \(base of .*a.toml\)"):
        load_hw(p)


@pytest.mark.parametrize("base", ["1", "[1, 2]", '""', "{a = 1}"])
def test_base_must_be_a_name(tmp_path, base):
    p = tmp_path / "a.toml"
    p.write_text(f"base = {base}\n")
    with pytest.raises(HardwareError, match="base must name a preset or a hardware file"):
        load_hw(p)


def test_long_chains_are_capped(tmp_path):
    n = MAX_BASE_DEPTH + 2
    for i in range(n):
        (tmp_path / f"h{i}.toml").write_text(f'base = "h{i + 1}.toml"\n' if i < n - 1 else 'base = "edge-npu"\n')
    with pytest.raises(HardwareError, match=f"more than {MAX_BASE_DEPTH} files chained"):
        load_hw(tmp_path / "h0.toml")
    # h{n-1} names the preset: a chain of MAX_BASE_DEPTH configs in all loads, one more does not
    assert load_hw(tmp_path / f"h{n - MAX_BASE_DEPTH + 1}.toml").array.rows == 16
    with pytest.raises(HardwareError, match="files chained"):
        load_hw(tmp_path / f"h{n - MAX_BASE_DEPTH}.toml")


def test_error_in_a_base_file_names_that_file(tmp_path):
    (tmp_path / "bad.toml").write_text('base = "edge-npu"\n[clock]\nfreq_mhz = inf\n')
    (tmp_path / "top.toml").write_text('base = "bad.toml"\n')
    with pytest.raises(HardwareError, match=r"bad.toml: hardware.clock.freq_mhz must be a finite number"):
        load_hw(tmp_path / "top.toml")


# ------------------------------------------------------------------------------------- file faults
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))


@pytest.mark.parametrize("text", [BOMB, "array: &a {rows: 8}\nbuffers: *a\n", "base: edge-npu\narray: &x {rows: 8}\n",
                                  "base: edge-npu\narray: {<<: {rows: 8}}\nclock: {<<: *q}\n"])
def test_yaml_anchors_and_aliases_are_refused(tmp_path, text):
    p = tmp_path / "bomb.yaml"
    p.write_text(text)
    with pytest.raises(HardwareError) as e:
        load_hw(p)
    assert "anchors and aliases" in _one_line(e) and str(p) in _one_line(e)


def test_dev_zero_symlink_and_other_non_files_are_refused(tmp_path):
    link = tmp_path / "zero.toml"
    link.symlink_to("/dev/zero")
    with pytest.raises(HardwareError, match="is not a regular file"):
        load_hw(link)
    os.mkfifo(tmp_path / "fifo.yaml")  # opening it would block forever
    with pytest.raises(HardwareError, match="is not a regular file"):
        load_hw(tmp_path / "fifo.yaml")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(HardwareError, match="is not a regular file"):
        load_hw(tmp_path / "dir.json")


def test_size_cap(tmp_path):
    p = tmp_path / "big.toml"
    with open(p, "w") as f:
        f.write('base = "edge-npu"\n')
        f.write("#" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(HardwareError, match="is larger than 1 MiB"):
        load_hw(p)


@pytest.mark.parametrize("data, what", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not a text file"),
    (bytes(range(128, 256)), "not UTF-8 text"),
    (b'base = "edge-npu"\n\xff\xfe', "not UTF-8 text"),
])
def test_binary_files_name_the_file(tmp_path, data, what):
    p = tmp_path / "hw.toml"
    p.write_bytes(data)
    with pytest.raises(HardwareError) as e:
        load_hw(p)
    assert what in _one_line(e) and str(p) in _one_line(e)


@pytest.mark.parametrize("name, text", [
    ("deep.json", "[" * 100_000 + "]" * 100_000),
    ("deep.yaml", "[" * 100_000 + "]" * 100_000),
    ("deep.toml", "a = " + "[" * 100_000 + "]" * 100_000),
    ("digits.json", '{"array": {"rows": ' + "9" * 5000 + "}}"),
    ("scalar.yaml", "just a string\n"),
    ("list.json", "[1, 2]"),
    ("tags.yaml", "!!python/object:os.system {}\n"),
    # a key given twice: the second would silently replace the first (a pasted section)
    ("dup.yaml", "base: edge-npu\narray: {rows: 8}\narray: {cols: 8}\n"),
    ("dup.yaml", "base: edge-npu\narray:\n  rows: 8\n  rows: 9\n"),
    ("dup.json", '{"base": "edge-npu", "array": {"rows": 8, "rows": 9}}'),
    ("dup.toml", 'base = "edge-npu"\n[array]\nrows = 8\nrows = 9\n'),
])
def test_parser_edge_cases_are_one_line(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(HardwareError) as e:
        load_hw(p)
    assert str(p) in _one_line(e)
    if name.startswith("dup"):
        assert _one_line(e).startswith(f"cannot parse hardware config {p}: ")


def test_bom_is_accepted(tmp_path):
    p = tmp_path / "hw.toml"
    p.write_bytes('\ufeffbase = "edge-npu"\n[array]\nrows = 8\n'.encode())
    assert load_hw(p).array.rows == 8


# ------------------------------------------------------------------------------------- ranges
def test_every_numeric_field_has_a_finite_range_and_a_doc():
    for path, rule, doc in field_rules():
        assert doc, path
        if rule.kind in ("int", "num"):
            assert math.isfinite(rule.lo) and math.isfinite(rule.hi) and rule.lo <= rule.hi, path
            assert rule.describe().startswith(("integer", "number")), path


def test_presets_sit_inside_the_ranges():
    for name in sim.hw.presets.names():
        hw = load_hw(name)
        for path, rule in NUMERIC.items():
            sec, f = path.split(".")
            assert rule.lo <= getattr(getattr(hw, sec), f) <= rule.hi, (name, path)


def _edge_cases(rule):
    lo, hi = rule.lo, rule.hi
    ok = [lo, hi]
    bad = [math.inf, -math.inf, math.nan, 10**400, -(10**400), "1", None, [1], True]
    if rule.kind == "int":
        bad += [lo - 1, hi + 1, lo + 0.5]
        ok += [float(hi)]
    else:
        bad += [hi * 1.01 + 1, lo - 1 if lo == 0 else lo / 2, 1e308, 1e-300 if lo > 0 else -1e-300]
    return ok, bad


@pytest.mark.parametrize("path", sorted(NUMERIC))
def test_range_edges(path):
    rule = NUMERIC[path]
    ok, bad = _edge_cases(rule)
    base = HardwareConfig.from_dict({"buffers": {"unified_bytes": 4096}})  # buffers may then be 0
    for v in ok:
        hw = base.with_overrides({path: v})
        sec, f = path.split(".")
        assert getattr(getattr(hw, sec), f) == v
    for v in bad:
        with pytest.raises(HardwareError) as e:
            base.with_overrides({path: v})
        assert _one_line(e).startswith(f"hardware.{path} must be "), (path, v)


@settings(max_examples=60, deadline=None)
@given(st.fixed_dictionaries({p: (st.integers(int(r.lo), int(r.hi)) if r.kind == "int"
                                  else st.floats(r.lo, r.hi, allow_nan=False))
                              for p, r in NUMERIC.items()}))
def test_any_config_inside_the_ranges_has_finite_derived_figures(values):
    values = dict(values)
    if values["buffers.unified_bytes"] == 0:
        for k in ("ifmap_bytes", "weight_bytes", "output_bytes"):
            values[f"buffers.{k}"] = max(1, values[f"buffers.{k}"])
    hw = HardwareConfig().with_overrides(values)
    for x in (hw.pes, hw.clock_hz, hw.area_mm2(), hw.peak_macs_per_s(), hw.buffers.total_bytes):
        assert math.isfinite(x) and x >= 0


def test_extreme_corner_simulates_to_finite_numbers():
    """The slowest and the largest machine the ranges allow still cost a layer in finite time."""
    from sim import Schedule, Workload, simulate
    wl = Workload.gemm(64, 64, 64, dtype_bytes=1)
    slow = {f"{p}": r.lo for p, r in NUMERIC.items() if p.split(".")[0] in ("dram", "clock", "vector", "buffers")}
    slow.update({"buffers.unified_bytes": 2**20, "dram.latency_cycles": 10**7, "buffers.sram_bytes_per_cycle": 1e-3,
                 "array.rows": 1, "array.cols": 1})
    big = {p: r.hi for p, r in NUMERIC.items() if p.split(".")[0] in ("array", "buffers", "dram", "clock", "energy")}
    for over in (slow, big):
        hw = HardwareConfig().with_overrides(over)
        for fidelity in ("analytical", "tile"):
            r = simulate(wl, hw, default_schedule(wl, hw), fidelity=fidelity)
            assert math.isfinite(r.total_cycles) and r.total_cycles > 0
            assert math.isfinite(r.latency_s) and math.isfinite(r.energy_j) and r.energy_j >= 0
            assert math.isfinite(hw.area_mm2())


@pytest.mark.parametrize("field_, value, msg", [
    ("name", "a\nb", "hardware.name must be printable text"),
    ("name", "x" * 201, "hardware.name must be printable text of at most 200"),
    ("description", "x\x00", "hardware.description must be printable"),
    ("support.target", "../evil", "hardware.support.target must be a name"),
    ("support.target", "a b", "hardware.support.target must be a name"),
    ("vector.ops", ["relu"] * 2, "hardware.vector.ops must be a list without duplicates"),
    ("vector.ops", [f"op{i}" for i in range(1001)], "hardware.vector.ops must be a list of at most 1000"),
    ("array.dataflows", [], "hardware.array.dataflows must be non-empty"),
    ("vector.ops", ["relu", "reluu"], "hardware.vector.ops lists 'reluu', which are not canonical ops"),
    ("support.patterns", ["conv2d_bias", "conv2d_bias_relux"], "hardware.support.patterns lists 'conv2d_bias_relux'"),
])
def test_text_and_list_fields(field_, value, msg):
    with pytest.raises(HardwareError) as e:
        load_hw("edge-npu").with_overrides({field_: value})
    assert _one_line(e).startswith(msg)


def test_complete_config_required_for_archives():
    with pytest.raises(HardwareError, match="hardware config is incomplete: name, array, buffers"):
        HardwareConfig.from_dict({}, complete=True)
    d = load_hw("edge-npu").to_dict()
    del d["clock"]["freq_mhz"]
    with pytest.raises(HardwareError, match="incomplete: clock.freq_mhz missing"):
        HardwareConfig.from_dict(d, complete=True)
    full = load_hw("edge-npu").to_dict()
    assert HardwareConfig.from_dict(full, complete=True) == load_hw("edge-npu")
    assert {f.name for s in _SECTIONS.values() for f in fields(s)} <= {p.split(".")[1] for p in RULES}


def test_hw_show_prints_each_fields_range(capsys):
    from tuner.cli import main
    assert main(["hw", "show", "edge-npu"]) == 0
    out = capsys.readouterr().out
    assert "rows = 16  # integer 1..4,096 PEs" in out
    assert "freq_mhz = 500.0  # number 1..100000 MHz" in out


def test_a_modified_file_is_named_after_itself_and_its_description_stays_valid(tmp_path):
    """A file that changes its base is another machine, named after the file; the generated
    description of a long change (every canonical op on the vector unit) is shortened, not refused."""
    from partition.ops import OPS
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "mid.toml").write_text('base = "edge-npu"\n[array]\nrows = 8\n')
    (tmp_path / "wide.yaml").write_text("base: sub/mid.toml\nvector:\n  ops: [" + ", ".join(sorted(OPS)) + "]\n")
    hw = load_hw(tmp_path / "wide.yaml")
    assert hw.name == "wide" and hw.array.rows == 8 and set(hw.vector.ops) == set(OPS)
    assert hw.description.startswith("mid with vector.ops = [") and len(hw.description) <= 1000
    same = tmp_path / "same.toml"
    same.write_text('base = "edge-npu"\n[array]\nrows = 16\n')  # changes nothing: keeps the base's name
    assert load_hw(same).name == "edge-npu"
