"""What control flow costs onnxruntime of its own, for a host calibration (``accel-tune calibrate
--host``): the subgraph executor a Loop starts, runs on every trip and copies its outputs out of,
and the one an If starts on every run.

Why: a host calibration learns from rows of the models it times, and that machinery is no node's
kernel. Until the eighth session (2026-11-29) it went into the run's rest, shared out over the
nodes of the model it was measured in, and ``if`` and ``loop`` cost nothing of their own. byoc_demo
is the only model of the zoo and the built-ins with control flow, so with it held out of the fit
its Loop of 3 trips and its If came out 18-27 % under onnxruntime's 19 us (experiments/bench/
calibration.py): a model with control flow that the calibration never saw was predicted low by
its executor's cost.

Here the cost is measured directly (``measure_control``): probe models whose body is one small
elementwise op, each as a Loop of ``n`` trips and unrolled into ``n`` nodes in a row
(``control_probes``), both timed in plain sessions (lowest block median). The differences fit
(non-negative least squares) ``ControlCost``: a loop's fixed cost, its cost per trip and per byte
of its outputs (the carried values and scan outputs it copies out once), and an if's cost per run
and per byte of its outputs. Over seven measurements on this VM (2 cores, onnxruntime 1.32): a
trip 0.49-0.57 us, an if 0.76-0.98 us, a loop's start 0.58-1.53 us, its outputs' copy 10-14 ps a
byte; byoc_demo's Loop of 3 trips and its If 4.6-5.4 us of its 17-19 us. Held out of the fit,
byoc_demo went from -31, -31 and +3 % to -3, -4 and +30 % on three collections refitted offline
(docs/TUNING.md).

The calibration stores it (``meta["control_flow"]``) and ``Calibration.host_seconds`` gives each
``if`` and ``loop`` node its cost; each timed model's rows then add up to its latency less its
control flow (``Profiled.control_s``), so the calibrated cost of a model counts it once.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

# trips of the probes' loops, and the sizes of the value they carry (floats): a small one for the
# executor's own cost, one of 256 KB for what copying a loop's or an if's outputs costs
PROBE_TRIPS = (1, 4, 16)
PROBE_ELEMS = (512, 65536)
FIELDS = ("loop_s", "trip_s", "loop_byte_s", "if_s", "if_byte_s")


@dataclass(frozen=True)
class ControlCost:
    """Seconds onnxruntime spends on control flow itself, its body's nodes left out."""
    loop_s: float = 0.0       # one run of a loop node, whatever its trips
    trip_s: float = 0.0       # each trip of its body
    loop_byte_s: float = 0.0  # each byte of its outputs (copied out once)
    if_s: float = 0.0         # each run of an if node
    if_byte_s: float = 0.0    # each byte of its outputs

    def __post_init__(self):
        for k in FIELDS:
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v >= 0):
                raise ValueError(f"control-flow cost {k} must be a finite number >= 0, got {v!r}")

    def seconds(self, node: Any) -> float:
        """One run of ``node``: a loop's start, its trips (``partition.ops.loop_trip_bound``, as
        costing counts them) and its outputs; an if's run and its outputs; 0 for any other op."""
        from partition.ops import loop_trip_bound
        if node.op == "loop":
            return self.loop_s + self.trip_s * loop_trip_bound(node) + self.loop_byte_s * _out_bytes(node)
        if node.op == "if":
            return self.if_s + self.if_byte_s * _out_bytes(node)
        return 0.0

    def of_graph(self, g: Any) -> float:
        """Seconds of one run of ``g`` spent on control flow, every if and loop counted as costing
        counts it (``calibrate_host.walk_counted``: once per trip of an enclosing loop, inside the
        branch of an if that costing counts)."""
        from .calibrate_host import walk_counted
        return float(sum(w * self.seconds(n) for n, w, _ in walk_counted(g, controls=True) if n.op in ("if", "loop")))

    def to_json(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, doc: Any) -> "ControlCost":
        """From ``to_json``'s form; ``ValueError`` naming the field otherwise."""
        if not isinstance(doc, Mapping) or set(doc) != set(FIELDS):
            raise ValueError(f"control-flow cost must give exactly {', '.join(FIELDS)}")
        return cls(**{k: doc[k] for k in FIELDS})


def _out_bytes(node: Any) -> int:
    return sum(v.type.nbytes for v in node.outputs)


# ------------------------------------------------------------------------------------- probes
def _step(b: Any, x: Any, name: str) -> Any:
    return b.add(x, b.const(np.float32(0.5), f"{name}.c"), name=name)


def _branch(kind: str, shape: tuple[int, ...]) -> Any:
    from partition.builder import GraphBuilder
    b = GraphBuilder.for_model(f"control_probe.{kind}", 0)
    y = b.input("y", shape)
    op = b.mul if kind == "then" else b.sub
    return b.finish([op(y, b.const(np.float32(0.5), f"{kind}.c"), name=f"{kind}_op")])


