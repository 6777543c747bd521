"""Evaluating one design point: tune every model of the spec on the point's hardware and reduce
each plan to the figures a sweep reports.

Runs inside a worker (a local process or a Dask worker). What a worker keeps between points lives
in one ``WorkerState`` per (output folder, settings): the built graphs and the cost model, so a later
point starts from a model already trained on the points before it.
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .space import Point, eval_key
from .spec import ModelSpec


@dataclass(frozen=True)
class EvalSettings:
    """Everything besides the hardware that decides a point's result."""
    models: tuple[ModelSpec, ...]
    objective: str
    seed: int
    out_dir: str  # where shared tuning records live (<out_dir>/records/)

    def blob(self) -> str:
        return json.dumps({"models": [[m.label, m.name, m.onnx, m.trials] for m in self.models],
                           "objective": self.objective, "seed": self.seed}, sort_keys=True)


@dataclass
class WorkerState:
    """Per-process reuse across points (never shared between processes)."""
    graphs: dict[str, Any] = field(default_factory=dict)
    macs: dict[str, int] = field(default_factory=dict)
    cost_model: Any = None


_STATES: dict[str, WorkerState] = {}


def worker_state(settings: EvalSettings) -> WorkerState:
    # One state per sweep in a long-lived worker (a Dask cluster may serve several sweeps).
    k = settings.out_dir + "|" + settings.blob()
    if k not in _STATES:
        _STATES[k] = WorkerState()
    return _STATES[k]


def model_graph(m: ModelSpec, state: WorkerState):
    if m.label not in state.graphs:
        from partition.models import get, model_stats
        if m.name is not None:
            g = get(m.name)
        else:
            from partition import load_onnx
            g = load_onnx(m.onnx)
        state.graphs[m.label] = g
        state.macs[m.label] = model_stats(g).macs
    return state.graphs[m.label]


def _summary(plan: Any) -> dict[str, Any]:
    s = plan.summary()
    if isinstance(s, str):
        return {"text": s}
    return json.loads(json.dumps(s, default=_jsonable))


def _jsonable(o: Any) -> Any:
    import numpy as np
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if hasattr(o, "to_dict"):
        return o.to_dict()
    return str(o)


def plan_metrics(plan: Any, macs: int, hw) -> dict[str, Any]:
    """The figures of one tuned plan that a sweep row keeps."""
    lat, en = float(plan.latency_s), float(plan.energy_j)
    out = {"latency_s": lat, "energy_j": en, "edp": lat * en,
           # Achieved fraction of the array's peak over the whole model, host time included.
           "utilization": macs / (hw.peak_macs_per_s() * lat) if lat > 0 else 0.0,
           "macs": int(macs)}
    bd = getattr(plan, "breakdown", None)
    if bd is not None:
        out["breakdown"] = json.loads(json.dumps(bd() if callable(bd) else bd, default=_jsonable))
    out["summary"] = _summary(plan)
    for name in ("measurements", "kernels", "history", "baselines"):
        v = getattr(plan, name, None)
        if v is not None and not callable(v):
            out[name] = json.loads(json.dumps(v, default=_jsonable))
    return out


def tune_model(graph, hw, m: ModelSpec, settings: EvalSettings, state: WorkerState, log: Path):
    import tuner
    kwargs: dict[str, Any] = dict(trials=m.trials, log=str(log), objective=settings.objective,
                                  seed=settings.seed, progress=False)
    if state.cost_model is not None:
        kwargs["cost_model"] = state.cost_model
    return tuner.tune(graph, hw, **kwargs)


def evaluate_point(point: Point, settings: EvalSettings) -> dict[str, Any]:
    """One results row. A model that cannot run on this machine (a ValueError: nothing fits the
    buffers, unsupported op) gives a row with ``error`` set: that is a finished point, not a crash."""
    t0 = time.perf_counter()
    state = worker_state(settings)
    hw = point.hw
    rec_dir = Path(settings.out_dir) / "records"
    rec_dir.mkdir(parents=True, exist_ok=True)
    # One log per worker process: no two writers share a file, and a worker's later points see
    # the records of its earlier ones.
    log = rec_dir / f"{socket.gethostname()}-{os.getpid()}.jsonl"
    row: dict[str, Any] = {
        "key": eval_key(point.key, settings.blob()), "point": point.key, "index": point.index,
        "params": point.params(), "hw_fingerprint": hw.fingerprint(), "area_mm2": hw.area_mm2(),
        "pes": hw.pes, "sram_kib": hw.buffers.total_bytes / 1024,
        "peak_gmacs": hw.peak_macs_per_s() / 1e9, "clock_mhz": hw.clock.freq_mhz,
        "dram_gb_per_s": hw.dram.bytes_per_cycle * hw.clock_hz / 1e9, "models": {}, "error": None}
    try:
        for m in settings.models:
            g = model_graph(m, state)
            t1 = time.perf_counter()
            plan = tune_model(g, hw, m, settings, state, log)
            res = plan_metrics(plan, state.macs[m.label], hw)
            res["tune_s"] = time.perf_counter() - t1
            row["models"][m.label] = res
            cm = getattr(plan, "cost_model", None)
            if cm is not None:
                state.cost_model = cm
    except ValueError as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        row["error"] = f"{type(e).__name__}: {msg}"
    ms = row["models"].values()
    if row["error"] is None:
        row["latency_s"] = sum(r["latency_s"] for r in ms)
        row["energy_j"] = sum(r["energy_j"] for r in ms)
        row["edp"] = row["latency_s"] * row["energy_j"]
    else:
        row["latency_s"] = row["energy_j"] = row["edp"] = None
    row["eval_s"] = time.perf_counter() - t0
    row["worker"] = f"{socket.gethostname()}:{os.getpid()}"
    return row
