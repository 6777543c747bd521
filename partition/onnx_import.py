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
import warnings
import zlib
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .ir import Graph, IRError, Value
from .ops import get_op, infer_types

MIN_OPSET, MAX_OPSET = 11, 21
# Folding evaluates eagerly; beyond this many elements a constant sub-computation stays a node.
_FOLD_LIMIT = 1 << 24


class OnnxImportError(ValueError):
    """An ONNX file the importer cannot turn into a graph; the message names the file or node."""


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


def _all_graphs(graph):
    """The graph and every sub-graph (If branches, Loop bodies), depth first."""
    from onnx import AttributeProto
    yield graph
    for n in graph.node:
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                yield from _all_graphs(a.g)
            elif a.type == AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _all_graphs(g)


def _uses(model) -> tuple[dict[str, tuple[Any, int]], dict[str, list[str]]]:
    """(initializer name -> (first consuming NodeProto, input index), value name -> consumer op
    types), over every graph."""
    first: dict[str, tuple[Any, int]] = {}
    consumers: dict[str, list[str]] = {}
    for g in _all_graphs(model.graph):
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


def fill_arrays(model, seed: int = 0) -> dict[str, np.ndarray]:
    """Data for every stripped initializer of ``model`` (in every sub-graph), by name."""
    first, consumers = _uses(model)
    out: dict[str, np.ndarray] = {}
    for g in _all_graphs(model.graph):
        for t in g.initializer:
            if _is_stripped(t):
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
    for g in _all_graphs(filled.graph):
        for t in g.initializer:
            if t.name in arrays:
                t.CopyFrom(numpy_helper.from_array(arrays[t.name], t.name))
    return filled


# ---------------------------------------------------------------------------- loading

def _read_model(path_or_bytes):
    import onnx
    from google.protobuf.message import DecodeError
    if hasattr(path_or_bytes, "SerializeToString") and hasattr(path_or_bytes, "graph"):
        model, label = path_or_bytes, "<ModelProto>"
    elif isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        label, raw = "<bytes>", bytes(path_or_bytes)
        try:
            model = onnx.load_from_string(raw)
        except (DecodeError, ValueError, RuntimeError) as e:
            raise OnnxImportError(f"{label} is not an ONNX model: {_one_line(e)}") from None
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
        try:
            model = onnx.load(path)
        except (DecodeError, ValueError, RuntimeError, OSError) as e:
            raise OnnxImportError(f"{label} is not an ONNX model: {_one_line(e)}") from None
    if model.ir_version == 0 or not model.HasField("graph"):
        raise OnnxImportError(f"{label} is not an ONNX model: no IR version or graph in it")
    return model, label


def _one_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


