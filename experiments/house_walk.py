"""The walk of a hardware config through sim/: which files ("rooms") the config is handed to on its
way from ``tuner.costing.graph_cost`` to a cost, and how often the walk re-enters a room it left.

    python experiments/house_walk.py [--model resnet50] [--hw edge-npu] [--json]

Every call made while ``graph_cost`` runs (default schedules, the model's greedy BYOC partition) is
traced; a call counts when the function receives the HardwareConfig itself, or the storage
hierarchy it converts to, as an argument. The
functions are taken in the order of their first such call (a function called again adds nothing),
their files form the walk, consecutive calls in one file are one visit. ``rooms`` = distinct
files; ``returns`` = visits to a file already visited before. The issue that restructured sim/
(21) quotes these before and after.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def walk(model: str, hw_name: str) -> list[str]:
    import partition.models
    import sim
    from sim.hw.config_hierarchy import hierarchy_of
    from partition import partition_for
    from tuner.costing import CostOptions, KernelCoster, graph_cost

    hw = sim.load_hw(hw_name)
    graph = partition_for(partition.models.get(model), hw.partition_target())
    coster = KernelCoster(hw)
    # the config in its other form: the storage hierarchy it converts to (a multi-level preset)
    hier_types = tuple({type(hierarchy_of(hw))}) if hw.levels else ()
    seen: set = set()
    files: list[str] = []
    sim_root = str(ROOT / "sim")

    def tracer(frame, event, arg):
        if event != "call":
            return None
        code = frame.f_code
        if not code.co_filename.startswith(sim_root) or code in seen:
            return None
        args = [frame.f_locals.get(n) for n in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]]
        if any(a is hw or isinstance(a, hier_types) for a in args):
            seen.add(code)
            files.append(str(Path(code.co_filename).relative_to(ROOT)))
        return None

    sys.setprofile(None)
    sys.settrace(tracer)
    try:
        graph_cost(graph, coster, CostOptions())
    finally:
        sys.settrace(None)
    return files


def summarize(files: list[str]) -> dict:
    visits = [f for i, f in enumerate(files) if i == 0 or files[i - 1] != f]
    seen, returns = set(), 0
    for f in visits:
        returns += f in seen
        seen.add(f)
    return {"rooms": len(seen), "returns": returns, "visits": visits,
            "entered": {f: visits.count(f) for f in sorted(seen, key=visits.index)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--hw", default="edge-npu")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    s = summarize(walk(a.model, a.hw))
    if a.json:
        print(json.dumps(s, indent=2))
    else:
        print(f"{a.model} on {a.hw}: {s['rooms']} rooms of sim/, {s['returns']} returns")
        for f, n in s["entered"].items():
            print(f"  {f:40s} entered {n}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
