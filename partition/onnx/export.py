"""A packed plan (``partition.read_packed``) as one ONNX model that stock onnxruntime runs, with every
offloaded region kept visible, and back again.

- The host graph is plain ONNX (standard ops, If/Loop with their bodies).
- Every external function (an offloaded region) is one node calling a model-local function
  (``ModelProto.functions``) named by its symbol, in the domain ``accel_tune.<target>``
  (``accel_tune.edge_npu``); the function body is the region's subgraph in standard ops (its
  composites inlined, its weights ``Constant`` nodes).
- The plan's facts ride in ``metadata_props``: on each call node and each function the symbol,
  target, predicted device cycles, energy and latency, the kernels' schedules and the hardware
  fingerprint; on the model the packed manifest and the host graph's JSON form, and on each
  function its ``external/<symbol>.json`` document, so that ``packed_from_onnx`` rebuilds the
  packed plan (weights from the ONNX tensors, each named by its params key) and it runs with the
  same numbers.

Ops are written by ``writers.WRITERS`` (the inverse of the importer's converters); an op without a
standard ONNX form is refused in one line naming the op and the region. Imports only partition,
numpy and onnx."""
from __future__ import annotations

import json
import os
import re
from types import SimpleNamespace
from typing import Any, Mapping

import numpy as np

from ..ir import Graph, Value
from ..packed import (FORMAT_VERSION, PackedFormatError, PackedModule, _param_refs, _without_functions,
                      parse_version, write_atomically, write_packed)
from ..serialize import function_to_json, graph_from_json, graph_to_json
from .writers import WRITERS

OPSET = 21          # the newest opset onnxruntime 1.20+ runs every op of (Gelu 20, the rest older)
IR_VERSION = 10     # the IR of opset 21; metadata_props on nodes and functions need 10
DOMAIN_PREFIX = "accel_tune."
EXPORT_FORMAT = "1"  # accel_tune.export_format: the layout of the metadata below
DERIVED_SEP = "::"   # "<params key>::T": a weight stored transposed (dense as MatMul)


class ExportError(ValueError):
    """A plan that cannot be written as ONNX (an op without a standard form, ...): one line."""


def target_domain(compiler: str) -> str:
    return DOMAIN_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", str(compiler))


def _json(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


# ============================================================================ building bodies
class _Names:
    """ONNX value names, unique across the whole model (subgraphs see outer names, so no shadowing)."""

    def __init__(self, reserved=()):
        self.used: set[str] = set(reserved)

    def take(self, base: str) -> str:
        base = base or "v"
        name, i = base, 0
        while name in self.used:
            i += 1
            name = f"{base}_{i}"
        self.used.add(name)
        return name


class Body:
    """One ONNX graph or function body under construction; what a writer gets."""

    def __init__(self, ex: "_Exporter", where: str, in_function: bool):
        self.ex, self.where, self.in_function = ex, where, in_function
        self.nodes: list = []
        self.initializers: list = []
        self.env: dict[int, str] = {}          # id(IR Value) -> ONNX name
        self.consts: dict[str, np.ndarray] = {}  # ONNX name -> data, for constants this body defines

    # -- what writers call
    def fresh(self, base: str) -> str:
        return self.ex.names.take(base)

    def node(self, op_type: str, inputs, outputs, domain: str = "", **attrs) -> list[str]:
        from onnx import helper
        outs = [self.fresh(f"{self.ex.tmp_base}_{op_type.lower()}") for _ in range(outputs)] \
            if isinstance(outputs, int) else list(outputs)
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=self.fresh(f"{self.ex.tmp_base}/{op_type}"),
                                           domain=domain, **attrs))
        return outs

    def const(self, data: np.ndarray, name: str | None = None) -> str:
        from onnx import helper, numpy_helper
        name = name or self.fresh(f"{self.ex.tmp_base}_const")
        t = numpy_helper.from_array(np.asarray(data, order="C"), name)  # ascontiguousarray makes 0-d 1-d
        if self.in_function:
            self.nodes.append(helper.make_node("Constant", [], [name], value=t, name=self.fresh(f"{name}/Constant")))
        else:
            self.initializers.append(t)
        self.consts[name] = data
        return name

    def ints(self, values) -> str:
        return self.const(np.array([int(v) for v in values], dtype=np.int64))

    def scalar(self, value, dtype) -> str:
        return self.const(np.array(value, dtype=np.dtype(dtype)))

    def cast64(self, name: str, v: Value) -> str:
        return name if v.dtype == "int64" else self.node("Cast", [name], 1, to=7)[0]

    def const_data(self, name: str) -> np.ndarray | None:
        return self.consts.get(name)

    def derived(self, name: str, how: str, data: np.ndarray) -> str:
        """A weight stored transformed (``how``, e.g. ``T``) under ``<name>::<how>``; the original
        is dropped again when nothing else uses it (``_Exporter._prune``)."""
        new = f"{name}{DERIVED_SEP}{how}"
        if new not in self.ex.names.used:
            self.ex.names.used.add(new)
            self.const(data, new)
            self.ex.derived[new] = name
        return new


