"""The eyeriss and simba-like presets against their Timeloop equivalents (../shared/oracle/timeloop):
the preset's hierarchy, with the few values the Timeloop example sets differently (word width,
spad depths, block sizes) overridden to the example's, evaluates the mapping Timeloop's mapper
found to exactly Timeloop's reads, fills and updates at every level, and to its cycles.

Where they differ in structure: the eyeriss preset fans the GLB out to the 14 x 12 PEs in one
mesh, so PEs whose input rows coincide (row = q + s, Eyeriss's diagonal multicast) share one
read; Timeloop's example routes the fan-out through two containers (columns, then PEs in a
column), where only identical tiles within one container are multicast. With those two network
levels (``keeps = []``) inserted, the counts are Timeloop's; without them only the GLB's Inputs
reads differ, by exactly the diagonal sharing."""
import json
import math
from pathlib import Path

import pytest

import sim
from sim.hw.config_hierarchy import hierarchy_of
from sim.mapping.mapping import LevelMapping, Mapping
from sim.cost.movement import evaluate
from sim.workload.nest import conv2d

ORACLE = Path(__file__).resolve().parents[3] / "shared" / "oracle" / "timeloop"
if not ORACLE.is_dir():
    ORACLE = Path("/work/shared/oracle/timeloop")
pytestmark = pytest.mark.skipif(not ORACLE.is_dir(), reason="../shared/oracle/timeloop is not here")

# The Timeloop example's values where the preset follows the chip (Eyeriss: 16-bit words, 12 / 224 /
# 24-word spads, a 108 KB GLB) instead of the example (8-bit words, 24 / 384 / 16-word spads).
EYERISS_AS_TIMELOOP = {
    **{f"levels.{n}.word_bits": 8 for n in ("DRAM", "shared_glb", "ifmap_spad", "weights_spad")},
    "levels.DRAM.block_size": 8, "levels.shared_glb.block_size": 8, "levels.shared_glb.capacity_words": 131072,
    "levels.ifmap_spad.capacity_words": 24, "levels.ifmap_spad.block_size": 2,
    "levels.weights_spad.capacity_words": 384, "levels.weights_spad.block_size": 2,
    "levels.psum_spad.capacity_words": 16,
}
CASES = {"tl06_mapper_vgg02l5_eyeriss": ("eyeriss", EYERISS_AS_TIMELOOP),
         "ex_simba_like": ("simba-like", {})}


def _with_timeloops_networks(hw):
    """The eyeriss preset with Timeloop's example's containers: GLB -> 14 columns (X) -> 12 PEs
    per column (Y), as network levels that hold nothing."""
    d = hw.to_dict()
    glb = d["levels"].index(next(lv for lv in d["levels"] if lv["name"] == "shared_glb"))
    d["levels"][glb].update(fanout_x=1, fanout_y=1)
    net = {"capacity_words": 0, "keeps": [], "fanout_x": 1, "fanout_y": 1}
    d["levels"][glb + 1:glb + 1] = [{**net, "name": "inter_PE_column_spatial", "fanout_x": 14},
                                   {**net, "name": "inter_PE_spatial", "fanout_y": 12}]
    return sim.HardwareConfig.from_dict(d)


def _case(case_id):
    return json.loads((ORACLE / f"{case_id}.json").read_text())


def _nest(case):
    p = case["problem"]
    b, c = p["instance"], p["coefficients"]
    return conv2d(c=b["C"], m=b["M"], r=b["R"], s=b["S"], p=b["P"], q=b["Q"], n=b["N"],
                  stride=(c["Hstride"], c["Wstride"]), dilation=(c["Hdilation"], c["Wdilation"]))


