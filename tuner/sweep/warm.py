"""Warm start across design points: the best schedules found on the most similar earlier point of
the same chain (``tuner.sweep.runner``: a point only ever learns from the points before it in its
chain, so its result does not depend on the engine or the order points finish in) are measured on
the new point's hardware and written to its tuning log first, so the search starts from them
instead of from nothing. A finished point's best schedules are kept beside the results
(``save_solved`` / ``load_solved``) so that a rerun after a kill starts the next point from the
same place.

Tuning records are keyed by hardware fingerprint, so a new point never finds its own records; but
neighbouring points (one axis step apart) mostly want the same tiling and loop order. Each seed is
a real measurement on the new hardware (it counts against the trials budget), and a seed that does
not fit the new buffers is dropped, so a warm start can only make a point's result better or equal
for the same number of measurements.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class Solved:
    """A finished point: its axis values and the best schedule per kernel workload."""
    params: tuple[tuple[str, Any], ...]
    best: Mapping[str, tuple[Any, Any]]  # workload key -> (sim.Workload, sim.Schedule)


def _coord(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        return None
    return math.log2(v)


def distance(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """Axis values compared on a log2 scale (one doubling = 1); a non-numeric value that differs
    (dataflows, op lists) counts as 1."""
    d = 0.0
    for k in set(a) | set(b):
        x, y = a.get(k), b.get(k)
        cx, cy = _coord(x), _coord(y)
        if cx is not None and cy is not None:
            d += (cx - cy) ** 2
        elif x != y:
            d += 1.0
    return math.sqrt(d)


def nearest(history: Sequence[Solved], params: Mapping[str, Any]) -> Solved | None:
    """The most similar finished point (the earliest among equals, so the choice is stable)."""
    best, best_d = None, math.inf
    for s in history:
        d = distance(dict(s.params), params)
        if d < best_d:
            best, best_d = s, d
    return best


def seed_log(log: str | Path, hw, source: Solved, measurer) -> int:
    """Measure ``source``'s best schedules on ``hw`` and append them to ``log`` as records of
    ``hw``; returns how many were measured. Schedules the new hardware cannot run are skipped."""
    import sim
    from tuner.records import Record, append_record, load_records
    fp = hw.fingerprint()
    have = {(r.workload_key, r.schedule) for r in load_records(log) if r.hw_fingerprint == fp} \
        if Path(log).exists() else set()
    n = 0
    for key, (wl, s) in source.best.items():
        if (key, s) in have:
            continue
        try:
            s.check(wl, hw)
            if any(op not in hw.vector.ops for op in s.epilogue):
                continue
            cycles = measurer.measure(wl, hw, s)
        except sim.ScheduleError:
            continue
        if not math.isfinite(cycles):
            continue
        append_record(log, Record(key, fp, s, cycles, measurer.name))
        n += 1
    return n


def solved_from_plan(params: Mapping[str, Any], plan: Any) -> Solved:
    """The best schedule of every tuned kernel of a plan, with its workload."""
    import sim
    best: dict[str, tuple[Any, Any]] = {}
    for _, k, wl in plan.kernels():
        if k.workload in best:
            continue
        try:
            best[k.workload] = (wl, sim.Schedule.from_dict(k.schedule))
        except ValueError:
            continue
    return Solved(tuple(sorted(params.items())), best)


def _encode(s: Solved) -> dict[str, Any]:
    return {"params": [[k, v] for k, v in s.params],
            "best": [{"workload": {"kind": wl.kind, "dims": [list(d) for d in wl.dims],
                                   "dtype_bytes": wl.dtype_bytes, "epilogue": list(wl.epilogue), "op": wl.op},
                      "schedule": sch.to_dict()} for _, (wl, sch) in sorted(s.best.items())]}


def _decode(d: Mapping[str, Any]) -> Solved:
    import sim
    best: dict[str, tuple[Any, Any]] = {}
    for e in d["best"]:
        w = e["workload"]
        wl = sim.Workload(w["kind"], tuple((k, v) for k, v in w["dims"]), w["dtype_bytes"], tuple(w["epilogue"]),
                          w["op"])
        best[wl.key] = (wl, sim.Schedule.from_dict(e["schedule"]))
    return Solved(tuple((k, v) for k, v in d["params"]), best)


def save_solved(path: str | Path, solved: Mapping[str, Solved]) -> None:
    """Write a point's best schedules per model label (atomically: a kill leaves the old file or
    the new one)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps({lab: _encode(s) for lab, s in solved.items()}, sort_keys=True))
    os.replace(tmp, p)


def load_solved(path: str | Path) -> dict[str, Solved]:
    """What ``save_solved`` wrote; {} when the file is missing or unreadable (the point then
    starts cold, which is what it would do without warm start)."""
    try:
        d = json.loads(Path(path).read_text())
        return {lab: _decode(v) for lab, v in d.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}
