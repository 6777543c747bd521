"""Timeloop constraints and mapper metric: Timeloop's parsing rules (D=0 is the whole dim, a factor
above the dim is clamped, permutation letters innermost first, split into X and Y, the v0.4 tree's
keep-only dataspace bypassing the rest), merged sources, and one error for anything malformed."""
import pytest
from hypothesis import given, settings, strategies as st

from sim.mapping.mapspace import MapspaceError
from sim.timeloop.constraints import mapper_metric, parse_factors, read_constraints

DIMS = ("C", "M", "R", "S", "N", "P", "Q")
B = {"C": 128, "M": 256, "R": 3, "S": 3, "N": 1, "P": 56, "Q": 56}
T = ("Weights", "Inputs", "Outputs")


def rc(doc):
    return {c.level: c for c in read_constraints(doc, DIMS, B, T)}


def test_factor_rules():
    assert dict(parse_factors("R=3,S=0,M=512", B, "x")) == {"R": 3, "S": 3, "M": 256}
    assert dict(parse_factors(["N=1", "P=7"], B, "x")) == {"N": 1, "P": 7}
    with pytest.raises(MapspaceError, match="factor bound"):
        parse_factors("M<=16", B, "x")
    with pytest.raises(MapspaceError, match="dim 'K'"):
        parse_factors("K=2", B, "x")
    with pytest.raises(MapspaceError, match="given twice"):
        parse_factors("M=2 M=4", B, "x")


def test_processed_targets_with_split():
    c = rc({"architecture_constraints": {"targets": [
        {"target": "PE", "type": "spatial", "factors": "N=1,P=1", "permutation": "NPQRSCM", "split": 4},
        {"target": "glb", "type": "temporal", "permutation": "N"},
        {"target": "glb", "type": "bypass", "keep": ["Inputs"], "bypass": ["Weights"]}]}})
    assert set(c["PE"].spatial_x) == {"N", "P", "Q", "R"} and set(c["PE"].spatial_y) == {"S", "C", "M"}
    assert dict(c["PE"].spatial) == {"N": 1, "P": 1}
    assert c["glb"].permutation == ("N",) and c["glb"].keep == ("Inputs",) and c["glb"].bypass == ("Weights",)


def test_v04_tree_constraints():
    arch = {"architecture": {"nodes": [
        {"!": "Component", "name": "DRAM", "class": "DRAM"},
        {"!": "Container", "name": "PE", "spatial": {"meshX": 4},
         "constraints": {"spatial": {"factors": "R=1", "permutation": ["M", "C"], "split": 1}}},
        {"!": "Parallel", "nodes": [
            {"!": "Component", "name": "spad", "class": "regfile",
             "constraints": {"dataspace": {"keep": ["Weights"]}, "temporal": {"factors": ["C=2"]}}},
            {"!": "Nothing", "constraints": {"dataspace": {"keep": ["Inputs"]}}}]}]}}
    c = rc(arch)
    assert c["inter_PE_spatial"].spatial_x == ("M",) and "C" in c["inter_PE_spatial"].spatial_y
    assert c["spad"].keep == ("Weights",) and set(c["spad"].bypass) == {"Inputs", "Outputs"}
    assert dict(c["spad"].temporal) == {"C": 2}


def test_conflicts_and_unsupported_are_errors():
    with pytest.raises(MapspaceError, match="given twice"):
        rc({"mapspace_constraints": [{"target": "g", "type": "temporal", "factors": "M=2"},
                                     {"target": "g", "type": "temporal", "factors": "M=4"}]})
    with pytest.raises(MapspaceError, match="both kept and bypassed"):
        rc({"mapspace": {"targets": [{"target": "g", "type": "bypass", "keep": ["Inputs"]},
                                     {"target": "g", "type": "bypass", "bypass": ["Inputs"]}]}})
    with pytest.raises(MapspaceError, match="utilization"):
        rc({"constraints": {"targets": [{"target": "g", "type": "utilization", "min": 0.5}]}})
    with pytest.raises(MapspaceError, match="keep must be a list"):
        rc({"constraints": [{"target": "g", "type": "bypass", "keep": "Inputs"}]})


def test_mapper_metric():
    assert mapper_metric({"mapper": {"optimization_metrics": ["delay", "energy"]}}) == "delay"
    assert mapper_metric({"mapper": {"optimization_metric": ["energy"]}}) == "energy"
    assert mapper_metric({"mapper": {"optimization_metrics": ["edp"]}}) == "edp"
    assert mapper_metric({}) == "edp"
    with pytest.raises(MapspaceError, match="last_level_accesses"):
        mapper_metric({"mapper": {"optimization_metrics": ["last_level_accesses"]}})


junk = st.recursive(st.none() | st.booleans() | st.integers(-3, 300) | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                    max_leaves=8)
fields = st.fixed_dictionaries({}, optional={
    "target": st.sampled_from(["g", "PE", 3, None]), "type": st.sampled_from(["temporal", "spatial", "bypass", "x", 1]),
    "factors": junk | st.sampled_from(["M=2", "R=3 S=1", "Q=0"]), "permutation": junk | st.just("MC"),
    "split": junk, "keep": junk | st.just(["Inputs"]), "bypass": junk, "attributes": junk, "extra": junk})


@settings(max_examples=300, deadline=None)
@given(st.lists(fields | junk, max_size=4), st.sampled_from(["architecture_constraints", "mapspace_constraints",
                                                              "mapspace", "constraints"]))
def test_malformed_constraints_are_one_mapspace_error(targets, key):
    try:
        read_constraints({key: {"targets": targets}}, DIMS, B, T)
    except MapspaceError as e:
        assert str(e) and "\n" not in str(e)