def loop_probe(trips: int, elems: int, with_if: bool) -> Any:
    """A loop of ``trips`` trips carrying ``(1, elems)`` floats; its body adds a constant and, with
    ``with_if``, an if on the loop's condition (true, but known only at run time) multiplies it
    by 0.5 (then) or subtracts 0.5 (else)."""
    from partition.builder import GraphBuilder
    shape = (1, elems)
    body = GraphBuilder.for_model("control_probe.body", 0)
    body.input("iter", (), "int64")
    cond = body.input("cond", (), "bool")
    h = _step(body, body.input("h", shape), "step")
    if with_if:
        h = body.op("if", [cond, h], {"then_branch": _branch("then", shape), "else_branch": _branch("else", shape)},
                    name="choose")
    b = GraphBuilder.for_model(f"control_probe_loop{trips}{'_if' if with_if else ''}", 0)
    x = b.input("x", shape)
    out = b.op("loop", [b.const(np.int64(trips), "trips"), b.const(np.array(True), "go"), x],
               {"body": body.finish([cond, h]), "num_carried": 1}, name="loop")
    return b.finish([out])


def unrolled_probe(trips: int, elems: int, with_if: bool) -> Any:
    """``loop_probe``'s work with no control flow: its body's ops ``trips`` times in a row."""
    from partition.builder import GraphBuilder
    b = GraphBuilder.for_model(f"control_probe_unrolled{trips}{'_if' if with_if else ''}", 0)
    x = b.input("x", (1, elems))
    for t in range(trips):
        x = _step(b, x, f"step{t}")
        if with_if:
            x = b.mul(x, b.const(np.float32(0.5), f"then{t}.c"), name=f"then{t}")
    return b.finish([x])


def probe_cases() -> list[tuple[int, int, bool]]:
    """(trips, elems, with_if) of every probe pair: every trip count at the small size, and 1 and 4
    trips at the large one (where a trip's cost would be lost in the copies' noise)."""
    return [(n, e, i) for e in PROBE_ELEMS for n in PROBE_TRIPS for i in (False, True)
            if e == PROBE_ELEMS[0] or n <= 4]


def control_probes() -> list[tuple[tuple[int, int, bool], Any, Any]]:
    """(case, loop model, unrolled model) of every probe pair (``probe_cases``)."""
    return [(c, loop_probe(*c), unrolled_probe(*c)) for c in probe_cases()]


def fit_control(cases: Sequence[tuple[int, int, bool]], extra_s: Sequence[float]) -> ControlCost:
    """``ControlCost`` from each probe pair's (trips, elems, with_if) and its loop's time less its
    unrolled twin's, by non-negative least squares (a cost below 0 is noise)."""
    from scipy.optimize import nnls
    if len(cases) != len(extra_s) or len(cases) < len(FIELDS):
        raise ValueError(f"fit_control needs one time per case and at least {len(FIELDS)} cases")
    a = np.array([[1.0, n, 4.0 * e, n * i, n * i * 4.0 * e] for n, e, i in cases])
    y = np.asarray(extra_s, dtype=np.float64)
    # columns scaled to 1 so nnls weighs the byte terms like the others
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0  # no case with an if: its costs stay 0
    coef, _ = nnls(a / scale, y)
    return ControlCost(*(float(c) for c in coef / scale))


def measure_control(min_time_s: float = 0.05, min_runs: int = 50, max_runs: int = 2000, blocks: int = 3,
                    on_step: Callable[[str], None] | None = None) -> ControlCost:
    """Time every probe pair (``control_probes``), each model alone in a plain session with the
    default options (the lowest of ``blocks`` block medians, ``calibrate_context._plain_blocks``),
    and fit ``ControlCost`` (``fit_control``). ~3 s on this VM."""
    from .calibrate_context import _plain_blocks, exported
    cases, extra = [], []
    for case, loop, flat in control_probes():
        t = []
        for g in (loop, flat):
            blk = _plain_blocks(*exported(g), 20, 0, min_time_s, min_runs, max_runs, blocks)
            t.append(min(float(np.median(w)) for w in blk))
        cases.append(case)
        extra.append(t[0] - t[1])
        if on_step:
            on_step(f"control flow {case}")
    return fit_control(cases, extra)


def control_of(meta: Mapping[str, Any]) -> ControlCost | None:
    """The control-flow cost a calibration's ``meta`` holds (None for a file without one)."""
    doc = meta.get("control_flow")
    return None if doc is None else ControlCost.from_json(doc)


__all__ = ["ControlCost", "probe_cases", "control_probes", "loop_probe", "unrolled_probe", "fit_control",
           "measure_control", "control_of", "PROBE_TRIPS", "PROBE_ELEMS"]
