"""A known gap found by experiments/bench/mapping_regimes.py: the mapspace lets one dim be split
over both X and Y at one level on hierarchies without spatial constraints (the eyeriss preset),
and a Timeloop mapping file cannot say that (a dim appears once in a spatial permutation, before
or after ``split``), so ``mapping_yaml`` reads back as another, illegal mapping. Whoever fixes it
(forbid the split in the space, or refuse to write it) turns this xfail into a pass."""
import numpy as np
import pytest
import yaml

import sim
from sim.hw_hierarchy import hierarchy_of
from sim.mapspace_sim import build_space
from sim.nest import conv2d
from sim.timeloop import mapping_yaml
from sim.timeloop.mapping import read_mapping


def _mappings(both: bool):
    hier = hierarchy_of(sim.load_hw("eyeriss"))
    nest = conv2d(c=64, m=64, r=3, s=3, p=56, q=56)
    space = build_space(hier, nest)
    a = space.arrays(space.sample(400, np.random.default_rng(0)))
    split = ((a.spatial_x > 1) & (a.spatial_y > 1)).any(axis=(1, 2))
    rows = np.flatnonzero(split == both)[:5]
    assert len(rows), "the sample has no such mapping"
    return hier, nest, [a.mapping(hier, nest, int(b)) for b in rows]


def _round_trips(hier, nest, m) -> bool:
    back = read_mapping(yaml.safe_load(mapping_yaml(hier, nest, m))["mapping"], hier, nest)
    back.check(hier, nest)
    nonunit = lambda fs: {d: f for d, f in fs if f > 1}
    return all(nonunit(x.spatial_x) == nonunit(y.spatial_x) and nonunit(x.spatial_y) == nonunit(y.spatial_y)
               and nonunit(x.temporal) == nonunit(y.temporal) for x, y in zip(m.levels, back.levels))


def test_mappings_without_an_xy_split_round_trip():
    hier, nest, ms = _mappings(both=False)
    assert all(_round_trips(hier, nest, m) for m in ms)


@pytest.mark.xfail(strict=True, reason="a dim split over X and Y has no Timeloop spelling (docs/TUNING.md)")
def test_a_dim_over_x_and_y_round_trips_through_a_timeloop_file():
    hier, nest, ms = _mappings(both=True)
    assert all(_round_trips(hier, nest, m) for m in ms)
