"""merge_compiler_regions: each graph shape gets the regions written next to its fixture."""
from __future__ import annotations

import pytest

from partition.byoc import annotate_target, candidate_regions, merge_compiler_regions, regions
from partition.byoc.merge_regions import RegionError, form_regions

from test_byoc_fixtures import (CYCLE_REGION_REGIONS, CYCLE_REGIONS, DIAMOND_REGIONS, OUTPUTS_REGIONS,
                                PRODUCERS_REGIONS, acc_target, cycle_through_region, diamond_through_host,
                                host_between_region_nodes, multiple_outputs, multiple_producers,
                                nested_if, nested_loop, region_sets, repeated_blocks, would_be_cycle)


def merged(g, target=None, keep=frozenset()):
    t = target or acc_target()
    g = merge_compiler_regions(annotate_target(g, t), t, keep_on_host=keep)
    g.lint()
    return g


@pytest.mark.parametrize("build, expected", [
    (diamond_through_host, DIAMOND_REGIONS),
    (would_be_cycle, CYCLE_REGIONS),
    (cycle_through_region, CYCLE_REGION_REGIONS),
    (multiple_producers, PRODUCERS_REGIONS),
    (multiple_outputs, OUTPUTS_REGIONS),
    (host_between_region_nodes, {frozenset({"a", "b"})}),
    (repeated_blocks, {frozenset({"add1", "relu1"}), frozenset({"add2", "relu2"})}),
], ids=lambda x: getattr(x, "__name__", ""))
def test_regions_by_graph_shape(build, expected):
    assert region_sets(merged(build())) == expected


def test_host_nodes_get_no_region():
    g = merged(diamond_through_host())
    assert "region" not in g.node_by_name("b").meta
    assert g.node_by_name("b").meta.get("target") is None


def test_region_boundary_query():
    g = merged(multiple_outputs())
    (r,) = regions(g)
    assert r.id == 0 and r.graph == "outputs"
    assert r.nodes == ("a", "b")
    assert r.inputs == ("x",) and r.constants == ()
    assert set(r.outputs) == {g.node_by_name("a").output.name, g.node_by_name("b").output.name}


def test_region_query_separates_constants():
    g = merged(repeated_blocks())
    r0, r1 = regions(g)
    assert (r0.inputs, r0.constants) == (("x",), ("c",))
    assert (r1.inputs, r1.constants) == ((g.node_by_name("t").output.name,), ("c2",))


def test_nested_if_keeps_control_on_host_and_partitions_branches():
    g = merged(nested_if())
    branch = g.node_by_name("branch")
    assert "region" not in branch.meta
    then_g, else_g = branch.attrs["then_branch"], branch.attrs["else_branch"]
    assert region_sets(then_g) == {frozenset({"then_relu", "then_add"})}
    assert region_sets(else_g) == {frozenset({"else_relu", "else_mul"})}
    # greater and reduce_sum are not offloaded by acc; pre is its own region. Ids: graph first,
    # then bodies in node order.
    rs = regions(g)
    assert [(r.id, r.graph, r.nodes) for r in rs] == [
        (0, "nested_if", ("pre",)),
        (1, "nested_if/branch.then_branch", ("then_relu", "then_add")),
        (2, "nested_if/branch.else_branch", ("else_relu", "else_mul")),
    ]


def test_nested_loop_body_regions():
    g = merged(nested_loop())
    body = g.node_by_name("lp").attrs["body"]
    assert region_sets(body) == {frozenset({"body_relu", "body_mul"})}
    assert region_sets(g) == set()


def test_keep_on_host_drops_only_the_chosen_region():
    all_regions = region_sets(merged(cycle_through_region()))
    ids = {r.id: frozenset(r.nodes) for r in regions(merged(cycle_through_region()))}
    for rid, nodes in ids.items():
        kept = merged(cycle_through_region(), keep=frozenset({rid}))
        assert region_sets(kept) == all_regions - {nodes}
        assert {r.id for r in regions(kept)} == set(ids) - {rid}


def test_keep_on_host_unknown_id_is_one_clear_error():
    with pytest.raises(RegionError, match=r"unknown region id\(s\) 7; candidate regions: 0\.\.2"):
        merged(cycle_through_region(), keep=frozenset({7}))


def test_candidate_region_ids_are_stable_and_do_not_mutate():
    g = cycle_through_region()
    before = str(g)
    a = candidate_regions(g, acc_target())
    b = candidate_regions(g, acc_target())
    assert a == b and [r.id for r in a] == [0, 1, 2]
    assert str(g) == before and all("region" not in n.meta for n in g.nodes)


def test_prune_policy_no_compute_drops_layout_only_region():
    from partition import Graph
    g = Graph("layout")
    x = g.add_input("x", (2, 3))
    r = g.add_node("reshape", [x], {"shape": (3, 2)}, name="rs").output
    e = g.add_node("exp", [r], name="e").output
    a = g.add_node("relu", [e], name="a").output
    g.set_outputs([a])
    assert region_sets(merged(g, acc_target(prune_policy="none"))) == {frozenset({"rs"}), frozenset({"a"})}
    assert region_sets(merged(g, acc_target(prune_policy="no_compute"))) == {frozenset({"a"})}


def test_form_regions_is_maximal_along_a_chain():
    g = repeated_blocks()
    groups = form_regions(g, lambda n: n.op != "tanh")
    assert [[n.name for n in grp] for grp in groups] == [["add1", "relu1"], ["add2", "relu2"]]
    groups = form_regions(g, lambda n: True)
    assert [[n.name for n in grp] for grp in groups] == [["add1", "relu1", "t", "add2", "relu2"]]


def test_regions_are_acyclic_when_contracted():
    """Independent check: contract every region to one vertex and look for a cycle."""
    for build in (diamond_through_host, would_be_cycle, cycle_through_region, multiple_outputs):
        g = merged(build())
        unit = {id(n): ("r", n.meta["region"]) if "region" in n.meta else ("n", n.name) for n in g.nodes}
        edges = {(unit[id(v.producer)], unit[id(n)]) for n in g.nodes for v in n.inputs
                 if v.producer is not None and unit[id(v.producer)] != unit[id(n)]}
        verts = set(unit.values())
        indeg = {u: 0 for u in verts}
        for _, b in edges:
            indeg[b] += 1
        ready = [u for u in verts if indeg[u] == 0]
        seen = 0
        while ready:
            u = ready.pop()
            seen += 1
            for a, b in edges:
                if a == u:
                    indeg[b] -= 1
                    if indeg[b] == 0:
                        ready.append(b)
        assert seen == len(verts), build.__name__