# ============================================================================ the exporter
class _Exporter:
    def __init__(self, mod: PackedModule, fingerprint: str | None):
        self.mod = mod
        self.fingerprint = fingerprint
        self.host = _without_functions(mod.host_graph, mod.externals)
        self.host_doc, host_params = graph_to_json(self.host)
        self.ext_docs: dict[str, dict] = {}
        params = dict(host_params)
        for sym in mod.externals:
            fdoc, fparams = function_to_json(mod.function(sym), f"@{sym}/")
            self.ext_docs[sym] = {**mod.externals[sym], "function": fdoc}
            params.update(fparams)
        self.keys: dict[int, list[str]] = {}
        for k, a in params.items():
            self.keys.setdefault(id(a), []).append(k)
        self.params = params
        self.emitted: set[str] = set()
        self.derived: dict[str, str] = {}
        self.names = _Names(params)
        self.tmp_base = "t"
        self.functions: list = []
        self.region = "host graph"

    # -- values
    def _const_name(self, v: Value) -> str | None:
        keys = self.keys.get(id(v.data))
        if not keys:
            return None
        free = [k for k in keys if k not in self.emitted]
        return free[0] if free else None

    def bind_const(self, b: Body, v: Value) -> None:
        key = self._const_name(v)
        if key is None:  # the same array object under several keys, all emitted: a fresh name
            b.env[id(v)] = b.const(np.asarray(v.data), self.names.take(v.name))
            return
        self.emitted.add(key)
        b.env[id(v)] = b.const(np.asarray(v.data), key)

    # -- graphs
    def write_graph(self, g: Graph, b: Body, scope: Mapping[str, Any]) -> None:
        """Write ``g``'s constants and nodes into ``b`` (its inputs already bound in ``b.env``)."""
        for c in g.constants:
            self.bind_const(b, c)
        scope = {**scope, **g.functions}
        for n in g.nodes:
            self.write_node(n, b, scope)

    def write_node(self, n, b: Body, scope: Mapping[str, Any]) -> None:
        xs = [b.env[id(v)] for v in n.inputs]
        self.tmp_base = n.name
        if n.op == "call":
            callee = n.attrs["callee"]
            if callee in self.mod.externals:
                ys = [self.names.take(o.name) for o in n.outputs]
                self.call_region(n, callee, b, xs, ys)
                for o, y in zip(n.outputs, ys):
                    b.env[id(o)] = y
            else:  # a local function (a composite): inlined, its body in standard ops
                fn = scope[callee]
                for inner, x in zip(fn.graph.inputs, xs):
                    b.env[id(inner)] = x
                self.write_graph(fn.graph, b, scope)
                for o, inner in zip(n.outputs, fn.graph.outputs):
                    b.env[id(o)] = b.env[id(inner)]
            return
        ys = [self.names.take(o.name) for o in n.outputs]
        if n.op == "if":
            self.write_if(n, b, xs, ys, scope)
        elif n.op == "loop":
            self.write_loop(n, b, xs, ys, scope)
        else:
            w = WRITERS.get(n.op)
            if w is None:
                raise ExportError(f"{self.region}: op '{n.op}' (node '{n.name}') has no standard ONNX form "
                                  f"at opset {OPSET}; this plan cannot be exported")
            w(b, n, xs, ys)
        for o, y in zip(n.outputs, ys):
            b.env[id(o)] = y

    def subgraph(self, g: Graph, outer: list[str], leading: list[tuple[str, int]], scope, name: str):
        """An If branch or Loop body: ``leading`` (name, elem type) become ONNX graph inputs, the
        rest of ``g``'s inputs are the outer values ``outer`` (ONNX captures them by name)."""
        from onnx import helper
        b = Body(self, name, self.in_function_ctx)  # inside a function: Constant nodes, no initializers
        inputs = []
        for v, (base, et) in zip(g.inputs, leading):
            nm = self.names.take(base)
            b.env[id(v)] = nm
            # onnxruntime needs the iteration count's and condition's shapes; a carried value keeps its rank
            dims = [] if v.shape == () else [f"{nm}_d{i}" for i in range(len(v.shape))]
            inputs.append(helper.make_tensor_value_info(nm, et, dims))
        for v, x in zip(g.inputs[len(leading):], outer):
            b.env[id(v)] = x
        # the body's nodes set the base of fresh names; the control node that owns the body and
        # the body's output Identities keep names of their own (a profiler's kernel events are
        # matched to IR nodes by these names)
        saved = self.tmp_base
        self.write_graph(g, b, scope)
        self.tmp_base = name
        outs = []
        for v in g.outputs:
            y = b.node("Identity", [b.env[id(v)]], [self.names.take(f"{name}_out")])[0]
            outs.append(helper.make_tensor_value_info(y, _elem(v.dtype), None))
        self.tmp_base = saved
        return helper.make_graph(b.nodes, name, inputs, outs, initializer=b.initializers)

    in_function_ctx = False

    def write_if(self, n, b: Body, xs, ys, scope) -> None:
        th = self.subgraph(n.attrs["then_branch"], xs[1:], [], scope, f"{n.name}_then")
        el = self.subgraph(n.attrs["else_branch"], xs[1:], [], scope, f"{n.name}_else")
        cond = xs[0] if n.inputs[0].shape == () else b.node("Reshape", [xs[0], b.ints([])], 1)[0]
        b.node("If", [cond], ys, then_branch=th, else_branch=el)

    def write_loop(self, n, b: Body, xs, ys, scope) -> None:
        k = int(n.attrs.get("num_carried", len(n.inputs) - 2))
        body = n.attrs["body"]
        leading = [("iter", 7), ("cond", 9)] + [(f"{n.name}_v{i}", _elem(v.dtype)) for i, v in enumerate(n.inputs[2:2 + k])]
        g = self.subgraph(body, xs[2 + k:], leading, scope, f"{n.name}_body")
        b.node("Loop", xs[:2 + k], ys, body=g)

    def call_region(self, n, sym: str, b: Body, xs, ys) -> None:
        from onnx import helper
        fn = self.mod.function(sym)
        domain = target_domain(fn.attrs.get("Compiler", "device"))
        if not any(f.name == sym and f.domain == domain for f in self.functions):
            self.functions.append(self.region_function(sym, domain))
        node = helper.make_node(sym, xs, ys, name=self.names.take(n.name), domain=domain)
        _set_meta(node, self.region_facts(sym))
        b.nodes.append(node)

    def region_function(self, sym: str, domain: str):
        from onnx import helper
        fn = self.mod.function(sym)
        saved, self.region = self.region, f"region @{sym}"
        saved_ctx, self.in_function_ctx = self.in_function_ctx, True
        b = Body(self, sym, True)
        ins = []
        for v in fn.graph.inputs:
            nm = self.names.take(v.name)
            b.env[id(v)] = nm
            ins.append(nm)
        self.write_graph(fn.graph, b, {})
        outs = []
        seen = set(ins)
        for v in fn.graph.outputs:
            y = b.env[id(v)]
            if y in seen or y in b.consts:
                y = b.node("Identity", [y], [self.names.take(f"{v.name}_out")])[0]
            seen.add(y)
            outs.append(y)
        self.region, self.in_function_ctx = saved, saved_ctx
        f = helper.make_function(domain, sym, ins, outs, b.nodes, [helper.make_opsetid("", OPSET)],
                                 doc_string=f"offloaded region @{sym} for {fn.attrs.get('Compiler')}")
        facts = self.region_facts(sym)
        facts["accel_tune.external"] = _json(self.ext_docs[sym])
        _set_meta(f, facts)
        return f

    def region_facts(self, sym: str) -> dict[str, str]:
        doc = self.mod.externals[sym]
        man = self.mod.manifest
        pred = {**man.get("predicted", {}).get("functions", {}).get(sym, {}), **(doc.get("predicted") or {})}
        fn = self.mod.function(sym)
        facts = {"accel_tune.symbol": sym, "accel_tune.target": str(fn.attrs.get("Compiler", "")),
                 "accel_tune.hardware": str((man.get("hardware") or {}).get("name", "")),
                 "accel_tune.schedules": _json(doc.get("schedules", {}))}
        if self.fingerprint:
            facts["accel_tune.hardware_fingerprint"] = self.fingerprint
        for k in ("cycles", "energy_j", "latency_s", "device_s", "calls"):
            if pred.get(k) is not None:
                facts[f"accel_tune.predicted.{k}"] = repr(pred[k])
        return facts

    # -- the model
    def model(self):
        from onnx import helper
        b = Body(self, "main", False)
        g = self.host
        inputs = []
        for v in g.inputs:
            nm = self.names.take(v.name)
            b.env[id(v)] = nm
            inputs.append(helper.make_tensor_value_info(nm, _elem(v.dtype), list(v.shape)))
        self.write_graph(g, b, {})
        outs, seen = [], {i.name for i in inputs} | {t.name for t in b.initializers}
        for v in g.outputs:
            y = b.env[id(v)]
            if y in seen:
                y = b.node("Identity", [y], [self.names.take(v.name)])[0]
            seen.add(y)
            outs.append((y, v))
        self._prune(b)
        graph = helper.make_graph(b.nodes, g.name or "main", inputs,
                                  [helper.make_tensor_value_info(y, _elem(v.dtype), list(v.shape)) for y, v in outs])
        opsets = [helper.make_opsetid("", OPSET)] + [helper.make_opsetid(d, 1) for d in
                                                      sorted({f.domain for f in self.functions})]
        m = helper.make_model(graph, opset_imports=opsets, functions=self.functions, ir_version=IR_VERSION,
                              producer_name="accel-tune", producer_version=str(self.mod.manifest.get("producer_version", "")))
        # the weights go into the model once: make_model copies its graph, and a graph holding them
        # doubled the export's memory (1 GB more for a model of 512 MB)
        m.graph.initializer.extend(b.initializers)
        b.initializers.clear()
        man = {k: v for k, v in self.mod.manifest.items() if k != "members"}
        aliases = {k: self.keys[id(self.params[k])][0] for k in self.params
                   if k not in self.emitted and self.keys[id(self.params[k])][0] in self.emitted}
        facts = {"accel_tune.export_format": EXPORT_FORMAT,
                 "accel_tune.format_version": str(self.mod.manifest.get("format_version")),
                 "accel_tune.manifest": _json(man), "accel_tune.graph": _json(self.host_doc),
                 "accel_tune.param_aliases": _json(aliases), "accel_tune.derived": _json(self.derived)}
        if self.fingerprint:
            facts["accel_tune.hardware_fingerprint"] = self.fingerprint
        _set_meta(m, facts)
        _declare_outputs(m, [v for _, v in outs], _data_dependent(g))
        return m

    def _prune(self, b: Body) -> None:
        """Drop host initializers that only a derived (transposed) copy replaced."""
        used = {i for n in b.nodes for i in n.input} | _subgraph_inputs(b.nodes)
        keep = [t for t in b.initializers if t.name in used or t.name not in self.derived.values()]
        b.initializers[:] = keep


