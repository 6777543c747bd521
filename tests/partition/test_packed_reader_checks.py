"""What read_packed refuses beyond the container: lying .npy headers (before any allocation),
calls to externals that are not there, unknown fields (unless the archive is of a newer minor
version), unreferenced arrays. Each is one PackedFormatError line naming the member."""
import io
import json
import tracemalloc
import zipfile

import numpy as np
import pytest

from partition import interpret
from partition.packed import read_packed
from test_packed import X, _error, _rewrite, source_model, write_plan


@pytest.fixture
def plan(tmp_path):
    """The hand-partitioned tinynet of test_packed.py, written once per test."""
    p = tmp_path / "plan.zip"
    write_plan(p)
    return p

EXT = "external/npu_main_0.json"


def _npy(header: dict, data: bytes, version=(1, 0)) -> bytes:
    h = repr(header).encode("latin1")
    pad = 64 - (len(h) + 1 + 10) % 64
    h = h + b" " * pad + b"\n"
    size = len(h).to_bytes(2 if version == (1, 0) else 4, "little")
    return b"\x93NUMPY" + bytes(version) + size + h + data


def _with_entry(key: str, blob: bytes):
    """An edit replacing params.npz entry ``key`` with ``blob``."""
    def edit(m):
        with zipfile.ZipFile(io.BytesIO(m["params.npz"])) as z:
            ents = {n: z.read(n) for n in z.namelist()}
        ents[f"{key}.npy"] = blob
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for n, d in ents.items():
                z.writestr(n, d)
        m["params.npz"] = buf.getvalue()
    return edit


@pytest.mark.parametrize("header, data, msg", [
    ({"descr": "<f4", "fortran_order": False, "shape": (2**31, 4)}, b"\0" * 64,
     "header declares float32[2147483648,4] (34,359,738,368 bytes) but the entry holds 64 bytes"),
    ({"descr": "<f4", "fortran_order": False, "shape": (2**62, 2**62)}, b"\0" * 64, "but the entry holds 64 bytes"),
    ({"descr": "<f4", "fortran_order": False, "shape": (10, 64)}, b"\0" * 64, "(2,560 bytes) but the entry holds 64"),
    ({"descr": "<f4", "fortran_order": False, "shape": (2,)}, b"\0" * 64, "(8 bytes) but the entry holds 64"),
    ({"descr": "<f4", "fortran_order": False, "shape": (-4, -4)}, b"\0" * 64, "dimensions are non-negative"),
    ({"descr": "<U8", "fortran_order": False, "shape": (2,)}, b"\0" * 64, "has dtype '<U8'"),
    ({"descr": [("a", "<f4")], "fortran_order": False, "shape": (16,)}, b"\0" * 64, "has dtype"),
    ({"descr": "|O", "fortran_order": False, "shape": (1,)}, b"\0" * 8, "object array stored with pickle"),
    ({"descr": "<f4", "shape": (1,)}, b"\0" * 4, "is not a valid .npy"),
    ({"descr": "nonsense", "fortran_order": False, "shape": (1,)}, b"\0" * 4, "is not a valid .npy"),
])
def test_lying_npy_headers_are_refused_before_allocation(plan, tmp_path, header, data, msg):
    p = _rewrite(plan, tmp_path, edit=_with_entry("wd", _npy(header, data)))
    tracemalloc.start()
    err = _error(p)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert err.startswith("params.npz: array 'wd'") and msg in err, err
    assert peak < 16 * 2**20


def test_truncated_npy_entry(plan, tmp_path):
    p = _rewrite(plan, tmp_path, edit=_with_entry("wd", b"\x93NUMPY\x01"))
    assert _error(p).startswith("params.npz: array 'wd' is not a valid .npy")


