import json

import pytest

import sim
from sim.hw.config import HardwareConfig, HardwareError, load_hw


def test_every_preset_loads_and_has_a_distinct_fingerprint():
    names = sim.hw.presets.names()
    assert {"scalesim-32x32-os", "edge-npu", "tpu-v1-like", "eyeriss-like", "cloud-npu"} <= set(names)
    fps = {load_hw(n).fingerprint() for n in names}
    assert len(fps) == len(names)


def test_tpu_preset_numbers():
    hw = load_hw("tpu-v1-like")
    assert (hw.array.rows, hw.array.cols, hw.array.dataflows) == (256, 256, ("ws",))
    assert hw.clock.freq_mhz == 700.0
    assert hw.buffers.unified and hw.buffers.unified_bytes >= 24 * 2**20


@pytest.mark.parametrize("path,value,msg", [
    ("buffers.ifmap_bytes", -4, "hardware.buffers.ifmap_bytes must be an integer from 0 to 2**40 bytes, got -4"),
    ("array.rows", 0, "hardware.array.rows must be an integer from 1 to 4,096 PEs, got 0"),
    ("array.rows", 2.5, "hardware.array.rows must be an integer, got 2.5"),
    ("dram.bytes_per_cycle", "fast", "hardware.dram.bytes_per_cycle must be a number, got 'fast'"),
    ("array.mac_dtype", "int3", "hardware.array.mac_dtype must be one of"),
    ("array.fold_overlap", 1, "hardware.array.fold_overlap must be true or false, got 1"),
    ("array.dataflows", ["ws", "rs"], "hardware.array.dataflows must be a list drawn from ws, os, is"),
    ("support.ops", ["conv2d", "conv3d", "lstm"], "hardware.support.ops lists 'conv3d', 'lstm', which the "
                                                  "accelerator model cannot cost"),
    ("support.ops", ["dense", "nosuchop"], "hardware.support.ops lists 'nosuchop'"),
])
def test_bad_values_give_one_line_naming_field_and_rule(path, value, msg):
    with pytest.raises(HardwareError) as e:
        load_hw("edge-npu").with_overrides({path: value})
    assert str(e.value).startswith(msg)
    assert "\n" not in str(e.value)


def test_per_operand_buffers_must_be_positive_without_unified():
    with pytest.raises(HardwareError, match=r"buffers.weight_bytes must be > 0 \(or set buffers.unified_bytes\)"):
        HardwareConfig.from_dict({"buffers": {"weight_bytes": 0}})
    hw = HardwareConfig.from_dict({"buffers": {"ifmap_bytes": 0, "weight_bytes": 0, "output_bytes": 0,
                                               "unified_bytes": 4096}})
    assert hw.buffers.total_bytes == 4096


def test_unknown_fields_and_sections_are_errors():
    with pytest.raises(HardwareError, match="hardware.array.rowz is not a known field"):
        HardwareConfig.from_dict({"array": {"rowz": 3}})
    with pytest.raises(HardwareError, match="hardware.arrays is not a known section"):
        HardwareConfig.from_dict({"arrays": {}})
    with pytest.raises(HardwareError, match="must look like section.field"):
        load_hw("edge-npu").with_overrides({"rows": 3})


@pytest.mark.parametrize("suffix", [".toml", ".yaml", ".json"])
def test_save_load_round_trip(tmp_path, suffix):
    hw = load_hw("cloud-npu").with_overrides({"array.rows": 64, "dram.bytes_per_cycle": 16})
    p = tmp_path / f"hw{suffix}"
    hw.save(p)
    back = load_hw(p)
    assert back == hw
    assert back.fingerprint() == hw.fingerprint()


def test_fingerprint_ignores_name_but_not_values():
    hw = load_hw("edge-npu")
    assert hw.with_overrides({"name": "other"}).fingerprint() == hw.fingerprint()
    assert hw.with_overrides({"array.rows": 17}).fingerprint() != hw.fingerprint()
    # int vs float spelling of the same bandwidth is the same machine
    assert hw.with_overrides({"dram.bytes_per_cycle": 11}).fingerprint() == hw.fingerprint()


def test_overrides_and_replace():
    hw = load_hw("edge-npu")
    h2 = hw.with_overrides({"array.rows": 64, "dram.bytes_per_cycle": 16})
    assert (h2.array.rows, h2.array.cols, h2.dram.bytes_per_cycle) == (64, 16, 16.0)
    assert hw.array.rows == 16  # the original is untouched (frozen)
    assert hw.replace(array_rows=64) == h2.with_overrides({"dram.bytes_per_cycle": 11.0})
    with pytest.raises(HardwareError, match="unknown field"):
        hw.replace(nonsense=1)


