"""A standalone reader for accel-tune packed modules, written only against docs/FORMAT.md.

It imports nothing of accel-tune: zipfile, zlib, json, hashlib and numpy (plus argparse, io, math, os
and sys for the command line), to show that a vendor's runtime can consume the archive on its own.

    python experiments/read_packed.py PLAN.zip [--json]

Applies the reader rules of FORMAT.md section 8: checks member names and sizes from the zip
directory, verifies every member's sha256, parses JSON strictly, checks every reference (calls
resolve to a function in scope or an external member; every external is referenced; every
constant's array is present with its declared dtype and shape; every array is referenced),
refuses unknown fields unless the archive's minor version is newer than this reader's, and loads
each array only after its .npy header agrees with the entry's size (never unpickling). Then it
lists the external functions (symbol, ops, kernels, schedules) and the params. Exit status 0 when
the archive verifies, 1 (with one line on stderr) when it does not.
"""
import argparse
import hashlib
import io
import json
import math
import os
import sys
import zipfile
import zlib

import numpy as np

READER_VERSION = (1, 0)
MAX_MEMBER_BYTES = 1 << 30
MAX_TOTAL_BYTES = 2 << 30
GRAPH_FIELDS = {"name", "inputs", "constants", "functions", "nodes", "outputs", "meta"}
NODE_FIELDS = {"name", "op", "inputs", "outputs", "attrs", "meta"}
SPEC_FIELDS = {"name", "shape", "dtype"}
EXTERNAL_FIELDS = {"symbol", "function", "schedules", "buffer_plan", "codegen"}
EXTERNAL_OPTIONAL = {"predicted"}  # accel-tune's own addition (FORMAT.md section 4)
ARRAY_KINDS = "biufc"  # bool, signed and unsigned integers, floats, complex


class ArchiveError(Exception):
    pass


def _safe(name):
    parts = name.split("/")
    return (name and not name.startswith("/") and "\\" not in name and ":" not in parts[0]
            and ".." not in parts and "." not in parts and "\x00" not in name)


def read_members(path):
    """Check names and sizes from the zip directory, then read and hash every member."""
    try:
        # a regular file only: /dev/zero never ends, a FIFO blocks the open
        expect(os.path.isfile(path), f"{path}: not a regular file")
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, ValueError) as e:
        raise ArchiveError(f"{path}: not a readable zip archive ({e})")
    with zf:
        infos = zf.infolist()
        total = 0
        for info in infos:
            if not _safe(info.filename):
                raise ArchiveError(f"{info.filename}: unsafe member name")
            if info.file_size > MAX_MEMBER_BYTES:
                raise ArchiveError(f"{info.filename}: member too large ({info.file_size} bytes)")
            total += info.file_size
        if total > MAX_TOTAL_BYTES:
            raise ArchiveError(f"{path}: archive too large ({total} bytes uncompressed)")
        if len({i.filename for i in infos}) != len(infos):
            raise ArchiveError(f"{path}: duplicate member names")
        data = {}
        for info in infos:
            try:
                with zf.open(info) as f:
                    data[info.filename] = f.read(info.file_size + 1)
            except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError, RuntimeError) as e:
                raise ArchiveError(f"{info.filename}: cannot read ({e})")
            if len(data[info.filename]) != info.file_size:
                raise ArchiveError(f"{info.filename}: size differs from the zip header")
    return data


def parse_json(data, member):
    def no_constants(c):
        raise ValueError(f"non-standard JSON constant {c}")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=no_constants, object_pairs_hook=unique_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ArchiveError(f"{member}: invalid JSON ({type(e).__name__})")


def unique_keys(pairs):
    """Refuse an object that names a key twice: parsers disagree on which value wins."""
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} appears twice")
        out[k] = v
    return out


def expect(cond, msg):
    if not cond:
        raise ArchiveError(msg)


