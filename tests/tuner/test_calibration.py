"""Issue 19 (3): the learned calibration (``tuner.calibration``): the file round-trips and refuses
a mismatched or corrupt copy, the fit removes a known bias, the costs and every JSON it touches
say ``calibrated``, device rows are read (and malformed ones refused in one line)."""
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("xgboost")
from hypothesis import given, settings, strategies as st  # noqa: E402

import sim  # noqa: E402
from tuner.calibration import (CalibrationError, fit_calibration, host_sample,  # noqa: E402
                               load_calibration, machine_fingerprint, read_calibration, roofline_sample,
                               cpu_identity, machine_line)
from tuner.cli import main  # noqa: E402

ORACLE = Path(__file__).resolve().parents[3] / "shared" / "oracle" / "llm" / "measured_ops.jsonl"
REF = {"peak_flops": 50e9, "mem_bytes_per_s": 20e9, "op_overhead_s": 2e-6}


def synthetic(n: int, seed: int):
    """Ops whose true time is the analytical one times a known bias: compute-bound work runs 4x
    slower than the reference peak, memory-bound 0.5x, and ``relu`` pays 3 us more dispatch."""
    rng = np.random.default_rng(seed)
    samples, truth = [], []
    for i in range(n):
        op = ("conv2d", "add", "relu")[i % 3]
        elems = float(10 ** rng.uniform(2, 6))
        flops = elems * (10 ** rng.uniform(1, 3) if op == "conv2d" else 1.0)
        s = roofline_sample(op, flops, 8 * elems, elems, elems, 4, 2, 1, 1, REF["peak_flops"],
                            REF["mem_bytes_per_s"], REF["op_overhead_s"])
        t = max(4 * s.compute_s, 0.5 * s.memory_s) + REF["op_overhead_s"] + (3e-6 if op == "relu" else 0.0)
        samples.append(s)
        truth.append(t)
    return samples, np.array(truth)


_FITTED: dict = {}


def host_cal(tmp_path, fingerprint=None):
    """A host calibration fitted once per session on the synthetic rows, saved under
    ``tmp_path`` with this machine's fingerprint (or ``fingerprint``)."""
    if "cal" not in _FITTED:
        s, t = synthetic(180, 0)
        _FITTED["cal"] = fit_calibration(s, t, kind="host", fingerprint=machine_fingerprint()["fingerprint"],
                                         hardware="test host", rows=[{"i": i, "t": float(v)} for i, v in enumerate(t)],
                                         reference_host=REF, rounds=150)
    cal = _FITTED["cal"]
    if fingerprint is not None:
        cal = replace(cal, fingerprint=fingerprint, _state={})
    path = tmp_path / "cal.json"
    cal.save(path)
    return cal, path


def test_the_fit_removes_a_known_bias_on_held_out_rows(tmp_path):
    cal, _ = host_cal(tmp_path)
    test, truth = synthetic(120, 1)  # other sizes than the training rows
    analytical = np.array([s.analytical_s for s in test])
    err_a = np.median(np.abs(analytical / truth - 1))
    err_c = np.median(np.abs(cal.predict_seconds(test) / truth - 1))
    assert err_a > 0.4          # the bias is real
    assert err_c < err_a / 4    # and the calibration learns most of it


def test_round_trip_keeps_predictions_and_hash(tmp_path):
    cal, path = host_cal(tmp_path)
    back = load_calibration(path)
    test, _ = synthetic(30, 2)
    np.testing.assert_allclose(back.predict_seconds(test), cal.predict_seconds(test), rtol=1e-6)
    assert (back.kind, back.fingerprint, back.data_sha256, back.ops) == (cal.kind, cal.fingerprint,
                                                                         cal.data_sha256, cal.ops)
    doc = json.loads(path.read_text())
    assert doc["features"][:3] == ["log_flops", "log_bytes", "log_out_elems"] and "op=relu" in doc["features"]
    assert doc["reference_host"] == REF


def test_the_data_hash_depends_on_the_data(tmp_path):
    s, t = synthetic(30, 0)
    a = fit_calibration(s, t, kind="host", fingerprint="f", hardware="h", rows=[{"t": 1.0}], reference_host=REF, rounds=5)
    b = fit_calibration(s, t, kind="host", fingerprint="f", hardware="h", rows=[{"t": 2.0}], reference_host=REF, rounds=5)
    assert a.data_sha256 != b.data_sha256 and len(a.data_sha256) == 64


# the first lines of /proc/cpuinfo of two KVM guests that both call their CPU "AMD EPYC": a Zen 1
# host (AVX2; resnet50 113 ms in onnxruntime) and a Zen 4 one (AVX-512; 38 ms)
ZEN1 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 2
flags\t\t: fpu sse sse2 sse4_1 sse4_2 avx f16c fma avx2 bmi2 sha_ni

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
"""
ZEN4 = ZEN1.replace("family\t: 23", "family\t: 25").replace("model\t\t: 1", "model\t\t: 17").replace(
    "sha_ni", "avx512f avx512bw avx512dq avx512vl avx512_vnni avx512_bf16")


def test_a_machine_is_its_cpu_family_model_isa_and_caches_not_only_its_name(tmp_path):
    """Two guests named "AMD EPYC" (Zen 1 with AVX2, Zen 4 with AVX-512) ran resnet50 at 113 and
    38 ms: their identities, and so their fingerprints, differ, and a calibration of one is
    refused on the other in one line that names it. The first processor is read, the flags only
    as far as onnxruntime's kernels choose by them; an Arm CPU by its implementer and part."""
    caches = ["L3 Unified 8192K", "L1 Data 32K"]
    a = cpu_identity(ZEN1, caches, 2, "x86_64")
    b = cpu_identity(ZEN4, caches, 2, "x86_64")
    assert a["cpu"] == b["cpu"] == "AMD EPYC"
    assert a["id"] == {"vendor_id": "AuthenticAMD", "cpu family": "23", "model": "1", "stepping": "2",
                       "model name": "AMD EPYC"}
    assert a["isa"] == ["avx", "avx2", "f16c", "fma", "sse4_1", "sse4_2"] and "avx512f" in b["isa"]
    assert a["caches"] == ["L1 Data 32K", "L3 Unified 8192K"]
    assert machine_line(a) == "AMD EPYC (family 23 model 1 stepping 2; avx avx2; L3 8192K) x2"
    assert "avx512f" in machine_line(b) and "family 25 model 17" in machine_line(b)
    # each field alone moves the identity
    for other in (cpu_identity(ZEN1, caches[:1], 2, "x86_64"), cpu_identity(ZEN1, caches, 4, "x86_64"),
                  cpu_identity(ZEN1.replace("stepping\t: 2", "stepping\t: 3"), caches, 2, "x86_64"), b):
        assert other != a
    assert cpu_identity(ZEN1 + "garbage line without a colon", caches, 2, "x86_64") == a
    arm = cpu_identity("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd asimddp sve i8mm crc32\n"
                       "CPU implementer\t: 0x41\nCPU part\t: 0xd40\n", (), 8, "aarch64", processor="")
    assert arm["isa"] == ["asimd", "asimddp", "i8mm", "sve"] and arm["id"] == {"CPU implementer": "0x41",
                                                                                "CPU part": "0xd40"}
    assert machine_line(arm) == "unknown (implementer 0x41 part 0xd40; sve) x8"
    assert cpu_identity("", (), 1, "arm64", processor="arm")["cpu"] == "arm"
    # this machine's: a fingerprint of its identity, stable from call to call
    here = machine_fingerprint()
    assert here == machine_fingerprint() and len(here["fingerprint"]) == 64 and here["hardware"].endswith(
        f"x{here['logical_cpus']}")
    import hashlib
    import json
    fp = {k: hashlib.sha256(json.dumps(v, sort_keys=True).encode()).hexdigest() for k, v in (("a", a), ("b", b))}
    assert fp["a"] != fp["b"]
    _, path = host_cal(tmp_path, fingerprint=fp["b"])
    with pytest.raises(CalibrationError, match="another machine"):
        load_calibration(path, machine=fp["a"])


