"""The Timeloop adapter on hand-written inputs: both architecture forms, every factor spelling,
mapping_yaml round trips, and one line for every unsupported or malformed construct."""
import textwrap

import pytest

from sim.timeloop import TimeloopError, evaluate, load, mapping_yaml
from sim.timeloop.mapping import read_mapping

ARCH = """
architecture:
  version: 0.4
  nodes:
  - !Container
    name: System
    attributes: {datawidth: 8}
  - !Component
    name: Main
    class: DRAM
    attributes: {width: 64}
  - !Container
    name: PE
    spatial: {meshX: 4}
  - !Component
    name: RF
    class: regfile
    attributes: {depth: 64, width: 8}
  - !Component
    name: MAC
    class: intmac
    attributes: {width: 8}
"""
PROBLEM = """
problem:
  version: 0.4
  shape:
    name: conv1d
    dimensions: [K, R, P]
    coefficients: [{name: Wstride, default: 1}]
    data_spaces:
    - {name: Weights, projection: [[[K]], [[R]]]}
    - {name: Inputs, projection: [[[R], [P, Wstride]]]}
    - {name: Outputs, projection: [[[K]], [[P]]], read_write: true}
  instance: {K: 8, R: 3, P: 16, Wstride: 2}
"""
MAP = """
mapping:
- {target: Main, type: temporal, factors: K=2 R=1 P=1, permutation: KRP}
- {target: PE, type: spatial, factors: K4, permutation: KRP}
- {target: RF, type: temporal, factors: "R=3,P=16", permutation: RPK}
- {target: RF, type: bypass, keep: [Weights, Outputs], bypass: [Inputs]}
"""
ERT = """
ERT:
  version: 0.4
  tables:
  - name: System.Main[1..1]
    actions: [{name: read, energy: 100.0}, {name: write, energy: 80.0}, {name: update, energy: 80.0}, {name: leak, energy: 0.0}]
  - name: System.RF[1..4]
    actions: [{name: read, energy: 1.0}, {name: write, energy: 1.0}, {name: update, energy: 1.0}, {name: leak, energy: 0.01}]
  - name: System.MAC[1..4]
    actions: [{name: compute, energy: 2.0}]
"""


def files(tmp_path, **over):
    parts = {"arch": ARCH, "problem": PROBLEM, "map": MAP, "ert": ERT, **over}
    out = []
    for k, v in parts.items():
        if v is None:
            continue
        p = tmp_path / f"{k}.yaml"
        p.write_text(textwrap.dedent(v))
        out.append(p)
    return out


def test_user_tree_gives_spatial_level_and_counts(tmp_path):
    hier, nest, m = load(files(tmp_path))
    assert hier.names == ("Main", "inter_PE_spatial", "RF")
    assert hier.levels[2].instances == 4 and hier.levels[0].block_size == 8
    assert nest.size("Inputs") == 2 * 15 + 2 + 1
    assert not m.keeps(hier, 2, "Inputs")
    js = evaluate(files(tmp_path)).to_json()
    assert [lv["name"] for lv in js["levels"]] == ["RF", "Main"]
    rf = js["levels"][0]
    assert set(rf["tensors"]) == {"Weights", "Outputs"}
    # Inputs bypass RF: Main serves every MAC operand, once per distinct operand (K is spatial)
    assert js["levels"][1]["tensors"]["Inputs"]["reads"] == 2 * 3 * 16
    assert js["cycles"] == 8 * 3 * 16 // 4


def test_mapping_yaml_round_trips(tmp_path):
    hier, nest, m = load(files(tmp_path))
    text = mapping_yaml(hier, nest, m)
    p = tmp_path / "back.yaml"
    p.write_text(text)
    hier2, nest2, m2 = load(files(tmp_path, map=None) + [p])
    assert evaluate(files(tmp_path)).to_json() == evaluate(files(tmp_path, map=None) + [p]).to_json()
    for a, b in zip(m.levels, m2.levels):
        assert {d: a.t(d) for d in nest.dim_names} == {d: b.t(d) for d in nest.dim_names}
        assert a.loop_order(nest.dim_names) == b.loop_order(nest.dim_names)
        assert {d: a.s(d) for d in nest.dim_names} == {d: b.s(d) for d in nest.dim_names}


