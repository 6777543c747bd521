"""Decoders exported with their KV cache (tests/data/kv) through the command line: `partition`
recognises the cache, `tune` keeps it on the device, and `run` of the tuned plan gives
onnxruntime's numbers (and PyTorch's, for the transformers exports) within the zoo tests'
tolerance."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tuner.cli import main

KV = Path(__file__).resolve().parents[1] / "data" / "kv"
RTOL, ATOL = 1e-3, 1e-4  # tests/partition/test_onnx_zoo.py's: float32 in another summation order

# file -> (--dim arguments, inputs file or None for generated inputs, PyTorch's outputs or None)
FILES = {
    "hf_gpt2_kv.ts.onnx": (["batch=2", "past_sequence=5", "sequence=1"], "hf_gpt2_kv.npz", "hf_gpt2_kv.out.npz"),
    "hf_llama_kv.ts.onnx": (["batch=2", "past_sequence=5", "sequence=1"], "hf_llama_kv.npz", "hf_llama_kv.out.npz"),
    "attention_decoder.onnx": (["batch=3", "past_sequence=6", "sequence=1"], None, None),
    "attention_decoder_scatter.onnx": (["batch=2", "max_sequence=8", "sequence=1"], None, None),
}


def _inputs(fname: str, tmp_path: Path) -> Path:
    """The stored inputs, or seeded ones of the shapes the --dim arguments give."""
    dims, stored, _ = FILES[fname]
    if stored:
        return KV / stored
    import onnx
    from partition.onnx.importer import eval_dim
    size = {d.split("=")[0]: int(d.split("=")[1]) for d in dims}
    rng = np.random.default_rng(7)
    feeds = {}
    graph_inputs = sorted(onnx.load(str(KV / fname)).graph.input, key=lambda vi: vi.name != "write_indices")
    for vi in graph_inputs:
        shape = tuple(d.dim_value if d.HasField("dim_value") else eval_dim(d.dim_param, size)
                      for d in vi.type.tensor_type.shape.dim)
        if vi.name == "input_ids":
            feeds[vi.name] = rng.integers(0, 100, shape).astype(np.int64)
        elif vi.name == "write_indices":  # the next free slot of each row
            feeds[vi.name] = rng.integers(0, size["max_sequence"], shape).astype(np.int64)
        elif vi.name == "attention_mask":  # row r sees slots 0..write_indices[r]
            feeds[vi.name] = np.arange(shape[2])[None, None, :] <= feeds["write_indices"][:, None, None]
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    path = tmp_path / "inputs.npz"
    np.savez(path, **feeds)
    return path


def _json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("fname", sorted(FILES))
def test_tune_and_run_give_onnxruntimes_numbers(fname, tmp_path, capsys):
    import onnxruntime as ort
    dims, _, torch_out = FILES[fname]
    dim_args = [a for d in dims for a in ("--dim", d)]
    part = _json(capsys, ["partition", "--onnx", str(KV / fname), "--target", "cloud-npu", "--json", *dim_args])
    kv = part["kv_cache"]
    assert kv["layers"] == 2 and len(part["device_resident"]) == 8
    plan = tmp_path / "plan.zip"
    tuned = _json(capsys, ["tune", "--onnx", str(KV / fname), "--hw", "cloud-npu", "--trials", "0", "-o", str(plan),
                           "--json", *dim_args])
    assert sorted(tuned["device_resident"]) == sorted(part["device_resident"])
    inputs = _inputs(fname, tmp_path)
    out = tmp_path / "out.npz"
    ran = _json(capsys, ["run", str(plan), "--inputs", str(inputs), "-o", str(out), "--json"])
    assert ran["latency_s"] == pytest.approx(tuned["latency_s"], rel=1e-9)
    feeds = dict(np.load(inputs))
    sess = ort.InferenceSession(str(KV / fname), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    got = dict(np.load(out))
    assert set(got) == set(want)
    for name, w in want.items():
        assert got[name].shape == w.shape, name
        np.testing.assert_allclose(got[name], w, rtol=RTOL, atol=ATOL, err_msg=name)
    if torch_out:
        for name, w in np.load(KV / torch_out).items():
            np.testing.assert_allclose(got[name], w, rtol=RTOL, atol=ATOL, err_msg=name)


def test_the_cache_does_not_cross_the_link_when_its_reader_is_on_the_device(capsys, tmp_path):
    """Offloading every supported op of the Attention decoder (--offload all): the resident cache
    is read by the device's concat, so the plan moves fewer bytes than the same plan of the graph
    with the marks removed, by at least the cache read per step."""
    import sim
    import tuner
    from partition import load_onnx
    from tuner.costing import CostOptions, KernelCoster, graph_cost
    dims = {"batch": 3, "past_sequence": 6, "sequence": 1}
    g = load_onnx(KV / "attention_decoder.onnx", dims=dims)
    hw = sim.load_hw("cloud-npu")
    plan = tuner.tune(g, hw, trials=0, seed=0, progress=False, offload="all")
    marked = plan.cost.total.link_bytes
    plan.graph.meta.pop("device_resident")
    unmarked = graph_cost(plan.graph, KernelCoster(hw, opts=CostOptions()), CostOptions()).total.link_bytes
    past = 2 * 2 * 3 * 2 * 6 * 8 * hw.array.word_bytes   # layers x (k, v) x batch x heads x past x head size
    assert unmarked - marked >= past
