"""The packed module: one zip archive holding a partitioned model, readable from any language.

Members (specified in docs/FORMAT.md): ``manifest.json``, ``graph.json`` (the host graph),
``external/<symbol>.json`` (one per external function: its body, schedules, buffer plan, codegen
options) and ``params.npz`` (every constant, no pickle). Writing is deterministic: the same inputs
give the same bytes. Reading treats the file as untrusted: it never unpickles, checks every member
name and size before reading it, verifies every sha256, and reports each fault as one
``PackedFormatError`` line naming the member.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import stat
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .ir import Function, Graph
from .ops import infer_types
from .serialize import (SerializeError, function_from_json, function_to_json, graph_from_json,
                        graph_to_json, little_endian, unique_keys)

FORMAT_VERSION = "1.0"
PRODUCER = "accel-tune"
MANIFEST = "manifest.json"
GRAPH = "graph.json"
PARAMS = "params.npz"
EXTERNAL_DIR = "external/"
# The fields of external/<symbol>.json in format 1.0 (``predicted`` is accel-tune's optional one).
EXTERNAL_FIELDS = ("symbol", "function", "schedules", "buffer_plan", "codegen", "predicted")
DEFAULT_MAX_MEMBER_BYTES = 1 << 30   # 1 GiB uncompressed
DEFAULT_MAX_TOTAL_BYTES = 2 << 30    # 2 GiB uncompressed, all members (and all arrays) together
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)   # fixed timestamps keep archives byte-identical across runs
_SYMBOL = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


class PackedFormatError(ValueError):
    """A packed module that cannot be written or read; the message is one line naming the member."""


@dataclass(frozen=True)
class PackedModule:
    """What ``read_packed`` returns. ``host_graph.functions`` has every external function attached,
    so ``partition.interpret(host_graph, inputs)`` runs the whole model. ``externals`` maps each
    symbol to its ``external/<symbol>.json`` document as read (its ``function`` still in JSON form);
    ``params`` is every array in params.npz by key."""
    manifest: dict
    host_graph: Graph
    externals: dict[str, dict]
    params: dict[str, np.ndarray]

    @property
    def format_version(self) -> str:
        return self.manifest["format_version"]

    def function(self, symbol: str) -> Function:
        return self.host_graph.functions[symbol]


# =========================================================================== writing
def write_packed(path: str | os.PathLike, *, manifest_fields: Mapping[str, Any], host_graph: Graph,
                 externals: Mapping[str, Mapping[str, Any]],
                 params: Mapping[str, np.ndarray] | None = None,
                 producer_version: str | None = None) -> dict:
    """Write the archive at ``path`` (atomically) and return the manifest written.

    ``manifest_fields``: ``model`` ({name, source_graph_hash}), ``hardware`` (object),
    ``objective`` (str), ``predicted`` ({latency_s, energy_j, functions: {symbol: {latency_s,
    energy_j, ...}}}); other keys are copied through. ``externals``: symbol -> the document for
    ``external/<symbol>.json`` (``schedules``, ``buffer_plan``, ``codegen``, ...). Its ``function``
    may be a ``Function`` (serialised here), its JSON form (constants then in ``params``), or left
    out, when ``host_graph.functions[symbol]`` is used. External functions are stored only in their
    own member; graph.json's ``functions`` list refers to them by member name.
    """
    params = dict(params or {})
    for sym in externals:
        external_member(sym)
    fields = _check_manifest_fields(manifest_fields, externals)

    given = {s: e["function"] for s, e in externals.items() if isinstance(e.get("function"), Function)}
    _check_calls(host_graph, frozenset(externals), given, {s: external_member(s) for s in externals})

    host_doc, host_params = graph_to_json(_without_functions(host_graph, externals))
    _merge_params(params, host_params, GRAPH)
    order = list(host_graph.functions)
    order += [s for s in externals if s not in host_graph.functions]
    host_doc["functions"] = _ordered_functions(host_doc["functions"], order, externals)

    ext_docs: dict[str, dict] = {}
    for sym, ext in externals.items():
        member = external_member(sym)
        doc = dict(ext)
        fn = doc.get("function", host_graph.functions.get(sym))
        if fn is None:
            raise PackedFormatError(f"{member}: external @{sym} has no function (not given and not in the host graph)")
        if isinstance(fn, Function):
            fdoc, fparams = function_to_json(fn, f"@{sym}/")  # the key graph_to_json gives it in place
            _merge_params(params, fparams, member)
            fn = fdoc
        doc = {"symbol": sym, "function": fn, "schedules": doc.get("schedules", {}),
               "buffer_plan": doc.get("buffer_plan", {}), "codegen": doc.get("codegen", {}),
               **{k: v for k, v in doc.items() if k not in ("symbol", "function")}}
        _check_external_doc(doc, sym, member)
        ext_docs[sym] = doc

    members: dict[str, bytes] = {GRAPH: _json_bytes(host_doc, GRAPH, compact=True)}
    for sym, doc in ext_docs.items():
        members[external_member(sym)] = _json_bytes(doc, external_member(sym), compact=True)
    _check_param_refs(params, host_doc, ext_docs)
    members[PARAMS] = _npz_bytes(params)

    manifest = {"format_version": FORMAT_VERSION, "producer": PRODUCER,
                "producer_version": producer_version or _own_version(),
                **fields,
                "externals": {sym: external_member(sym) for sym in externals},
                "members": {name: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
                            for name, data in members.items()}}
    manifest_bytes = _json_bytes(manifest, MANIFEST)

    _write_atomically(os.fspath(path), [(MANIFEST, manifest_bytes), *members.items()])
    return manifest


def _write_atomically(path: str, members: list[tuple[str, bytes]]) -> None:
    """Write the zip beside ``path`` and rename it into place: a reader never sees half an archive."""
    def write(f):
        with zipfile.ZipFile(f, "w") as zf:
            for name, data in members:
                info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
                # Weights barely deflate (about 7% on float32) and stored arrays can be memory-mapped
                # straight from the archive, so params.npz is stored; the JSON members compress well.
                info.compress_type = zipfile.ZIP_STORED if name == PARAMS else zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, data)
    write_atomically(path, write, "the archive", ".zip", PackedFormatError)


def write_atomically(path: str, write, what: str, suffix: str, error: type = ValueError) -> None:
    """``write(f)`` into a temporary file beside ``path``, renamed into place: nothing half-written
    is ever at ``path``. A fault is one ``error`` naming ``path`` (never the temporary file); the
    file is readable by all (0644), not mkstemp's owner-only 0600 (the umask cannot be read without
    changing it, which is not thread-safe)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".partial-", suffix=suffix, dir=os.path.dirname(os.path.abspath(path)))
    except OSError as e:
        raise error(f"{path}: cannot write {what}: {e.strerror or e}") from None
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise error(f"{path}: cannot write {what}: {e.strerror or e}") from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def external_member(symbol: str) -> str:
    if not isinstance(symbol, str) or not _SYMBOL.match(symbol) or ".." in symbol:
        raise PackedFormatError(f"external symbol {symbol!r} is not a safe member name "
                                f"(letters, digits, '_', '.', '-'; no '..')")
    return f"{EXTERNAL_DIR}{symbol}.json"


