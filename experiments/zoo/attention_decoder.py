"""A tiny Llama-style decoder step written with onnx.helper alone (no torch): opset-23 ``Attention``
with past_key/past_value inputs and present_key/present_value outputs, RMSNormalization, a SiLU
MLP, grouped-query attention (4 query heads over 2 key/value heads). Random weights, seeded.

    python experiments/zoo/attention_decoder.py OUT.onnx [--layers N] [--scatter]

Inputs: ``input_ids`` int64 [batch, sequence], ``past_key.{i}`` / ``past_value.{i}`` float32
[batch, 2, past_sequence, 8]. Outputs: ``logits`` [batch, sequence, vocab], ``present_key.{i}`` /
``present_value.{i}`` [batch, 2, past_sequence + sequence, 8].

With ``--scatter`` the cache is a fixed buffer of ``max_sequence`` slots written with the opset-24
``TensorScatter`` at ``write_indices`` (int64 [batch]), and the attention reads the whole buffer under
a boolean mask (``attention_mask`` bool [batch, sequence, max_sequence]): present and past have one
shape. tests/data/kv/ holds both forms, written by this script.
"""
from __future__ import annotations

import argparse

import numpy as np


def build(layers: int = 2, hidden: int = 32, heads: int = 4, kv_heads: int = 2, ffn: int = 64,
          vocab: int = 100, scatter: bool = False, seed: int = 0):
    """The decoder as an onnx ModelProto."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    hd = hidden // heads
    inits = []
    nodes = []

    def weight(name, shape, scale=None):
        scale = 1.0 / np.sqrt(shape[0]) if scale is None else scale
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def ones(name, n):
        inits.append(numpy_helper.from_array((1 + 0.1 * rng.standard_normal(n)).astype(np.float32), name))
        return name

    def node(op, ins, outs, **attrs):
        # node names apart from value names, as exporters write them ("/layers.0/MatMul")
        nodes.append(helper.make_node(op, ins, outs, name=f"/{outs[0]}/{op}", **attrs))
        return outs[0]

    seq_len = "sequence"
    cache_len = "max_sequence" if scatter else "past_sequence"
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", seq_len])]
    if scatter:
        inputs += [helper.make_tensor_value_info("attention_mask", TensorProto.BOOL, ["batch", seq_len, cache_len]),
                   helper.make_tensor_value_info("write_indices", TensorProto.INT64, ["batch"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", seq_len, vocab])]
    present_len = cache_len if scatter else "past_sequence + sequence"
    x = node("Gather", [weight("embed", (vocab, hidden), 1.0), "input_ids"], ["h0"])
    for i in range(layers):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_{kind}.{i}", TensorProto.FLOAT,
                                                        ["batch", kv_heads, cache_len, hd]))
            outputs.append(helper.make_tensor_value_info(f"present_{kind}.{i}", TensorProto.FLOAT,
                                                         ["batch", kv_heads, present_len, hd]))
        n1 = node("RMSNormalization", [x, ones(f"l{i}.ln1", hidden)], [f"l{i}.n1"], axis=-1, epsilon=1e-5)
        q = node("MatMul", [n1, weight(f"l{i}.wq", (hidden, hidden))], [f"l{i}.q"])
        k = node("MatMul", [n1, weight(f"l{i}.wk", (hidden, kv_heads * hd))], [f"l{i}.k"])
        v = node("MatMul", [n1, weight(f"l{i}.wv", (hidden, kv_heads * hd))], [f"l{i}.v"])
        if scatter:
            # new keys/values as [B, kv_heads, S, hd], written into the buffer at write_indices
            kv = []
            for kind, t in (("key", k), ("value", v)):
                shp = f"l{i}.{kind}_shape"
                inits.append(numpy_helper.from_array(np.array([0, 0, kv_heads, hd], np.int64), shp))
                r = node("Reshape", [t, shp], [f"l{i}.{kind}_r"])
                tr = node("Transpose", [r], [f"l{i}.{kind}_t"], perm=[0, 2, 1, 3])
                kv.append(node("TensorScatter", [f"past_{kind}.{i}", tr, "write_indices"], [f"present_{kind}.{i}"],
                               axis=2))
            qs = f"l{i}.q_shape"
            inits.append(numpy_helper.from_array(np.array([0, 0, heads, hd], np.int64), qs))
            q4 = node("Transpose", [node("Reshape", [q, qs], [f"l{i}.q_r"])], [f"l{i}.q_t"], perm=[0, 2, 1, 3])
            mask = node("Unsqueeze", ["attention_mask", "one_axis"], [f"l{i}.mask"])
            y4 = node("Attention", [q4, kv[0], kv[1], mask], [f"l{i}.y4"])
            ys = f"l{i}.y_shape"
            inits.append(numpy_helper.from_array(np.array([0, 0, hidden], np.int64), ys))
            y = node("Reshape", [node("Transpose", [y4], [f"l{i}.y_t"], perm=[0, 2, 1, 3]), ys], [f"l{i}.y"])
        else:
            nodes.append(helper.make_node(
                "Attention", [q, k, v, "", f"past_key.{i}", f"past_value.{i}"],
                [f"l{i}.y", f"present_key.{i}", f"present_value.{i}"], name=f"/l{i}/Attention",
                q_num_heads=heads, kv_num_heads=kv_heads, is_causal=1))
            y = f"l{i}.y"
        o = node("MatMul", [y, weight(f"l{i}.wo", (hidden, hidden), 0.5 / np.sqrt(hidden))], [f"l{i}.o"])
        x = node("Add", [x, o], [f"l{i}.r1"])
        n2 = node("RMSNormalization", [x, ones(f"l{i}.ln2", hidden)], [f"l{i}.n2"], axis=-1, epsilon=1e-5)
        g = node("MatMul", [n2, weight(f"l{i}.wg", (hidden, ffn))], [f"l{i}.g"])
        u = node("MatMul", [n2, weight(f"l{i}.wu", (hidden, ffn))], [f"l{i}.u"])
        act = node("Mul", [g, node("Sigmoid", [g], [f"l{i}.gs"])], [f"l{i}.silu"])
        m = node("MatMul", [node("Mul", [act, u], [f"l{i}.gu"]), weight(f"l{i}.wd", (ffn, hidden), 0.5 / np.sqrt(ffn))],
                 [f"l{i}.m"])
        x = node("Add", [x, m], [f"l{i}.r2"])
    nf = node("RMSNormalization", [x, ones("ln_f", hidden)], ["nf"], axis=-1, epsilon=1e-5)
    node("MatMul", [nf, weight("lm_head", (hidden, vocab))], ["logits"])
    if scatter:
        inits.append(numpy_helper.from_array(np.array([1], np.int64), "one_axis"))
    graph = helper.make_graph(nodes, "attention_decoder_scatter" if scatter else "attention_decoder",
                              inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24 if scatter else 23)],
                              producer_name="accel-tune experiments/zoo/attention_decoder.py")
    model.ir_version = 10
    return model


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--scatter", action="store_true")
    a = ap.parse_args(argv)
    import onnx
    model = build(a.layers, scatter=a.scatter)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, a.out)
    print(f"{a.out}: {len(model.SerializeToString())} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
