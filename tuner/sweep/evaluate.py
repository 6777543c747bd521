"""Evaluating one design point: tune every model of the spec on the point's hardware and reduce
each plan to the figures a sweep reports.

Runs inside a worker (this process, a local process or a Dask worker). A point's result is a
function of the point, the settings and the points before it in its chain (``history``, finished
rows in chain order): with ``warm_start`` its search starts from the best schedules of the nearest
of them, with ``share_cost_model`` its cost model from the one the previous point of the chain
ended with. Both are read from files beside the results (``state/<point>.*``), never from what
this worker happened to evaluate before, so every engine gives the same rows. A worker keeps only
the built graphs between points (values, not state).
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from . import warm
from ..plan import json_safe
from .space import Point, eval_key
from .spec import ModelSpec


@dataclass(frozen=True)
class EvalSettings:
    """Everything besides the hardware that decides a point's result."""
    models: tuple[ModelSpec, ...]
    objective: str
    seed: int
    out_dir: str  # where tuning records live (<out_dir>/records/<point>.jsonl)
    share_cost_model: bool = True
    warm_start: bool = True
    # A host calibration (tuner.calibration) every point's costs use, or None; it is part of the
    # key of a result (its data's sha256), so a calibrated rerun never reuses uncalibrated rows.
    calibration: Any = None

    def blob(self) -> str:
        d = {"models": [[m.label, m.name, m.onnx, m.trials] + ([m.llm.to_dict()] if m.llm else [])
                        for m in self.models],
             "objective": self.objective, "seed": self.seed,
             "share_cost_model": self.share_cost_model, "warm_start": self.warm_start}
        if self.calibration is not None:
            d["calibration"] = self.calibration.data_sha256
        return json.dumps(d, sort_keys=True)


SHARED_MODEL_ROWS = 1000


@dataclass
class WorkerState:
    """Per-process caches of values derived from the settings (never results of other points)."""
    graphs: dict[str, Any] = field(default_factory=dict)
    macs: dict[str, int] = field(default_factory=dict)


# The one piece of process state: built graphs, so a worker does not rebuild a model per point.
_STATES: dict[str, WorkerState] = {}


def worker_state(settings: EvalSettings) -> WorkerState:
    # One state per sweep; a long-lived worker (a Dask cluster may serve several sweeps) keeps only
    # the latest, so its memory stays one sweep's graphs.
    k = settings.out_dir + "|" + settings.blob()
    if k not in _STATES:
        _STATES.clear()
        _STATES[k] = WorkerState()
    return _STATES[k]


def state_paths(out_dir: str | Path, point_key: str) -> tuple[Path, Path]:
    """(best schedules, cost model) a finished point leaves for the next points of its chain."""
    d = Path(out_dir) / "state"
    return d / f"{point_key}.solved.json", d / f"{point_key}.model.npz"


def model_graph(m: ModelSpec, state: WorkerState):
    if m.label not in state.graphs:
        from partition.models import get, model_stats
        if m.name is not None:
            g = get(m.name)
        else:
            from partition import load_onnx
            g = load_onnx(m.onnx, input_shapes=dict(m.input_shapes))
        state.graphs[m.label] = g
        state.macs[m.label] = model_stats(g).macs
    return state.graphs[m.label]




def breakdown(cost) -> dict[str, dict[str, float]]:
    """Latency and energy of one inference by component (a ``tuner.costing.Cost``)."""
    return {"host": {"latency_s": cost.host_s, "energy_j": cost.host_j},
            "link": {"latency_s": cost.link_s, "energy_j": cost.link_j},
            "launch": {"latency_s": cost.launch_s, "energy_j": 0.0},
            "accelerator": {"latency_s": cost.device_s, "energy_j": cost.device_j}}