def load_onnx(path_or_bytes, *, fill_seed: int = 0,
              input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """Import an ONNX model (a path, the serialized bytes or an ``onnx.ModelProto``) of opset 11..21.

    Stripped weights (metadata ``weights_stripped=true``) are filled from ``fill_seed``; the graph's
    meta then records ``weights_stripped=True`` and ``filled_initializers``.

    The IR is static: ``input_shapes`` (input name -> shape) fixes inputs with dynamic dimensions.
    Without it, a dynamic leading (batch) dimension becomes 1 with a warning; any other dynamic
    dimension is an error naming the input and the dimension."""
    model, label = _read_model(path_or_bytes)
    opset = None
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            opset = int(imp.version)
    if opset is None:
        raise OnnxImportError(f"{label} imports no default-domain opset")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise OnnxImportError(f"{label} uses opset {opset}; supported opsets are {MIN_OPSET}..{MAX_OPSET}")
    stripped = _stripped_flag(model)
    filled = fill_arrays(model, fill_seed) if stripped else {}
    imp = _Importer(opset, filled, label, dict(input_shapes or {}))
    graph = imp.import_main(model.graph, name=model.graph.name or "main")
    graph.meta["source"] = f"onnx:{label}"
    graph.meta["opset"] = opset
    if model.producer_name:
        graph.meta["producer"] = f"{model.producer_name} {model.producer_version}".strip()
    if stripped:
        graph.meta["weights_stripped"] = True
        graph.meta["filled_initializers"] = sorted(filled)
    try:
        graph.lint()
    except IRError as e:  # an importer bug, but say which file
        raise OnnxImportError(f"{label}: imported graph is malformed: {e}") from None
    return graph


def _shape_text(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _fix_shape(name: str, declared: list, given: Sequence[int]) -> tuple[int, ...]:
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
        if d < 1:
            raise OnnxImportError(f"input shape {_shape_text(shape)} for '{name}': dimension {axis} must be >= 1")
        if isinstance(want, int) and want != d:
            raise OnnxImportError(f"input shape {_shape_text(shape)} for '{name}': dimension {axis} is "
                                  f"{want} in the model {_shape_text(declared)}")
    return shape


# ---------------------------------------------------------------------------- scopes

class _Scope:
    """Names visible while importing one ONNX graph; outer names are pulled in on first use."""

    def __init__(self, graph: Graph, parent: "_Scope | None" = None):
        self.graph = graph
        self.parent = parent
        self.env: dict[str, Value] = {}
        self.captured: list[Value] = []  # outer values, in the order of the extra body inputs

    def lookup(self, name: str, where: str) -> Value:
        v = self.env.get(name)
        if v is not None:
            return v
        if self.parent is None:
            raise OnnxImportError(f"node '{where}' reads '{name}', which no node, input or initializer defines")
        outer = self.parent.lookup(name, where)
        if outer.is_const:
            v = self.graph.add_const(outer.data, name)
        else:
            v = self.graph.add_input(name, outer.shape, outer.dtype)
            self.captured.append(outer)
        self.env[name] = v
        return v


def _np_dtype(elem_type: int) -> np.dtype:
    from onnx import helper
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def _attr_dict(node) -> dict[str, Any]:
    from onnx import helper
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        out[a.name] = v
    return out


# ---------------------------------------------------------------------------- importer

class _Importer:
    def __init__(self, opset: int, filled: dict[str, np.ndarray], label: str,
                 input_shapes: dict[str, Sequence[int]] | None = None):
        self.opset = opset
        self.filled = filled
        self.label = label
        self.input_shapes = input_shapes or {}
        self.transposed: dict[tuple[int, int], Value] = {}  # (graph, MatMul weight) ids -> [N, K] copy

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
        scope = _Scope(g)
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
        dtype = _np_dtype(tt.elem_type).name
        declared = [int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
        if given is not None:
            return _fix_shape(vi.name, declared, given), dtype
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
                                      f"--input-shape {vi.name}=D0,D1,... (input_shapes in Python)")
        return tuple(dims), dtype

    def _constants(self, gp, scope: _Scope) -> None:
        for t in gp.initializer:
            scope.env[t.name] = scope.graph.add_const(self._tensor(t), t.name)
        for st in gp.sparse_initializer:
            raise OnnxImportError(f"sparse initializer '{st.values.name}' is not supported")

    def _nodes(self, gp, scope: _Scope) -> None:
        for node in gp.node:
            op_type = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            conv = CONVERTERS.get(op_type)
            name = node.name or (node.output[0] if node.output else op_type)
            if conv is None:
                raise OnnxImportError(f"unsupported ONNX op '{op_type}' at node '{name}'")
            ins = [scope.lookup(i, name) if i else None for i in node.input]
            ctx = _Ctx(self, scope, node, name, ins)
            outs = conv(ctx)
            for oname, v in zip(node.output, outs):
                if oname and v is not None:
                    scope.env[oname] = v

    def import_body(self, gp, parent: _Scope, name: str, leading: list[tuple[str, tuple, str]]) -> tuple[Graph, _Scope]:
        """A sub-graph whose first inputs are ``leading`` (name, shape, dtype); captured outer
        values follow as further inputs (recorded in the returned scope)."""
        g = Graph(name)
        scope = _Scope(g, parent)
        for i, (vname, shape, dtype) in enumerate(leading):
            onnx_name = gp.input[i].name if i < len(gp.input) else vname
            scope.env[onnx_name] = g.add_input(onnx_name, shape, dtype)
        self._constants(gp, scope)
        self._nodes(gp, scope)
        g.set_outputs([scope.lookup(o.name, f"{name} output") for o in gp.output])
        g.eliminate_dead_code()
        return g, scope


class _Ctx:
    """One ONNX node being converted: its attributes, inputs and the ``emit`` helper."""

    def __init__(self, imp: _Importer, scope: _Scope, node, name: str, ins: list[Value | None]):
        self.imp = imp
        self.scope = scope
        self.graph = scope.graph
        self.node = node
        self.name = name
        self.ins = ins
        self.attrs = _attr_dict(node)
        self.opset = imp.opset

    def fail(self, msg: str) -> OnnxImportError:
        return OnnxImportError(f"node '{self.name}' ({self.node.op_type}): {msg}")

    def inp(self, i: int) -> Value | None:
        return self.ins[i] if i < len(self.ins) else None

    def need(self, i: int) -> Value:
        v = self.inp(i)
        if v is None:
            raise self.fail(f"input {i} is missing")
        return v

    def const(self, i: int, what: str) -> np.ndarray | None:
        """The data of input ``i`` (None when absent); the IR needs it static, so a value computed
        at run time is an error naming the node."""
        v = self.inp(i)
        if v is None:
            return None
        if not v.is_const:
            raise self.fail(f"{what} input '{self.node.input[i]}' must be a constant "
                            f"(it is computed at run time); the IR keeps it as a static attribute")
        return v.data

    def emit(self, op: str, inputs: list[Value], attrs: dict | None = None, *, out_names: list[str] | None = None,
             node_name: str | None = None) -> list[Value]:
        attrs = dict(attrs or {})
        names = out_names if out_names is not None else [o for o in self.node.output if o]
        try:
            types = infer_types(op, [v.type for v in inputs], attrs, self.graph.functions,
                                [v.data for v in inputs])
        except IRError as e:
            raise self.fail(str(e)) from None
        d = get_op(op)
        if (inputs and d.compute is not None and all(v.is_const for v in inputs)
                and sum(t.size for t in types) <= _FOLD_LIMIT):
            try:
                arrs = d.compute([v.data for v in inputs], attrs)
            except Exception as e:  # numpy errors carry no context; add the node
                raise self.fail(f"constant folding failed: {_one_line(e)}") from None
            return [self.graph.add_const(np.asarray(a).astype(t.dtype, copy=False).reshape(t.shape), nm)
                    for a, t, nm in zip(arrs, types, self._pad_names(names, len(types)))]
        node = self.graph.add_node(op, inputs, attrs, name=node_name or self.name, out_types=types,
                                   out_names=self._pad_names(names, len(types)))
        return list(node.outputs)

    def _pad_names(self, names: list[str], n: int) -> list[str]:
        base = names[0] if names else self.name
        return [names[i] if i < len(names) and names[i] else f"{base}.{i}" for i in range(n)]

    def new_const(self, data, name: str | None = None) -> list[Value]:
        return [self.graph.add_const(np.asarray(data), name or self.node.output[0])]

    def tmp(self, suffix: str) -> list[str]:
        return [f"{self.node.output[0]}_{suffix}"]


# ---------------------------------------------------------------------------- converters

Converter = Callable[[_Ctx], list]


def _unary(op: str) -> Converter:
    return lambda c: c.emit(op, [c.need(0)])


def _binary(op: str) -> Converter:
    return lambda c: c.emit(op, [c.need(0), c.need(1)])


_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
          "Erf": "erf", "Abs": "abs", "Neg": "neg", "Reciprocal": "reciprocal", "Not": "not",
          "HardSwish": "hard_swish", "Softplus": "softplus", "Softsign": "softsign", "Mish": "mish",
          "Sin": "sin", "Cos": "cos", "Floor": "floor", "Ceil": "ceil", "Round": "round", "Sign": "sign"}
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Equal": "equal", "Less": "less",
           "Greater": "greater", "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal", "And": "and",
           "Or": "or"}


def _identity(c: _Ctx):
    if c.node.op_type == "Dropout" and len(c.node.output) > 1 and c.node.output[1]:
        # The mask of an inference Dropout is all ones.
        x = c.need(0)
        return [x, c.graph.add_const(np.ones(x.shape, dtype=bool), c.node.output[1])]
    return [c.need(0)]


def _where(c):
    return c.emit("where", [c.need(0), c.need(1), c.need(2)])


def _leaky(c):
    return c.emit("leaky_relu", [c.need(0)], {"alpha": float(c.attrs.get("alpha", 0.01))})


def _hsig(c):
    return c.emit("hard_sigmoid", [c.need(0)], {"alpha": float(c.attrs.get("alpha", 0.2)),
                                                "beta": float(c.attrs.get("beta", 0.5))})


def _gelu(c):
    return c.emit("gelu", [c.need(0)], {"approximate": c.attrs.get("approximate", "none")})


def _clip(c):
    if c.opset < 11:
        lo, hi = c.attrs.get("min"), c.attrs.get("max")
    else:
        lo_a, hi_a = c.const(1, "min"), c.const(2, "max")
        lo = None if lo_a is None else float(np.asarray(lo_a).reshape(-1)[0])
        hi = None if hi_a is None else float(np.asarray(hi_a).reshape(-1)[0])
    if lo == 0.0 and hi == 6.0:
        return c.emit("relu6", [c.need(0)])
    return c.emit("clip", [c.need(0)], {"min": lo, "max": hi})


