"""A standalone reader for accel-tune packed modules, written only against docs/FORMAT.md.

It imports nothing of accel-tune: zipfile, json, hashlib and numpy (plus argparse, io and sys for
the command line), to show that a vendor's runtime can consume the archive on its own.

    python experiments/read_packed.py PLAN.zip [--json]

Lists the external functions (symbol, ops, kernels, schedules), verifies every member's sha256,
loads the params (never unpickling) and prints their names and shapes. Exit status 0 when the
archive verifies, 1 (with one line on stderr) when it does not.
"""
import argparse
import hashlib
import io
import json
import sys
import zipfile

import numpy as np

READER_MAJOR = 1
MAX_MEMBER_BYTES = 1 << 30
MAX_TOTAL_BYTES = 2 << 30


class ArchiveError(Exception):
    pass


def _safe(name):
    parts = name.split("/")
    return (name and not name.startswith("/") and "\\" not in name and ":" not in parts[0]
            and ".." not in parts and "." not in parts)


def read_members(path):
    """Check names and sizes from the zip directory, then read and hash every member."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
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
            except (zipfile.BadZipFile, OSError, EOFError) as e:
                raise ArchiveError(f"{info.filename}: cannot read ({e})")
            if len(data[info.filename]) != info.file_size:
                raise ArchiveError(f"{info.filename}: size differs from the zip header")
    return data


def verify(data):
    if "manifest.json" not in data:
        raise ArchiveError("manifest.json: missing")
    manifest = json.loads(data["manifest.json"])
    major = int(str(manifest.get("format_version", "0.0")).split(".")[0])
    if major != READER_MAJOR:
        raise ArchiveError(f"manifest.json: format version {manifest.get('format_version')} "
                           f"is not readable by this reader ({READER_MAJOR}.x)")
    listed = manifest["members"]
    for name in data:
        if name != "manifest.json" and name not in listed:
            raise ArchiveError(f"{name}: not listed in manifest.json")
    for name, rec in listed.items():
        if name not in data:
            raise ArchiveError(f"{name}: missing")
        if hashlib.sha256(data[name]).hexdigest() != rec["sha256"]:
            raise ArchiveError(f"{name}: sha256 mismatch")
    return manifest


def load_params(blob):
    out = {}
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
            for key in npz.files:
                out[key] = npz[key]
    except ValueError as e:
        raise ArchiveError(f"params.npz: {e}")
    return out


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
    manifest = verify(data)
    params = load_params(data["params.npz"])
    externals = []
    for sym, member in manifest["externals"].items():
        doc = json.loads(data[member])
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
    except (ArchiveError, KeyError, ValueError) as e:
        msg = f"missing field {e}" if isinstance(e, KeyError) else str(e)
        print(f"read_packed: error: {msg}", file=sys.stderr)
        return 1
    if args.json:
        json.dump(s, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_text(s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
