"""tuner.calibrate_probes: the probe models `calibrate --host` adds to its default sources, so every
activation kind has rows in context whatever models are timed."""
from __future__ import annotations

import numpy as np
import pytest

from tuner.calibrate_probes import DENSE_SHAPES, PROBE_KINDS, PROBE_SHAPES, dense_probe_graph, probe_graph, probe_graphs


def test_a_probe_puts_every_kind_behind_a_conv_and_its_batch_norm_and_runs_in_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    from partition.onnx.export import graph_to_onnx
    g = probe_graph((1, 16, 14, 14))
    acts = [n for n in g.nodes if n.op in PROBE_KINDS]
    assert sorted(n.op for n in acts) == sorted(PROBE_KINDS)
    for n in acts:
        bn = n.inputs[0].producer
        assert bn.op == "batch_norm" and bn.inputs[0].producer.op == "conv2d"
        assert bn.inputs[0].producer.inputs[0] is g.inputs[0]      # side by side, not a chain
    sess = ort.InferenceSession(graph_to_onnx(g).SerializeToString())
    x = np.random.default_rng(0).standard_normal((1, 16, 14, 14)).astype(np.float32)
    outs = sess.run(None, {sess.get_inputs()[0].name: x})
    assert len(outs) == len(PROBE_KINDS) and all(np.isfinite(o).all() for o in outs)


def test_calibrate_host_adds_probes_to_its_default_sources_only():
    from tuner.cli.cmd_calibrate import host_graphs
    assert [label for label, _ in host_graphs(["byoc_demo"])] == ["byoc_demo"]
    graphs = host_graphs(None)
    probes = [label for label, _ in graphs if label.startswith("probe:")]
    assert probes == [label for label, _ in probe_graphs()]
    assert len(probes) == len(PROBE_SHAPES) + len(DENSE_SHAPES)
    assert len(graphs) > len(probes)
    for label, g in probe_graphs()[:len(PROBE_SHAPES)]:
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
