"""What the device runtime (and ``accel-tune inspect``) refuse in an archive that read_packed
accepts: a hardware object that is not one complete, valid machine, and schedules that are
partial or of the wrong JSON types."""
import json

import numpy as np
import pytest

import sim
from sim.graph.runtime import RuntimeLoadError, hardware_of, load
from test_runtime import HW, X, conv_workload, manifest_fields, tinynet, write_tinynet
from tuner.cli import main


def _with_hardware(tmp_path, hw_doc):
    ext = {"npu_main_0": {"schedules": {}}}
    f = manifest_fields(tinynet(), ext)
    f["hardware"] = hw_doc
    return write_tinynet(tmp_path / "t.zip", manifest_fields=f, externals=ext)


def _partial():
    d = HW.to_dict()
    del d["link"]
    return d


def _field(path, value):
    d = HW.to_dict()
    sec, f = path.split(".")
    d[sec][f] = value
    return d


@pytest.mark.parametrize("hw_doc, msg", [
    ({}, "hardware config is incomplete: name, array, buffers, dram, vector, clock, ... missing"),
    (_partial(), "hardware config is incomplete: link missing"),
    ({**HW.to_dict(), "dram": {"bytes_per_cycle": 11.0}}, "incomplete: dram.latency_cycles missing"),
    (_field("clock.freq_mhz", 1e-300), "hardware.clock.freq_mhz must be a number from 1 to 100000 MHz"),
    (_field("array.rows", 2**32), "hardware.array.rows must be an integer from 1 to 4,096"),
    ({**HW.to_dict(), "name": ""}, "hardware.name must be a non-empty string"),
])
def test_archive_hardware_must_be_one_complete_valid_machine(tmp_path, capsys, hw_doc, msg):
    p = _with_hardware(tmp_path, hw_doc)
    with pytest.raises(RuntimeLoadError) as e:
        load(p)
    assert str(e.value).startswith("manifest.json: hardware is not a valid hardware config: ") and msg in str(e.value)
    for cmd in (["inspect", str(p)], ["inspect", str(p), "--json"], ["run", str(p)]):
        assert main(cmd) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0]


def test_non_finite_hardware_cannot_even_be_written(tmp_path):
    """inf has no strict-JSON spelling: the writer refuses it, so it can only arrive as a number
    out of range, which the reader refuses above."""
    from partition import PackedFormatError
    with pytest.raises(PackedFormatError, match="manifest.json: not JSON-serialisable"):
        _with_hardware(tmp_path, _field("link.bytes_per_s", float("inf")))


def test_a_complete_hardware_object_round_trips():
    assert hardware_of({"hardware": HW.to_dict()}) == HW
    with pytest.raises(RuntimeLoadError, match="hardware must be an object"):
        hardware_of({"hardware": [1]})


def _schedule(**over):
    d = sim.default_schedule(conv_workload(), HW).to_dict()
    d.update(over)
    return {k: v for k, v in d.items() if v is not ...}


@pytest.mark.parametrize("over, msg", [
    ({"tile_m": ...}, "schedule of kernel 'k0' lacks tile_m"),
    ({"epilogue": "relu"}, "epilogue must be a list of strings, got 'relu'"),
    ({"spatial": "kn"}, "spatial must be a list of strings, got 'kn'"),
    ({"tile_n": True}, "tile_n must be int, got True"),
    ({"tile_k": 2.0}, "tile_k must be int, got 2.0"),
    ({"double_buffer": 1}, "double_buffer must be bool, got 1"),
    ({"epilogue": [1]}, "epilogue must be a list of strings"),
    ({"extra": 1}, "unknown schedule field(s): extra"),
])
def test_schedules_must_be_complete_and_typed(tmp_path, over, msg):
    ext = {"npu_main_0": {"schedules": {"k0": _schedule(**over)}}}
    p = write_tinynet(tmp_path / "t.zip", externals=ext)
    with pytest.raises(RuntimeLoadError) as e:
        load(p)
    assert str(e.value).startswith("external/npu_main_0.json: schedule of kernel 'k0'") and msg in str(e.value)


