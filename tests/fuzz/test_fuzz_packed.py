"""Fuzz family "packed": mutated plan archives through ``accel-tune inspect`` and ``run``, and through
the standalone reader (experiments/read_packed.py, recorded as family "packed_reader").

Each case takes one of two real plans (a small conv net tuned for cloud-npu, whose external
function runs on the device; byoc_demo for edge-npu, a Loop on the host) and mutates it from the
case's seed: raw byte flips and truncation, member swaps, drops, duplicates and unsafe names
(path traversal, absolute, backslash, drive), deflate bombs, JSON mutations of the manifest, the
host graph and the external function (junk at a random place, unknown fields, broken calls,
declared shapes and ops, hardware values and sections, version strings), and params.npz lies
(.npy headers claiming other shapes and dtypes, pickles, stowaway and missing arrays, nan
weights). Hashes are recomputed by default, so each mutation reaches the check it targets.

Every ending is ok (inspect's and run's numbers finite, run's latency positive and its parts
summing to it) or one error line; the two readers agree (what ``accel-tune inspect`` accepts the
standalone reader accepts; what the standalone reader refuses accel-tune refuses).
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import time
import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from conftest import Outcome, _bounded
from fuzzgen import Case, choose, finite

FAMILY = "packed"
ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------- base plans
@lru_cache(maxsize=None)
def base_plans() -> dict[str, bytes]:
    """Two real plans, tuned once per process (about a second each)."""
    import tempfile

    import tuner
    from partition import Graph, models
    rng = np.random.default_rng(0)
    g = Graph("fuzznet")
    x = g.add_input("x", (1, 16, 16, 16))
    y = g.add_node("conv2d", [x, g.add_const(rng.standard_normal((32, 16, 3, 3)).astype(np.float32), "w1")],
                   {"pads": (1, 1, 1, 1)}).output
    y = g.add_node("bias_add", [y, g.add_const(rng.standard_normal(32).astype(np.float32), "b1")], {"axis": 1}).output
    y = g.add_node("relu", [y]).output
    y = g.add_node("conv2d", [y, g.add_const(rng.standard_normal((32, 32, 3, 3)).astype(np.float32), "w2")],
                   {"pads": (1, 1, 1, 1)}).output
    y = g.add_node("global_avg_pool2d", [g.add_node("relu", [y]).output]).output
    y = g.add_node("dense", [g.add_node("flatten", [y]).output,
                             g.add_const(rng.standard_normal((10, 32)).astype(np.float32), "wd")]).output
    g.set_outputs([g.add_node("softmax", [y], {"axis": -1}).output])
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for name, graph, hw in (("conv", g, "cloud-npu"), ("loop", models.get("byoc_demo"), "edge-npu")):
            plan = tuner.tune(graph, hw, trials=4, seed=0, progress=False, model_name=name)
            plan.save(Path(d) / f"{name}.zip")
            out[name] = (Path(d) / f"{name}.zip").read_bytes()
    with zipfile.ZipFile(io.BytesIO(out["conv"])) as z:
        assert any(n.startswith("external/") for n in z.namelist()), "the conv plan must offload"
    return out


def members_of(blob: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        return {n: z.read(n) for n in z.namelist()}


def zip_of(members: list[tuple[str, bytes]] | dict[str, bytes], rehash: bool = True,
           compress: int = zipfile.ZIP_DEFLATED) -> bytes:
    items = list(members.items()) if isinstance(members, dict) else list(members)
    if rehash:
        m = dict(items)
        try:
            man = json.loads(m["manifest.json"])
            man["members"] = {n: {"sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
                              for n, d in items if n != "manifest.json"}
            items = [(n, json.dumps(man).encode() if n == "manifest.json" else d) for n, d in items]
        except (KeyError, ValueError, TypeError, AttributeError, RecursionError):
            pass  # a manifest that is itself mutated beyond repair stays as it is
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for n, d in items:
            z.writestr(zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0)), d, compress_type=compress)
    return buf.getvalue()


# ------------------------------------------------------------------------------------- JSON edits
JUNK = [None, 0, -1, 1.5, 1e308, "", "ghost", [], {}, [1, 2], {"$graph": 3}, {"$list": 1}, {"$float": "x"},
        {"$scalar": {"dtype": "O", "value": 1}}, {"name": 1}, True, 10**30, "../../etc/passwd", "\u0000",
        [[[[[]]]]], {"$dict": {"a": {"$graph": {}}}}]


def _locations(doc):
    """Every (container, key) in a JSON document."""
    stack = [doc]
    while stack:
        d = stack.pop()
        items = d.items() if isinstance(d, dict) else enumerate(d) if isinstance(d, list) else ()
        for k, v in items:
            yield d, k
            stack.append(v)


def _junk_at_random(rng, doc):
    locs = list(_locations(doc))
    if locs:
        c, k = locs[int(rng.integers(len(locs)))]
        c[k] = choose(rng, JUNK)
    return "junk at a random place"


def _targeted_graph(rng, doc, is_external: bool):
    g = doc["function"]["graph"] if is_external else doc
    nodes = g["nodes"]
    n = nodes[int(rng.integers(len(nodes)))]
    kind = int(rng.integers(9))
    if kind == 0:
        n["bogus"] = 1
        return "unknown node field", "error"
    if kind == 1:
        (doc if is_external else g)["x_extra"] = {"a": 1}
        return "unknown top-level field", "error"
    if kind == 2 and n["outputs"]:
        o = n["outputs"][0]
        o["shape"] = [int(d) + int(rng.integers(1, 5)) for d in o["shape"]] or [2]
        return "declared output shape changed", "error"
    if kind == 3:
        n["op"] = choose(rng, ["no_such_op", "conv3d", "call", "relu", "loop"])
        return f"op changed to {n['op']}", "any"
    if kind == 4:
        calls = [m for m in nodes if m["op"] == "call"]
        if calls:
            calls[0]["attrs"]["callee"] = choose(rng, ["nosuch", "../x", "", 3])
            return "call to a missing function", "error"
        n["inputs"] = ["ghost"]
        return "input not defined", "error"
    if kind == 5 and len(nodes) > 1:
        del nodes[int(rng.integers(len(nodes)))]
        return "a node removed", "error"
    if kind == 6:
        n["attrs"][choose(rng, ["axis", "pads", "kernel", "callee", "shape"])] = choose(rng, JUNK)
        return "junk attribute", "any"
    if kind == 7:
        o = g["outputs"]
        o.append(o[0] if o else "ghost")
        return "an output listed twice", "any"
    g["inputs"].append({"name": "extra_in", "shape": [1, 2], "dtype": "float32"})
    return "an extra graph input", "any"


def _targeted_manifest(rng, man):
    kind = int(rng.integers(12))
    hw = man.get("hardware", {})
    if kind == 0:
        man["hardware"] = {}
        return "empty hardware", "error"
    if kind == 1:
        sec = choose(rng, [k for k in hw if isinstance(hw[k], dict)])
        del hw[sec]
        return f"hardware lacks {sec}", "error"
    if kind == 2:
        sec, f, v = choose(rng, [("clock", "freq_mhz", 1e-300), ("array", "rows", 2**32), ("link", "bytes_per_s", -1),
                                 ("dram", "bytes_per_cycle", 1e300), ("buffers", "unified_bytes", 2**50)])
        hw[sec][f] = v
        return f"hardware {sec}.{f} = {v}", "error"
    if kind == 3:
        hw["base"] = "/etc/passwd"
        return "hardware base names a local file", "error"
    if kind == 4:
        hw["nosection"] = {}
        return "hardware unknown section", "error"
    if kind == 5:
        man["format_version"] = choose(rng, ["2.0", "0.9", "x", 1.0, "1.0.0", "01.0", ""])
        return f"format_version {man['format_version']!r}", "error"
    if kind == 6:
        man["format_version"] = "1.7"
        return "a newer minor version", "ok"
    if kind == 7:
        man["x_vendor"] = {"note": "producer field"}
        return "a producer field", "ok"
    if kind == 8:
        man["predicted"]["latency_s"] = choose(rng, [-1.0, "fast", None])
        return "predicted latency junk", "error" if man["predicted"]["latency_s"] is not None else "error"
    if kind == 9:
        man["externals"]["ghost"] = "external/ghost.json"
        return "an external with no member", "error"
    if kind == 10:
        man["model"] = choose(rng, [None, {}, {"name": 3}])
        return "model junk", "error"
    return _junk_at_random(rng, man), "any"


# ------------------------------------------------------------------------------------- npy edits
def _npy(header: dict, data: bytes) -> bytes:
    h = repr(header).encode("latin1")
    h += b" " * (64 - (len(h) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + data


def _params_edit(rng, ents: dict[str, bytes]):
    key = choose(rng, sorted(ents))
    arr = np.lib.format.read_array(io.BytesIO(ents[key]))
    kind = int(rng.integers(9))
    if kind == 0:
        shape = choose(rng, [(2**31, 4), (2**62, 4), (0,), (-1, -arr.size), (arr.size + 1,), ()])
        ents[key] = _npy({"descr": arr.dtype.str, "fortran_order": False, "shape": shape}, arr.tobytes())
        return f"npy header claims {shape}", "ok" if shape == arr.shape else "error"
    if kind == 1:
        descr = choose(rng, ["<f8", "<i4", "|b1", "<U4", "|O", "<c8", ">f4", "|V4"])
        ents[key] = _npy({"descr": descr, "fortran_order": False, "shape": arr.shape}, arr.tobytes())
        same = np.dtype(descr).itemsize == arr.dtype.itemsize and np.dtype(descr).newbyteorder("<") == arr.dtype
        return f"npy descr {descr}", "ok" if same else "error"
    if kind == 2:
        buf = io.BytesIO()
        np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
        ents[key] = buf.getvalue()
        return "pickled object array", "error"
    if kind == 3:
        buf = io.BytesIO()
        np.save(buf, np.zeros(3, np.float32))
        ents["stowaway.npy"] = buf.getvalue()
        return "unreferenced array", "error"
    if kind == 4:
        del ents[key]
        return "array missing", "error"
    if kind == 5 and arr.dtype.kind in "iu" and arr.ndim == 0:  # a Loop trip count (data, not a shape)
        buf = io.BytesIO()
        np.save(buf, np.array(choose(rng, [10**12, 2**62, -1, 0]), arr.dtype))
        ents[key] = buf.getvalue()
        return f"integer scalar {key} set to an absurd value", "any"
    if kind == 5 and arr.dtype.kind == "f" and arr.size:
        bad = arr.copy()
        bad.flat[int(rng.integers(arr.size))] = choose(rng, [np.nan, np.inf, -np.inf, 3e38])
        buf = io.BytesIO()
        np.save(buf, bad)
        ents[key] = buf.getvalue()
        return "a non-finite weight", "ok"
    if kind == 6:
        ents[key] = ents[key][: int(rng.integers(0, len(ents[key])))]
        return "npy entry truncated", "error"
    if kind == 7:
        ents["../evil.npy"] = ents[key]
        return "traversal entry name in params.npz", "error"
    ents[key] = ents[key][:10] + bytes([ents[key][10] ^ 0x20]) + ents[key][11:]
    return "npy header byte flipped", "any"


def _rezip_npz(ents: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for n, d in ents.items():
            z.writestr(zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0)), d)
    return buf.getvalue()


# ------------------------------------------------------------------------------------- cases
def mutate(rng, blob: bytes) -> tuple[bytes, str, str]:
    """A mutated archive, its label and the expected ending of inspect ('ok', 'error', 'any')."""
    m = members_of(blob)
    ext = [n for n in m if n.startswith("external/")]
    kind = int(rng.integers(12))
    if kind == 0:
        data = bytearray(blob)
        for _ in range(int(rng.integers(1, 11))):
            data[int(rng.integers(len(data)))] ^= int(rng.integers(1, 256))
        return bytes(data), "raw byte flips", "any"
    if kind == 1:
        cut = int(rng.integers(0, len(blob)))
        return blob[:cut], f"truncated at {cut}", "error"
    if kind == 2:
        names = list(m)
        a, b = rng.choice(len(names), size=2, replace=False)
        m[names[a]], m[names[b]] = m[names[b]], m[names[a]]
        return zip_of(m, rehash=bool(rng.random() < 0.5)), f"swap {names[a]} and {names[b]}", "error"
    if kind == 3:
        op = int(rng.integers(5))
        items = list(m.items())
        if op == 0:
            name = choose(rng, [n for n in m if n != "manifest.json"])
            del m[name]
            return zip_of(m, rehash=False), f"member {name} dropped", "error"
        if op == 1:
            items.append(items[int(rng.integers(len(items)))])
            return zip_of(items, rehash=False), "a member twice", "error"
        if op == 2:
            evil = choose(rng, ["../evil.json", "/abs.json", "a\\b.json", "C:x.json", "./x.json", "x/../y.json",
                                "external/../../z.json", "external/", "\u202egnp.json"])
            items.append((evil, b"{}"))
            return zip_of(items, rehash=bool(rng.random() < 0.5)), f"member named {evil!r}", "error"
        if op == 3:
            items.append(("extra.bin", bytes(16)))
            return zip_of(items, rehash=False), "unlisted member", "error"
        # a deflate bomb listed with its true size: read within the caps, then refused by its content
        bomb = bytes(int(rng.integers(1, 64)) << 20)
        items.append(("bomb.json", bomb))
        return zip_of(items, rehash=True), f"{len(bomb) >> 20} MiB deflate bomb member", "error"
    if kind in (4, 5):
        man = json.loads(m["manifest.json"])
        label, expect = _targeted_manifest(rng, man) if kind == 4 else (_junk_at_random(rng, man), "any")
        m["manifest.json"] = json.dumps(man).encode()
        # The manifest's own bytes are not hashed: the other members' hashes still hold.
        return zip_of(m, rehash=False), f"manifest: {label}", expect
    if kind in (6, 7, 8):
        member = choose(rng, ["graph.json", *ext]) if kind != 8 or not ext else ext[0]
        doc = json.loads(m[member])
        if kind == 6:
            label, expect = _junk_at_random(rng, doc), "any"
        else:
            label, expect = _targeted_graph(rng, doc, member.startswith("external/"))
        m[member] = json.dumps(doc).encode()
        return zip_of(m), f"{member}: {label}", expect
    if kind == 9:
        with zipfile.ZipFile(io.BytesIO(m["params.npz"])) as z:
            ents = {n: z.read(n) for n in z.namelist()}
        label, expect = _params_edit(rng, ents)
        m["params.npz"] = _rezip_npz(ents)
        return zip_of(m), f"params.npz: {label}", expect
    if kind == 10 and ext:
        doc = json.loads(m[ext[0]])
        sched = doc["schedules"]
        if sched:
            k = choose(rng, sorted(sched))
            field_, v = choose(rng, [("tile_m", 10**12), ("tile_n", 0), ("epilogue", "relu"), ("spatial", "kn"),
                                     ("dataflow", "rs"), ("loop_order", "mmk"), ("double_buffer", 1),
                                     ("tile_k", None), ("extra", 1)])
            if v is None:
                del sched[k][field_]
            else:
                sched[k][field_] = v
            m[ext[0]] = json.dumps(doc).encode()
            return zip_of(m), f"schedule {k}.{field_} = {v!r}", "any"
    # JSON text-level abuse: deep nesting, huge numbers, NaN literals, BOM, not UTF-8
    member = choose(rng, list(m))
    if member == "params.npz":
        member = "graph.json"
    text = choose(rng, [b"[" * 100_000 + b"]" * 100_000, b'{"a": 1e999}', b"NaN", b"\xef\xbb\xbf{}", b"\xff\xfe{",
                        b'{"a": ' + b"9" * 5000 + b"}"])
    m[member] = text
    return zip_of(m), f"{member} replaced by abusive JSON text", "error"


@lru_cache(maxsize=None)
def _reader():
    spec = importlib.util.spec_from_file_location("read_packed", ROOT / "experiments" / "read_packed.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_reader(capfd, path: Path) -> Outcome:
    """The standalone reader in this process, under the same bounds: exit 0, or exit 1 with one
    ``read_packed: error:`` line."""
    capfd.readouterr()
    t0 = time.perf_counter()
    rc, raised = None, None
    try:
        with _bounded(30, 2 << 30), contextlib.redirect_stdout(io.StringIO()):
            rc = _reader().main([str(path)])
    except BaseException as e:  # noqa: BLE001
        raised = f"{type(e).__name__}: {str(e)[:200]}"
    cap = capfd.readouterr()
    lines = [ln for ln in cap.err.splitlines() if ln.strip()]
    if raised:
        kind = f"bad:{raised}"
    elif rc == 0 and not lines:
        kind = "ok"
    elif rc == 1 and len(lines) == 1 and lines[0].startswith("read_packed: error: "):
        kind = "error"
    else:
        kind = f"bad:exit {rc} with {len(lines)} stderr lines"
    return Outcome(rc, cap.out, cap.err, time.perf_counter() - t0, kind)


def _check_inspect(out) -> None:
    d = json.loads(out.out)
    p = d["predicted"]
    assert finite(p["latency_s"]) and finite(p["energy_j"]), p
    assert d["partition"]["param_bytes"] >= 0


def _check_run(out) -> None:
    d = json.loads(out.out)
    b = d["breakdown"]
    assert finite(d["latency_s"], positive=True) and finite(d["energy_j"], positive=True), d
    parts = b["host_s"] + b["link_s"] + b["launch_s"] + b["device_s"]
    assert abs(parts - d["latency_s"]) <= 1e-9 * d["latency_s"], b
    for f in b["functions"].values():
        assert f["calls"] >= 1 and finite(f["latency_s"], positive=True) and f["cycles"] >= 0, f


def make_case(seed: int, tmp: Path) -> tuple[Path, str, str]:
    rng = np.random.default_rng(seed)
    if rng.random() < 0.03:  # not a file at all: must be refused without blocking or reading forever
        import os
        p = tmp / "plan.zip"
        kind = choose(rng, ["fifo", "/dev/zero", "folder", "missing"])
        if kind == "fifo":
            os.mkfifo(p)
        elif kind == "folder":
            p.mkdir()
        elif kind == "/dev/zero":
            p.symlink_to("/dev/zero")
        return p, f"plan path is a {kind}", "error"
    which = choose(rng, ["conv", "conv", "loop"])
    blob, label, expect = mutate(rng, base_plans()[which])
    p = tmp / "plan.zip"
    p.write_bytes(blob)
    return p, f"{which}: {label}", expect


def test_fuzz_packed(fuzz_case, fuzz_seed, cli, fuzz_check, capfd, tmp_path):
    path, label, expect = make_case(fuzz_seed + fuzz_case, tmp_path)
    rng = np.random.default_rng(fuzz_seed + fuzz_case + 1)
    text = [["inspect", str(path)], ["inspect", str(path), "--dot"], ["run", str(path)],
            ["run", str(path), "--fidelity", "analytical", "--json"]]
    cases = [Case(label + " | inspect", ["inspect", str(path), "--json"], expect, _check_inspect),
             Case(label + " | run", ["run", str(path), "--json", "--max-ops", "20000"],
                  "error" if expect == "error" else "any", _check_run)]
    extra = choose(rng, text)  # the text forms print the same fields: they must survive junk too
    cases.append(Case(f"{label} | {' '.join(extra[:1] + extra[2:])}", extra, "any",
                      _check_run if extra[-1] == "--json" else None))
    kinds = {}
    for case in cases:
        out = fuzz_check(FAMILY, case.label, cli(case.argv, timeout_s=60, mem_gib=3))
        assert case.expect in ("any", out.kind), f"{case.label}: expected {case.expect}, got {out.kind}: {out.err}"
        if out.kind == "ok" and case.check is not None:
            case.check(out)
        kinds.setdefault(case.argv[0], out.kind)
    reader = fuzz_check("packed_reader", label, run_reader(capfd, path))
    # The two readers agree: the standalone one applies the format's rules, accel-tune those and
    # the simulator's (a complete hardware config, declared types, schedules).
    if kinds["inspect"] == "ok":
        assert reader.kind == "ok", f"{label}: accel-tune inspect accepts, read_packed.py says {reader.err}"
    if reader.kind == "error":
        assert kinds["inspect"] == "error", f"{label}: read_packed.py refuses ({reader.err}), inspect accepts"
    if kinds["run"] == "ok":
        assert kinds["inspect"] == "ok"