def _check_calls(host: Graph, externals: frozenset, given: Mapping[str, Function],
                 members: Mapping[str, str]) -> None:
    """Every call must resolve in its scope (the graph's own functions, its enclosing graphs', or
    an external symbol), as the interpreter resolves it; a dangling callee is a broken plan.
    Used when writing (``externals``: symbols given separately) and when reading (externals
    attached to ``host.functions``); ``members`` maps external symbols to their members."""
    def walk(g: Graph, scope: frozenset, member: str, where: str) -> None:
        scope = scope | frozenset(g.functions)
        for n in g.nodes:
            callee = n.attrs.get("callee")
            if n.op == "call" and callee not in scope:
                hint = f" (no {external_member(callee)})" if isinstance(callee, str) and _SYMBOL.match(callee) else ""
                raise PackedFormatError(f"{member}: {where} node {n.name!r} calls @{callee}, which is neither "
                                        f"a function in scope nor an external{hint}")
            for sg in n.subgraphs():
                walk(sg, scope, member, f"{where} > {n.name}")
        for sym, fn in g.functions.items():
            walk(fn.graph, scope, members.get(sym, member) if g is host else member, f"@{sym}")
    walk(host, externals, GRAPH, f"graph {host.name!r}")
    for sym, fn in given.items():
        walk(fn.graph, externals | frozenset(host.functions), members[sym], f"@{sym}")