def test_file_with_base_preset_and_partial_override(tmp_path):
    p = tmp_path / "mine.json"
    p.write_text(json.dumps({"base": "edge-npu", "name": "edge-64", "array": {"rows": 64}}))
    hw = load_hw(p)
    assert hw.name == "edge-64" and hw.array.rows == 64 and hw.array.cols == 16
    assert hw.dram == load_hw("edge-npu").dram


def test_bad_files_give_one_line(tmp_path):
    with pytest.raises(HardwareError, match="no hardware preset or file named 'nope'"):
        load_hw("nope")
    p = tmp_path / "bad.toml"
    p.write_text("[array\nrows = 3")
    with pytest.raises(HardwareError, match="cannot parse hardware config"):
        load_hw(p)
    q = tmp_path / "x.ini"
    q.write_text("")
    with pytest.raises(HardwareError, match="must end in .toml"):
        load_hw(q)


def test_area_is_sum_of_components():
    hw = load_hw("edge-npu")
    a = hw.area
    expect = 256 * a.pe_mm2 + (384) * a.sram_mm2_per_kib + 16 * a.vector_lane_mm2 + a.fixed_mm2
    assert hw.area_mm2() == pytest.approx(expect)


def test_partition_target_is_built_from_support():
    hw = load_hw("edge-npu")
    t = hw.partition_target()
    assert t.name == "edge-npu"
    assert {e.name for e in t.patterns} >= {"edge-npu.conv2d_bias_relu", "edge-npu.dense_bias"}


def test_hw_show_json_loads_back_with_the_same_fingerprint(tmp_path):
    hw = load_hw("edge-npu")
    shown = {**hw.to_dict(), "fingerprint": hw.fingerprint(), "area_mm2": hw.area_mm2()}
    p = tmp_path / "shown.json"
    p.write_text(json.dumps(shown))
    assert load_hw(p).fingerprint() == hw.fingerprint()


def test_empty_config_file_is_an_error_not_the_defaults(tmp_path):
    p = tmp_path / "empty.toml"
    p.write_text("# nothing here\n")
    with pytest.raises(HardwareError, match="is empty"):
        load_hw(p)


def test_optional_sections_stay_out_of_fingerprints_until_stated():
    """memory and interconnect came after tuning records were keyed by fingerprint: at their
    defaults they are not in the file form, so every older config keeps its fingerprint."""
    from sim.hw.config import HardwareConfig, load_hw
    hw = load_hw("edge-npu")
    d = hw.to_dict()
    assert "memory" not in d and "interconnect" not in d
    assert {"memory", "interconnect"} <= set(hw.to_dict(every_section=True))
    big = hw.with_overrides({"memory.capacity_bytes": 8 << 30, "interconnect.max_devices": 8,
                             "interconnect.bytes_per_s": 300e9, "interconnect.topology": "switch"})
    assert big.fingerprint() != hw.fingerprint()
    assert big.to_dict()["memory"] == {"capacity_bytes": 8 << 30}
    again = HardwareConfig.from_dict(big.to_dict(), complete=True)
    assert again == big and again.fingerprint() == big.fingerprint()
    assert HardwareConfig.from_dict(hw.to_dict(), complete=True) == hw


def test_optional_section_values_are_checked():
    import pytest
    from sim.hw.config import HardwareError, load_hw
    hw = load_hw("edge-npu")
    with pytest.raises(HardwareError, match="memory.capacity_bytes"):
        hw.with_overrides({"memory.capacity_bytes": -1})
    with pytest.raises(HardwareError, match="interconnect.topology must be one of ring, switch, mesh"):
        hw.with_overrides({"interconnect.topology": "star"})


def test_the_mapspace_section_is_optional_and_checked(tmp_path):
    """mapspace.family came after fingerprints: at its default (any) it stays out of files and
    fingerprints; row_stationary reaches the hierarchy; a bad value is one line naming the field."""
    import pytest
    from sim.hw.config import HardwareConfig, HardwareError, load_hw
    from sim.hw.config_hierarchy import hierarchy_of
    hw = load_hw("eyeriss")
    assert "mapspace" not in hw.to_dict() and hierarchy_of(hw).family == "any"
    rs = hw.with_overrides({"mapspace.family": "row_stationary"})
    assert rs.to_dict()["mapspace"] == {"family": "row_stationary"} and rs.fingerprint() != hw.fingerprint()
    assert hierarchy_of(rs).family == "row_stationary"
    assert HardwareConfig.from_dict(rs.to_dict(), complete=True) == rs
    with pytest.raises(HardwareError, match="mapspace.family must be one of any, row_stationary"):
        hw.with_overrides({"mapspace.family": "weight_stationary"})
    p = tmp_path / "bad.toml"
    p.write_text('base = "eyeriss"\nname = "x"\n[mapspace]\nfamily = 3\n')
    with pytest.raises(HardwareError, match="mapspace.family"):
        load_hw(p)