def test_refuses_another_machine_and_another_hardware(tmp_path):
    _, path = host_cal(tmp_path, fingerprint="0" * 64)
    with pytest.raises(CalibrationError, match="another machine"):
        load_calibration(path)
    assert load_calibration(path, machine="0" * 64).kind == "host"
    s, t = synthetic(30, 0)
    dev = fit_calibration(s, t, kind="device", fingerprint=sim.load_hw("cloud-npu").fingerprint(),
                          hardware="cloud-npu", rows=[], rounds=5)
    dev.save(tmp_path / "dev.json")
    assert load_calibration(tmp_path / "dev.json", sim.load_hw("cloud-npu")).kind == "device"
    with pytest.raises(CalibrationError, match="fitted for hardware cloud-npu"):
        load_calibration(tmp_path / "dev.json", sim.load_hw("edge-npu"))


@pytest.mark.parametrize("damage, message", [
    (lambda t: t[: len(t) // 2], "not valid JSON"),
    (lambda t: t.replace('"kind": "host"', '"kind": "gpu"'), "kind 'gpu'"),
    (lambda t: t.replace('"data_sha256"', '"data_sha"'), "field 'data_sha256'"),
    (lambda t: t.replace('"format": "accel-tune-calibration"', '"format": "x"'), "not an accel-tune calibration"),
])
def test_refuses_a_corrupt_file_in_one_line(tmp_path, damage, message):
    _, path = host_cal(tmp_path)
    path.write_text(damage(path.read_text()))
    with pytest.raises(CalibrationError, match=message) as e:
        read_calibration(path)
    assert "\n" not in str(e.value)


def test_no_prediction_is_faster_than_the_datas_fastest_mac(tmp_path):
    """The file keeps the fastest FLOP rate a MAC row of its data reached, and no prediction beats
    it: a convolution a thousand times larger than any trained on costs at least its FLOPs at that
    rate, whatever the trees say past their data."""
    cal, path = host_cal(tmp_path)
    s, t = synthetic(180, 0)
    peak = max(x.flops / m for x, m in zip(s, t) if x.op == "conv2d")
    assert cal.meta["peak_flops_per_s"] == pytest.approx(peak)
    assert load_calibration(path).meta["peak_flops_per_s"] == pytest.approx(peak)
    big = roofline_sample("conv2d", 1e13, 1e9, 1e7, 1e7, 4, 2, 1, 1, REF["peak_flops"], REF["mem_bytes_per_s"],
                          REF["op_overhead_s"])
    assert cal.predict_seconds([big])[0] >= 1e13 / peak * (1 - 1e-12)
    # the rows themselves keep their learned costs, above the floor
    pred = cal.predict_seconds(s)
    raw = np.array([x.analytical_s for x in s]) * np.exp(cal.predict_log_ratio(s))
    assert np.mean(pred == raw) > 0.9


@pytest.mark.parametrize("value", ["-1", "0", "\"fast\"", "true"])
def test_refuses_a_bad_peak_rate_in_one_line(tmp_path, value):
    _, path = host_cal(tmp_path)
    doc = json.loads(path.read_text())
    doc["meta"]["peak_flops_per_s"] = json.loads(value)
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError, match="peak_flops_per_s must be a number > 0") as e:
        read_calibration(path)
    assert "\n" not in str(e.value)


def test_refuses_a_tampered_booster(tmp_path):
    _, path = host_cal(tmp_path)
    doc = json.loads(path.read_text())
    doc["booster"]["learner"]["learner_model_param"]["base_score"] = "[9E0]"
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError, match="sha256"):
        read_calibration(path)


def test_host_seconds_replaces_the_host_model_and_reaches_graph_cost(tmp_path):
    from partition import models
    from tuner.costing import CostOptions, KernelCoster, graph_cost
    cal, _ = host_cal(tmp_path)
    g = models.get("bert_tiny")  # no control flow: each node runs once
    hw = sim.load_hw("edge-npu")
    opts = CostOptions(fidelity="analytical", calibration=cal)
    got = graph_cost(g, KernelCoster(hw, opts=opts), opts).total.host_s
    # independently: every host op's calibrated prediction
    from tuner.calibrate_host import walk_nodes
    host = sim.hw.config.HostConfig(**REF)
    want = 0.0
    for n in walk_nodes(g):
        want += float(cal.predict_seconds([host_sample(n, host)])[0])
    assert got == pytest.approx(want, rel=1e-6)
    assert got != pytest.approx(graph_cost(g, KernelCoster(hw), CostOptions(fidelity="analytical")).total.host_s)


def test_scaled_report_keeps_its_parts_adding_up():
    from sim.graph.subgraph import scaled_report
    hw = sim.load_hw("edge-npu")
    wl = sim.Workload.gemm(64, 64, 64)
    rep = sim.simulate(wl, hw, sim.default_schedule(wl, hw), fidelity="analytical")
    for k in (0.3, 1.0, 2.5):
        r = scaled_report(rep, k)
        assert r.total_cycles == max(1, round(rep.total_cycles * k))
        assert r.prologue_cycles + r.compute_cycles + r.stall_cycles + r.epilogue_cycles == r.total_cycles
        assert min(r.prologue_cycles, r.compute_cycles, r.stall_cycles, r.epilogue_cycles) >= 0


# ------------------------------------------------------------------------------------- the CLI
def _json(argv, capsys):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _one_line_error(argv, capsys, match):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("accel-tune: error:") and "\n" not in err and match in err, err
    return err


def test_json_says_calibrated(tmp_path, capsys):
    _, path = host_cal(tmp_path)
    base = ["simulate", "--model", "byoc_demo", "--hw", "edge-npu", "--json"]
    plain = _json(base, capsys)
    cal = _json(base + ["--calibration", str(path)], capsys)
    assert plain["calibrated"] is False and cal["calibrated"] is True
    assert cal["host_s"] != pytest.approx(plain["host_s"])
    tune = ["tune", "--model", "byoc_demo", "--hw", "edge-npu", "--trials", "0", "--json"]
    assert _json(tune, capsys)["calibrated"] is False
    t = _json(tune + ["--calibration", str(path)], capsys)
    assert t["calibrated"] is True and t["calibration"]["kind"] == "host"
    p = _json(["partition", "--model", "byoc_demo", "--target", "edge-npu", "--json", "--calibration", str(path)],
              capsys)
    assert p["calibrated"] is True and p["cost"]["host_s"] == pytest.approx(cal["host_s"])


def test_cli_errors_are_one_line(tmp_path, capsys):
    _, path = host_cal(tmp_path, fingerprint="1" * 64)
    _one_line_error(["simulate", "--model", "byoc_demo", "--hw", "edge-npu", "--calibration", str(path)], capsys,
                    "another machine")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _one_line_error(["tune", "--model", "byoc_demo", "--hw", "edge-npu", "--calibration", str(bad)], capsys,
                    "not valid JSON")
    _one_line_error(["partition", "--model", "byoc_demo", "--target", "npu-gemm", "--calibration", str(bad)],
                    capsys, "hardware preset")
    _one_line_error(["calibrate", "--measurements", str(bad), "-o", str(tmp_path / "o.json")], capsys, "--hw")


@pytest.mark.parametrize("row, field", [
    ({"op": "matmul", "shape": {"M": 4, "K": 4}, "dtype": "fp16", "measured_s": 1e-5}, "'shape'"),
    ({"op": "conv", "shape": {"M": 4}, "dtype": "fp16", "measured_s": 1e-5}, "'op'"),
    ({"op": "softmax", "shape": {"M": 4, "N": 8}, "dtype": "fp16", "measured_s": -1}, "'measured_s'"),
    ({"op": "softmax", "shape": {"M": 4, "N": 8}, "dtype": "int3", "measured_s": 1e-5}, "'dtype'"),
    ({"op": "softmax", "shape": {"M": 4, "N": 0}, "dtype": "fp16", "measured_s": 1e-5}, "'shape'"),
])
def test_malformed_rows_name_the_row_and_field(tmp_path, capsys, row, field):
    good = {"op": "softmax", "shape": {"M": 64, "N": 64}, "dtype": "fp16", "measured_s": 1e-5}
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in (good, good, row)) + "\n")
    err = _one_line_error(["calibrate", "--measurements", str(rows), "--hw", "cloud-npu", "-o",
                           str(tmp_path / "c.json")], capsys, field)
    assert "line 3" in err


