"""The hardware: what an accelerator is, and how a description of one is read.

- ``config``: ``HardwareConfig``, the one frozen, validated configuration tree (PE array, buffers,
  DRAM, vector unit, clock, energy and area, host and link models, storage levels), ``load_hw``;
- ``configfile``: reading a TOML/YAML/JSON file as untrusted input (size, aliases, duplicate keys);
- ``hierarchy``: ``Hierarchy``, the multi-level model's storage levels from DRAM down to the MACs;
- ``config_hierarchy``: a ``HardwareConfig`` as the ``Hierarchy`` it describes;
- ``presets``: the named presets, one TOML file each, with their sources.
"""
from .config import HardwareConfig, HardwareError, load_hw
from .hierarchy import Hierarchy, HierarchyError, StorageLevel
from . import presets

__all__ = ["HardwareConfig", "HardwareError", "load_hw", "Hierarchy", "HierarchyError", "StorageLevel", "presets"]
