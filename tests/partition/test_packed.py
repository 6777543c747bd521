"""Packed-module archive: write -> read -> interpret equals the source model; the standalone reader
agrees; every malformed archive gives one PackedFormatError line naming the member and fault."""
import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from partition import Function, Graph, interpret
from partition.packed import PackedFormatError, read_packed, write_packed
from partition.serialize import function_to_json, graph_hash, graph_to_json

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(1)
W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)
WD = RNG.standard_normal((10, 64)).astype(np.float32)
X = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)


def source_model() -> Graph:
    g = Graph("tinynet")
    x = g.add_input("x", (1, 3, 8, 8))
    w, b, wd = g.add_const(W, "w"), g.add_const(B, "b"), g.add_const(WD, "wd")
    y = g.add_node("conv2d", [x, w], {"pads": (1, 1, 1, 1)}).output
    y = g.add_node("bias_add", [y, b], {"axis": 1}).output
    y = g.add_node("relu", [y]).output
    y = g.add_node("max_pool2d", [y], {"kernel": (2, 2), "strides": (2, 2)}).output
    y = g.add_node("flatten", [y]).output
    y = g.add_node("dense", [y, wd]).output
    y = g.add_node("mul", [y, g.add_const(np.array(1.5, np.float32), "scale")]).output
    g.set_outputs([g.add_node("softmax", [y], {"axis": -1}).output])
    return g


def partitioned_model() -> Graph:
    """The source model after BYOC by hand: conv+bias+relu (a composite) and the pool run in the
    external function @npu_main_0; flatten/dense/softmax stay on the host."""
    comp = Graph("comp")
    a, w, b = comp.add_input("a", (1, 3, 8, 8)), comp.add_input("w", W.shape), comp.add_input("b", B.shape)
    y = comp.add_node("conv2d", [a, w], {"pads": (1, 1, 1, 1)}).output
    y = comp.add_node("bias_add", [y, b], {"axis": 1}).output
    comp.set_outputs([comp.add_node("relu", [y]).output])

    ext = Graph("npu_main_0")
    xa = ext.add_input("x", (1, 3, 8, 8))
    cw, cb = ext.add_const(W, "w"), ext.add_const(B, "b")
    ext.functions["npu.conv2d_bias_relu_0"] = Function(comp, {
        "Composite": "npu.conv2d_bias_relu", "PartitionedFromPattern": "conv2d_bias_add_relu_"})
    y = ext.add_node("call", [xa, cw, cb], {"callee": "npu.conv2d_bias_relu_0"}, name="k0").output
    ext.set_outputs([ext.add_node("max_pool2d", [y], {"kernel": (2, 2), "strides": (2, 2)}, name="k1").output])

    g = Graph("tinynet")
    g.functions["npu_main_0"] = Function(ext, {"Compiler": "npu", "global_symbol": "npu_main_0", "Primitive": 1})
    x = g.add_input("x", (1, 3, 8, 8))
    y = g.add_node("call", [x], {"callee": "npu_main_0"}).output
    y = g.add_node("flatten", [y]).output
    # A Fortran-order weight and a 0-d constant: params.npz must keep both shapes exact.
    y = g.add_node("dense", [y, g.add_const(np.asfortranarray(WD), "wd")]).output
    y = g.add_node("mul", [y, g.add_const(np.array(1.5, np.float32), "scale")]).output
    g.set_outputs([g.add_node("softmax", [y], {"axis": -1}).output])
    return g


# In the form sim.Schedule.to_dict writes (the format treats schedules as opaque objects).
SCHEDULES = {"k0": {"dataflow": "ws", "spatial": ["k", "n"], "tile_m": 64, "tile_n": 4, "tile_k": 27,
                    "loop_order": "mnk", "double_buffer": True, "epilogue": ["bias_add", "relu"]},
             "k1": {"dataflow": "ws", "spatial": ["k", "n"], "tile_m": 256, "tile_n": 1, "tile_k": 1,
                    "loop_order": "mnk", "double_buffer": False, "epilogue": []}}