def kernel_rows(plan: Any, hw) -> list[dict[str, Any]]:
    """One entry per unique tuned kernel: op, MACs, DRAM bytes and cycles as costed inside its
    function (intermediates kept on chip credited), its roofline fraction and calls per inference;
    what a roofline plot needs. A workload that occurs in several places keeps its first."""
    out: dict[str, dict[str, Any]] = {}
    for fc, k, wl in plan.kernels():
        if k.workload in out:
            out[k.workload]["calls"] += fc.calls
            continue
        out[k.workload] = {"workload": k.workload, "op": k.op, "macs": int(wl.macs),
                           "dram_bytes": int(k.dram_bytes), "cycles": int(k.cycles),
                           "roofline_fraction": float(k.roofline_fraction), "calls": float(fc.calls)}
    return list(out.values())


def device_macs(plan: Any) -> int:
    """MACs one inference runs on the accelerator (every offloaded kernel, times its calls)."""
    return int(sum(wl.macs * fc.calls for fc, _, wl in plan.kernels()))


def plan_metrics(plan: Any, macs: int, hw) -> dict[str, Any]:
    """The figures of one tuned plan that a sweep row keeps."""
    lat, en = float(plan.latency_s), float(plan.energy_j)
    s = plan.summary()
    part = s.get("partition", {})
    return json_safe({
        "latency_s": lat, "energy_j": en, "edp": lat * en,
        # Achieved fraction of the array's peak over the whole inference, host time included. Only
        # the MACs the accelerator runs count: on a slow array the host's MACs could exceed its peak.
        "utilization": device_macs(plan) / (hw.peak_macs_per_s() * lat) if lat > 0 else 0.0,
        "macs": int(macs),
        "measurements": int(sum(t.trials for t in plan.tasks)),
        "breakdown": breakdown(plan.cost.total),
        "kernels": kernel_rows(plan, hw),
        "summary": {"offloaded_units": part.get("offloaded"), "units": part.get("units"),
                    "functions": len(part.get("functions", [])),
                    "candidate_regions": part.get("candidate_regions"),
                    **{f"{k}_latency_s": v["latency_s"] for k, v in s.get("baselines", {}).items()},
                    **{f"{k}_energy_j": v["energy_j"] for k, v in s.get("baselines", {}).items()},
                    **{f"search_{k}": v for k, v in s.get("search", {}).items()
                       if isinstance(v, (int, float, str)) and not isinstance(v, bool)}},
    })


def tune_model(graph, hw, m: ModelSpec, settings: EvalSettings, cost_model, log: Path):
    from tuner.tune import tune
    kwargs: dict[str, Any] = dict(trials=m.trials, log=str(log), objective=settings.objective,
                                  seed=settings.seed, progress=False)
    if settings.share_cost_model:
        kwargs["cost_model"] = cost_model
    return tune(graph, hw, calibration=settings.calibration, **kwargs)


def _start_model(settings: EvalSettings, history: Sequence[dict[str, Any]]):
    """The cost model a point starts from: the one the previous point of its chain ended with, or
    a fresh one. The model retrains every tuning round on the rows it holds: across a long chain an
    unbounded set would make each point slower than tuning it cold, so it keeps the recent rows."""
    from tuner.search.cost_model import CostModel, CostModelConfig, CostModelError
    if history:
        path = state_paths(settings.out_dir, history[-1]["point"])[1]
        if path.exists():
            try:
                return CostModel.load(path)
            except CostModelError:
                pass  # unreadable: start cold, as a first point does
    return CostModel(CostModelConfig(max_rows=SHARED_MODEL_ROWS))


