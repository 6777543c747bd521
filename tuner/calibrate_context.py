"""Timing host ops *in context*: whole models run by onnxruntime with its profiler on
(``accel-tune calibrate --host``; ``tuner.calibrate_host`` keeps the one-node timing).

Why: a one-node model keeps its weights in cache between repeats and pays no inter-op cost, so
its time is far below what the same op costs inside the whole model (docs/TUNING.md). Here each
model is exported (``partition.onnx.export.graph_to_onnx``) and timed **alone**, one onnxruntime
session open at a time: first a plain session with the *default* session options (warm-ups, then
timed runs until a minimum time and count), closed; then a session with ``enable_profiling`` (two, one after the other, and the faster
kept: ``PROFILED_SESSIONS``) whose
trace gives each kernel's time inside the real run, with the real cache state, closed; later passes
over all the models time more blocks of plain runs, and the lowest block median is the model's
latency (``Profiled.whole_s``). (Sessions kept open together and run interleaved steal cores
from each other, since onnxruntime's intra-op threads spin after a run: whole-model medians came out
1.2-7x too slow and unstable.) The load average before and after each model is recorded.

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
  the Conv's work. In a kernel with a MAC op the others count their arithmetic alone: a folded
  BatchNormalization or a fused activation makes no pass over memory of its own, and counted
  at a whole elementwise op's cost they took 28-38 % of a MobileNet convolution's kernel, so the
  same convolution was a third cheaper in a model with its BatchNormalization unfolded than in
  one exported with it folded. (The MAC op taking it all and the others nothing was tried in the
  tenth session: mobilenet_v3_small held out stayed +30 %, and with the fused activations also
  kept out of later kernels, below, every fused node's row at the floor put the bench's error
  held out by op kind at 723 %, against 82 % as kept.)
  The activation onnxruntime runs inside a MAC op's kernel (``calibration.fused_into_mac``) is
  in its group whether the kernel is named after it or after the batch norm before it, as
  onnxruntime does either way (both in mobilenet_v3_small); in none of a later kernel's: a
  hard_swish fused into its convolution and read by a global average pool had half the pool;
- a node's kernel time is the median over the profiled runs; the model's rows add up to its
  *plain* latency, not the profiled run's (the profiler adds its own cost per kernel): the rest
  (plain latency less the matched kernels: layout reorders, the executor's work between nodes) is
  shared out (``share_rest``); when the kernels add up to more than the plain latency they are
  scaled down to it. Of the three ways of sharing the rest compared by
  experiments/bench/calibration.py (equal per node, in proportion to kernel time, a per-node
  constant learned across models), ``DEFAULT_REST`` = in proportion to kernel time is kept: on the
  three collections with 3 blocks at a load <= 1.7, held-out whole models had a median error of
  3.4-10.8 % (equal 8.3-13.3 %, learned 7.6-14.2 %) and 39 of 51 within 20 % (equal 36, learned
  41); held out by op kind calibrated/analytical 0.35-0.42 (equal 0.40-0.48, learned 0.37-0.40).
  A node fused away (no kernel) gets no rest. Kernels with no IR name (reorders) stay in the rest
  (``UNNAMED_TO_NEXT``: giving them to the next node did worse; docs/TUNING.md).

A row is per execution: a node in a loop body runs once per trip, its kernel events add up over
the trips, and graph costing counts it once per trip (``Profiled.executions``); an if branch's
node runs as often as the runs took its branch, which its kernel events count (byoc_demo's
residual Add once per run, its damping Mul twice; costing counts the slower branch on every run,
``partition.ops.subgraph_runs``), and a branch never taken gives no row. What control flow costs
onnxruntime of its own (a subgraph's executor on every trip) is measured apart
(``calibrate_control``) and costed on the ``if`` and ``loop`` nodes (``Calibration.host_seconds``),
so it stays out of the rest shared over the rows (``Profiled.control_s``).

The plain latency is what ``tune --calibration``'s all-on-host latency is compared with.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Collection, Mapping, Sequence

import numpy as np

from .calibrate_host import CONTROL, random_feed, walk_counted

FLOOR_S = 1e-8  # a node's in-context time is never below this (the fit is on a log scale)


@dataclass(frozen=True)
class InContext:
    """One IR node of ``model`` and its median time inside the model's run (seconds)."""
    model: str
    node: Any
    seconds: float
    kernel_s: float      # median of the kernels matched to it alone (0 when fused away)
    # both per execution: a node in a loop body runs once per trip (``Profiled.executions``)
    executions: float = 1.0  # how many times it runs per run of the model

    @property
    def per_run_s(self) -> float:
        """What the node costs one run of its model (``seconds`` times its executions)."""
        return self.seconds * self.executions


@dataclass(frozen=True)
class Profiled:
    """One model's in-context rows and its whole-model latencies (medians over rounds)."""
    model: str
    rows: tuple[InContext, ...]
    whole_s: float          # plain session (no profiler), median of the rounds' runs
    best_s: float           # its fastest run
    profiled_run_s: float   # profiled session, median run duration in the trace
    runs: int               # timed runs of the plain session
    kernel_s: Mapping[str, float] = field(default_factory=dict)  # node name -> median matched kernel time
    load: tuple[float, float] = (float("nan"), float("nan"))      # 1-min load average before / after
    unnamed_s: Mapping[str, float] = field(default_factory=dict)  # node name -> median unnamed kernels before it
    overhead_s: float = 0.0  # the profiler's cost taken off every kernel event (``profiler_overhead_s``)
    # node name -> how many times it runs per run: a loop body's node once per trip of the bound
    # (``calibrate_host.walk_counted``), an if branch's as its kernels count; kernel_s is per run,
    # the rows per execution
    executions: Mapping[str, float] = field(default_factory=dict)
    # onnxruntime's speed-up of a small model from its default threads over one, just before the
    # kept profiled sessions (``parallel_speedup``): which phase of the machine the rows come from
    speedup: float = float("nan")
    # the same measured before each block of plain runs (the first, the profile's), in order: the
    # phase each block ``whole_s`` is the lowest median of was timed in
    block_speedups: tuple[float, ...] = ()
    # the phase probe's latency with the default options in those readings (``PhaseReading``), and
    # in the kept profile's: whether they were in the fast phase (``PhaseGate.is_fast``)
    block_probe_s: tuple[float, ...] = ()
    # the same latency read right after each block (nan when not read: ``PhaseGate.read_after``)
    block_after_s: tuple[float, ...] = ()
    probe_s: float = float("nan")
    # each block's median run (s), paired with ``block_probe_s``; ``whole_s`` is the lowest of them
    # as measured or, when none was timed in the fast phase, the one read nearest it brought there
    # (``phase_corrected``), and ``phase_factor`` is ``whole_s`` over the lowest as measured
    block_s: tuple[float, ...] = ()
    phase_factor: float = 1.0
    reprofiled: int = 0     # profiled again in a later pass, the machine faster then (``PHASE_GAP``)
    # seconds of one run spent on control flow itself (``calibrate_control.ControlCost.of_graph``):
    # costed on the if and loop nodes, so the rows add up to the latency less this
    control_s: float = 0.0
    # the sha256 of the ONNX bytes timed: which model an earlier calibration's latency is of
    # (``phase_corrected``'s ``reference_s``)
    sha256: str = ""
    # no block timed in the fast phase, its latency an earlier calibration's of the same bytes on
    # this machine (``phase_corrected``)
    from_reference: bool = False
    # each block's median run over its fastest, paired with ``block_s``: over ``BLOCK_SPREAD`` the
    # block's slower runs were left out of its latency (``block_latency``)
    block_spread: tuple[float, ...] = ()
    # its rows' split between nodes the reference's (``with_split``), with its latency
    split_from_reference: bool = False

    @property
    def block_read_s(self) -> tuple[float, ...]:
        """The phase probe's latency that tells each block's phase: the higher of the readings just
        before and just after it, the one before when there is none after. The machine's phase can
        turn during a block: K59 of runs.md, timed against bursts of memory traffic, ran bert_small
        at 14.5 ms (6.1 calm) and tiny_detector_topk at 6.2 (1.9) after readings at 1.04x the floor."""
        after = self.block_after_s if len(self.block_after_s) == len(self.block_probe_s) else ()
        return tuple(max(b, a) if np.isfinite(a) else b for b, a in zip(self.block_probe_s, after)) if after \
            else self.block_probe_s

    @property
    def block_slowed(self) -> tuple[bool, ...]:
        """Per block (``block_s``): whether it ran over ``BLOCK_GAP`` times the kept profile's median
        run, whatever the readings around it said (``block_slowed``)."""
        return tuple(block_slowed(b, self.profiled_run_s) for b in self.block_s)


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