def _without_functions(g: Graph, drop: Mapping[str, Any]) -> Graph:
    """A shallow view of ``g`` minus the external functions (they go to their own members)."""
    view = Graph(g.name)
    view.inputs, view.outputs, view.nodes, view.constants = g.inputs, g.outputs, g.nodes, g.constants
    view.meta = g.meta
    view.functions = {s: f for s, f in g.functions.items() if s not in drop}
    return view


def _ordered_functions(local: list[dict], order: list[str], externals: Mapping) -> list[dict]:
    by_sym = {f["symbol"]: f for f in local}
    return [{"symbol": s, "external": external_member(s)} if s in externals else by_sym[s] for s in order]


def _check_manifest_fields(fields: Mapping[str, Any], externals: Mapping) -> dict:
    reserved = {"format_version", "producer", "producer_version", "externals", "members"}
    clash = sorted(reserved & set(fields))
    _w(not clash, f"{MANIFEST}: field(s) {', '.join(clash)} are written by write_packed, not given")
    _check_manifest_content(fields, externals)
    return dict(fields)


def _check_manifest_content(fields: Mapping[str, Any], externals: Mapping) -> None:
    """The provenance and cost fields, checked when writing and again when reading."""
    where = MANIFEST
    for k in ("model", "hardware", "objective", "predicted"):
        _w(k in fields, f"{where}: manifest_fields needs '{k}'")
    model = fields["model"]
    _w(isinstance(model, Mapping) and isinstance(model.get("name"), str)
       and isinstance(model.get("source_graph_hash"), str),
       f"{where}: model must be {{name: str, source_graph_hash: str}}")
    _w(isinstance(fields["hardware"], Mapping), f"{where}: hardware must be an object")
    _w(isinstance(fields["objective"], str), f"{where}: objective must be a string")
    pred = fields["predicted"]
    _w(isinstance(pred, Mapping), f"{where}: predicted must be an object")
    for k in ("latency_s", "energy_j"):
        _w(_finite(pred.get(k)) and pred[k] >= 0, f"{where}: predicted.{k} must be a finite number >= 0")
    per_fn = pred.get("functions")
    _w(isinstance(per_fn, Mapping), f"{where}: predicted.functions must be an object (symbol -> costs)")
    missing, extra = sorted(set(externals) - set(per_fn)), sorted(set(per_fn) - set(externals))
    _w(not missing, f"{where}: predicted.functions lacks external(s) {', '.join(missing)}")
    _w(not extra, f"{where}: predicted.functions names unknown external(s) {', '.join(extra)}")
    for sym, c in per_fn.items():
        _w(isinstance(c, Mapping) and all(_finite(c.get(k)) and c[k] >= 0 for k in ("latency_s", "energy_j")),
           f"{where}: predicted.functions.{sym} needs finite latency_s and energy_j >= 0")


def _check_external_doc(doc: dict, sym: str, member: str, kernels: set[str] | None = None) -> None:
    """``kernels``: node names of the function body, when the body is already decoded."""
    _w(isinstance(doc["function"], Mapping), f"{member}: function must be a Function or its JSON object")
    for k in ("schedules", "buffer_plan", "codegen"):
        _w(isinstance(doc.get(k), Mapping), f"{member}: {k} must be an object")
    if kernels is None:
        kernels = {n.get("name") for n in doc["function"].get("graph", {}).get("nodes", [])}
    unknown = sorted(set(doc["schedules"]) - kernels)
    _w(not unknown, f"{member}: schedules name kernel(s) {', '.join(unknown)} that are not nodes of @{sym}")


