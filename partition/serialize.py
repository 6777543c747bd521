"""Lossless JSON form of a ``Graph``: structure in a plain JSON document, constant data apart in a
``{key: ndarray}`` dict (the packed module stores it as ``params.npz``).

The encoding is specified in docs/FORMAT.md ("Graph JSON") so a reader in any language can
follow it. Round trip: ``str(graph_from_json(*graph_to_json(g))) == str(g)`` and the interpreter
gives the same outputs. Node outputs carry their types, so decoding never needs the op registry
(a graph with ops this build does not know still loads; running it is another matter).
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any, Mapping

import numpy as np

from .ir import Function, Graph, IRError, TensorType, Value

GRAPH_SCHEMA = "accel-tune.graph/1"


class SerializeError(IRError):
    """A graph that cannot be written, or a JSON document that is not a valid graph."""


# --------------------------------------------------------------------------- values (attrs, meta)
_TAGS = ("$list", "$dict", "$float", "$scalar", "$graph")


def encode_value(v: Any, where: str, *, graph_key: str | None = None,
                 params: dict[str, np.ndarray] | None = None) -> Any:
    """Encode an attribute or meta value. JSON arrays are tuples; every other non-JSON distinction
    (list, dict, non-finite float, numpy scalar, sub-graph) is a one-key object whose key starts
    with ``$``. ``graph_key`` and ``params`` are needed only where a value may be a Graph."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int) and not isinstance(v, np.generic):
        return v
    if isinstance(v, float) and not isinstance(v, np.generic):
        if math.isfinite(v):
            return v
        return {"$float": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    if isinstance(v, np.generic) and not isinstance(v, (np.void, np.object_)) and v.dtype.kind in "biuf":
        return {"$scalar": {"dtype": v.dtype.name, "value": encode_value(v.item(), where)}}
    if isinstance(v, tuple):
        return [encode_value(x, f"{where}[{i}]", graph_key=graph_key, params=params) for i, x in enumerate(v)]
    if isinstance(v, list):
        return {"$list": [encode_value(x, f"{where}[{i}]", graph_key=graph_key, params=params)
                          for i, x in enumerate(v)]}
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise SerializeError(f"{where}: dict key {k!r} is not a string")
            out[k] = encode_value(x, f"{where}.{k}", graph_key=graph_key, params=params)
        return {"$dict": out}
    if isinstance(v, Graph):
        if params is None or graph_key is None:
            raise SerializeError(f"{where}: a Graph is allowed only as a node attribute")
        return {"$graph": _graph_to_json(v, graph_key, params)}
    if isinstance(v, np.ndarray):
        raise SerializeError(f"{where}: numpy array attributes are not allowed (put the data in a constant)")
    raise SerializeError(f"{where}: cannot serialise a value of type {type(v).__name__}")


def decode_value(j: Any, where: str, *, params: Mapping[str, np.ndarray] | None = None,
                 strict: bool = True) -> Any:
    """``strict``: a nested ``$graph`` with fields this reader does not know is an error (see
    ``graph_from_json``)."""
    if j is None or isinstance(j, (bool, str, int, float)):
        return j
    if isinstance(j, list):
        return tuple(decode_value(x, f"{where}[{i}]", params=params, strict=strict) for i, x in enumerate(j))
    if not isinstance(j, dict) or len(j) != 1 or next(iter(j)) not in _TAGS:
        raise SerializeError(f"{where}: expected a JSON value or a one-key object tagged with one of "
                             f"{', '.join(_TAGS)}, got {_short(j)}")
    tag, body = next(iter(j.items()))
    if tag == "$list":
        _expect(isinstance(body, list), f"{where}: $list needs an array")
        return [decode_value(x, f"{where}[{i}]", params=params, strict=strict) for i, x in enumerate(body)]
    if tag == "$dict":
        _expect(isinstance(body, dict), f"{where}: $dict needs an object")
        return {k: decode_value(x, f"{where}.{k}", params=params, strict=strict) for k, x in body.items()}
    if tag == "$float":
        _expect(body in ("nan", "inf", "-inf"), f"{where}: $float must be nan, inf or -inf, got {_short(body)}")
        return float(body)
    if tag == "$scalar":
        _expect(isinstance(body, dict) and set(body) == {"dtype", "value"},
                f"{where}: $scalar needs exactly dtype and value")
        dt = _dtype(body["dtype"], where)
        _expect(dt.kind in "biuf", f"{where}: $scalar dtype {dt.name} is not bool/int/float")
        return dt.type(decode_value(body["value"], where))
    if params is None:
        raise SerializeError(f"{where}: a $graph is allowed only as a node attribute")
    return _graph_from_json(body, where, params, strict)


# --------------------------------------------------------------------------- graph -> JSON
def graph_to_json(graph: Graph, prefix: str = "") -> tuple[dict, dict[str, np.ndarray]]:
    """The graph as a JSON-able dict and its constant data by key. Keys are the constant's path
    (``<prefix><scope>/<name>``): stable for a given graph, unique within the returned dict."""
    params: dict[str, np.ndarray] = {}
    return _graph_to_json(graph, prefix, params), params


def function_to_json(fn: Function, prefix: str) -> tuple[dict, dict[str, np.ndarray]]:
    """One function (attrs + body) in the form used in a graph's ``functions`` list, minus the
    symbol; its constants are keyed under ``prefix``."""
    params: dict[str, np.ndarray] = {}
    return _function_to_json(fn, prefix, "function", params), params


def _function_to_json(fn: Function, key: str, where: str, params: dict) -> dict:
    return {"attrs": {k: encode_value(v, f"{where} attr {k}") for k, v in fn.attrs.items()},
            "graph": _graph_to_json(fn.graph, key, params)}


_UNSAFE_KEY_CHARS = re.compile(r"[\x00-\x1f\x7f\\:]")


def param_key(name: str) -> str:
    """A value name as the path part of its params key. Exporters name values like
    ``/layer/Constant_output_0``; the key becomes a zip entry name in params.npz, which must be a
    relative path, so empty, ``.`` and ``..`` segments, backslashes, colons and control characters
    turn into ``_`` (clashes are then resolved like any other)."""
    name = _UNSAFE_KEY_CHARS.sub("_", name)
    parts = [p if p not in ("", ".", "..") else "_" * max(1, len(p)) for p in name.split("/")]
    return "/".join(parts)


def _type_json(t: TensorType) -> dict:
    return {"shape": list(t.shape), "dtype": t.dtype}


def _graph_to_json(g: Graph, key: str, params: dict) -> dict:
    where = f"graph {g.name!r}" + (f" ({key.rstrip('/')})" if key else "")
    names: dict[int, str] = {}
    seen: set[str] = set()
    for v in g.values():
        if v.name in seen:
            raise SerializeError(f"{where}: duplicate value name {v.name!r}")
        seen.add(v.name)
        names[id(v)] = v.name

    def ref(v: Value, what: str) -> str:
        try:
            return names[id(v)]
        except KeyError:
            raise SerializeError(f"{where}: {what} uses {v.name!r}, which is not defined in this graph") from None

    constants = []
    for c in g.constants:
        if c.data is None:
            raise SerializeError(f"{where}: constant {c.name!r} has no data")
        arr = np.asarray(c.data)
        if arr.dtype.hasobject:
            raise SerializeError(f"{where}: constant {c.name!r} has dtype object, which cannot be stored without pickle")
        pkey = key + param_key(c.name)
        base, i = pkey, 0
        while pkey in params:
            i += 1
            pkey = f"{base}#{i}"
        params[pkey] = arr
        constants.append({"name": c.name, **_type_json(c.type), "param": pkey})

    functions = []
    for sym, fn in g.functions.items():
        functions.append({"symbol": sym,
                          **_function_to_json(fn, f"{key}@{sym}/", f"{where} function @{sym}", params)})

    nodes = []
    for n in g.nodes:
        attrs = {}
        for k, v in n.attrs.items():
            attrs[k] = encode_value(v, f"{where} node {n.name!r} attr {k}",
                                    graph_key=f"{key}{n.name}.{k}/", params=params)
        nodes.append({"name": n.name, "op": n.op,
                      "inputs": [ref(v, f"node {n.name!r}") for v in n.inputs],
                      "outputs": [{"name": o.name, **_type_json(o.type)} for o in n.outputs],
                      "attrs": attrs,
                      "meta": _encode_meta(n.meta, f"{where} node {n.name!r} meta")})
    return {"name": g.name,
            "inputs": [{"name": v.name, **_type_json(v.type)} for v in g.inputs],
            "constants": constants,
            "functions": functions,
            "nodes": nodes,
            "outputs": [ref(v, "graph output") for v in g.outputs],
            "meta": _encode_meta(g.meta, f"{where} meta")}


def _encode_meta(meta: dict, where: str) -> dict:
    """Meta never changes semantics, so an entry that has no JSON form is left out, not an error."""
    out = {}
    for k, v in meta.items():
        if not isinstance(k, str):
            continue
        try:
            out[k] = encode_value(v, f"{where}.{k}")
        except SerializeError:
            continue
    return out


# --------------------------------------------------------------------------- JSON -> graph
def graph_from_json(doc: Mapping, params: Mapping[str, np.ndarray], *, strict: bool = True) -> Graph:
    """Rebuild a graph from ``graph_to_json``'s output. Raises SerializeError naming the first fault.
    ``strict``: an object with a field this reader does not know is a fault (a reader of an older
    format version than the document's passes False and ignores such fields)."""
    return _graph_from_json(doc, "graph", params, strict)


def function_from_json(doc: Mapping, params: Mapping[str, np.ndarray], where: str = "function", *,
                       strict: bool = True) -> Function:
    _expect(isinstance(doc, Mapping), f"{where}: expected an object")
    _keys(doc, {"attrs", "graph"}, where, strict)
    attrs = doc["attrs"]
    _expect(isinstance(attrs, Mapping), f"{where}: attrs must be an object")
    return Function(_graph_from_json(doc["graph"], f"{where} body", params, strict),
                    {k: decode_value(v, f"{where} attr {k}") for k, v in attrs.items()})


def _graph_from_json(doc: Any, where: str, params: Mapping[str, np.ndarray], strict: bool) -> Graph:
    _expect(isinstance(doc, Mapping), f"{where}: expected an object, got {_short(doc)}")
    _keys(doc, {"name", "inputs", "constants", "functions", "nodes", "outputs", "meta"}, where, strict)
    _expect(isinstance(doc["name"], str), f"{where}: name must be a string")
    where = f"graph {doc['name']!r}" if where == "graph" else f"{where} {doc['name']!r}"
    g = Graph(doc["name"])
    env: dict[str, Value] = {}

    def define(v: Value, name: str) -> None:
        if name in env:
            raise SerializeError(f"{where}: value {name!r} is defined twice")
        if v.name != name:  # the builder renamed it (clashed with a node name); keep the stored name
            v.name = name
        env[name] = v

    for i, rec in enumerate(_list(doc["inputs"], f"{where} inputs")):
        name, t = _typed(rec, f"{where} input {i}", strict=strict)
        define(g.add_input(name, t.shape, t.dtype), name)

    for i, rec in enumerate(_list(doc["constants"], f"{where} constants")):
        name, t = _typed(rec, f"{where} constant {i}", extra={"param"}, strict=strict)
        pkey = rec["param"]
        _expect(isinstance(pkey, str), f"{where}: constant {name!r} param key must be a string")
        if pkey not in params:
            raise SerializeError(f"{where}: constant {name!r} refers to param {pkey!r}, which is missing")
        arr = params[pkey]
        if tuple(arr.shape) != t.shape or arr.dtype.name != t.dtype:
            raise SerializeError(f"{where}: constant {name!r} is declared {t} but param {pkey!r} "
                                 f"holds {arr.dtype.name}[{','.join(map(str, arr.shape))}]")
        v = g.add_const(arr, name)
        v.data, v.type = arr, t  # add_const narrows float64; the stored dtype is the truth
        define(v, name)

    for i, rec in enumerate(_list(doc["functions"], f"{where} functions")):
        _expect(isinstance(rec, Mapping) and isinstance(rec.get("symbol"), str),
                f"{where}: function {i} needs a string symbol")
        sym = rec["symbol"]
        _expect(sym not in g.functions, f"{where}: function @{sym} is defined twice")
        g.functions[sym] = function_from_json({k: v for k, v in rec.items() if k != "symbol"}, params,
                                              f"{where} function @{sym}", strict=strict)

    for i, rec in enumerate(_list(doc["nodes"], f"{where} nodes")):
        _expect(isinstance(rec, Mapping), f"{where}: node {i} must be an object")
        _keys(rec, {"name", "op", "inputs", "outputs", "attrs", "meta"}, f"{where} node {i}", strict)
        nname, op = rec["name"], rec["op"]
        _expect(isinstance(nname, str) and isinstance(op, str), f"{where}: node {i} name and op must be strings")
        nwhere = f"{where} node {nname!r}"
        ins = []
        for a in _list(rec["inputs"], f"{nwhere} inputs"):
            if not isinstance(a, str) or a not in env:
                raise SerializeError(f"{nwhere}: input {_short(a)} is not defined before this node")
            ins.append(env[a])
        outs = [_typed(o, f"{nwhere} output {j}", strict=strict)
                for j, o in enumerate(_list(rec["outputs"], f"{nwhere} outputs"))]
        attrs = rec["attrs"]
        _expect(isinstance(attrs, Mapping), f"{nwhere}: attrs must be an object")
        attrs = {k: decode_value(v, f"{nwhere} attr {k}", params=params, strict=strict) for k, v in attrs.items()}
        node = g.add_node(op, ins, attrs, name=nname, out_types=[t for _, t in outs],
                          out_names=[n for n, _ in outs])
        node.name = nname
        node.meta = _decode_meta(rec["meta"], f"{nwhere} meta")
        for o, (oname, _) in zip(node.outputs, outs):
            define(o, oname)

    outputs = []
    for a in _list(doc["outputs"], f"{where} outputs"):
        if not isinstance(a, str) or a not in env:
            raise SerializeError(f"{where}: output {_short(a)} is not defined in the graph")
        outputs.append(env[a])
    g.set_outputs(outputs)
    g.meta = _decode_meta(doc["meta"], f"{where} meta")
    g._names.update(env)  # keep later edits from reusing a stored name
    g._names.update(n.name for n in g.nodes)
    return g


def _decode_meta(j: Any, where: str) -> dict:
    _expect(isinstance(j, Mapping), f"{where}: expected an object")
    return {k: decode_value(v, f"{where}.{k}") for k, v in j.items()}


def _typed(rec: Any, where: str, extra: set[str] = frozenset(), strict: bool = True) -> tuple[str, TensorType]:
    _expect(isinstance(rec, Mapping), f"{where}: expected an object")
    _keys(rec, {"name", "shape", "dtype", *extra}, where, strict)
    name, shape, dtype = rec["name"], rec["shape"], rec["dtype"]
    _expect(isinstance(name, str), f"{where}: name must be a string")
    _expect(isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                            for d in shape),
            f"{where} ({name}): shape must be a list of non-negative integers, got {_short(shape)}")
    return name, TensorType(tuple(shape), _dtype(dtype, f"{where} ({name})").name)


