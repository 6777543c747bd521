"""Timing host ops *in context*: whole models run by onnxruntime with its profiler on
(``accel-tune calibrate --host``; ``tuner.calibrate_host`` keeps the one-node timing).

Why: a one-node model keeps its weights in cache between repeats and pays no inter-op cost, so
its time is far below what the same op costs inside the whole model (docs/TUNING.md). Here each
model is exported (``partition.onnx.export.graph_to_onnx``) and run with onnxruntime's *default*
session options plus ``enable_profiling``; the trace gives each kernel's time inside the real
run, with the real cache state. Models are run round-robin (one run of each per round), so the
load of a shared machine hits them alike, and medians over rounds are kept.

What a node's in-context time is (``attribute``):
- a kernel event belongs to the IR node whose name, or the name of one of its outputs, is the
  longest prefix of the event's name (the exporter names ONNX nodes ``<ir name>/<OpType>``;
  onnxruntime names a fused kernel after the last node it absorbed, or after that node's output,
  e.g. ``layer1.0.bn_1_nchwc`` for Conv+BatchNormalization);
- an IR node with no event of its own was fused into a neighbour (or removed) and costs nothing
  more than its share of the run's rest;
- a kernel that absorbed other nodes (a Conv+BatchNormalization+Relu named after the Relu) is
  shared by its owner and the nodes fused into it (its producers with no kernel of their own,
  ``fused_groups``) in proportion to their cost on the default host model, so the Conv keeps
  the Conv's work;
- the run's rest (the profiled run's median duration less the kernels matched to IR nodes:
  layout reorders, the executor's work between nodes, waiting for a core) is shared equally by
  the model's nodes, so the times of a model add up to its run.

A second session of the same model without profiling gives the whole model's latency under the
same conditions (``Profiled.whole_s``): what ``tune --calibration``'s all-on-host latency is
compared with.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .calibrate_host import CONTROL, random_feed, walk_nodes

FLOOR_S = 1e-8  # a node's in-context time is never below this (the fit is on a log scale)


@dataclass(frozen=True)
class InContext:
    """One IR node of ``model`` and its median time inside the model's run (seconds)."""
    model: str
    node: Any
    seconds: float
    kernel_s: float      # median of the kernels matched to it alone (0 when fused away)


@dataclass(frozen=True)
class Profiled:
    """One model's in-context rows and its whole-model latencies (medians over rounds)."""
    model: str
    rows: tuple[InContext, ...]
    whole_s: float          # plain session (no profiler), median of the rounds' runs
    best_s: float           # its fastest run
    profiled_run_s: float   # profiled session, median run duration in the trace
    runs: int


def _owner(names: Sequence[str], aliases: Mapping[str, str]):
    """event name -> the IR node whose name (or alias) is its longest prefix at a separator, or None."""
    owner = {**{a: n for a, n in aliases.items()}, **{n: n for n in names}}
    by_len = sorted(owner, key=len, reverse=True)
    cache: dict[str, str | None] = {}

    def find(ev: str) -> str | None:
        if ev not in cache:
            hit = next((k for k in by_len if ev == k or (ev.startswith(k) and ev[len(k)] in "/_.")), None)
            cache[ev] = owner[hit] if hit is not None else None
        return cache[ev]
    return find


def fused_groups(node_names: Sequence[str], producers: Mapping[str, Sequence[str]], has_kernel: set[str]
                 ) -> dict[str, list[str]]:
    """owner -> the owner and the nodes fused into it: its producers, recursively, that have no kernel
    of their own (onnxruntime names Conv+BatchNorm+Relu after the Relu; the Conv did the work)."""
    groups: dict[str, list[str]] = {}
    taken: set[str] = set()
    for n in reversed(list(node_names)):  # consumers first: a chain joins its last node
        if n not in has_kernel:
            continue
        g, todo = [n], list(producers.get(n, ()))
        while todo:
            q = todo.pop()
            if q in has_kernel or q in taken or q in g or q not in producers:
                continue
            g.append(q)
            taken.add(q)
            todo.extend(producers.get(q, ()))
        groups[n] = g
    return groups


