"""Engines that evaluate the data-movement model (``sim.cost.movement``) over many mappings at
once; ``sim.mapping.policy.evaluate_arrays`` picks one, and every engine gives ``movement.evaluate``'s
numbers row by row.

- ``batch``: numpy, vectorised over a batch of mappings (``engine="numpy"``);
- ``jit``: numba, one loop per mapping; ``jitloop`` is its generic kernel, ``jitgen`` writes a
  kernel specialised to one (hierarchy, nest) shape (the optional ``fast`` extra).
"""
