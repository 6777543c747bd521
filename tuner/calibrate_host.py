"""Timing the host's ops on this machine with onnxruntime, one node at a time (``accel-tune
calibrate --host`` times ops in context, ``tuner.calibrate_context``, and uses this module for the
ops of models onnxruntime cannot run whole, and for its shared helpers).

- The ops: every primitive node of the models given (the built-in models and the ONNX files of
  the zoo by default: ``default_sources``), control flow left out (the host model charges it its
  dispatch only), deduplicated by (op, input shapes and dtypes, attributes): ``collect_ops``.
  ``max_per_op`` keeps at most that many shapes of one op kind (spread over its sizes) and
  ``ops`` limits the kinds, so a run fits its budget.
- Each op becomes a one-node ONNX model (``partition.onnx.export.node_to_onnx``: the writer of
  its op, its constants as initializers), run by onnxruntime with its *default* session options
  (the contract: the thread count it chose is recorded), on seeded random inputs: warm-up runs,
  then repeats until ``min_repeats`` and ``min_time_s`` are both reached (at most
  ``max_repeats``), and the median is kept. The cost of ``InferenceSession.run`` itself, paid
  once per model and not once per op, is subtracted (``run_overhead``: chains of 1 and 11
  Neg nodes tell it apart from the dispatch cost each op keeps).
- Kinds are visited round-robin, small shapes first, so a time budget that runs out leaves every
  kind covered.
"""
from __future__ import annotations

import glob
import os
import time
import warnings
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

CONTROL = ("if", "loop", "call")
# the shared real models beside the checkout (../shared/models), when present (docs/TUNING.md)
SHARED_MODELS = str(Path(__file__).resolve().parents[2] / "shared" / "models")


@dataclass(frozen=True)
class HostOp:
    """One unique host op: a node of ``model`` (the first model it was seen in)."""
    key: str
    op: str
    model: str
    node: Any


@dataclass(frozen=True)
class TimingOptions:
    warmup: int = 2
    min_repeats: int = 5
    max_repeats: int = 50
    min_time_s: float = 0.05
    seed: int = 0


def default_sources() -> list[str]:
    """The built-in models by name and the zoo's ONNX files (``experiments/zoo`` exports to
    ``../shared/models`` beside the checkout), whichever exist."""
    from partition import models
    names = [m.name for m in models.list_models()]
    return names + sorted(glob.glob(os.path.join(SHARED_MODELS, "*.onnx")))


