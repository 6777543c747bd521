"""lstm and gru against onnxruntime one-node models (every direction, both layouts, with and without
B and initial states, both GRU reset variants), their one-line errors, the importer on small
multi-node models, and the host cost formula."""
from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from partition import interpret
from partition.ir import TensorType
from partition.onnx.importer import OnnxImportError, load_onnx
from partition.ops import OpError, infer_types
from tests.partition.test_ops import assert_same, ort_node, run_op

S, N, I, H = 5, 3, 4, 6  # sequence, batch, input, hidden
GATES = {"LSTM": 4, "GRU": 3}
DIRS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _f32(rng, *shape):
    return (rng.standard_normal(shape) * 0.5).astype(np.float32)


def _case(onnx_op: str, direction: str, with_b: bool, with_init: bool, peepholes: bool = False, seed: int = 0):
    """Inputs in ONNX order for layout 0 (None where absent; index 4 is sequence_lens)."""
    rng = np.random.default_rng(seed)
    d, g = DIRS[direction], GATES[onnx_op]
    ins = [_f32(rng, S, N, I), _f32(rng, d, g * H, I), _f32(rng, d, g * H, H),
           _f32(rng, d, 2 * g * H) if with_b else None, None,
           _f32(rng, d, N, H) if with_init else None]
    if onnx_op == "LSTM":
        ins.append(_f32(rng, d, N, H) if with_init else None)
        ins.append(_f32(rng, d, 3 * H) if peepholes else None)
    return ins


def _ort_ref(onnx_op: str, ins: list, attrs: dict, layout: int) -> list[np.ndarray]:
    """onnxruntime runs layout 0 only; layout 1 is the spec's transposition of it."""
    n_out = 3 if onnx_op == "LSTM" else 2
    outs = ort_node(onnx_op, ins, {**attrs, "hidden_size": H}, n_out)
    if layout == 0:
        return outs
    return [outs[0].transpose(2, 0, 1, 3)] + [o.transpose(1, 0, 2) for o in outs[1:]]


def _ours(op: str, ins: list, attrs: dict, layout: int) -> list[np.ndarray]:
    """Our op on the ONNX inputs: sequence_lens dropped, holes zero-filled (as the importer does)."""
    onnx_op = op.upper()
    d, g = ins[1].shape[0], GATES[onnx_op]
    state = np.zeros((d, N, H), np.float32)
    zeros = [np.zeros((d, 2 * g * H), np.float32), state, state, np.zeros((d, 3 * H), np.float32)]
    optional = [ins[3]] + ins[5:]
    last = max([k for k, v in enumerate(optional) if v is not None], default=-1)
    args = list(ins[:3]) + [v if v is not None else z for v, z in zip(optional[:last + 1], zeros)]
    if layout == 1:
        args[0] = args[0].transpose(1, 0, 2)
        args[4:6] = [a.transpose(1, 0, 2) for a in args[4:6]]
    return run_op(op, args, {**attrs, "layout": layout})


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("with_b,with_init", [(True, True), (False, False), (False, True), (True, False)])
def test_lstm_matches_onnxruntime(direction, layout, with_b, with_init):
    ins = _case("LSTM", direction, with_b, with_init)
    attrs = {"direction": direction}
    assert_same(_ours("lstm", ins, attrs, layout), _ort_ref("LSTM", ins, attrs, layout))


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_lstm_peepholes_match_onnxruntime(direction, layout):
    ins = _case("LSTM", direction, True, True, peepholes=True, seed=3)
    attrs = {"direction": direction}
    assert_same(_ours("lstm", ins, attrs, layout), _ort_ref("LSTM", ins, attrs, layout))


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("lbr", [0, 1])
@pytest.mark.parametrize("with_b,with_init", [(True, True), (False, False), (False, True)])
def test_gru_matches_onnxruntime(direction, layout, lbr, with_b, with_init):
    ins = _case("GRU", direction, with_b, with_init, seed=1)
    attrs = {"direction": direction, "linear_before_reset": lbr}
    assert_same(_ours("gru", ins, attrs, layout), _ort_ref("GRU", ins, attrs, layout))


def test_explicit_default_activations_are_accepted():
    ins = _case("LSTM", "bidirectional", True, True)
    attrs = {"direction": "bidirectional", "activations": ["Sigmoid", "Tanh", "Tanh"] * 2, "input_forget": 0}
    assert_same(_ours("lstm", ins, attrs, 0), _ort_ref("LSTM", ins, attrs, 0))
    ins = _case("GRU", "forward", True, False)
    attrs = {"activations": ["Sigmoid", "Tanh"], "linear_before_reset": 1}
    assert_same(_ours("gru", ins, attrs, 0), _ort_ref("GRU", ins, attrs, 0))


