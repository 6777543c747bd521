"""ONNX's backend conformance suite through ``load_onnx`` + ``interpret``.

The cases are the ones the installed onnx package ships (``onnx/backend/test/data/{node,simple,
pytorch-converted,pytorch-operator}``: a ``model.onnx`` and ``test_data_set_*/{input,output}_*.pb``)
and, where the wheel does not ship the node cases, the node cases its own generator builds
(``onnx.backend.test.case.node.collect_testcases``, in memory). Models run as they are: no opset
rewriting, inputs stay inputs (their concrete shapes come from the test data, as ``--input-shape``
gives them on the command line).

Each case gets one outcome: ``pass``; ``wrong`` (an output differs from the expected data beyond
onnx's own runner's tolerances); ``internal`` (an exception that is not a one-line import refusal:
an importer or interpreter bug); ``refused`` (``OnnxImportError``, one line), classified by
``REFUSAL_REASONS``; a refusal that matches no documented reason is ``unclassified``.
"""
from __future__ import annotations

import glob
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..interpreter import interpret
from .errors import OnnxImportError
from .importer import load_onnx

SHIPPED_KINDS = ("node", "simple", "pytorch-converted", "pytorch-operator")
OUTCOMES = ("pass", "wrong", "internal", "refused", "unclassified")

# The documented reasons a case may be refused, in match order: (key, what it means, pattern
# searched in the one-line OnnxImportError message). docs/IR.md lists them with their counts.
REFUSAL_REASONS: tuple[tuple[str, str, str], ...] = (
    ("opset", "a default-domain opset outside 11..max_opset() (opset 10 and older models)",
     r"uses opset \d+; supported opsets are"),
    ("training-only", "training-only op (losses, gradients, optimizers, random sampling, "
     "training-mode outputs)", r"training-only|training_mode|training-mode"),
    ("non-tensor", "sequence, optional, map or string values (the IR holds tensors of numbers)",
     r"is not a tensor|sequence|optional input|string|Optional"),
    ("dtype", "an element type the IR does not compute in (integers wider than 16 bits as quantized "
     "data)", r"element type|dtype .* is not supported|type .* is not supported"),
    ("runtime-attribute", "a shape, axes, pads, K or other static parameter computed at run time",
     r"must be a constant \(it is computed at run time\)|computed at run time"),
    ("empty-input", "a zero-size input (the IR's static shapes are >= 1)", r"dimension \d+ must be >= 1"),
    ("ill-typed", "input types the op's schema does not allow together (a model breaking its own type "
     "constraints, e.g. Mul of double by float)", r"needs both of one type|; \S+ takes tensor\("),
    ("unsupported-op", "an op the importer has no converter for", r"unsupported ONNX op"),
    ("unsupported-attribute", "an attribute value or input combination the op does not support",
     r"not supported|only .* (is|are) supported"),
)


@dataclass(frozen=True)
class Case:
    """One conformance case: its model and one or more (inputs, expected outputs) data sets."""
    name: str
    kind: str
    model: Any  # onnx.ModelProto
    data_sets: tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...]
    rtol: float = 1e-3
    atol: float = 1e-7


@dataclass(frozen=True)
class Outcome:
    name: str
    kind: str
    status: str             # one of OUTCOMES
    reason: str = ""        # refusal key (REFUSAL_REASONS) for refused cases
    message: str = ""       # one line: the refusal, the mismatch or the exception
    op_types: tuple[str, ...] = field(default=())


# ---------------------------------------------------------------------------- loading cases

def _data_root() -> str:
    import onnx
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def _read_value(path: str, type_proto) -> Any:
    """One .pb as numpy (tensors) or the raw proto (sequences, optionals, maps: the runner refuses
    those models before it reads their data)."""
    import onnx
    from onnx import numpy_helper
    with open(path, "rb") as f:
        raw = f.read()
    if type_proto is None or type_proto.HasField("tensor_type"):
        t = onnx.TensorProto()
        t.ParseFromString(raw)
        return numpy_helper.to_array(t)
    return raw