def test_version_2_headers_and_big_endian_arrays_read_back(plan, tmp_path):
    wd = np.asarray(read_packed(plan).params["wd"])
    big = wd.astype(">f4")
    buf = io.BytesIO()
    np.lib.format.write_array(buf, big, version=(2, 0))
    p = _rewrite(plan, tmp_path, edit=_with_entry("wd", buf.getvalue()))
    mod = read_packed(p)
    assert mod.params["wd"].dtype == np.dtype("<f4") and mod.params["wd"].flags.writeable
    np.testing.assert_array_equal(mod.params["wd"], wd)
    np.testing.assert_allclose(interpret(mod.host_graph, [X])[0], interpret(source_model(), [X])[0], rtol=1e-6)


def test_fortran_order_entry_keeps_its_values(plan, tmp_path):
    wd = np.asarray(read_packed(plan).params["wd"])
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asfortranarray(wd))
    mod = read_packed(_rewrite(plan, tmp_path, edit=_with_entry("wd", buf.getvalue())))
    np.testing.assert_array_equal(mod.params["wd"], wd)


def _edit_json(member, fn):
    def edit(m):
        d = json.loads(m[member])
        fn(d)
        m[member] = json.dumps(d).encode()
    return edit


def test_call_to_an_external_with_no_member(plan, tmp_path):
    def fn(g):
        g["nodes"][0]["attrs"]["callee"] = "npu_main_7"
    p = _rewrite(plan, tmp_path, edit=_edit_json("graph.json", fn))
    assert _error(p) == ("graph.json: graph 'tinynet' node 'call' calls @npu_main_7, which is neither a function "
                         "in scope nor an external (no external/npu_main_7.json)")


def test_external_body_calling_a_missing_composite_names_its_member(plan, tmp_path):
    def fn(e):
        e["function"]["graph"]["nodes"][0]["attrs"]["callee"] = "npu.gone"
    p = _rewrite(plan, tmp_path, edit=_edit_json(EXT, fn))
    assert _error(p).startswith(f"{EXT}: @npu_main_0 node 'k0' calls @npu.gone, which is neither")


@pytest.mark.parametrize("member, where, msg", [
    (EXT, lambda d: d, f"{EXT}: unknown field(s) bogus (known: symbol, function, schedules"),
    (EXT, lambda d: d["function"], "@npu_main_0: unknown field(s) bogus"),
    (EXT, lambda d: d["function"]["graph"], "@npu_main_0 body: unknown field(s) bogus"),
    (EXT, lambda d: d["function"]["graph"]["nodes"][1], "node 1: unknown field(s) bogus"),
    (EXT, lambda d: d["function"]["graph"]["inputs"][0], "input 0: unknown field(s) bogus"),
    (EXT, lambda d: d["function"]["graph"]["functions"][0], "function @npu.conv2d_bias_relu_0: unknown field(s) bogus"),
    ("graph.json", lambda d: d["functions"][0], "graph.json: function @npu_main_0 reference has unknown field(s) bogus"),
    ("graph.json", lambda d: d["constants"][0], "constant 0: unknown field(s) bogus"),
    ("graph.json", lambda d: d["nodes"][0]["outputs"][0], "output 0: unknown field(s) bogus"),
])
def test_unknown_fields_are_refused_unless_the_minor_version_is_newer(plan, tmp_path, member, where, msg):
    def fn(d):
        where(d)["bogus"] = 1
    p = _rewrite(plan, tmp_path, edit=_edit_json(member, fn))
    err = _error(p)
    assert msg in err and err.startswith(member), err
    # The same field in a 1.1 archive is an optional addition this 1.0 reader ignores (FORMAT.md 7).
    newer = _rewrite(plan, tmp_path, edit=_edit_json(member, fn),
                     manifest_edit=lambda m: m.update(format_version="1.1"), name="newer.zip")
    mod = read_packed(newer)
    np.testing.assert_allclose(interpret(mod.host_graph, [X])[0], interpret(source_model(), [X])[0], rtol=1e-6)