# ============================================================================ errors
def _types(op: str, d: int = 1, extra: tuple = ()) -> list[TensorType]:
    g = 4 if op == "lstm" else 3
    shapes = [(S, N, I), (d, g * H, I), (d, g * H, H)] + list(extra)
    return [TensorType(s, "float32") for s in shapes]


@pytest.mark.parametrize("op,attrs,extra,msg", [
    ("lstm", {"activations": ["Relu", "Tanh", "Tanh"]}, (),
     "lstm: activations ['Relu', 'Tanh', 'Tanh'] are not supported; only the defaults ['Sigmoid', 'Tanh', 'Tanh']"),
    ("gru", {"activations": ["Sigmoid", "Tanh", "Sigmoid", "Relu"], "direction": "bidirectional"}, (),
     "gru: activations ['Sigmoid', 'Tanh', 'Sigmoid', 'Relu'] are not supported; only the defaults "
     "['Sigmoid', 'Tanh', 'Sigmoid', 'Tanh']"),
    ("lstm", {"clip": 3.0}, (), "lstm: clip (cell clipping, clip=3.0) is not supported"),
    ("gru", {"clip": 1.5}, (), "gru: clip (cell clipping, clip=1.5) is not supported"),
    ("lstm", {"input_forget": 1}, (), "lstm: input_forget=1 (coupled input and forget gates) is not supported"),
    ("gru", {"linear_before_reset": 2}, (), "gru: linear_before_reset must be 0 or 1, got 2"),
    ("lstm", {"direction": "both"}, (),
     "lstm: direction must be one of ['bidirectional', 'forward', 'reverse'], got 'both'"),
    ("gru", {"layout": 2}, (), "gru: layout must be 0 or 1, got 2"),
    ("lstm", {"hidden_size": 7}, (), f"lstm: hidden_size=7 but R has shape [1, {4 * H}, {H}]"),
    ("gru", {"direction": "bidirectional"}, (), f"gru: W must have shape [2, {3 * H}, {I}], got [1, {3 * H}, {I}]"),
    ("lstm", {}, ((1, 4 * H),), f"lstm: B must have shape [1, {8 * H}], got [1, {4 * H}]"),
    ("lstm", {"layout": 1}, ((1, 8 * H), (1, N, H)),  # layout 1 reads X's first axis as the batch
     f"lstm: initial_h must have shape [{S}, 1, {H}], got [1, {N}, {H}]"),
    ("lstm", {}, ((1, 8 * H), (1, N, H), (1, N, H), (1, 4 * H)), f"lstm: P must have shape [1, {3 * H}]"),
])
def test_unsupported_attributes_and_bad_shapes_are_errors(op, attrs, extra, msg):
    with pytest.raises(OpError, match=re.escape(msg)):
        infer_types(op, _types(op, extra=extra), attrs)


def test_wrong_dtype_and_input_count():
    ts = _types("gru")
    with pytest.raises(OpError, match="gru: X must be a float tensor, got int64"):
        infer_types("gru", [TensorType(ts[0].shape, "int64")] + ts[1:], {})
    with pytest.raises(OpError, match="gru: R dtype float64 differs from X dtype float32"):
        infer_types("gru", ts[:2] + [TensorType(ts[2].shape, "float64")], {})
    with pytest.raises(OpError, match=re.escape("gru takes 3..5 inputs, got 6")):
        infer_types("gru", ts + [TensorType((1, 6 * H), "float32")] * 3, {})


# ============================================================================ importer
def _model(nodes, inputs, outputs, inits, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _ort_model(model, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _classifier(opset: int, seq_lens: np.ndarray | None = None):
    """x -> bidirectional LSTM (no B, given initial_h/c: a hole; Y unused) -> Y_h, and a GRU over
    x whose Y feeds Gather(last step) -> Squeeze -> Gemm; Y_c is a graph output too."""
    rng = np.random.default_rng(7)
    inits = {"W": _f32(rng, 2, 4 * H, I), "R": _f32(rng, 2, 4 * H, H), "h0": _f32(rng, 2, N, H),
             "c0": _f32(rng, 2, N, H), "Wg": _f32(rng, 1, 3 * H, I), "Rg": _f32(rng, 1, 3 * H, H),
             "Bg": _f32(rng, 1, 6 * H), "last": np.array(S - 1, np.int64), "ax": np.array([0], np.int64),
             "Wd": _f32(rng, H, 2)}
    lens = ""
    if seq_lens is not None:
        inits["lens"], lens = seq_lens, "lens"
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "", lens, "h0", "c0"], ["", "yh", "yc"], name="lstm",
                         hidden_size=H, direction="bidirectional"),
        helper.make_node("GRU", ["x", "Wg", "Rg", "Bg"], ["yg"], name="gru", hidden_size=H, linear_before_reset=1),
        helper.make_node("Gather", ["yg", "last"], ["yl"], axis=0),
        (helper.make_node("Squeeze", ["yl", "ax"], ["ys"]) if opset >= 13  # axes became an input
         else helper.make_node("Squeeze", ["yl"], ["ys"], axes=[0])),
        helper.make_node("Gemm", ["ys", "Wd"], ["logits"]),
    ]
    outs = [_vi("yh", [2, N, H]), _vi("yc", [2, N, H]), _vi("logits", [N, 2])]
    return _model(nodes, [_vi("x", [S, N, I])], outs, inits, opset)


