"""tuner.calibrate_probes: the probe models `calibrate --host` adds to its default sources, so every
activation kind has rows in context whatever models are timed."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tuner.calibrate_probes import (CLASSIFIER_HEADS, CLASSIFIER_SHAPES, DENSE_SHAPES, GATE_KINDS, GEMM_SHAPES,
                                    GROUP_WIDTHS, GROUPED_SHAPES, PROBE_KINDS, PROBE_SHAPES, STAGE_SHAPES,
                                    STRIDED_WIDTHS, VOCAB_SHAPES, dense_probe_graph, grouped_probe_graph,
                                    probe_graph)


@pytest.fixture(scope="module")
def probes() -> list:
    """``probe_graphs()`` once for the tests that read it: building it draws the 268 MB weight pool."""
    from tuner.calibrate_probes import probe_graphs
    return probe_graphs()


def test_a_probe_puts_every_kind_behind_a_conv_and_its_batch_norm_and_runs_in_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    from partition.onnx.export import graph_to_onnx
    g = probe_graph((1, 16, 14, 14))
    gated = {n.inputs[0] for n in g.nodes if n.op == "mul"}
    acts = [n for n in g.nodes if n.op in PROBE_KINDS and n.inputs[0] not in gated]
    assert sorted(n.op for n in acts) == sorted(PROBE_KINDS)
    for n in acts:
        bn = n.inputs[0].producer
        assert bn.op == "batch_norm" and bn.inputs[0].producer.op == "conv2d"
        assert bn.inputs[0].producer.inputs[0] is g.inputs[0]      # side by side, not a chain
    # the gates: x * kind(x) over the batch norm's whole output, both ops its users
    gates = [n for n in g.nodes if n.op == "mul"]
    assert sorted(m.inputs[1].producer.op for m in gates) == sorted(GATE_KINDS)
    for m in gates:
        assert m.inputs[0].producer.op == "batch_norm" and m.inputs[1].producer.inputs[0] is m.inputs[0]
    sess = ort.InferenceSession(graph_to_onnx(g).SerializeToString())
    x = np.random.default_rng(0).standard_normal((1, 16, 14, 14)).astype(np.float32)
    outs = sess.run(None, {sess.get_inputs()[0].name: x})
    assert len(outs) == len(PROBE_KINDS) + len(GATE_KINDS) and all(np.isfinite(o).all() for o in outs)
    # a gate's output is its batch norm's output y times its kind of y (torch's SiLU, an older
    # HardSwish: ONNX's HardSigmoid of alpha 0.2, beta 0.5), y read as an extra output
    import onnx
    m = graph_to_onnx(g)
    m.graph.output.extend(onnx.helper.make_tensor_value_info(q.inputs[0].name, onnx.TensorProto.FLOAT, None)
                          for q in gates)
    sess = ort.InferenceSession(m.SerializeToString())
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {sess.get_inputs()[0].name: x})))
    for q in gates:
        y = got[q.inputs[0].name].astype(np.float64)
        ref = y / (1 + np.exp(-y)) if q.inputs[1].producer.op == "sigmoid" else y * np.clip(0.2 * y + 0.5, 0, 1)
        assert y.std() > 0.5 and np.allclose(got[q.outputs[0].name], ref, atol=1e-5)


def test_calibrate_host_adds_probes_to_its_default_sources_only():
    from tuner.cli.cmd_calibrate import host_graphs
    assert [label for label, _ in host_graphs(["byoc_demo"])] == ["byoc_demo"]
    graphs = host_graphs(None)
    pg = [(label, g) for label, g in graphs if label.startswith("probe:")]
    probes = [label for label, _ in pg]
    assert probes == ([f"probe:{c}x{h}x{w}" for _, c, h, w in PROBE_SHAPES]
                      + [f"probe:movement:{c}x{h}x{w}" for _, c, h, w in PROBE_SHAPES]
                      + [f"probe:select:{c}x{h}x{w}" for _, c, h, w in PROBE_SHAPES]
                      + [f"probe:dense:{k}x{n}" for k, n in DENSE_SHAPES]
                      + [f"probe:gemm:{m}x{k}x{n}" for m, k, n in GEMM_SHAPES]
                      + [f"probe:vocab:{m}x{k}x{n}" for m, k, n in VOCAB_SHAPES]
                      + [f"probe:grouped:{c}x{h}x{w}" for _, c, h, w in GROUPED_SHAPES]
                      + [f"probe:grouped:s2:{c}x{2 * h}x{2 * w}" for _, c, h, w in GROUPED_SHAPES]
                      + [f"probe:depthwise:{c}x{h}x{w}" for _, c, h, w in STAGE_SHAPES]
                      + [f"probe:classifier:{k}x{n}x{h}" for k, n in CLASSIFIER_SHAPES for h in CLASSIFIER_HEADS])
    assert len(graphs) > len(probes)
    for label, g in pg[:len(PROBE_SHAPES)]:
        assert {n.op for n in g.nodes} >= set(PROBE_KINDS)
        assert tuple(g.inputs[0].shape) in PROBE_SHAPES and label.startswith("probe:")


def test_dense_probe_is_one_fully_connected_layer_that_onnxruntime_computes():
    ort = pytest.importorskip("onnxruntime")
    from partition.onnx.export import graph_to_onnx
    for k, n in DENSE_SHAPES:
        assert k * n * 4 >= 16 * 2**20  # weights beyond the caches
    g = dense_probe_graph(48, 16)
    (fc,) = g.nodes
    assert fc.op == "dense" and fc.inputs[0].shape == (1, 48) and fc.inputs[1].shape == (16, 48)
    x = np.random.default_rng(0).standard_normal((1, 48)).astype(np.float32)
    sess = ort.InferenceSession(graph_to_onnx(g).SerializeToString())
    (y,) = sess.run(None, {sess.get_inputs()[0].name: x})
    w, bias = fc.inputs[1].data, fc.inputs[2].data
    np.testing.assert_allclose(y, x @ w.T + bias, rtol=1e-5, atol=1e-5)


def test_batch_1_dense_probes_chain_layers_of_distinct_weights(probes):
    """calibrate's batch-1 probes are DENSE_LAYERS layers in a row, each with weights of its own
    (so each leaves the caches before it is read again, as in a whole model), computed in order."""
    ort = pytest.importorskip("onnxruntime")
    from partition.onnx.export import graph_to_onnx
    from tuner.calibrate_probes import DENSE_LAYERS
    assert DENSE_LAYERS >= 2
    dense = [g for label, g in probes if label.startswith("probe:dense:")]
    assert len(dense) == len(DENSE_SHAPES)
    for g, (k, n) in zip(dense, DENSE_SHAPES):
        assert [tuple(fc.inputs[1].shape) for fc in g.nodes] == [(n, k)] + [(n, n)] * (DENSE_LAYERS - 1)
        assert len({id(fc.inputs[1]) for fc in g.nodes}) == DENSE_LAYERS
        # views of one pool (its memory held once), every layer's weights different numbers
        ws = [fc.inputs[1].data for fc in g.nodes]
        assert np.shares_memory(ws[0], dense[0].nodes[0].inputs[1].data)
        assert not any(np.array_equal(a[:, :64], b[:, :64]) for i, a in enumerate(ws) for b in ws[i + 1:])
    g = dense_probe_graph(12, 8, layers=3)
    x = np.random.default_rng(2).standard_normal((1, 12)).astype(np.float32)
    sess = ort.InferenceSession(graph_to_onnx(g).SerializeToString())
    (y,) = sess.run(None, {sess.get_inputs()[0].name: x})
    want = x
    for fc in g.nodes:
        want = want @ fc.inputs[1].data.T + fc.inputs[2].data
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_gemm_probes_are_compute_bound_on_the_dense_probes_weights():
    """The GEMM probes read weights as large as the batch-1 ones (16-256 MB) with enough rows to be
    compute-bound on the reference host (FLOPs per byte of weights >= 32), and compute x @ W^T + b."""
    ort = pytest.importorskip("onnxruntime")
    from partition.onnx.export import graph_to_onnx
    from sim.graph.subgraph import host_op_work
    assert {k * n for _, k, n in GEMM_SHAPES} <= {k * n for k, n in DENSE_SHAPES}
    for m, k, n in GEMM_SHAPES:
        assert 2 * m * k * n / (4 * k * n) >= 32  # FLOPs per byte of weights
    g = dense_probe_graph(24, 8, m=5)
    (fc,) = g.nodes
    assert host_op_work(fc)[0] == pytest.approx(2 * 5 * 24 * 8, rel=0.05)
    x = np.random.default_rng(1).standard_normal((5, 24)).astype(np.float32)
    sess = ort.InferenceSession(graph_to_onnx(g).SerializeToString())
    (y,) = sess.run(None, {sess.get_inputs()[0].name: x})
    np.testing.assert_allclose(y, x @ fc.inputs[1].data.T + fc.inputs[2].data, rtol=1e-5, atol=1e-5)


def test_vocab_probes_project_512_to_2048_inputs_to_32_to_64_k_outputs(probes):
    """The vocabulary probes are compute-bound GEMMs whose outputs outnumber their inputs 16-128
    times (an LM head at prefill), on weights the shared pool holds: each layer a view of it."""
    from tuner.calibrate_probes import DENSE_LAYERS, pool_size
    assert VOCAB_SHAPES
    for m, k, n in VOCAB_SHAPES:
        assert n >= 16384 and 16 <= n // k <= 128 and 2 * m * k * n / (4 * k * n) >= 32
        assert pool_size(k, n) <= max(pool_size(kd, nd, DENSE_LAYERS) for kd, nd in DENSE_SHAPES)
    graphs = [g for label, g in probes if label.startswith("probe:vocab:")]
    dense = next(g for label, g in probes if label.startswith("probe:dense:"))
    assert [(g.nodes[0].inputs[0].shape, g.nodes[0].inputs[1].shape) for g in graphs] == \
        [((m, k), (n, k)) for m, k, n in VOCAB_SHAPES]
    assert all(np.shares_memory(g.nodes[0].inputs[1].data, dense.nodes[0].inputs[1].data) for g in graphs)


def test_grouped_probe_holds_every_width_from_depthwise_and_onnxruntime_runs_it():
    """Each width narrower than the channels that divides them, as a C -> C convolution in C / width
    groups behind the same input, with its batch norm and relu; the calibration sees each one's
    width, and widths off onnxruntime's 16-channel block (12, 24) are among them."""
    ort = pytest.importorskip("onnxruntime")
    import sim
    from partition.onnx.export import graph_to_onnx
    from tuner.calibration import host_sample
    assert {w for w, _ in GROUP_WIDTHS} >= {1, 8, 12, 16, 24} and {k for w, k in GROUP_WIDTHS if w == 1} == {3, 5, 7}
    g = grouped_probe_graph((1, 48, 9, 9))
    convs = [n for n in g.nodes if n.op == "conv2d"]
    want = [(w, k) for w, k in GROUP_WIDTHS if w < 48 and 48 % w == 0]
    assert [(48 // n.attrs["groups"], n.inputs[1].shape[2]) for n in convs] == want
    host = sim.hw.config.HostConfig()
    samples = [host_sample(n, host) for n in convs]
    assert [s.group_width for s in samples] == [w for w, _ in want]
    assert {s.channel_align for s in samples if s.group_width in (12, 24)} == {4, 8}
    assert {s.channel_align for s in samples if s.group_width == 1} == {4}        # depthwise: capped
    assert all(n.inputs[0] is g.inputs[0] and n.outputs[0].shape == (1, 48, 9, 9) for n in convs)
    sess = ort.InferenceSession(graph_to_onnx(g).SerializeToString())
    x = np.random.default_rng(0).standard_normal((1, 48, 9, 9)).astype(np.float32)
    outs = sess.run(None, {sess.get_inputs()[0].name: x})
    assert len(outs) == len(want) and all(o.shape == (1, 48, 9, 9) and (o >= 0).all() for o in outs)


def test_strided_grouped_probe_downsamples_each_kernel_wider_than_1x1_and_onnxruntime_agrees():
    """The stride-2 probe halves its input's resolution with every (width, kernel) of the grouped
    probe but the 1x1 ones, and computes what numpy's own grouped convolution of its weights does."""
    ort = pytest.importorskip("onnxruntime")
    from partition.onnx.export import graph_to_onnx
    assert set(STRIDED_WIDTHS) == {(w, k) for w, k in GROUP_WIDTHS if k > 1} and (8, 3) in STRIDED_WIDTHS
    g = grouped_probe_graph((1, 8, 10, 10), STRIDED_WIDTHS, stride=2)
    convs = [n for n in g.nodes if n.op == "conv2d"]
    assert [(8 // n.attrs["groups"], n.inputs[1].shape[2]) for n in convs] == [(w, k) for w, k in STRIDED_WIDTHS if w < 8]
    assert all(n.attrs["strides"] == (2, 2) and n.outputs[0].shape == (1, 8, 5, 5) for n in convs)
    x = np.random.default_rng(2).standard_normal((1, 8, 10, 10)).astype(np.float32)
    sess = ort.InferenceSession(graph_to_onnx(g).SerializeToString())
    outs = sess.run(None, {sess.get_inputs()[0].name: x})
    for n, y in zip(convs, outs):
        w = n.inputs[1].data
        k, groups = w.shape[2], n.attrs["groups"]
        p = k // 2
        xp = np.pad(x[0], ((0, 0), (p, p), (p, p)))
        cg = 8 // groups
        conv = np.zeros((8, 5, 5))
        for o in range(8):
            grp = o // cg
            for i in range(5):
                for j in range(5):
                    conv[o, i, j] = (xp[grp * cg:(grp + 1) * cg, 2 * i:2 * i + k, 2 * j:2 * j + k] * w[o]).sum()
        bn = n.outputs[0].users[0]
        assert bn.op == "batch_norm"
        scale, bias, mean, var = (v.data for v in bn.inputs[1:5])
        eps = bn.attrs.get("epsilon", 1e-5)
        want = np.maximum(0, (conv - mean[:, None, None]) / np.sqrt(var[:, None, None] + eps) * scale[:, None, None]
                          + bias[:, None, None])
        np.testing.assert_allclose(y[0], want, rtol=1e-4, atol=1e-4)


def test_grouped_probes_meet_a_number_of_groups_at_more_than_one_resolution():
    """At one width the channels set the number of groups; with one channel count per resolution
    the two moved together and the fit took one for the other. Each resolution now has three
    channel counts, so RegNet's and ResNeXt's group counts at 8 channels per group (32 groups at
    28x28 and at 14x14) meet more than one resolution, and counts of 3 x 2^k fill the gaps."""
    at: dict[tuple[int, int], set[int]] = {}
    for _, c, h, _ in GROUPED_SHAPES:
        for gw, _k in GROUP_WIDTHS:
            if gw < c and c % gw == 0:
                at.setdefault((gw, c // gw), set()).add(h)
    assert {h for _, _, h, _ in GROUPED_SHAPES} == {56, 28, 14, 7}
    assert len({c for _, c, h, _ in GROUPED_SHAPES if h == 28}) == 3
    assert at[(8, 32)] == {14, 7} and at[(8, 16)] == {28, 14}
    assert {g for (gw, g) in at if gw == 8} >= {6, 8, 12, 16, 24, 32, 48, 64}
    assert all(c % 8 == 0 for _, c, _, _ in GROUPED_SHAPES)
    labels = [f"{c}x{h}x{w}" for _, c, h, w in GROUPED_SHAPES]
    assert len(set(labels)) == len(labels)  # one probe (and one label) per shape


def _conv_bn_reference(x: np.ndarray, conv: Any) -> np.ndarray:
    """numpy's own convolution (grouped, strided, padded to 'same') and batch norm of one
    ``conv_bn`` of the builder, from its weights; the relu when one follows."""
    w = conv.inputs[1].data
    groups, (stride, _), k = conv.attrs["groups"], conv.attrs["strides"], w.shape[2]
    cin, h, wd = x.shape[1:]
    p = k // 2
    oh, ow = (h + 2 * p - k) // stride + 1, (wd + 2 * p - k) // stride + 1
    xp = np.pad(x[0].astype(np.float64), ((0, 0), (p, p), (p, p)))
    cg, og = cin // groups, w.shape[0] // groups
    y = np.zeros((w.shape[0], oh, ow))
    for di in range(k):
        for dj in range(k):
            win = xp[:, di:di + stride * oh:stride, dj:dj + stride * ow:stride]
            for gi in range(groups):
                y[gi * og:(gi + 1) * og] += np.einsum("oc,chw->ohw", w[gi * og:(gi + 1) * og, :, di, dj],
                                                      win[gi * cg:(gi + 1) * cg])
    (bn,) = conv.outputs[0].users
    gamma, beta, mean, var = (v.data[:, None, None] for v in bn.inputs[1:])
    y = (y - mean) / np.sqrt(var + bn.attrs["epsilon"]) * gamma + beta
    users = bn.outputs[0].users
    return (np.maximum(y, 0) if users and users[0].op == "relu" else y)[None]


def test_depthwise_probe_holds_blocks_off_the_channel_block_and_onnxruntime_agrees():
    """Each branch is a network's block: a 1x1 convolution to channel counts that are not whole
    16-channel blocks (2 mod 4 among them), a depthwise one at its stride and kernel, a 1x1 back;
    the calibration sees each depthwise one's alignment, and onnxruntime computes what numpy does."""
    ort = pytest.importorskip("onnxruntime")
    import sim
    from partition.onnx.export import graph_to_onnx
    from tuner.calibrate_probes import depthwise_probe_graph, off_block_channels
    from tuner.calibration import host_sample
    counts = {k for _, c, _, _ in STAGE_SHAPES for k, _, _ in off_block_channels(c)}
    assert all(k % 16 for k in counts) and {k % 4 for k in counts} == {0, 2}
    assert {(s, w) for _, s, w in off_block_channels(64)} == {(1, 3), (2, 3), (1, 5), (2, 5)}
    # the slowest, 2 mod 4, four times at stride 1 and twice at stride 2 in each stage: enough rows
    # for the fit to follow (calibration.NO_ALIGN)
    for _, c, _, _ in STAGE_SHAPES:
        slow = [s for k, s, _ in off_block_channels(c) if k % 4 == 2]
        assert slow.count(1) == 4 and slow.count(2) == 2
    g = depthwise_probe_graph((1, 32, 10, 10))
    convs = [n for n in g.nodes if n.op == "conv2d"]
    assert len(convs) == 3 * len(off_block_channels(32))
    host = sim.hw.config.HostConfig()
    for (k, stride, window), (cin, dw, cout) in zip(off_block_channels(32), zip(*[iter(convs)] * 3)):
        assert cin.inputs[0] is g.inputs[0] and cin.outputs[0].shape[1] == k
        assert dw.attrs["groups"] == k and dw.attrs["strides"] == (stride, stride)
        assert dw.inputs[1].shape == (k, 1, window, window)
        assert cout.outputs[0].shape[1] == 32 and host_sample(dw, host).channel_align == min(k & -k, 4)
    sess = ort.InferenceSession(graph_to_onnx(g).SerializeToString())
    x = np.random.default_rng(3).standard_normal((1, 32, 10, 10)).astype(np.float32)
    outs = sess.run(None, {sess.get_inputs()[0].name: x})
    for (cin, dw, cout), y in zip(zip(*[iter(convs)] * 3), outs):
        want = _conv_bn_reference(_conv_bn_reference(_conv_bn_reference(x, cin), dw), cout)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_classifier_probe_is_one_layer_in_models_of_growing_bytes_and_onnxruntime_agrees():
    """The same fully connected layer, ``heads`` times side by side on one pooled input: the
    calibration sees it in models of 1 to 8 times its weights, and onnxruntime computes the sum
    of the heads numpy does."""
    ort = pytest.importorskip("onnxruntime")
    import sim
    from partition.onnx.export import graph_to_onnx
    from tuner.calibrate_probes import classifier_probe_graph, weight_pool
    from tuner.calibration import graph_run_bytes, host_sample
    host = sim.hw.config.HostConfig()
    sizes = []
    for heads in (1, 3):
        g = classifier_probe_graph(24, 10, heads, weight_pool(24 * 10 + heads, seed=heads))
        dense = [n for n in g.nodes if n.op == "dense"]
        assert len(dense) == heads and all(n.inputs[0] is dense[0].inputs[0] for n in dense)
        # every head is the same op to the calibration, but for the model around it
        assert len({host_sample(n, host).key() for n in dense}) == 1
        sizes.append(graph_run_bytes(g))
        sess = ort.InferenceSession(graph_to_onnx(g).SerializeToString())
        x = np.random.default_rng(heads).standard_normal((1, 24, 7, 7)).astype(np.float32)
        (got,) = sess.run(None, {sess.get_inputs()[0].name: x})
        pooled = x.astype(np.float64).mean(axis=(2, 3))
        want = sum(pooled @ n.inputs[1].data.T.astype(np.float64) + n.inputs[2].data for n in dense)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # two more heads: two more weight matrices, biases and outputs, and two adds
    assert sizes[1] - sizes[0] == 2 * 4 * (24 * 10 + 10 + 10 + 10)
    with pytest.raises(ValueError, match="too small"):
        classifier_probe_graph(24, 10, 4, weight_pool(24 * 10))


def test_movement_probe_makes_the_layout_changes_networks_make_and_onnxruntime_agrees():
    ort = pytest.importorskip("onnxruntime")
    from partition.onnx.export import graph_to_onnx
    from tuner.calibrate_probes import movement_probe_graph
    assert min(c * h * w for _, c, h, w in PROBE_SHAPES) <= 24 * 28 * 28       # a slim network's last stages
    g = movement_probe_graph((1, 6, 5, 4))
    assert {n.op for n in g.nodes} == {"transpose", "reshape", "split", "slice", "concat", "pad", "relu"}
    # the shuffle's reshapes neither read the graph's input nor make an output (onnxruntime copies those)
    for r in (n for n in g.nodes if n.op == "reshape"):
        assert r.inputs[0] not in g.inputs and r.outputs[0] not in g.outputs
    sess = ort.InferenceSession(graph_to_onnx(g).SerializeToString())
    x = np.random.default_rng(0).standard_normal((1, 6, 5, 4)).astype(np.float32)
    nhwc, shuffled, a, b, sliced, cat, padded = sess.run(None, {sess.get_inputs()[0].name: x})
    np.testing.assert_array_equal(nhwc, x.transpose(0, 2, 3, 1))
    relu = np.maximum(x, 0)
    np.testing.assert_array_equal(shuffled, relu.reshape(1, 2, 3, 5, 4).transpose(0, 2, 1, 3, 4).reshape(1, 6, 5, 4))
    np.testing.assert_array_equal(a, x[:, :3])
    np.testing.assert_array_equal(b, x[:, 3:])
    np.testing.assert_array_equal(sliced, x[:, :3])
    np.testing.assert_array_equal(cat, np.concatenate([x, x], axis=1))
    np.testing.assert_array_equal(padded, np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))))


def test_select_probe_holds_masks_and_the_relay_bias_epilogue_and_onnxruntime_agrees():
    """byoc_demo held out was the only model with ``bias_add`` and ``less``, and both were
    predicted at 3-5x their time in it (the seventh session): the probe gives them, the other
    comparisons and a division rows of their own, checked here against numpy through onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    from partition.onnx.export import graph_to_onnx
    from tuner.calibrate_probes import select_probe_graph
    g = select_probe_graph((1, 6, 5, 4))
    ops = {n.name: n for n in g.nodes}
    assert ops["bias"].op == "bias_add" and ops["bias"].inputs[0].producer.op == "conv2d"
    assert len(ops["conv"].inputs) == 2           # the bias is the bias_add's, not the convolution's
    assert {n.op for n in g.nodes} >= {"less", "greater", "equal", "and", "or", "not", "where", "div"}
    assert ops["where"].inputs[0].producer is ops["mask"]
    sess = ort.InferenceSession(graph_to_onnx(g).SerializeToString())
    x = np.random.default_rng(0).standard_normal((1, 6, 5, 4)).astype(np.float32)
    x[0, 0, 0, :2] = 0.0                          # equal meets a true case
    relu, eq, both, either, no, where, div = sess.run(None, {sess.get_inputs()[0].name: x})
    w = ops["conv"].inputs[1].data.reshape(6, 6)
    bias = ops["bias"].inputs[1].data
    np.testing.assert_allclose(relu, np.maximum(np.einsum("oc,nchw->nohw", w, x) + bias[:, None, None], 0),
                               rtol=1e-5, atol=1e-6)
    neg, big = x < 0, x > 0.5
    np.testing.assert_array_equal(eq, x == 0)
    assert eq.any()
    np.testing.assert_array_equal(both, neg & big)
    np.testing.assert_array_equal(either, neg | big)
    np.testing.assert_array_equal(no, ~neg)
    np.testing.assert_array_equal(where, x)      # the mask: all true, as an attention mask with no padding
    np.testing.assert_allclose(div, x / 3.0, rtol=1e-6)


def test_a_weight_pool_too_small_for_a_probe_is_refused():
    from tuner.calibrate_probes import pool_size, weight_pool
    assert pool_size(12, 8, layers=3) == 12 * 8 + 3
    dense_probe_graph(12, 8, layers=3, pool=weight_pool(pool_size(12, 8, layers=3)))
    with pytest.raises(ValueError, match="too small"):
        dense_probe_graph(12, 8, layers=3, pool=weight_pool(12 * 8))