def verify(data):
    expect("manifest.json" in data, "manifest.json: missing")
    manifest = parse_json(data["manifest.json"], "manifest.json")
    expect(isinstance(manifest, dict), "manifest.json: not an object")
    v = str(manifest.get("format_version", ""))
    expect(v.count(".") == 1 and all(p.isdigit() and p.isascii() and (p == "0" or not p.startswith("0"))
                                     and len(p) <= 6 for p in v.split(".")),
           f"manifest.json: bad format_version {v!r}")
    version = tuple(int(p) for p in v.split("."))
    expect(version[0] == READER_VERSION[0], f"manifest.json: format version {v} is not readable by this reader "
                                            f"({READER_VERSION[0]}.x)")
    listed = manifest["members"]
    expect(isinstance(listed, dict), "manifest.json: members must be an object")
    for name in data:
        expect(name == "manifest.json" or name in listed, f"{name}: not listed in manifest.json")
    for name, rec in listed.items():
        expect(name in data, f"{name}: missing")
        expect(isinstance(rec, dict) and rec.get("size") == len(data[name]), f"{name}: size mismatch")
        expect(hashlib.sha256(data[name]).hexdigest() == rec.get("sha256"), f"{name}: sha256 mismatch")
    for name in ("graph.json", "params.npz"):
        expect(name in listed, f"{name}: missing")
    check_manifest_content(manifest)
    strict = version[1] <= READER_VERSION[1]
    known = {"graph.json", "params.npz", *manifest["externals"].values()}
    unknown = sorted(set(listed) - known)
    expect(not (strict and unknown), f"{unknown[0] if unknown else ''}: member unknown to format {v}")
    return manifest, strict


