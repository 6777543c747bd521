"""ONNX -> ``partition.Graph``.

Every ONNX op maps to one (or a few) canonical ops of docs/IR.md. Inputs that the IR keeps as static
attributes (shapes, axes, pads, K, clip bounds, ...) must be constants after folding; a node whose
inputs are all constant is evaluated with the op registry's ``compute`` and becomes a constant, so
shape sub-computations (Shape -> Gather -> Concat -> Reshape) disappear. If/Loop bodies become closed
graphs: outer non-constant values a body reads become extra inputs (``partition/ops/control.py``),
outer constants are copied into the body as its own constants.

Files exported with ``weights_stripped=true`` metadata carry float initializers with dims but no data;
they are filled deterministically (``fill_arrays``, unit-variance noise scaled per use), and ``fill_stripped`` writes the same numbers into
a copy of the model so onnxruntime can run it for comparison.
"""
from __future__ import annotations

import os
import re
import warnings
import zlib
from typing import Any, Mapping, Sequence

import numpy as np

from ..ir import Graph
from .checks import check_node_signature, check_input_types, check_model
from .context import Context, Scope
from .dynamic import CONVERTERS
from .errors import OnnxImportError, one_line
from .external import has_external, load_external
from .gelu_fusion import fuse_erf_gelu
from .proto import all_graphs, np_dtype

MIN_OPSET = 11


def max_opset() -> int:
    """The newest default-domain opset the installed onnx defines (28 with onnx 1.23): the importer
    converts every op version up to it, and a newer model is refused in one line."""
    from onnx.defs import onnx_opset_version
    return int(onnx_opset_version())


# ---------------------------------------------------------------------------- stripped weights

def _is_stripped(t) -> bool:
    """True for an initializer with a non-empty shape but no data anywhere."""
    from onnx import TensorProto
    if t.data_location == TensorProto.EXTERNAL:
        return False
    if int(np.prod(t.dims, dtype=np.int64)) == 0:
        return False
    return not (t.raw_data or t.float_data or t.double_data or t.int32_data or t.int64_data
                or t.uint64_data or t.string_data)


def _uses(model) -> tuple[dict[str, tuple[Any, int]], dict[str, list[str]]]:
    """(initializer name -> (first consuming NodeProto, input index), value name -> consumer op
    types), over every graph."""
    first: dict[str, tuple[Any, int]] = {}
    consumers: dict[str, list[str]] = {}
    for g in all_graphs(model.graph):
        for n in g.node:
            for i, name in enumerate(n.input):
                first.setdefault(name, (n, i))
                consumers.setdefault(name, []).append(n.op_type)
    return first, consumers


def _fill_one(t, use, feeds_add: bool, seed: int) -> np.ndarray:
    """Deterministic data for one stripped initializer, scaled by how it is used so activations stay
    in a sane range: He init for conv weights (a quarter of it where the conv ends a residual branch,
    so sums over many blocks do not blow up), 1/sqrt(fan_in) for matmul weights, positive variances
    and near-one scales for normalisations, small noise elsewhere."""
    from onnx import helper
    dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
    if dtype.kind != "f":
        raise OnnxImportError(f"stripped initializer '{t.name}' is {dtype.name}; only float data can be filled")
    shape = tuple(int(d) for d in t.dims)
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(t.name.encode())])
    # Unit-variance uniform draws in float32: a quarter of the time of normals on BERT-sized tables,
    # and the scale is all that matters for keeping activations sane.
    noise = rng.random(shape, dtype=np.float32)
    noise -= np.float32(0.5)
    noise *= np.float32(np.sqrt(12.0))
    op, idx = (use[0].op_type, use[1]) if use else ("", -1)
    if op == "Conv" and idx == 1 and len(shape) >= 2:
        gain = 0.5 if feeds_add else 2.0
        arr = noise * np.float32(np.sqrt(gain / max(1, int(np.prod(shape[1:])))))
    elif op == "Gemm" and idx in (0, 1) and len(shape) == 2:
        trans = {a.name: a.i for a in use[0].attribute}
        k_axis = (1 if trans.get("transB", 0) else 0) if idx == 1 else (0 if trans.get("transA", 0) else 1)
        arr = noise * np.float32(1.0 / np.sqrt(shape[k_axis]))
    elif op == "MatMul" and len(shape) >= 2:
        arr = noise * np.float32(1.0 / np.sqrt(shape[-2] if idx == 1 else shape[-1]))
    elif op == "BatchNormalization" and idx == 4:
        arr = rng.uniform(0.5, 1.5, shape).astype(np.float32)
    elif op in ("BatchNormalization", "LayerNormalization") and idx == 1:
        arr = np.float32(1.0) + np.float32(0.1) * noise
    elif op == "BatchNormalization" and idx in (2, 3):
        arr = np.float32(0.1) * noise
    else:
        arr = np.float32(0.05) * noise
    return arr.astype(dtype, copy=False)