def llm_metrics(m: ModelSpec, hw, log: Path) -> dict[str, Any]:
    """One serving point of a decoder LLM (``tuner.llm.serve_llm``) as a sweep's model figures:
    ``latency_s`` is the end-to-end time of the batch, ``energy_j`` its energy; the serving figures
    (``ttft_ms``, ``tpot_ms``, throughput, memory, ...) under ``llm``."""
    from partition.llm.source import source_for
    from sim.graph.serving import ServingPoint
    from tuner.llm import serve_llm
    p = m.llm
    point = ServingPoint(p.batch, p.input_len, p.output_len, tp=p.tp, pp=p.pp, dtype=p.dtype, kv_dtype=p.kv_dtype,
                         decode_attention=p.decode_attention)
    r = serve_llm(source_for(p.model), hw, point, log=str(log) if m.trials else None, trials=m.trials)
    d = r.to_dict()
    lat, en = r.e2e_s, d["energy_j_per_token"] * p.batch * p.output_len
    keep = ("ttft_ms", "tpot_ms", "e2e_ms", "throughput_tok_s", "throughput_tok_s_per_device",
            "energy_j_per_token", "memory", "calibrated")
    return json_safe({
        "latency_s": lat, "energy_j": en, "edp": lat * en, "utilization": None, "macs": None,
        "measurements": int(m.trials),
        "breakdown": {"accelerator": {"latency_s": lat, "energy_j": en}},
        "kernels": [], "summary": {}, "llm": {**p.to_dict(), **{k: d[k] for k in keep},
                                             "attention": d["phases"]["decode"]["attention_form"]}})


def evaluate_point(point: Point, settings: EvalSettings, history: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """One results row. ``history``: the finished rows of the points before this one in its chain
    (see the module docstring). A model that cannot run on this machine (a ValueError: nothing fits
    the buffers, unsupported op) gives a row with ``error`` set: that is a finished point, not a
    crash."""
    t0 = time.perf_counter()
    state = worker_state(settings)
    hw = point.hw
    rec_dir = Path(settings.out_dir) / "records"
    rec_dir.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {
        "key": eval_key(point.key, settings.blob()), "point": point.key, "index": point.index,
        "params": point.params(), "hw_fingerprint": hw.fingerprint(), "area_mm2": hw.area_mm2(),
        "pes": hw.pes, "sram_kib": hw.buffers.total_bytes / 1024,
        "peak_gmacs": hw.peak_macs_per_s() / 1e9, "clock_mhz": hw.clock.freq_mhz,
        "dram_gb_per_s": hw.dram.bytes_per_cycle * hw.clock_hz / 1e9,
        "chain_after": [r["index"] for r in history], "models": {}, "error": None,
        "calibrated": settings.calibration is not None}
    earlier = [warm.load_solved(state_paths(settings.out_dir, r["point"])[0]) for r in history] \
        if settings.warm_start else []
    cost_model = _start_model(settings, history) if settings.share_cost_model else None
    solved: dict[str, warm.Solved] = {}
    try:
        for m in settings.models:
            if m.llm is not None:
                t1 = time.perf_counter()
                res = llm_metrics(m, hw, rec_dir / f"{point.key}.{m.label}.jsonl")
                res["tune_s"] = time.perf_counter() - t1
                row["models"][m.label] = res
                continue
            g = model_graph(m, state)
            t1 = time.perf_counter()
            # One log per point and model: records are keyed by hardware, so a point only ever
            # reads its own, and a point cut short by a kill resumes without re-measuring.
            mlog = rec_dir / f"{point.key}.{m.label}.jsonl"
            seeded = 0
            if settings.warm_start and m.trials > 0:
                src = warm.nearest([e[m.label] for e in earlier if m.label in e], point.params())
                if src is not None:
                    from tuner.search.measure import TileMeasurer
                    seeded = warm.seed_log(mlog, hw, src, TileMeasurer())
            plan = tune_model(g, hw, m, settings, cost_model, mlog)
            res = plan_metrics(plan, state.macs[m.label], hw)
            res["warm_start_seeds"] = seeded
            res["tune_s"] = time.perf_counter() - t1
            row["models"][m.label] = res
            solved[m.label] = warm.solved_from_plan(point.params(), plan)
            if settings.share_cost_model and getattr(plan, "cost_model", None) is not None:
                cost_model = plan.cost_model
    except ValueError as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        row["error"] = f"{type(e).__name__}: {msg}"
    # What the next points of the chain start from; written before the row, which is what tells
    # the runner this point is finished.
    solved_path, model_path = state_paths(settings.out_dir, point.key)
    if settings.warm_start:
        warm.save_solved(solved_path, solved)
    if settings.share_cost_model and cost_model is not None:
        tmp = model_path.with_name(model_path.name + ".tmp")
        cost_model.save(tmp)
        os.replace(tmp, model_path)
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
