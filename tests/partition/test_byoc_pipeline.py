"""partition_for end to end: it leaves its input alone, names the pass that failed, and on every
built-in model and shared ONNX model gives a valid graph that computes what the original does."""
from __future__ import annotations

from pathlib import Path
import glob
import os

import numpy as np
import pytest

from partition import Graph, IRError, interpret, load_onnx, models
from partition.byoc import PartitionError, candidate_regions, partition_for, run_passes, summarize
from partition.models.stats import count_macs
from partition.targets import Target, TargetError, get

from test_byoc_fixtures import acc_target, conv_block, cycle_through_region, inputs_for

SHARED = str(Path(__file__).resolve().parents[3] / "shared" / "models")  # ../shared beside the checkout
TARGETS = ("npu-gemm", "npu-full")


def model_inputs(g: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for v in g.inputs:
        if np.dtype(v.dtype).kind in "iu":  # token ids / masks / segment ids: keep them in range
            hi = 100 if "input_ids" in v.name else 2
            out.append(rng.integers(0, hi, v.shape).astype(v.dtype))
        else:
            out.append(rng.standard_normal(v.shape).astype(v.dtype))
    return out


def check_partition(g: Graph, target: str, numerics: bool) -> Graph:
    p = partition_for(g, target)
    p.lint()
    p.toposort()  # raises on a cycle
    ext = {s for s, f in p.functions.items() if f.attrs.get("Compiler") == target}
    for graph, n in p.walk():
        if n.op == "call" and graph is not None:
            assert n.attrs["callee"] in p.functions or n.attrs["callee"] in graph.functions
    for s in ext:
        f = p.functions[s]
        assert f.attrs["global_symbol"] == s and f.attrs["Primitive"] == 1
        assert all(not v.is_const for v in f.graph.inputs)
    # MACs are conserved, counted by the models package's own counter.
    assert count_macs(p) == count_macs(g)
    assert summarize(p).macs_total == count_macs(g)
    if numerics:
        x = model_inputs(g)
        for a, b in zip(interpret(p, x), interpret(g, x)):
            np.testing.assert_array_equal(a, b)
    return p


def test_partition_for_does_not_touch_its_input():
    g = conv_block()
    before = str(g)
    p = partition_for(g, acc_target(patterns=["conv2d_bias_relu"]))
    assert str(g) == before and not g.functions
    assert all(not n.meta for n in g.nodes)
    assert p is not g and p.functions


def test_target_by_name_and_unknown_target():
    p = partition_for(conv_block(), "npu-gemm")
    assert {f.attrs["Compiler"] for f in p.functions.values()} == {"npu-gemm"}
    with pytest.raises(TargetError, match="unknown target 'npu-x'; known targets: npu-gemm, npu-full"):
        partition_for(conv_block(), "npu-x")


def test_failing_pass_is_named():
    def boom(node):
        raise IRError("support table is corrupt")
    with pytest.raises(PartitionError, match="pass annotate_target failed for target bad: support table is corrupt"):
        partition_for(conv_block(), Target("bad", boom))

    def corrupt(g, t):
        g.nodes.reverse()  # breaks topological order
        return g
    with pytest.raises(PartitionError, match="graph is invalid after pass corrupt"):
        run_passes(conv_block(), acc_target(), [("corrupt", corrupt)])


def test_keep_on_host_through_partition_for():
    g = cycle_through_region()
    ids = [r.id for r in candidate_regions(g, acc_target())]
    assert ids == [0, 1, 2]
    full = partition_for(g, acc_target())
    kept = partition_for(g, acc_target(), keep_on_host=frozenset({1}))
    calls = lambda p: [n for n in p.nodes if n.op == "call"]
    assert len(calls(full)) == 3 and len(calls(kept)) == 2
    assert sorted(n.name for n in kept.nodes if n.op != "call") == ["c1", "c2", "h1", "h2", "k"]
    for a, b in zip(interpret(kept, inputs_for(g)), interpret(g, inputs_for(g))):
        np.testing.assert_array_equal(a, b)


def test_builtin_targets_differ_as_documented():
    gemm, full = get("npu-gemm"), get("npu-full")
    g = models.get("resnet18")
    sg, sf = summarize(partition_for(g, gemm)), summarize(partition_for(g, full))
    assert sorted(sg.host_ops) == ["flatten", "global_avg_pool2d", "max_pool2d"]
    assert sf.host_ops == () and len(sf.functions) == 1
    assert sg.macs_offloaded_pct == pytest.approx(100.0) and sf.macs_offloaded_pct == pytest.approx(100.0)


SMALL = ["bert_tiny", "byoc_demo", "ssd_detector", "mobilenet_v2"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", SMALL)
def test_builtin_model_partitions_and_computes_the_same(name, target):
    check_partition(models.get(name), target, numerics=True)


def test_resnet18_partitions():
    g = models.get("resnet18")
    for t in TARGETS:
        check_partition(g, t, numerics=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted({m.name for m in models.list_models()} - set(SMALL) - {"resnet18"}))
def test_large_builtin_model_partitions(name):
    g = models.get(name)
    for t in TARGETS:
        check_partition(g, t, numerics=False)


def _shared(pattern: str = "*.onnx") -> list[str]:
    return sorted(os.path.basename(f) for f in glob.glob(os.path.join(SHARED, pattern)))


# mobilenet_v2's numerics are covered by the built-in model; the weighted file is checked for structure.
NUMERIC_FILES = {"tiny_detector_topk.onnx", "bert_small.shapes.onnx"}


@pytest.mark.skipif(not os.path.isdir(SHARED), reason="shared models not present")
@pytest.mark.parametrize("fname", [f for f in _shared() if "bert_base" not in f])
def test_shared_onnx_model_partitions(fname):
    g = load_onnx(os.path.join(SHARED, fname))
    for t in TARGETS:
        check_partition(g, t, numerics=fname in NUMERIC_FILES)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(SHARED), reason="shared models not present")
def test_shared_bert_base_partitions():
    g = load_onnx(os.path.join(SHARED, "bert_base.shapes.onnx"))
    for t in TARGETS:
        check_partition(g, t, numerics=False)


def test_partitioned_graph_survives_json_round_trip():
    """External functions, their nested composites and calls from loop bodies serialize."""
    from partition import graph_from_json, graph_to_json
    g = models.get("byoc_demo")
    p = partition_for(g, "npu-full")
    q = graph_from_json(*graph_to_json(p))
    q.lint()
    assert {s: f.attrs for s, f in q.functions.items()} == {s: f.attrs for s, f in p.functions.items()}
    x = model_inputs(g)
    for a, b in zip(interpret(q, x), interpret(g, x)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["resnet18", "bert_tiny", "ssd_detector", "byoc_demo"])
@pytest.mark.parametrize("target", ["npu-gemm", "npu-full"])
def test_graph_outputs_keep_the_model_names(name, target):
    g = models.get(name)
    pg = partition_for(g, target)
    assert [v.name for v in pg.outputs] == [v.name for v in g.outputs]
    if name in ("resnet18", "bert_tiny"):  # their outputs are computed on the accelerator
        assert any(v.producer is not None and v.producer.op == "call" for v in pg.outputs)