def _stripped_flag(model) -> bool:
    return any(p.key == "weights_stripped" and p.value.strip().lower() in ("true", "1", "yes")
               for p in model.metadata_props)


# Filling allocates what the dims declare; a stripped file is a few kB whatever it declares, so
# the declared size is capped (2**28 float32 elements is 1 GiB, beyond any model the IR can cost).
MAX_FILL_ELEMENTS = 1 << 28


def fill_arrays(model, seed: int = 0) -> dict[str, np.ndarray]:
    """Data for every stripped initializer of ``model`` (in every sub-graph), by name."""
    first, consumers = _uses(model)
    out: dict[str, np.ndarray] = {}
    total = 0
    for g in all_graphs(model.graph):
        for t in g.initializer:
            if _is_stripped(t):
                if any(int(d) < 0 for d in t.dims):
                    raise OnnxImportError(f"stripped initializer '{t.name}' has negative dims {list(t.dims)}")
                total += int(np.prod([int(d) for d in t.dims], dtype=object))
                if total > MAX_FILL_ELEMENTS:
                    raise OnnxImportError(f"stripped initializers up to '{t.name}' declare {total} elements; "
                                          f"filling more than {MAX_FILL_ELEMENTS} is refused")
                use = first.get(t.name)
                feeds_add = use is not None and any(
                    "Add" in consumers.get(o, ()) for o in use[0].output)
                out[t.name] = _fill_one(t, use, feeds_add, seed)
    return out


def fill_stripped(model, seed: int = 0):
    """A copy of ``model`` whose stripped initializers hold the data ``load_onnx(..., fill_seed=seed)``
    would fill in, so onnxruntime and the importer see the same weights."""
    import onnx
    from onnx import numpy_helper
    filled = onnx.ModelProto()
    filled.CopyFrom(model)
    arrays = fill_arrays(filled, seed)
    for g in all_graphs(filled.graph):
        for t in g.initializer:
            if t.name in arrays:
                t.CopyFrom(numpy_helper.from_array(arrays[t.name], t.name))
    return filled


# ---------------------------------------------------------------------------- loading

