"""PyTorch-exported models (both of torch's exporters, tests/data/zoo): each imports, lints and
computes PyTorch's own outputs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from partition import interpret, load_onnx

ZOO = Path(__file__).resolve().parents[1] / "data" / "zoo"
FILES = sorted(p.name for p in ZOO.glob("*.onnx"))


def reference(fname: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    data = np.load(ZOO / (fname.split(".")[0] + ".npz"))
    ins = [data[k] for k in sorted(k for k in data.files if k.startswith("in_"))]
    outs = [data[k] for k in sorted((k for k in data.files if k.startswith("out_")), key=lambda k: int(k[4:]))]
    return ins, outs


def test_zoo_has_both_exporters_of_every_model():
    """experiments/zoo/export.py writes both; of the transformers models (hf_*), some export with
    only one of them (experiments/zoo/hf_models.py) or are kept in one form to stay small."""
    stems = {f.split(".")[0] for f in FILES if not f.startswith("hf_")}
    assert len(stems) >= 15
    assert all(f"{s}.ts.onnx" in FILES and f"{s}.dynamo.onnx" in FILES for s in stems)
    assert len({f.split(".")[0] for f in FILES if f.startswith("hf_")}) >= 9


@pytest.mark.parametrize("fname", FILES)
def test_imports_and_matches_pytorch(fname):
    g = load_onnx(ZOO / fname)
    g.lint()
    ins, want = reference(fname)
    got = interpret(g, [x.astype(v.dtype) for x, v in zip(ins, g.inputs)])
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        # float32 in a different summation order than PyTorch's kernels
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


# Every hardware preset (the multi-level eyeriss and simba-like included) on one model of each kind:
# 3-D conv, depthwise CNN, transposed-conv U-Net, detector with data-dependent post-processing,
# attention decoders, recurrent. tests/tuner/test_zoo_end_to_end.py runs every file on edge-npu;
# `python experiments/zoo/check.py tests/data/zoo` runs every file on every preset (docs/IR.md).
PRESET_FILES = ["c3d_clip.ts.onnx", "mobilenet_v3_small.dynamo.onnx", "unet_small.ts.onnx",
                "det_ssd.dynamo.onnx", "gpt_block_lm.dynamo.onnx", "hf_llama.dynamo.onnx",
                "lstm_classifier.ts.onnx"]


def _presets():
    import sim
    # eyeriss-chip is eyeriss with the chip's link: the same partition and kernels, retimed
    return [p for p in sim.hw.presets.names() if p != "eyeriss-chip"]


@pytest.mark.slow
@pytest.mark.parametrize("preset", _presets())
@pytest.mark.parametrize("fname", PRESET_FILES)
def test_tune_pack_and_run_back_on_every_preset(fname, preset, tmp_path):
    import sim
    import tuner
    g = load_onnx(ZOO / fname)
    ins, _ = reference(fname)
    xs = [x.astype(v.dtype) for x, v in zip(ins, g.inputs)]
    plan = tuner.tune(g, sim.load_hw(preset), trials=2, seed=0, progress=False, model_name=fname)
    assert plan.latency_s > 0 and plan.latency_s <= plan.baselines["all_host"].latency_s * (1 + 1e-9)
    plan.save(tmp_path / "plan.zip")
    res = sim.graph.runtime.load(tmp_path / "plan.zip").run(xs)
    for got, want in zip(res.outputs.values(), interpret(g, xs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert res.latency_s == pytest.approx(plan.latency_s, rel=1e-9)