def is_number(x):
    """A finite number >= 0 (latencies and energies)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def check_manifest_content(m):
    """The provenance and cost fields this reader prints (FORMAT.md section 2)."""
    for k in ("producer", "producer_version", "objective"):
        expect(isinstance(m.get(k), str), f"manifest.json: {k} must be a string")
    model = m.get("model")
    expect(isinstance(model, dict) and isinstance(model.get("name"), str)
           and isinstance(model.get("source_graph_hash"), str), "manifest.json: model must be {name, source_graph_hash}")
    pred = m.get("predicted")
    expect(isinstance(pred, dict) and is_number(pred.get("latency_s")) and is_number(pred.get("energy_j")),
           "manifest.json: predicted.latency_s and energy_j must be finite numbers")
    fns, ext = pred.get("functions"), m.get("externals")
    expect(isinstance(fns, dict) and isinstance(ext, dict) and set(fns) == set(ext),
           "manifest.json: predicted.functions must have one entry per external")
    for sym, c in fns.items():
        expect(isinstance(c, dict) and is_number(c.get("latency_s")) and is_number(c.get("energy_j")),
               f"manifest.json: predicted.functions.{sym} needs finite latency_s and energy_j")


def read_npy(blob, key):
    """One .npy entry: the header must declare exactly the bytes that follow it, checked before
    any array is made (a header claiming 2**31 x 4 floats over 64 bytes allocates nothing)."""
    f = io.BytesIO(blob)
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = read(f)
    except ValueError as e:
        raise ArchiveError(f"params.npz: {key}: not a valid .npy header ({e})")
    expect(dtype.kind in ARRAY_KINDS and not dtype.hasobject and dtype.fields is None and dtype.subdtype is None,
           f"params.npz: {key}: dtype {dtype.str} is not bool, integer, float or complex")
    expect(all(isinstance(d, int) and d >= 0 for d in shape), f"params.npz: {key}: bad shape {shape}")
    want = math.prod(shape) * dtype.itemsize
    have = len(blob) - f.tell()
    expect(want == have, f"params.npz: {key}: header declares {want} bytes of data, the entry holds {have}")
    return np.frombuffer(blob, dtype=dtype, offset=f.tell()).reshape(shape, order="F" if fortran else "C")


def load_params(blob):
    try:
        inner = zipfile.ZipFile(io.BytesIO(blob))
        infos = inner.infolist()
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, ValueError) as e:
        raise ArchiveError(f"params.npz: not a valid npz ({e})")
    out = {}
    with inner:
        for info in infos:
            expect(info.filename.endswith(".npy"), f"params.npz: entry {info.filename!r} is not a .npy array")
            key = info.filename[:-4]
            expect(key not in out, f"params.npz: entry {info.filename!r} appears twice")
            expect(info.file_size <= MAX_MEMBER_BYTES, f"params.npz: {key}: too large")
            try:
                entry = inner.read(info)
            except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError, RuntimeError) as e:
                raise ArchiveError(f"params.npz: {key}: cannot read ({e})")
            out[key] = read_npy(entry, key)
    return out


def check_fields(obj, required, where, strict, optional=frozenset()):
    """Every required field present; with ``strict`` (an archive not newer than this reader), no
    field outside ``required`` and ``optional``."""
    expect(isinstance(obj, dict), f"{where}: not an object")
    missing = sorted(required - set(obj))
    expect(not missing, f"{where}: missing field(s) {', '.join(missing)}")
    extra = sorted(map(str, set(obj) - required - optional))
    expect(not (strict and extra), f"{where}: unknown field(s) {', '.join(extra[:5])}")


def check_graph(g, where, scope, params, refs, strict):
    """Schema, references and scoping of one Graph object (FORMAT.md section 3), recursively."""
    check_fields(g, GRAPH_FIELDS, where, strict)
    defined = set()
    for spec in g["inputs"]:
        check_fields(spec, SPEC_FIELDS, f"{where} input", strict)
        defined.add(spec["name"])
    for c in g["constants"]:
        check_fields(c, SPEC_FIELDS | {"param"}, f"{where} constant", strict)
        arr = params.get(c["param"])
        expect(arr is not None, f"{where}: constant {c['name']!r} refers to missing param {c['param']!r}")
        expect(arr.dtype.name == c["dtype"] and list(arr.shape) == c["shape"],
               f"{where}: constant {c['name']!r} is declared {c['dtype']}{c['shape']}, its param holds "
               f"{arr.dtype.name}{list(arr.shape)}")
        refs.add(c["param"])
        defined.add(c["name"])
    scope = scope | {f["symbol"] for f in g["functions"]}
    for f in g["functions"]:
        expect(isinstance(f, dict) and "graph" in f, f"{where}: function {f.get('symbol')!r} must be in-line here")
        check_fields(f, {"symbol", "attrs", "graph"}, f"{where} function @{f['symbol']}", strict)
        check_graph(f["graph"], f"{where} > @{f['symbol']}", scope, params, refs, strict)
    for n in g["nodes"]:
        check_fields(n, NODE_FIELDS, f"{where} node", strict)
        nw = f"{where} node {n['name']!r}"
        for a in n["inputs"]:
            expect(a in defined, f"{nw}: input {a!r} is not defined before this node")
        for spec in n["outputs"]:
            check_fields(spec, SPEC_FIELDS, f"{nw} output", strict)
            defined.add(spec["name"])
        if n["op"] == "call":
            callee = n["attrs"].get("callee")
            expect(callee in scope, f"{nw} calls @{callee}, which is neither a function in scope nor an external")
        for body in nested_graphs(n["attrs"]):
            check_graph(body, f"{nw} body", scope, params, refs, strict)
    for a in g["outputs"]:
        expect(a in defined, f"{where}: output {a!r} is not defined")


def nested_graphs(value):
    """The $graph values (If branches, Loop bodies) inside an encoded attribute value."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict) and "$graph" in v:
            yield v["$graph"]
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def kernels_of(function):
    """One kernel per node of the external function's body; a call to a composite lists the ops of
    the composite's body."""
    graph = function["graph"]
    local = {f["symbol"]: f for f in graph["functions"]}
    kernels = []
    for node in graph["nodes"]:
        k = {"name": node["name"], "op": node["op"], "composite": None, "ops": [node["op"]]}
        if node["op"] == "call":
            callee = node["attrs"].get("callee")
            fn = local.get(callee)
            if fn is not None:
                comp = fn["attrs"].get("Composite")
                k.update(composite=comp, callee=callee, ops=[n["op"] for n in fn["graph"]["nodes"]])
        kernels.append(k)
    return kernels