def _is_kernel(event: dict) -> bool:
    """Whether a trace event is one kernel's execution (onnxruntime's ``<node>_kernel_time``)."""
    return event.get("cat") == "Node" and str(event.get("name", "")).endswith("_kernel_time")


def _kernel_name(event_name: str) -> str:
    """The node name in a kernel event's name: ``fused pooler.dense/Gemm_kernel_time`` -> ``pooler.dense/Gemm``."""
    n = event_name[: -len("_kernel_time")] if event_name.endswith("_kernel_time") else event_name
    return n[len("fused "):] if n.startswith("fused ") else n


def attribute(events: Sequence[dict], node_names: Sequence[str],
              aliases: Mapping[str, str] | None = None, producers: Mapping[str, Sequence[str]] | None = None,
              weights: Mapping[str, float] | None = None, overhead_s: float = 0.0,
              fused_weights: Mapping[str, float] | None = None,
              macs: frozenset[str] = frozenset(), into_mac: Mapping[str, str] | None = None) -> list[dict[str, float]]:
    """Per profiled run (``model_run`` events, in order): {IR node name: seconds}, each name of
    ``node_names`` present (see the module docstring), plus ``"__kernel__" + name`` for the
    matched kernel time alone. ``aliases`` (other name -> node name): the names of a node's
    outputs, after which onnxruntime names some kernels it rewrote (``relu_nchwc``). With
    ``producers`` (node -> the nodes its inputs come from), a kernel is shared by its owner and the
    nodes fused into it (``fused_groups``) in proportion to ``weights`` (their analytical seconds);
    in a group with a node of ``macs`` the others weigh ``fused_weights`` (their arithmetic alone)
    when given. ``into_mac`` (activation -> MAC op): the activations onnxruntime runs inside the
    kernel of the MAC op before them, each in its MAC op's group and in no other.
    ``"__count__" + name``: how many kernel events it had (its executions: onnxruntime times each
    kernel of each execution; a fused node has its kernel's).
    ``"__unnamed__" + name``: the kernels with no IR name (``ReorderInput``, ``SkipLayerNormalization``,
    ``gemm_input_reshape``) that ran after the node's previous kernel and before its own (after the
    run's last named kernel: that node's); they stay in the run's rest in the rows. ``overhead_s``:
    what the profiler adds to every kernel event's duration (``profiler_overhead_s``), taken off
    each event (never below 0)."""
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: e["ts"])
    kernels = sorted((e for e in events if _is_kernel(e)), key=lambda e: e["ts"])
    find = _owner(node_names, aliases or {})
    owners = {find(_kernel_name(e["name"])) for e in kernels} - {None}
    into_mac = into_mac or {}
    groups = fused_groups(node_names, producers, owners | set(into_mac)) if producers else {}
    for act, mac in into_mac.items():
        g = next((g for g in groups.values() if mac in g), None)
        if g is not None and act not in g:
            g.append(act)
    w = weights or {}
    fw = w if fused_weights is None else fused_weights
    out = []
    k = 0
    for r in runs:
        start, end = r["ts"], r["ts"] + r["dur"]
        matched = dict.fromkeys(node_names, 0.0)
        unnamed = dict.fromkeys(node_names, 0.0)
        count = dict.fromkeys(node_names, 0)
        pending, last = 0.0, None
        while k < len(kernels) and kernels[k]["ts"] < start:
            k += 1
        while k < len(kernels) and kernels[k]["ts"] <= end:
            owner = find(_kernel_name(kernels[k]["name"]))
            dur = max(0.0, kernels[k]["dur"] * 1e-6 - overhead_s)
            if owner is not None:
                matched[owner] += dur
                count[owner] += 1
                unnamed[owner] += pending
                pending, last = 0.0, owner
            else:
                pending += dur
            k += 1
        if last is not None:
            unnamed[last] += pending
        for owner, g in groups.items():
            if len(g) > 1 and matched[owner] > 0:
                mac = any(x in macs for x in g)
                gw = {x: max((w if x in macs or not mac else fw).get(x, 0.0), 0.0) for x in g}
                total, tw = matched[owner], sum(gw.values())
                for x in g:
                    matched[x] = total * (gw[x] / tw if tw > 0 else 1.0 / len(g))
                    count[x] = count[owner]
        rest = max(0.0, r["dur"] * 1e-6 - sum(matched.values())) / max(1, len(node_names))
        row = {n: max(FLOOR_S, v + rest) for n, v in matched.items()}
        row.update({"__kernel__" + n: v for n, v in matched.items()})
        row.update({"__unnamed__" + n: v for n, v in unnamed.items()})
        row.update({"__count__" + n: float(v) for n, v in count.items()})
        out.append(row)
    return out