def _merge_params(into: dict, new: Mapping[str, np.ndarray], member: str) -> None:
    for k, a in new.items():
        _w(k not in into, f"{member}: param key {k!r} is used twice")
        into[k] = a


def _param_refs(graph_doc: Mapping) -> set[str]:
    """Every ``param`` key a graph document uses: its constants, its functions' and its If/Loop
    bodies' (found by walking the schema, not by guessing at key names)."""
    refs = {c["param"] for c in graph_doc.get("constants", [])}
    for f in graph_doc.get("functions", []):
        if "graph" in f:
            refs |= _param_refs(f["graph"])
    for n in graph_doc.get("nodes", []):
        stack = list(n.get("attrs", {}).values())
        while stack:
            v = stack.pop()
            if isinstance(v, list):
                stack.extend(v)
            elif isinstance(v, dict) and "$graph" in v:
                refs |= _param_refs(v["$graph"])
            elif isinstance(v, dict) and "$list" in v:
                stack.extend(v["$list"])
    return refs


def _check_param_refs(params: Mapping, host_doc: dict, ext_docs: Mapping[str, dict]) -> None:
    refs = _param_refs(host_doc) | set().union(*(_param_refs(d["function"]["graph"]) for d in ext_docs.values()))
    missing = sorted(refs - set(params))
    _w(not missing, f"{PARAMS}: missing array(s) referenced by the graphs: {', '.join(missing[:5])}")
    unused = sorted(set(params) - refs)
    _w(not unused, f"{PARAMS}: array(s) not referenced by any graph: {', '.join(unused[:5])}")


