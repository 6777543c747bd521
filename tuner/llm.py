"""``tuner.llm.serve_llm``: one serving point of a decoder LLM with the tuner's schedules.

The serving model (``sim.graph.serving``) costs each distinct kernel once through a coster. Here
that coster takes, per workload, the best schedule of the tuning records in ``log`` for this
hardware (``source: tuned``); with ``trials > 0`` the distinct MAC kernels of the point are tuned
first (``tune_kernels``, appending to ``log``), which costs seconds to minutes; without, kernels
that no record covers run at the default schedule (mapping) that a search starts from, so one
point stays well under a second. ``calibration`` is the seam for a learned calibration
(``tuner.calibration``, built apart): a callable that takes the coster and returns the calibrated
one; the report then says ``calibrated: true``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from sim import HardwareConfig, Schedule, Workload
from sim.graph.phase_kernels import Coster, default_coster
from sim.graph.serving import ServingPoint, ServingReport, serve

from .records import load_records, select


def record_schedules(log: str | Path | None, hw: HardwareConfig) -> dict[str, Schedule]:
    """The fastest recorded schedule of every workload tuned on ``hw`` (any measurer)."""
    if log is None:
        return {}
    best: dict[str, tuple[float, Schedule]] = {}
    for r in select(load_records(log), hw_fingerprint=hw.fingerprint()):
        if r.workload_key not in best or r.cycles < best[r.workload_key][0]:
            best[r.workload_key] = (r.cycles, r.schedule)
    return {k: s for k, (_, s) in best.items()}


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
    schedules = record_schedules(log, hw)
    if trials:
        from .tune_kernels import tune_kernels
        tasks = _mac_workloads(source, hw, point)
        if tasks:
            res = tune_kernels(tasks, hw, trials=trials, log=log, seed=seed, progress=progress)
            schedules.update(res.schedules())
    coster = default_coster(hw, schedules)
    if calibration is not None:
        coster = calibration(coster)
    return serve(source, hw, point, coster, calibrated=calibration is not None)


__all__ = ["serve_llm", "record_schedules"]
