"""Tuning tasks of a partitioned graph, and the scheduler that shares the budget among them.

A task is one unique kernel workload (by ``Workload.key``) with its occurrence weight: how many
times a kernel of that workload runs per inference. Kernels are found in the external functions
(``Compiler`` attribute) the graph calls, in the graph itself and in If/Loop bodies: a call of a
composite function (``Composite`` attribute) is one kernel, its anchor op (conv2d, dense, matmul,
batch_matmul, gemm) with the ops after it as the epilogue; any other op is its own kernel. A Loop
body counts once (its trip count is data-dependent in general).

The scheduler follows Ansor's gradient rule: the objective is the weighted sum of the tasks' best
cycles (end-to-end kernel latency); after one warm-up round per task, each round goes to the task
whose next round is expected to cut that sum most, estimated from its recent improvement per
round (backward) and from its best-cycles-per-round so far (an optimistic forward estimate).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from sim import Workload, WorkloadError
from sim import workload_of

ANCHOR_OPS = ("conv2d", "dense", "matmul", "batch_matmul", "gemm")


class TaskError(ValueError):
    """A graph with no tunable kernel, or task input that makes no sense."""


@dataclass(frozen=True)
class Task:
    workload: Workload
    weight: int = 1
    names: tuple[str, ...] = ()

    def __post_init__(self):
        if not isinstance(self.weight, int) or self.weight < 1:
            raise TaskError(f"task weight must be an integer >= 1, got {self.weight!r}")

    @property
    def key(self) -> str:
        return self.workload.key


def _composite_kernel(fn: Any, call_name: str) -> Workload | None:
    nodes = list(fn.graph.nodes)
    anchor = next((i for i, n in enumerate(nodes) if n.op in ANCHOR_OPS), None)
    if anchor is None:
        return None
    epi = tuple(n.op for n in nodes[anchor + 1:])
    return workload_of(nodes[anchor], epilogue=epi)


def _kernels_in(graph: Any, scope: dict[str, Any], out: list[tuple[str, Workload]], external: bool) -> None:
    """Append (kernel name, workload) for every kernel run by ``graph`` (``external``: the graph
    is, or is inside, an external function, so its ops run on the accelerator)."""
    scope = {**scope, **graph.functions}
    for node in graph.nodes:
        if node.op == "call":
            fn = scope.get(node.attrs.get("callee"))
            if fn is None:
                raise TaskError(f"node {node.name} calls unknown function '{node.attrs.get('callee')}'")
            if "Composite" in fn.attrs:
                if external:
                    wl = _composite_kernel(fn, node.name)
                    if wl is not None:
                        out.append((f"{fn.attrs['Composite']}:{node.name}", wl))
                    else:
                        _kernels_in(fn.graph, scope, out, True)
            else:
                _kernels_in(fn.graph, scope, out, external or "Compiler" in fn.attrs)
        elif node.subgraphs():
            for sg in node.subgraphs():
                _kernels_in(sg, scope, out, external)
        elif external:
            try:
                out.append((node.name, workload_of(node)))
            except WorkloadError:
                continue  # an op with no device kernel (e.g. a shape op folded away)


def kernels(graph: Any) -> list[tuple[str, Workload]]:
    """(name, workload) of every offloaded kernel, in execution order, repeats included."""
    out: list[tuple[str, Workload]] = []
    _kernels_in(graph, {}, out, False)
    return out


def extract_tasks(graph: Any, include_vector: bool = False) -> tuple[Task, ...]:
    """Unique offloaded kernel workloads with occurrence weights, in first-occurrence order.
    Vector kernels (elementwise, pool, softmax, ...) have a one-dim space and are left out unless
    ``include_vector``; zero-work kernels (views) always are."""
    weights: dict[str, int] = {}
    first: dict[str, Workload] = {}
    names: dict[str, list[str]] = {}
    for name, wl in kernels(graph):
        if not wl.is_mac and (not include_vector or (wl.d["in_elems"] + wl.d["out_elems"] + wl.d["ops"]) == 0):
            continue
        k = wl.key
        weights[k] = weights.get(k, 0) + 1
        first.setdefault(k, wl)
        names.setdefault(k, []).append(name)
    return tuple(Task(first[k], weights[k], tuple(names[k])) for k in first)


# ---------------------------------------------------------------------------- task scheduler
@dataclass(frozen=True)
class SchedulerConfig:
    alpha: float = 0.2        # weight of the backward (observed) gradient vs the forward estimate
    window: int = 3           # rounds looked back for the observed improvement


class TaskScheduler:
    """Chooses the task of each round. ``history[i]`` is task i's best cycles after each of its
    rounds (so ``len(history[i])`` is its round count); tasks marked done are never chosen."""

    def __init__(self, tasks: Sequence[Task], config: SchedulerConfig = SchedulerConfig()):
        if not tasks:
            raise TaskError("no tasks to tune")
        self.tasks = tuple(tasks)
        self.config = config
        self.history: list[list[float]] = [[] for _ in tasks]
        self.done = [False] * len(tasks)

    def record(self, i: int, best_cycles: float) -> None:
        self.history[i].append(float(best_cycles))

    def mark_done(self, i: int) -> None:
        self.done[i] = True

    def gradient(self, i: int) -> float:
        """Expected cut of the weighted total cycles from one more round of task i."""
        h = self.history[i]
        w = self.tasks[i].weight
        if not h or h[-1] == float("inf"):
            return float("inf")
        back = 0.0
        win = min(self.config.window, len(h) - 1)
        if win > 0:
            back = (h[-1 - win] - h[-1]) / win
        forward = h[-1] / len(h)
        return w * (self.config.alpha * back + (1 - self.config.alpha) * forward) if win > 0 else w * forward

    def next_task(self) -> int | None:
        live = [i for i in range(len(self.tasks)) if not self.done[i]]
        if not live:
            return None
        fresh = [i for i in live if not self.history[i]]
        if fresh:
            return fresh[0]  # warm-up: every task gets one round first
        g = [(self.gradient(i), -i) for i in live]
        return -max(g)[1]

    def objective(self) -> float:
        """Weighted sum of the tasks' best cycles (inf until every task has a measurement)."""
        return sum(t.weight * (h[-1] if h else float("inf")) for t, h in zip(self.tasks, self.history))
