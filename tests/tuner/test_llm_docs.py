"""docs/LLM.md's worked example: run from the file's own code blocks, checked against its table and
its hand computation."""
import json
import re
import shlex
from pathlib import Path

import pytest

from tuner.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "LLM.md"


def _example():
    text = DOC.read_text().split("## Worked example", 1)[1]
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, re.S)
    toml = next(body for lang, body in blocks if lang == "toml")
    cmd = next(body for lang, body in blocks if body.startswith("accel-tune llm"))
    table = dict(re.findall(r"^\| ([\w.]+) \| ([^|]+) \|$", text, re.M))
    return toml, shlex.split(cmd.strip())[1:], table


def test_worked_example(tmp_path, capsys, monkeypatch):
    toml, argv, table = _example()
    (tmp_path / "npu-pair.toml").write_text(toml)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("ttft_ms", "tpot_ms", "e2e_ms", "throughput_tok_s"):
        assert d[key] == pytest.approx(float(table[key]), rel=2e-4), key
    m = d["memory"]
    # the hand computation of the doc, independent of the code
    assert m["weights_bytes"] == int(table["memory.weights_bytes"]) == (1_235_814_400 - 67_584) // 2 * 2 + 67_584 * 2
    assert m["kv_bytes"] == int(table["memory.kv_bytes"]) == 16 * 2 * 4 * 64 * 2 * 8 * (512 + 128 - 1)
    assert m["fits"] is True
    ar = [k for k in d["phases"]["decode"]["kernels"] if k["op"] == "all_reduce"]
    assert len(ar) == 2
    hand = 127 * (2 * 0.5 * 8 * 2048 * 2 / 100e9 + 2 * 1 * 2e-6)
    assert ar[0]["interconnect_s"] == pytest.approx(hand, rel=1e-12)
    row = re.search(r"^\| decode all_reduce[^|]*\| ([^|]+) \|$", DOC.read_text(), re.M)
    assert float(row.group(1)) == pytest.approx(hand, rel=1e-4)
    assert d["e2e_ms"] == pytest.approx(d["ttft_ms"] + 127 * d["tpot_ms"])
    assert d["throughput_tok_s"] == pytest.approx(8 * 128 / (d["e2e_ms"] / 1e3))