@pytest.mark.parametrize("opset", [11, 17, 21])
def test_importer_multi_node_model_matches_onnxruntime(opset):
    model = _classifier(opset)
    feeds = {"x": _f32(np.random.default_rng(9), S, N, I)}
    g = load_onnx(model.SerializeToString())
    assert sorted(n.op for n in g.nodes if n.op in ("lstm", "gru")) == ["gru", "lstm"]
    ours = interpret(g, feeds)
    assert_same(ours, _ort_model(model, feeds))


def test_importer_accepts_full_length_sequence_lens():
    model = _classifier(17, np.full(N, S, np.int32))
    feeds = {"x": _f32(np.random.default_rng(9), S, N, I)}
    assert_same(interpret(load_onnx(model.SerializeToString()), feeds), _ort_model(model, feeds))


def _import_error(model, match: str) -> str:
    with pytest.raises(OnnxImportError) as ei:
        load_onnx(model.SerializeToString())
    msg = str(ei.value)
    assert "\n" not in msg and match in msg, msg
    return msg


def test_importer_errors_are_one_line():
    lens = np.array([S, S - 1, S], np.int32)
    _import_error(_classifier(17, lens),
                  f"node 'lstm' (LSTM): sequence_lens [{S}, {S - 1}, {S}] is not supported; variable-length "
                  f"sequences are not, only every batch row running the full sequence length {S}")
    model = _classifier(17)
    model.graph.node[1].attribute.append(helper.make_attribute("clip", 2.0))
    _import_error(model, "node 'gru' (GRU): gru: clip (cell clipping, clip=2.0) is not supported")
    model = _classifier(17)
    model.graph.node[0].attribute.append(helper.make_attribute("activations", ["Sigmoid", "Relu", "Tanh"] * 2))
    _import_error(model, "node 'lstm' (LSTM): lstm: activations ['Sigmoid', 'Relu', 'Tanh', 'Sigmoid', 'Relu', "
                         "'Tanh'] are not supported")
    model = _classifier(17)
    model.graph.node[0].attribute.append(helper.make_attribute("input_forget", 1))
    _import_error(model, "node 'lstm' (LSTM): lstm: input_forget=1 (coupled input and forget gates) is not supported")


def test_importer_runtime_sequence_lens_is_an_error():
    model = _classifier(17)
    model.graph.node[0].input[4] = "lens"
    model.graph.input.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [N]))
    _import_error(model, "node 'lstm' (LSTM): sequence_lens computed at run time is not supported")


# ============================================================================ cost
def test_host_cost_follows_the_formula():
    import sim
    from partition.ops import op_cost
    from sim.graph.subgraph import host_op_seconds

    model = _classifier(17)
    g = load_onnx(model.SerializeToString())
    nodes = {n.op: n for n in g.nodes}
    d = 2
    lstm_flops = S * N * d * (2 * 4 * H * (I + H) + 43 * H)
    gru_flops = S * N * 1 * (2 * 3 * H * (I + H) + 31 * H)
    assert op_cost(nodes["lstm"]).flops == lstm_flops
    assert op_cost(nodes["lstm"]).macs == S * N * d * 4 * H * (I + H)
    assert op_cost(nodes["gru"]).flops == gru_flops
    hw = sim.load_hw("edge-npu")
    lstm = nodes["lstm"]
    nbytes = 4 * (S * N * I + 2 * (4 * H * I + 4 * H * H + 8 * H + 2 * N * H)  # X, W, R, zero B, h0, c0
                  + S * d * N * H + 2 * d * N * H)                             # Y, Y_h, Y_c
    want = max(lstm_flops / hw.host.peak_flops, nbytes / hw.host.mem_bytes_per_s) + hw.host.op_overhead_s
    assert host_op_seconds(lstm, hw) == pytest.approx(want, rel=1e-12)


def test_peepholes_add_their_flops():
    ts = _types("lstm", extra=((1, 8 * H), (1, N, H), (1, N, H), (1, 3 * H)))
    from partition.ops import OPS
    outs = infer_types("lstm", ts, {})
    assert OPS["lstm"].cost(ts, outs, {}).flops == S * N * (2 * 4 * H * (I + H) + 49 * H)