def _subgraph_inputs(nodes) -> set[str]:
    out = set()
    for n in nodes:
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                out |= {i for m in g.node for i in m.input} | _subgraph_inputs(g.node)
    return out


def _elem(dtype: str) -> int:
    from onnx import helper
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def _set_meta(proto, facts: Mapping[str, str]) -> None:
    for k, v in facts.items():
        e = proto.metadata_props.add()
        e.key, e.value = k, v


# Ops whose outputs may be shorter at run time than their IR type (the bound), or that carry sizes
# computed from such values (docs/IR.md, "Data-dependent sizes").
_SIZE_SOURCES = frozenset({"non_zero", "non_max_suppression", "compress", "unique", "loop", "if", "shape",
                           "size", "dyn_topk", "dyn_slice", "dyn_reshape", "dyn_expand", "dyn_tile", "dyn_split",
                           "constant_of_shape", "range"})


def _data_dependent(g: Graph) -> set[int]:
    """ids of the host values whose run-time size may differ from their type (descendants of a
    size source; a region call passes it on)."""
    dyn: set[int] = set()
    for n in g.nodes:
        if n.op in _SIZE_SOURCES or any(id(v) in dyn for v in n.inputs):
            dyn |= {id(o) for o in n.outputs}
    return dyn


def _declare_outputs(m, values, dynamic: set[int]) -> None:
    """Static output shapes where onnx's inference confirms them and the size cannot depend on the
    data; a data-dependent output (NonZero, NMS, a Loop's scan) is declared with its rank and
    symbolic dimensions."""
    from onnx import shape_inference
    try:
        inferred = {o.name: o for o in shape_inference.infer_shapes(_weightless(m)).graph.output}
    except Exception:  # noqa: BLE001 - inference is only a hint here
        inferred = {}
    for o, v in zip(m.graph.output, values):
        got = inferred.get(o.name)
        dims = got.type.tensor_type.shape.dim if got is not None and got.type.tensor_type.HasField("shape") else None
        ok = id(v) not in dynamic and dims is not None and len(dims) == len(v.shape) and all(
            d.HasField("dim_value") and d.dim_value == s for d, s in zip(dims, v.shape))
        if not ok:
            for i, d in enumerate(o.type.tensor_type.shape.dim):
                d.Clear()
                d.dim_param = f"{o.name}_d{i}"


