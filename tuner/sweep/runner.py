"""Running a sweep: evaluate every point not already finished, on one of three engines, appending
each result as one JSON line the moment it arrives.

Engines: in this process (``processes=1``), a local process pool (``processes=N``), a
dask.distributed ``LocalCluster`` (``workers=N``) or an existing Dask cluster (``scheduler=ADDRESS``).

Same spec, same rows, on every engine: the points, in enumeration order, are cut into chains of
``CHAIN`` consecutive points. A point learns (warm start, cost model) only from the points before it
in its chain, and starts only once they are finished; chains run side by side. So a row depends on
the spec alone, not on the engine, the number of workers or the order points finish in (only
``eval_s``, ``tune_s`` and ``worker`` differ), and the rows, the CSV and the fronts are written in
enumeration order.

The output folder holds ``results.jsonl`` (the source of truth: one row per finished point, flushed
and fsynced per point), ``results.csv`` (rewritten from it), ``pareto.json``, ``spec.json`` (the
resolved spec) and ``version.json`` (software versions). A rerun reads ``results.jsonl``, skips
finished points and drops a truncated last line left by a kill, so nothing finished is lost.
"""
from __future__ import annotations

import csv
import json
import math
import os
import sys
import time
import warnings
import hashlib
import heapq
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .evaluate import EvalSettings, evaluate_point
from .pareto import pareto_front
from .space import Point, Space, enumerate_space, eval_key, point_at
from .spec import SpecError, SweepSpec

RESULTS = "results.jsonl"
OBJECTIVE_COLUMNS = ("latency_s", "energy_j", "area_mm2")
# Points per chain: longer chains learn from more neighbours, shorter ones run more in parallel.
CHAIN = 4
# Row fields that say how a point was run, not what it gave.
RUN_FIELDS = ("eval_s", "worker")


class SweepError(ValueError):
    """A sweep that cannot start or whose output folder belongs to another sweep."""


@dataclass(frozen=True)
class SweepResult:
    out_dir: str
    rows: tuple[dict[str, Any], ...]   # every finished row of this sweep (old and new)
    new: int                           # points evaluated by this run
    skipped: int                       # points already finished before this run
    failed: tuple[str, ...]            # points whose evaluation crashed (not recorded; a rerun retries)
    space: Space
    wall_s: float
    pareto: tuple[int, ...]            # point indices on the latency-energy-area front