def _cast(c):
    return c.emit("cast", [c.need(0)], {"dtype": _np_dtype(int(c.attrs["to"])).name})


def _cast_like(c):
    return c.emit("cast", [c.need(0)], {"dtype": c.need(1).dtype})


def _spatial(c: _Ctx, x: Value, kernel: tuple[int, int]) -> dict:
    """strides, dilations and (top, left, bottom, right) pads with auto_pad resolved."""
    if len(x.shape) != 4:
        raise c.fail(f"only 2-D spatial inputs (rank 4, NCHW) are supported, got shape {list(x.shape)}")
    strides = tuple(int(s) for s in c.attrs.get("strides", (1, 1)))
    dil = tuple(int(d) for d in c.attrs.get("dilations", (1, 1)))
    auto = c.attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = tuple(int(p) for p in c.attrs.get("pads", (0, 0, 0, 0)))
    elif auto == "VALID":
        pads = (0, 0, 0, 0)
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(x.shape[2:], kernel, strides, dil):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            begin.append(lo)
            end.append(total - lo)
        pads = (*begin, *end)
    else:
        raise c.fail(f"unknown auto_pad '{auto}'")
    return {"strides": strides, "pads": pads, "dilations": dil}


def _lift_1d(c: _Ctx, x: Value) -> Value:
    """(N, C, L) -> (N, C, 1, L), rewriting the node's 1-D attributes for the 2-D op: the new axis
    has kernel 1, stride 1, dilation 1 and no padding, so the 2-D op computes the 1-D one (and a
    1-D convolution can be offloaded as a conv2d)."""
    a = dict(c.attrs)
    for k in ("strides", "dilations", "kernel_shape"):
        if k in a:
            a[k] = [1, *a[k]]
    if "pads" in a:
        p = list(a["pads"])
        a["pads"] = [0, p[0], 0, p[1]] if len(p) == 2 else p
    c.attrs = a
    return c.emit("unsqueeze", [x], {"axes": (2,)}, out_names=c.tmp("2d"))[0]


def _squeeze_1d(c: _Ctx, op: str, ins: list[Value], attrs: dict) -> list[Value]:
    y = c.emit(op, ins, attrs, out_names=c.tmp(op))[0]
    return c.emit("squeeze", [y], {"axes": (2,)})


def _conv(c):
    x, w = c.need(0), c.need(1)
    one_d = len(w.shape) == 3 and len(x.shape) == 3
    if len(w.shape) != 4 and not one_d:
        raise c.fail(f"only 1-D and 2-D convolutions are supported, weight shape {list(w.shape)}")
    if one_d:
        x = _lift_1d(c, x)
        w = c.emit("unsqueeze", [w], {"axes": (2,)}, out_names=c.tmp("w2d"))[0]
    attrs = _spatial(c, x, tuple(w.shape[2:]))
    attrs["groups"] = int(c.attrs.get("group", 1))
    ins = [x, w] + ([c.inp(2)] if c.inp(2) is not None else [])
    return _squeeze_1d(c, "conv2d", ins, attrs) if one_d else c.emit("conv2d", ins, attrs)


def _pool_attrs(c: _Ctx, x: Value) -> dict:
    kernel = tuple(int(k) for k in c.attrs["kernel_shape"])
    attrs = _spatial(c, x, kernel)
    attrs["kernel"] = kernel
    attrs["ceil_mode"] = bool(c.attrs.get("ceil_mode", 0))
    return attrs


def _pool_input(c: _Ctx) -> tuple[Value, bool]:
    """The pool's input as NCHW, and whether it was a 1-D (N, C, L) input lifted to (N, C, 1, L)."""
    x = c.need(0)
    if len(x.shape) == 3:
        return _lift_1d(c, x), True
    if len(x.shape) != 4:
        raise c.fail(f"only 1-D and 2-D pooling is supported, input shape {list(x.shape)}, "
                     f"kernel_shape {list(c.attrs.get('kernel_shape', []))}")
    return x, False


def _maxpool(c):
    if len(c.node.output) > 1 and c.node.output[1]:
        raise c.fail("the Indices output of MaxPool is not supported")
    x, one_d = _pool_input(c)
    attrs = _pool_attrs(c, x)
    return _squeeze_1d(c, "max_pool2d", [x], attrs) if one_d else c.emit("max_pool2d", [x], attrs)


def _avgpool(c):
    x, one_d = _pool_input(c)
    attrs = _pool_attrs(c, x)
    attrs["count_include_pad"] = bool(c.attrs.get("count_include_pad", 0))
    return _squeeze_1d(c, "avg_pool2d", [x], attrs) if one_d else c.emit("avg_pool2d", [x], attrs)


def _gap(c):
    x = c.need(0)
    if len(x.shape) == 3:
        return _squeeze_1d(c, "global_avg_pool2d", [_lift_1d(c, x)], {})
    if len(x.shape) != 4:
        raise c.fail(f"only rank-3 (N, C, L) and rank-4 (NCHW) inputs are supported, got shape {list(x.shape)}")
    return c.emit("global_avg_pool2d", [x])


def _gmp(c):
    x = c.need(0)
    return c.emit("reduce_max", [x], {"axes": tuple(range(2, len(x.shape))), "keepdims": True})


def _bn(c):
    if any(o for o in c.node.output[1:]):
        raise c.fail("training-mode outputs of BatchNormalization are not supported")
    if int(c.attrs.get("training_mode", 0)):
        raise c.fail("training_mode=1 is not supported")
    return c.emit("batch_norm", [c.need(i) for i in range(5)], {"epsilon": float(c.attrs.get("epsilon", 1e-5))},
                  out_names=[c.node.output[0]])


def _ln(c):
    if any(o for o in c.node.output[1:]):
        raise c.fail("the Mean/InvStdDev outputs of LayerNormalization are not supported")
    ins = [c.need(0), c.need(1)] + ([c.inp(2)] if c.inp(2) is not None else [])
    return c.emit("layer_norm", ins, {"axis": int(c.attrs.get("axis", -1)),
                                      "epsilon": float(c.attrs.get("epsilon", 1e-5))},
                  out_names=[c.node.output[0]])


def _matmul(c):
    """MatMul by a constant 2-D matrix is a linear layer (how exporters write nn.Linear on N-D
    inputs); like TVM's ONNX frontend, canonicalise it to dense with the weight stored [N, K], so
    that dense-only accelerators and the dense patterns (bias, activation epilogues) see it."""
    a, b = c.need(0), c.need(1)
    if not (b.is_const and len(b.shape) == 2 and len(a.shape) >= 2 and a.dtype == b.dtype):
        return c.emit("matmul", [a, b])
    key = (id(c.graph), id(b))  # one transposed copy per weight and graph, even when tied
    w = c.imp.transposed.get(key)
    if w is None:
        w = c.graph.add_const(np.ascontiguousarray(np.asarray(b.data).T), f"{b.name}_T")
        c.imp.transposed[key] = w
    return c.emit("dense", [a, w])


