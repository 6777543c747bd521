"""find_kv_cache (partition/onnx/kv_cache.py) and the importer's device-resident marking: the
stored decoders of tests/data/kv (transformers exports of the zoo's GPT-2 and Llama, the opset-23
Attention decoder and its TensorScatter twin), generated decoders whose names, layer counts, layouts
and input order vary, and malformed caches, each refused in one line."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from partition import load_onnx
from partition.onnx import OnnxImportError
from partition.onnx.kv_cache import KVCacheError, announces_cache, find_kv_cache

KV = Path(__file__).resolve().parents[1] / "data" / "kv"


def decode_shapes(path: Path, batch: int, past: int) -> dict[str, tuple[int, ...]]:
    """Concrete shapes for a stored decoder's inputs: its symbolic dims set to one decode step."""
    import onnx
    m = onnx.load(str(path))
    sym = {"batch": batch, "sequence": 1, "past_sequence": past, "past_sequence + sequence": past + 1,
           "max_sequence": past}
    return {vi.name: tuple(d.dim_value if d.HasField("dim_value") else sym[d.dim_param]
                           for d in vi.type.tensor_type.shape.dim) for vi in m.graph.input}


# name of the stored file -> (layers, kv heads, head size, form, input name of layer 1's value cache)
STORED = {
    "hf_gpt2_kv.ts.onnx": (2, 4, 16, "concat", "past_key_values.1.value"),
    "hf_llama_kv.ts.onnx": (2, 2, 16, "concat", "past_key_values.1.value"),
    "attention_decoder.onnx": (2, 2, 8, "concat", "past_value.1"),
    "attention_decoder_scatter.onnx": (2, 2, 8, "scatter", "past_value.1"),
}


@pytest.mark.parametrize("fname", sorted(STORED))
def test_stored_decoders_have_their_cache_found_and_marked_resident(fname):
    layers, heads, hd, form, v1 = STORED[fname]
    batch, past = 3, 7
    g = load_onnx(KV / fname, input_shapes=decode_shapes(KV / fname, batch, past))
    kv = find_kv_cache(g)
    assert (kv.layers, kv.heads, kv.head_size, kv.form, kv.batch, kv.past_len, kv.new_tokens) == \
        (layers, heads, hd, form, batch, past, 1)
    assert [(p.layer, p.kind) for p in kv.pairs] == [(i, k) for i in range(layers) for k in ("key", "value")]
    p = kv.pairs[3]
    assert p.past == v1 and (p.batch_axis, p.seq_axis, p.heads_axis, p.head_size_axis) == (0, 2, 1, 3)
    grown = past + 1 if form == "concat" else past
    assert p.past_shape == (batch, heads, past, hd) and p.present_shape == (batch, heads, grown, hd)
    assert kv.past_bytes == 2 * layers * batch * heads * past * hd * 4
    # the importer marks every cache tensor device-resident and describes the cache
    assert set(g.meta["device_resident"]) == set(kv.inputs) | set(kv.outputs)
    assert g.meta["kv_cache"]["layers"] == layers and len(g.meta["kv_cache"]["pairs"]) == 2 * layers


def test_a_graph_without_cache_has_none_and_no_resident_tensors():
    g = load_onnx(Path(__file__).resolve().parents[1] / "data" / "zoo" / "hf_gpt2.ts.onnx")
    assert find_kv_cache(g) is None and "device_resident" not in g.meta


# ---------------------------------------------------------------------------- generated decoders

NAMINGS = {  # (past name, present name) for layer i and kind key/value, as exporters write them
    "transformers": (lambda i, k: f"past_key_values.{i}.{k}", lambda i, k: f"present.{i}.{k}"),
    "ort": (lambda i, k: f"past_{k}_{i}", lambda i, k: f"present_{k}_{i}"),
    "short": (lambda i, k: f"past_{k[0]}.{i}", lambda i, k: f"present_{k[0]}.{i}"),
    "decoder": (lambda i, k: f"past_key_values.{i}.decoder.{k}", lambda i, k: f"present.{i}.decoder.{k}"),
}


