"""partition.llm.onnx_source: an ONNX decode step with its KV cache as a DecoderSource, and the
serving model and `accel-tune llm` on it (the stored decoders of tests/data/kv, README there)."""
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from partition.llm.config import ConfigError
from partition.llm.graph import SplitError
from partition.llm.source import source_for
from partition.onnx.errors import OnnxImportError
from partition.onnx.importer import load_onnx
from sim.graph.phase_kernels import _is_view
from sim.workload.from_ir import workload_of
from tuner.cli import main

KV = Path(__file__).resolve().parents[1] / "data" / "kv"
GPT2, LLAMA = str(KV / "hf_gpt2_kv.ts.onnx"), str(KV / "hf_llama_kv.ts.onnx")
ATT, SCATTER = str(KV / "attention_decoder.onnx"), str(KV / "attention_decoder_scatter.onnx")
# the zoo's tiny Llama (experiments/zoo/hf_models.py) as a config.json
LLAMA_CFG = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
             "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 200,
             "max_position_embeddings": 64, "tie_word_embeddings": False}


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def cache_elems_per_token(path):
    """K/V elements of one token over every layer, read from the file's declared cache inputs."""
    total = 0
    for vi in onnx.load(path).graph.input:
        if vi.name.startswith("past"):
            dims = vi.type.tensor_type.shape.dim
            total += int(np.prod([d.dim_value for a, d in enumerate(dims) if a in (1, 3)]))
    return total


@pytest.fixture(scope="module")
def gpt2():
    return source_for(GPT2)


@pytest.fixture(scope="module")
def gpt2_json(tmp_path_factory):
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["llm", "--model", GPT2, "--hw", "cloud-npu", "--batch", "2", "--input-len", "8",
                   "--output-len", "4", "--json"])
    assert rc == 0
    return json.loads(buf.getvalue())


def test_gpt2_every_field(gpt2_json):
    d = gpt2_json
    for k in ("ttft_ms", "tpot_ms", "e2e_ms", "throughput_tok_s", "throughput_tok_s_per_device",
              "energy_j_per_token", "memory", "phases", "schedules"):
        assert k in d
    for k in ("weights_bytes", "kv_bytes", "activation_bytes", "peak_bytes", "capacity_bytes", "fits", "max_batch"):
        assert k in d["memory"]
    assert d["ttft_ms"] > 0 and d["tpot_ms"] > 0
    assert d["e2e_ms"] == pytest.approx(d["ttft_ms"] + 3 * d["tpot_ms"])
    assert d["throughput_tok_s"] == pytest.approx(2 * 4 / (d["e2e_ms"] * 1e-3))
    # KV: every layer's K and V (from the file's shapes) at fp16, 2 sequences x (8 + 4 - 1) tokens
    per_tok = cache_elems_per_token(GPT2) * 2
    assert per_tok == 2 * 2 * 4 * 16 * 2
    assert d["memory"]["kv_bytes_per_token"] == per_tok
    assert d["memory"]["kv_bytes"] == per_tok * 2 * 11
    assert d["model_info"]["layers"] == 2 and d["model_info"]["kv_heads"] == 4 and d["model_info"]["head_dim"] == 16
    assert d["model_info"]["vocab"] == 200
    # the whole graph's kernels are reported, attention ones among them; schedules of every kernel
    ops = {r["op"] for r in d["phases"]["decode"]["kernels"]}
    assert {"gemm", "matmul", "softmax", "kv_append"} <= ops and "concat" not in ops
    assert all(r["seconds"] >= 0 for r in d["phases"]["decode"]["kernels"])
    assert len(d["schedules"]) > 0