def _add_chain(n: int) -> bytes:
    """An ONNX model of ``n`` Adds of one-element tensors in a chain: kernels that cost nothing."""
    from onnx import TensorProto, helper
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(helper.make_node("Add", [prev, "c"], [f"y{i}"], name=f"add{i}"))
        prev = f"y{i}"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1])],
                          [helper.make_tensor("c", TensorProto.FLOAT, [1], [1.0])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


# Measurements of the profiler's overhead per calibration; the lowest is kept. A busy machine only
# adds to it: on a 2-core EPYC (2026-11-30) it read 2.65 us in calm periods and 3.2-5.4 us in busy
# ones, and every kernel event is cut by it, so a busy reading sent 420 small-kernel rows to the
# floor against 163 (bench runs 17 and 18).
OVERHEAD_REPEATS = 5


def profiler_overhead_s(n: int = 64, runs: int = 30, repeats: int = OVERHEAD_REPEATS) -> float:
    """What onnxruntime's profiler adds to each kernel event's duration on this machine: the median
    kernel time of a chain of ``n`` one-element Adds under the profiler, less the chain's plain time
    per node (kernel and executor together), never below 0; the lowest of ``repeats`` measurements
    (``OVERHEAD_REPEATS``; about 0.1 s each). Measured: 10 us recorded for an Add whose whole cost
    in a plain run is 1.2-1.4 us, and +7.5 us on a 64k-element Add (23.5 us plain): a constant per
    event, so small kernels are inflated several times over."""
    import onnx
    data = _add_chain(n)
    inputs = onnx.load_from_string(data).graph.input
    got = []
    for _ in range(max(1, repeats)):
        wall = [t for b in _plain_blocks(data, inputs, 5, 0, 0.0, runs, runs, 1) for t in b]
        events = _profiled_events(data, {"x": np.ones(1, dtype=np.float32)}, 5 + runs)
        ker = [e["dur"] * 1e-6 for e in events if _is_kernel(e)]
        got.append(max(0.0, float(np.median(ker)) - float(np.median(wall)) / n) if ker else 0.0)
    return min(got)


REST_MODES = ("equal", "kernel", "learned")
DEFAULT_REST = "kernel"  # set from experiments/bench/calibration.py's comparison (docs/TUNING.md)
UNNAMED_TO_NEXT = False  # kernels with no IR name: in the rest (False) or the next node's (True); bench-compared


def row_weights(rows: Sequence[InContext], left_out: Collection[str] = ()) -> "np.ndarray":
    """The fit's weight of each row (``tuner.calibration.model_weights``: every model the same),
    none for the rows of ``left_out``'s models but of an op kind no other model has
    (``tuner.calibration.without_models``; ``left_out_by_excess``)."""
    from .calibration import model_weights, without_models
    models = [r.model for r in rows]
    return without_models(model_weights(models, [r.per_run_s for r in rows]), models, [r.node.op for r in rows],
                          left_out)


def row_samples(rows: Sequence[InContext], host: Any, graphs: Sequence[tuple[str, Any]]) -> list:
    """The calibration's sample of each row (``tuner.calibration.host_sample``), with the bytes a
    run of the model it ran in touches (``graph_run_bytes`` of its label's graph in ``graphs``)."""
    from .calibration import graph_run_bytes, host_sample
    model_bytes = {label: graph_run_bytes(g) for label, g in graphs}
    return [host_sample(r.node, host, model_bytes=model_bytes[r.model]) for r in rows]


def share_rest(kernel_s: Mapping[str, float], whole_s: float, mode: str = DEFAULT_REST,
               per_node_s: float = 0.0) -> dict[str, float]:
    """Each node's in-context seconds from its matched kernel time and the model's measured (plain)
    latency, so they add up to ``whole_s``. The rest (``whole_s`` less the kernels: layout reorders,
    the executor between nodes) is shared out by ``mode``:
    ``equal`` per node; ``kernel`` in proportion to the kernel time (equally when there is none);
    ``learned``: ``per_node_s`` (a constant per node learned across models, ``per_node_rest``) to
    every node, at most the rest over the nodes, the remainder in proportion to kernel time.
    When the kernels add up to more than ``whole_s`` they are scaled down to it (no rest)."""
    if mode not in REST_MODES:
        raise ValueError(f"rest mode must be one of {', '.join(REST_MODES)}, got {mode!r}")
    names = list(kernel_s)
    n = max(1, len(names))
    ker = {k: max(0.0, float(v)) for k, v in kernel_s.items()}
    total = sum(ker.values())
    if total >= whole_s:
        f = whole_s / total if total > 0 else 0.0
        return {k: max(FLOOR_S, v * f) for k, v in ker.items()}
    rest = whole_s - total
    if mode == "equal":
        share = {k: rest / n for k in names}
    else:
        flat = min(max(0.0, per_node_s), rest / n) if mode == "learned" else 0.0
        left = rest - flat * len(names)
        share = {k: flat + (left * ker[k] / total if total > 0 else left / n) for k in names}
    return {k: max(FLOOR_S, ker[k] + share[k]) for k in names}


def per_node_rest(profiled: Sequence["Profiled"]) -> float:
    """The rest per node learned across models: least squares (through 0) of each model's rest
    (plain latency less its kernels) against its node count."""
    pts = [(len(p.kernel_s), max(0.0, p.whole_s - sum(p.kernel_s.values()))) for p in profiled if p.kernel_s]
    den = sum(n * n for n, _ in pts)
    return sum(n * r for n, r in pts) / den if den > 0 else 0.0


def with_rest(p: "Profiled", mode: str, per_node_s: float = 0.0, unnamed: bool = UNNAMED_TO_NEXT) -> "Profiled":
    """``p`` with its rows' seconds shared out again (``share_rest``) over its latency less its
    control flow (``Profiled.control_s``); with ``unnamed`` the kernels with no IR name go to the
    node that runs next (``attribute``) instead of the rest."""
    ker = {n: v + p.unnamed_s.get(n, 0.0) for n, v in p.kernel_s.items()} if unnamed else p.kernel_s
    sec = share_rest(ker, max(FLOOR_S, p.whole_s - p.control_s), mode, per_node_s)
    return replace(p, rows=tuple(replace(r, seconds=sec[r.node.name] / p.executions.get(r.node.name, 1.0))
                                 for r in p.rows))


def with_split(p: "Profiled", node_s: Mapping[str, float] | None) -> "Profiled":
    """``p``, which took a reference's latency (``from_reference``), with that reference's split
    between its nodes too: each row's seconds the reference's for the same node (``node_s``, per
    execution), all scaled so the rows add up to what ``p``'s did. Its own split comes from a
    profile taken out of the fast phase, and beside bursts of memory traffic a model's kernels
    added up to 0.22-5.35x their calm share of its latency (K79 of runs.md against K65: the
    depthwise 64x56x56 probe 2.67x, grouped stride-2 32x112x112 0.29x); the fit then costed
    RegNetY-400MF, ShuffleNetV2 x1.0 and SqueezeNet 1.1 34-52 % high. ``p`` itself when it did not
    take the latency, or ``node_s`` misses one of its nodes (other bytes)."""
    if not p.from_reference or not node_s or not p.rows or any(r.node.name not in node_s for r in p.rows):
        return p
    own = sum(r.seconds * r.executions for r in p.rows)
    theirs = sum(node_s[r.node.name] * r.executions for r in p.rows)
    if not (own > 0 and theirs > 0):
        return p
    f = own / theirs
    return replace(p, rows=tuple(replace(r, seconds=max(FLOOR_S, node_s[r.node.name] * f)) for r in p.rows),
                   split_from_reference=True)


def _with_frozen_heap(fn: Callable) -> Callable:
    """``fn`` with the objects alive at its call moved out of the collector's reach (``gc.freeze``)
    until it returns: the timing collects garbage before each block and profile so that no
    collection lands inside one, and a full collection over the graphs of 88 models took 56 ms,
    892 times, 50 s of a 247 s calibration on a 2-core Zen 1 guest (cProfile, twenty-second session
    of runs.md); over what the timing itself allocates it takes well under 1 ms."""
    import functools
    import gc

    @functools.wraps(fn)
    def frozen(*args, **kwargs):
        gc.collect()
        gc.freeze()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.unfreeze()
    return frozen


@_with_frozen_heap
def profile_models(graphs: Sequence[tuple[str, Any]], rounds: int = 5, warmup: int = 3, seed: int = 0,
                   budget_s: float | None = None, min_time_s: float = 0.2, min_runs: int = 7,
                   max_runs: int = 200, blocks: int = 3, rest: str = DEFAULT_REST,
                   overhead_s: float | None = None, on_step: Callable[[str], None] | None = None,
                   slow_passes: int = 0, slow_budget_s: float | None = None, control: Any = None,
                   gate: PhaseGate | None = None, reference: Mapping[str, float] | None = None,
                   reference_split: Mapping[str, Mapping[str, float]] | None = None
                   ) -> tuple[list[Profiled], list[tuple[str, str]]]:
    """Time every (label, graph) **alone**, one onnxruntime session open at a time; (the models'
    in-context rows and latencies, (label, reason) of the models onnxruntime could not run).

    Per model: a plain session (default options): ``warmup`` runs, then a block of timed runs until
    ``min_time_s`` and ``min_runs`` (at most ``max_runs``); closed. Then ``PROFILED_SESSIONS``
    profiled sessions, each alone: ``warmup`` runs and ``rounds`` profiled runs, closed; of the
    faster session, each node's kernel time is the median over the faster half of the runs. After every model, ``blocks - 1`` more passes time one block
    of each in a fresh plain session, and the lowest block median is the model's latency
    (``whole_s``; a slow phase of the machine, or another process taking a core for a while, slows
    only the blocks it overlaps). The rows add up to the plain latency (``share_rest``: the
    profiler's own cost per kernel stays out).
    Two sessions open at once steal cores from each other (onnxruntime's intra-op threads spin
    after a run): interleaved, whole-model medians came out 1.2-7x too slow. ``budget_s``: once
    spent, the remaining models get one block of ``min(3, min_runs)`` timed runs and one profiled
    run, and no later block is started (the check is per model, so a pass the budget ends part way
    still gives the models before it their block). The later passes read each model's ONNX bytes
    from a file the first pass wrote (a temporary directory, removed on return) instead of
    exporting it again: an export is a quarter of a later pass (18 of 72 s for the default sources
    on a 2-core EPYC, 2026-11-30). With
    ``rest="learned"`` the per-node constant (``per_node_rest``) is learned from these models.
    ``on_step(label)``: called after each model of each pass (a progress bar's tick; ``blocks``
    passes over the models in all unless the budget ends them early).
    Before each model's profile and each later block the machine's phase is measured
    (``parallel_speedup``, ``Profiled.speedup``); a model profiled in a phase slower than the one
    of a later pass (``PHASE_GAP``) is profiled again then, and the new profile kept (comparing the
    two profiles' run times instead kept a 17 ms memory-bound probe's slow-phase profile by noise).
    Then up to ``slow_passes`` more passes over the models still profiled in a slower phase than
    most (``slower_than_most``), those with the fewest blocks first, each model's block started
    before ``slow_budget_s`` (from the start).
    ``control``: the measured cost of control flow (``calibrate_control.ControlCost``); each model's
    share of it (``Profiled.control_s``) stays out of its rows.
    Each of those measurements is a ``gate``'s reading (``PhaseGate``; without one, a gate on the
    phase probe that never waits): before a later block of a model with no block in the fast phase
    yet it waits for that phase (not in the first pass: waiting at every model there spent the
    whole share of a calibration's budget in a slow period, K40 of runs.md, and left the later
    passes 15 models); such a model, or one profiled out of the fast phase, also gets the slow
    passes, and a model profiled out of it is profiled again at a fast reading. A model with no
    block in the fast phase after every pass is brought to it by the probe's latency
    (``phase_corrected``, against the gate's lowest reading), or takes ``reference``'s latency of
    the same bytes (sha256 of the ONNX bytes -> seconds: an earlier calibration of this machine
    that timed it in the fast phase, ``calibrate --host --reference``), and with it
    ``reference_split``'s split between its nodes (sha256 -> node -> seconds, ``with_split``)."""
    import gc
    t0 = time.perf_counter()
    if overhead_s is None:
        overhead_s = profiler_overhead_s()
    if gate is None:
        gate = PhaseGate(phase_probe(), max_wait_s=0.0)
    out: list[Profiled] = []
    failed: list[tuple[str, str]] = []
    # out[i]'s exported file and graph inputs; the directory goes at the return, or with the object
    # if an exception ends the timing (TemporaryDirectory's finalizer)
    tmp = tempfile.TemporaryDirectory(prefix="accel-tune-calibrate-")
    saved: list[tuple[str, list]] = []
    tick = on_step or (lambda label: None)

    def over(limit: float | None) -> bool:
        return limit is not None and time.perf_counter() - t0 > limit

    def retaken(p: Profiled, g: Any, data: bytes, inputs: list, r: PhaseReading) -> Profiled:
        """``p`` profiled again (a block and a profile) after the reading ``r``: ``profiled_again``."""
        q = replace(_profile_one(p.model, g, data, inputs, rounds, warmup, seed, min_time_s, min_runs, max_runs, 1,
                                 overhead_s, after=gate.after), speedup=r.speedup, probe_s=r.default_s,
                    control_s=p.control_s)
        return profiled_again(p, q, r.default_s)

    for label, g in graphs:
        try:
            data, inputs = exported(g)
        except Exception as e:  # noqa: BLE001 - a model the exporter refuses is reported, not fatal
            failed.append((label, _why(e)))
            tick(label)
            continue
        spent = over(budget_s)
        try:
            r = PhaseReading(float("nan"), float("nan")) if spent else gate.read(wait=False)
            p = replace(_profile_one(label, g, data, inputs, rounds=1 if spent else rounds, warmup=warmup, seed=seed,
                                     min_time_s=0.0 if spent else min_time_s,
                                     min_runs=min(3, min_runs) if spent else min_runs, max_runs=max_runs, blocks_n=1,
                                     overhead_s=overhead_s, sessions=1 if spent else PROFILED_SESSIONS,
                                     after=None if spent else gate.after),
                        speedup=r.speedup, block_speedups=(r.speedup,), block_probe_s=(r.default_s,),
                        probe_s=r.default_s, control_s=control.of_graph(g) if control is not None else 0.0)
            p = replace(p, block_s=(p.whole_s,))
            if not spent and profile_slowed(p):
                # at once: on a slow machine the first pass can take nearly the whole budget (K66
                # and K67 of runs.md: 7 of 88 models got a later block), and no later pass would
                # come to take it again
                p = retaken(p, g, data, inputs, gate.read(wait=False))
        except Exception as e:  # noqa: BLE001 - a model onnxruntime cannot run is reported, not fatal
            failed.append((label, _why(e)))
            continue
        finally:
            gc.collect()
            tick(label)
        out.append(p)
        saved.append((os.path.join(tmp.name, f"{len(saved)}.onnx"), inputs))
        with open(saved[-1][0], "wb") as f:
            f.write(data)
    # the other blocks of plain runs in later passes over every model, each in a fresh session: a
    # slow phase of the machine lasting the tens of seconds one model takes (seen: resnet50 at 99 ms
    # for all its blocks in one run, 51-65 ms in others) then slows one block of it, not all.
    # Each pass reads the model's bytes from the file the first pass wrote rather than keep them in
    # memory (1.3 GB for the zoo); the graph is for a profile taken again (its rows' nodes)
    graph_of = dict(graphs)

    def again(i: int) -> None:
        p = out[i]
        try:
            path, inputs = saved[i]
            with open(path, "rb") as f:
                data = f.read()
            r = gate.read(wait=not gate.timed_fast(p))
            sp = r.speedup
            # profiled in a slower phase than now, by the speed-up or out of the fast phase, or
            # slower than its blocks: profile again
            if p.speedup < PHASE_GAP * sp or (not gate.is_fast(p.probe_s) and gate.is_fast(r.default_s)) \
                    or profile_slowed(p):
                out[i] = retaken(p, graph_of[p.model], data, inputs, r)
                return
            wall = _plain_blocks(data, inputs, warmup, seed, min_time_s, min_runs, max_runs, 1)[0]
            after = gate.after()
        except Exception:  # noqa: BLE001 - it ran in the first pass; a later failure keeps that pass
            return
        finally:
            gc.collect()
            tick(p.model)
        out[i] = replace(p, **_with_block(p, block_latency(wall), float(np.min(wall)), len(wall), sp, r.default_s,
                                          (after,), (spread_of(wall),)))

    for _ in range(max(0, blocks - 1)):
        for i in range(len(out)):
            if over(budget_s):
                break
            again(i)
    # then only the models still profiled in a slower phase than most, while the slow-pass budget
    # lasts: a slower phase can come back at the same model on every pass (one calibration, 17 of
    # 63 models, the small ones, at 1.5-1.65x against 1.82x for most after three passes). Those
    # with the fewest blocks first: in a slow period the budget ends the second pass part way, and
    # in order the slow passes gave the first models a third block while the last kept one (K51
    # and K52 of runs.md: 70 and 45 of 88 models, among them every large GEMM probe, one block
    # each, read out of the fast phase and 1.7-2.9x their calm latency)
    for _ in range(slow_passes):
        slow = set(slower_than_most({p.model: p.speedup for p in out}))
        slow |= {p.model for p in out if not gate.in_phase(p)}
        if not slow or over(slow_budget_s):
            break
        for i in sorted((i for i, p in enumerate(out) if p.model in slow), key=lambda i: (len(out[i].block_s), i)):
            if over(slow_budget_s):
                break
            again(i)
    tmp.cleanup()
    ref = reference or {}
    out = [phase_corrected(p, gate.floor_s, reference_s=ref.get(p.sha256)) for p in out]
    c = per_node_rest(out) if rest == "learned" else 0.0
    out = [with_rest(p, rest, c) for p in out]
    split = reference_split or {}
    out = [with_split(p, split.get(p.sha256)) for p in out]
    return out, failed


def exported(g: Any) -> tuple[bytes, list]:
    """``g`` as ONNX bytes (``graph_to_onnx``, the ops onnxruntime would inline as their function
    bodies already inlined, their kernels named after their node: ``tuner.ort_functions``) and its
    graph inputs, copied out of the model so that the model itself is freed: a reference to
    ``model.graph.input`` keeps the whole model, weights and all, alive beside its bytes (0.5 GB
    more for the largest probe)."""
    from onnx import ValueInfoProto
    from partition.onnx.export import graph_to_onnx
    from .ort_functions import ir_types, name_function_bodies
    m = name_function_bodies(graph_to_onnx(g), ir_types(g))
    data = m.SerializeToString()
    inputs = []
    for vi in m.graph.input:
        inputs.append(ValueInfoProto())
        inputs[-1].CopyFrom(vi)
    return data, inputs


def _why(e: Exception) -> str:
    return str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__


# A block whose median run is over this many times its fastest was not timed in one phase of the
# machine: the phase turned within it. Calm, a block's median is at most 1.23x its fastest (K65 of
# runs.md, 88 models, 90 % within 1.07x); K69, timed beside bursts of memory traffic
# (experiments/contention.py), ran bert_tiny's one block at a median of 6.76 ms, its fastest run
# 2.57 and its calm median 2.54, with the phase probe read calm just before and just after it.
BLOCK_SPREAD = 1.3


def spread_of(wall: Sequence[float]) -> float:
    """A block's median run over its fastest (nan for no run)."""
    return float(np.median(wall) / np.min(wall)) if len(wall) and np.min(wall) > 0 else float("nan")


def block_latency(wall: Sequence[float]) -> float:
    """A block's latency: its median run or, when that is over ``BLOCK_SPREAD`` times its fastest
    (``spread_of``), the median of its runs within ``BLOCK_SPREAD`` of the fastest: a burst from
    another process that comes and goes within a block slows some of its runs, and what is left is
    the phase the readings around the block saw. A calm block is its plain median."""
    w = np.asarray(wall, dtype=float)
    if not w.size:
        return float("nan")
    fastest = float(w.min())
    if not spread_of(w) > BLOCK_SPREAD:
        return float(np.median(w))
    return float(np.median(w[w <= BLOCK_SPREAD * fastest]))


def _plain_blocks(data, inputs, warmup, seed, min_time_s, min_runs, max_runs, blocks_n,
                  threads: int | None = None) -> list[list[float]]:
    """Blocks of timed runs of a plain session (default options; ``threads`` intra-op threads when
    given) of ``data``, opened and closed here: the lowest block median is the model's latency
    (another process taking a core for a while only slows the blocks it overlaps;
    experiments/bench/calibration.py, docs/TUNING.md)."""
    import gc
    import onnxruntime as ort
    feed = random_feed(inputs, np.random.default_rng(seed))
    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    plain = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    for _ in range(warmup):
        plain.run(None, feed)
    blocks: list[list[float]] = []
    for _ in range(max(1, blocks_n)):
        wall: list[float] = []
        t_start = time.perf_counter()
        while len(wall) < max_runs and (len(wall) < min_runs or time.perf_counter() - t_start < min_time_s):
            t = time.perf_counter()
            plain.run(None, feed)
            wall.append(time.perf_counter() - t)
        blocks.append(wall)
    del plain
    gc.collect()
    return blocks


def _profiled_events(data: bytes, feed: dict, runs: int) -> list[dict]:
    """The trace events of ``runs`` runs of a profiled session of ``data`` (default options plus
    ``enable_profiling``), opened and closed here; the trace file is removed."""
    import gc
    import onnxruntime as ort
    tmp = tempfile.mkdtemp(prefix="accel-tune-profile-")
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tmp, "p")
    prof = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    try:
        for _ in range(runs):
            prof.run(None, feed)
        path = prof.end_profiling()
    finally:
        del prof
        gc.collect()
    try:
        with open(path) as f:
            return json.load(f)
    finally:
        os.unlink(path)
        try:
            os.rmdir(tmp)
        except OSError:
            pass