def _case_from_dir(case_dir: str, kind: str) -> Case:
    import json
    import onnx
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    inits = {t.name for t in model.graph.initializer}
    real_in = [vi for vi in model.graph.input if vi.name not in inits]
    sets = []
    for d in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
        n_in = len(glob.glob(os.path.join(d, "input_*.pb")))
        n_out = len(glob.glob(os.path.join(d, "output_*.pb")))
        ins = tuple(_read_value(os.path.join(d, f"input_{i}.pb"), real_in[i].type if i < len(real_in) else None)
                    for i in range(n_in))
        outs = tuple(_read_value(os.path.join(d, f"output_{i}.pb"),
                                 model.graph.output[i].type if i < len(model.graph.output) else None)
                     for i in range(n_out))
        sets.append((ins, outs))
    rtol, atol = 1e-3, 1e-7
    meta = os.path.join(case_dir, "data.json")
    if os.path.exists(meta):
        with open(meta) as f:
            data = json.load(f)
        rtol, atol = data.get("rtol", rtol), data.get("atol", atol)
    return Case(os.path.basename(case_dir), kind, model, tuple(sets), rtol, atol)


def _generated_node_cases() -> list[Case]:
    """The node cases from onnx's own generator (the wheel ships no node directory)."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():  # the generator's reference math overflows on purpose
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            tcs = collect_testcases(None)
    return [Case(tc.name, "node", tc.model,
                 tuple((tuple(map(_normalize, ins)), tuple(map(_normalize, outs))) for ins, outs in tc.data_sets),
                 tc.rtol, tc.atol)
            for tc in tcs]


def _normalize(item: Any) -> Any:
    """The generator hands some values over as TensorProto (bfloat16, float4, int4, ...): numpy, as
    onnx's runner converts them."""
    import onnx
    from onnx import numpy_helper
    return numpy_helper.to_array(item) if isinstance(item, onnx.TensorProto) else item


def available() -> str | None:
    """None when the suite can be loaded here, else why not (one line)."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        return "onnx is not installed"
    root = _data_root()
    if not os.path.isdir(os.path.join(root, "node")):
        try:
            from onnx.backend.test.case.node import collect_testcases  # noqa: F401
        except ImportError as e:
            return f"onnx ships no node cases and cannot generate them: {e}"
    return None


def load_cases(kinds: Sequence[str] = SHIPPED_KINDS) -> list[Case]:
    """Every case of ``kinds``, as shipped or (node cases) generated, sorted by (kind, name)."""
    root = _data_root()
    cases: list[Case] = []
    for kind in kinds:
        kind_dir = os.path.join(root, kind)
        if os.path.isdir(kind_dir):
            for name in sorted(os.listdir(kind_dir)):
                d = os.path.join(kind_dir, name)
                if os.path.exists(os.path.join(d, "model.onnx")):
                    cases.append(_case_from_dir(d, kind))
        elif kind == "node":
            cases.extend(_generated_node_cases())
    return sorted(cases, key=lambda c: (c.kind, c.name))


# ---------------------------------------------------------------------------- running one case

def classify_refusal(message: str) -> str:
    """The REFUSAL_REASONS key of a one-line refusal, or "" when none matches."""
    if "\n" in message:
        return ""
    for key, _, pattern in REFUSAL_REASONS:
        if re.search(pattern, message):
            return key
    return ""


def _as_comparable(a: np.ndarray) -> np.ndarray:
    """float8/bfloat16 (ml_dtypes) arrays compared in float32, as onnx's runner does for bfloat16."""
    if a.dtype.kind == "V" or a.dtype.name.startswith(("float8", "bfloat16", "float4")):
        return a.astype(np.float32)
    return a