def _decoder(layers: int, naming: str, heads: int, hd: int, past: int, new: int, batch: int,
             attention_op: bool, order: list[int] | None = None, opset: int = 23):
    """A decoder-shaped graph: per layer, new keys/values from x, the cache concatenated (or the
    opset-23 Attention op with past inputs), and an output that reads them."""
    past_name, present_name = NAMINGS[naming]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, heads, new, hd])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, heads, new, hd])]
    nodes = []
    cache_ins = []
    y = "x"
    for i in range(layers):
        pk, pv = past_name(i, "key"), past_name(i, "value")
        qk, qv = present_name(i, "key"), present_name(i, "value")
        cache_ins += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [batch, heads, past, hd]) for n in (pk, pv)]
        outs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [batch, heads, past + new, hd]) for n in (qk, qv)]
        if attention_op:
            nodes.append(helper.make_node("Attention", [y, y, y, "", pk, pv], [f"y{i}", qk, qv], is_causal=1))
        else:
            nodes.append(helper.make_node("Concat", [pk, y], [qk], axis=-2))
            nodes.append(helper.make_node("Concat", [pv, y], [qv], axis=2))
            # a use of the cache: y + mean over the sequence of keys + that of values
            nodes.append(helper.make_node("ReduceMean", [qk, "ax2"], [f"mk{i}"], keepdims=1))
            nodes.append(helper.make_node("ReduceMean", [qv, "ax2"], [f"mv{i}"], keepdims=1))
            nodes.append(helper.make_node("Add", [y, f"mk{i}"], [f"a{i}"]))
            nodes.append(helper.make_node("Add", [f"a{i}", f"mv{i}"], [f"y{i}"]))
        y = f"y{i}"
    nodes.append(helper.make_node("Identity", [y], ["y"]))
    if order is not None:
        cache_ins = [cache_ins[j] for j in order]
    # Exporters name their nodes; an unnamed node would lend its output's name to the node, and the
    # importer would give the value a suffixed one.
    for k, n in enumerate(nodes):
        n.name = f"node{k}"
    ax = [helper.make_tensor("ax2", TensorProto.INT64, [1], [2])]
    graph = helper.make_graph(nodes, "dec", ins + cache_ins, outs, ax)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _one_layer(axis: int = 2, past=(1, 2, 3, 4), new=(1, 2, 1, 4), cast_key_to=None, opset: int = 23):
    """present.0.key/value = concat(past_key_values.0.key/value, k) along ``axis``."""
    grown = list(past)
    grown[axis] += new[axis]
    ins = [helper.make_tensor_value_info("k", TensorProto.FLOAT, list(new))]
    ins += [helper.make_tensor_value_info(f"past_key_values.0.{n}", TensorProto.FLOAT, list(past))
            for n in ("key", "value")]
    key_type = cast_key_to or TensorProto.FLOAT
    outs = [helper.make_tensor_value_info("present.0.key", key_type, grown),
            helper.make_tensor_value_info("present.0.value", TensorProto.FLOAT, grown)]
    nodes = [helper.make_node("Concat", ["past_key_values.0.key", "k"], ["kk" if cast_key_to else "present.0.key"],
                              axis=axis),
             helper.make_node("Concat", ["past_key_values.0.value", "k"], ["present.0.value"], axis=axis)]
    if cast_key_to:
        nodes.append(helper.make_node("Cast", ["kk"], ["present.0.key"], to=cast_key_to))
    for k, n in enumerate(nodes):
        n.name = f"node{k}"
    return helper.make_model(helper.make_graph(nodes, "one", ins, outs),
                             opset_imports=[helper.make_opsetid("", opset)])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=st.integers(1, 4), naming=st.sampled_from(sorted(NAMINGS)), heads=st.integers(1, 3),
       hd=st.sampled_from([2, 4]), past=st.integers(1, 5), new=st.integers(1, 2), batch=st.integers(1, 2),
       attention_op=st.booleans(), data=st.data())
def test_generated_decoders(layers, naming, heads, hd, past, new, batch, attention_op, data):
    order = data.draw(st.permutations(range(2 * layers)))
    m = _decoder(layers, naming, heads, hd, past, new, batch, attention_op, list(order))
    g = load_onnx(m.SerializeToString())
    kv = find_kv_cache(g)
    past_name, present_name = NAMINGS[naming]
    want = [(i, k, past_name(i, k), present_name(i, k)) for i in range(layers) for k in ("key", "value")]
    assert [(p.layer, p.kind, p.past, p.present) for p in kv.pairs] == want
    assert (kv.layers, kv.batch, kv.past_len, kv.new_tokens, kv.heads, kv.head_size, kv.form) == \
        (layers, batch, past, new, heads, hd, "concat")
    assert set(g.meta["device_resident"]) == {n for _, _, a, b in want for n in (a, b)}


def _renamed(m, ren):
    for vi in list(m.graph.input) + list(m.graph.output):
        vi.name = ren(vi.name)
    for n in m.graph.node:
        n.input[:] = [ren(x) for x in n.input]
        n.output[:] = [ren(x) for x in n.output]
    return m