def summarise(path):
    data = read_members(path)
    manifest, strict = verify(data)
    params = load_params(data["params.npz"])
    host = parse_json(data["graph.json"], "graph.json")
    externals_listed = manifest["externals"]
    expect(isinstance(externals_listed, dict), "manifest.json: externals must be an object")
    docs = {}
    for sym, member in externals_listed.items():
        expect(member == f"external/{sym}.json" and member in data, f"manifest.json: external @{sym}: bad member")
        doc = parse_json(data[member], member)
        check_fields(doc, EXTERNAL_FIELDS, member, strict, EXTERNAL_OPTIONAL)
        expect(doc["symbol"] == sym, f"{member}: symbol {doc['symbol']!r} does not match @{sym}")
        docs[sym] = doc
    # graph.json's top-level functions may refer to external members; resolve them, then check
    # every graph with the externals in scope.
    local = []
    referenced = set()
    for f in host["functions"]:
        if "external" in f:
            expect(not strict or set(f) == {"symbol", "external"}, f"graph.json: function @{f['symbol']} reference "
                                                                   f"has unknown fields")
            expect(docs.get(f["symbol"]) is not None and f["external"] == externals_listed[f["symbol"]],
                   f"graph.json: function @{f['symbol']} refers to {f['external']!r}, which manifest.json does not list")
            referenced.add(f["symbol"])
        else:
            local.append(f)
    unreferenced = sorted(set(docs) - referenced)
    expect(not unreferenced, f"graph.json: external(s) {', '.join(unreferenced)} are not referenced")
    refs = set()
    scope = set(docs)
    check_graph({**host, "functions": local}, "graph.json", scope, params, refs, strict)
    for sym, doc in docs.items():
        fn = doc["function"]
        check_fields(fn, {"attrs", "graph"}, f"{externals_listed[sym]}: function", strict)
        check_graph(fn["graph"], externals_listed[sym], scope | {f["symbol"] for f in host["functions"]},
                    params, refs, strict)
    unused = sorted(set(params) - refs)
    expect(not unused, f"params.npz: array(s) not referenced by any graph: {', '.join(unused[:5])}")

    externals = []
    for sym, doc in docs.items():
        kernels = kernels_of(doc["function"])
        for k in kernels:
            k["schedule"] = doc["schedules"].get(k["name"])
        externals.append({
            "symbol": sym,
            "compiler": doc["function"]["attrs"].get("Compiler"),
            "ops": sorted({op for k in kernels for op in k["ops"]}),
            "kernel_count": len(kernels),
            "kernels": kernels,
            "scheduled_kernels": sorted(doc["schedules"]),
            "predicted": manifest["predicted"]["functions"].get(sym),
        })
    return {
        "path": path,
        "format_version": manifest["format_version"],
        "producer": f"{manifest['producer']} {manifest['producer_version']}",
        "model": manifest["model"],
        "objective": manifest["objective"],
        "predicted": {k: manifest["predicted"][k] for k in ("latency_s", "energy_j")},
        "members_verified": len(manifest["members"]),
        "externals": externals,
        "params": [{"name": k, "dtype": a.dtype.name, "shape": list(a.shape)} for k, a in params.items()],
    }


def print_text(s):
    print(f"{s['path']}: format {s['format_version']}, produced by {s['producer']}")
    print(f"model {s['model']['name']} (source graph sha256 {s['model']['source_graph_hash'][:16]}...), "
          f"objective {s['objective']}")
    print(f"predicted: latency {s['predicted']['latency_s']:.6g} s, energy {s['predicted']['energy_j']:.6g} J")
    print(f"members verified (sha256): {s['members_verified']}")
    print(f"external functions ({len(s['externals'])}):")
    for e in s["externals"]:
        print(f"  @{e['symbol']}  compiler={e['compiler']}  kernels={e['kernel_count']}  ops={','.join(e['ops'])}")
        for k in e["kernels"]:
            what = f"{k['composite']} ({', '.join(k['ops'])})" if k["composite"] else k["op"]
            sched = json.dumps(k["schedule"], sort_keys=True) if k["schedule"] is not None else "-"
            print(f"    {k['name']}: {what}  schedule={sched}")
    print(f"params ({len(s['params'])}):")
    for p in s["params"]:
        print(f"  {p['name']}  {p['dtype']}[{','.join(map(str, p['shape']))}]")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive")
    ap.add_argument("--json", action="store_true", help="print a JSON summary")
    args = ap.parse_args(argv)
    try:
        s = summarise(args.archive)
    except (ArchiveError, KeyError, ValueError, TypeError, AttributeError, IndexError, RecursionError) as e:
        # Any malformed document ends here, in one line; a KeyError names the field it missed.
        msg = f"malformed document: missing field {e}" if isinstance(e, KeyError) else str(e).splitlines()[0]
        if isinstance(e, (TypeError, AttributeError, IndexError, RecursionError)):
            msg = f"malformed document ({type(e).__name__}: {msg})"
        print(f"read_packed: error: {msg}", file=sys.stderr)
        return 1
    if args.json:
        json.dump(s, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_text(s)
    return 0


def run():
    """``main``; a reader that closes the pipe early (``| head``) ends it quietly."""
    try:
        rc = main()
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the final flush at exit must not fail again
        return 141


if __name__ == "__main__":
    sys.exit(run())