# ---------------------------------------------------------------------------------------- files
def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a results file. A line that does not parse (a kill mid-write leaves at most the last
    one truncated) is skipped with a warning."""
    p = Path(path)
    if not p.exists():
        return []
    rows = []
    with p.open() as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                warnings.warn(f"{p}:{n}: skipping a truncated or corrupt results line", stacklevel=2)
                continue
            if isinstance(r, dict) and "key" in r:
                rows.append(r)
    return rows


def _append(f, row: dict[str, Any]) -> None:
    f.write(json.dumps(row, allow_nan=True) + "\n")  # insertion order: params stay in axis order
    f.flush()
    os.fsync(f.fileno())


def _repair_tail(path: Path) -> None:
    """A kill mid-write can leave a last line without its newline; end it so the next row starts
    on a line of its own (the broken line is then skipped on read)."""
    if path.exists() and path.stat().st_size:
        with path.open("rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")


def software_versions() -> dict[str, Any]:
    from importlib import metadata
    out: dict[str, Any] = {"python": sys.version.split()[0]}
    for pkg in ("accel-tune", "numpy", "scipy", "xgboost", "xgboost-cpu", "dask", "distributed"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    try:
        import subprocess
        here = Path(__file__).resolve().parent
        r = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                           timeout=5)
        if r.returncode == 0:
            out["git_commit"] = r.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sweep_fingerprint(spec: SweepSpec) -> dict[str, Any]:
    """Everything besides the evaluation settings that changes a row: the resolved base hardware,
    the content and input shapes of every ONNX model, and the chain length."""
    onnx = {}
    for m in spec.models:
        if m.onnx is not None:
            try:
                onnx[m.label] = _file_sha256(m.onnx)
            except OSError as e:
                raise SweepError(f"cannot read ONNX model {m.onnx}: {e.strerror}") from None
    return {"base_hw": spec.base_hw.fingerprint(), "onnx": onnx,
            "input_shapes": {m.label: [[k, list(v)] for k, v in m.input_shapes] for m in spec.models
                             if m.input_shapes},
            "chain": CHAIN}


_FINGERPRINT_WHAT = {"base_hw": "other base hardware", "onnx": "other ONNX model files",
                     "input_shapes": "other ONNX input shapes", "chain": "another chain length"}


def _prepare_dir(spec: SweepSpec, settings: EvalSettings, out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise SweepError(f"output folder {out} is a file; give -o a folder (new or from an earlier run)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SweepError(f"cannot create output folder {out}: {e.strerror}") from None
    spec_file = out / "spec.json"
    fp = sweep_fingerprint(spec)
    if spec_file.exists():
        try:
            old = json.loads(spec_file.read_text())
        except json.JSONDecodeError:
            old = None
        if isinstance(old, dict) and old.get("settings") not in (None, json.loads(settings.blob())):
            raise SweepError(f"{out} holds results of a sweep with other models, trials, objective or "
                             f"seed; write to another folder (-o)")
        if isinstance(old, dict) and old.get("settings") is not None:
            was = old.get("fingerprint")
            if not isinstance(was, dict):
                raise SweepError(f"{out} holds results of a sweep without a hardware fingerprint (an older "
                                 f"accel-tune); write to another folder (-o)")
            for k, what in _FINGERPRINT_WHAT.items():
                if was.get(k) != fp[k]:
                    extra = (f" (base {spec.base}: fingerprint {fp[k][:12]}, the folder's {str(was.get(k))[:12]})"
                             if k == "base_hw" else "")
                    raise SweepError(f"{out} holds results of a sweep on {what}{extra}; write to another "
                                     f"folder (-o)")
    spec_file.write_text(json.dumps({**spec.to_dict(), "settings": json.loads(settings.blob()), "fingerprint": fp},
                                    indent=2, sort_keys=True) + "\n")
    (out / "version.json").write_text(json.dumps(software_versions(), indent=2, sort_keys=True) + "\n")


# ---------------------------------------------------------------------------------------- tables
def flat_row(row: dict[str, Any]) -> dict[str, Any]:
    """One CSV row: the point, its parameters, hardware figures, totals and per-model figures."""
    d: dict[str, Any] = {"index": row["index"], "point": row["point"]}
    d.update(row.get("params", {}))
    for k in ("area_mm2", "pes", "sram_kib", "peak_gmacs", "latency_s", "energy_j", "edp"):
        d[k] = row.get(k)
    for label, m in sorted(row.get("models", {}).items()):
        for k in ("latency_s", "energy_j", "edp", "utilization", "measurements", "tune_s"):
            if k in m and not isinstance(m[k], (dict, list)):
                d[f"{label}.{k}"] = m[k]
        s = m.get("summary")
        if isinstance(s, dict):
            for k, v in s.items():
                if isinstance(v, (int, float, str)) and not isinstance(v, bool):
                    d[f"{label}.{k}"] = v
    d["eval_s"] = row.get("eval_s")
    d["error"] = row.get("error") or ""
    return d


def write_csv(rows: Iterable[dict[str, Any]], path: str | Path) -> None:
    flat = [flat_row(r) for r in rows]
    cols: list[str] = []
    for f in flat:
        cols += [c for c in f if c not in cols]
    tmp = Path(str(path) + ".tmp")
    with tmp.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for f in flat:
            w.writerow({k: (json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in f.items()})
    os.replace(tmp, path)


def objective_matrix(rows: list[dict[str, Any]], columns: Iterable[str] = OBJECTIVE_COLUMNS,
                     model: str | None = None):
    """(n, k) array of the named figures (NaN where a point failed); per model when ``model``."""
    import numpy as np
    out = []
    for r in rows:
        src = r.get("models", {}).get(model, {}) if model else r
        vals = []
        for c in columns:
            v = r.get(c) if c in ("area_mm2", "pes", "sram_kib", "peak_gmacs") else src.get(c)
            vals.append(float(v) if isinstance(v, (int, float)) and v is not None else math.nan)
        out.append(vals)
    return np.array(out, dtype=float).reshape(len(out), len(list(columns)))


def write_pareto(rows: list[dict[str, Any]], labels: list[str], path: str | Path) -> list[int]:
    fronts: dict[str, Any] = {}
    idx = pareto_front(objective_matrix(rows))
    fronts["all"] = {"objectives": list(OBJECTIVE_COLUMNS), "points": [rows[i]["index"] for i in idx]}
    for lab in labels:
        i2 = pareto_front(objective_matrix(rows, model=lab))
        fronts[lab] = {"objectives": list(OBJECTIVE_COLUMNS), "points": [rows[i]["index"] for i in i2]}
    Path(path).write_text(json.dumps(fronts, indent=2) + "\n")
    return fronts["all"]["points"]


# ---------------------------------------------------------------------------------------- engines
class _InProcess:
    """An executor that runs each call when it is submitted (the in-process engine)."""

    def submit(self, fn, *args) -> Future:
        f: Future = Future()
        try:
            f.set_result(fn(*args))
        except Exception as e:  # reported per point, as the other engines report a worker's failure
            f.set_exception(e)
        return f

    def shutdown(self, wait: bool = True) -> None:
        pass


def _pool(n: int):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    # forkserver: a fork of a parent that already started BLAS/XGBoost threads can deadlock.
    return ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("forkserver"))


class _Chains:
    """Which points may start: in each chain, the first unfinished point once every point before
    it is finished. ``ready`` pops the lowest enumeration position first, so one engine slot walks
    the points in order."""

    def __init__(self, points: list[Point], keys: list[str], done: dict[str, dict[str, Any]]):
        self.points, self.keys, self.done = points, keys, done
        self.heap: list[int] = []
        for start in range(0, len(points), CHAIN):
            self._advance(start, start)

    def _advance(self, start: int, pos: int) -> None:
        """Queue the first unfinished point at or after ``pos`` in the chain that begins at ``start``."""
        end = min(start + CHAIN, len(self.points))
        while pos < end and self.keys[pos] in self.done:
            pos += 1
        if pos < end:
            heapq.heappush(self.heap, pos)

    def history(self, pos: int) -> tuple[dict[str, Any], ...]:
        start = pos // CHAIN * CHAIN
        return tuple(self.done[self.keys[i]] for i in range(start, pos))

    def ready(self) -> int | None:
        return heapq.heappop(self.heap) if self.heap else None

    def finished(self, pos: int) -> None:
        self._advance(pos // CHAIN * CHAIN, pos + 1)


def dask_client(workers: int | None, scheduler: str | None):
    """A client on an existing cluster (``scheduler``) or on a new LocalCluster of ``workers``
    single-threaded worker processes; the caller closes it (and its cluster)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SweepError("--workers/--scheduler need dask.distributed: pip install 'accel-tune[dist]'") from None
    if scheduler:
        try:
            return Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as e:
            raise SweepError(f"cannot connect to the Dask scheduler at {scheduler}: {e}") from None
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=40)
    return Client(cluster)