def test_cache_written_in_place(gpt2):
    """The concat onto the cache is a kv_append into a buffer of the whole context; nothing copies
    the cache, and the write costs the same at every context."""
    g9, g30 = gpt2.graph(2, 1, 9), gpt2.graph(2, 1, 30)
    for g, ctx in ((g9, 9), (g30, 30)):
        g.lint()
        kv = [v for v in g.inputs if v.name in g.meta["kv_cache"]]
        assert len(kv) == 4 and all(v.shape == (2, 4, ctx, 16) for v in kv)
        assert all(u.op == "kv_append" for v in kv for u in v.users)
        assert not [n for n in g.nodes if n.op == "concat" and any(x.shape[-2:] == (ctx, 16) for x in n.outputs)]
        assert set(g.meta["device_resident"]) >= set(g.meta["kv_cache"])
    keys = lambda g: sorted(workload_of(n).key for n in g.nodes if n.op == "kv_append")  # noqa: E731
    assert keys(g9) == keys(g30)


def test_attention_kernels_are_those_that_grow(gpt2):
    """meta['attention'] marks exactly the kernels whose shapes change with the context."""
    a, b = gpt2.graph(2, 1, 9), gpt2.graph(2, 1, 10)
    shape = lambda n: [x.shape for x in (*n.inputs, *n.outputs)]  # noqa: E731
    other = {n.name: shape(n) for n in b.nodes}
    for n in a.nodes:
        if n.op == "kv_append":
            assert not n.meta.get("attention")
        else:
            assert bool(n.meta.get("attention")) == (shape(n) != other[n.name]), n.name
    att = {n.op for n in a.nodes if n.meta.get("attention") and not _is_view(n)}
    assert {"matmul", "softmax"} <= att and "gemm" not in att and "layer_norm" not in att


def macs(g):
    out = {}
    for n in g.nodes:
        if _is_view(n) or n.op == "kv_append":
            continue
        wl = workload_of(n)
        if wl.is_mac:
            kind = "attention" if n.meta.get("attention") else "linear"
            out[kind] = out.get(kind, 0) + wl.macs
    return out


@pytest.fixture(scope="module")
def llama_pair(tmp_path_factory):
    cfg = tmp_path_factory.mktemp("cfg") / "config.json"
    cfg.write_text(json.dumps(LLAMA_CFG))
    return source_for(LLAMA), source_for(str(cfg))


def test_llama_matches_builtin_flops_and_kv(llama_pair):
    onx, cfg = llama_pair
    assert onx.layers == cfg.layers == 2
    assert onx.kv_bytes_per_token(2.0) == cfg.kv_bytes_per_token(2.0) == 2 * 2 * 2 * 16 * 2
    for ctx in (9, 40):
        mo, mc = macs(onx.graph(2, 1, ctx)), macs(cfg.graph(2, 1, ctx))
        # independent count: q,k,v,o, gate/up/down, LM head; scores and context over ctx keys
        linear = 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128) * 2 + 2 * 64 * 200
        assert mo == mc == {"linear": linear, "attention": 2 * 2 * 2 * 4 * ctx * 16}


def test_llama_time_against_builtin(llama_pair, tmp_path):
    """The kernels both graphs have (linear layers, attention products, softmax, the cache write)
    cost the same to 2 %; the rest is the exporter's decomposition of RMSNorm, rotary and SiLU into
    elementwise kernels, each with its own launch-free minimum time (docs/LLM.md)."""
    from sim import load_hw
    from sim.graph.serving import ServingPoint, serve
    hw = load_hw("cloud-npu")
    pt = ServingPoint(2, 8, 4)
    ro, rc = serve(llama_pair[0], hw, pt), serve(llama_pair[1], hw, pt)
    assert ro.memory.kv_bytes == rc.memory.kv_bytes

    def shared(r, per_layer):
        rows = [(x, per_layer) for x in r.phases["decode"]["kernels"]] + \
               [(x, 1) for x in r.phases["decode"]["outside_layers"]]
        return sum(x["seconds"] * k for x, k in rows
                   if x["op"] in ("dense", "matmul", "batch_matmul", "softmax", "kv_append"))
    assert shared(ro, 1) == pytest.approx(shared(rc, 2), rel=0.02)
    assert ro.tpot_s > rc.tpot_s  # more, smaller kernels, never fewer