def compare(expected: Sequence[Any], got: Sequence[Any], rtol: float, atol: float) -> str:
    """"" when ``got`` matches ``expected`` as onnx's backend runner checks it (count, shape, dtype,
    then allclose; bfloat16 at two of its ulps), else the first difference, one line."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got)):
        g = np.asarray(g)
        e = np.asarray(e)
        if g.shape != e.shape:
            return f"output {i} has shape {list(g.shape)}, expected {list(e.shape)}"
        if g.dtype != e.dtype:
            return f"output {i} has dtype {g.dtype}, expected {e.dtype}"
        if e.dtype == object:
            if not np.array_equal(g, e):
                return f"output {i} differs"
            continue
        r = max(rtol, 2.0 ** -6) if e.dtype.name == "bfloat16" else rtol
        ge, ee = _as_comparable(g), _as_comparable(e)
        if ee.dtype == bool or ee.dtype.kind in "iu":
            ok = np.array_equal(ge, ee)
        else:
            ok = np.allclose(ge, ee, rtol=r, atol=atol, equal_nan=True)
        if not ok:
            with np.errstate(all="ignore"):
                diff = np.abs(ge.astype(np.float64) - ee.astype(np.float64))
                diff = np.where(np.isnan(diff), np.inf, diff)
            return f"output {i} differs: max abs diff {float(np.max(diff)) if diff.size else 0:.3g}"
    return ""


def run_case(case: Case) -> Outcome:
    """Import ``case.model`` and run every data set; the outcome says how it went."""
    ops = tuple(sorted({n.op_type for n in case.model.graph.node}))
    base = dict(name=case.name, kind=case.kind, op_types=ops)
    inits = {t.name for t in case.model.graph.initializer}
    real_in = [vi for vi in case.model.graph.input if vi.name not in inits]
    try:
        first_inputs = case.data_sets[0][0] if case.data_sets else ()
        # Shapes from the data only where the model leaves a dimension open, as a user gives them.
        shapes = {vi.name: tuple(np.shape(a)) for vi, a in zip(real_in, first_inputs)
                  if vi.type.HasField("tensor_type") and isinstance(a, np.ndarray)
                  and not all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = load_onnx(case.model, input_shapes=shapes)
    except OnnxImportError as e:
        msg = str(e)
        key = classify_refusal(msg)
        return Outcome(**base, status="refused" if key else "unclassified", reason=key, message=msg)
    except Exception as e:  # an importer bug
        return Outcome(**base, status="internal", message=f"import: {type(e).__name__}: {_line(e)}")
    for k, (ins, outs) in enumerate(case.data_sets):
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                got = interpret(graph, {v.name: a for v, a in zip(graph.inputs, ins)})
        except Exception as e:  # an interpreter or op bug
            return Outcome(**base, status="internal", message=f"run: {type(e).__name__}: {_line(e)}")
        diff = compare(outs, got, case.rtol, case.atol)
        if diff:
            return Outcome(**base, status="wrong", message=f"data set {k}: {diff}")
    return Outcome(**base, status="pass")


def _line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else ""


def run_suite(cases: Sequence[Case], progress: Callable[[int, int], None] | None = None) -> list[Outcome]:
    out = []
    for i, case in enumerate(cases):
        out.append(run_case(case))
        if progress is not None:
            progress(i + 1, len(cases))
    return out


def summarize(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Counts per outcome and per refusal reason (every documented reason listed, 0 included)."""
    by_status = {s: 0 for s in OUTCOMES}
    by_reason = {key: 0 for key, _, _ in REFUSAL_REASONS}
    by_kind: dict[str, dict[str, int]] = {}
    for o in outcomes:
        by_status[o.status] += 1
        if o.status == "refused":
            by_reason[o.reason] += 1
        by_kind.setdefault(o.kind, {s: 0 for s in OUTCOMES})[o.status] += 1
    return {"cases": len(outcomes), "outcomes": by_status, "refusal_reasons": by_reason, "kinds": by_kind}


def iter_failures(outcomes: Sequence[Outcome]) -> Iterator[Outcome]:
    return (o for o in outcomes if o.status in ("wrong", "internal", "unclassified"))
