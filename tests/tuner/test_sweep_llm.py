"""LLM serving points in `accel-tune sweep`: the spec entry, its one-line errors, rows that carry
the serving figures of `accel-tune llm`."""
import json

import pytest

import sim
from partition.llm.source import source_for
from sim.graph.serving import ServingPoint, serve
from tuner.cli import main
from tuner.sweep.spec import SpecError, parse_spec

HW = """base = "cloud-npu"
name = "npu-pair"
[memory]
capacity_bytes = 17179869184
[interconnect]
max_devices = 2
bytes_per_s = 100e9
latency_s = 2e-6
"""


def _spec(tmp_path, **llm):
    (tmp_path / "hw.toml").write_text(HW)
    entry = {"llm": "gpt2", "batch": [1, 4], "input_len": 32, "output_len": 8, "tp": 2, "dtype": "bf16", **llm}
    return {"name": "s", "base": "hw.toml", "axes": {"dram.bytes_per_cycle": [256.0, 1024.0]}, "models": [entry]}


def test_llm_entry_expands(tmp_path):
    spec = parse_spec(_spec(tmp_path, output_len=[8, 16]), tmp_path)
    assert [m.label for m in spec.models] == ["gpt2.b1.i32.o8", "gpt2.b1.i32.o16", "gpt2.b4.i32.o8",
                                              "gpt2.b4.i32.o16"]
    assert spec.models[0].llm.tp == 2 and spec.models[0].trials == 0
    # a late key: an entry without it keeps the settings (and so the results) of older sweeps
    assert spec.models[0].llm.decode_attention == "auto" and "decode_attention" not in spec.models[0].llm.to_dict()
    per = parse_spec(_spec(tmp_path, decode_attention="per-head"), tmp_path).models[0].llm
    assert per.decode_attention == "per-head" and per.to_dict()["decode_attention"] == "per-head"


@pytest.mark.parametrize("over,needle", [
    ({"batch": [1, 0]}, "batch[1] must be an integer from 1"),
    ({"llm": "gpt-5"}, "unknown model 'gpt-5'"),
    ({"dtype": "fp64"}, "dtype must be one of"),
    ({"input_len": None}, "needs 'input_len'"),
    ({"beam": 4}, "beam"),
    ({"decode_attention": "flash"}, "decode_attention must be one of auto, grouped, per-head, got 'flash'"),
])
def test_llm_entry_errors(tmp_path, over, needle):
    d = _spec(tmp_path, **over)
    if over.get("input_len", 1) is None:
        del d["models"][0]["input_len"]
    with pytest.raises(SpecError) as e:
        parse_spec(d, tmp_path)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_sweep_rows_are_llm_points(tmp_path, capsys):
    d = _spec(tmp_path)
    import tomli_w
    (tmp_path / "s.toml").write_text(tomli_w.dumps(d))
    out = tmp_path / "out"
    assert main(["sweep", str(tmp_path / "s.toml"), "-o", str(out), "--json"]) == 0
    capsys.readouterr()
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["error"] is None for r in rows)
    r = rows[1]
    m = r["models"]["gpt2.b4.i32.o8"]
    hw = sim.load_hw(str(tmp_path / "hw.toml")).with_overrides({"dram.bytes_per_cycle": 1024.0})
    direct = serve(source_for("gpt2"), hw, ServingPoint(4, 32, 8, tp=2, dtype="bf16"))
    assert m["latency_s"] == pytest.approx(direct.e2e_s, rel=1e-9)
    assert m["llm"]["ttft_ms"] == pytest.approx(direct.ttft_s * 1e3, rel=1e-9)
    assert m["llm"]["memory"]["fits"] is True and m["llm"]["calibrated"] is False
    assert r["latency_s"] == pytest.approx(sum(x["latency_s"] for x in r["models"].values()))
    # a rerun finds every point finished
    assert main(["sweep", str(tmp_path / "s.toml"), "-o", str(out), "--json"]) == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_report_plots_llm_points(tmp_path):
    from tuner.sweep.report import build_report
    mem = {"peak_bytes": 2 ** 30, "capacity_bytes": 2 ** 34, "fits": True}
    rows = [{"index": i, "point": f"p{i}", "key": f"k{i}", "params": {"dram.bytes_per_cycle": 256.0 * (i + 1)},
             "area_mm2": 10.0, "pes": 16, "sram_kib": 1.0, "peak_gmacs": 1.0, "latency_s": 1.0 + i,
             "energy_j": 2.0 - i / 2, "edp": 2.0, "error": None,
             "models": {"gpt2.b1.i8.o2": {"latency_s": 1.0 + i, "energy_j": 2.0 - i / 2,
                                          "llm": {"model": "gpt2", "batch": 1 + 3 * i, "ttft_ms": 5.0 + i,
                                                  "throughput_tok_s": 100.0 * (i + 1),
                                                  "memory": {**mem, "fits": i == 0}}}}}
            for i in range(2)]
    rep = build_report(rows)
    assert "llm" in [f.id for f in rep.figures]