# Profiled sessions per model; the kernels of the faster one are kept. Why: onnxruntime's latency
# on a shared 2-core VM is bimodal per session (mobilenet_v3_small 0.62-0.67 or 1.02-1.12 ms,
# docs/TUNING.md), and a profiled session in the slow mode inflates the small kernels more than the
# large ones, so its rows' proportions are skewed even once they are scaled to the plain latency
# (mobilenet_v3_large's profiled run at 1.84x its plain latency where other runs had 1.38-1.49x;
# mobilenet_v3_small held out then came out +24 %, against +2 to +12 % on the other runs).
PROFILED_SESSIONS = 2


def _run_median(events: Sequence[dict], warmup: int) -> float:
    """The median ``model_run`` duration (seconds) of a profiled session's events, after ``warmup``."""
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: e["ts"])[warmup:]
    return float(np.median([e["dur"] * 1e-6 for e in runs])) if runs else float("inf")


def _fastest_profile(data: bytes, feed: dict, runs: int, warmup: int, sessions: int) -> list[dict]:
    """The events of the fastest (median run after ``warmup``) of ``sessions`` profiled sessions of
    ``data``, each opened alone and closed (``_profiled_events``)."""
    best: list[dict] | None = None
    for _ in range(max(1, sessions)):
        ev = _profiled_events(data, feed, runs)
        if best is None or _run_median(ev, warmup) < _run_median(best, warmup):
            best = ev
    return best


