"""Mappings: the one-line errors for every illegal case, and tiles / utilized instances."""
import pytest

from sim.hw.hierarchy import Arithmetic, Hierarchy, StorageLevel
from sim.mapping.mapping import LevelMapping, Mapping, MappingError
from sim.workload.nest import conv1d


def hier():
    return Hierarchy((
        StorageLevel("Main"),
        StorageLevel("Glb", capacity_words=256, instances=1),
        StorageLevel("RF", capacity_words=64, instances=4, keeps={"Inputs", "Outputs", "Weights"}),
    ), Arithmetic(instances=4))


def good():
    # K=8 = 2 (Main) * 4 (spatial at Glb); P=16 at RF; R=3 at RF; C=4 at Glb
    return Mapping((
        LevelMapping(temporal={"K": 2}),
        LevelMapping(temporal={"C": 4}, spatial_x={"K": 4}),
        LevelMapping(temporal={"R": 3, "P": 16}, permutation=("P", "R")),
    ))


NEST = conv1d(c=4, k=8, r=3, p=16)


def test_good_mapping_tiles_and_instances():
    m = good()
    m.check(hier(), NEST)
    assert m.tile_words(NEST, 2, "Inputs") == 18
    assert m.tile_words(NEST, 2, "Weights") == 3
    assert m.tile_words(NEST, 1, "Weights") == 4 * 4 * 3
    assert m.tile_words(NEST, 1, "Outputs") == 4 * 16
    assert m.utilized_instances(2) == 4 and m.utilized_instances(1) == 1
    assert m.utilized_macs() == 4
    assert m.levels[2].loop_order(NEST.dim_names) == ("P", "R")


def _replace(i, **kw):
    m = good()
    lv = list(m.levels)
    old = lv[i]
    lv[i] = LevelMapping(**{**dict(temporal=old.temporal, permutation=old.permutation,
                                   spatial_x=old.spatial_x, spatial_y=old.spatial_y, keep=old.keep,
                                   bypass=old.bypass), **kw})
    return Mapping(tuple(lv))


@pytest.mark.parametrize("m, words", [
    (lambda: _replace(0, temporal={"K": 3}), "factors of K multiply to 12"),
    (lambda: _replace(1, temporal={"C": 4}, spatial_x={"K": 8}), "beyond the fan-out of 4"),
    (lambda: _replace(1, temporal={"C": 4}, spatial_y={"K": 4}), "spatial Y"),
    (lambda: _replace(2, temporal={"R": 3, "P": 16, "Z": 1}), "dim Z"),
    (lambda: _replace(0, temporal={"K": 2}, bypass={"Inputs"}), "backing store"),
    (lambda: _replace(1, keep={"Nope"}), "data space Nope"),
    (lambda: Mapping(good().levels[:2]), "2 levels"),
    (lambda: _replace(2, temporal={"R": 3, "P": 16}, keep=None), None),
])
def test_illegal_mappings_name_the_problem(m, words):
    if words is None:
        m().check(hier(), NEST)
        return
    with pytest.raises(MappingError) as e:
        m().check(hier(), NEST)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_overflow_names_level_and_capacity():
    m = Mapping((LevelMapping(temporal={"K": 2}), LevelMapping(spatial_x={"K": 4}),
                 LevelMapping(temporal={"C": 4, "R": 3, "P": 16})))
    with pytest.raises(MappingError, match="RF: tiles of .* take 100 words, beyond its capacity of 64"):
        m.check(hier(), NEST)
    # bypassing Inputs at RF is legal when it then fits
    h = Hierarchy((StorageLevel("Main"), StorageLevel("Glb", capacity_words=256),
                   StorageLevel("RF", capacity_words=1000, instances=4, keeps={"Weights"})), Arithmetic(instances=4))
    m.check(h, NEST)
    with pytest.raises(MappingError, match="may only keep Weights"):
        Mapping(m.levels[:2] + (LevelMapping(temporal={"C": 4, "R": 3, "P": 16}, keep={"Inputs"}),)).check(h, NEST)


def test_prime_factors():
    from sim.mapping.mapping import prime_factors
    assert prime_factors(1) == [] and prime_factors(12) == [2, 2, 3] and prime_factors(97) == [97]
    for n in (56, 128, 224, 1000003 * 4):
        fs = prime_factors(n)
        assert all(fs[i] <= fs[i + 1] for i in range(len(fs) - 1))
        prod = 1
        for f in fs:
            prod *= f
        assert prod == n


@pytest.mark.parametrize("build", [lambda: LevelMapping(temporal=5), lambda: LevelMapping(spatial_x="K4"),
                                   lambda: Mapping(levels=3), lambda: Mapping((1, 2))])
def test_wrong_types_give_one_line(build):
    with pytest.raises(MappingError) as e:
        build()
    assert "\n" not in str(e.value)