@pytest.mark.parametrize("over, words", [
    ({"map": MAP.replace("K=2 R=1", "K=3 R=1")}, "factors of K multiply to 12"),
    ({"map": MAP.replace("target: Main,", "target: Nope,")}, "target 'Nope'"),
    ({"map": MAP.replace("type: bypass", "type: wormhole")}, "directive type 'wormhole'"),
    ({"map": MAP.replace("K4", "K8")}, "beyond the fan-out of 4"),
    ({"problem": PROBLEM.replace("Wstride: 2}", "Wstride: 2, densities: {Inputs: 0.5}}")}, "densities"),
    ({"ert": None}, "no Accelergy ERT"),
    ({"ert": ERT.replace("compute", "crunch")}, "no 'compute' energy"),
    ({"arch": ARCH.replace("depth: 64", "depth: 2")}, "beyond its capacity"),
    ({"arch": ARCH.replace("{width: 64}", "{width: 64, shared_bandwidth: 4}")}, "shared_bandwidth"),
    ({"arch": ARCH.replace("!Container\n    name: PE", "!Mystery\n    name: PE")}, "could not determine a constructor"),
    ({"arch": ARCH.replace("depth: 64", "depth: '{{ d }}'").replace("'", "")}, "'d' is undefined"),
    ({"problem": PROBLEM.replace("P: 16,", "")}, "no size for dimension P"),
    ({"arch": "sparse_optimizations:\n  targets: [{target: RF, action_optimization: []}]\n" + ARCH}, "sparse_optimizations"),
    ({"map": "mapping: 3\n"}, "list of directives"),
    ({"arch": "sparse_optimizations: {}\n" + ARCH, "problem": PROBLEM.replace("version: 0.4", "version: 0.4\n  bogus: 1")},
     None),
])
def test_unsupported_or_malformed_inputs_give_one_line(tmp_path, over, words):
    fs = files(tmp_path, **over)
    if words is None:   # tolerated keys: nothing to check but that it evaluates
        evaluate(fs)
        return
    with pytest.raises(TimeloopError) as e:
        evaluate(fs)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_unknown_top_level_key_and_template_file(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("wibble: 1\n")
    with pytest.raises(TimeloopError, match="unsupported top-level key 'wibble'"):
        evaluate([p])
    t = tmp_path / "top.yaml.jinja2"
    t.write_text("problem: {{ x }}\n")
    with pytest.raises(TimeloopError, match="'x' is undefined .*--timeloop-var x=VALUE"):
        evaluate([t])
    with pytest.raises(TimeloopError, match="no Timeloop files"):
        evaluate([])


def test_factor_spellings(tmp_path):
    hier, nest, _ = load(files(tmp_path))
    for spelling in ("K=2 R=1 P=1", "K=2,R=1,P=1", "K2 R1 P1", ["K=2", "R=1", "P=1"]):
        m = read_mapping([{"target": "Main", "type": "temporal", "factors": spelling, "permutation": "KRP"},
                          {"target": "PE", "type": "spatial", "factors": "K=4"},
                          {"target": "RF", "type": "temporal", "factors": "R=3 P=16", "permutation": ["R", "P", "K"]}],
                         hier, nest)
        m.check(hier, nest)
        assert m.levels[0].t("K") == 2 and m.levels[1].sx("K") == 4


@pytest.mark.parametrize("over", [
    {"map": MAP.replace("target: Main,", "target: {a: 1},")},
    {"map": MAP.replace("keep: [Weights, Outputs]", "keep: [{x: 1}]")},
    {"ert": ERT.replace("tables:", "tables: true\n  other:")},
    {"arch": ARCH.replace("depth: 64", "depth: .nan")},
    {"problem": PROBLEM.replace("K: 8,", "K: [8],")},
    {"map": MAP.replace("permutation: RPK", "permutation: [R, {P: 1}, K]")},
])
def test_values_of_the_wrong_type_give_one_line(tmp_path, over):
    with pytest.raises(TimeloopError) as e:
        evaluate(files(tmp_path, **over))
    assert "\n" not in str(e.value)


def test_expressions_over_variables_and_container_attributes(tmp_path):
    from sim.timeloop.expr import evaluate_text, resolve
    assert evaluate_text("2 * W + 1", {"W": 8}) == 17
    assert evaluate_text("log2(N)", {"N": 64}) == 6
    assert evaluate_text("40nm", {}) == "40nm" and evaluate_text("LPDDR4", {}) == "LPDDR4"
    assert evaluate_text("__import__('os').getcwd()", {}) == "__import__('os').getcwd()"
    assert evaluate_text("W.__class__", {"W": 1}) == "W.__class__"
    assert evaluate_text("9 ** 99999", {}) == "9 ** 99999"
    assert resolve({"width": "DW * 8", "depth": "width * 2"}, {"DW": 8}) == {"width": 64, "depth": 128}
    arch = ARCH.replace("{datawidth: 8}", "{datawidth: DW}").replace("{depth: 64, width: 8}", "{depth: DEPTH // 2, width: datawidth}")
    fs = files(tmp_path, arch="variables: {DW: 8, DEPTH: 128}\n" + arch)
    hier, _, _ = load(fs)
    assert hier.levels[2].capacity_words == 64 and hier.levels[2].word_bits == 8
    plain = tmp_path / "plain"
    plain.mkdir()
    assert evaluate(fs).to_json() == evaluate(files(plain)).to_json()
