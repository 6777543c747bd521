"""Old module paths that moved (issue 21) still import for one release, with a DeprecationWarning
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


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_warns_and_forwards(old):
    new, name = MOVED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        mod = importlib.import_module(old)
    assert getattr(mod, name) is getattr(importlib.import_module(new), name)
    with pytest.raises(AttributeError):
        mod.no_such_name