def manifest_fields(**over):
    f = {"model": {"name": "tinynet", "source_graph_hash": graph_hash(source_model())},
         "hardware": {"name": "npu-16x16", "pe_rows": 16, "pe_cols": 16, "clock_hz": 1.0e9},
         "objective": "latency",
         "predicted": {"latency_s": 2.5e-5, "energy_j": 3.1e-6,
                       "functions": {"npu_main_0": {"latency_s": 1.5e-5, "energy_j": 2.0e-6, "cycles": 15000}}}}
    f.update(over)
    return f


def write_plan(path, **kw):
    args = dict(manifest_fields=manifest_fields(), host_graph=partitioned_model(),
                externals={"npu_main_0": {"schedules": SCHEDULES, "buffer_plan": {"ifmap": [0, 768]},
                                          "codegen": {"int8": False}}})
    args.update(kw)
    return write_packed(path, **args)


@pytest.fixture
def plan(tmp_path):
    p = tmp_path / "plan.zip"
    write_plan(p)
    return p


# ----------------------------------------------------------------------------- round trip
def test_write_read_interpret_equals_source_model(plan):
    mod = read_packed(plan)
    want = interpret(source_model(), [X])[0]
    got = interpret(mod.host_graph, [X])[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert str(mod.host_graph) == str(partitioned_model())
    mod.host_graph.lint()
    assert mod.format_version == "1.0" and mod.manifest["producer"] == "accel-tune"
    assert mod.manifest["model"]["source_graph_hash"] == graph_hash(source_model())
    assert mod.externals["npu_main_0"]["schedules"] == SCHEDULES
    assert mod.function("npu_main_0").attrs["Compiler"] == "npu"
    assert sorted(mod.params) == ["@npu_main_0/b", "@npu_main_0/w", "scale", "wd"]
    assert mod.params["scale"].shape == () and mod.params["wd"].flags.c_contiguous
    # The same keys graph_to_json gives the unsplit host graph, so tools can match them up.
    assert set(mod.params) == set(graph_to_json(partitioned_model())[1])


def test_external_lives_only_in_its_member_and_hashes_are_listed(plan):
    with zipfile.ZipFile(plan) as zf:
        names = zf.namelist()
        graph = json.loads(zf.read("graph.json"))
        manifest = json.loads(zf.read("manifest.json"))
        for name in names[1:]:
            assert manifest["members"][name]["sha256"] == hashlib.sha256(zf.read(name)).hexdigest()
        params_blob = zf.read("params.npz")
    assert names == ["manifest.json", "graph.json", "external/npu_main_0.json", "params.npz"]
    assert graph["functions"] == [{"symbol": "npu_main_0", "external": "external/npu_main_0.json"}]
    assert manifest["externals"] == {"npu_main_0": "external/npu_main_0.json"}
    # params.npz is an ordinary npz: numpy reads it with pickle disabled.
    with np.load(io.BytesIO(params_blob), allow_pickle=False) as npz:
        np.testing.assert_array_equal(npz["wd"], WD)
        np.testing.assert_array_equal(npz["@npu_main_0/w"], W)


@pytest.mark.parametrize("names", [("/w/Constant_output_0", "/wd"), ("../w", "a\\b:c"), ("x//y/.", "\x01")])
def test_exporter_style_constant_names_round_trip(tmp_path, names):
    """ONNX exporters name values like '/layer/Constant_output_0'; such names must still give
    safe params.npz entries, and the module must read back to the same numbers."""
    g = Graph("named")
    x = g.add_input("x", (1, 3, 8, 8))
    y = g.add_node("conv2d", [x, g.add_const(W, names[0])], {"pads": (1, 1, 1, 1)}).output
    y = g.add_node("flatten", [g.add_node("max_pool2d", [y], {"kernel": (8, 8), "strides": (8, 8)}).output]).output
    g.set_outputs([g.add_node("mul", [y, g.add_const(np.ones((1, 4), np.float32), names[1])]).output])
    p = tmp_path / "m.zip"
    write_packed(p, manifest_fields=manifest_fields(model={"name": "named", "source_graph_hash": graph_hash(g)},
                                                    predicted={"latency_s": 1e-5, "energy_j": 1e-6, "functions": {}}),
                 host_graph=g, externals={})
    with zipfile.ZipFile(p) as z, zipfile.ZipFile(io.BytesIO(z.read("params.npz"))) as npz:
        entries = npz.namelist()
    assert len(entries) == 2
    for e in entries:
        assert not e.startswith(("/", "\\")) and "\\" not in e and ".." not in e.split("/") and ":" not in e
    mod = read_packed(p)
    assert sorted(c.name for c in mod.host_graph.constants) == sorted(names)
    np.testing.assert_array_equal(interpret(mod.host_graph, [X])[0], interpret(g, [X])[0])


def test_writing_is_deterministic(tmp_path):
    write_plan(tmp_path / "a.zip")
    write_plan(tmp_path / "b.zip")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()


def test_params_are_little_endian_c_order_npy(tmp_path):
    host = partitioned_model()
    wd = next(c for c in host.constants if c.name == "wd")
    wd.data = WD.astype(">f4")  # big-endian, same dtype name
    p = tmp_path / "be.zip"
    write_plan(p, host_graph=host)
    with zipfile.ZipFile(p) as zf, zipfile.ZipFile(io.BytesIO(zf.read("params.npz"))) as npz:
        header = npz.read("wd.npy")[:128]
    assert b"'descr': '<f4'" in header and b"'fortran_order': False" in header
    np.testing.assert_array_equal(read_packed(p).params["wd"], WD)


def _data_offset(blob: bytes, info: zipfile.ZipInfo) -> int:
    """Where a stored member's bytes start: after its local header (whose extra field may differ
    in length from the central directory's)."""
    h = info.header_offset
    return h + 30 + int.from_bytes(blob[h + 26:h + 28], "little") + int.from_bytes(blob[h + 28:h + 30], "little")


def test_arrays_can_be_memory_mapped_from_the_archive(plan):
    """The format's promise to runtimes: params.npz and its entries are stored, so an array is a
    contiguous byte range of the archive file."""
    blob = plan.read_bytes()
    with zipfile.ZipFile(plan) as zf:
        outer = zf.getinfo("params.npz")
        assert outer.compress_type == zipfile.ZIP_STORED
        npz_start = _data_offset(blob, outer)
        npz = blob[npz_start:npz_start + outer.file_size]
    with zipfile.ZipFile(io.BytesIO(npz)) as inner:
        info = inner.getinfo("wd.npy")
        assert info.compress_type == zipfile.ZIP_STORED
        npy_start = _data_offset(npz, info)
    f = io.BytesIO(npz[npy_start:])
    version = np.lib.format.read_magic(f)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read_header(f)
    mm = np.memmap(plan, dtype=dtype, mode="r", offset=npz_start + npy_start + f.tell(), shape=shape)
    assert not fortran
    np.testing.assert_array_equal(mm, WD)


def test_external_given_as_function_or_json(tmp_path):
    host = partitioned_model()
    fn = host.functions["npu_main_0"]
    fdoc, fparams = function_to_json(fn, "ext0/")
    for i, (ext, params) in enumerate([({"function": fn}, None), ({"function": fdoc}, fparams)]):
        p = tmp_path / f"p{i}.zip"
        write_plan(p, host_graph=partitioned_model(), externals={"npu_main_0": ext}, params=params)
        mod = read_packed(p)
        np.testing.assert_allclose(interpret(mod.host_graph, [X])[0], interpret(source_model(), [X])[0],
                                   rtol=1e-6, atol=1e-7)
        assert mod.externals["npu_main_0"]["schedules"] == {}


def test_newer_minor_version_is_accepted(plan, tmp_path):
    p = _rewrite(plan, tmp_path, manifest_edit=lambda m: m.update(format_version="1.7"))
    assert read_packed(p).format_version == "1.7"


# ----------------------------------------------------------------------------- write-side errors
@pytest.mark.parametrize("kw, msg", [
    (dict(manifest_fields=manifest_fields(predicted={"latency_s": 1.0, "energy_j": 1.0, "functions": {}})),
     r"predicted.functions lacks external\(s\) npu_main_0"),
    (dict(manifest_fields=manifest_fields(objective=None)), "objective must be a string"),
    (dict(manifest_fields={**manifest_fields(), "members": {}}), "members are written by write_packed"),
    (dict(params={"stray": np.zeros(2)}), r"params.npz: array\(s\) not referenced by any graph: stray"),
    (dict(externals={"npu_main_0": {"schedules": {"k9": {}}}}), r"schedules name kernel\(s\) k9"),
    (dict(externals={"../x": {}}), "not a safe member name"),
    (dict(externals={"npu_main_1": {}}, manifest_fields=manifest_fields(predicted={
        "latency_s": 1.0, "energy_j": 1.0, "functions": {"npu_main_1": {"latency_s": 1.0, "energy_j": 0}}})),
     "external/npu_main_1.json: external @npu_main_1 has no function"),
])
def test_bad_write_requests_raise_one_line(tmp_path, kw, msg):
    with pytest.raises(PackedFormatError, match=msg) as e:
        write_plan(tmp_path / "x.zip", **kw)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "x.zip").exists()