def _gemm(c):
    a, b, bias = c.need(0), c.need(1), c.inp(2)
    alpha, beta = float(c.attrs.get("alpha", 1.0)), float(c.attrs.get("beta", 1.0))
    ta, tb = int(c.attrs.get("transA", 0)), int(c.attrs.get("transB", 0))
    # The common nn.Linear form is canonicalised to dense so patterns see one op for it.
    if (alpha == 1.0 and beta == 1.0 and ta == 0 and tb == 1 and len(b.shape) == 2
            and (bias is None or bias.shape == (b.shape[0],))):
        return c.emit("dense", [a, b] + ([bias] if bias is not None else []))
    attrs = {"alpha": alpha, "beta": beta, "trans_a": ta, "trans_b": tb}
    return c.emit("gemm", [a, b] + ([bias] if bias is not None else []), attrs)


def _softmax_like(op: str) -> Converter:
    """Softmax / LogSoftmax / Hardmax: before opset 13 they normalise over all of [axis, rank) flattened
    together (default axis 1), from 13 over one axis (default -1)."""
    def conv(c: _Ctx):
        x = c.need(0)
        rank = len(x.shape)
        axis = int(c.attrs.get("axis", 1 if c.opset < 13 else -1))
        axis = axis + rank if axis < 0 else axis
        if c.opset >= 13 or axis == rank - 1:
            return c.emit(op, [x], {"axis": axis if c.opset >= 13 else -1})
        outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        flat = c.emit("reshape", [x], {"shape": (outer, x.type.size // max(outer, 1))}, out_names=c.tmp("2d"))[0]
        y = c.emit(op, [flat], {"axis": -1}, out_names=c.tmp("flat"))[0]
        return c.emit("reshape", [y], {"shape": tuple(x.shape)})
    return conv


def _axes_of(c: _Ctx, input_from: int, input_idx: int) -> tuple[int, ...] | None:
    """Axes given as an attribute (older opsets) or as a constant input (newer ones)."""
    if c.opset >= input_from:
        a = c.const(input_idx, "axes")
        return None if a is None else tuple(int(v) for v in np.asarray(a).reshape(-1))
    a = c.attrs.get("axes")
    return None if a is None else tuple(int(v) for v in a)


def _norm_axes(axes, rank: int) -> tuple[int, ...]:
    return tuple(sorted(a + rank if a < 0 else a for a in axes))


def _reduce(op: str, axes_input_from: int) -> Converter:
    def conv(c: _Ctx):
        x = c.need(0)
        axes = _axes_of(c, axes_input_from, 1)
        keep = bool(c.attrs.get("keepdims", 1))
        if not axes:
            if int(c.attrs.get("noop_with_empty_axes", 0)):
                return [x]
            axes = None
        else:
            axes = _norm_axes(axes, len(x.shape))
        return c.emit(op, [x], {"axes": axes, "keepdims": keep})
    return conv




def _argmax(c):
    x = c.need(0)
    axis = int(c.attrs.get("axis", 0))
    return c.emit("argmax", [x], {"axis": axis + len(x.shape) if axis < 0 else axis,
                                  "keepdims": bool(c.attrs.get("keepdims", 1)),
                                  "select_last_index": bool(c.attrs.get("select_last_index", 0))})


def _topk(c):
    x = c.need(0)
    k = int(np.asarray(c.const(1, "K")).reshape(-1)[0]) if c.opset >= 10 else int(c.attrs["k"])
    axis = int(c.attrs.get("axis", -1))
    return c.emit("topk", [x], {"k": k, "axis": axis + len(x.shape) if axis < 0 else axis,
                                "largest": bool(c.attrs.get("largest", 1)),
                                "sorted": bool(c.attrs.get("sorted", 1))})


def _transpose(c):
    x = c.need(0)
    perm = c.attrs.get("perm")
    perm = tuple(range(len(x.shape)))[::-1] if perm is None else tuple(int(p) for p in perm)
    return c.emit("transpose", [x], {"perm": perm})


def _reshape(c):
    x = c.need(0)
    target = [int(v) for v in np.asarray(c.const(1, "shape")).reshape(-1)]
    allowzero = int(c.attrs.get("allowzero", 0))
    shape = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if i >= len(x.shape):
                raise c.fail(f"shape {target} copies dimension {i} that input {list(x.shape)} lacks")
            d = x.shape[i]
        shape.append(d)
    if shape.count(-1) > 1:
        raise c.fail(f"shape {target} has more than one -1")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or x.type.size % known:
            raise c.fail(f"cannot reshape {list(x.shape)} to {target}")
        shape[shape.index(-1)] = x.type.size // known
    return c.emit("reshape", [x], {"shape": tuple(shape)})


def _flatten(c):
    x = c.need(0)
    axis = int(c.attrs.get("axis", 1))
    return c.emit("flatten", [x], {"axis": axis + len(x.shape) if axis < 0 else axis})


def _squeeze(c):
    x = c.need(0)
    axes = _axes_of(c, 13, 1)
    axes = tuple(i for i, d in enumerate(x.shape) if d == 1) if axes is None else _norm_axes(axes, len(x.shape))
    return c.emit("squeeze", [x], {"axes": axes})


def _unsqueeze(c):
    x = c.need(0)
    axes = _axes_of(c, 13, 1)
    if axes is None:
        raise c.fail("Unsqueeze needs axes")
    return c.emit("unsqueeze", [x], {"axes": _norm_axes(axes, len(x.shape) + len(axes))})


def _concat(c):
    xs = [v for v in c.ins if v is not None]
    axis = int(c.attrs["axis"])
    rank = len(xs[0].shape)
    return c.emit("concat", xs, {"axis": axis + rank if axis < 0 else axis})


def _split(c):
    x = c.need(0)
    axis = int(c.attrs.get("axis", 0))
    axis = axis + len(x.shape) if axis < 0 else axis
    n_out = len(c.node.output)
    if c.opset >= 13:
        sizes = c.const(1, "split")
        sizes = None if sizes is None else [int(v) for v in np.asarray(sizes).reshape(-1)]
    else:
        sizes = c.attrs.get("split")
        sizes = None if sizes is None else [int(v) for v in sizes]
    if sizes is None:
        n = int(c.attrs.get("num_outputs", n_out))
        dim = x.shape[axis]
        chunk = -(-dim // n)  # ONNX: equal chunks, the last one smaller when it does not divide
        sizes = [min(chunk, dim - i * chunk) for i in range(n)]
    return c.emit("split", [x], {"axis": axis, "sizes": tuple(sizes)})


def _slice(c):
    x = c.need(0)
    if c.opset < 10:
        starts, ends = c.attrs["starts"], c.attrs["ends"]
        axes, steps = c.attrs.get("axes"), None
    else:
        starts, ends = c.const(1, "starts"), c.const(2, "ends")
        axes, steps = c.const(3, "axes"), c.const(4, "steps")
    ints = lambda a: None if a is None else tuple(int(v) for v in np.asarray(a).reshape(-1))  # noqa: E731
    attrs = {"starts": ints(starts), "ends": ints(ends), "axes": ints(axes), "steps": ints(steps)}
    if attrs["axes"] is not None:
        attrs["axes"] = tuple(a + len(x.shape) if a < 0 else a for a in attrs["axes"])
    return c.emit("slice", [x], attrs)


def _gather(c):
    data = c.need(0)
    axis = int(c.attrs.get("axis", 0))
    return c.emit("gather", [data, c.need(1)], {"axis": axis + len(data.shape) if axis < 0 else axis})


def _gather_nd(c):
    return c.emit("gather_nd", [c.need(0), c.need(1)], {"batch_dims": int(c.attrs.get("batch_dims", 0))})


def _gather_el(c):
    data = c.need(0)
    axis = int(c.attrs.get("axis", 0))
    return c.emit("gather_elements", [data, c.need(1)], {"axis": axis + len(data.shape) if axis < 0 else axis})


def _pad(c):
    x = c.need(0)
    rank = len(x.shape)
    if c.opset < 11:
        pads, value = list(c.attrs["pads"]), float(c.attrs.get("value", 0.0))
    else:
        pads = [int(v) for v in np.asarray(c.const(1, "pads")).reshape(-1)]
        cv = c.const(2, "constant_value")
        value = 0.0 if cv is None else float(np.asarray(cv).reshape(-1)[0])
        axes = c.const(3, "axes") if c.opset >= 18 else None
        if axes is not None:
            axes = [int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes).reshape(-1)]
            full = [0] * (2 * rank)
            for j, a in enumerate(axes):
                full[a], full[rank + a] = pads[j], pads[len(axes) + j]
            pads = full
    mode = c.attrs.get("mode", "constant")
    return c.emit("pad", [x], {"pads": tuple(int(p) for p in pads), "mode": mode, "value": value})


def _expand(c):
    shape = tuple(int(v) for v in np.asarray(c.const(1, "shape")).reshape(-1))
    return c.emit("expand", [c.need(0)], {"shape": shape})


def _tile(c):
    reps = tuple(int(v) for v in np.asarray(c.const(1, "repeats")).reshape(-1))
    return c.emit("tile", [c.need(0)], {"repeats": reps})


def _nms(c):
    mo, iou, st = c.const(2, "max_output_boxes_per_class"), c.const(3, "iou_threshold"), c.const(4, "score_threshold")
    scalar = lambda a, f: None if a is None else f(np.asarray(a).reshape(-1)[0])  # noqa: E731
    attrs = {"max_output_boxes_per_class": scalar(mo, int) or 0,
             "iou_threshold": scalar(iou, float) or 0.0,
             "score_threshold": scalar(st, float),
             "center_point_box": int(c.attrs.get("center_point_box", 0))}
    return c.emit("non_max_suppression", [c.need(0), c.need(1)], attrs)


# ---- ops that only ever produce constants (shapes are static) -------------------------------

def _constant(c):
    from onnx import numpy_helper
    a = c.attrs
    if "value" in a:
        data = numpy_helper.to_array(a["value"])
    elif "value_float" in a:
        data = np.array(a["value_float"], dtype=np.float32)
    elif "value_floats" in a:
        data = np.array(a["value_floats"], dtype=np.float32)
    elif "value_int" in a:
        data = np.array(a["value_int"], dtype=np.int64)
    elif "value_ints" in a:
        data = np.array(a["value_ints"], dtype=np.int64)
    else:
        raise c.fail(f"unsupported Constant attribute {sorted(a)}")
    return c.new_const(data)


def _shape(c):
    shape = np.array(c.need(0).shape, dtype=np.int64)
    start, end = int(c.attrs.get("start", 0)), c.attrs.get("end")
    return c.new_const(shape[start:None if end is None else int(end)])


def _size(c):
    return c.new_const(np.array(c.need(0).type.size, dtype=np.int64))


def _const_of_shape(c):
    from onnx import numpy_helper
    shape = tuple(int(v) for v in np.asarray(c.const(0, "shape")).reshape(-1))
    value = c.attrs.get("value")
    fill = numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
    return c.new_const(np.full(shape, fill[0], dtype=fill.dtype))


def _range(c):
    start, limit, delta = (np.asarray(c.const(i, n)) for i, n in enumerate(("start", "limit", "delta")))
    return c.new_const(np.arange(start.item(), limit.item(), delta.item()).astype(start.dtype))


# ---- control flow -----------------------------------------------------------------------------

def _if(c):
    cond = c.need(0)
    then_gp, else_gp = c.attrs["then_branch"], c.attrs["else_branch"]
    if cond.is_const:  # a static branch: inline it into the current graph
        gp = then_gp if bool(np.asarray(cond.data).reshape(-1)[0]) else else_gp
        c.imp._constants(gp, c.scope)
        c.imp._nodes(gp, c.scope)
        return [c.scope.lookup(o.name, c.name) for o in gp.output]
    then_g, then_s = c.imp.import_body(then_gp, c.scope, f"{c.name}_then", [])
    else_g, else_s = c.imp.import_body(else_gp, c.scope, f"{c.name}_else", [])
    # Both branches must take the same captured values in the same order.
    order: list[Value] = []
    for v in [*then_s.captured, *else_s.captured]:
        if all(v is not u for u in order):
            order.append(v)
    for g, s in ((then_g, then_s), (else_g, else_s)):
        by_outer = {id(o): inner for o, inner in zip(s.captured, g.inputs)}
        ordered = []
        for o in order:
            inner = by_outer.get(id(o))
            ordered.append(inner if inner is not None else g.add_input(o.name, o.shape, o.dtype))
        g.inputs = ordered
    return c.emit("if", [cond, *order], {"then_branch": then_g, "else_branch": else_g})


def _loop(c):
    body_gp = c.attrs["body"]
    if c.inp(0) is None:
        raise c.fail("a Loop without a max trip count is not supported (scan outputs need a bound)")
    c.const(0, "max trip count M")
    trip = c.need(0)
    cond = c.inp(1)
    if cond is None:
        cond = c.graph.add_const(np.array(True), f"{c.name}_cond")
    carried = [v for v in c.ins[2:]]
    if any(v is None for v in carried):
        raise c.fail("empty loop-carried inputs are not supported")
    leading = [("iter", (), "int64"), ("cond", (), "bool")] + [(f"v{i}", v.shape, v.dtype) for i, v in enumerate(carried)]
    if len(body_gp.input) != len(leading):
        raise c.fail(f"body takes {len(body_gp.input)} inputs, expected {len(leading)}")
    body, scope = c.imp.import_body(body_gp, c.scope, f"{c.name}_body", leading)
    trip_v = trip if trip.shape == () and trip.dtype == "int64" else c.graph.add_const(
        np.array(int(np.asarray(trip.data).reshape(-1)[0]), dtype=np.int64), f"{c.name}_trip")
    cond_v = cond if cond.shape == () else c.emit("reshape", [cond], {"shape": ()}, out_names=c.tmp("cond"))[0]
    return c.emit("loop", [trip_v, cond_v, *carried, *scope.captured],
                  {"body": body, "num_carried": len(carried)})


def _check_seq_lens(c: _Ctx, seq: int, batch: int) -> None:
    """Only full-length sequences are computed; sequence_lens may say so, never anything else."""
    v = c.inp(4)
    if v is None:
        return
    if not v.is_const:
        raise c.fail("sequence_lens computed at run time is not supported; only a constant equal "
                     f"to the sequence length {seq} for every batch row is")
    lens = np.asarray(v.data).reshape(-1)
    if lens.size != batch or np.any(lens != seq):
        raise c.fail(f"sequence_lens {lens.tolist()} is not supported; variable-length sequences are "
                     f"not, only every batch row running the full sequence length {seq}")


def _recurrent(op: str, n_states: int) -> Converter:
    """ONNX LSTM/GRU -> lstm/gru. Holes among the optional inputs (a missing B before initial_h)
    become zeros, as ONNX defines them, so the IR op takes its optional inputs trailing."""
    def conv(c):
        x, w, r = c.need(0), c.need(1), c.need(2)
        if not len(x.shape) == len(w.shape) == len(r.shape) == 3:
            raise c.fail(f"X, W and R must be 3-D, got shapes {list(x.shape)}, {list(w.shape)}, {list(r.shape)}")
        layout = int(c.attrs.get("layout", 0))
        seq, batch = (x.shape[0], x.shape[1]) if layout == 0 else (x.shape[1], x.shape[0])
        _check_seq_lens(c, seq, batch)
        d, hs = w.shape[0], r.shape[-1]
        state = (d, batch, hs) if layout == 0 else (batch, d, hs)
        # ONNX input index -> zero value when absent
        optional = [(3, (d, 2 * w.shape[1]))] + [(5 + k, state) for k in range(n_states)]
        if op == "lstm":
            optional.append((7, (d, 3 * hs)))
        last = max([k for k, (i, _) in enumerate(optional) if c.inp(i) is not None], default=-1)
        ins = [x, w, r]
        for i, shape in optional[:last + 1]:
            ins.append(c.inp(i) if c.inp(i) is not None else
                       c.graph.add_const(np.zeros(shape, x.dtype), f"{c.name}_in{i}"))
        attrs = {k: c.attrs[k] for k in ("direction", "hidden_size", "activations", "clip", "input_forget",
                                         "linear_before_reset") if k in c.attrs}
        attrs["layout"] = layout
        outs = list(c.node.output) + [""] * (1 + n_states - len(c.node.output))
        names = [o or f"{c.name}_{k}" for o, k in zip(outs, ("Y", "Y_h", "Y_c"))]
        return c.emit(op, ins, attrs, out_names=names)
    return conv


def _with_attrs(op: str, **defaults) -> Converter:
    """A unary op whose ONNX float attributes (with the spec's defaults) pass straight through."""
    return lambda c: c.emit(op, [c.need(0)], {k: float(c.attrs.get(k, v)) for k, v in defaults.items()})


def _variadic(op: str, mean: bool = False) -> Converter:
    """Min/Max/Sum/Mean over any number of broadcasting inputs, as a chain of binary ops."""
    def conv(c: _Ctx):
        xs = [v for v in c.ins if v is not None]
        if not xs:
            raise c.fail("needs at least one input")
        if len(xs) == 1 and not mean:
            return [xs[0]]
        acc = xs[0]
        for i, x in enumerate(xs[1:], 1):
            last = i == len(xs) - 1 and not mean
            acc = c.emit(op, [acc, x], out_names=None if last else c.tmp(f"acc{i}"))[0]
        if mean:
            n = c.graph.add_const(np.asarray(len(xs), dtype=acc.dtype), c.tmp("count")[0])
            acc = c.emit("div", [acc, n])[0]
        return [acc]
    return conv


def _mod(c):
    return c.emit("mod", [c.need(0), c.need(1)], {"fmod": int(c.attrs.get("fmod", 0))})


def _convt_pads(c: _Ctx, x: Value, w: Value, strides, dil, opad) -> tuple[int, ...]:
    """Explicit (top, left, bottom, right) pads; output_shape and SAME_* auto_pad split the total
    padding as the ONNX spec says (SAME_UPPER puts the odd one at the end, else at the start)."""
    auto = c.attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise c.fail(f"unknown auto_pad '{auto}'")
    out = c.attrs.get("output_shape")
    if out is None and auto == "NOTSET":
        return tuple(int(p) for p in c.attrs.get("pads", (0, 0, 0, 0)))
    if out is None and auto == "VALID":
        return (0, 0, 0, 0)
    out = [d * s for d, s in zip(x.shape[2:], strides)] if out is None else [int(v) for v in out]
    if len(out) != 2:
        raise c.fail(f"output_shape {out} must give the 2 spatial sizes")
    begin, end = [], []
    for size, k, s, d, op, o in zip(x.shape[2:], w.shape[2:], strides, dil, opad, out):
        full = s * (size - 1) + op + (k - 1) * d + 1
        if o > full:
            raise c.fail(f"output size {out} is larger than the {full} that input {list(x.shape)}, kernel "
                         f"{list(w.shape[2:])}, strides {list(strides)} and output_padding {list(opad)} give; "
                         f"only cropping pads are supported")
        total = full - o
        lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
        begin.append(lo)
        end.append(total - lo)
    return (*begin, *end)


def _conv_transpose(c):
    x, w = c.need(0), c.need(1)
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise c.fail(f"only 2-D transposed convolutions are supported (NCHW input, 4-D weight), input shape "
                     f"{list(x.shape)}, weight shape {list(w.shape)}")
    ks = c.attrs.get("kernel_shape")
    if ks is not None and tuple(int(k) for k in ks) != tuple(w.shape[2:]):
        raise c.fail(f"kernel_shape {list(ks)} differs from the weight's {list(w.shape[2:])}")
    strides = tuple(int(s) for s in c.attrs.get("strides", (1, 1)))
    dil = tuple(int(d) for d in c.attrs.get("dilations", (1, 1)))
    opad = tuple(int(o) for o in c.attrs.get("output_padding", (0, 0)))
    attrs = {"strides": strides, "pads": _convt_pads(c, x, w, strides, dil, opad), "dilations": dil,
             "groups": int(c.attrs.get("group", 1)), "output_padding": opad}
    ins = [x, w] + ([c.inp(2)] if c.inp(2) is not None else [])
    return c.emit("conv_transpose2d", ins, attrs)


_RESIZE_COORD_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")


def _resize_check(c: _Ctx, x: Value) -> None:
    a = c.attrs
    mode = a.get("mode", "nearest")
    ctm = a.get("coordinate_transformation_mode", "half_pixel")
    if mode not in ("nearest", "linear"):
        raise c.fail(f"mode '{mode}' is not supported (only nearest and linear)")
    if ctm not in _RESIZE_COORD_MODES:
        raise c.fail(f"coordinate_transformation_mode '{ctm}' is not supported (only "
                     f"{', '.join(_RESIZE_COORD_MODES)})")
    if int(a.get("antialias", 0)):
        raise c.fail("antialias=1 is not supported")
    if a.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise c.fail(f"keep_aspect_ratio_policy '{a['keep_aspect_ratio_policy']}' is not supported (only stretch)")
    if len(x.shape) != 4:
        raise c.fail(f"only 4-D NCHW inputs are supported, got shape {list(x.shape)}")


def _resize_targets(c: _Ctx, x: Value) -> tuple[list[float], list[int]]:
    """Per-axis scales (float32, as ONNX stores them) and output sizes from the constant scales or
    sizes input; with sizes, the scale is sizes / input size, as onnxruntime computes it."""
    scales, sizes = c.const(2, "scales"), c.const(3, "sizes")
    scales = None if scales is None or np.size(scales) == 0 else np.asarray(scales, np.float32).reshape(-1)
    sizes = None if sizes is None or np.size(sizes) == 0 else np.asarray(sizes, np.int64).reshape(-1)
    if (scales is None) == (sizes is None):
        raise c.fail("exactly one of the scales and sizes inputs must be given")
    given = scales if scales is not None else sizes
    axes = c.attrs.get("axes")
    axes = list(range(4)) if axes is None else _norm_axes([int(v) for v in axes], 4)
    if len(given) != len(axes):
        raise c.fail(f"{'scales' if sizes is None else 'sizes'} {given.tolist()} has {len(given)} entries for "
                     f"{len(axes)} axes")
    sc = [np.float32(1.0)] * 4
    out = list(x.shape)
    for ax, v in zip(axes, given):
        if scales is not None:
            sc[ax], out[ax] = v, int(v * np.float32(x.shape[ax]))
        else:
            sc[ax], out[ax] = np.float32(v) / np.float32(x.shape[ax]), int(v)
    if out[:2] != list(x.shape[:2]):
        raise c.fail(f"only the spatial axes of NCHW can be resized; input {list(x.shape)} -> {out}")
    return [float(s) for s in sc], out


def _resize(c):
    x = c.need(0)
    _resize_check(c, x)
    scales, out = _resize_targets(c, x)
    attrs = {"mode": c.attrs.get("mode", "nearest"), "size": tuple(out[2:]), "scales": tuple(scales[2:]),
             "coordinate_transformation_mode": c.attrs.get("coordinate_transformation_mode", "half_pixel"),
             "nearest_mode": c.attrs.get("nearest_mode", "round_prefer_floor")}
    return c.emit("resize", [x], attrs)


def _instance_norm(c):
    return c.emit("instance_norm", [c.need(0), c.need(1), c.need(2)],
                  {"epsilon": float(c.attrs.get("epsilon", 1e-5))})


def _blocksize(c: _Ctx) -> dict:
    # a missing (required) blocksize is left for the op to report
    return {"blocksize": int(c.attrs["blocksize"])} if "blocksize" in c.attrs else {}


def _depth_to_space(c):
    return c.emit("depth_to_space", [c.need(0)], {**_blocksize(c), "mode": c.attrs.get("mode", "DCR")})


def _space_to_depth(c):
    return c.emit("space_to_depth", [c.need(0)], _blocksize(c))


def _trilu(c):
    k = c.const(1, "k")
    return c.emit("trilu", [c.need(0)], {"upper": bool(c.attrs.get("upper", 1)),
                                         "k": 0 if k is None else int(np.asarray(k).reshape(-1)[0])})


def _einsum(c):
    if "equation" not in c.attrs:
        raise c.fail("missing attribute 'equation'")
    return c.emit("einsum", [c.need(i) for i in range(len(c.ins))], {"equation": c.attrs["equation"]})


def _axis_in(rank: int, axis: int) -> int:
    """A negative axis made non-negative; one out of range is left for the op to report."""
    return axis + rank if -rank <= axis < 0 else axis


def _cumsum(c):
    x, _ = c.need(0), c.need(1)
    axis = np.asarray(c.const(1, "axis")).reshape(-1)
    if axis.size != 1:
        raise c.fail(f"axis must hold one value, got {axis.tolist()}")
    return c.emit("cumsum", [x], {"axis": _axis_in(len(x.shape), int(axis[0])),
                                  "exclusive": bool(c.attrs.get("exclusive", 0)),
                                  "reverse": bool(c.attrs.get("reverse", 0))})


def _arg_reduce(op: str) -> Converter:
    def conv(c):
        x = c.need(0)
        return c.emit(op, [x], {"axis": _axis_in(len(x.shape), int(c.attrs.get("axis", 0))),
                                "keepdims": bool(c.attrs.get("keepdims", 1)),
                                "select_last_index": bool(c.attrs.get("select_last_index", 0))})
    return conv


def _isinf(c):
    return c.emit("isinf", [c.need(0)], {"detect_negative": int(c.attrs.get("detect_negative", 1)),
                                         "detect_positive": int(c.attrs.get("detect_positive", 1))})


def _lrn(c):
    if "size" not in c.attrs:
        raise c.fail("missing attribute 'size'")
    return c.emit("lrn", [c.need(0)], {"size": int(c.attrs["size"]), "alpha": float(c.attrs.get("alpha", 1e-4)),
                                       "beta": float(c.attrs.get("beta", 0.75)),
                                       "bias": float(c.attrs.get("bias", 1.0))})


# ONNX element types QuantizeLinear may produce here (output_dtype codes); float8 and int4 are not.
_QUANT_CODES = {2: "uint8", 3: "int8", 4: "uint16", 5: "int16"}
_QUANT_TYPES = "int8, uint8, int16 and uint16"


def _quant_attrs(c: _Ctx, x: Value) -> dict:
    """The axis of a per-axis scale; block quantization and pre-13 per-axis scales are errors."""
    block = int(c.attrs.get("block_size", 0))
    if block:
        raise c.fail(f"block quantization (block_size={block}) is not supported; only per-tensor and "
                     f"per-axis scales are")
    scale = c.need(1)
    if scale.type.size != 1 and c.opset < 13:
        raise c.fail(f"a per-axis scale (shape {list(scale.shape)}) needs opset 13 or later; opset {c.opset} "
                     f"quantizes per tensor only")
    return {"axis": _axis_in(len(x.shape), int(c.attrs.get("axis", 1)))}


def _quant_type(c: _Ctx, dtype: str, what: str) -> None:
    if dtype not in _QUANT_CODES.values():
        raise c.fail(f"{what} type {dtype} is not supported; only {_QUANT_TYPES} quantization is")


def _quantize(c):
    from onnx import TensorProto
    x, zp = c.need(0), c.inp(2)
    attrs = _quant_attrs(c, x)
    code = int(c.attrs.get("output_dtype", 0))
    if code and code not in _QUANT_CODES:
        raise c.fail(f"output_dtype {TensorProto.DataType.Name(code)} is not supported; only {_QUANT_TYPES} "
                     f"quantization is")
    if zp is not None:
        _quant_type(c, zp.dtype, "zero_point")
        if code and _QUANT_CODES[code] != zp.dtype:
            raise c.fail(f"output_dtype {_QUANT_CODES[code]} differs from the zero_point type {zp.dtype}")
        return c.emit("quantize_linear", [x, c.need(1), zp], attrs)
    return c.emit("quantize_linear", [x, c.need(1)], {**attrs, "dtype": _QUANT_CODES.get(code, "uint8")})


def _dequantize(c):
    x, zp = c.need(0), c.inp(2)
    if x.dtype != "int32":
        _quant_type(c, x.dtype, "input")
    attrs = _quant_attrs(c, x)
    return c.emit("dequantize_linear", [x, c.need(1)] + ([zp] if zp is not None else []), attrs)


def _scatter_nd(c):
    return c.emit("scatter_nd", [c.need(0), c.need(1), c.need(2)], {"reduction": c.attrs.get("reduction", "none")})


def _scatter_el(c):
    data = c.need(0)
    return c.emit("scatter_elements", [data, c.need(1), c.need(2)],
                  {"axis": _axis_in(len(data.shape), int(c.attrs.get("axis", 0))),
                   "reduction": c.attrs.get("reduction", "none")})


def _one_hot(c):
    idx, _ = c.need(0), c.need(1)
    depth = np.asarray(c.const(1, "depth")).reshape(-1)
    if depth.size != 1:
        raise c.fail(f"depth must hold one value, got {depth.tolist()}")
    # a float depth is cast to int64, as the spec says
    return c.emit("one_hot", [idx, c.need(2)], {"depth": int(depth[0]),
                                                "axis": _axis_in(len(idx.shape) + 1, int(c.attrs.get("axis", -1)))})


# ONNX op type -> converter; a value built once, read by ``_Importer._nodes``.
CONVERTERS: Mapping[str, Converter] = MappingProxyType({
    **{k: _unary(v) for k, v in _UNARY.items()},
    **{k: _binary(v) for k, v in _BINARY.items()},
    # ReduceSum took axes as an input from opset 13, the others from opset 18
    "ReduceMean": _reduce("reduce_mean", 18),
    "ReduceMax": _reduce("reduce_max", 18),
    "ReduceSum": _reduce("reduce_sum", 13),
    "LSTM": _recurrent("lstm", 2),
    "GRU": _recurrent("gru", 1),
    "ReduceMin": _reduce("reduce_min", 18),
    "ReduceProd": _reduce("reduce_prod", 18),
    "ReduceL1": _reduce("reduce_l1", 18),
    "ReduceL2": _reduce("reduce_l2", 18),
    "ReduceSumSquare": _reduce("reduce_sum_square", 18),
    "ReduceLogSumExp": _reduce("reduce_log_sum_exp", 18),
    "Min": _variadic("min"),
    "Max": _variadic("max"),
    "Sum": _variadic("add"),
    "Mean": _variadic("add", mean=True),
    "Mod": _mod,
    "PRelu": _binary("prelu"),
    "Elu": _with_attrs("elu", alpha=1.0),
    "Selu": _with_attrs("selu", alpha=1.67326319217681884765625, gamma=1.05070102214813232421875),
    "Celu": _with_attrs("celu", alpha=1.0),
    "LogSoftmax": _softmax_like("log_softmax"),
    "ConvTranspose": _conv_transpose,
    "Resize": _resize,
    "InstanceNormalization": _instance_norm,
    "DepthToSpace": _depth_to_space,
    "SpaceToDepth": _space_to_depth,
    "Trilu": _trilu,
    "Einsum": _einsum,
    "CumSum": _cumsum,
    "ArgMin": _arg_reduce("argmin"),
    "Xor": _binary("xor"),
    "IsNaN": _unary("isnan"),
    "IsInf": _isinf,
    "LRN": _lrn,
    "QuantizeLinear": _quantize,
    "DequantizeLinear": _dequantize,
    "ScatterND": _scatter_nd,
    "ScatterElements": _scatter_el,
    "OneHot": _one_hot,
    "ThresholdedRelu": _with_attrs("thresholded_relu", alpha=1.0),
    "Shrink": _with_attrs("shrink", bias=0.0, lambd=0.5),
    "Hardmax": _softmax_like("hardmax"),
    "Identity": _identity,
    "Dropout": _identity,
    "Where": _where,
    "LeakyRelu": _leaky,
    "HardSigmoid": _hsig,
    "Gelu": _gelu,
    "Clip": _clip,
    "Cast": _cast,
    "CastLike": _cast_like,
    "Conv": _conv,
    "MaxPool": _maxpool,
    "AveragePool": _avgpool,
    "GlobalAveragePool": _gap,
    "GlobalMaxPool": _gmp,
    "BatchNormalization": _bn,
    "LayerNormalization": _ln,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "Softmax": _softmax_like("softmax"),
    "ArgMax": _argmax,
    "TopK": _topk,
    "Transpose": _transpose,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Concat": _concat,
    "Split": _split,
    "Slice": _slice,
    "Gather": _gather,
    "GatherND": _gather_nd,
    "GatherElements": _gather_el,
    "Pad": _pad,
    "Expand": _expand,
    "Tile": _tile,
    "NonMaxSuppression": _nms,
    "Constant": _constant,
    "Shape": _shape,
    "Size": _size,
    "ConstantOfShape": _const_of_shape,
    "Range": _range,
    "If": _if,
    "Loop": _loop,
})

__all__ = ["load_onnx", "fill_stripped", "fill_arrays", "OnnxImportError"]