def test_cli_run_float64_inputs(tmp_path, capsys):
    p = write_tinynet(tmp_path / "t.zip")
    exact = tmp_path / "exact.npz"
    np.savez(exact, x=X.astype(np.float64))
    inexact = tmp_path / "inexact.npz"
    np.savez(inexact, x=X.astype(np.float64) + 1e-12)
    with pytest.warns(UserWarning, match=r"input 'x': cast from float64 to float32 \(every value is exact\)"):
        assert main(["run", str(p), "--inputs", str(exact), "--json"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert ran["outputs"]["softmax_1"]["dtype"] == "float32"
    assert main(["run", str(p), "--inputs", str(inexact)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"accel-tune: error: {inexact}: input 'x': expected dtype float32, got float64, and 192 of 192 "
                   f"values would change in the cast; convert them yourself (e.g. .astype(np.float32))"]
    strings = tmp_path / "s.npz"
    np.savez(strings, x=np.full(X.shape, "1.5"))
    assert main(["run", str(p), "--inputs", str(strings)]) == 2
    assert "s.npz: array 'x' has dtype '<U3'; arrays are bool, integer, float or complex" in capsys.readouterr().err


def test_cli_run_inputs_with_a_lying_npy_header(tmp_path, capsys):
    """An inputs .npz is untrusted too: its headers are checked before anything is allocated."""
    import tracemalloc
    import zipfile
    p = write_tinynet(tmp_path / "t.zip")
    hdr = repr({"descr": "<f4", "fortran_order": False, "shape": (2**31, 4)}).encode()
    hdr += b" " * (117 - len(hdr)) + b"\n"
    with zipfile.ZipFile(tmp_path / "lie.npz", "w") as z:
        z.writestr("x.npy", b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr + bytes(64))
    tracemalloc.start()
    assert main(["run", str(p), "--inputs", str(tmp_path / "lie.npz")]) == 2
    assert tracemalloc.get_traced_memory()[1] < 64 * 2**20
    tracemalloc.stop()
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"accel-tune: error: {tmp_path / 'lie.npz'}: array 'x': header declares float32[2147483648,4] "
                   f"(34,359,738,368 bytes) but the entry holds 64 bytes of data"]


def test_a_loop_of_absurd_trips_stops_at_the_op_budget(tmp_path, capsys):
    """A Loop's trip count is data: 10**12 trips of byoc_demo's body would run for years."""
    import io
    import zipfile

    import tuner
    from partition import models, read_packed
    from sim.graph.runtime import DEFAULT_MAX_OPS, RunLimitError
    plan = tmp_path / "p.zip"
    tuner.tune(models.get("byoc_demo"), "edge-npu", trials=0, progress=False).save(plan)
    assert int(read_packed(plan).params["trip_count"]) < 100
    with zipfile.ZipFile(plan) as z:
        members = {n: z.read(n) for n in z.namelist()}
    with zipfile.ZipFile(io.BytesIO(members["params.npz"])) as z:
        ents = {n: z.read(n) for n in z.namelist()}
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array(10**12, np.int64))
    ents["trip_count.npy"] = buf.getvalue()
    npz = io.BytesIO()
    with zipfile.ZipFile(npz, "w") as z:
        for n, d in ents.items():
            z.writestr(n, d)
    members["params.npz"] = npz.getvalue()
    man = json.loads(members["manifest.json"])
    man["members"]["params.npz"] = {"sha256": __import__("hashlib").sha256(members["params.npz"]).hexdigest(),
                                    "size": len(members["params.npz"])}
    members["manifest.json"] = json.dumps(man).encode()
    bad = tmp_path / "trips.zip"
    with zipfile.ZipFile(bad, "w") as z:
        for n, d in members.items():
            z.writestr(n, d)
    mod = load(bad)
    with pytest.raises(ValueError, match="the run executed more than 1,000 ops"):
        mod.run(sim.graph.runtime.example_inputs(mod), max_ops=1000)
    assert main(["run", str(bad), "--max-ops", "500"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the run executed more than 500 ops" in err[0] and "--max-ops" in err[0]
    assert main(["run", str(plan), "--max-ops", "0"]) == 2
    assert "--max-ops must be >= 1" in capsys.readouterr().err
    assert DEFAULT_MAX_OPS == 200_000 and issubclass(RunLimitError, ValueError)
