"""The cost models: what a kernel costs on the hardware, by fidelity.

The way in is ``kernel``: one public function per fidelity (``analytical_cost`` for one schedule or
a batch, ``tile_cost`` for one), with ``simulate`` (a report), ``simulate_batch`` and
``tile_cycles`` as the forms callers use; every other costing path (subgraphs, the tuner, the
runtime) goes through it. One named branch, ``kernel.systolic``, says which kernels the one-level
model costs (where it and the hierarchy's model disagree); the roofline's compute bound comes
from the hierarchy for every config. Behind it:

- a config with storage levels costs MAC kernels on its hierarchy: ``multilevel`` picks or takes
  the mapping, ``movement`` is the data-movement model (``evaluate``: one mapping; the engines of
  ``engines`` evaluate many at once, equal row by row), ``walk`` (with ``walk_pipeline``) follows
  the same mapping tile by tile (fidelity ``tile``);
- the one-level systolic branch (a config without levels, and vector kernels on any config):
  ``analytical`` is its closed form, vectorised over schedules, with SCALE-Sim's fill and drain
  and the vector unit; ``tile`` walks its tile loop nest with DMA and compute engines;
- ``report``: the frozen results (``KernelReport``, ``SubgraphReport``).
"""