def _json_bytes(doc: Any, member: str, compact: bool = False) -> bytes:
    """Graphs are written compact (a BERT graph is megabytes); the manifest indented for people."""
    try:
        return json.dumps(doc, indent=None if compact else 1, separators=(",", ":") if compact else None,
                          ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise PackedFormatError(f"{member}: not JSON-serialisable: {e}") from None


def _npz_bytes(params: Mapping[str, np.ndarray]) -> bytes:
    """The same layout np.savez writes (one ``<key>.npy`` per array), built here so that pickle is
    refused at write time too and timestamps are fixed."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for key in sorted(params):
            arr = little_endian(params[key])
            _w(not arr.dtype.hasobject, f"{PARAMS}: array {key!r} has dtype object (would need pickle)")
            info = zipfile.ZipInfo(key + ".npy", date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_STORED
            with zf.open(info, "w", force_zip64=True) as f:
                # C order for readers that skip fortran_order; not ascontiguousarray, which makes 0-d 1-d
                c_arr = arr if arr.flags.c_contiguous else np.array(arr, order="C")
                np.lib.format.write_array(f, c_arr, allow_pickle=False)
    return buf.getvalue()


def _own_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version
        return version("accel-tune")
    except PackageNotFoundError:
        return "unknown"


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _w(cond: bool, msg: str) -> None:
    if not cond:
        raise PackedFormatError(msg)


# =========================================================================== reading
def read_packed(path: str | os.PathLike, *, max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
                max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES) -> PackedModule:
    """Read and verify an archive. Any fault raises PackedFormatError with one line naming it."""
    path = os.fspath(path)
    label = os.path.basename(path)
    try:
        # Only a regular file: /dev/zero never ends and a FIFO blocks the open until a writer comes.
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise PackedFormatError(f"{path}: not a regular file (a directory, device or pipe)")
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise PackedFormatError(f"{path}: no such file") from None
    except PackedFormatError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, ValueError) as e:
        # NotImplementedError: a directory entry claiming a zip version or feature zipfile lacks
        raise PackedFormatError(f"{label}: not a readable zip archive (truncated or corrupt: {e})") from None
    with zf:
        infos = _check_directory(zf, label, max_member_bytes, max_total_bytes)
        manifest = _json_member(zf, infos, MANIFEST, label, max_member_bytes)
        _check_manifest(manifest)
        listed = manifest["members"]
        unlisted = sorted(set(infos) - set(listed) - {MANIFEST})
        _r(not unlisted, f"{unlisted[0] if unlisted else ''}: member is not listed in manifest.json")
        # Fields and members this reader does not know are minor-version additions only in an
        # archive of a newer minor version; in any other archive they are faults (a typo, a
        # corruption, a forgery), refused before they are read.
        strict = parse_version(manifest["format_version"])[1] <= parse_version(FORMAT_VERSION)[1]
        unknown = sorted(set(listed) - {GRAPH, PARAMS, *manifest["externals"].values()})
        _r(not (strict and unknown), f"{unknown[0] if unknown else ''}: member unknown to format "
                                     f"{manifest['format_version']} (not graph.json, params.npz or an external)")
        raw: dict[str, bytes] = {}
        for name, rec in listed.items():
            _r(name in infos, f"{name}: member listed in manifest.json is missing from the archive")
            # Before inflating anything: a member whose zip header disagrees with the manifest is
            # refused unread (a deflate bomb listed as 4 KiB is never expanded).
            _r(infos[name].file_size == rec["size"],
               f"{name}: size {infos[name].file_size} does not match manifest ({rec['size']})")
            data = _read_member(zf, infos[name], label, max_member_bytes)
            _r(len(data) == rec["size"], f"{name}: size {len(data)} does not match manifest ({rec['size']})")
            digest = hashlib.sha256(data).hexdigest()
            _r(digest == rec["sha256"], f"{name}: sha256 mismatch (archive altered or corrupt)")
            raw[name] = data
        for name in (GRAPH, PARAMS, *manifest["externals"].values()):
            _r(name in raw, f"{name}: required member is not listed in manifest.json")

        params = load_npz(raw[PARAMS], PARAMS, max_member_bytes, max_total_bytes)
        host_doc = _parse_json(raw[GRAPH], GRAPH)
        ext_docs = {sym: _parse_json(raw[m], m) for sym, m in manifest["externals"].items()}

    try:
        return _assemble(manifest, host_doc, ext_docs, params, strict, max_member_bytes)
    except PackedFormatError:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError) as e:
        # Every field is checked where it is used; this keeps a shape of malformed document that
        # slipped past those checks a one-line error too, never a traceback.
        raise PackedFormatError(f"{label}: malformed graph document ({type(e).__name__}: {e})") from None


def _check_directory(zf: zipfile.ZipFile, label: str, max_member: int, max_total: int) -> dict:
    infos: dict[str, zipfile.ZipInfo] = {}
    total = 0
    try:
        entries = zf.infolist()
    except (zipfile.BadZipFile, OSError) as e:
        raise PackedFormatError(f"{label}: corrupt zip directory: {e}") from None
    for info in entries:
        name = info.filename
        _r(_safe_name(name), f"{name}: unsafe member name (absolute path, drive, backslash or '..')")
        _r(name not in infos, f"{name}: member appears twice in the archive")
        _r(info.file_size <= max_member,
           f"{name}: member is {info.file_size} bytes uncompressed, over the {max_member}-byte cap")
        total += info.file_size
        _r(total <= max_total, f"{name}: archive exceeds the {max_total}-byte cap on total uncompressed size")
        infos[name] = info
    return infos


def _safe_name(name: str) -> bool:
    if not name or name.startswith(("/", "\\")) or "\\" in name or "\x00" in name:
        return False
    if re.match(r"^[A-Za-z]:", name):
        return False
    return all(part not in ("..", ".") for part in name.split("/"))


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, label: str, max_member: int) -> bytes:
    """Read at most the header size (+1 to notice a lie) so a forged header cannot inflate memory."""
    name = info.filename
    try:
        with zf.open(info) as f:
            data = f.read(min(info.file_size, max_member) + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
        raise PackedFormatError(f"{name}: cannot read member (truncated or corrupt: {e})") from None
    except NotImplementedError as e:
        raise PackedFormatError(f"{name}: unsupported zip feature: {e}") from None
    except RuntimeError as e:  # encrypted members
        raise PackedFormatError(f"{name}: cannot read member: {e}") from None
    _r(len(data) == info.file_size, f"{name}: member size does not match its zip header ({info.file_size} bytes)")
    return data


def _json_member(zf, infos, name, label, max_member) -> Any:
    _r(name in infos, f"{name}: required member is missing from the archive")
    return _parse_json(_read_member(zf, infos[name], label, max_member), name)


def _parse_json(data: bytes, member: str) -> Any:
    def no_constants(c):
        raise ValueError(f"non-standard JSON constant {c}")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=no_constants, object_pairs_hook=unique_keys)
    except UnicodeDecodeError as e:
        raise PackedFormatError(f"{member}: not UTF-8 text: {e}") from None
    except ValueError as e:
        raise PackedFormatError(f"{member}: invalid JSON: {e}") from None
    except RecursionError:
        raise PackedFormatError(f"{member}: JSON nested too deeply") from None


def parse_version(v: Any) -> tuple[int, int]:
    if not isinstance(v, str) or not re.fullmatch(r"(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})", v):
        raise PackedFormatError(f"{MANIFEST}: format_version must be 'MAJOR.MINOR', got {v!r}")
    major, minor = v.split(".")
    return int(major), int(minor)


def _check_manifest(m: Any) -> None:
    _r(isinstance(m, dict), f"{MANIFEST}: expected a JSON object")
    _r("format_version" in m, f"{MANIFEST}: missing format_version")
    major, _ = parse_version(m["format_version"])
    ours = parse_version(FORMAT_VERSION)[0]
    _r(major <= ours, f"{MANIFEST}: format version {m['format_version']} is newer than this reader "
                      f"supports ({ours}.x); upgrade accel-tune")
    _r(major == ours, f"{MANIFEST}: format version {m['format_version']} is older than this reader supports ({ours}.x)")
    for k in ("producer", "producer_version"):
        _r(isinstance(m.get(k), str), f"{MANIFEST}: {k} must be a string")
    members = m.get("members")
    _r(isinstance(members, dict), f"{MANIFEST}: members must be an object")
    for name, rec in members.items():
        _r(isinstance(rec, dict) and isinstance(rec.get("sha256"), str) and isinstance(rec.get("size"), int),
           f"{MANIFEST}: members.{name} needs sha256 (hex string) and size (integer)")
        _r(_safe_name(name), f"{name}: unsafe member name listed in manifest.json")
    ext = m.get("externals")
    _r(isinstance(ext, dict), f"{MANIFEST}: externals must be an object (symbol -> member)")
    for sym, member in ext.items():
        try:
            want = external_member(sym)
        except PackedFormatError as e:
            raise PackedFormatError(f"{MANIFEST}: {e}") from None
        _r(member == want, f"{MANIFEST}: external @{sym} must live in {want}, not {member!r}")
    _check_manifest_content(m, ext)


def load_npz(data: bytes, label: str = PARAMS, max_member: int = DEFAULT_MAX_MEMBER_BYTES,
             max_total: int = DEFAULT_MAX_TOTAL_BYTES) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` (params.npz, or a file of run inputs, named ``label`` in messages),
    read as untrusted input: the name and size rules of the archive apply to its entries, every
    ``.npy`` header is checked against its entry's size before anything is allocated, and nothing
    is unpickled."""
    try:
        inner = zipfile.ZipFile(io.BytesIO(data))
        infos = inner.infolist()
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, ValueError) as e:
        raise PackedFormatError(f"{label}: not a valid npz (zip) file: {e}") from None
    seen, total = set(), 0
    for info in infos:
        n = info.filename
        _r(n.endswith(".npy") and not n.startswith(("/", "\\")) and "\x00" not in n,
           f"{label}: entry {n!r} is not a .npy array")
        _r(n not in seen, f"{label}: entry {n!r} appears twice")
        seen.add(n)
        _r(info.file_size <= max_member, f"{label}: array {n[:-4]!r} is {info.file_size} bytes, "
                                         f"over the {max_member}-byte cap")
        total += info.file_size
        _r(total <= max_total, f"{label}: arrays exceed the {max_total}-byte cap on total size")
    params: dict[str, np.ndarray] = {}
    with inner:
        for info in infos:
            key = info.filename[:-4]
            try:
                with inner.open(info) as f:
                    params[key] = _read_npy(f, key, info.file_size, label)
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
                raise PackedFormatError(f"{label}: array {key!r} cannot be read: {e}") from None
            except (NotImplementedError, RuntimeError) as e:  # compression method, encryption
                raise PackedFormatError(f"{label}: array {key!r} cannot be read: {e}") from None
    return params