def load_source(src: str):
    """A built-in model name or an ONNX file (stripped weights are filled by the importer)."""
    from partition import load_onnx, models
    if os.path.exists(src) or src.endswith(".onnx"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load_onnx(src)
    return models.get(src)


def source_label(src: str) -> str:
    base = os.path.basename(src)
    for suffix in (".shapes.onnx", ".onnx"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def walk_nodes(g: Any) -> Iterable[Any]:
    """Every primitive node of a graph: inside composites, loop bodies and if branches too."""
    return (n for n, _ in walk_weighted(g))


def walk_weighted(g: Any, weight: float = 1.0) -> Iterable[tuple[Any, float]]:
    """``walk_nodes`` with how many times graph costing counts each node per run
    (``tuner.costing.graph_cost``, ``partition.ops.subgraph_runs``): a loop body once per trip of
    its constant bound, of an if the branch it counts once (a constant condition's, else the
    slower one) and the other never."""
    return ((n, w) for n, w, _ in walk_counted(g, weight))


def walk_counted(g: Any, weight: float = 1.0, in_branch: bool = False,
                 scope: Mapping[str, Any] | None = None, controls: bool = False) -> Iterable[tuple[Any, float, bool]]:
    """``walk_weighted`` with whether each node is inside an if branch (how often it runs is known
    only at run time: ``calibrate_context`` counts its kernels in the profile instead). With
    ``controls`` every if and loop node comes too, before its sub-graphs' nodes."""
    from partition.ops import subgraph_runs
    scope = {**(scope or {}), **g.functions}
    for n in g.nodes:
        if n.op == "call":
            fn = scope.get(n.attrs.get("callee"))
            if fn is not None:
                yield from walk_counted(fn.graph, weight, in_branch, scope, controls)
            continue
        if n.op in CONTROL:
            if controls:
                yield n, weight, in_branch
            for k, runs in subgraph_runs(n, scope).items():
                yield from walk_counted(n.attrs[k], weight * runs, in_branch or n.op == "if", scope, controls)
            continue
        yield n, weight, in_branch


def op_key(node: Any) -> str:
    ins = ",".join(f"{'c' if v.is_const else ''}{v.dtype}{list(v.shape)}" for v in node.inputs)
    attrs = ",".join(f"{k}={node.attrs[k]!r}" for k in sorted(node.attrs) if k not in ("body", "then_branch", "else_branch"))
    return f"{node.op}({ins}){{{attrs}}}"


def collect_ops(graphs: Sequence[tuple[str, Any]], ops: Sequence[str] | None = None,
                max_per_op: int | None = None) -> list[HostOp]:
    """The unique primitive ops of ``graphs`` ((label, graph) pairs), in visiting order: kinds
    round-robin, each kind's shapes from the smallest up; at most ``max_per_op`` per kind (spread
    evenly over its sizes), only the kinds in ``ops`` when given."""
    from partition.onnx.writers import WRITERS
    by_kind: dict[str, dict[str, HostOp]] = {}
    for label, g in graphs:
        for n in walk_nodes(g):
            if (ops and n.op not in ops) or n.op not in WRITERS:
                continue
            k = op_key(n)
            by_kind.setdefault(n.op, {}).setdefault(k, HostOp(k, n.op, label, n))
    lists = []
    for kind in sorted(by_kind):
        items = sorted(by_kind[kind].values(), key=lambda h: (_size(h.node), h.key))
        if max_per_op is not None and len(items) > max_per_op:
            idx = np.unique(np.linspace(0, len(items) - 1, max_per_op).round().astype(int))
            items = [items[i] for i in idx]
        lists.append(items)
    out = []
    for i in range(max((len(x) for x in lists), default=0)):
        out.extend(x[i] for x in lists if i < len(x))
    return out


def _size(node: Any) -> int:
    return sum(int(np.prod(v.shape, dtype=np.int64)) for v in (*node.inputs, *node.outputs))


def random_feed(inputs: Sequence[Any], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Seeded inputs for an ONNX model's graph inputs: floats in [-1, 1), integers 0 (valid as an
    index of any axis), booleans random."""
    from onnx import helper
    feed = {}
    for vi in inputs:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        dt = np.dtype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
        if dt.kind == "f":
            feed[vi.name] = rng.uniform(-1, 1, size=shape).astype(dt)
        elif dt.kind == "b":
            feed[vi.name] = rng.random(size=shape) < 0.5
        else:
            feed[vi.name] = np.zeros(shape, dtype=dt)
    return feed


def time_model(model: Any, opts: TimingOptions, feed: dict | None = None) -> tuple[float, int, int]:
    """(median seconds of one ``run``, repeats, intra-op threads) of an ONNX model under
    onnxruntime's default session options."""
    t = run_times(model, opts, feed)
    return float(np.median(t["times"])), len(t["times"]), t["threads"]


def run_times(model: Any, opts: TimingOptions, feed: dict | None = None) -> dict:
    """Every timed ``run`` of an ONNX model (after the warm-ups) and the intra-op thread count."""
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    if feed is None:
        feed = random_feed(model.graph.input, np.random.default_rng(opts.seed))
    for _ in range(opts.warmup):
        sess.run(None, feed)
    times: list[float] = []
    spent = 0.0
    while len(times) < opts.max_repeats and (len(times) < opts.min_repeats or spent < opts.min_time_s):
        t0 = time.perf_counter()
        sess.run(None, feed)
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
    return {"times": times, "threads": int(sess.get_session_options().intra_op_num_threads)}


def _identity_chain(n: int):
    from onnx import TensorProto, helper
    names = ["x"] + [f"t{i}" for i in range(1, n)] + ["y"]
    nodes = [helper.make_node("Neg", [a], [b]) for a, b in zip(names, names[1:])]
    g = helper.make_graph(nodes, "empty", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def run_overhead(opts: TimingOptions) -> tuple[float, float]:
    """(the cost of ``InferenceSession.run`` itself, the dispatch cost of one op): from runs of
    chains of 1 and 11 Neg nodes on one element (Identity ones the optimizer
    removes; medians of many runs). A one-node model's
    time less the first is the op's time with its dispatch, as it runs inside a whole model."""
    many = TimingOptions(warmup=20, min_repeats=300, max_repeats=2000, min_time_s=0.05)
    one = time_model(_identity_chain(1), many)[0]
    eleven = time_model(_identity_chain(11), many)[0]
    dispatch = max(0.0, (eleven - one) / 10)
    return max(0.0, one - dispatch), dispatch


@dataclass(frozen=True)
class Measured:
    op: HostOp
    seconds: float          # median of a run less the cost of a run itself (at least half a dispatch)
    raw_seconds: float
    repeats: int


def measure_ops(items: Sequence[HostOp], opts: TimingOptions = TimingOptions(), budget_s: float | None = None,
                on_step: Callable[[HostOp], None] | None = None) -> tuple[list[Measured], list[tuple[str, str]], dict]:
    """Time each op; returns (measured, skipped (key, reason), facts: empty run, threads, wall)."""
    from partition.onnx.export import node_to_onnx
    t0 = time.perf_counter()
    run_overhead(opts)  # the first sessions of a process pay for loading onnxruntime's kernels
    empty, dispatch = run_overhead(opts)
    rng = np.random.default_rng(opts.seed)
    fill = lambda shape, dtype: rng.uniform(-1, 1, size=shape).astype(dtype)  # noqa: E731
    out: list[Measured] = []
    skipped: list[tuple[str, str]] = []
    threads = None
    for h in items:
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            skipped.append((h.key, "time budget spent"))
            continue
        if on_step:
            on_step(h)
        try:
            m = node_to_onnx(h.node, fill=fill)
            sec, reps, threads = time_model(m, opts)
        except Exception as e:  # noqa: BLE001 - onnxruntime refuses some ops/shapes; say which and go on
            skipped.append((h.key, str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__))
            continue
        out.append(Measured(h, max(dispatch / 2, 1e-8, sec - empty), sec, reps))
    facts = {"run_overhead_s": empty, "dispatch_s": dispatch, "intra_op_threads": threads,
             "wall_s": time.perf_counter() - t0}
    return out, skipped, facts


def whole_model_seconds(graph: Any, opts: TimingOptions = TimingOptions(min_repeats=10, min_time_s=0.5)) -> dict:
    """onnxruntime's latency of a whole graph (``partition.onnx.export.graph_to_onnx``), default
    session options, seeded random inputs: ``median_s`` (the figure compared) and ``best_s`` (the
    fastest run: on a loaded machine the median of a long run also counts the time its threads
    waited to be scheduled)."""
    from partition.onnx.export import graph_to_onnx
    t = run_times(graph_to_onnx(graph), opts)["times"]
    return {"median_s": float(np.median(t)), "best_s": float(np.min(t)), "runs": len(t)}


__all__ = ["HostOp", "TimingOptions", "Measured", "default_sources", "load_source", "source_label", "walk_nodes",
           "walk_weighted", "walk_counted", "op_key", "collect_ops", "random_feed", "time_model", "run_times",
           "run_overhead", "measure_ops", "whole_model_seconds"]

