"""The storage hierarchy in HardwareConfig: [[levels]] in files, ranged fields with one-line errors,
overrides, round trips, hw show, and the one-buffer configs left exactly as they were."""
import json

import pytest

import sim
from sim.hw.config import HardwareConfig, HardwareError, level_rules, load_hw
from sim.hw.hierarchy import hierarchy_from_hardware
from sim.hw.config_hierarchy import hierarchy_of

ONE_BUFFER = ("edge-npu", "cloud-npu", "tpu-v1-like", "eyeriss-like", "scalesim-32x32-os")


def test_one_buffer_presets_have_no_levels_and_their_tree_is_unchanged():
    for name in ONE_BUFFER:
        hw = load_hw(name)
        assert hw.levels == () and not hw.multilevel
        assert "levels" not in hw.to_dict()   # so fingerprints and saved files are what they were
        assert hierarchy_of(hw) == hierarchy_from_hardware(hw)


def test_eyeriss_preset_is_five_levels_with_per_pe_spads():
    hw = load_hw("eyeriss")
    assert [lv.name for lv in hw.levels] == ["DRAM", "shared_glb", "ifmap_spad", "weights_spad", "psum_spad"]
    h = hierarchy_of(hw)
    assert [lv.instances for lv in h.levels] == [1, 1, 168, 168, 168]
    assert h.fanout(1) == (14, 12) and h.arithmetic.instances == 168
    assert [lv.capacity_words for lv in h.levels] == [None, 108 * 1024 // 2, 12, 224, 24]
    assert [sorted(lv.keeps) for lv in h.levels[2:]] == [["Inputs"], ["Weights"], ["Outputs"]]
    assert sorted(h.levels[1].keeps) == ["Inputs", "Outputs"]   # filters bypass the GLB, as on the chip


def test_simba_like_preset_fans_out_16_x_4_x_4():
    h = hierarchy_of(load_hw("simba-like"))
    assert [lv.instances for lv in h.levels] == [1, 1, 16, 64, 64, 256]
    assert [h.fanout(i) for i in range(len(h.levels))] == [(1, 1), (16, 1), (1, 4), (1, 1), (1, 4), (1, 1)]
    assert h.levels[-1].cluster_size == 64


def test_area_counts_every_instance_of_every_level():
    hw = load_hw("eyeriss")
    levels = sum(n * (lv.area_um2 + lv.area_um2_per_word * lv.capacity_words)
                 for n, lv in zip((1, 1, 168, 168, 168), hw.levels)) * 1e-6
    a = hw.area
    assert hw.area_mm2() == pytest.approx(168 * a.pe_mm2 + levels + hw.vector.lanes * a.vector_lane_mm2 + a.fixed_mm2)
    # a bigger GLB costs its words at the level's density, nothing else moves
    big = hw.with_overrides({"levels.shared_glb.capacity_words": 2 * 55296})
    assert big.area_mm2() - hw.area_mm2() == pytest.approx(55296 * hw.levels[1].area_um2_per_word * 1e-6)
    assert big.area_mm2() > hw.area_mm2()


@pytest.mark.parametrize("suffix", [".toml", ".yaml", ".json"])
def test_levels_round_trip_through_files(tmp_path, suffix):
    hw = load_hw("simba-like").with_overrides({"levels.GlobalBuffer.capacity_words": 32768})
    p = tmp_path / f"hw{suffix}"
    hw.save(p)
    back = load_hw(p)
    assert back == hw and back.fingerprint() == hw.fingerprint()
    assert back.levels[1].capacity_words == 32768


def _cli(capsys, *argv):
    from tuner.cli import main
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_hw_show_prints_the_hierarchy_and_loads_back(tmp_path, capsys):
    out = _cli(capsys, "hw", "show", "eyeriss")
    assert "# hierarchy (outermost first):" in out
    assert "ifmap_spad" in out and "x168" in out and "fans out 14x12" in out
    assert "capacity_words = 12  # integer 0..2**50 words" in out   # each level field with its rule
    p = tmp_path / "mine.toml"
    p.write_text(out)
    assert load_hw(p).fingerprint() == load_hw("eyeriss").fingerprint()


def test_overrides_change_one_level_field_only():
    hw = load_hw("eyeriss")
    h2 = hw.with_overrides({"levels.weights_spad.capacity_words": 448, "levels.DRAM.read_bandwidth": 2})
    changed = [(a.name, f) for a, b in zip(hw.levels, h2.levels) for f in a.__dataclass_fields__
               if getattr(a, f) != getattr(b, f)]
    assert changed == [("DRAM", "read_bandwidth"), ("weights_spad", "capacity_words")]
    assert h2.fingerprint() != hw.fingerprint()
    # a dotted level name still works: the field is the last part
    d = hw.to_dict()
    d["levels"][1]["name"] = "glb.v1"
    h3 = HardwareConfig.from_dict(d).with_overrides({"levels.glb.v1.read_pj": 1.5})
    assert h3.levels[1].read_pj == 1.5


def test_fanout_zero_takes_what_the_array_leaves():
    hw = load_hw("eyeriss").with_overrides({"array.rows": 6, "array.cols": 7})
    h = hierarchy_of(hw)
    assert h.fanout(1) == (7, 6) and h.levels[2].instances == 42
    simba = load_hw("simba-like").with_overrides({"array.rows": 8})   # 4 buffers per PE fixed: 2 MACs each
    assert hierarchy_of(simba).fanout(4) == (1, 2)


@pytest.mark.parametrize("change,msg", [
    ({"levels.ifmap_spad.capacity_words": -1}, "hardware.levels.ifmap_spad.capacity_words must be an integer from 0"),
    ({"levels.ifmap_spad.capacity_words": 0}, "hardware.levels.ifmap_spad.capacity_words must be > 0"),
    ({"levels.DRAM.read_pj": float("nan")}, "hardware.levels.DRAM.read_pj must be a finite number"),
    ({"levels.DRAM.read_bandwidth": 0}, "hardware.levels.DRAM.read_bandwidth must be a number from 0.001"),
    ({"levels.psum_spad.word_bits": 65}, "hardware.levels.psum_spad.word_bits must be an integer from 1 to 64"),
    ({"levels.psum_spad.keeps": ["Outputs", "Psums"]}, "hardware.levels.psum_spad.keeps lists 'Psums'"),
    ({"levels.DRAM.keeps": ["Inputs", "Outputs"]}, "hardware.levels.DRAM (the outermost level) must keep every"),
    ({"levels.shared_glb.fanout_x": 5}, "hardware.levels: the fanout_x of the levels multiply to 5, which is not"),
    ({"levels.ifmap_spad.fanout_y": 0}, "hardware.levels: shared_glb and ifmap_spad both set fanout_y = 0"),
    ({"array.rows": 7, "levels.ifmap_spad.fanout_y": 2}, "hardware.levels: the fanout_y of the levels multiply "
                                                         "to 2, which does not divide array.rows = 7"),
    ({"levels.psum_spad.name": "MAC"}, "hardware.levels: the name 'MAC' is the array's"),
    ({"levels.psum_spad.name": "ifmap_spad"}, "hardware.levels names 'ifmap_spad' twice"),
    ({"levels.nope.read_pj": 1}, "override 'levels.nope.read_pj': eyeriss has no level named nope"),
    ({"levels.DRAM.readpj": 1}, "hardware.levels.DRAM.readpj is not a known field"),
])
def test_bad_level_values_give_one_line(change, msg):
    with pytest.raises(HardwareError) as e:
        load_hw("eyeriss").with_overrides(change)
    assert str(e.value).startswith(msg), str(e.value)
    assert "\n" not in str(e.value)


def test_bad_levels_in_files_are_one_line(tmp_path):
    cases = {
        'base = "eyeriss"\nlevels = 3\n': "hardware.levels must be a list of tables",
        'base = "eyeriss"\n[[levels]]\nname = "DRAM"\nsize = 3\n': "hardware.levels.DRAM.size is not a known field",
        'base = "edge-npu"\n[[levels]]\nname = "DRAM"\n[[levels]]\nname = "b"\ncapacity_words = 9\nfanout_x = 16\n'
        'fanout_y = 16\n': None,
        'base = "edge-npu"\n' + "".join(f'[[levels]]\nname = "l{i}"\ncapacity_words = {i + 1}\n' for i in range(17)):
            "hardware.levels must list at most 16 levels",
    }
    for i, (text, msg) in enumerate(cases.items()):
        p = tmp_path / f"h{i}.toml"
        p.write_text(text)
        if msg is None:   # a valid two-level machine over a one-buffer preset
            hw = load_hw(p)
            assert [lv.name for lv in hw.levels] == ["DRAM", "b"] and hierarchy_of(hw).levels[1].instances == 1
            continue
        with pytest.raises(HardwareError) as e:
            load_hw(p)
        assert msg in str(e.value) and "\n" not in str(e.value)


def test_every_level_field_has_a_rule_and_a_doc():
    names = {f for f, _, _ in level_rules()}
    assert {"capacity_words", "block_size", "fanout_x", "fanout_y", "read_bandwidth", "read_pj", "fill_pj",
            "update_pj", "leak_pj_per_cycle", "area_um2", "keeps", "word_bits", "cluster_size"} <= names
    assert all(doc for _, _, doc in level_rules())


def test_hw_list_json_names_the_levels(capsys):
    out = _cli(capsys, "hw", "list", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["eyeriss"]["levels"] == ["DRAM", "shared_glb", "ifmap_spad", "weights_spad", "psum_spad"]
    assert rows["edge-npu"]["levels"] == []
