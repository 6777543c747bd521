"""Running a sweep: evaluate every point not already finished, on one of three engines, appending
each result as one JSON line the moment it arrives.

Engines: in this process (``processes=1``), a local process pool (``processes=N``), a
dask.distributed ``LocalCluster`` (``workers=N``) or an existing Dask cluster (``scheduler=ADDRESS``).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from .evaluate import EvalSettings, evaluate_point
from .pareto import pareto_front
from .space import Point, Space, enumerate_space, eval_key, point_at
from .spec import SpecError, SweepSpec

RESULTS = "results.jsonl"
OBJECTIVE_COLUMNS = ("latency_s", "energy_j", "area_mm2")


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


def _prepare_dir(spec: SweepSpec, settings: EvalSettings, out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise SweepError(f"output folder {out} is a file; give -o a folder (new or from an earlier run)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SweepError(f"cannot create output folder {out}: {e.strerror}") from None
    spec_file = out / "spec.json"
    if spec_file.exists():
        try:
            old = json.loads(spec_file.read_text())
        except json.JSONDecodeError:
            old = None
        if isinstance(old, dict) and old.get("settings") not in (None, json.loads(settings.blob())):
            raise SweepError(f"{out} holds results of a sweep with other models, trials, objective or "
                             f"seed; write to another folder (-o)")
    spec_file.write_text(json.dumps({**spec.to_dict(), "settings": json.loads(settings.blob())},
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
def _inline(todo: list[Point], settings: EvalSettings) -> Iterator[tuple[Point, Any]]:
    for p in todo:
        yield p, evaluate_point(p, settings)


def _pool(todo: list[Point], settings: EvalSettings, n: int) -> Iterator[tuple[Point, Any]]:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    # forkserver: a fork of a parent that already started BLAS/XGBoost threads can deadlock.
    with ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("forkserver")) as ex:
        futs = {ex.submit(evaluate_point, p, settings): p for p in todo}
        try:
            for f in as_completed(futs):
                e = f.exception()
                yield futs[f], (e if e is not None else f.result())
        finally:
            for f in futs:
                f.cancel()


def _dask(todo: list[Point], settings: EvalSettings, client) -> Iterator[tuple[Point, Any]]:
    from distributed import as_completed
    futs = [client.submit(evaluate_point, p, settings, pure=False, key=f"sweep-point-{p.key}-{i}")
            for i, p in enumerate(todo)]
    by_key = {f.key: p for f, p in zip(futs, todo)}
    try:
        for f in as_completed(futs):
            if f.status == "error":
                yield by_key[f.key], f.exception()
            else:
                yield by_key[f.key], f.result()
    finally:
        client.cancel(futs)


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
              on_row: Callable[[dict[str, Any]], None] | None = None) -> SweepResult:
    """Evaluate the spec's points into ``out_dir``. ``limit`` stops after that many new points (a
    budget; a rerun carries on). ``client`` uses a Dask client the caller owns."""
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
                            spec.warm_start)
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
    wanted = [(p, eval_key(p.key, blob)) for p in space.points]
    todo = [p for p, k in wanted if k not in done]
    skipped = len(wanted) - len(todo)
    if limit is not None:
        todo = todo[:limit]
    failed: list[str] = []
    new = 0
    from tqdm import tqdm
    bar = tqdm(total=len(todo), desc=f"sweep {spec.name}", unit="pt", disable=not progress,
               file=sys.stderr, dynamic_ncols=True)
    own_client = None
    try:
        if todo:
            if client is None and (workers is not None or scheduler):
                client = own_client = dask_client(workers, scheduler)
            if client is not None:
                stream = _dask(todo, settings, client)
            elif processes > 1 and len(todo) > 1:
                stream = _pool(todo, settings, min(processes, len(todo)))
            else:
                stream = _inline(todo, settings)
            with res_path.open("a") as fh:
                for p, r in stream:
                    if isinstance(r, BaseException):
                        failed.append(f"point {p.index} ({p.key}): {type(r).__name__}: {r}")
                        bar.update(1)
                        continue
                    _append(fh, r)
                    done[r["key"]] = r
                    new += 1
                    bar.update(1)
                    if r.get("latency_s") is not None:
                        bar.set_postfix_str(f"last {r['latency_s'] * 1e3:.3g} ms, {r['area_mm2']:.3g} mm2")
                    if on_row is not None:
                        on_row(r)
    finally:
        bar.close()
        if own_client is not None:
            cluster = own_client.cluster
            own_client.close()
            if cluster is not None:
                cluster.close()
        # Tables are derived from results.jsonl; rewrite them even when interrupted.
        rows = [done[k] for _, k in wanted if k in done]
        if not space.complete:
            rows += _rows_beyond(spec, done, {k for _, k in wanted}, blob)
        write_csv(rows, out / "results.csv")
        front = write_pareto(rows, [m.label for m in spec.models], out / "pareto.json")
    return SweepResult(str(out), tuple(rows), new, skipped, tuple(failed), space,
                       time.perf_counter() - t0, tuple(front))
