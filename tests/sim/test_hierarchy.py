"""The hierarchy value: fan-out from instance counts, one-line errors, the one-buffer special case."""
import pytest

from sim.hw.config import HardwareConfig
from sim.hw.hierarchy import Arithmetic, Hierarchy, HierarchyError, StorageLevel, hierarchy_from_hardware


def eyeriss_like():
    return Hierarchy((
        StorageLevel("DRAM", word_bits=16, block_size=4),
        StorageLevel("glb", capacity_words=65536, word_bits=16, block_size=4),
        StorageLevel("inter_PE_spatial", spatial_only=True),
        StorageLevel("ifmap_spad", capacity_words=12, instances=168, mesh_x=14, keeps={"Inputs"}),
        StorageLevel("psum_spad", capacity_words=16, instances=168, mesh_x=14, keeps={"Outputs"}),
    ), Arithmetic("MAC", instances=168, mesh_x=14, mac_pj=2.0))


def test_fanout_follows_instances_and_mesh():
    h = eyeriss_like()
    assert h.levels[3].mesh_y == 12
    assert h.fanout(0) == (1, 1)
    assert h.fanout(2) == (14, 12)
    assert h.fanout(3) == (1, 1)
    assert h.fanout(4) == (1, 1)
    assert h.levels[2].keeps == frozenset()
    assert h.index("glb") == 1


@pytest.mark.parametrize("build, words", [
    (lambda: StorageLevel("x", instances=0), "instances"),
    (lambda: StorageLevel("x", instances=6, mesh_x=4), "mesh_x=4 must divide"),
    (lambda: StorageLevel("x", capacity_words=-1), "capacity_words"),
    (lambda: StorageLevel("x", read_pj=float("nan")), "read_pj"),
    (lambda: StorageLevel("x", read_bandwidth=0), "read_bandwidth"),
    (lambda: StorageLevel("x", keeps="Inputs"), "keeps"),
    (lambda: StorageLevel("x", spatial_only=True, keeps={"Inputs"}), "spatial_only"),
    (lambda: Hierarchy(()), "at least one"),
    (lambda: Hierarchy((StorageLevel("a"), StorageLevel("a"))), "appears twice"),
    (lambda: Hierarchy((StorageLevel("a", instances=4), StorageLevel("b", instances=6))), "multiple of"),
    (lambda: Hierarchy((StorageLevel("a", instances=2, mesh_x=1),), Arithmetic(instances=2)), "mesh_y=1 must be a multiple"),
    (lambda: Hierarchy((StorageLevel("a", spatial_only=True),)), "outermost"),
])
def test_bad_values_give_one_line(build, words):
    with pytest.raises(HierarchyError) as e:
        build()
    assert words in str(e.value) and "\n" not in str(e.value)


def test_one_buffer_hardware_is_dram_buffer_array():
    hw = HardwareConfig.load("eyeriss-like")
    h = hierarchy_from_hardware(hw)
    assert h.names == ("DRAM", "Buffer")
    assert h.levels[1].capacity_words == hw.buffers.total_bytes // hw.array.word_bytes
    assert h.arithmetic.instances == hw.array.rows * hw.array.cols
    assert h.fanout(1) == (hw.array.cols, hw.array.rows)
    wb = hw.array.word_bytes
    assert h.levels[0].read_pj == pytest.approx(hw.energy.dram_pj_per_byte * wb)
    assert h.arithmetic.mac_pj == hw.energy.mac_pj