def test_nan_in_manifest_is_refused(tmp_path):
    hw = {"name": "bad", "clock_hz": float("nan")}
    with pytest.raises(PackedFormatError, match="manifest.json: not JSON-serialisable"):
        write_plan(tmp_path / "x.zip", manifest_fields=manifest_fields(hardware=hw))


# ----------------------------------------------------------------------------- malformed archives
def _members(path):
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _rewrite(src, tmp_path, *, edit=None, manifest_edit=None, rehash=True, name="bad.zip"):
    """Re-zip ``src`` after editing members; by default the manifest's hashes are recomputed so the
    edit reaches the check under test rather than the sha256 check."""
    members = _members(src)
    if edit:
        edit(members)
    m = json.loads(members["manifest.json"])
    if rehash:
        for n, rec in m["members"].items():
            if n in members:
                rec.update(sha256=hashlib.sha256(members[n]).hexdigest(), size=len(members[n]))
    if manifest_edit:
        manifest_edit(m)
    members["manifest.json"] = json.dumps(m).encode()
    out = tmp_path / name
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, data in members.items():
            zf.writestr(zipfile.ZipInfo(n), data)
    return out


def _error(path, **kw) -> str:
    with pytest.raises(PackedFormatError) as e:
        read_packed(path, **kw)
    msg = str(e.value)
    assert "\n" not in msg and msg
    return msg