def _rows_beyond(spec: SweepSpec, done: dict[str, dict], seen: set[str], blob: str) -> list[dict[str, Any]]:
    """Finished rows of points past where a lazy enumeration stopped that are still points of
    this spec (same point at the same grid index, within the constraints): the tables keep them."""
    out = []
    for k, r in done.items():
        i = r.get("index")
        if k in seen or not isinstance(i, int) or not 0 <= i < spec.grid_size:
            continue
        try:
            p = point_at(spec, i)
        except SpecError:
            continue
        if eval_key(p.key, blob) == k and all(c.ok(p.hw) for c in spec.constraints):
            out.append(r)
    return out


# ---------------------------------------------------------------------------------------- run
def run_sweep(spec: SweepSpec, out_dir: str | Path, *, processes: int = 1, workers: int | None = None,
              scheduler: str | None = None, client=None, progress: bool = True, limit: int | None = None,
              on_row: Callable[[dict[str, Any]], None] | None = None, calibration: Any = None) -> SweepResult:
    """Evaluate the spec's points into ``out_dir``. ``limit`` stops after that many new points (a
    budget; a rerun carries on). ``client`` uses a Dask client the caller owns. ``calibration``: a
    host calibration (``tuner.calibration``) every point's costs use; a device calibration is
    tied to one hardware config, which a sweep varies, so it is refused."""
    if calibration is not None and calibration.kind != "host":
        raise SweepError("a sweep takes a host calibration (calibrate --host); a device calibration is tied to one "
                         "hardware config and the sweep varies it")
    if processes < 1:
        raise SweepError(f"processes must be >= 1, got {processes}")
    if workers is not None and workers < 1:
        raise SweepError(f"--workers must be >= 1, got {workers}")
    if workers is not None and scheduler:
        raise SweepError("give --workers (a local Dask cluster) or --scheduler (an existing one), not both")
    if limit is not None and limit < 0:
        raise SweepError(f"--limit must be >= 0, got {limit}")
    t0 = time.perf_counter()
    out = Path(out_dir).resolve()
    settings = EvalSettings(spec.models, spec.objective, spec.seed, str(out), spec.share_cost_model,
                            spec.warm_start, calibration)
    res_path = out / RESULTS
    blob = settings.blob()
    done = {r["key"]: r for r in read_rows(res_path)}  # a truncated last line is skipped here
    # Lazy: with a limit, a huge grid is enumerated only as far as the points this run evaluates.
    space = enumerate_space(spec, limit=limit, done=lambda p: eval_key(p.key, blob) in done)
    if not space.points:
        raise SpecError(f"no design point of {spec.name} meets the constraints "
                        f"({space.rejected} of {space.examined} rejected)")
    _prepare_dir(spec, settings, out)
    _repair_tail(res_path)
    points = list(space.points)
    keys = [eval_key(p.key, blob) for p in points]
    todo = sum(1 for k in keys if k not in done)
    skipped = len(keys) - todo
    budget = todo if limit is None else min(todo, limit)
    failed: list[str] = []
    new = 0
    from tqdm import tqdm
    bar = tqdm(total=budget, desc=f"sweep {spec.name}", unit="pt", disable=not progress,
               file=sys.stderr, dynamic_ncols=True)
    own_client = None
    executor = None
    pending: dict[Future, int] = {}
    try:
        if budget:
            if client is None and (workers is not None or scheduler):
                client = own_client = dask_client(workers, scheduler)
            if client is not None:
                executor, slots = client.get_executor(pure=False), math.inf
            elif processes > 1 and todo > 1:
                executor, slots = _pool(min(processes, todo)), math.inf
            else:
                executor, slots = _InProcess(), 1
            chains = _Chains(points, keys, done)
            submitted = 0
            with res_path.open("a") as fh:
                while True:
                    while len(pending) < slots and submitted < budget:
                        pos = chains.ready()
                        if pos is None:
                            break
                        pending[executor.submit(evaluate_point, points[pos], settings, chains.history(pos))] = pos
                        submitted += 1
                    if not pending:
                        break
                    finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                    for f in sorted(finished, key=lambda f: pending[f]):
                        pos = pending.pop(f)
                        p = points[pos]
                        bar.update(1)
                        e = f.exception()
                        if e is not None:
                            # The rest of its chain waits for a rerun: it would learn from this point.
                            failed.append(f"point {p.index} ({p.key}): {type(e).__name__}: {e}")
                            continue
                        r = f.result()
                        _append(fh, r)
                        done[r["key"]] = r
                        new += 1
                        chains.finished(pos)
                        if r.get("latency_s") is not None:
                            bar.set_postfix_str(f"last {r['latency_s'] * 1e3:.3g} ms, {r['area_mm2']:.3g} mm2")
                        if on_row is not None:
                            on_row(r)
    finally:
        bar.close()
        for f in pending:
            f.cancel()  # interrupted: what has not started never will
        if executor is not None:
            # A pool lets running points finish; a Dask executor cancels them on the cluster.
            executor.shutdown(wait=client is None)
        if own_client is not None:
            cluster = own_client.cluster
            own_client.close()
            if cluster is not None:
                cluster.close()
        # Tables are derived from results.jsonl; rewrite them even when interrupted.
        rows = [done[k] for k in keys if k in done]
        if not space.complete:
            rows += _rows_beyond(spec, done, set(keys), blob)
        write_csv(rows, out / "results.csv")
        front = write_pareto(rows, [m.label for m in spec.models], out / "pareto.json")
    return SweepResult(str(out), tuple(rows), new, skipped, tuple(failed), space,
                       time.perf_counter() - t0, tuple(front))