# an initializer larger than this is given to shape inference as a graph input of its type alone
WEIGHTLESS_BYTES = 1 << 16


def _weightless(m):
    """``m`` for shape inference: its large initializers (weights: only their shapes decide an
    output's) become graph inputs of the same type and shape, the small ones (a Reshape's shape,
    a Slice's starts: values inference reads) stay. Why: onnx's inference serializes the model
    and parses it back on both sides of its C++ boundary, and on a model with 512 MB of weights it
    peaked at 4.3 GB and took 9 s (``calibrate --host``'s largest probe, 2026-11-29)."""
    from onnx import ModelProto, helper
    light = ModelProto()
    light.ir_version = m.ir_version
    light.opset_import.extend(m.opset_import)
    light.functions.extend(m.functions)
    g, lg = m.graph, light.graph
    lg.name = g.name
    lg.node.extend(g.node)
    lg.input.extend(g.input)
    lg.output.extend(g.output)
    lg.value_info.extend(g.value_info)
    for t in g.initializer:
        if t.ByteSize() > WEIGHTLESS_BYTES:
            lg.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            lg.initializer.append(t)
    return light


# ============================================================================ entry points
def to_onnx(mod: PackedModule, *, hardware_fingerprint: str | None = None):
    """The plan as an ``onnx.ModelProto`` (checked with ``onnx.checker.check_model(full_check=True)``)."""
    import onnx
    m = _Exporter(mod, hardware_fingerprint).model()
    try:
        onnx.checker.check_model(m, full_check=True)
    except Exception as e:  # noqa: BLE001 - onnx raises several types
        raise ExportError(f"the exported model does not pass onnx's checker: {str(e).strip().splitlines()[0]}") from None
    return m