# The phase indicator. On the shared 2-core VMs of docs/TUNING.md the slower phases are ones in
# which onnxruntime's second thread buys less on small kernels. A chain of ten 3x3 convolutions of
# 16 channels at 28x28 (the indicator until the eleventh session) read 1.79-1.84x in the fast phase
# and 1.50-1.60x in the slow one of an Intel guest, but on a 2-core EPYC it hardly saw a middle
# mode in which mobilenet_v3_small ran 1.08-1.87 ms against 1.05-1.11 (1.69-1.85x against
# 1.69-2.05x). A chain of forty at 14x14, kernels of a few microseconds, reads it (60 samples,
# 2026-11-30): 1.55-1.58x in the fast mode, 1.37-1.46x in the middle one, 0.75-1.00x in the slowest
# (mobilenet_v3_small 1.86-2.35 ms). ~60 ms a measurement. A profile taken at a speed-up under
# PHASE_GAP times the one of a later pass is taken again then, and kept; 0.95 puts the middle mode
# under it and the fast one's 1.55-1.58x above.
PHASE_GAP = 0.95
# what ``parallel_speedup`` times by default, as a host calibration's file records it
# (``meta.phase_probe``): speed-ups of another probe are not compared with its own
PHASE_PROBE = "40 x (conv 3x3 + batch norm + relu), 16 channels, 14x14"


def phase_reference(speedups: Mapping[str, float]) -> float:
    """The speed-up of the machine's faster phase over ``speedups``: the upper quartile of the
    finite ones (nan when there are none). Not the best: one measurement right after other work
    read 2.16x against 1.8x for the rest. Not the median: a slow phase over half of the
    measurements made it the slow phase's (2026-11-29, seventh session: 11 of 21 unseen files
    timed at 1.44-1.58x, the median 1.58x, so none was timed again)."""
    sp = [v for v in speedups.values() if np.isfinite(v)]
    return float(np.percentile(sp, 75)) if sp else float("nan")