def _mapping(case, hier):
    """Timeloop's mapping on the preset's levels: each real level's temporal loops (Timeloop
    lists permutations innermost first; ours are outermost first) and keeps; the spatial loops of
    the dummy levels between two real levels go to the outer one, which fans out to the inner."""
    tl = list(reversed(case["mapping"]["levels_inner_first"]))   # outermost first
    names = set(hier.names)
    real = [lm for lm in tl if lm["level"] in names]
    assert [lm["level"] for lm in real] == list(hier.names), "the preset's levels are Timeloop's, in order"
    out, cur = [], None
    for lm in tl:
        sx = {d: f for d, f in lm["spatial_factors_x"].items() if f > 1}
        sy = {d: f for d, f in lm["spatial_factors_y"].items() if f > 1}
        if lm["level"] not in names:
            for d, f in sx.items():
                cur["sx"][d] = cur["sx"].get(d, 1) * f
            for d, f in sy.items():
                cur["sy"][d] = cur["sy"].get(d, 1) * f
            continue
        cur = {"t": {d: f for d, f in lm["temporal_factors"].items() if f > 1},
               "perm": list(reversed(lm["permutation"])), "sx": sx, "sy": sy, "keep": lm["keep"]}
        out.append(cur)
    return Mapping(tuple(LevelMapping(temporal=tuple(m["t"].items()), permutation=tuple(m["perm"]),
                                      spatial_x=tuple(m["sx"].items()), spatial_y=tuple(m["sy"].items()),
                                      keep=frozenset(m["keep"])) for m in out))


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_preset_gives_timeloops_counts_on_its_equivalent_case(case_id):
    preset, overrides = CASES[case_id]
    case = _case(case_id)
    hw = sim.load_hw(preset).with_overrides(overrides)
    if preset == "eyeriss":
        hw = _with_timeloops_networks(hw)
    hier = hierarchy_of(hw)
    ref = {lv["name"]: lv for lv in case["reference"]["levels"]}
    # the preset's structure is the example's: instances and what each level may keep
    for lv in hier.levels:
        assert lv.instances == ref[lv.name]["instances"], lv.name
        assert lv.spatial_only == (lv.name.startswith("inter_")), lv.name
    nest = _nest(case)
    ev = evaluate(hier, nest, _mapping(case, hier))
    compared = 0
    for res in ev.levels:
        for name, counts in res.tensors:
            want = ref[res.name]["data_spaces"][name]
            got = (counts.reads, counts.fills, counts.updates)
            assert got == (want["scalar_reads_per_instance"], want["scalar_fills_per_instance"],
                           want["scalar_updates_per_instance"]), (res.name, name)
            assert res.utilized_instances == want["utilized_instances_max"], (res.name, name)
            compared += 1
    assert compared == sum(len(lv.get("data_spaces") or {}) for lv in case["reference"]["levels"])
    assert ev.cycles == case["reference"]["summary"]["cycles"]
    assert ev.computes == case["reference"]["summary"]["computes"]


def test_eyeriss_energy_equals_timeloops_on_the_equivalent_case():
    """With the example's per-access energies (the preset's, from its ERT) the access energy of
    every level equals Timeloop's (leakage and the MAC are left out: the example's MAC is an
    8-bit one at another energy)."""
    case = _case("tl06_mapper_vgg02l5_eyeriss")
    hw = _with_timeloops_networks(sim.load_hw("eyeriss").with_overrides(EYERISS_AS_TIMELOOP))
    hier = hierarchy_of(hw)
    ev = evaluate(hier, _nest(case), _mapping(case, hier))
    ref = {lv["name"]: lv for lv in case["reference"]["levels"]}
    for res in ev.levels:
        if res.spatial_only:
            assert res.energy_pj == 0.0
            continue
        want = sum(ds["derived"]["energy_total_pJ_precise"] if "energy_total_pJ_precise" in ds["derived"]
                   else ds["energy_total_pJ"] for ds in ref[res.name]["data_spaces"].values())
        assert math.isclose(res.access_energy_pj, want, rel_tol=1e-3), res.name


def test_eyeriss_one_mesh_credits_the_diagonal_multicast_and_nothing_else():
    case = _case("tl06_mapper_vgg02l5_eyeriss")
    hw = sim.load_hw("eyeriss").with_overrides(EYERISS_AS_TIMELOOP)
    hier = hierarchy_of(hw)
    ev = evaluate(hier, _nest(case), _mapping(case, hier))
    ref = {lv["name"]: lv for lv in case["reference"]["levels"]}
    diffs = {}
    for res in ev.levels:
        for name, c in res.tensors:
            want = ref[res.name]["data_spaces"][name]
            got = (c.reads, c.fills, c.updates)
            exp = (want["scalar_reads_per_instance"], want["scalar_fills_per_instance"],
                   want["scalar_updates_per_instance"])
            if got != exp:
                diffs[(res.name, name)] = (got, exp)
    assert list(diffs) == [("shared_glb", "Inputs")]
    (got, exp), = diffs.values()
    # Q14 x S3 PEs: Timeloop serves 14 x 3 = 42 distinct tiles (M4 multicast); one mesh sees that
    # PEs with equal q + s hold the same input rows: 14 + 3 - 1 = 16 distinct tiles.
    assert got[1:] == exp[1:] and got[0] * 42 == exp[0] * 16