def _read_npy(f, key: str, entry_bytes: int, label: str) -> np.ndarray:
    """One ``.npy`` entry, its header checked against the entry's real size before any data is
    allocated: a header claiming (2**31, 4) over 64 bytes is refused here, not attempted."""
    where = f"{label}: array {key!r}"
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        # 3.0 differs from 2.0 only by a UTF-8 header, which only structured dtypes need (refused below).
        read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = read_header(f)
    except ValueError as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else "bad header"
        if "pickle" in msg.lower() or "object" in msg.lower():
            raise PackedFormatError(f"{where} is an object array stored with pickle; refusing to load it") from None
        raise PackedFormatError(f"{where} is not a valid .npy: {msg}") from None
    if dtype.hasobject:
        raise PackedFormatError(f"{where} is an object array stored with pickle; refusing to load it")
    if dtype.kind not in "biufc" or dtype.fields is not None or dtype.subdtype is not None:
        raise PackedFormatError(f"{where} has dtype {dtype.str!r}; arrays are bool, integer, float or complex")
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise PackedFormatError(f"{where}: header declares shape {shape}; dimensions are non-negative integers")
    header_bytes = f.tell()
    want = math.prod(shape) * dtype.itemsize  # exact integers: no overflow for any declared shape
    have = entry_bytes - header_bytes
    if want != have:
        raise PackedFormatError(f"{where}: header declares {dtype.name}[{','.join(map(str, shape))}] "
                                f"({want:,} bytes) but the entry holds {max(have, 0):,} bytes of data")
    buf = bytearray(want)
    if f.readinto(memoryview(buf)) != want:
        raise PackedFormatError(f"{where}: data is shorter than its header declares")
    arr = np.frombuffer(buf, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return little_endian(arr)


def _check_types(g: Graph, scope: Mapping[str, Function], member: str, members: Mapping[str, str],
                 max_bytes: int, where: str = "") -> None:
    """Every node's declared output types must be what its op infers from its inputs, and no
    tensor may exceed ``max_bytes``. Types are stored so that loading needs no inference, but the
    simulator costs the declared shapes: a declared shape that the op would not produce would
    cost a different model than the one that runs, silently."""
    where = where or f"graph {g.name!r}"
    scope = {**scope, **g.functions}
    for sym, fn in g.functions.items():  # callees first: a fault is named where it is, not at a call
        _check_types(fn.graph, scope, members.get(sym, member), members, max_bytes, f"@{sym}")
    for v in g.inputs:
        _check_tensor(v, member, f"{where} input", max_bytes)
    for n in g.nodes:
        nwhere = f"{member}: {where} node {n.name!r} ({n.op})"
        try:
            want = infer_types(n.op, [v.type for v in n.inputs], n.attrs, scope, [v.data for v in n.inputs])
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, ZeroDivisionError,
                OverflowError, RecursionError) as e:
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise PackedFormatError(f"{nwhere}: {msg}") from None
        got = [o.type for o in n.outputs]
        _r(got == list(want), f"{nwhere} declares output(s) {', '.join(map(str, got))}, but its inputs give "
                              f"{', '.join(map(str, want))}")
        for o in n.outputs:
            _check_tensor(o, member, f"{where} node {n.name!r} output", max_bytes)
        for sg in n.subgraphs():
            _check_types(sg, scope, member, members, max_bytes, f"{where} > {n.name}")


