"""Old module paths that moved (issue 21: partition/onnx, sim/ and tuner/search as packages) still import for one release, with a DeprecationWarning
naming the new place, and give the very objects of the new modules."""
import importlib
import sys

import pytest

MOVED = {
    "partition.onnx_import": ("partition.onnx.importer", "load_onnx"),
    "partition.onnx_converters": ("partition.onnx.converters", "CONVERTERS"),
    "partition.onnx_dynamic": ("partition.onnx.dynamic", "CONVERTERS"),
    "partition.onnx_composites": ("partition.onnx.composites", "COMPOSITES"),
    "partition.onnx_scan": ("partition.onnx.scan", "scan"),
    "partition.onnx_checks": ("partition.onnx.checks", "check_model"),
    "partition.onnx_external": ("partition.onnx.external", "load_external"),
    "partition.onnx_conformance": ("partition.onnx.conformance", "run_case"),
}

MOVED.update({
    "sim.movement": ("sim.cost.movement", "evaluate"),
    "sim.movement_batch": ("sim.cost.engines.batch", "evaluate_batch"),
    "sim.hardware": ("sim.hw.config", "HardwareConfig"),
    "sim.hw_hierarchy": ("sim.hw.config_hierarchy", "hierarchy_of"),
    "sim.subgraph": ("sim.graph.subgraph", "cost_graph"),
    "sim.timeloop.oracle": ("sim.validate.timeloop", "load_case"),
    "sim.mapping_policy": ("sim.mapping.policy", "default_mapping"),
    "tuner.space": ("tuner.search.space", "ScheduleSpace"),
    "tuner.mapsearch": ("tuner.search.mapsearch", "MapSearchConfig"),
    "tuner.model_policy": ("tuner.search.policy", "ModelPolicy"),
})


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_warns_and_forwards(old):
    new, name = MOVED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        mod = importlib.import_module(old)
    assert getattr(mod, name) is getattr(importlib.import_module(new), name)
    with pytest.raises(AttributeError):
        mod.no_such_name

# modules that became packages of the same name: their old names are read through the package
BECAME_PACKAGES = [("sim.mapping", "sim.mapping.mapping", "Mapping"),
                   ("sim.workload", "sim.workload.workload", "SPECIAL_OPS"),
                   ("sim.validate", "sim.validate.scalesim", "validate_file"),
                   ("tuner.search", "tuner.search.strategies", "breed")]


@pytest.mark.parametrize("package,new,name", BECAME_PACKAGES)
def test_old_names_of_a_module_that_became_a_package(package, new, name):
    pkg = importlib.import_module(package)
    with pytest.warns(DeprecationWarning, match=f"{new}.{name}".replace(".", r"\.")):
        got = getattr(pkg, name)
    assert got is getattr(importlib.import_module(new), name)
    with pytest.raises(AttributeError):
        pkg.no_such_name


def test_moved_schedule_and_workload_constructors_warn_and_agree():
    import sim
    hw = sim.load_hw("edge-npu")
    wl = sim.Workload.conv2d(1, 16, 14, 14, 32, 3, 3, pad=1)
    with pytest.warns(DeprecationWarning, match="sim.default_schedule"):
        assert sim.Schedule.default(wl, hw) == sim.default_schedule(wl, hw)
    with pytest.warns(DeprecationWarning, match="sim.scalesim_schedule"):
        assert sim.Schedule.scalesim(wl, hw, "os") == sim.scalesim_schedule(wl, hw, "os")
