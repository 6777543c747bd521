"""accel-tune llm: the JSON fields of the issue, the table, records reuse, one-line errors."""
import json

import numpy as np

import pytest

from tuner.cli import main

HW = """base = "cloud-npu"
name = "npu-pair"
[memory]
capacity_bytes = 17179869184
[interconnect]
max_devices = 4
bytes_per_s = 100e9
latency_s = 2e-6
topology = "ring"
"""


@pytest.fixture(scope="module")
def hwfile(tmp_path_factory):
    p = tmp_path_factory.mktemp("llm") / "npu.toml"
    p.write_text(HW)
    return str(p)


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


BASE = ["llm", "--model", "llama-3.2-1b", "--batch", "4", "--input-len", "128", "--output-len", "16",
        "--dtype", "bf16"]


def test_json_fields(capsys, hwfile):
    rc, out, err = run(capsys, *BASE, "--hw", hwfile, "--tp", "2", "--json")
    assert rc == 0, err
    d = json.loads(out)
    for k in ("ttft_ms", "tpot_ms", "e2e_ms", "throughput_tok_s", "throughput_tok_s_per_device",
              "energy_j_per_token", "memory", "phases", "schedules", "calibrated"):
        assert k in d
    assert set(d["memory"]) >= {"weights_bytes", "kv_bytes", "activation_bytes", "peak_bytes", "capacity_bytes",
                                "fits", "max_batch"}
    assert d["calibrated"] is False and d["memory"]["capacity_bytes"] == 17179869184
    assert d["throughput_tok_s"] == pytest.approx(4 * 16 / (d["e2e_ms"] / 1e3))
    assert d["throughput_tok_s_per_device"] == pytest.approx(d["throughput_tok_s"] / 2)
    assert d["e2e_ms"] == pytest.approx(d["ttft_ms"] + 15 * d["tpot_ms"])
    k = d["phases"]["decode"]["kernels"]
    assert {"compute_s", "memory_s", "interconnect_s"} <= set(k[0])
    assert all(s["source"] == "default schedule" and s["schedule"] for s in d["schedules"])
    assert d["phases"]["prefill"]["attention_form"] in ("fused", "unfused")


def test_table(capsys, hwfile):
    rc, out, _ = run(capsys, *BASE, "--hw", hwfile)
    assert rc == 0
    assert "time to first token" in out and "largest batch that fits" in out and "decode:" in out


def test_tuned_records_are_used(capsys, hwfile, tmp_path):
    log = tmp_path / "log.jsonl"
    rc, out, err = run(capsys, "llm", "--model", "gpt2", "--hw", hwfile, "--batch", "1", "--input-len", "8",
                       "--output-len", "2", "--dtype", "bf16", "--trials", "16", "--log", str(log), "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert any(s["source"] == "tuned" for s in d["schedules"]) and log.exists()
    rc, out2, _ = run(capsys, "llm", "--model", "gpt2", "--hw", hwfile, "--batch", "1", "--input-len", "8",
                      "--output-len", "2", "--dtype", "bf16", "--log", str(log), "--json")
    assert json.loads(out2)["ttft_ms"] == pytest.approx(d["ttft_ms"])


def test_config_json_model(capsys, hwfile, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "gpt2", "n_embd": 128, "n_layer": 2, "n_head": 4, "vocab_size": 1000,
                               "n_positions": 256}))
    rc, out, err = run(capsys, "llm", "--model", str(cfg), "--hw", hwfile, "--batch", "2", "--input-len", "16",
                       "--output-len", "4", "--dtype", "bf16", "--json")
    assert rc == 0, err
    assert json.loads(out)["model_info"]["params"] > 0


@pytest.mark.parametrize("extra,needle", [
    (["--model", "llama-9"], "unknown model 'llama-9'"),
    (["--input-len", "0"], "input-len must be an integer >= 1"),
    (["--output-len", "-2"], "output-len must be an integer >= 1"),
    (["--dtype", "fp64"], "--dtype 'fp64' is not one of"),
    (["--dtype", "fp32"], "computes in fp32, but npu-pair's array computes in bf16"),
    (["--tp", "8"], "needs 8 devices, but npu-pair connects at most 4"),
    (["--tp", "3"], "not divisible by 3"),
    (["--calibration", "x.json"], "calibration file not found"),
])
def test_errors_one_line(capsys, hwfile, extra, needle):
    argv = list(BASE) + ["--hw", hwfile]
    for i in range(0, len(extra), 2):
        if extra[i] in argv:
            argv[argv.index(extra[i]) + 1] = extra[i + 1]
        else:
            argv += extra[i:i + 2]
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and needle in err and err.count("\n") == 1 and err.startswith("accel-tune: error:")


