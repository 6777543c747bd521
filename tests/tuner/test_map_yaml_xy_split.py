"""A dim split over both X and Y at one level (legal on the presets' hierarchies, which the
mapspace allows there) has no Timeloop spelling: a spatial directive lists each dim once, before
or after ``split``. So the writer refuses it in one line rather than write another mapping, and
the spaces searched for Timeloop files (``spatial_one_axis``, used by ``tune --timeloop``) never
produce it: every mapping they give round-trips through a Timeloop mapping file."""
import numpy as np
import pytest
import yaml

import sim
from sim.hw.config_hierarchy import hierarchy_of
from sim.mapping.mapspace import neighbours
from sim.mapping.mapspace_sim import build_space
from sim.workload.nest import conv2d
from sim.timeloop import mapping_yaml
from sim.timeloop.errors import TimeloopError
from sim.timeloop.mapping import read_mapping


def _setup(one_axis: bool):
    hier = hierarchy_of(sim.load_hw("eyeriss"))
    nest = conv2d(c=64, m=64, r=3, s=3, p=56, q=56)
    return hier, nest, build_space(hier, nest, spatial_one_axis=one_axis)


def _xy(a) -> np.ndarray:
    return ((a.spatial_x > 1) & (a.spatial_y > 1)).any(axis=(1, 2))


def _round_trips(hier, nest, m) -> bool:
    back = read_mapping(yaml.safe_load(mapping_yaml(hier, nest, m))["mapping"], hier, nest)
    back.check(hier, nest)
    nonunit = lambda fs: {d: f for d, f in fs if f > 1}
    return all(nonunit(x.spatial_x) == nonunit(y.spatial_x) and nonunit(x.spatial_y) == nonunit(y.spatial_y)
               and nonunit(x.temporal) == nonunit(y.temporal) and x.keep == y.keep
               for x, y in zip(m.levels, back.levels))


def test_mappings_without_an_xy_split_round_trip():
    hier, nest, space = _setup(False)
    a = space.arrays(space.sample(400, np.random.default_rng(0)))
    rows = np.flatnonzero(~_xy(a))[:5]
    assert len(rows) and all(_round_trips(hier, nest, a.mapping(hier, nest, int(b))) for b in rows)


def test_the_writer_refuses_an_xy_split_in_one_line():
    hier, nest, space = _setup(False)
    a = space.arrays(space.sample(400, np.random.default_rng(0)))
    rows = np.flatnonzero(_xy(a))
    assert len(rows), "the preset's space has such mappings"
    with pytest.raises(TimeloopError, match="over both X and Y at level") as e:
        mapping_yaml(hier, nest, a.mapping(hier, nest, int(rows[0])))
    assert "\n" not in str(e.value)


def test_the_timeloop_space_never_splits_a_dim_over_x_and_y():
    hier, nest, space = _setup(True)
    rng = np.random.default_rng(1)
    rows = space.sample(400, rng)
    assert space.valid(rows).all() and not _xy(space.arrays(rows)).any()
    assert not _xy(space.arrays(neighbours(space, rows[0]))).any()
    # the same rows as the free space sees them: the rule is what removes the split, not chance
    free = build_space(hier, nest)
    free_rows = free.sample(400, np.random.default_rng(1))
    assert _xy(free.arrays(free_rows)).any() and not space.valid(free_rows[_xy(free.arrays(free_rows))]).any()
    a = space.arrays(rows)
    assert all(_round_trips(hier, nest, a.mapping(hier, nest, k)) for k in range(0, 400, 40))


def test_tune_timeloop_search_stays_in_the_timeloop_space():
    from tuner.search.mapper import search_mapping
    from sim.mapping.mapspace_sim import to_mapping
    hier, nest, _ = _setup(True)
    space, res = search_mapping(hier, nest, "edp", budget=600, spatial_one_axis=True)
    m = to_mapping(space, res.genes)
    assert _round_trips(hier, nest, m)