def _read_model(path_or_bytes):
    import onnx
    from google.protobuf.message import DecodeError
    base_dir = None  # the folder external data is read from (only for a model given by path)
    if hasattr(path_or_bytes, "SerializeToString") and hasattr(path_or_bytes, "graph"):
        model, label = path_or_bytes, "<ModelProto>"
    elif isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        label, raw = "<bytes>", bytes(path_or_bytes)
        try:
            model = onnx.load_from_string(raw)
        except (DecodeError, ValueError, RuntimeError) as e:
            raise OnnxImportError(f"{label} is not an ONNX model: {one_line(e)}") from None
    else:
        try:
            path = os.fspath(path_or_bytes)
        except TypeError:
            raise OnnxImportError(f"expected an ONNX file path, bytes or a ModelProto, got "
                                  f"{type(path_or_bytes).__name__}") from None
        label = os.path.basename(path)
        if not os.path.exists(path):
            raise OnnxImportError(f"{path}: no such ONNX file")
        if os.path.isdir(path):
            raise OnnxImportError(f"{path} is a directory, not an ONNX model")
        if not os.path.isfile(path):  # a device or fifo (/dev/zero) would be read without end
            raise OnnxImportError(f"{path} is not a regular file")
        try:
            # External data is read by onnx_external, which refuses locations outside the folder.
            model = onnx.load(path, load_external_data=False)
        except (DecodeError, ValueError, RuntimeError, OSError) as e:
            raise OnnxImportError(f"{label} is not an ONNX model: {one_line(e)}") from None
        base_dir = os.path.dirname(os.path.abspath(path))
    if model.ir_version == 0 or not model.HasField("graph"):
        raise OnnxImportError(f"{label} is not an ONNX model: no IR version or graph in it")
    check_model(model, label)
    if has_external(model):  # only a file has a folder to read from; bytes or a proto are refused
        load_external(model, base_dir, label)
    if model.functions:  # model-local functions (accel-tune export's regions): their bodies inline
        from onnx import inliner
        model = inliner.inline_local_functions(model)
    return model, label


def load_onnx(path_or_bytes, *, fill_seed: int = 0,
              input_shapes: Mapping[str, Sequence[int]] | None = None, fold_qdq: bool = False,
              dims: Mapping[str, int] | None = None, empty_dims: frozenset[str] = frozenset()) -> Graph:
    """Import an ONNX model (a path, the serialized bytes or an ``onnx.ModelProto``) of opset 11 to
    ``max_opset()``.

    Stripped weights (metadata ``weights_stripped=true``) are filled from ``fill_seed``; the graph's
    meta then records ``weights_stripped=True`` and ``filled_initializers``.

    The IR is static: ``input_shapes`` (input name -> shape) fixes inputs with dynamic dimensions.
    ``dims`` (symbol -> size) fixes them by the symbols the file names its dimensions with, for every
    input at once (``batch``, ``past_sequence``; a dimension written as a sum such as
    ``past_sequence + sequence`` is evaluated); ``input_shapes`` wins for the inputs it names.
    Without it, a dynamic leading (batch) dimension becomes 1 with a warning; any other dynamic
    dimension is an error naming the input and the dimension.

    ``fold_qdq``: in a quantized (QDQ) model, every activation QuantizeLinear -> DequantizeLinear
    pair becomes an identity, so the float graph between them is what partitioning sees, as an
    int8 accelerator that absorbs the pairs would run it. Weights stay quantized (their
    DequantizeLinear folds to a constant); outputs then differ from the QDQ model's by its
    activation rounding. The graph's meta records ``folded_qdq_pairs``.

    ``empty_dims``: symbols of ``dims`` that may be 0 (a decoder's past length at prefill: its cache
    inputs are then empty tensors, and a concat onto them is the new tokens alone)."""
    model, label = _read_model(path_or_bytes)
    folded = 0
    if fold_qdq:
        from onnx import ModelProto
        copy = ModelProto()
        copy.CopyFrom(model)  # never edit the caller's proto
        model, folded = copy, _fold_fake_quant(copy.graph)
    opset = None
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            opset = int(imp.version)
    if opset is None:
        training = sorted({n.op_type for n in model.graph.node if n.domain.startswith("ai.onnx.preview.training")})
        if training:
            raise OnnxImportError(f"{label}: training-only ops {', '.join(training)} (domain "
                                  f"ai.onnx.preview.training) are not supported")
        other = sorted({f"{n.domain}.{n.op_type}" for n in model.graph.node if n.domain})
        if other:  # e.g. ai.onnx.ml only
            raise OnnxImportError(f"{label} imports no default-domain opset; unsupported ONNX op '{other[0]}'")
        raise OnnxImportError(f"{label} imports no default-domain opset")
    if not MIN_OPSET <= opset <= max_opset():
        raise OnnxImportError(f"{label} uses opset {opset}; supported opsets are {MIN_OPSET}..{max_opset()}")
    stripped = _stripped_flag(model)
    filled = fill_arrays(model, fill_seed) if stripped else {}
    shapes = dict(input_shapes or {})
    if dims:
        shapes = {**_shapes_from_dims(model, dims, label, set(shapes), frozenset(empty_dims)), **shapes}
    imp = _Importer(opset, filled, label, shapes, model)
    # inputs whose shape came from an empty symbol may have a 0 dimension
    imp.empty_inputs = frozenset(n for n, sh in shapes.items() if 0 in sh and n not in (input_shapes or {}))
    graph = imp.import_main(model.graph, name=model.graph.name or "main")
    fuse_erf_gelu(graph)  # the exact GELU an old exporter writes out, as the one op it is
    graph.meta["source"] = f"onnx:{label}"
    graph.meta["opset"] = opset
    if model.producer_name:
        graph.meta["producer"] = f"{model.producer_name} {model.producer_version}".strip()
    if fold_qdq:
        graph.meta["folded_qdq_pairs"] = folded
    if stripped:
        graph.meta["weights_stripped"] = True
        graph.meta["filled_initializers"] = sorted(filled)
    try:
        graph.lint()
    except IRError as e:  # an importer bug, but say which file
        raise OnnxImportError(f"{label}: imported graph is malformed: {e}") from None
    _mark_kv_cache(graph, label)
    return graph


