"""Ops onnxruntime runs as their ONNX function body (``tuner.ort_functions``): the calibration's
export inlines them itself with their kernels named after their node, and onnxruntime computes
the same outputs with the same kernels."""
import numpy as np
import pytest

pytest.importorskip("onnxruntime")


def _graph():
    """mish and hard_swish on a graph input (onnxruntime 1.32 has no kernel of its own for
    either), beside relu and a softmax, which have one."""
    from partition.builder import GraphBuilder
    b = GraphBuilder("fns", 0)
    x = b.input("x", (1, 32, 32, 32))
    m = b.mish(x, name="act.mish")
    h = b.hard_swish(b.relu(m, name="act.relu"), name="act.hswish")
    return b.finish([b.softmax(h, axis=1, name="sm")])


def _kernels(data, feed):
    """onnxruntime's outputs on ``feed`` and the names of the kernels it ran."""
    import onnxruntime as ort
    from tuner.calibrate_context import _is_kernel, _kernel_name, _profiled_events
    outs = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feed)
    return outs, [_kernel_name(e["name"]) for e in _profiled_events(data, feed, 1) if _is_kernel(e)]


def test_inlined_ops_are_named_after_their_node_and_compute_the_same():
    from partition.onnx.export import graph_to_onnx
    from tuner.calibrate_context import exported
    from tuner.ort_functions import runs_as_function, ir_types
    g = _graph()
    plain = graph_to_onnx(g)
    data, _ = exported(g)
    feed = {"x": np.random.default_rng(0).standard_normal((1, 32, 32, 32)).astype(np.float32)}
    want, plain_names = _kernels(plain.SerializeToString(), feed)
    got, names = _kernels(data, feed)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7)
    assert len(names) == len(plain_names)                      # the same kernels, named
    types, opsets = ir_types(g), list(plain.opset_import)
    inlined = {n.op_type for n in plain.graph.node if runs_as_function(n, types, opsets)}
    if not inlined:
        pytest.skip("this onnxruntime has kernels of its own for mish and hard_swish")
    assert {"Relu", "Softmax"}.isdisjoint(inlined)             # kernels of their own: left alone
    for node in (n for n in plain.graph.node if n.op_type in inlined):
        assert any(k.startswith(node.name + "/") for k in names), node.name
    # what onnxruntime did before: the kernels of an inlined op matched no node of the graph
    nodes = [n.name for n in plain.graph.node]
    assert any(not any(k.startswith(n) for n in nodes) for k in plain_names) == bool(inlined)


def test_a_profiled_function_op_has_kernel_time_of_its_own():
    """In a calibration's rows, mish (three kernels once inlined) is no longer left at zero with
    its time shared over the other nodes."""
    from tuner.calibrate_context import profile_models
    (p,), failed = profile_models([("fns", _graph())], rounds=2, min_time_s=0.0, min_runs=4, blocks=1)
    assert failed == []
    k = {r.node.name: r.kernel_s for r in p.rows}
    assert k["act.mish"] > k["act.relu"] and k["act.hswish"] > 0   # without the names: 0 and 0