def test_truncated_archive(plan, tmp_path):
    data = plan.read_bytes()
    p = tmp_path / "trunc.zip"
    p.write_bytes(data[: len(data) // 2])
    assert "not a readable zip archive (truncated or corrupt" in _error(p)


def test_flipped_byte_in_member_content_fails_sha256(plan, tmp_path):
    def flip(m):
        g = bytearray(m["graph.json"])
        i = g.index(b'"softmax"') + 2
        g[i] ^= 0x01  # "softmax" -> "roftmax": still valid JSON, so only the hash can catch it
        m["graph.json"] = bytes(g)
    p = _rewrite(plan, tmp_path, edit=flip, rehash=False)
    assert _error(p) == "graph.json: sha256 mismatch (archive altered or corrupt)"


def test_flipped_byte_in_compressed_stream(plan, tmp_path):
    data = bytearray(plan.read_bytes())
    with zipfile.ZipFile(plan) as zf:
        info = zf.getinfo("params.npz")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + info.compress_size // 2] ^= 0xFF
    p = tmp_path / "flip.zip"
    p.write_bytes(bytes(data))
    assert _error(p).startswith("params.npz: ")


def test_missing_member(plan, tmp_path):
    p = _rewrite(plan, tmp_path, edit=lambda m: m.pop("external/npu_main_0.json"))
    assert _error(p) == ("external/npu_main_0.json: member listed in manifest.json is missing from the archive")
    p = tmp_path / "nomani.zip"
    members = _members(plan)
    with zipfile.ZipFile(p, "w") as zf:
        for n, d in members.items():
            if n != "manifest.json":
                zf.writestr(n, d)
    assert _error(p) == "manifest.json: required member is missing from the archive"


@pytest.mark.parametrize("evil", ["../evil.json", "/etc/evil.json", "external/../../evil.json", "C:/evil.json",
                                  "external\\..\\evil.json"])
def test_path_traversal_member(plan, tmp_path, evil):
    p = _rewrite(plan, tmp_path, edit=lambda m: m.update({evil: b"{}"}))
    assert _error(p) == f"{evil}: unsafe member name (absolute path, drive, backslash or '..')"


def test_unlisted_member(plan, tmp_path):
    p = _rewrite(plan, tmp_path, edit=lambda m: m.update({"extra.txt": b"hi"}))
    assert _error(p) == "extra.txt: member is not listed in manifest.json"


def test_oversize_member_and_total(plan):
    sizes = {n: i.file_size for n, i in ((i.filename, i) for i in zipfile.ZipFile(plan).infolist())}
    cap = sizes["params.npz"] - 1
    assert sizes["graph.json"] <= cap and sizes["manifest.json"] <= cap
    assert _error(plan, max_member_bytes=cap) == (
        f"params.npz: member is {sizes['params.npz']} bytes uncompressed, over the {cap}-byte cap")
    total_cap = sum(sizes.values()) - 1
    assert _error(plan, max_total_bytes=total_cap).endswith(
        f"archive exceeds the {total_cap}-byte cap on total uncompressed size")


def _patch_size(data: bytearray, zf: zipfile.ZipFile, name: str, size: int) -> None:
    """Rewrite a member's uncompressed size in its local header and its central directory entry."""
    info = zf.getinfo(name)
    data[info.header_offset + 22: info.header_offset + 26] = size.to_bytes(4, "little")
    pos = zf.start_dir
    while data[pos: pos + 4] == b"PK\x01\x02":
        n, extra, comment = (int.from_bytes(data[pos + o: pos + o + 2], "little") for o in (28, 30, 32))
        if data[pos + 46: pos + 46 + n] == name.encode():
            data[pos + 24: pos + 28] = size.to_bytes(4, "little")
            return
        pos += 46 + n + extra + comment
    raise AssertionError(f"{name} not in the central directory")


@pytest.mark.parametrize("delta", [-10, +10])
def test_forged_header_size_is_caught(plan, tmp_path, delta):
    """A directory entry that lies about a member's size must not let the reader take more or
    fewer bytes than it checked against the caps."""
    data = bytearray(plan.read_bytes())
    with zipfile.ZipFile(plan) as zf:
        size = zf.getinfo("graph.json").file_size
        _patch_size(data, zf, "graph.json", size + delta)
    p = tmp_path / "forged.zip"
    p.write_bytes(bytes(data))
    msg = _error(p)
    # Caught before reading (the header disagrees with the manifest) or while reading.
    assert msg == f"graph.json: size {size + delta} does not match manifest ({size})" or \
        msg.startswith("graph.json: cannot read member") or msg.startswith("graph.json: member size does not match")


def test_pickle_inside_params(plan, tmp_path):
    def pickled(m):
        buf = io.BytesIO()
        np.savez(buf, wd=np.array([{"evil": 1}, None], dtype=object), scale=np.array(1.5, np.float32),
                 **{"@npu_main_0/w": W, "@npu_main_0/b": B})
        m["params.npz"] = buf.getvalue()
    p = _rewrite(plan, tmp_path, edit=pickled)
    assert _error(p) == "params.npz: array 'wd' is an object array stored with pickle; refusing to load it"


def test_future_major_version(plan, tmp_path):
    p = _rewrite(plan, tmp_path, manifest_edit=lambda m: m.update(format_version="2.0"))
    assert _error(p) == ("manifest.json: format version 2.0 is newer than this reader supports (1.x); "
                         "upgrade accel-tune")
    p = _rewrite(plan, tmp_path, manifest_edit=lambda m: m.update(format_version="one"), name="v.zip")
    assert _error(p) == "manifest.json: format_version must be 'MAJOR.MINOR', got 'one'"


def test_corrupt_graph_json_names_member_and_node(plan, tmp_path):
    def edit(m):
        g = json.loads(m["graph.json"])
        g["nodes"][1]["inputs"] = ["ghost"]
        m["graph.json"] = json.dumps(g).encode()
    p = _rewrite(plan, tmp_path, edit=edit)
    assert _error(p) == "graph.json: graph 'tinynet' node 'flatten': input \"ghost\" is not defined before this node"
    p = _rewrite(plan, tmp_path, edit=lambda m: m.update({"graph.json": b"{nan"}), name="j.zip")
    assert _error(p).startswith("graph.json: invalid JSON: ")


def _paths(doc, prefix=()):
    """Every (container, key) location in a JSON document."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield doc, k
            yield from _paths(v)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield doc, i
            yield from _paths(v)


JUNK = [None, 0, -1, 1.5, "", "ghost", [], {}, [1, 2], {"$graph": 3}, {"$list": 1}, {"$scalar": {"dtype": "O", "value": 1}},
        {"name": 1}, True, 10 ** 30]


@pytest.mark.parametrize("member", ["graph.json", "external/npu_main_0.json", "manifest.json"])
def test_mutated_documents_give_one_line_errors_never_tracebacks(plan, tmp_path, member):
    """Replace one location of a document (hashes recomputed) with junk, many times: the reader
    either still loads a consistent module or raises PackedFormatError; nothing else escapes."""
    rng = np.random.default_rng(7)
    base = _members(plan)
    doc = json.loads(base[member])
    n_paths = sum(1 for _ in _paths(doc))
    outcomes = {"error": 0, "loaded": 0}
    p = tmp_path / "fz.zip"
    for trial in range(40):
        d = json.loads(base[member])
        container, key = list(_paths(d))[int(rng.integers(n_paths))]
        container[key] = JUNK[int(rng.integers(len(JUNK)))]
        members = dict(base)
        members[member] = json.dumps(d).encode()
        if member != "manifest.json":  # keep the hash right so the document itself is parsed
            m = json.loads(members["manifest.json"])
            m["members"][member]["sha256"] = hashlib.sha256(members[member]).hexdigest()
            m["members"][member]["size"] = len(members[member])
            members["manifest.json"] = json.dumps(m).encode()
        with zipfile.ZipFile(p, "w") as zf:
            for n, data in members.items():
                zf.writestr(n, data)
        try:
            read_packed(p)
            outcomes["loaded"] += 1
        except PackedFormatError as e:
            assert "\n" not in str(e)
            outcomes["error"] += 1
    assert outcomes["error"] > 10


def test_dangling_call_is_refused_at_write(tmp_path):
    host = partitioned_model()
    host.node_by_name("call").attrs["callee"] = "npu_main_9"
    with pytest.raises(PackedFormatError, match=r"node 'call' calls @npu_main_9, which is neither"):
        write_plan(tmp_path / "x.zip", host_graph=host)


def test_manifest_costs_are_checked_on_read(plan, tmp_path):
    p = _rewrite(plan, tmp_path, manifest_edit=lambda m: m["predicted"]["functions"].clear())
    assert _error(p) == "manifest.json: predicted.functions lacks external(s) npu_main_0"


def test_missing_file():
    assert _error("/nonexistent/plan.zip") == "/nonexistent/plan.zip: no such file"


# ----------------------------------------------------------------------------- standalone reader
def _reader(*args):
    return subprocess.run([sys.executable, str(ROOT / "experiments" / "read_packed.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=60)


def test_standalone_reader_lists_externals_and_params(plan):
    r = _reader(plan, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["format_version"] == "1.0" and s["members_verified"] == 3
    (ext,) = s["externals"]
    assert ext["symbol"] == "npu_main_0" and ext["compiler"] == "npu" and ext["kernel_count"] == 2
    assert ext["ops"] == ["bias_add", "conv2d", "max_pool2d", "relu"]
    assert ext["kernels"][0]["composite"] == "npu.conv2d_bias_relu"
    assert ext["kernels"][0]["schedule"] == SCHEDULES["k0"]
    assert {p["name"]: (p["dtype"], p["shape"]) for p in s["params"]} == {
        "wd": ("float32", [10, 64]), "scale": ("float32", []), "@npu_main_0/w": ("float32", [4, 3, 3, 3]),
        "@npu_main_0/b": ("float32", [4])}
    text = _reader(plan)
    assert text.returncode == 0 and "@npu_main_0  compiler=npu  kernels=2" in text.stdout
    assert "wd  float32[10,64]" in text.stdout


def test_standalone_reader_imports_nothing_of_ours():
    src = (ROOT / "experiments" / "read_packed.py").read_text()
    imports = {line.split()[1].split(".")[0] for line in src.splitlines()
               if line.startswith(("import ", "from "))}
    assert imports <= {"argparse", "hashlib", "io", "json", "math", "os", "sys", "zipfile", "zlib", "numpy"}


def test_standalone_reader_rejects_tampering(plan, tmp_path):
    def flip(m):
        m["params.npz"] = m["params.npz"][:-1] + bytes([m["params.npz"][-1] ^ 1])
    p = _rewrite(plan, tmp_path, edit=flip, rehash=False)
    r = _reader(p)
    assert r.returncode == 1 and r.stderr.strip() == "read_packed: error: params.npz: sha256 mismatch"


# ----------------------------------------------------------------------------- real partitions
def _plan_for(graph, partitioned, path):
    ext = {s: {} for s, f in partitioned.functions.items() if "Compiler" in f.attrs}
    zero = {"latency_s": 0.0, "energy_j": 0.0}
    write_packed(path, host_graph=partitioned, externals=ext, manifest_fields=manifest_fields(
        model={"name": graph.name, "source_graph_hash": graph_hash(graph)},
        predicted={**zero, "functions": {s: dict(zero) for s in ext}}))
    return ext


def _inputs(graph):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(v.shape).astype(v.dtype) if v.dtype.startswith("float")
            else rng.integers(0, 2, v.shape).astype(v.dtype) for v in graph.inputs]


@pytest.mark.parametrize("target", ["npu-gemm", "npu-full"])
@pytest.mark.parametrize("name", ["byoc_demo", "ssd_detector",
                                  pytest.param("bert_tiny", marks=pytest.mark.slow),
                                  pytest.param("mobilenet_v2", marks=pytest.mark.slow)])
def test_builtin_model_partitioned_round_trip_is_exact(tmp_path, name, target):
    from partition import models
    from partition.byoc import partition_for
    g = models.get(name)
    part = partition_for(g, target)
    ext = _plan_for(g, part, tmp_path / "m.zip")
    assert ext, f"{name} on {target} offloads nothing; the test would not cover externals"
    mod = read_packed(tmp_path / "m.zip")
    assert str(mod.host_graph) == str(part)
    mod.host_graph.lint()
    ins = _inputs(g)
    for want, got in zip(interpret(g, ins), interpret(mod.host_graph, ins), strict=True):
        assert want.dtype == got.dtype and want.shape == got.shape
        np.testing.assert_array_equal(got, want)  # same numpy ops in the same order: bit-exact


SHARED = Path(__file__).resolve().parents[3] / "shared" / "models"  # ../shared beside the checkout


@pytest.mark.parametrize("fname", ["tiny_detector_topk.onnx",
                                   pytest.param("mobilenet_v2.onnx", marks=pytest.mark.slow)])
def test_shared_onnx_model_partitioned_round_trip_is_exact(tmp_path, fname):
    if not (SHARED / fname).exists():
        pytest.skip(f"{SHARED / fname} not present")
    from partition import load_onnx
    from partition.byoc import partition_for
    g = load_onnx(str(SHARED / fname))
    part = partition_for(g, "npu-full")
    assert _plan_for(g, part, tmp_path / "m.zip")
    mod = read_packed(tmp_path / "m.zip")
    ins = _inputs(g)
    for want, got in zip(interpret(g, ins), interpret(mod.host_graph, ins), strict=True):
        assert want.dtype == got.dtype and want.shape == got.shape
        np.testing.assert_array_equal(got, want)
    r = _reader(tmp_path / "m.zip", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert {e["symbol"] for e in s["externals"]} == set(mod.externals)
    assert {p["name"] for p in s["params"]} == set(mod.params)
