"""The simulator against its peers' recorded results (shared/oracle/).

- ``scalesim_files``: reading SCALE-Sim result files into our objects;
- ``scalesim``: ours vs SCALE-Sim per case, on the same terms (``validate_file``, ``compare_case``);
- ``timeloop``: reading a Timeloop oracle case and comparing every per-level statistic;
- ``eyeriss``: ours vs the fabricated Eyeriss chip's measured layers (``compare``, ``vgg16``);
- ``recount``: a brute-force recount of the data-movement counts, for checking the closed form on
  small nests.

Before issue 21 ``sim.validate`` was the module now named ``sim.validate.scalesim``; its names are
still read from here for one release, with a DeprecationWarning.
"""
from partition.moved import moved_names as _moved_names

__getattr__ = _moved_names(__name__, "sim.validate.scalesim")
