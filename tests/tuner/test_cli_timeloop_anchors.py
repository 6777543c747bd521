"""Issue 19 (A): plain Timeloop files may use YAML anchors, aliases and merge keys, read with the
same bounded loader as a rendered template's files; a hardware config still may not."""
import json
import re
from pathlib import Path

import pytest

from sim.validate.timeloop import load_case, write_inputs
from sim.timeloop.template import MAX_ALIASES
from tuner.cli import main

CASE = Path(__file__).resolve().parents[2] / ".." / "shared" / "oracle" / "timeloop" / "tl04_conv1doc_3levelspatial_kp.json"

# tl04's architecture (00_arch_3levelspatial.arch.yaml) written as Timeloop's component files are:
# shared attributes behind an anchor, merged with `<<: *name`, a later key overriding a merged one
ARCH = """\
architecture:
  version: 0.4
  nodes:
  - !Container
    name: System
    attributes:
      technology: "40nm"
      global_cycle_seconds: 1e-9
  - !Component
    name: MainMemory
    class: DRAM
    attributes: &bytewide
      width: 256
      datawidth: 8
  - !Container
    name: PE
    spatial: {meshX: 16}
  - !Component
    name: GlobalBuffer
    class: SRAM
    attributes:
      <<: *bytewide
      depth: 32768
      width: 64
  - !Component
    name: RegisterFile
    class: regfile
    attributes: {<<: *bytewide, depth: 64, width: 8}
  - !Component
    name: MACC
    class: intmac
    attributes:
      width: 8
"""

# tl04's mapping with the permutation and the unit factors behind anchors
MAPPING = """\
mapping:
  - &outer
    target: MainMemory
    type: temporal
    factors: R=1 P=1 K=1 C=1
    permutation: &prkc PRKC
  - {<<: *outer, target: GlobalBuffer, factors: R=3 P=1 K=2 C=32}
  - {target: PE, type: spatial, factors: R=1 P=1 K=16 C=1, permutation: *prkc}
  - {<<: *outer, target: RegisterFile, factors: R=1 P=16 K=1 C=1, permutation: RPKC}
"""


@pytest.fixture
def tl04(tmp_path):
    if not CASE.exists():
        pytest.skip("shared Timeloop oracle not present")
    plain = [Path(p) for p in write_inputs(load_case(CASE), "split", tmp_path / "plain")]
    assert [p.name for p in plain[:3]] == ["00_arch_3levelspatial.arch.yaml",
                                           "01_mapping_conv1d+oc+ic-3levelspatial-kp-ws.map.yaml",
                                           "02_problem_conv1d+oc+ic.prob.yaml"]
    return plain


def _json(argv, capsys):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _ert_with_anchors(text: str) -> str:
    # every action's arguments are the same mapping: anchor the first, alias the rest
    block = re.compile(r"arguments:\n( +)global_cycle_seconds: 1e-09\n\1action_latency_cycles: 1\n")
    first = block.search(text)
    head = text[:first.start()] + first.group(0).replace("arguments:", "arguments: &args", 1)
    return head + block.sub("arguments: *args\n", text[first.end():])


def test_split_and_single_files_with_anchors_equal_the_plain_form(tl04, tmp_path, capsys):
    arch, mapping, problem, ert, art = tl04
    ref = _json(["simulate", "--timeloop", *map(str, tl04), "--json"], capsys)
    assert ref["cycles"] == 3072

    a = tmp_path / "anchored"
    a.mkdir()
    (a / "arch.yaml").write_text(ARCH)
    (a / "map.yaml").write_text(MAPPING)
    ert_text = _ert_with_anchors(ert.read_text())
    assert ert_text.count("*args") == 12 and "global_cycle_seconds" in ert_text
    (a / "ERT.yaml").write_text(ert_text)
    split = [a / "arch.yaml", a / "map.yaml", problem, a / "ERT.yaml", art]
    assert _json(["simulate", "--timeloop", *map(str, split), "--json"], capsys) == ref

    # one file holding architecture, mapping and problem, as the processed input does
    single = a / "single.yaml"
    single.write_text(ARCH + MAPPING + problem.read_text())
    assert _json(["simulate", "--timeloop", str(single), str(a / "ERT.yaml"), str(art), "--json"], capsys) == ref

    # tune --timeloop reads them with the same loader: the same search, the same mapping found
    def tune(*fs):
        js = _json(["tune", "--timeloop", *map(str, fs), "--budget", "3000", "--json"], capsys)
        return {k: v for k, v in js.items() if k not in ("seconds", "timing")}
    assert tune(a / "arch.yaml", problem, a / "ERT.yaml", art) == tune(arch, problem, ert, art)


@pytest.mark.parametrize("text, words", [
    ("a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\n", "alias *b points at a value holding aliases"),
    ("a: &a [1]\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n", f"more than {MAX_ALIASES} YAML aliases"),
    ("problem: {<<<: {version: 0.4}}\n", "'<<<'"),
], ids=["billion-laughs", "too-many-aliases", "recursive-merge"])
def test_alias_bomb_is_one_line_naming_the_file(tmp_path, capsys, text, words):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(text)
    for cmd in ("simulate", "tune"):
        assert main([cmd, "--timeloop", str(bomb)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("accel-tune: error:") and err.count("\n") == 1, err
        assert words in err and str(bomb) in err


def test_hardware_config_still_refuses_anchors(tmp_path, capsys):
    hw = tmp_path / "hw.yaml"
    hw.write_text("base: edge-npu\npe_rows: &n 16\npe_cols: *n\n")
    assert main(["hw", "show", str(hw)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("accel-tune: error:") and err.count("\n") == 1
    assert "anchors and aliases" in err and str(hw) in err