def _dtype(name: Any, where: str) -> np.dtype:
    _expect(isinstance(name, str), f"{where}: dtype must be a string")
    try:
        dt = np.dtype(name)
    except TypeError:
        raise SerializeError(f"{where}: unknown dtype {name!r}") from None
    _expect(not dt.hasobject and dt.name == name, f"{where}: dtype {name!r} is not a plain numpy dtype name")
    return dt


def _keys(rec: Mapping, want: set[str], where: str, strict: bool = True) -> None:
    missing = sorted(want - set(rec))
    if missing:
        raise SerializeError(f"{where}: missing field(s) {', '.join(missing)}")
    extra = sorted(map(str, set(rec) - want)) if strict else []
    if extra:
        raise SerializeError(f"{where}: unknown field(s) {', '.join(k if len(k) <= 40 else k[:37] + '...' for k in extra[:5])}")


def _list(j: Any, where: str) -> list:
    _expect(isinstance(j, list), f"{where}: expected an array, got {_short(j)}")
    return j


def _expect(cond: bool, msg: str) -> None:
    if not cond:
        raise SerializeError(msg)


def _short(j: Any) -> str:
    s = json.dumps(j, default=repr)
    return s if len(s) <= 60 else s[:57] + "..."


# --------------------------------------------------------------------------- hashing
def unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """``json.loads(..., object_pairs_hook=unique_keys)``: an object naming a key twice is refused.
    JSON parsers disagree on which value wins (first or last), so two readers of one document
    could see two documents; and in a config file the second silently overrides the first."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k[:40]!r} appears twice in one object")
        out[k] = v
    return out


def canonical_json(doc: Any) -> bytes:
    """Sorted keys, no whitespace, ASCII, no NaN: the bytes that hashes are taken over."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def little_endian(arr: np.ndarray) -> np.ndarray:
    """The array with a little-endian (or byte-order-free) dtype, as the format stores every array."""
    arr = np.asarray(arr)
    le = arr.dtype.newbyteorder("<")
    return arr if arr.dtype == le and arr.dtype.byteorder != ">" else arr.astype(le)


def array_digest(arr: np.ndarray) -> str:
    """sha256 over dtype, shape and C-order little-endian bytes, so equal arrays agree whatever
    their memory layout or byte order."""
    arr = little_endian(arr)
    h = hashlib.sha256()
    h.update(f"{arr.dtype.str}|{','.join(map(str, arr.shape))}|".encode("ascii"))
    h.update(arr.tobytes(order="C"))
    return h.hexdigest()


def graph_hash(graph: Graph) -> str:
    """sha256 (hex) of the canonical JSON of the structure with every param replaced by its digest:
    identifies a source model independent of archive layout and zip compression."""
    doc, params = graph_to_json(graph)
    return hashlib.sha256(canonical_json({"graph": doc,
                                          "params": {k: array_digest(a) for k, a in params.items()}})
                          ).hexdigest()