@pytest.mark.skipif(not ORACLE.exists(), reason="../shared/oracle is absent")
def test_measurements_path_on_oracle_rows(tmp_path, capsys):
    lines = ORACLE.read_text().splitlines()
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(lines[::4]) + "\n")  # both ops, a few shapes
    out = tmp_path / "dev.json"
    s = _json(["calibrate", "--measurements", str(rows), "--hw", "cloud-npu", "-o", str(out), "--json"], capsys)
    assert s["kind"] == "device" and s["rows"] == len(lines[::4]) and set(s["ops"]) == {"matmul", "softmax"}
    assert s["fit"]["calibrated_median_error"] < s["fit"]["analytical_median_error"]
    cal = load_calibration(out, sim.load_hw("cloud-npu"))
    # the device calibration scales the kernel of a row as the fit predicts: device + launch = prediction
    from tuner.calibrate_device import read_rows, row_node, row_sample
    r = read_rows(str(rows))[0]
    hw = sim.load_hw("cloud-npu")
    wl = sim.workload_of(row_node(r))
    rep = sim.simulate(wl, hw, sim.default_schedule(wl, hw), fidelity="analytical")
    k = cal.kernel_scale(wl, rep, hw)
    pred = float(cal.predict_seconds([row_sample(r, hw)])[0])
    assert rep.total_cycles / hw.clock_hz * k + hw.link.launch_latency_s == pytest.approx(pred, rel=1e-6)
    _one_line_error(["tune", "--model", "byoc_demo", "--hw", "edge-npu", "--calibration", str(out)], capsys,
                    "fitted for hardware cloud-npu")
    _one_line_error(["sweep", "spec.toml", "-o", str(tmp_path / "s"), "--calibration", str(out)], capsys,
                    "host calibration")


def test_measurer_command_fills_rows(tmp_path, capsys):
    import sys
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps({"op": "softmax", "shape": {"M": 64 * (i + 1), "N": 128}, "dtype": "fp16"})
                              for i in range(5)) + "\n")
    meas = tmp_path / "m.py"
    meas.write_text("import json, sys\nr = json.load(sys.stdin)\n"
                    "print(json.dumps({'measured_s': 1e-6 * r['shape']['M']}))\n")
    s = _json(["calibrate", "--measurements", str(rows), "--hw", "cloud-npu", "-o", str(tmp_path / "c.json"),
               "--measurer", f"{sys.executable} {meas}", "--json"], capsys)
    assert s["rows"] == 5
    _one_line_error(["calibrate", "--measurements", str(rows), "--hw", "cloud-npu", "-o", str(tmp_path / "d.json")],
                    capsys, "'measured_s'")