@pytest.mark.parametrize("path", [ATT, SCATTER])
def test_attention_op_decoders(capsys, path):
    rc, out, err = run(capsys, "llm", "--model", path, "--hw", "cloud-npu", "--batch", "3", "--input-len", "6",
                       "--output-len", "3", "--json")
    assert rc == 0, err
    d = json.loads(out)
    per_tok = cache_elems_per_token(path) * 2
    assert per_tok == 2 * 2 * 2 * 8 * 2
    assert d["memory"]["kv_bytes"] == per_tok * 3 * 8
    assert d["ttft_ms"] > 0 and d["tpot_ms"] > 0
    assert d["model_info"]["kv_form"] == ("scatter" if path == SCATTER else "concat")


def _no_cache_model(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], np.ones(16, np.float32))
    m = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mlp", [x], [y], [w]),
                          opset_imports=[helper.make_opsetid("", 17)])
    p = tmp_path / "mlp.onnx"
    onnx.save(m, p)
    return str(p)


def _without_present(tmp_path):
    m = onnx.load(GPT2)
    keep = [o for o in m.graph.output if o.name != "present.1.value"]
    del m.graph.output[:]
    m.graph.output.extend(keep)
    p = tmp_path / "no_present.onnx"
    onnx.save(m, p)
    return str(p)


@pytest.mark.parametrize("make,msg", [(_no_cache_model, "no KV cache"),
                                      (_without_present, "'past_key_values.1.value' has no present output")])
def test_malformed_is_one_line(capsys, tmp_path, make, msg):
    path = make(tmp_path)
    rc, out, err = run(capsys, "llm", "--model", path, "--hw", "cloud-npu", "--batch", "1", "--input-len", "4",
                       "--output-len", "2")
    assert rc == 2 and out == "" and msg in err and err.count("\n") == 1 and err.startswith("accel-tune: error:")


def test_split_is_one_line(capsys):
    rc, _, err = run(capsys, "llm", "--model", ATT, "--hw", "cloud-npu", "--batch", "1", "--input-len", "4",
                     "--output-len", "2", "--tp", "2")
    assert rc == 2 and err.count("\n") == 1 and ("tensor/pipeline parallel" in err or "devices" in err)
    with pytest.raises(SplitError):
        source_for(ATT).check_split(1, 2)


def test_empty_past_only_when_asked():
    with pytest.raises(OnnxImportError, match="must be an integer >= 1"):
        load_onnx(ATT, dims={"batch": 1, "past_sequence": 0, "sequence": 3})
    g = load_onnx(ATT, dims={"batch": 1, "past_sequence": 0, "sequence": 3}, empty_dims=frozenset({"past_sequence"}))
    assert g.meta["kv_cache"]["past_len"] == 0 and g.meta["kv_cache"]["new_tokens"] == 3


def test_missing_file_is_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no ONNX file"):
        source_for(str(tmp_path / "absent.onnx"))


def test_total_length_symbol(gpt2, tmp_path):
    """A mask sized by its own symbol (optimum's total_sequence_length) is the context: the same
    graphs as the file that writes it past_sequence + sequence."""
    m = onnx.load(GPT2)
    mask = next(vi for vi in m.graph.input if vi.name == "attention_mask")
    mask.type.tensor_type.shape.dim[1].dim_param = "total_sequence_length"
    p = tmp_path / "total.onnx"
    onnx.save(m, p)
    src = source_for(str(p))
    assert dict(src.extra_syms) == {"total_sequence_length": "context"}
    for args in ((2, 1, 9),):
        a, b = src.graph(*args), gpt2.graph(*args)
        assert [(n.op, [v.shape for v in n.outputs], bool(n.meta.get("attention"))) for n in a.nodes] == \
               [(n.op, [v.shape for v in n.outputs], bool(n.meta.get("attention"))) for n in b.nodes]