def write_onnx(mod: PackedModule, path: str | os.PathLike, *, hardware_fingerprint: str | None = None):
    """Export and write atomically (a temporary file in the target folder, renamed into place):
    nothing half-written is left at ``path``."""
    m = to_onnx(mod, hardware_fingerprint=hardware_fingerprint)
    data = m.SerializeToString()
    write_atomically(os.fspath(path), lambda f: f.write(data), "the ONNX file", ".onnx", ExportError)
    return m


def graph_to_onnx(graph: Graph):
    """A plain graph (no offloaded regions: a model as imported or built) as an ``onnx.ModelProto``
    in standard ops, its constants as initializers: what stock onnxruntime runs to time the whole
    model (``tuner.calibrate``). Composites are inlined; If/Loop keep their bodies."""
    mod = SimpleNamespace(host_graph=graph, externals={}, manifest={}, function=None)
    return _Exporter(mod, None).model()  # type: ignore[arg-type]


def node_to_onnx(node, fill=None):
    """One primitive IR node as a one-node ONNX model (what the writer of its op emits: one or a
    few standard nodes): its non-constant inputs are graph inputs, its constants initializers
    (their data, or ``fill(shape, dtype)`` when a constant carries none), its outputs the graph's.
    Refused in one line (``ExportError``) for an op without a standard form or control flow."""
    from onnx import helper
    if node.op in ("if", "loop", "call"):
        raise ExportError(f"node '{node.name}': {node.op} is not one primitive op")
    w = WRITERS.get(node.op)
    if w is None:
        raise ExportError(f"op '{node.op}' (node '{node.name}') has no standard ONNX form at opset {OPSET}")
    ex = SimpleNamespace(names=_Names(), tmp_base=node.name or "n", derived={})
    b = Body(ex, "main", False)  # type: ignore[arg-type]
    inputs, xs = [], []
    for i, v in enumerate(node.inputs):
        nm = ex.names.take(f"x{i}")
        if v.is_const:
            data = v.data if v.data is not None else fill(tuple(v.shape), v.dtype)
            b.const(np.asarray(data), nm)
        else:
            inputs.append(helper.make_tensor_value_info(nm, _elem(v.dtype), list(v.shape)))
        b.env[id(v)] = nm
        xs.append(nm)
    ys = [ex.names.take(f"y{i}") for i in range(len(node.outputs))]
    w(b, node, xs, ys)
    outs = [helper.make_tensor_value_info(y, _elem(v.dtype), list(v.shape)) for y, v in zip(ys, node.outputs)]
    g = helper.make_graph(b.nodes, node.name or node.op, inputs, outs, initializer=b.initializers)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                             producer_name="accel-tune")


