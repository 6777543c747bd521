"""A mapping measurer for ``tuner.search.map_measure.MapCommandMeasurer`` (and, imported, in process):
the tile-level walk of a multi-level mapping, run in a separate process per mapping, the way a
team's RTL simulation of a mapping would be plugged in.

    python experiments/adapters/map_measurer.py PROBLEM.json MAPPING.yaml

``PROBLEM.json`` names the problem and the measurer (experiments/bench/mapping_regimes.py writes
it): ``{"measurer": "walk", "pickle": FILE}`` (the hierarchy and nest the bench
parsed, pickled, so a call does not re-read a Timeloop input), ``{"measurer": ..., "timeloop": [files...]}`` (a Timeloop architecture +
problem + constraints + ERT/ART) or ``{"measurer": ..., "hw": PRESET, "layer": {...}}`` (a layer
as experiments/bench/search_quality.py describes it, on a hierarchical preset). It prints
``{"cycles": N, "energy_pj": E}``, the JSON ``MapCommandMeasurer`` reads.

Measurer ``walk``: ``sim.cost.walk.walk`` (the tile-level walk of the nest: pipeline fill and drain,
bursts, single buffering where a level cannot hold two tiles).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

MEASURERS = ("walk",)


def _walk(hier, nest, mapping) -> tuple[float, float]:
    from sim.cost.walk import walk
    r = walk(hier, nest, mapping, check=False)   # mappings of the space are legal
    return float(r.cycles), float(r.energy_pj)


def measure_fn(name: str):
    """The in-process measurer ``name``: (hier, nest, mapping) -> (cycles, energy_pj)."""
    if name not in MEASURERS:
        raise ValueError(f"measurer must be one of {', '.join(MEASURERS)}, got {name!r}")
    return _walk


def load_problem(spec: dict):
    """(hierarchy, nest, constraints, metric) of a problem spec (see the module docstring)."""
    if "pickle" in spec:     # the bench's own copy of the parsed problem: no YAML to re-read per call
        import pickle
        with open(spec["pickle"], "rb") as f:
            hier, nest = pickle.load(f)
        return hier, nest, (), spec.get("metric", "edp")
    if "timeloop" in spec:
        from tuner.cli.timeloop_tune import load_problem as load_tl
        p = load_tl(spec["timeloop"])
        return p.hier, p.nest, p.constraints, spec.get("metric") or p.metric
    import sim
    from sim.hw.config_hierarchy import hierarchy_of
    from sim.workload.nest import nest_from_workload
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from search_quality import workload_of
    hier = hierarchy_of(sim.load_hw(spec["hw"]))
    return hier, nest_from_workload(workload_of(spec["layer"])), (), spec.get("metric", "edp")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("map_measurer: usage: map_measurer.py PROBLEM.json MAPPING.yaml", file=sys.stderr)
        return 2
    try:
        import yaml
        spec = json.loads(Path(argv[0]).read_text())
        hier, nest, _, _ = load_problem(spec)
        from sim.timeloop.mapping import read_mapping
        mapping = read_mapping(yaml.safe_load(Path(argv[1]).read_text())["mapping"], hier, nest)
        cycles, energy = measure_fn(spec.get("measurer", "walk"))(hier, nest, mapping)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"map_measurer: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    print(json.dumps({"cycles": cycles, "energy_pj": energy}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