def attribute(events: Sequence[dict], node_names: Sequence[str],
              aliases: Mapping[str, str] | None = None, producers: Mapping[str, Sequence[str]] | None = None,
              weights: Mapping[str, float] | None = None) -> list[dict[str, float]]:
    """Per profiled run (``model_run`` events, in order): {IR node name: seconds}, each name of
    ``node_names`` present (see the module docstring), plus ``"__kernel__" + name`` for the
    matched kernel time alone. ``aliases`` (other name -> node name): the names of a node's
    outputs, after which onnxruntime names some kernels it rewrote (``relu_nchwc``). With
    ``producers`` (node -> the nodes its inputs come from), a kernel is shared by its owner and the
    nodes fused into it (``fused_groups``) in proportion to ``weights`` (their analytical seconds)."""
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: e["ts"])
    kernels = sorted((e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time")),
                     key=lambda e: e["ts"])
    find = _owner(node_names, aliases or {})
    owners = {find(e["name"][: -len("_kernel_time")]) for e in kernels} - {None}
    groups = fused_groups(node_names, producers, owners) if producers else {}
    w = weights or {}
    out = []
    k = 0
    for r in runs:
        start, end = r["ts"], r["ts"] + r["dur"]
        matched = dict.fromkeys(node_names, 0.0)
        while k < len(kernels) and kernels[k]["ts"] < start:
            k += 1
        while k < len(kernels) and kernels[k]["ts"] <= end:
            owner = find(kernels[k]["name"][: -len("_kernel_time")])
            if owner is not None:
                matched[owner] += kernels[k]["dur"] * 1e-6
            k += 1
        for owner, g in groups.items():
            if len(g) > 1 and matched[owner] > 0:
                total, tw = matched[owner], sum(max(w.get(x, 0.0), 0.0) for x in g)
                for x in g:
                    matched[x] = total * (max(w.get(x, 0.0), 0.0) / tw if tw > 0 else 1.0 / len(g))
        rest = max(0.0, r["dur"] * 1e-6 - sum(matched.values())) / max(1, len(node_names))
        row = {n: max(FLOOR_S, v + rest) for n, v in matched.items()}
        row.update({"__kernel__" + n: v for n, v in matched.items()})
        out.append(row)
    return out


def profile_models(graphs: Sequence[tuple[str, Any]], rounds: int = 5, warmup: int = 1, seed: int = 0,
                   budget_s: float | None = None, max_batch_bytes: int = 256 << 20
                   ) -> tuple[list[Profiled], list[tuple[str, str]]]:
    """Run every (label, graph) round-robin, ``rounds`` times each after ``warmup`` runs, with and
    without the profiler; (the models' in-context rows and latencies, (label, reason) of the models
    onnxruntime could not run). ``budget_s`` stops adding rounds once spent (at least one round).
    Models are taken in batches of at most ``max_batch_bytes`` of ONNX (weights included; a larger
    model is a batch alone), round-robin within a batch, so memory stays bounded: every session
    of a batch stays open while it runs."""
    from partition.onnx.export import graph_to_onnx
    t0 = time.perf_counter()
    out: list[Profiled] = []
    failed: list[tuple[str, str]] = []
    batch: list[tuple[str, Any, bytes, Any]] = []
    size = 0
    for label, g in graphs:
        try:
            m = graph_to_onnx(g)
            data = m.SerializeToString()
        except Exception as e:  # noqa: BLE001 - a model the exporter refuses is reported, not fatal
            failed.append((label, _why(e)))
            continue
        if batch and size + len(data) > max_batch_bytes:
            _run_batch(batch, rounds, warmup, seed, budget_s, t0, out, failed)
            batch, size = [], 0
        batch.append((label, g, data, m.graph.input))
        size += len(data)
    if batch:
        _run_batch(batch, rounds, warmup, seed, budget_s, t0, out, failed)
    order = {lb: i for i, (lb, _) in enumerate(graphs)}
    out.sort(key=lambda p: order.get(p.model, 0))
    return out, failed


def _why(e: Exception) -> str:
    return str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__


def _run_batch(batch, rounds, warmup, seed, budget_s, t0, out, failed) -> None:
    import onnxruntime as ort
    from types import SimpleNamespace
    from sim.graph.subgraph import host_op_seconds
    from sim.hw.config import HostConfig
    hw = SimpleNamespace(host=HostConfig())  # the default host model: how a fused kernel is shared
    live = []
    tmp = tempfile.mkdtemp(prefix="accel-tune-profile-")
    for label, g, data, inputs in batch:
        try:
            so = ort.SessionOptions()
            so.enable_profiling = True
            so.profile_file_prefix = os.path.join(tmp, f"p{len(live)}")
            prof = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
            plain = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
            feed = random_feed(inputs, np.random.default_rng(seed))
            for _ in range(warmup):
                plain.run(None, feed)
        except Exception as e:  # noqa: BLE001 - a model onnxruntime cannot run is reported, not fatal
            failed.append((label, _why(e)))
            continue
        nodes = [n for n in walk_nodes(g) if n.op not in CONTROL]
        live.append((label, nodes, prof, plain, feed))
    wall: dict[str, list[float]] = {lb: [] for lb, *_ in live}
    for r in range(rounds):
        if r > 0 and budget_s is not None and time.perf_counter() - t0 > budget_s:
            break
        for label, _, prof, plain, feed in live:
            if r == 0:
                for _ in range(warmup):  # the profiled session's first run pays its allocations
                    prof.run(None, feed)
            t = time.perf_counter()
            plain.run(None, feed)
            wall[label].append(time.perf_counter() - t)
            prof.run(None, feed)
    for label, nodes, prof, _, _ in live:
        path = prof.end_profiling()
        try:
            with open(path) as f:
                events = json.load(f)
        finally:
            os.unlink(path)
        names = list(dict.fromkeys(n.name for n in nodes))
        aliases = {v.name: n.name for n in nodes for v in n.outputs if v.name not in names}
        by_out = {id(v): n.name for n in nodes for v in n.outputs}
        producers = {n.name: [by_out[id(v)] for v in n.inputs if id(v) in by_out] for n in nodes}
        weights = {n.name: host_op_seconds(n, hw) for n in nodes}
        per_run = attribute(events, names, aliases, producers, weights)[warmup:]
        run_s = [e["dur"] * 1e-6 for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"][warmup:]
        ker = {n: float(np.median([r["__kernel__" + n] for r in per_run])) for n in names} if per_run else {}
        # the run's rest from the medians, so a model's rows add up to its median profiled run.
        # (Taking the total from the plain session instead, to leave out the profiler's own cost,
        # did worse on both held-out figures of experiments/bench/calibration.py: docs/TUNING.md.)
        rest = max(0.0, float(np.median(run_s)) - sum(ker.values())) / max(1, len(names)) if run_s else 0.0
        med = {n: max(FLOOR_S, ker[n] + rest) for n in ker}
        # a name shared by several nodes (a loop body run many times) keeps one row: its first node
        rows = tuple(InContext(label, n, med[n.name], ker[n.name]) for n in {n.name: n for n in nodes}.values()
                     if n.name in med)
        w = wall[label]
        out.append(Profiled(label, rows, float(np.median(w)), float(np.min(w)),
                            float(np.median(run_s)) if run_s else float("nan"), len(w)))
    try:
        os.rmdir(tmp)
    except OSError:
        pass


__all__ = ["InContext", "Profiled", "attribute", "fused_groups", "profile_models", "FLOOR_S"]