# ============================================================================ back again
def is_exported(model) -> bool:
    return any(p.key == "accel_tune.export_format" for p in model.metadata_props)


def read_facts(path: str | os.PathLike):
    """The ``onnx.ModelProto`` of an exported plan, refusing in one line a file that is not one."""
    import onnx
    path = os.fspath(path)
    try:
        m = onnx.load(path, load_external_data=False)
    except FileNotFoundError:
        raise ExportError(f"{path}: no such file") from None
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise ExportError(f"{path}: not a readable ONNX file ({type(e).__name__}: {str(e).strip()[:80]})") from None
    if not is_exported(m):
        raise ExportError(f"{path}: an ONNX model, but not one exported by accel-tune export "
                          f"(no accel_tune.export_format metadata)")
    meta = {p.key: p.value for p in m.metadata_props}
    if meta["accel_tune.export_format"] != EXPORT_FORMAT:
        raise ExportError(f"{path}: accel-tune export format {meta['accel_tune.export_format']!r} is not "
                          f"supported (this reader: {EXPORT_FORMAT}); upgrade accel-tune")
    fv = meta.get("accel_tune.format_version", "")
    try:
        major = parse_version(fv)[0]
    except (PackedFormatError, ValueError, TypeError):
        raise ExportError(f"{path}: accel_tune.format_version {fv!r} is not MAJOR.MINOR") from None
    if major != parse_version(FORMAT_VERSION)[0]:
        raise ExportError(f"{path}: format version {fv} is newer than this reader supports "
                          f"({FORMAT_VERSION.split('.')[0]}.x); upgrade accel-tune" if major > 1 else
                          f"{path}: format version {fv} is not supported")
    return m