def slower_than_most(speedups: Mapping[str, float], reference: float | None = None) -> list[str]:
    """The keys whose speed-up (``parallel_speedup``) is under ``PHASE_GAP`` times the faster
    phase's (``phase_reference``, or ``reference`` when that is higher: the faster phase measured
    on this machine before, e.g. during its calibration, which a timing spent all in a slow phase
    cannot see among its own speed-ups): measured in a slower phase of the machine."""
    ref = phase_reference(speedups)
    if reference is not None and np.isfinite(reference) and not ref >= reference:
        ref = float(reference)
    return sorted(k for k, v in speedups.items() if np.isfinite(v) and v < PHASE_GAP * ref)


def phase_probe() -> bytes:
    """The model ``parallel_speedup`` times, after one measurement thrown away: the first of a
    process read 0.99x in the fast phase even with 20 warm-ups (experiments/calibration_unseen.py,
    2026-11-29), the next ones 1.8x."""
    model = _speedup_model()
    parallel_speedup(runs=5, model=model)
    return model


def _speedup_model() -> bytes:
    from partition.builder import GraphBuilder
    from partition.onnx.export import graph_to_onnx
    b = GraphBuilder.for_model("speedup_probe", 0)
    x = b.input("x", [1, 16, 14, 14])
    for i in range(40):   # PHASE_PROBE
        x = b.conv_bn(x, 16, 3, name=f"c{i}", act="relu")
    return graph_to_onnx(b.finish([x])).SerializeToString()


@dataclass(frozen=True)
class PhaseReading:
    """One measurement of the phase probe (``phase_reading``): its median latency on one intra-op
    thread and with the default session options (seconds)."""
    one_s: float
    default_s: float

    @property
    def speedup(self) -> float:
        return self.one_s / self.default_s


def phase_reading(runs: int = 30, model: bytes | None = None) -> PhaseReading:
    """onnxruntime's latency of a small model (``_speedup_model``) on one intra-op thread and with
    the default session options (medians of ``runs`` runs after 20 warm-ups, one session open at a
    time; with 5 the first pairs after other work came out near 1.0 in the fast phase, and the
    first of a process still can: ``phase_probe``)."""
    data = model if model is not None else _speedup_model()
    return PhaseReading(default_latency(data, runs, threads=1), default_latency(data, runs))


def default_latency(model: bytes, runs: int = 30, threads: int | None = None) -> float:
    """``phase_reading``'s default-options half alone (or with ``threads`` intra-op threads): the
    model's median latency over ``runs`` runs after 20 warm-ups (seconds)."""
    import onnx
    inputs = onnx.load_from_string(model).graph.input
    n = max(1, runs)
    return float(np.median(_plain_blocks(model, inputs, 20, 0, 0.0, n, n, 1, threads=threads)[0]))


def parallel_speedup(runs: int = 30, model: bytes | None = None) -> float:
    """``phase_reading``'s one-thread latency over the default one: about 1.0 when the default is
    one thread."""
    return phase_reading(runs=runs, model=model).speedup


# The fast phase in absolute terms. The speed-up is a ratio, and its one-thread half slows too: on
# a 2-core EPYC (2026-11-30, 900 readings in 5 minutes: experiments/phase_levels.py, its results)
# the probe's default latency sat at three levels, 0.225-0.235 ms (fast), 0.25-0.26 (middle) and
# 0.28-0.45 (slow), and a reading with its one thread at 0.43-0.45 ms in place of 0.36 read
# 1.6-1.8x at a default latency of 0.27-0.28, when resnet50 ran 75 ms against 39. Against their
# fast-level medians, models ran 1.05-1.27x at the middle level and 0.93-2.50x at the slow one
# (mobilenet_v2 1.84x, resnet18 1.13x), so no one factor brings a slow block back to the fast
# phase. A reading is in the fast phase when its default latency is within FAST_GAP of the lowest
# reading so far: 1.08 keeps the fast level (at most 1.05x its floor) and leaves the middle one
# (1.11x) out.
FAST_GAP = 1.08
# the share of the passes' budget a calibration's gate may spend waiting (``cmd_calibrate``): in a
# calm phase it waits for nothing, and when the phases change every few seconds the waiting must
# leave the passes time
GATE_SHARE = 0.25
# The phases changed every few seconds there (runs of fast readings 1.4 s long on average, at most
# 7 s; of middle ones 1.6 s; of slow ones 3.7 s, one 68 s), so waiting a little finds a fast one:
# a gate waits at most this long before it lets a block be timed anyway.
GATE_WAIT_S = 2.0
# A slow phase can also last minutes (K39, runs.md: most of a 4-minute calibration at 1.2-1.9x
# the floor, and a gate that waited at every model spent its whole share of the budget in the
# first pass). After this many waits in a row that found no fast reading, a gate reads once
# without waiting until a reading is fast again.
GATE_MISSES = 3


# How a block's latency follows the phase probe's out of the fast phase: over its model's
# fast-level median, about (probe latency / the probe's lowest) ** PHASE_EXPONENT, the least-squares
# exponent of the 900 readings of experiments/results/phase_levels/ (``phase_levels.py --from``).
# It centres the blocks (between the 10th and 90th percentile, 1.03-1.22x -> 0.95-1.13x at the
# middle level, 1.03-2.05x -> 0.72-1.36x at the slow one) but leaves their spread: the gate's
# waiting comes first, this takes the bias out of a model it could not wait for (``phase_corrected``).
# Refitted offline on six calibrations' timings with their checks (runs.md, eighteenth session; each
# model's lowest block by the factor of its lowest reading), 318 model predictions: beyond 15 %
# 32 -> 12, beyond 20 % 9 -> 6; K46, timed almost wholly out of the fast phase (86 of 88 models),
# its median model +11 -> -3 %.
PHASE_EXPONENT = 0.71


# A profile slower than its model's plain runs: its kernels (the profiler's own cost per kernel
# taken off) add up to more than this many times the model's lowest block as measured. Calm, they
# add up to 0.53-1.06x on this machine's K64 and K65 (runs.md, twenty-first session); K66, timed
# beside bursts of memory traffic (experiments/contention.py), profiled 7 models at 1.3-3.2x,
# ssd_detector at 3.2x after phase readings of 0.87 and 1.01 ms against the calm 0.64. A burst
# holding one core slows onnxruntime's two-thread kernels (the convolutions) more than its
# one-thread ones, so such a profile's split is skewed even once scaled to the plain latency: the
# fit then costed ssd_detector's convolutions 1.4x K65's and the model +31 %.
PROFILE_GAP = 1.3


# A block of plain runs slower than the profiled runs of the same model: its median over this many
# times the kept profile's median run. The profiler only adds time (its own cost per kernel), so
# calm a block is at most 1.39x its model's profiled run (K64 and K65 of runs.md, 176 models; 1.27x
# at the 99th percentile, 0.92x the median). K70, timed beside bursts of memory traffic
# (experiments/contention.py), ran resnet18's one block at 99.1 ms, 2.0x its profiled run and its
# calm latency (48.8), with the phase probe read calm just before and just after it: a burst that
# began after the one reading and ended before the other.
BLOCK_GAP = 1.5


def block_slowed(block_s: float, profiled_run_s: float) -> bool:
    """Whether a block's median ``block_s`` ran over ``BLOCK_GAP`` times its model's profiled run
    (False when either is no number): a block that does is not timed in the fast phase, and the
    model's latency is never above its profiled run (``phase_corrected``)."""
    return bool(block_s > BLOCK_GAP * profiled_run_s)


# A model timed in the fast phase but slower than the reference's latency of the same bytes by
# more than this: calm, a model's latency is at most 1.13x K65's in K73 (77 models timed fast on
# both sides, 1.10x at the 99th percentile); K72 and K74, beside bursts of memory traffic, timed
# models at 1.8x and 2.6x between readings the bursts did not move.
REFERENCE_GAP = 1.25