def _attention_decoder(tmp_path, **kw):
    """A decoder of other sizes from the generator of the stored ones (experiments/zoo/attention_decoder.py)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "attention_decoder", Path(__file__).resolve().parents[2] / "experiments" / "zoo" / "attention_decoder.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    p = tmp_path / "dec.onnx"
    onnx.save(mod.build(**kw), p)
    return str(p)


@pytest.mark.parametrize("scatter", [False, True])
def test_other_sizes_against_independent_counts(tmp_path, scatter):
    """3 layers, hidden 64, 8 query heads over 4 KV heads, MLP 96, vocab 50: what is read from the
    file, and the MACs of a decode step, against the hyper-parameters the file was built with."""
    path = _attention_decoder(tmp_path, layers=3, hidden=64, heads=8, kv_heads=4, ffn=96, vocab=50, scatter=scatter)
    src = source_for(path)
    d = src.describe()
    assert (src.layers, d["kv_heads"], d["head_dim"], d["vocab"]) == (3, 4, 8, 50)
    assert src.kv_bytes_per_token(2.0) == 2 * 3 * 4 * 8 * 2
    embed, per_layer, head = 50 * 64, 64 * 64 * 2 + 2 * 64 * 32 + 3 * 64 * 96, 64 * 50
    assert src.params() == embed + 3 * per_layer + head + 7 * 64      # + the 2 x 3 + 1 norm weights
    for ctx in (5, 17):
        assert macs(src.graph(3, 1, ctx)) == {"linear": 3 * (3 * per_layer + head),
                                              "attention": 3 * 2 * 3 * 8 * ctx * 8}


def test_sweep_takes_an_onnx_decoder(tmp_path):
    from tuner.sweep.spec import SpecError, parse_spec
    d = {"name": "s", "base": "cloud-npu", "axes": {"dram.bytes_per_cycle": [256.0]},
         "models": [{"llm": ATT, "batch": [1, 2], "input_len": 4, "output_len": 2}]}
    spec = parse_spec(d, tmp_path)
    assert [m.label for m in spec.models] == ["attention_decoder.b1.i4.o2", "attention_decoder.b2.i4.o2"]
    assert spec.models[0].llm.model == ATT
    d["models"][0]["llm"] = _no_cache_model(tmp_path)
    with pytest.raises(SpecError, match="no KV cache"):
        parse_spec(d, tmp_path)
    d["models"][0].update(llm=ATT, tp=2)
    with pytest.raises(SpecError, match="tensor/pipeline parallel"):
        parse_spec(d, tmp_path)


def test_fused_attention_still_reads_the_cache(gpt2):
    """Flash-style attention keeps scores on chip, never the K/V reads: each product of the
    exported graph (plain MatMul) takes at least the time to read its K or V from DRAM."""
    from sim import load_hw
    from sim.graph.phase_kernels import Storage, default_coster, kernel_times
    hw = load_hw("cloud-npu")
    ctx = 60  # the file's learned positions end at 64
    g = gpt2.graph(2, 1, ctx)
    ks = kernel_times(g, hw, default_coster(hw), Storage(2.0, 2.0, 2.0), True, None,
                      lambda n: n.op == "matmul" and bool(n.meta.get("attention")))
    assert len(ks) == 4  # scores and context of 2 layers
    floor = 2 * 4 * ctx * 16 * 2 / (hw.dram.bytes_per_cycle * hw.clock_hz)
    assert all(k.seconds >= floor for k in ks), [(k.name, k.seconds, floor) for k in ks]


def test_context_past_the_position_table_is_one_line(capsys):
    """The file's 64 learned positions: a context past them is one line naming the table's size."""
    rc, out, err = run(capsys, "llm", "--model", GPT2, "--hw", "cloud-npu", "--batch", "1", "--input-len", "40",
                       "--output-len", "30")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "cannot be sized" in err and "size 64" in err