def _mark_kv_cache(graph: Graph, label: str) -> None:
    """A decoder step's KV cache (``kv_cache.find_kv_cache``) lives on the device between steps:
    its inputs and outputs are marked device-resident (``partition.residency``), and
    ``meta["kv_cache"]`` describes it. A cache that does not pair up is one line naming the file."""
    from ..residency import mark_device_resident
    from .kv_cache import KVCacheError, find_kv_cache
    try:
        kv = find_kv_cache(graph)
    except KVCacheError as e:
        raise KVCacheError(f"{label}: {e}") from None
    if kv is not None:
        graph.meta["kv_cache"] = kv.to_dict()
        mark_device_resident(graph, kv.inputs + kv.outputs)


def _fold_fake_quant(gp) -> int:
    """Turn each DequantizeLinear fed by a QuantizeLinear into an Identity of the quantizer's input
    (in ``gp`` and its sub-graphs); the quantizer then dies unless something else reads it."""
    from onnx import helper
    made = {o: n for n in gp.node if n.op_type == "QuantizeLinear" and n.domain in ("", "ai.onnx")
            for o in n.output[:1]}
    count = 0
    for i, n in enumerate(gp.node):
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                count += _fold_fake_quant(sub)
        if n.op_type == "DequantizeLinear" and n.domain in ("", "ai.onnx") and n.input and n.input[0] in made:
            q = made[n.input[0]]
            gp.node[i].CopyFrom(helper.make_node("Identity", [q.input[0]], list(n.output[:1]), name=n.name))
            count += 1
    return count


_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][\w.]*)|([+\-*]))")


def eval_dim(expr: str, dims: Mapping[str, int]) -> int | None:
    """A symbolic dimension (``past_sequence``, ``past_sequence + sequence``, ``2*batch``) with the
    symbols of ``dims``; None when a symbol is not given or the text is no such expression."""
    terms, sign, prod, expect_operand = 0, 1, None, True
    pos = 0
    text = expr.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            return None
        pos = m.end()
        num, name, op = m.groups()
        if expect_operand:
            if op is not None:
                return None
            val = int(num) if num is not None else dims.get(name)
            if val is None:
                return None
            prod = val if prod is None else prod * val
            expect_operand = False
        else:
            if op is None:
                return None
            if op == "*":
                expect_operand = True
                continue
            terms += sign * prod
            sign, prod, expect_operand = (1 if op == "+" else -1), None, True
    if expect_operand or prod is None:
        return None
    return terms + sign * prod