def _with_block(p: "Profiled", block_s: float, best_s: float, runs: int, speedup: float, probe_s: float,
                after_s: tuple[float, ...], spread: tuple[float, ...]) -> dict:
    """The fields of ``p`` with one more block of plain runs (its latency, fastest run, runs, and
    the readings before and after it): a later pass's block and a retaken profile's alike."""
    return dict(whole_s=min(p.whole_s, block_s), best_s=min(p.best_s, best_s), runs=p.runs + runs,
                block_speedups=p.block_speedups + (speedup,), block_probe_s=p.block_probe_s + (probe_s,),
                block_s=p.block_s + (block_s,), block_after_s=p.block_after_s + after_s,
                block_spread=p.block_spread + spread)


def profiled_again(p: "Profiled", q: "Profiled", probe_s: float) -> "Profiled":
    """``p`` with ``q``, the same model profiled again after a phase reading of ``probe_s``, in it:
    ``q``'s block added to ``p``'s, and ``q``'s profile kept unless it too ran slower than the
    blocks (``profile_slowed``) with more kernel time than ``p``'s."""
    both = dict(_with_block(p, q.whole_s, q.best_s, q.runs, q.speedup, probe_s, q.block_after_s, q.block_spread),
                reprofiled=p.reprofiled + 1)
    slowed_again = profile_slowed(replace(q, whole_s=both["whole_s"])) and \
        sum(q.kernel_s.values()) > sum(p.kernel_s.values())
    return replace(p if slowed_again else q, **both)


def profile_slowed(p: "Profiled") -> bool:
    """Whether ``p``'s kept profile ran slower than its plain blocks (``PROFILE_GAP``): measured by
    the profile itself, so it holds whatever phase reading came before it. Not told without the
    profiler's own cost taken off the kernels (``overhead_s`` 0: a small model's kernels then add
    up to more than its plain latency)."""
    if not p.overhead_s > 0:
        return False
    measured = p.whole_s / p.phase_factor if p.phase_factor > 0 else p.whole_s
    kernels = float(sum(p.kernel_s.values()))
    return bool(np.isfinite(measured) and measured > 0 and kernels > PROFILE_GAP * measured)


def in_fast_phase(probe_s: float, floor_s: float) -> bool:
    """The one rule for a phase reading in the fast phase: its default latency within ``FAST_GAP``
    of the lowest (``PhaseGate.is_fast``, ``phase_factor``); a reading that is no number is not."""
    return bool(probe_s <= FAST_GAP * floor_s)


def phase_factor(probe_s: float, floor_s: float, exponent: float = PHASE_EXPONENT) -> float:
    """What a block timed after a phase reading of ``probe_s`` is multiplied by to bring it to the
    fast phase: (``floor_s`` / ``probe_s``) ** ``exponent`` out of the fast phase
    (``in_fast_phase``), 1 in it or when either is not a finite positive number."""
    if not (np.isfinite(probe_s) and np.isfinite(floor_s) and probe_s > 0 and floor_s > 0):
        return 1.0
    return 1.0 if in_fast_phase(probe_s, floor_s) else float((floor_s / probe_s) ** exponent)


def phase_corrected(p: "Profiled", floor_s: float, exponent: float = PHASE_EXPONENT,
                    reference_s: float | None = None) -> "Profiled":
    """``p`` brought to the fast phase when none of its blocks was timed in it: its latency is the
    block read nearest the fast phase (the lowest reading) times that reading's ``phase_factor``
    against ``floor_s``, or its lowest block as measured when that is lower (``best_s`` by the same
    ratio), its profile's kernels times the factor of the profile's reading. The correction is a
    median over models and its spread grows with the distance from the floor (0.95-1.13x of the
    fast median at the middle level, 0.72-1.36x at the slow one): the lowest of all corrected
    blocks picks the one cut most (K47 of runs.md: resnet18's 18.05 ms block at 1.95x the floor
    became 11.2 ms, against 17.4 measured; its block at 1.17x, 20.96 ms, becomes 18.8). And a
    reading does not always tell its block (K49: resnet50's block read nearest, at 1.14x, ran
    76.0 ms, its others 41.8 and 47.3), so the correction never raises the lowest block.
    ``reference_s``, the latency of the same bytes timed in the fast phase by an earlier
    calibration of this machine, is a measurement in place of that median: the latency is it, or
    the lowest block when that is lower, and the kernels are scaled alike (``from_reference``).
    Each model slows by its own exponent, 0.85-1.16x of its fast median at the slow level
    (experiments/results/phase_levels/); K57 of runs.md, timed against bursts of memory traffic:
    16 / 14 / 20 models within 20 % with the exponent, 17 / 15 / 20 with K55's latencies.
    A block that ran slower than its model's profile (``block_slowed``) is not in the fast phase
    whatever its readings, and with no reference the model is then never above its profiled run.
    A block with no reading (the models timed once the budget is spent) takes the reference's
    latency too: on a slow host the first pass can spend the whole budget, and K71's last 26
    models (grouped, depthwise and classifier probes) kept blocks of three runs at up to 3.7x
    their calm latency, and 16 of them left the fit by the excess rule.
    A model timed in the fast phase by its readings but over ``REFERENCE_GAP`` times the
    reference's latency takes that latency as well: on the Zen 1 guest the phase probe does not see
    bursts of memory traffic at all (0.65 ms in and out of them), and K74 timed resnet50's shapes
    file at 288 ms (111 calm) between calm readings; that one model's rows put every unseen
    convolutional network 22-187 % high.
    A model with a block timed in the fast phase, or without ``block_s``, is ``p`` itself."""
    if not p.block_s or len(p.block_s) != len(p.block_probe_s):
        return p
    read = [(v, b, s) for v, b, s in zip(p.block_read_s, p.block_s, p.block_slowed) if np.isfinite(v)]
    taken = reference_s is not None and bool(np.isfinite(reference_s)) and reference_s > 0
    # timed fast by the readings but slower than the reference by more than a calm run varies
    # (``REFERENCE_GAP``): the readings missed what slowed it
    if any(in_fast_phase(v, floor_s) and not s for v, _, s in read) and \
            not (taken and p.whole_s > REFERENCE_GAP * reference_s):
        return p
    # a block with no reading (timed once the budget was spent, ``profile_models``) is not known
    # to be fast: the reference's latency, when there is one, or the block as it is
    if not read and not taken:
        return p
    # a block slower than its model's profiled runs (``block_slowed``): never above them
    lowest = min(p.whole_s, p.profiled_run_s) if any(s for _, _, s in read) else p.whole_s
    if taken:
        whole = min(reference_s, p.whole_s)
    else:
        v, b, _ = min(read)
        whole = min(b * phase_factor(v, floor_s, exponent), lowest)
    f = whole / p.whole_s if p.whole_s > 0 else 1.0
    # the kernels by the same factor as the latency it measured, or by their own reading's
    k = f if taken else phase_factor(p.probe_s, floor_s, exponent)
    return replace(p, whole_s=whole, best_s=p.best_s * f, phase_factor=f, from_reference=taken,
                   kernel_s={n: x * k for n, x in p.kernel_s.items()},
                   unnamed_s={n: x * k for n, x in p.unnamed_s.items()})