def _check_tensor(v, member: str, where: str, max_bytes: int) -> None:
    t = v.type
    nbytes = math.prod(t.shape) * np.dtype(t.dtype).itemsize
    _r(nbytes <= max_bytes, f"{member}: {where} {v.name!r} is {t} ({nbytes:,} bytes), over the "
                            f"{max_bytes:,}-byte cap on one tensor")


def _assemble(manifest: dict, host_doc: Any, ext_docs: dict[str, Any],
              params: dict[str, np.ndarray], strict: bool, max_tensor_bytes: int) -> PackedModule:
    _r(isinstance(host_doc, dict), f"{GRAPH}: expected a JSON object")
    _r(isinstance(host_doc.get("functions"), list)
       and all(isinstance(f, dict) and isinstance(f.get("symbol"), str) for f in host_doc["functions"]),
       f"{GRAPH}: functions must be an array of objects, each with a string symbol")
    local, external_refs = [], []
    for f in host_doc.get("functions", []):
        if isinstance(f, dict) and "external" in f:
            sym = f.get("symbol")
            extra = sorted(set(f) - {"symbol", "external"}) if strict else []
            _r(not extra, f"{GRAPH}: function @{sym} reference has unknown field(s) {', '.join(extra[:5])}")
            _r(sym in ext_docs, f"{GRAPH}: function @{sym} refers to {f['external']!r}, "
                                f"which manifest.json does not list as an external")
            _r(f["external"] == manifest["externals"][sym],
               f"{GRAPH}: function @{sym} refers to {f['external']!r}, manifest says {manifest['externals'][sym]!r}")
            external_refs.append(sym)
        else:
            local.append(f)
    missing = sorted(set(ext_docs) - set(external_refs))
    _r(not missing, f"{GRAPH}: external(s) {', '.join(missing)} listed in manifest.json are not referenced")
    try:
        host = graph_from_json({**host_doc, "functions": local}, params, strict=strict)
    except SerializeError as e:
        raise PackedFormatError(f"{GRAPH}: {e}") from None

    fns: dict[str, Function] = {}
    for sym, doc in ext_docs.items():
        member = manifest["externals"][sym]
        _r(isinstance(doc, dict) and "function" in doc, f"{member}: missing field 'function'")
        _r(doc.get("symbol") == sym, f"{member}: symbol field {doc.get('symbol')!r} does not match @{sym}")
        extra = sorted(set(doc) - set(EXTERNAL_FIELDS)) if strict else []
        _r(not extra, f"{member}: unknown field(s) {', '.join(extra[:5])} (known: {', '.join(EXTERNAL_FIELDS)})")
        try:
            fns[sym] = function_from_json(doc["function"], params, f"@{sym}", strict=strict)
        except SerializeError as e:
            raise PackedFormatError(f"{member}: {e}") from None
        _check_external_doc(doc, sym, member, {n.name for n in fns[sym].graph.nodes})
    # Rebuild functions in the written order so the host graph prints as it did before export.
    merged = dict(host.functions)
    host.functions = {}
    for f in host_doc.get("functions", []):
        sym = f.get("symbol")
        host.functions[sym] = fns[sym] if "external" in f else merged[sym]
    _check_calls(host, frozenset(), {}, manifest["externals"])
    _check_types(host, {}, GRAPH, manifest["externals"], max_tensor_bytes)
    _check_param_refs(params, host_doc, ext_docs)
    return PackedModule(manifest=manifest, host_graph=host, externals=ext_docs, params=params)


def _r(cond: bool, msg: str) -> None:
    if not cond:
        raise PackedFormatError(msg)