def _shapes_from_dims(model, dims: Mapping[str, int], label: str, given: set[str],
                      empty: frozenset[str] = frozenset()) -> dict[str, tuple[int, ...]]:
    """Input shapes whose every symbolic dimension ``dims`` settles. A symbol no input names, or a
    size below 1 (below 0 for a symbol of ``empty``), is one line."""
    for name, n in dims.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < (0 if name in empty else 1):
            raise OnnxImportError(f"dimension '{name}' must be an integer >= 1, got {n!r}")
    inits = {t.name for t in model.graph.initializer}
    out: dict[str, tuple[int, ...]] = {}
    seen: set[str] = set()
    for vi in model.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        shape = []
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                shape.append(int(d.dim_value))
                continue
            seen.update(t for t in re.findall(r"[A-Za-z_][\w.]*", d.dim_param))
            v = eval_dim(d.dim_param, dims) if d.dim_param else None
            shape.append(v)
        if vi.name not in given and None not in shape and any(not d.HasField("dim_value")
                                                               for d in vi.type.tensor_type.shape.dim):
            out[vi.name] = tuple(shape)
    unknown = sorted(set(dims) - seen)
    if unknown:
        names = ", ".join(sorted(seen)) or "none"
        raise OnnxImportError(f"{label}: no input dimension is named '{unknown[0]}'; its symbolic dimensions "
                              f"are: {names}")
    return out