def test_bad_config_json_and_onnx(capsys, hwfile, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    rc, _, err = run(capsys, "llm", "--model", str(cfg), "--hw", hwfile, "--batch", "1", "--input-len", "4",
                     "--output-len", "2")
    assert rc == 2 and "'num_attention_heads' is missing" in err and err.count("\n") == 1
    onnx = tmp_path / "dec.onnx"
    onnx.write_bytes(b"\x00")
    rc, _, err = run(capsys, "llm", "--model", str(onnx), "--hw", hwfile, "--batch", "1", "--input-len", "4",
                     "--output-len", "2")
    assert rc == 2 and "not a readable ONNX file" in err and err.count("\n") == 1


def test_batch_that_does_not_fit_is_a_result(capsys, hwfile):
    rc, out, err = run(capsys, "llm", "--model", "llama-3.1-8b", "--hw", hwfile, "--batch", "64", "--input-len",
                       "2048", "--output-len", "8", "--dtype", "bf16", "--json")
    assert rc == 0, err
    m = json.loads(out)["memory"]
    assert m["fits"] is False and 0 <= m["max_batch"] < 64


def test_models_lists_llms(capsys):
    rc, out, _ = run(capsys, "models", "--llm", "--json")
    rows = json.loads(out)
    assert rc == 0 and len(rows) == 12 and {r["name"] for r in rows} >= {"falcon-180b", "mixtral-8x7b"}


def test_defaults_cached_in_the_log(tmp_path, hwfile):
    import sim
    from partition.llm.source import source_for
    from sim.graph.serving import ServingPoint
    from tuner.llm import serve_llm
    from tuner.records import load_records
    hw, log = sim.load_hw(hwfile), tmp_path / "log.jsonl"
    p = ServingPoint(2, 16, 4, tp=2, dtype="bf16")
    a = serve_llm(source_for("gpt2"), hw, p, log=log)
    recs = load_records(log)
    assert {r.measurer for r in recs} == {"default"} and len(recs) == len(a.schedules)
    b = serve_llm(source_for("gpt2"), hw, p, log=log)
    assert {s["source"] for s in b.schedules} == {"cached default"}
    assert b.ttft_s == a.ttft_s and np.array_equal(b.step_s, a.step_s)
    assert len(load_records(log)) == len(recs)  # nothing new to keep


ORACLE_OPS = __import__("pathlib").Path(__file__).resolve().parents[2].parent / "shared/oracle/llm/measured_ops.jsonl"


@pytest.mark.skipif(not ORACLE_OPS.exists(), reason="../shared/oracle absent")
def test_calibration_scales_the_kernels(capsys, tmp_path):
    """A device calibration (from measured rows) rescales each kernel by its own factor: every
    calibrated kernel's cycles are its uncalibrated cycles times the factor its source names."""
    cal = tmp_path / "cal.json"
    assert run(capsys, "calibrate", "--measurements", str(ORACLE_OPS), "--hw", "cloud-npu", "-o", str(cal))[0] == 0
    args = ["llm", "--model", "llama-3.2-1b", "--hw", "cloud-npu", "--batch", "1", "--input-len", "64",
            "--output-len", "4", "--json"]
    plain = json.loads(run(capsys, *args)[1])
    rc, out, _ = run(capsys, *args, "--calibration", str(cal))
    calibrated = json.loads(out)
    assert rc == 0 and calibrated["calibrated"] is True and plain["calibrated"] is False
    before = {s["workload"]: s["cycles"] for s in plain["schedules"]}
    scaled = [s for s in calibrated["schedules"] if "calibrated x" in s["source"]]
    assert scaled
    for s in scaled:
        k = float(s["source"].rsplit("x", 1)[1])
        assert s["cycles"] == pytest.approx(before[s["workload"]] * k, rel=2e-3, abs=2)
    assert calibrated["ttft_ms"] != plain["ttft_ms"]