def _tensors(m) -> dict[str, np.ndarray]:
    """Every constant tensor of the model by name: initializers and Constant nodes, in the main
    graph, functions and sub-graphs."""
    from onnx import numpy_helper
    out: dict[str, np.ndarray] = {}

    def graph(g):
        for t in g.initializer:
            out[t.name] = numpy_helper.to_array(t)
        nodes(g.node)

    def nodes(ns):
        for n in ns:
            if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
                for a in n.attribute:
                    if a.name == "value":
                        out[n.output[0]] = numpy_helper.to_array(a.t)
            for a in n.attribute:
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    graph(g)
    graph(m.graph)
    for f in m.functions:
        nodes(f.node)
    return out


def packed_from_onnx(src: str | os.PathLike, dst: str | os.PathLike) -> dict:
    """Rebuild the packed plan of an exported ONNX file at ``dst``: the manifest, host graph and
    external documents from the metadata, the weights from the ONNX tensors. Returns the manifest."""
    m = read_facts(src)
    label = os.path.basename(os.fspath(src))
    meta = {p.key: p.value for p in m.metadata_props}
    try:
        manifest = json.loads(meta["accel_tune.manifest"])
        host_doc = json.loads(meta["accel_tune.graph"])
        aliases = json.loads(meta.get("accel_tune.param_aliases", "{}"))
        derived = json.loads(meta.get("accel_tune.derived", "{}"))
        ext_docs = {}
        for f in m.functions:
            fm = {p.key: p.value for p in f.metadata_props}
            if "accel_tune.external" in fm:
                doc = json.loads(fm["accel_tune.external"])
                ext_docs[doc["symbol"]] = doc
    except (KeyError, ValueError, TypeError) as e:
        raise ExportError(f"{label}: malformed accel-tune metadata ({type(e).__name__}: {e})") from None
    missing = sorted(set(manifest.get("externals", {})) - set(ext_docs))
    if missing:
        raise ExportError(f"{label}: region @{missing[0]} named in the manifest has no function in the file")
    ext_docs = {s: ext_docs[s] for s in manifest["externals"]}  # the plan's order, not the call order
    tensors = _tensors(m)
    for name, orig in derived.items():
        if orig not in tensors and name in tensors:
            tensors[orig] = np.ascontiguousarray(tensors[name].T)
    for k, src_key in aliases.items():
        if src_key in tensors:
            tensors[k] = tensors[src_key]
    refs = _param_refs(host_doc) | set().union(*(_param_refs(d["function"]["graph"]) for d in ext_docs.values()))
    absent = sorted(refs - set(tensors))
    if absent:
        raise ExportError(f"{label}: weight {absent[0]!r} of the plan is not in the ONNX file")
    params = {k: tensors[k] for k in refs}
    local = [f for f in host_doc.get("functions", []) if "external" not in f]
    try:
        host = graph_from_json({**host_doc, "functions": local}, params)
    except ValueError as e:
        raise ExportError(f"{label}: host graph in the metadata: {e}") from None
    ext_params = {k: params[k] for d in ext_docs.values() for k in _param_refs(d["function"]["graph"])}
    fields = {k: v for k, v in manifest.items()
              if k not in ("format_version", "producer", "producer_version", "externals", "members")}
    return write_packed(dst, manifest_fields=fields, host_graph=host, externals=ext_docs, params=ext_params,
                        producer_version=manifest.get("producer_version"))