def test_producer_fields_in_the_manifest_are_ignored(plan, tmp_path):
    p = _rewrite(plan, tmp_path, manifest_edit=lambda m: m.update(plan={"anything": [1, 2]}, x_vendor=3))
    assert read_packed(p).manifest["x_vendor"] == 3


def test_unreferenced_arrays_are_refused(plan, tmp_path):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.zeros(3, np.float32))
    p = _rewrite(plan, tmp_path, edit=_with_entry("stowaway", buf.getvalue()))
    assert _error(p) == "params.npz: array(s) not referenced by any graph: stowaway"


@pytest.mark.parametrize("member, edit, msg", [
    ("graph.json", lambda g: g["nodes"][1]["outputs"][0].update(shape=[1, 65]),
     "graph.json: graph 'tinynet' node 'flatten' (flatten) declares output(s) float32[1,65], but its inputs give "
     "float32[1,64]"),
    ("graph.json", lambda g: g["nodes"][1]["outputs"][0].update(dtype="float16"), "declares output(s) float16[1,64]"),
    ("graph.json", lambda g: g["nodes"][1].update(op="no_such_op"), "node 'flatten' (no_such_op): "),
    (EXT, lambda e: e["function"]["graph"]["nodes"][1]["outputs"][0].update(shape=[1, 4, 4, 5]),
     f"{EXT}: @npu_main_0 node 'k1' (max_pool2d) declares output(s) float32[1,4,4,5]"),
    (EXT, lambda e: e["function"]["graph"]["nodes"][1]["attrs"].update(kernel=[0, 0]), f"{EXT}: @npu_main_0 node 'k1'"),
])
def test_declared_types_must_be_what_the_ops_infer(plan, tmp_path, member, edit, msg):
    """The simulator costs declared shapes: one the op would not produce would be a different
    model from the one that runs, so the reader refuses it."""
    p = _rewrite(plan, tmp_path, edit=_edit_json(member, edit))
    err = _error(p)
    assert err.startswith(member) and msg in err, err


def test_one_tensor_over_the_cap(tmp_path):
    """A few hundred bytes of JSON may declare a tensor of any size; `run` would make random inputs
    of that size, so no tensor may exceed the per-member cap (1 GiB by default)."""
    from partition import Graph, graph_hash, write_packed
    from test_packed import manifest_fields
    for n, ok in ((2**28, True), (2**28 + 1, False)):
        g = Graph("wide")
        g.set_outputs([g.add_node("relu", [g.add_input("x", (1, n))]).output])
        fields = manifest_fields(model={"name": "wide", "source_graph_hash": graph_hash(g)},
                                 predicted={"latency_s": 0.0, "energy_j": 0.0, "functions": {}})
        p = tmp_path / f"w{n}.zip"
        write_packed(p, manifest_fields=fields, host_graph=g, externals={})
        if ok:
            assert read_packed(p).host_graph.inputs[0].shape == (1, n)
        else:
            assert _error(p) == ("graph.json: graph 'wide' input 'x' is float32[1,268435457] (1,073,741,828 bytes), "
                                 "over the 1,073,741,824-byte cap on one tensor")


def test_a_key_given_twice_is_refused(plan, tmp_path):
    def edit(m):
        m["graph.json"] = m["graph.json"].replace(b'{"name":"tinynet",', b'{"name":"tinynet","name":"other",', 1)
    p = _rewrite(plan, tmp_path, edit=edit)
    assert _error(p) == "graph.json: invalid JSON: key 'name' appears twice in one object"


def test_devices_pipes_and_folders_are_refused_without_blocking(tmp_path):
    import os
    os.mkfifo(tmp_path / "fifo.zip")  # opening it would block until a writer comes
    (tmp_path / "zero.zip").symlink_to("/dev/zero")  # reading it never ends
    for p in (tmp_path / "fifo.zip", tmp_path / "zero.zip", tmp_path):
        assert _error(p) == f"{p}: not a regular file (a directory, device or pipe)"
