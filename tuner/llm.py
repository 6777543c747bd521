"""``tuner.llm.serve_llm``: one serving point of a decoder LLM with the tuner's schedules.

The serving model (``sim.graph.serving``) costs each distinct kernel once through a coster. Here
that coster takes, per workload, the best schedule of the tuning records in ``log`` for this
hardware (``source: tuned``); with ``trials > 0`` the distinct MAC kernels of the point are tuned
first (``tune_kernels``, appending to ``log``), which costs seconds to minutes; without, kernels
that no record covers run at the default schedule (mapping) that a search starts from. With a
``log``, each such default is appended to it as a record of measurer ``default`` (its analytical
cycles), and a later point on the same hardware takes it from there (``source: cached default``)
instead of choosing it again: on a machine with storage levels choosing a default mapping is a
short search of a few tenths of a second per kernel, the rest of a point a fraction of a second.
Records of a real measurer win over ``default`` ones. ``calibration`` is the seam for a learned calibration
(``tuner.calibration``, built apart): a callable that takes the coster and returns the calibrated
one; the report then says ``calibrated: true``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from sim import HardwareConfig, Schedule, Workload
from sim.graph.phase_kernels import Coster, default_coster
from sim.graph.serving import ServingPoint, ServingReport, serve

from .records import Record, append_record, best_records, load_records


DEFAULT_MEASURER = "default"


def record_schedules(log: str | Path | None, hw: HardwareConfig) -> tuple[dict[str, Schedule], dict[str, str]]:
    """The fastest recorded schedule of every workload tuned on ``hw`` (a real measurer's records
    first, else a cached default), and each one's source label."""
    if log is None:
        return {}, {}
    best = best_records(load_records(log), hw.fingerprint(), rank=lambda r: (r.measurer == DEFAULT_MEASURER, r.cycles))
    return ({k: r.schedule for k, r in best.items()},
            {k: "cached default" if r.measurer == DEFAULT_MEASURER else "tuned" for k, r in best.items()})


def _mac_workloads(source: Any, hw: HardwareConfig, point: ServingPoint) -> list[Workload]:
    seen: dict[str, Workload] = {}
    inner = default_coster(hw)

    def spy(wl: Workload):
        if wl.is_mac:
            seen.setdefault(wl.key, wl)
        return inner(wl)
    serve(source, hw, point, spy)
    return list(seen.values())


def serve_llm(source: Any, hw: HardwareConfig, point: ServingPoint, log: str | Path | None = None,
              trials: int = 0, seed: int = 0, progress: bool = False,
              calibration: Callable[[Coster], Coster] | None = None) -> ServingReport:
    schedules, labels = record_schedules(log, hw)
    if trials:
        from .tune_kernels import tune_kernels
        tasks = _mac_workloads(source, hw, point)
        if tasks:
            res = tune_kernels(tasks, hw, trials=trials, log=log, seed=seed, progress=progress)
            for k, s in res.schedules().items():
                schedules[k], labels[k] = s, "tuned"
    fresh: list[Record] = []
    fp = hw.fingerprint()
    keep = (lambda wl, s, rep: fresh.append(Record(wl.key, fp, s, float(max(1, rep.total_cycles)),
                                                   DEFAULT_MEASURER))) if log is not None else None
    coster = default_coster(hw, schedules, labels, keep)
    if calibration is not None:
        coster = calibration(coster)
    report = serve(source, hw, point, coster, calibrated=calibration is not None)
    for r in fresh:
        append_record(log, r)
    return report


__all__ = ["serve_llm", "record_schedules"]