def _shape_text(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _fix_shape(name: str, declared: list, given: Sequence[int], minimum: int = 1) -> tuple[int, ...]:
    """The shape the caller gave for input ``name``: same rank as declared, positive, and equal to
    every static dimension the model declares."""
    try:
        shape = tuple(int(d) for d in given)
    except (TypeError, ValueError):
        raise OnnxImportError(f"input shape for '{name}' must be a list of integers, got {given!r}") from None
    if len(shape) != len(declared):
        raise OnnxImportError(f"input shape {_shape_text(shape)} for '{name}' has rank {len(shape)}; "
                              f"the model declares rank {len(declared)} {_shape_text(declared)}")
    for axis, (d, want) in enumerate(zip(shape, declared)):
        if d < minimum:
            raise OnnxImportError(f"input shape {_shape_text(shape)} for '{name}': dimension {axis} must be >= 1")
        if isinstance(want, int) and want != d:
            raise OnnxImportError(f"input shape {_shape_text(shape)} for '{name}': dimension {axis} is "
                                  f"{want} in the model {_shape_text(declared)}")
    return shape


# ---------------------------------------------------------------------------- importer

# ONNX ops whose output always has the shape of their first input (elementwise unary, casts).
_SAME_SHAPE = frozenset({
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Cast", "CastLike", "Ceil", "Celu",
    "Cos", "Cosh", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN",
    "LeakyRelu", "Log", "Mish", "Neg", "Not", "Reciprocal", "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin",
    "Sinh", "Softplus", "Softsign", "Sqrt", "Swish", "Tan", "Tanh", "ThresholdedRelu"})


def _unified_shapes(model, declared: dict[str, tuple[int, ...]],
                    input_shapes: dict[str, Sequence[int]]) -> dict[str, tuple[int, ...]]:
    """Static shapes of main-graph values whose size is computed at run time but provably equals a
    declared output's: onnx's shape inference (with data propagation) runs on the model with its
    output shapes left open, so it names each unknown size with a symbol (``unk__0``) and gives equal
    sizes the same symbol; an output's declared size then fixes its symbols (the Range inside an
    expanded HannWindow has the output's length). A symbol two declarations disagree on stays open.
    Empty when inference fails: the caller's one-line error stands."""
    import onnx
    from onnx import shape_inference
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.ClearField("value_info")
    for o in m.graph.output:
        o.type.tensor_type.ClearField("shape")
    for vi in m.graph.input:
        if vi.name in input_shapes and vi.type.HasField("tensor_type"):
            dims = vi.type.tensor_type.shape.dim
            for d, n in zip(dims, input_shapes[vi.name]):
                d.Clear()
                d.dim_value = int(n)
    try:
        inferred = shape_inference.infer_shapes(m, data_prop=True).graph
    except Exception:  # noqa: BLE001 - an odd model keeps the usual error
        return {}
    outs = {o.name: o for o in inferred.output}
    sym: dict[str, int | None] = {}
    for name, shape in declared.items():
        o = outs.get(name)
        if o is None or len(o.type.tensor_type.shape.dim) != len(shape):
            continue
        for d, n in zip(o.type.tensor_type.shape.dim, shape):
            if d.HasField("dim_param"):
                sym[d.dim_param] = n if sym.get(d.dim_param, n) == n else None
    found: dict[str, tuple[int, ...]] = {}
    for vi in list(inferred.value_info) + list(inferred.output):
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        dims = []
        for d in vi.type.tensor_type.shape.dim:
            n = d.dim_value if d.HasField("dim_value") else sym.get(d.dim_param) if d.HasField("dim_param") else None
            if not n:
                break
            dims.append(int(n))
        else:
            found[vi.name] = tuple(dims)
    return found


class _Importer:
    def __init__(self, opset: int, filled: dict[str, np.ndarray], label: str,
                 input_shapes: dict[str, Sequence[int]] | None = None, model=None):
        self.opset = opset
        self.model = model
        self.main: Graph | None = None
        self._unified: dict[str, tuple[int, ...]] | None = None
        self.filled = filled
        self.label = label
        self.input_shapes = input_shapes or {}
        self.empty_inputs: frozenset[str] = frozenset()
        self.transposed: dict[tuple[int, int], Value] = {}  # (graph, MatMul weight) ids -> [N, K] copy
        # Fully static shapes the model declares (graph outputs, value_info), by value name: the
        # type of an op whose shape parameter is computed at run time (checked when it runs).
        self.declared: dict[str, tuple[int, ...]] = {}

    def unified(self, name: str) -> tuple[int, ...] | None:
        """The static shape of main-graph value ``name`` that onnx's symbolic shape inference ties to
        a declared output shape (computed once, only when a declaration is missing)."""
        if self._unified is None:
            self._unified = _unified_shapes(self.model, self.declared, self.input_shapes) if self.model else {}
        return self._unified.get(name)

    def _tensor(self, t) -> np.ndarray:
        from onnx import numpy_helper
        if t.name in self.filled:
            return self.filled[t.name]
        if _is_stripped(t):
            raise OnnxImportError(f"{self.label}: initializer '{t.name}' has no data "
                                  f"(and the model is not marked weights_stripped=true)")
        return numpy_helper.to_array(t)

    def import_main(self, gp, name: str) -> Graph:
        g = Graph(name)
        self.main = g
        scope = Scope(g)
        self._constants(gp, scope)
        real = [vi.name for vi in gp.input if vi.name not in scope.env]
        unknown = sorted(set(self.input_shapes) - set(real))
        if unknown:
            raise OnnxImportError(f"input shape given for {', '.join(map(repr, unknown))}, which the model "
                                  f"does not take; its inputs are {', '.join(map(repr, real))}")
        for vi in gp.input:
            if vi.name in scope.env:  # old exporters list initializers as inputs too
                continue
            shape, dtype = self._value_info_type(vi, self.input_shapes.get(vi.name))
            scope.env[vi.name] = g.add_input(vi.name, shape, dtype)
        self._nodes(gp, scope)
        g.set_outputs([scope.lookup(o.name, "<graph output>") for o in gp.output])
        g.eliminate_dead_code()
        return g

    def _value_info_type(self, vi, given: Sequence[int] | None = None) -> tuple[tuple[int, ...], str]:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise OnnxImportError(f"input '{vi.name}' is not a tensor")
        dtype = np_dtype(tt.elem_type).name
        declared = [int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
        if given is not None:
            return _fix_shape(vi.name, declared, given, 0 if vi.name in self.empty_inputs else 1), dtype
        dims = []
        for axis, d in enumerate(declared):
            if isinstance(d, int):
                dims.append(d)
            elif axis == 0:
                warnings.warn(f"input '{vi.name}': dynamic dimension 0 ('{d}') set to 1; "
                              f"give another with --input-shape (input_shapes in Python)", stacklevel=4)
                dims.append(1)
            else:
                raise OnnxImportError(f"input '{vi.name}' has a dynamic dimension '{d}' at axis {axis} "
                                      f"(shape {_shape_text(declared)}); give its shape with "
                                      f"--input-shape {vi.name}=D0,D1,... (input_shapes in Python)"
                                      + (f", or size its symbols with --dim SYMBOL=N (dims in Python)"
                                         if isinstance(d, str) and d != "?" else ""))
        return tuple(dims), dtype

    def _constants(self, gp, scope: Scope) -> None:
        for t in gp.initializer:
            scope.env[t.name] = scope.graph.add_const(self._tensor(t), t.name)
        for st in gp.sparse_initializer:
            raise OnnxImportError(f"sparse initializer '{st.values.name}' is not supported")

    def _declare(self, gp) -> None:
        for vi in list(gp.output) + list(gp.value_info):
            if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
                continue
            dims = vi.type.tensor_type.shape.dim
            if all(d.HasField("dim_value") for d in dims):
                self.declared[vi.name] = tuple(int(d.dim_value) for d in dims)
        # An op whose output has its first input's shape passes a declaration back to that input
        # (the reduction inside an expanded ReduceL2: ReduceSum -> Cast -> Sqrt -> CastLike -> output);
        # consumers come after producers, so one pass in reverse follows a chain.
        for node in reversed(gp.node):
            if (node.op_type in _SAME_SHAPE and node.domain in ("", "ai.onnx") and node.input and node.output
                    and node.output[0] in self.declared and node.input[0] not in self.declared):
                self.declared[node.input[0]] = self.declared[node.output[0]]

    def _nodes(self, gp, scope: Scope) -> None:
        self._declare(gp)
        for node in gp.node:
            op_type = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            conv = CONVERTERS.get(op_type)
            name = node.name or (node.output[0] if node.output else op_type)
            if conv is None:
                raise OnnxImportError(f"unsupported ONNX op '{op_type}' at node '{name}'")
            ins = [scope.lookup(i, name) if i else None for i in node.input]
            standard = node.domain in ("", "ai.onnx")
            fail = lambda m, n=node, nm=name: OnnxImportError(f"node '{nm}' ({n.op_type}): {m}")  # noqa: E731
            if standard:
                check_node_signature(node, self.opset, fail)
            ctx = Context(self, scope, node, name, ins)
            # The converter's own message about a bad input type is the more specific one; the schema
            # check catches what a converter would accept silently (a STRING tensor in an Add), and
            # names what a converter would crash on.
            types = [v.dtype if v is not None else None for v in ins]
            try:
                outs = conv(ctx)
            except OnnxImportError:
                raise
            except Exception:
                if standard:
                    check_input_types(node, self.opset, types, fail)
                raise
            if standard:
                check_input_types(node, self.opset, types, fail)
            for oname, v in zip(node.output, outs):
                if oname and v is not None:
                    scope.env[oname] = v

    def import_body(self, gp, parent: Scope, name: str, leading: list[tuple[str, tuple, str]]) -> tuple[Graph, Scope]:
        """A sub-graph whose first inputs are ``leading`` (name, shape, dtype); captured outer
        values follow as further inputs (recorded in the returned scope)."""
        g = Graph(name)
        scope = Scope(g, parent)
        for i, (vname, shape, dtype) in enumerate(leading):
            onnx_name = gp.input[i].name if i < len(gp.input) else vname
            scope.env[onnx_name] = g.add_input(onnx_name, shape, dtype)
        self._constants(gp, scope)
        self._nodes(gp, scope)
        g.set_outputs([scope.lookup(o.name, f"{name} output") for o in gp.output])
        g.eliminate_dead_code()
        return g, scope


__all__ = ["load_onnx", "fill_stripped", "fill_arrays", "OnnxImportError"]