def test_one_node_onnx_matches_the_reference(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from partition import models
    from partition.onnx.export import node_to_onnx
    from tuner.calibrate_host import random_feed
    g = models.get("resnet18")
    node = next(n for n in g.nodes if n.op == "conv2d")
    m = node_to_onnx(node)
    feed = random_feed(m.graph.input, np.random.default_rng(0))
    got = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    from partition.ops import get_op
    want = get_op(node.op).compute([feed[m.graph.input[0].name]] + [v.data for v in node.inputs[1:]], node.attrs)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_calibrate_host_on_a_tiny_op_set(tmp_path, capsys):
    out = tmp_path / "host.json"
    s = _json(["calibrate", "--host", "--models", "bert_tiny", "--ops", "add,relu,softmax,matmul", "--max-per-op", "3",
               "--min-time", "0", "-o", str(out), "--json"], capsys)
    assert s["kind"] == "host" and set(s["ops"]) <= {"add", "relu", "softmax", "matmul"} and s["rows"] >= 4
    cal = load_calibration(out)
    assert cal.meta["session_options"] == "default" and "intra_op_threads" in cal.meta
    assert 0.0 < cal.meta["profiler_overhead_s"] < 1e-3    # what the profiler adds to each kernel event
    assert cal.meta["weighted"] is True                    # every model the same say (model_weights)


def test_control_flow_costs_its_measured_cost_on_a_host_file(tmp_path):
    """byoc_demo's Loop and If: graph costing adds the body's nodes (each once per trip) and, on a
    host calibration, each control node's measured cost (``meta["control_flow"]``), nothing in a
    file without it; a device file keeps the analytical host model for them."""
    from partition import models
    from tuner.calibrate_control import ControlCost
    from tuner.calibrate_host import walk_weighted
    from tuner.costing import CostOptions, KernelCoster, graph_cost
    cal, _ = host_cal(tmp_path)
    g = models.get("byoc_demo")
    hw = sim.load_hw("edge-npu")
    host = sim.hw.config.HostConfig(**REF)
    body = sum(w * float(cal.predict_seconds([host_sample(n, host)])[0]) for n, w in walk_weighted(g))
    loop = next(n for n in g.nodes if n.op == "loop")
    cost = ControlCost(loop_s=1e-6, trip_s=5e-7, loop_byte_s=1e-11, if_s=8e-7, if_byte_s=2e-12)
    with_cf = replace(cal, meta={**cal.meta, "control_flow": cost.to_json()}, _state={})
    for c, control_s in ((cal, 0.0), (with_cf, 1e-6 + 3 * 5e-7 + 2048e-11 + 3 * (8e-7 + 2048 * 2e-12))):
        opts = CostOptions(fidelity="analytical", calibration=c)
        got = graph_cost(g, KernelCoster(hw, opts=opts), opts).total.host_s
        assert got == pytest.approx(body + control_s, rel=1e-6)
    assert cal.host_seconds(loop, hw) == 0.0
    assert with_cf.host_seconds(loop, hw) == pytest.approx(1e-6 + 3 * 5e-7 + 2048e-11)
    dev = replace(cal, kind="device", _state={})
    from sim.graph.subgraph import host_op_seconds
    assert dev.host_seconds(loop, hw) == host_op_seconds(loop, hw) > 0


def test_a_node_costs_the_same_inside_a_composite_as_in_its_graph():
    """tune's partition wraps dense + bias into composites whose weights are parameters: the
    calibration's context features (a constant input's bytes, a MAC producer) must still see the
    weights and producers of the graph the node came from, so ``baselines.all_host`` of ``tune``
    is the all-on-host ``graph_cost`` of the unpartitioned model."""
    from partition import models
    from tuner.calibrate_host import walk_nodes
    from tuner.costing import CostOptions, KernelCoster, graph_cost
    from tuner.tune import tune
    g = models.get("bert_tiny")
    host = sim.hw.config.HostConfig(**REF)
    samples = [host_sample(n, host) for n in walk_nodes(g)] * 4
    # a truth that depends on the context features: weights cost twice, a MAC's epilogue half
    truth = np.array([s.analytical_s * (2.0 if s.weight_bytes > 0 else 1.0) * (0.5 if s.after_mac else 1.0)
                      for s in samples])
    assert any(s.weight_bytes > 0 for s in samples) and any(s.after_mac for s in samples)
    cal = fit_calibration(samples, truth, kind="host", fingerprint=machine_fingerprint()["fingerprint"],
                          hardware="test host", rows=[], reference_host=REF, rounds=150)
    opts = CostOptions(fidelity="analytical", calibration=cal)
    for preset in ("edge-npu", "cloud-npu"):
        hw = sim.load_hw(preset)
        plan = tune(g, preset, trials=0, progress=False, calibration=cal)
        whole = graph_cost(g, KernelCoster(hw, opts=opts), opts).total.latency_s
        assert plan.baselines["all_host"].latency_s == pytest.approx(whole, rel=1e-9)


def _epilogue_graph():
    """Convolutions and a dense layer whose outputs go to each kind of reader: a fused activation
    (through a folded batch norm), relu, an output two nodes read, silu (a kernel of its own), and
    hard_swish read by a node, as a graph output and after a Gemm (fused only the first way)."""
    from partition.builder import GraphBuilder
    b = GraphBuilder("epilogues", 0)
    x = b.input("x", (1, 8, 16, 16))
    a = b.relu6(b.batch_norm(b.conv(x, 8, 3, name="c_relu6", bias=False), name="bn"), name="a_relu6")
    r = b.relu(b.conv(a, 8, 3, groups=8, name="c_relu"), name="a_relu")
    c = b.conv(r, 8, 1, name="c_two")
    two = b.add(b.sigmoid(c, name="s"), c, name="two")
    h = b.hard_swish(b.conv(two, 8, 1, name="c_hswish"), name="a_hswish")
    silu = b.silu(b.conv(h, 8, 1, name="c_silu"), name="a_silu")
    out = b.hard_swish(b.conv(silu, 8, 1, name="c_hswish_out"), name="a_hswish_out")
    d = b.hard_swish(b.dense(b.flatten(silu, name="flat"), 8, name="d_hswish"), name="a_hswish_dense")
    return b.finish([b.add(silu, b.conv(silu, 8, 1, name="c_none"), name="out"), out, d])


def test_epilogue_is_the_fused_activations_arithmetic_per_element():
    """The activation onnxruntime runs in a MAC op's kernel, per output element (host model
    FLOPs), on the MAC op; the activation says it is fused. 0 for relu (free in the kernel's
    store), an output two nodes read, silu, or none; hard_swish only when read after a conv."""
    from sim.graph.subgraph import host_op_work
    from tuner.calibration import epilogue_flops, fused_into_mac
    g = _epilogue_graph()
    node = {n.name: n for n in g.nodes}
    got = {n.name: epilogue_flops(n) for n in g.nodes if n.op in ("conv2d", "dense")}
    per_elem = lambda a: host_op_work(node[a])[0] / node[a].output.type.size  # noqa: E731
    assert got == {"c_relu6": per_elem("a_relu6"), "c_relu": 0.0, "c_two": 0.0, "c_hswish": per_elem("a_hswish"),
                   "c_silu": 0.0, "c_none": 0.0, "c_hswish_out": 0.0, "d_hswish": 0.0}
    assert 0 < got["c_relu6"] < got["c_hswish"]
    fused = {n.name for n in g.nodes if fused_into_mac(n)}
    assert fused == {"a_relu6", "a_relu", "a_hswish"}
    host = sim.hw.config.HostConfig(**REF)
    assert host_sample(node["c_relu6"], host).epilogue == got["c_relu6"]
    assert host_sample(node["a_relu6"], host).fused and not host_sample(node["a_hswish_out"], host).fused
    alone = host_sample(node["c_relu6"], host, users=lambda v: ())  # timed alone: nothing shares its kernel
    assert alone.epilogue == 0.0 and not host_sample(node["a_relu6"], host, users=lambda v: ()).fused
    assert host_sample(node["a_relu6"], host).epilogue == 0.0     # not a MAC op


def test_a_fused_activation_is_seen_from_inside_and_outside_a_composite():
    """A convolution outlined into a composite without its activation (a target whose patterns
    stop at the batch norm), or with it, costs what it costs in the plain graph."""
    from partition import models
    from partition.byoc.merge_composite import merge_composite, outline_match
    from partition.ir import clone_graph
    from partition.patterns import Match, PatternEntry
    from partition.targets import build_target
    from tuner.calibrate_host import walk_nodes
    from tuner.costing import CostOptions, host_unit_cost
    g = models.get("mobilenet_v2")
    host = sim.hw.config.HostConfig(**REF)
    samples = [host_sample(n, host) for n in walk_nodes(g)] * 4
    # the fused activation alone decides: on the MAC op, and on the activation
    truth = np.array([s.analytical_s * (1.0 + s.epilogue) * (0.1 if s.fused else 1.0) for s in samples])
    assert any(s.epilogue > 0 for s in samples) and any(s.fused for s in samples)
    cal = fit_calibration(samples, truth, kind="host", fingerprint=machine_fingerprint()["fingerprint"],
                          hardware="test host", rows=[], reference_host=REF, rounds=150)
    opts, hw = CostOptions(fidelity="analytical", calibration=cal), sim.load_hw("edge-npu")
    plain = sum(host_unit_cost(n, g.functions, hw, opts).host_s for n in g.nodes)
    acts = clone_graph(g)   # each relu6 alone in a composite, its convolution outside
    for i, n in enumerate([n for n in acts.nodes if n.op == "relu6"]):
        outline_match(acts, Match(n.output, (n,), tuple(n.inputs)), PatternEntry("relu6", None), f"act_{i}")
    merged = [merge_composite(clone_graph(g), build_target("t", ["conv2d", "batch_norm", "relu6"], [p]))
              for p in ("conv2d_bn", "conv2d_bn_relu6")] + [acts]
    for m in merged:
        assert sum(n.op == "call" for n in m.nodes) >= 35
        got = sum(host_unit_cost(n, m.functions, hw, opts).host_s for n in m.nodes)
        assert got == pytest.approx(plain, rel=1e-9)
    no_context = sum(cal.host_seconds(n, hw, users=lambda v: ()) for n in g.nodes)
    assert no_context < 0.9 * plain   # the test can fail: without the readers the epilogue is lost


def _calibration_unseen():
    """experiments/calibration_unseen.py as a module (it is a script, not a package)."""
    import importlib.util
    path = Path(__file__).resolve().parents[2] / "experiments" / "calibration_unseen.py"
    spec = importlib.util.spec_from_file_location("calibration_unseen", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_calibration_unseen_reports_tunes_all_host_against_onnxruntime(tmp_path, capsys):
    """experiments/calibration_unseen.py: a file's calibrated figure is tune's all-host latency with
    the calibration, its measured one onnxruntime's on the file; a file it cannot read is a row
    with its error, not a crash."""
    pytest.importorskip("onnxruntime")
    from partition import load_onnx
    from tuner.tune import tune
    root = Path(__file__).resolve().parents[2]
    mod = _calibration_unseen()
    cal, path = host_cal(tmp_path)
    onnx_file = root / "tests" / "data" / "zoo" / "activations_mlp.ts.onnx"
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not onnx")
    assert mod.main([str(path), str(onnx_file), str(bad), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    good, broken = out["rows"]
    want = tune(load_onnx(onnx_file), "edge-npu", trials=0, progress=False, calibration=cal).baselines["all_host"]
    assert good["calibrated_s"] == pytest.approx(want.latency_s, rel=1e-12)
    assert 0 < good["best_run_s"] <= good["measured_s"] < 1.0 and 0.3 < good["parallel_speedup"] < 4.0
    assert good["calibrated_error"] == pytest.approx(good["calibrated_s"] / good["measured_s"] - 1)
    assert broken["model"] == "bad.onnx" and "error" in broken and out["of"] == 1
    assert out["within_20"] == int(abs(good["calibrated_error"]) <= 0.2)
    # a file onnxruntime cannot open is an error of its own; the others keep their passes
    times, errors = mod.measured_s([str(onnx_file), str(tmp_path / "gone.onnx")], passes=2)
    assert set(times) == {str(onnx_file)} and 0 < times[str(onnx_file)][1] <= times[str(onnx_file)][0]
    assert list(errors) == [str(tmp_path / "gone.onnx")] and "\n" not in errors[str(tmp_path / "gone.onnx")]
    # the calibration's own faster phase: the upper quartile of the speed-ups its file records
    assert np.isnan(mod.calibration_phase(cal)) and out["calibration_speedup"] is None
    assert np.isnan(mod.calibration_bus(cal)) and out["calibration_bus_s"] is None and good["bus_ratio"] is None
    from tuner.calibrate_probes import DENSE_SHAPES
    assert mod.BUS_PROBE in DENSE_SHAPES   # a probe calibrate --host times: its file has the figure
    bus = replace(cal, meta={**cal.meta, "whole_models": {"probe:dense:4096x4096": {"median_s": 1.5e-3}}}, _state={})
    assert mod.calibration_bus(bus) == 1.5e-3
    assert np.isnan(times[str(onnx_file)][3])   # no bus probe given: no bus figure
    whole = {"a": {"parallel_speedup": 1.8}, "b": {"parallel_speedup": 1.5}, "c": {"parallel_speedup": 1.85},
             "d": {"parallel_speedup": None}}
    from tuner.calibrate_context import PHASE_PROBE
    timed = replace(cal, meta={**cal.meta, "whole_models": whole, "phase_probe": PHASE_PROBE}, _state={})
    assert mod.calibration_phase(timed) == pytest.approx(np.percentile([1.8, 1.5, 1.85], 75))
    # speed-ups of another phase probe (a file of an earlier calibrate) are not compared
    other = replace(cal, meta={**cal.meta, "whole_models": whole, "phase_probe": "10 x conv 28x28"}, _state={})
    assert np.isnan(mod.calibration_phase(other))


def test_calibration_unseen_takes_an_earlier_checks_measurements_with_measured(tmp_path, capsys, monkeypatch):
    """experiments/calibration_unseen.py --measured CHECK.json: no timing; each file's measurement,
    phase and speed-up come from the earlier --json check's row of the same model, the calibrated
    figure is this calibration's, and its error is against that measurement. A model the earlier
    check did not measure is a row with its error; an unreadable file is refused in one line."""
    pytest.importorskip("onnxruntime")
    from partition import load_onnx
    from tuner.tune import tune
    root = Path(__file__).resolve().parents[2]
    mod = _calibration_unseen()
    monkeypatch.setattr(mod, "measured_s", lambda *a, **k: pytest.fail("timed with --measured"))
    cal, path = host_cal(tmp_path)
    mlp = root / "tests" / "data" / "zoo" / "activations_mlp.ts.onnx"
    other = root / "tests" / "data" / "zoo" / "gru_tagger.dynamo.onnx"
    earlier = tmp_path / "check.json"
    earlier.write_text(json.dumps({"rows": [
        {"model": mlp.name, "measured_s": 2e-3, "best_run_s": 1.9e-3, "parallel_speedup": 1.7, "probe_s": 0.65e-3,
         "slower_phase": True, "bus_ratio": 1.4},
        {"model": "elsewhere.onnx", "error": "boom"}]}))
    assert mod.main([str(path), str(mlp), str(other), "--measured", str(earlier), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    good, missing = out["rows"]
    want = tune(load_onnx(mlp), "edge-npu", trials=0, progress=False, calibration=cal).baselines["all_host"].latency_s
    assert good["measured_s"] == 2e-3 and good["best_run_s"] == 1.9e-3 and good["parallel_speedup"] == 1.7
    assert good["calibrated_s"] == pytest.approx(want, rel=1e-12)
    assert good["calibrated_error"] == pytest.approx(want / 2e-3 - 1)
    # the earlier phase is kept; its bus reading was against another calibration: not carried
    assert good["slower_phase"] is True and good["bus_ratio"] is None and good["bus_moved"] is False
    assert missing["model"] == other.name and "not measured" in missing["error"] and out["of"] == 1
    (tmp_path / "broken.json").write_text("{")
    assert mod.main([str(path), str(mlp), "--measured", str(tmp_path / "broken.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--measured" in err


def test_calibration_unseen_checks_built_in_models_as_calibrate_times_them(tmp_path, capsys, monkeypatch):
    """experiments/calibration_unseen.py on the models a calibration saw: a built-in model's name
    (and, with --seen, every default source of calibrate --host) is exported as calibrate --host
    exports it and timed apart; its calibrated figure is tune's all-host latency of the built-in
    graph; an unknown name is a row with its error."""
    pytest.importorskip("onnxruntime")
    from partition import models
    from tuner.calibrate_context import exported
    from tuner.tune import tune
    mod = _calibration_unseen()
    cal, path = host_cal(tmp_path)
    assert mod.main([str(path), "byoc_demo", "no_such_model", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    good, broken = out["rows"]
    want = tune(models.get("byoc_demo"), "edge-npu", trials=0, progress=False, calibration=cal).baselines["all_host"]
    assert good["model"] == "byoc_demo" and good["calibrated_s"] == pytest.approx(want.latency_s, rel=1e-12)
    assert 0 < good["measured_s"] < 1e-3 and out["of"] == 1
    assert broken["model"] == "no_such_model" and "no_such_model" in broken["error"]
    # --seen: calibrate --host's default sources, each exported to the bytes calibrate --host times
    monkeypatch.setattr("tuner.calibrate_host.default_sources", lambda: ["byoc_demo", "bert_tiny"])
    got, errors = mod.sources([], True, str(tmp_path))
    assert [label for label, _, _ in got] == ["byoc_demo", "bert_tiny"] and not errors
    for (label, file, g), name in zip(got, ["byoc_demo", "bert_tiny"]):
        assert Path(file).read_bytes() == exported(models.get(name))[0]
    with pytest.raises(SystemExit):
        mod.main([str(path)])  # neither models nor --seen
    # a model still timed in a slower phase than the others after every pass is counted apart, and
    # so is one timed with the memory bus slower or faster than during the calibration (its bus probe)
    def timed(paths, bus=None, floor_s=float("inf"), bus_ref=float("nan")):
        assert bus == ("probe", [])
        return {p: (1e-5, 1e-5, 1.8, [1e-3, 1e-3, 1.6e-3, 0.7e-3, 1.2e-3][i], 3e-4 if i == 1 else 2e-4, i != 1)
                for i, p in enumerate(paths)}, {}
    monkeypatch.setattr(mod, "measured_s", timed)
    monkeypatch.setattr(mod, "calibration_bus", lambda c: 1e-3)
    monkeypatch.setattr(mod, "bus_probe", lambda: ("probe", []))
    five = ["byoc_demo", "bert_tiny", "ssd_detector", "resnet18", "mobilenet_v2"]
    assert mod.main([str(path), *five, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["slower_phase"] for r in out["rows"]] == [False, True, False, False, False]
    assert [r["bus_moved"] for r in out["rows"]] == [False, False, True, True, False]
    assert [r["bus_ratio"] for r in out["rows"]] == pytest.approx([1.0, 1.0, 1.6, 0.7, 1.2])
    kept = [out["rows"][0], out["rows"][4]]
    assert out["of_in_phase"] == 2 and out["within_20_in_phase"] == sum(abs(r["calibrated_error"]) <= 0.2 for r in kept)
    assert out["calibration_bus_s"] == 1e-3
    assert mod.main([str(path), *five]) == 0
    text = capsys.readouterr().out
    assert "out of the machine's fast phase after every pass (the phase probe over 1.08x this timing's " \
           "lowest latency): bert_tiny\n" in text
    assert "memory bus slower or faster than during the calibration (its 4096x4096 probe over the " \
           "calibration's): ssd_detector (1.60x), resnet18 (0.70x)" in text
    assert "within 20 % of the 2 timed in the calibration's phase and bus" in text


def test_calibration_unseen_times_a_file_again_until_a_block_is_timed_in_the_fast_phase(monkeypatch):
    """calibration_unseen.measured_s holds its files to the calibration's machine speed: a file
    whose kept block followed a phase reading over FAST_GAP times the floor is timed again (up to
    ``most`` passes in all) and its fast block kept; a file read fast is timed ``passes`` times;
    one never read fast is flagged. The rule is PhaseGate's, not the speed-up's (whose readings
    here all say 1.8x). So is a file whose kept block's pass ran off the calibration's memory bus."""
    import tuner.calibrate_context as cc
    mod = _calibration_unseen()
    zoo = str(Path(__file__).resolve().parents[2] / "tests" / "data" / "zoo" / "activations_mlp.ts.onnx")
    files = [zoo + "#fast", zoo + "#late", zoo + "#never"]   # one real file, three names
    fast, slow = 2.0e-4, 3.0e-4
    script = iter([fast, slow, slow] * 3 + [fast, slow] + [slow] * 3)   # passes 1-3, pass 4, passes 5-7
    last = {}

    def reading(runs=30, model=None):
        last["s"] = next(script)
        return cc.PhaseReading(1.8 * last["s"], last["s"])

    def blocks(path, inputs, *a, **k):
        timed[path] = timed.get(path, 0) + 1
        return [[1e-3 * (1.0 if last["s"] == fast else 1.5)] * 7]
    timed: dict = {}
    monkeypatch.setattr(cc, "phase_reading", reading)
    monkeypatch.setattr(cc, "phase_probe", lambda: b"probe")
    monkeypatch.setattr(cc, "_plain_blocks", blocks)
    monkeypatch.setattr(cc, "GATE_WAIT_S", 0.0)   # one reading a block: the script's order
    monkeypatch.setattr(mod, "RETIME_WAIT_S", 0.0)
    monkeypatch.setattr("onnx.load", lambda p, **k: SimpleNamespace(graph=SimpleNamespace(input=[])))
    times, errors = mod.measured_s(files, passes=3, most=7, floor_s=fast)
    assert not errors and timed == {files[0]: 3, files[1]: 4, files[2]: 7}
    median, best, speedup, bus, probe_s, in_fast = times[files[1]]
    assert (median, probe_s, in_fast, speedup) == (pytest.approx(1e-3), fast, True, pytest.approx(1.8))
    assert times[files[0]][4:] == (fast, True) and times[files[2]][4:] == (slow, False)
    assert times[files[2]][0] == pytest.approx(1.5e-3) and np.isnan(bus)
    # the passes that time again wait for a fast reading (up to RETIME_WAIT_S), the first ones do not
    script = iter([slow] * 3 + [slow, slow, fast])
    timed.clear()
    monkeypatch.setattr(mod, "RETIME_WAIT_S", 60.0)
    times, _ = mod.measured_s(files[:1], passes=3, most=4, floor_s=fast)
    assert timed == {files[0]: 4} and times[files[0]][4:] == (fast, True)
    assert times[files[0]][0] == pytest.approx(1e-3)
    # a pass whose bus probe is off the calibration's by more than BUS_GAP: its block is timed
    # again too, though its phase reading was fast (the bus probe is timed before each pass)
    monkeypatch.setattr(mod, "RETIME_WAIT_S", 0.0)
    bus_ms = iter([1.3e-3, 1.3e-3, 1.3e-3, 1.0e-3])
    script = iter([fast] * 4)
    timed.clear()

    def with_bus(path, inputs, *a, **k):   # a block on the slow bus runs 1.3x
        if path == "bus":
            last["bus"] = next(bus_ms)
            return [[last["bus"]] * 5]
        return [[b * last["bus"] / 1e-3 for b in blocks(path, inputs)[0]]]
    monkeypatch.setattr(cc, "_plain_blocks", with_bus)
    times, _ = mod.measured_s(files[:1], passes=3, most=5, bus=("bus", []), floor_s=fast, bus_ref=1.0e-3)
    assert timed == {files[0]: 4} and times[files[0]][3] == pytest.approx(1.0e-3)
    assert mod.bus_moved(1.3e-3, 1e-3) and not mod.bus_moved(1.2e-3, 1e-3) and not mod.bus_moved(1.3e-3, float("nan"))



def test_every_convolution_of_the_ir_is_a_mac_op_with_its_window():
    """Transposed and 3-D convolutions count as MAC ops (their class feature, no rank) with the
    weight's kernel as their window, as 2-D ones do; the op names are the IR's own."""
    from partition.builder import GraphBuilder
    from partition.ops import get_op
    from tuner.calibration import MAC_OPS
    for op in MAC_OPS:
        get_op(op)  # every name is an op the IR has
    b = GraphBuilder.for_model("convs", 0)
    x = b.input("x", [1, 4, 6, 6])
    up = b.op("conv_transpose2d", [x, b.normal("up.w", (4, 2, 3, 2), 0.1)],
              {"strides": (2, 2), "pads": (0, 0, 0, 0)}, name="up")
    v = b.input("v", [1, 2, 4, 5, 5])
    c3 = b.op("conv3d", [v, b.normal("c3.w", (3, 2, 2, 3, 3), 0.1)], {"pads": (0,) * 6}, name="c3")
    g = b.finish([up, c3])
    host = sim.load_hw("edge-npu").host
    by = {n.name: host_sample(n, host) for n in g.nodes}
    assert by["up"].window == 6 and by["c3"].window == 18
    for s in by.values():
        assert s.numeric()[4] == 0.0  # rank: not a feature of a MAC op



def test_a_grouped_convolution_is_described_by_one_groups_gemm_and_its_group_count():
    """Every feature of a convolution in G groups of 8 channels but the group count is that of one
    group's own dense convolution (8 -> 8 channels on the same input size): onnxruntime runs the
    groups one after another, so RegNet's 13 groups and a probe's 16 look alike to the trees."""
    from partition.builder import GraphBuilder
    from tuner.calibration import NUMERIC
    b = GraphBuilder.for_model("groups", 0)
    x, y = b.input("x", [1, 104, 28, 28]), b.input("y", [1, 8, 28, 28])
    grouped = b.conv(x, 104, 3, groups=13, name="grouped")
    one = b.conv(y, 8, 3, name="one")
    dw = b.conv(x, 104, 3, groups=104, name="dw")
    g = b.finish([grouped, one, dw])
    host = sim.load_hw("edge-npu").host
    by = {n.name: host_sample(n, host, model_bytes=3e6) for n in g.nodes}  # one model's
    f = {k: dict(zip(NUMERIC, s.numeric())) for k, s in by.items()}
    assert f["grouped"]["log_groups"] == pytest.approx(np.log2(13)) and f["one"]["log_groups"] == 0.0
    for name in NUMERIC:
        if name not in ("log_groups", "log_analytical_s", "log_channel_align"):
            assert f["grouped"][name] == pytest.approx(f["one"][name]), name
    # and whether onnxruntime can block it, which a dense convolution needs not (format 8)
    assert f["grouped"]["log_channel_align"] == 3.0 and f["one"]["log_channel_align"] == -1.0
    # a 13th of the op's roofline, whose one launch stays whole in log_launch_s
    assert f["grouped"]["log_analytical_s"] == pytest.approx(np.log10(by["grouped"].analytical_s / 13))
    # the sample itself keeps the totals: the analytical cost and the FLOP cap are the whole op's
    assert by["grouped"].flops == pytest.approx(13 * by["one"].flops)
    assert by["grouped"].analytical_s > 10 * by["one"].analytical_s
    # a depthwise convolution is 104 groups of one channel
    assert f["dw"]["log_flops"] == pytest.approx(np.log10(by["dw"].flops / 104 + 1))
    assert f["dw"]["log_group_width"] == 0.0


def _nchwc_runs(in_per_group: int, out_channels: int, groups: int, block: int) -> bool:
    """onnxruntime's NchwcTransformer::TransformConv, written out: whether a convolution runs in
    the blocked layout of ``block`` channels (a dense one with fewer input channels than a block
    reads its NCHW input directly)."""
    if groups > 1:
        if out_channels % block:
            return False
        if in_per_group == 1 and out_channels == groups:
            return True
        return in_per_group % block == 0 and out_channels % groups == 0 and (out_channels // groups) % block == 0
    return in_per_group < block or in_per_group % block == 0


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 64), st.integers(1, 48), st.integers(1, 8), st.sampled_from(["dense", "grouped", "depthwise"]))
def test_channel_align_says_whether_onnxruntime_blocks_a_convolution(width, groups, k, kind):
    """At the AVX2 and AVX-512 blocks (8, 16) the alignment is at least the block exactly when
    onnxruntime runs the convolution blocked (a dense one's input channels at least a block)."""
    from tuner.calibration import channel_align
    if kind == "dense":
        in_pg, out_c, g = 15 + width * k, width * k, 1
    elif kind == "depthwise":
        in_pg, out_c, g = 1, (groups + 1) * k, (groups + 1) * k
    else:
        in_pg, out_c, g = width, width * (groups + 1) * (1 + k % 2), groups + 1
    a = channel_align(in_pg, out_c, g)
    assert a & (a - 1) == 0 and 0 < a <= 64
    for block in (8, 16):
        assert (a >= block) == _nchwc_runs(in_pg, out_c, g, block), (in_pg, out_c, g, block)


def test_channel_align_of_networks_convolutions():
    """RegNetY-1.6GF's 24 channels per group are 8-aligned, RegNetX's 16 and a ResNet's 64 are not
    held back; a dense convolution is aligned by its input channels, a depthwise one by its
    channels; an output count the groups do not divide is unknown (0)."""
    from tuner.calibration import channel_align
    assert channel_align(24, 336, 14) == 8 and channel_align(16, 128, 8) == 16
    assert channel_align(64, 64, 1) == 64 and channel_align(512, 2048, 1) == 64    # capped
    assert channel_align(120, 480, 1) == 8 and channel_align(3, 64, 1) == 1
    assert channel_align(1, 120, 120) == 8 and channel_align(1, 96, 96) == 32
    assert channel_align(24, 24 * 5, 5) == 8 and channel_align(16, 100, 3) == 0


def test_host_sample_reads_channel_align_from_grouped_and_depthwise_convolutions_and_no_other_op():
    from partition.builder import GraphBuilder
    from tuner.calibration import ALIGN_CAP, DEPTHWISE_ALIGN_CAP, NO_ALIGN, NUMERIC
    b = GraphBuilder.for_model("align", 0)
    x = b.input("x", [1, 336, 14, 14])
    y = b.relu(b.conv(x, 336, 3, groups=14, name="g24"), name="act")
    z = b.conv(x, 58, 1, name="to58")
    g = b.finish([y, b.conv(x, 120, 1, name="dense"), b.conv(x, 336, 3, groups=336, name="dw"),
                  b.conv(z, 58, 3, groups=58, name="dw58")])
    host = sim.load_hw("edge-npu").host
    by = {n.name: host_sample(n, host) for n in g.nodes}
    f = {k: dict(zip(NUMERIC, s.numeric())) for k, s in by.items()}
    assert by["g24"].channel_align == 8 and f["g24"]["log_channel_align"] == 3.0
    # a depthwise one: 336 channels are 16-aligned, capped; 58 are 2 mod 4 (onnxruntime's slow kernel)
    assert DEPTHWISE_ALIGN_CAP == 4 and by["dw"].channel_align == 4 and f["dw"]["log_channel_align"] == 2.0
    assert by["dw58"].channel_align == 2 and f["dw58"]["log_channel_align"] == 1.0
    # a dense convolution off the block loses little per FLOP: not a feature of its
    for name in ("dense", "to58", "act"):
        assert by[name].channel_align == 0
    assert f["dense"]["log_channel_align"] == f["to58"]["log_channel_align"] == -1.0
    # an op that is no convolution sits above every convolution's alignment (format 12), so one
    # split takes the off-block convolutions apart from everything else
    assert f["act"]["log_channel_align"] == NO_ALIGN > np.log2(ALIGN_CAP)
    assert max(v["log_channel_align"] for k, v in f.items() if k != "act") < NO_ALIGN


# ------------------------------------------------------------------ rows weighted by model
def test_slow_phase_excess_is_each_suspects_time_over_the_other_models_fit():
    """Four models of the same ops, one of them timed 2x slower: against a fit of the two models
    not suspected, the slowed suspect's rows add up to ~2x their prediction, the other suspect's
    to ~1x; no model left to fit, no figure."""
    from tuner.calibration import SLOW_MODEL_EXCESS, left_out_by_excess, slow_phase_excess
    rng = np.random.default_rng(0)
    ops = [(op, float(f)) for op in ("conv2d", "relu", "add") for f in rng.uniform(1e5, 1e8, 12)]
    base = [roofline_sample(op, f, f / 8, f / 64, f / 64, 4, 2, 1, 1, 1e11, 2e10, 2e-6) for op, f in ops]
    samples, measured, models = [], [], []
    for m, slow in (("a", 1.0), ("b", 1.0), ("s", 2.0), ("t", 1.0)):
        for smp in base:
            samples.append(smp)
            measured.append(smp.analytical_s * (0.3 if smp.op == "conv2d" else 0.8) * slow)
            models.append(m)
    kw = {"kind": "host", "fingerprint": "f", "hardware": "h", "rows": [{}] * len(samples)}
    got = slow_phase_excess(samples, measured, models, ["s", "t", "absent"], np.ones(len(samples)), **kw)
    assert set(got) == {"s", "t"}
    assert got["s"] == pytest.approx(2.0, rel=0.05) and got["t"] == pytest.approx(1.0, rel=0.05)
    assert left_out_by_excess(got) == ["s"] and left_out_by_excess({"u": 1.0 + SLOW_MODEL_EXCESS}) == []
    assert slow_phase_excess(samples, measured, models, ["a", "b", "s", "t"], np.ones(len(samples)), **kw) == {}


def test_without_models_zeroes_their_rows_but_of_an_op_kind_no_other_model_has():
    from tuner.calibration import without_models
    w = without_models([1.0, 2.0, 3.0, 4.0], ["a", "b", "b", "c"], ["conv2d", "conv2d", "gelu", "relu"], ["b", "x"])
    assert w.tolist() == [1.0, 0.0, 3.0, 4.0]
    assert without_models([1.0, 2.0], ["a", "b"], ["relu", "relu"], []).tolist() == [1.0, 2.0]


def test_model_weights_give_every_model_the_same_total_half_by_count_half_by_time():
    from tuner.calibration import model_weights
    w = model_weights(["a", "a", "a", "b"], [1.0, 1.0, 2.0, 5.0])
    # a: 0.5/3 + 0.5 * (1/4, 1/4, 2/4); b, one row: all of its model's weight
    np.testing.assert_allclose(w, [0.5 / 3 + 0.125, 0.5 / 3 + 0.125, 0.5 / 3 + 0.25, 1.0])
    assert w[:3].sum() == pytest.approx(1.0) and w[3] == pytest.approx(1.0)
    # a model whose rows all took no time: its weight shared equally
    np.testing.assert_allclose(model_weights(["z", "z"], [0.0, 0.0]), [0.5, 0.5])
    with pytest.raises(CalibrationError, match="2 model labels but 1"):
        model_weights(["a", "b"], [1.0])


def test_weighted_rows_give_a_small_model_its_say():
    """Two models whose ops look alike to the features but run at 1x and 2x the reference: unweighted,
    the model of 200 rows sets the prediction and the model of 10 rows is half off as a whole;
    weighted by model, the prediction sits between the two (each model the same say)."""
    from tuner.calibration import model_weights
    x = synthetic(1, 3)[0][0]
    s = [x] * 210                                        # nothing tells the models apart
    truth = np.array([x.analytical_s] * 200 + [2 * x.analytical_s] * 10)
    models = ["big"] * 200 + ["small"] * 10

    def ratio(weights):
        cal = fit_calibration(s, truth, kind="host", fingerprint="f", hardware="h", rows=[], reference_host=REF,
                              rounds=60, weights=weights)
        return float(cal.predict_seconds([x])[0]) / x.analytical_s, cal
    plain, c0 = ratio(None)
    weighted, c1 = ratio(model_weights(models, truth))
    assert plain < 1.1                                   # the big model outvotes the small one
    assert 1.25 < weighted < 1.65                        # about sqrt(2): half the say each
    assert c1.meta["weighted"] is True and c0.meta["weighted"] is False


@pytest.mark.parametrize("bad", [[1.0] * 5, [1.0] * 9 + [-1.0], [0.0] * 10, [1.0] * 9 + [float("nan")]])
def test_fit_refuses_bad_weights_in_one_line(bad):
    s, t = synthetic(10, 4)
    with pytest.raises(CalibrationError, match="weights must be 10 finite numbers") as e:
        fit_calibration(s, t, kind="host", fingerprint="f", hardware="h", rows=[], reference_host=REF, rounds=5,
                        weights=bad)
    assert "\n" not in str(e.value)


def _two_heads(big: bool):
    """A fully connected layer of 1 MB alone, or beside a 64 MB one on another input: the same op
    in a model of 1 or 68 MB a run."""
    from partition.builder import GraphBuilder
    b = GraphBuilder.for_model("heads", 0)
    fc = b.dense(b.input("x", [1, 512]), 512, name="fc")
    outs = [fc]
    if big:
        outs.append(b.dense(b.input("z", [1, 4096]), 4096, name="ballast", weight=b.const(
            np.zeros((4096, 4096), np.float32), "ballast.weight")))
    return b.finish(outs)


def test_graph_run_bytes_counts_each_constant_once_every_output_and_no_gathered_table():
    from partition.builder import GraphBuilder
    from tuner.calibration import graph_run_bytes
    b = GraphBuilder.for_model("bytes", 0)
    x = b.input("x", [1, 8])
    w = b.const(np.ones((4, 8), np.float32), "w")
    y1 = b.op("dense", [x, w], name="a")
    y2 = b.op("dense", [x, w], name="b")  # the same weights: read once a run
    table = b.const(np.ones((1000, 8), np.float32), "table")
    e = b.op("gather", [table, b.const(np.array([1, 5], np.int64), "ids")], {"axis": 0}, name="embed")
    g = b.finish([b.add(y1, y2, name="sum"), e])
    # w, the indices; a, b and sum's outputs; the gathered rows (not the 32 kB table)
    assert graph_run_bytes(g) == 4 * 32 + 8 * 2 + 3 * 4 * 4 + 4 * 16
    # a partitioned graph touches what its model does; a loop body's weights count
    from partition import models, partition_for
    for name in ("mobilenet_v2", "byoc_demo"):
        g = models.get(name)
        part = partition_for(g, sim.load_hw("edge-npu").partition_target())
        assert any(n.op == "call" for n in part.nodes) or name == "byoc_demo"  # its calls are in the loop
        assert graph_run_bytes(part) == pytest.approx(graph_run_bytes(g), rel=1e-9)
    body = next(n for n in models.get("byoc_demo").nodes if n.op == "loop").attrs["body"]
    assert graph_run_bytes(models.get("byoc_demo")) > graph_run_bytes(body) >= 4 * 8 * 8 * 9


def test_a_host_calibration_costs_an_op_by_the_bytes_of_the_model_it_runs_in():
    """The same op timed at half its analytical time in a small model and at it in a 67 MB one
    (what stays in the L3 between runs): bound to each model (``for_graph``, which tune and
    graph_cost do), the calibration tells them apart; unbound, an op is costed as if alone."""
    from tuner.calibration import graph_run_bytes
    from tuner.costing import CostOptions, KernelCoster, graph_cost
    host = sim.hw.config.HostConfig(**REF)
    small, big = _two_heads(False), _two_heads(True)
    samples, truth = [], []
    for g, k in ((small, 0.5), (big, 1.0)):
        for n in g.nodes:
            for scale in (1.0, 1.1, 0.9, 1.05):  # a few timings of each
                s = host_sample(n, host, model_bytes=graph_run_bytes(g))
                samples.append(s)
                truth.append(s.analytical_s * k * scale)
    cal = fit_calibration(samples, truth, kind="host", fingerprint=machine_fingerprint()["fingerprint"],
                          hardware="test host", rows=[], reference_host=REF, rounds=150)
    assert cal.model_bytes is None and graph_run_bytes(big) > 60 * graph_run_bytes(small)
    fc_small, fc_big = (next(n for n in g.nodes if n.name == "fc") for g in (small, big))
    hw = sim.load_hw("edge-npu")
    on_small, on_big = cal.for_graph(small), cal.for_graph(big)
    assert on_small._state is cal._state  # one booster, one memo
    t_small, t_big = on_small.host_seconds(fc_small, hw), on_big.host_seconds(fc_big, hw)
    assert t_small / t_big == pytest.approx(0.5, rel=0.1)
    assert cal.host_seconds(fc_big, hw) == pytest.approx(t_small, rel=0.1)  # alone: a small model's
    # graph_cost binds an unbound calibration to the graph it costs, and tune to its model
    from tuner.tune import tune
    for g in (small, big):
        opts = CostOptions(fidelity="analytical", calibration=cal)
        bound = CostOptions(fidelity="analytical", calibration=cal.for_graph(g))
        whole = graph_cost(g, KernelCoster(hw, opts=opts), opts).total.latency_s
        assert whole == graph_cost(g, KernelCoster(hw, opts=bound), bound).total.latency_s
        assert tune(g, hw, trials=0, progress=False, calibration=cal).baselines["all_host"].latency_s == \
            pytest.approx(whole, rel=1e-9)
    # an op of small weights is costed alike in any model: the feature is a large weight matrix's
    from tuner.calibration import MODEL_BYTES_WEIGHTS, NUMERIC
    from partition.builder import GraphBuilder
    tb = GraphBuilder.for_model("tiny", 0)
    tiny = tb.finish([tb.dense(tb.input("x", [1, 8]), 4, name="tiny")])
    col = NUMERIC.index("log_model_bytes")
    for n, large in ((fc_small, True), (tiny.nodes[0], False)):
        assert (host_sample(n, host).weight_bytes >= MODEL_BYTES_WEIGHTS) == large
        f = [host_sample(n, host, model_bytes=b).numeric()[col] for b in (1e6, 1e8)]
        assert f[0] < f[1] if large else f == [-1.0, -1.0]
    # a device file has nothing to bind
    dev = replace(cal, kind="device", _state={})
    assert dev.for_graph(big) is dev


def test_a_reference_calibration_lends_its_phase_floor_or_says_why_not(tmp_path):
    """calibrate --host --reference: the lowest latency of the phase probe in an earlier host
    calibration of this machine; a device file, another machine's, or one without this probe's floor
    is refused in one line, and so is --reference without --host. With it, the latency of each model
    it timed in the fast phase itself, by the sha256 of the bytes timed, when it was timed with the
    running onnxruntime: a model it brought to that phase, or took from its own reference, lends
    none (an estimate, an older run's), nor does a file of another onnxruntime."""
    from tuner.calibrate_context import PHASE_PROBE
    from tuner.cli import CLIError
    from tuner.cli.cmd_calibrate import read_reference
    here = machine_fingerprint()["fingerprint"]

    def floor_of(path, fingerprint):
        return read_reference(path, fingerprint, "1.0")[0]
    cal, path = host_cal(tmp_path)
    with pytest.raises(CLIError, match="no lowest latency of this version's phase probe"):
        floor_of(str(path), here)
    good = replace(cal, meta={**cal.meta, "phase_probe": PHASE_PROBE, "phase_probe_floor_s": 2.25e-4}, _state={})
    good.save(tmp_path / "ref.json")
    assert read_reference(str(tmp_path / "ref.json"), here, "1.0") == (2.25e-4, {}, {})   # no model timed
    fast = {"median_s": 3e-3, "timed_fast": True, "sha256": "aa", "node_s": {"x": 1e-3, "y": 2e-3}}
    whole = {"m1": fast, "m2": {**fast, "timed_fast": False, "sha256": "bb"}, "m3": {**fast, "sha256": ""},
             "m4": {**fast, "sha256": "dd", "median_s": -1.0}, "m5": {"median_s": 1e-3},
             "m6": {**fast, "sha256": "ff", "median_s": 2e-3, "node_s": {"x": -1.0}},
             "m7": {**fast, "sha256": "gg", "node_s": None}}
    lend = replace(good, meta={**good.meta, "onnxruntime": "1.0", "whole_models": whole}, _state={})
    lend.save(tmp_path / "lend.json")
    # the split between nodes of the models it lends a latency of, where it is whole and positive
    assert read_reference(str(tmp_path / "lend.json"), here, "1.0") == (
        2.25e-4, {"aa": 3e-3, "ff": 2e-3, "gg": 3e-3}, {"aa": {"x": 1e-3, "y": 2e-3}})
    assert read_reference(str(tmp_path / "lend.json"), here, "1.1") == (2.25e-4, {}, {})
    for floor in (0.0, -1.0, "fast", None):
        bad = replace(good, meta={**good.meta, "phase_probe_floor_s": floor}, _state={})
        bad.save(tmp_path / "bad.json")
        with pytest.raises(CLIError, match="phase_probe_floor_s"):
            floor_of(str(tmp_path / "bad.json"), here)
    other = replace(good, meta={**good.meta, "phase_probe": "another probe"}, _state={})
    other.save(tmp_path / "other.json")
    with pytest.raises(CLIError, match="this version's phase probe"):
        floor_of(str(tmp_path / "other.json"), here)
    with pytest.raises(CLIError, match="measured on another machine"):
        floor_of(str(tmp_path / "ref.json"), "0" * 64)
    s, t = synthetic(30, 0)
    dev = fit_calibration(s, t, kind="device", fingerprint=sim.load_hw("cloud-npu").fingerprint(),
                          hardware="cloud-npu", rows=[], rounds=5)
    dev.save(tmp_path / "dev.json")
    with pytest.raises(CLIError, match="is a device calibration"):
        floor_of(str(tmp_path / "dev.json"), here)
    with pytest.raises(CalibrationError, match="not found"):
        floor_of(str(tmp_path / "none.json"), here)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("")
    assert main(["calibrate", "--measurements", str(rows), "--hw", "edge-npu", "--reference",
                 str(tmp_path / "ref.json"), "-o", str(tmp_path / "o.json")]) == 2