def _neutral(name: str) -> str:
    return (name.replace("past_key_values.", "a").replace("present.", "b")
            .replace(".key", "x").replace(".value", "y"))


def test_attention_op_says_which_is_key_and_value_whatever_the_names():
    m = _renamed(_decoder(2, "transformers", 2, 4, 3, 1, 1, True), _neutral)
    kv = find_kv_cache(load_onnx(m.SerializeToString()))
    assert [(p.layer, p.kind, p.past, p.present) for p in kv.pairs] == [
        (0, "key", "a0x", "b0x"), (0, "value", "a0y", "b0y"), (1, "key", "a1x", "b1x"), (1, "value", "a1y", "b1y")]


def test_a_plain_concat_onto_an_input_is_no_cache():
    """The same graph with the cache written by Concat and neutral names: nothing says it is a
    cache (ONNX's own Concat cases are such graphs), so there is none and nothing is refused."""
    g = load_onnx(_renamed(_decoder(2, "transformers", 2, 4, 3, 1, 1, False), _neutral).SerializeToString())
    assert find_kv_cache(g) is None and "device_resident" not in g.meta


def test_unnamed_scatter_buffers_alternate_key_value():
    """TensorScatter writes caches by definition: two unnamed buffers are a key and a value."""
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 4, 3]) for n in ("bufa", "bufb")]
    ins.append(helper.make_tensor_value_info("u", TensorProto.FLOAT, [1, 2, 1, 3]))
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 4, 3]) for n in ("outa", "outb")]
    nodes = [helper.make_node("TensorScatter", ["bufa", "u"], ["outa"], name="s0"),
             helper.make_node("TensorScatter", ["bufb", "u"], ["outb"], name="s1")]
    m = helper.make_model(helper.make_graph(nodes, "g", ins, outs), opset_imports=[helper.make_opsetid("", 24)])
    kv = find_kv_cache(load_onnx(m.SerializeToString()))
    assert [(p.layer, p.kind, p.past) for p in kv.pairs] == [(0, "key", "bufa"), (0, "value", "bufb")]
    assert (kv.form, kv.past_len, kv.new_tokens) == ("scatter", 4, 1)


def test_announcing_names():
    assert announces_cache("past_key_values.3.key") and announces_cache("past_v_2")
    assert announces_cache("present.0.value", present=True) and not announces_cache("present.0.value")
    assert not announces_cache("input_ids") and not announces_cache("attention_mask")


# ---------------------------------------------------------------------------- malformed caches

def _refusal(model) -> str:
    with pytest.raises(OnnxImportError) as e:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            load_onnx(model.SerializeToString())
    msg = str(e.value)
    assert "\n" not in msg and isinstance(e.value, KVCacheError)
    return msg


def test_past_input_without_its_present_output():
    m = _decoder(2, "transformers", 2, 4, 3, 1, 1, False)
    drop = [o for o in m.graph.output if o.name == "present.1.value"][0]
    m.graph.output.remove(drop)
    assert "cache input 'past_key_values.1.value' has no present output" in _refusal(m)


def test_present_output_not_written_from_its_past():
    m = _decoder(1, "transformers", 2, 4, 3, 1, 1, False)
    for n in m.graph.node:  # present.0.value = concat(x, x): no past in it
        if n.output[0] == "present.0.value":
            n.input[0] = "x"
            n.input.append("x")
    for vi in m.graph.output:
        if vi.name == "present.0.value":
            vi.type.tensor_type.shape.dim[2].dim_value = 3
    msg = _refusal(m)
    assert "'present.0.value' is not written from a past cache input" in msg or \
        "'past_key_values.0.value' has no present output" in msg


def test_layers_that_disagree_on_the_past_length():
    m = _decoder(2, "ort", 2, 4, 3, 1, 1, False)
    for vi in list(m.graph.input) + list(m.graph.output):
        if vi.name.endswith("_1") and (vi.name.startswith("past") or vi.name.startswith("present")):
            d = vi.type.tensor_type.shape.dim[2]
            d.dim_value = d.dim_value + 2
    assert "disagree on the past length (3 vs 5)" in _refusal(m)


def test_cache_grown_along_the_batch_axis():
    assert "grows along axis 0, its batch axis" in _refusal(_one_layer(axis=0, new=(2, 2, 3, 4)))


def test_present_of_another_dtype_than_its_past():
    assert "is float32 but its present output 'present.0.key' is float16" in \
        _refusal(_one_layer(cast_key_to=TensorProto.FLOAT16))


