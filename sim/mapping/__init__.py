"""How a kernel runs on the hardware.

- ``schedule``: ``Schedule``, one kernel on the one-level machine (dataflow, spatial mapping,
  tiles, loop order, double buffering, fused epilogue), and its legality check;
- ``footprint``: the tile geometry every one-level cost term shares;
- ``defaults``: schedules that need no search: ``default_schedule`` and SCALE-Sim's own
  ``scalesim_schedule``;
- ``mapping``: ``Mapping``, a multi-level mapping (per level: temporal factors and order, spatial
  factors, what it keeps or bypasses);
- ``mapspace`` and ``mapspace_sim``: the space of mappings of a nest onto a hierarchy (generic, and
  for sim's values with user constraints);
- ``policy``: the default mapping of a nest on a hierarchy (a short deterministic search).

Before issue 21 ``sim.mapping`` was the module now named ``sim.mapping.mapping``; its names are
still read from here for one release, with a DeprecationWarning.
"""
from partition.moved import moved_names as _moved_names

__getattr__ = _moved_names(__name__, "sim.mapping.mapping")
