"""The two ops a decoder writes its KV cache with, imported and interpreted, against onnx's own
reference implementation (``onnx.reference``) on random inputs: opset-23/24 ``Attention`` with
past_key/past_value inputs and present outputs (3-D and 4-D, grouped-query, causal, masks, scale,
softcap), and opset-24 ``TensorScatter`` (linear and circular, any axis). Each imported model also
has its cache found (find_kv_cache). The backend conformance cases of both ops run in
tests/partition/test_onnx_conformance.py (the whole suite) and, alone, in the slow test below."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from partition import interpret, load_onnx
from partition.onnx.kv_cache import find_kv_cache

FLOAT = TensorProto.FLOAT


def _model(node, ins, outs, opset):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in ins],
                          [helper.make_tensor_value_info(n, FLOAT, None) for n in outs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run_both(model, feeds):
    from onnx.reference import ReferenceEvaluator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = ReferenceEvaluator(model).run(None, feeds)
        g = load_onnx(model.SerializeToString())
        got = interpret(g, [feeds[v.name] for v in g.inputs])
    return g, got, want


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.integers(1, 2), kv_heads=st.integers(1, 2), group=st.integers(1, 3), sq=st.integers(1, 3),
       past=st.integers(1, 4), hd=st.sampled_from([2, 4]), three_d=st.booleans(), causal=st.booleans(),
       mask=st.sampled_from(["none", "bool", "float"]), scale=st.sampled_from([None, 0.3]),
       softcap=st.sampled_from([0.0, 2.0]), opset=st.sampled_from([23, 24]), seed=st.integers(0, 2 ** 16))
def test_attention_with_past_matches_the_onnx_reference(batch, kv_heads, group, sq, past, hd, three_d, causal,
                                                        mask, scale, softcap, opset, seed):
    rng = np.random.default_rng(seed)
    q_heads = kv_heads * group
    skv = sq  # new keys: as many as queries (a decode or prefill chunk)
    total = past + skv
    if three_d:
        q = rng.standard_normal((batch, sq, q_heads * hd)).astype(np.float32)
        k = rng.standard_normal((batch, skv, kv_heads * hd)).astype(np.float32)
        v = rng.standard_normal((batch, skv, kv_heads * hd)).astype(np.float32)
    else:
        q = rng.standard_normal((batch, q_heads, sq, hd)).astype(np.float32)
        k = rng.standard_normal((batch, kv_heads, skv, hd)).astype(np.float32)
        v = rng.standard_normal((batch, kv_heads, skv, hd)).astype(np.float32)
    pk = rng.standard_normal((batch, kv_heads, past, hd)).astype(np.float32)
    pv = rng.standard_normal((batch, kv_heads, past, hd)).astype(np.float32)
    feeds = {"q": q, "k": k, "v": v, "past_key": pk, "past_value": pv}
    ins = [("q", FLOAT, q.shape), ("k", FLOAT, k.shape), ("v", FLOAT, v.shape)]
    names = ["q", "k", "v"]
    if mask == "none":
        names.append("")
    else:
        m = rng.random((sq, total)) < 0.8
        m[:, 0] = True  # every query sees one key at least (a fully masked row is covered elsewhere)
        feeds["attn_mask"] = m if mask == "bool" else np.where(m, 0.0, -np.inf).astype(np.float32)
        ins.append(("attn_mask", TensorProto.BOOL if mask == "bool" else FLOAT, (sq, total)))
        names.append("attn_mask")
    names += ["past_key", "past_value"]
    ins += [("past_key", FLOAT, pk.shape), ("past_value", FLOAT, pv.shape)]
    attrs = {"is_causal": int(causal)}
    if three_d:
        attrs.update(q_num_heads=q_heads, kv_num_heads=kv_heads)
    if scale is not None:
        attrs["scale"] = scale
    if softcap:
        attrs["softcap"] = softcap
    node = helper.make_node("Attention", names, ["y", "present_key", "present_value"], **attrs)
    g, got, want = _run_both(_model(node, ins, ["y", "present_key", "present_value"], opset), feeds)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    kv = find_kv_cache(g)
    assert [(p.kind, p.past, p.present) for p in kv.pairs] == [
        ("key", "past_key", "present_key"), ("value", "past_value", "present_value")]
    assert (kv.past_len, kv.new_tokens, kv.heads, kv.head_size) == (past, skv, kv_heads, hd)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rank=st.integers(2, 5), data=st.data(), circular=st.booleans(), with_indices=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_tensor_scatter_matches_the_onnx_reference(rank, data, circular, with_indices, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axis = data.draw(st.integers(1, rank - 1))
    size = shape[axis]
    seq = data.draw(st.integers(1, size))
    upd_shape = list(shape)
    upd_shape[axis] = seq
    past = rng.standard_normal(shape).astype(np.float32)
    update = rng.standard_normal(upd_shape).astype(np.float32)
    # linear writes must stay inside the buffer; circular ones wrap
    hi = size if circular else size - seq + 1
    starts = rng.integers(0, hi, size=shape[0]).astype(np.int64)
    signed_axis = axis - rank if data.draw(st.booleans()) else axis
    attrs = {"axis": signed_axis, "mode": "circular" if circular else "linear"}
    names = ["past_cache", "update"] + (["write_indices"] if with_indices else [])
    if not with_indices:
        starts = np.zeros(shape[0], np.int64)
    feeds = {"past_cache": past, "update": update, "write_indices": starts}
    ins = [("past_cache", FLOAT, shape), ("update", FLOAT, tuple(upd_shape)),
           ("write_indices", TensorProto.INT64, (shape[0],))][:len(names)]
    node = helper.make_node("TensorScatter", names, ["present_cache"], **attrs)
    g, got, want = _run_both(_model(node, ins, ["present_cache"], 24), {k: feeds[k] for k in names})
    np.testing.assert_array_equal(got[0], want[0])
    kv = find_kv_cache(g)  # a lone buffer named neither key nor value: a "state" cache
    assert kv.form == "scatter" and [(p.kind, p.past, p.seq_axis) for p in kv.pairs] == \
        [("state", "past_cache", axis)]
    assert (kv.past_len, kv.new_tokens) == (size, seq)


@pytest.mark.slow
def test_backend_conformance_cases_of_both_ops_pass():
    """onnx's own node cases for Attention with past/present and TensorScatter (collecting every
    node case takes tens of seconds, hence slow; the whole suite runs them too)."""
    from partition.onnx import conformance as oc
    if oc.available():
        pytest.skip(oc.available())
    cases = [c for c in oc.load_cases(("node",)) if c.name.startswith("test_tensorscatter")
             or (c.name.startswith("test_attention") and "past" in c.name)]
    assert len(cases) >= 40
    bad = [o for o in oc.run_suite(cases) if o.status != "pass"]
    assert not bad, "\n".join(f"{o.name}: {o.status} {o.message}" for o in bad)
