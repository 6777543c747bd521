"""Hardware design-space sweeps: a spec of axes over a base accelerator, the points it spans, their
evaluation (every model tuned on every point) on local processes or Dask, exact Pareto fronts and an
offline HTML report.

    spec = load_spec("experiments/sweeps/edge_small.toml")
    res = run_sweep(spec, "out/edge_small", workers=2)      # resumable
    front = pareto_front(objective_matrix(list(res.rows)))
"""
from .pareto import dominates, pareto_front, pareto_mask
from .runner import SweepError, SweepResult, objective_matrix, read_rows, run_sweep
from .space import Point, Space, enumerate_space, point_at
from .spec import SpecError, SweepSpec, load_spec, parse_spec

__all__ = ["SpecError", "SweepSpec", "load_spec", "parse_spec", "Point", "Space", "enumerate_space",
           "point_at", "dominates", "pareto_front", "pareto_mask", "SweepError", "SweepResult",
           "run_sweep", "read_rows", "objective_matrix"]