def test_a_lone_layer_is_found_with_its_axes():
    """A [B, S, H*D] layout (no heads axis), grown on axis 1."""
    kv = find_kv_cache(load_onnx(_one_layer(axis=1, past=(2, 5, 12), new=(2, 1, 12)).SerializeToString()))
    assert (kv.layers, kv.past_len, kv.new_tokens, kv.heads, kv.head_size) == (1, 5, 1, None, 12)
    assert (kv.pairs[0].seq_axis, kv.pairs[0].heads_axis, kv.pairs[0].head_size_axis) == (1, None, 2)


def test_a_layer_with_keys_but_no_values():
    m = _decoder(1, "transformers", 2, 4, 3, 1, 1, False)
    # rename the value pair to a second key of layer 0
    ren = {"past_key_values.0.value": "past_key_values.0.key_b", "present.0.value": "present.0.key_b"}
    for vi in list(m.graph.input) + list(m.graph.output):
        vi.name = ren.get(vi.name, vi.name)
    for n in m.graph.node:
        n.input[:] = [ren.get(s, s) for s in n.input]
        n.output[:] = [ren.get(s, s) for s in n.output]
    assert "are both the keys of layer 0" in _refusal(m)


def test_cli_gives_one_line_for_a_malformed_cache(tmp_path, capsys):
    from tuner.cli import main
    m = _decoder(2, "transformers", 2, 4, 3, 1, 1, False)
    m.graph.output.remove([o for o in m.graph.output if o.name == "present.0.key"][0])
    path = tmp_path / "bad.onnx"
    path.write_bytes(m.SerializeToString())
    assert main(["partition", "--onnx", str(path), "--target", "npu-full", "--json"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("accel-tune: error: bad.onnx: cache input 'past_key_values.0.key' has no present output")
    assert "\n" not in err


def test_scatter_cache_with_a_changed_shape_is_refused():
    """TensorScatter keeps its input's shape, so a scatter cache whose declared present differs
    cannot be built; a concat onto a scatter-written cache mixes the forms."""
    m = _decoder(1, "transformers", 2, 4, 3, 1, 1, False, opset=24)
    nodes = list(m.graph.node)
    for i, n in enumerate(nodes):
        if n.output[0] == "present.0.value":
            nodes[i] = helper.make_node("TensorScatter", ["past_key_values.0.value", "x"], ["present.0.value"], axis=2)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    for vi in m.graph.output:
        if vi.name == "present.0.value":
            vi.type.tensor_type.shape.dim[2].dim_value = 3
    assert "mix concat-grown and scatter-written" in _refusal(m)


# ---------------------------------------------------------------------------- sizing symbolic dims

def test_eval_dim():
    from partition.onnx.importer import eval_dim
    d = {"past_sequence": 7, "sequence": 2, "batch": 3}
    assert eval_dim("past_sequence + sequence", d) == 9
    assert eval_dim("past_sequence+1", d) == 8 and eval_dim("2*batch - 1", d) == 5
    assert eval_dim("batch", d) == 3 and eval_dim("unknown", d) is None
    assert eval_dim("batch +", d) is None and eval_dim("(batch)", d) is None


def test_dims_size_every_input_and_refuse_unknown_symbols():
    path = KV / "hf_gpt2_kv.ts.onnx"
    g = load_onnx(path, dims={"batch": 4, "past_sequence": 9, "sequence": 1})
    shapes = {v.name: v.shape for v in g.inputs}
    assert shapes["attention_mask"] == (4, 10) and shapes["past_key_values.1.value"] == (4, 4, 9, 16)
    # an explicit shape wins for its input
    g = load_onnx(path, dims={"batch": 4, "past_sequence": 9, "sequence": 1}, input_shapes={"input_ids": (4, 1)})
    assert find_kv_cache(g).past_len == 9
    with pytest.raises(OnnxImportError, match="no input dimension is named 'past'; its symbolic dimensions are: "
                                              "batch, past_sequence, sequence"):
        load_onnx(path, dims={"past": 3})
    with pytest.raises(OnnxImportError, match="must be an integer >= 1"):
        load_onnx(path, dims={"batch": 0})


@pytest.mark.parametrize("fname", sorted(STORED))
def test_cache_dims_name_the_symbols_that_size_one_step(fname):
    """cache_dims reads the roles' symbols off the file; importing with them sized gives that step."""
    import onnx
    from partition.onnx.kv_cache import cache_dims
    syms = cache_dims(onnx.load(str(KV / fname)))
    assert set(syms) == {"batch", "past", "new"}
    kv = find_kv_cache(load_onnx(KV / fname, dims={syms["batch"]: 5, syms["past"]: 11, syms["new"]: 1}))
    assert (kv.batch, kv.past_len, kv.new_tokens) == (5, 11, 1)