class PhaseGate:
    """Readings of the phase probe that wait for the machine's fast phase (``FAST_GAP``).

    ``read(wait=True)`` measures until a reading is fast, ``max_wait_s`` has passed, or the gate's
    ``total_wait_s`` is spent, and returns the last reading; ``read(wait=False)`` measures once, and
    so does ``read()`` after ``GATE_MISSES`` waits in a row that ended slow, until a fast reading.
    ``floor_s`` is the lowest default latency read so far (start it at a calibration's to hold a
    later timing to the same machine speed, or at an earlier calibration's: ``--reference``);
    ``lowest_s`` the lowest it read itself; ``waited_s`` the time spent waiting in all."""

    def __init__(self, probe: bytes, floor_s: float = float("inf"), max_wait_s: float | None = None,
                 total_wait_s: float = float("inf"), read_after: bool = False):
        self.probe, self.floor_s, self.total_wait_s = probe, floor_s, total_wait_s
        self.read_after = read_after
        self.max_wait_s = GATE_WAIT_S if max_wait_s is None else max_wait_s
        self.waited_s = 0.0
        self.misses = 0   # waits in a row that ended slow
        self.lowest_s = float("inf")   # the lowest default latency this gate read itself

    def is_fast(self, default_s: float) -> bool:
        return in_fast_phase(default_s, self.floor_s)

    def timed_fast(self, p: "Profiled") -> bool:
        """Whether any block of ``p`` was timed in the fast phase (``Profiled.block_read_s``), and
        ran no slower than its profile (``Profiled.block_slowed``)."""
        return any(self.is_fast(v) and not s for v, s in zip(p.block_read_s, p.block_slowed))

    def in_phase(self, p: "Profiled") -> bool:
        """Whether ``p`` has a block timed in the fast phase and its profile taken in it (read so,
        and not slower than its blocks: ``profile_slowed``): a model the slow passes leave, and no
        candidate for the fit's leave-out (``cmd_calibrate``)."""
        return self.timed_fast(p) and self.is_fast(p.probe_s) and not profile_slowed(p)

    def after(self) -> float:
        """With ``read_after``, the probe's default latency read once right after a block (nan
        without): a block is in the fast phase only when the readings before and after it are
        (``Profiled.block_read_s``). One default-thread median (``default_latency``), about 20 ms."""
        if not self.read_after:
            return float("nan")
        v = default_latency(self.probe)
        self.floor_s = min(self.floor_s, v)
        self.lowest_s = min(self.lowest_s, v)
        return v

    def read(self, wait: bool = True) -> PhaseReading:
        wait = wait and self.misses < GATE_MISSES
        t0: float | None = None   # the end of the first reading: what comes after it is waiting
        while True:
            r = phase_reading(model=self.probe)
            self.floor_s = min(self.floor_s, r.default_s)
            self.lowest_s = min(self.lowest_s, r.default_s)
            now = time.perf_counter()
            t0 = now if t0 is None else t0
            spent = now - t0
            fast = self.is_fast(r.default_s)
            if not wait or fast or spent >= self.max_wait_s or self.waited_s + spent >= self.total_wait_s:
                self.waited_s += spent
                self.misses = 0 if fast else self.misses + int(wait)
                return r


def _profile_one(label, g, data, inputs, rounds, warmup, seed, min_time_s, min_runs, max_runs,
                 blocks_n, overhead_s: float = 0.0, sessions: int = PROFILED_SESSIONS,
                 after: Callable[[], float] | None = None) -> Profiled:
    from types import SimpleNamespace
    from sim.graph.subgraph import host_op_work
    from sim.graph.transfer import host_pass_seconds
    from sim.hw.config import HostConfig
    from .calibration import MAC_OPS, fused_into_mac, mac_of
    feed = random_feed(inputs, np.random.default_rng(seed))
    load = os.getloadavg()[0]
    # 1. the plain session alone: the model's latency
    blocks = _plain_blocks(data, inputs, warmup, seed, min_time_s, min_runs, max_runs, blocks_n)
    # the phase right after the block, before the profile (``PhaseGate.after``)
    after_s = after() if after is not None else float("nan")
    # 2. the profiled sessions, each alone: the kernels of the faster one
    events = _fastest_profile(data, feed, warmup + rounds, warmup, sessions)
    # a node whose loop never runs (a trip bound of 0) has no kernel time and no row; an if
    # branch's node is kept whatever costing counts it (the profile says how often it ran)
    counted = [(n, w, b) for n, w, b in walk_counted(g) if n.op not in CONTROL and (w > 0 or b)]
    nodes = [n for n, _, _ in counted]
    runs_of: dict[str, float] = {}
    for n, w, _ in counted:
        runs_of[n.name] = runs_of.get(n.name, 0.0) + w
    branch = {n.name for n, _, b in counted if b}
    hw = SimpleNamespace(host=HostConfig())  # the default host model: how a fused kernel is shared
    names = list(dict.fromkeys(n.name for n in nodes))
    aliases = {v.name: n.name for n in nodes for v in n.outputs if v.name not in names}
    by_out = {id(v): n.name for n in nodes for v in n.outputs}
    producers = {n.name: [by_out[id(v)] for v in n.inputs if id(v) in by_out] for n in nodes}
    work = {n.name: host_op_work(n) for n in nodes}     # (FLOPs, bytes)
    weights = {k: host_pass_seconds(*fb, hw) for k, fb in work.items()}
    arithmetic = {k: fb[0] / hw.host.peak_flops for k, fb in work.items()}
    macs = frozenset(n.name for n in nodes if n.op in MAC_OPS)
    into_mac = {n.name: mac_of(n).name for n in nodes if fused_into_mac(n)}
    per_run = attribute(events, names, aliases, producers, weights, overhead_s, arithmetic, macs, into_mac)[warmup:]
    run_s = [e["dur"] * 1e-6 for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"][warmup:]
    # the kernels of the faster half of the profiled runs (a run slowed by another process is left out)
    fast = [r for r, d in zip(per_run, run_s) if d <= float(np.median(run_s))] or per_run
    # an if branch's node runs as often as the runs took its branch: its kernels say how often (a
    # branch never taken has no row; costing counts the slower branch, ``subgraph_runs``)
    for n in branch & set(names):
        runs_of[n] = float(np.median([r["__count__" + n] for r in fast])) if fast else 0.0
    names = [n for n in names if runs_of[n] > 0]
    runs_of = {n: runs_of[n] for n in names}
    ker = {n: float(np.median([r["__kernel__" + n] for r in fast])) if fast else 0.0 for n in names}
    unn = {n: float(np.median([r["__unnamed__" + n] for r in fast])) if fast else 0.0 for n in names}
    whole = min(block_latency(w) for w in blocks)
    wall = [t for w in blocks for t in w]
    # a name shared by several nodes keeps one row (its first node); a row is per execution: the
    # kernel events of a loop body's node add up over the trips, and costing counts it per trip.
    # Its seconds (the kernel plus a share of the rest) are set by ``with_rest``
    rows = tuple(InContext(label, n, 0.0, ker[n.name] / runs_of[n.name], runs_of[n.name])
                 for n in {n.name: n for n in nodes}.values() if n.name in runs_of)
    p = Profiled(label, rows, whole, float(np.min(wall)), float(np.median(run_s)) if run_s else float("nan"),
                 len(wall), ker, (load, os.getloadavg()[0]), unn, overhead_s, runs_of,
                 sha256=hashlib.sha256(data).hexdigest(), block_after_s=(after_s,),
                 block_spread=tuple(spread_of(w) for w in blocks))
    return with_rest(p, "equal")  # shared out again by profile_models' ``rest`` once every pass is in


__all__ = ["InContext", "Profiled", "attribute", "fused_groups", "profile_models", "share_rest", "per_node_rest",
           "with_rest", "row_weights", "parallel_speedup", "phase_probe", "phase_reference", "slower_than_most",
           "phase_reading", "PhaseReading", "default_latency", "PhaseGate", "REST_MODES", "DEFAULT_REST", "FLOOR_S",
           "PHASE_GAP", "PHASE_PROBE", "FAST_GAP", "GATE_WAIT_S", "GATE_MISSES", "PHASE_EXPONENT", "phase_factor",
           "phase_corrected", "in_fast_phase", "PROFILE_GAP", "profile_slowed",
           "profiled_again", "BLOCK_SPREAD", "block_latency", "spread_of", "BLOCK_GAP", "block_slowed", "REFERENCE_GAP",
           "with_split"]
