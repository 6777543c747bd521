"""best_mapping (the call whole-network costing makes): on today's one-buffer hardware as a
two-level hierarchy (the special case) and on a small multi-level one, the mapping it returns is
legal, its stats are sim.cost.movement.evaluate's numbers for it, and it is at least as good as a
simple hand mapping."""
import pytest

import sim
from sim.hw.hierarchy import Arithmetic, Hierarchy, StorageLevel, hierarchy_from_hardware
from sim.mapping.mapping import LevelMapping, Mapping
from sim.cost.movement import evaluate
from sim.workload.nest import conv1d, nest_from_workload
from tuner.search.mapper import best_mapping


@pytest.mark.parametrize("metric", ["edp", "delay", "energy"])
def test_one_buffer_hardware_is_the_two_level_case(metric):
    hw = sim.load_hw("edge-npu")
    nest = nest_from_workload(sim.Workload.gemm(64, 48, 32))
    hier = hierarchy_from_hardware(hw)
    m, st = best_mapping(hier, nest, metric, budget=3000)
    m.check(hier, nest)
    ev = evaluate(hier, nest, m)
    assert st["cycles"] == ev.cycles and st["energy_pj"] == pytest.approx(ev.energy_pj)
    assert st["evaluations"] <= 3000 and st["seconds"] > 0
    assert ev.cycles >= nest.macs // hier.arithmetic.instances
    # everything streamed from DRAM, one MAC at a time: the search must do at least as well
    naive = Mapping((LevelMapping(temporal=tuple(nest.dims)), LevelMapping()))
    nv = evaluate(hier, nest, naive)
    key = {"edp": lambda e: e.cycles * e.energy_pj, "delay": lambda e: e.cycles, "energy": lambda e: e.energy_pj}[metric]
    assert key(ev) <= key(nv)


def test_multilevel_uses_the_fanout_for_delay():
    hier = Hierarchy((StorageLevel("DRAM", read_pj=100.0, fill_pj=100.0, update_pj=100.0),
                      StorageLevel("GLB", capacity_words=512, read_pj=5.0, fill_pj=5.0, update_pj=5.0),
                      StorageLevel("RF", capacity_words=16, instances=16, mesh_x=4, mesh_y=4,
                                   read_pj=0.5, fill_pj=0.5, update_pj=0.5)),
                     Arithmetic("MAC", instances=16, mesh_x=4, mesh_y=4, mac_pj=1.0))
    nest = conv1d(16, 16, 3, 16)
    m, st = best_mapping(hier, nest, "delay", budget=4000)
    assert st["cycles"] == nest.macs // 16          # every MAC busy: the delay optimum
    assert m.utilized_macs() == 16
