"""The whole tool on PyTorch-exported models (tests/data/zoo): tune on the edge NPU, save the
packed plan, load it back and run it; the run's outputs equal the interpreter's on the source
model, its latency equals the plan's prediction, and the plan is never slower than greedy BYOC or
all-on-host."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sim
import tuner
from partition import interpret, load_onnx

ZOO = Path(__file__).resolve().parents[1] / "data" / "zoo"
FILES = sorted(p.name for p in ZOO.glob("*.onnx"))


@pytest.fixture(scope="module")
def edge():
    return sim.load_hw("edge-npu")


@pytest.mark.parametrize("fname", FILES)
def test_tune_save_load_run(fname, edge, tmp_path):
    g = load_onnx(ZOO / fname)
    data = np.load(ZOO / (fname.split(".")[0] + ".npz"))
    xs = [data[f"in_{i}"].astype(v.dtype) for i, v in enumerate(g.inputs)]
    plan = tuner.tune(g, edge, trials=4, seed=0, progress=False, model_name=fname)
    for b in ("greedy_byoc", "all_host"):
        assert plan.latency_s <= plan.baselines[b].latency_s * (1 + 1e-9)
    plan.save(tmp_path / "plan.zip")
    res = sim.graph.runtime.load(tmp_path / "plan.zip").run(xs)
    for got, want in zip(res.outputs.values(), interpret(g, xs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert res.latency_s == pytest.approx(plan.latency_s, rel=1e-9)
    assert res.energy_j == pytest.approx(plan.energy_j, rel=1e-9)
