"""Device-resident tensors (partition/residency.py, docs/PARTITIONING.md): the partition search's
fast evaluator, its exact bound, both costings of a partitioned graph (tuner.costing.graph_cost,
sim.cost_graph) and the device runtime agree on them, and the link bytes they save or add are
the tensors' own, counted by hand."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

import sim
import tuner
from partition import IRError, interpret, load_onnx
from partition.builder import GraphBuilder
from partition.residency import call_residency, host_crossings, mark_device_resident
from sim.graph.transfer import device_bytes
from tuner.costing import CostOptions, KernelCoster, graph_cost
from tuner.partition_problem import Problem

OPTS = CostOptions(fidelity="analytical")
ROWS, WIDTH, PAST = 8, 32, 24


def _hw(ops=("dense", "matmul", "concat")):
    return sim.HardwareConfig.from_dict({"base": "edge-npu", "support": {"ops": list(ops), "patterns": []},
                                         "link": {"bytes_per_s": 1e9, "launch_latency_s": 2e-6}})


def decoder_like(host_reads_cache: bool = False, resident: bool = True):
    """x -> dense -> k; present = concat(cache, k); scores = matmul(k, transpose(present)); the
    model returns scores and present. With ``host_reads_cache`` a tanh on the host reads the cache."""
    b = GraphBuilder("dec", 0)
    x = b.input("x", (ROWS, WIDTH))
    cache = b.input("cache", (PAST, WIDTH))
    k = b.dense(x, WIDTH, name="k", bias=False)
    present = b.concat(cache, k, name="present", axis=0)
    s = b.matmul(k, b.transpose(present, name="pt", perm=(1, 0)), name="scores")
    outs = [s, present]
    if host_reads_cache:
        outs.append(b.tanh(cache, name="peek"))
    g = b.finish(outs)
    return mark_device_resident(g, ["cache", present.name]) if resident else g


def _subsets(p):
    off = [i for i in range(len(p.units)) if p.offloadable[i]]
    for r in range(len(off) + 1):
        yield from (frozenset(c) for c in itertools.combinations(off, r))


@pytest.mark.parametrize("host_reads_cache", [False, True])
def test_evaluator_equals_both_costings_of_the_partitioned_graph(host_reads_cache):
    hw = _hw()
    p = Problem(decoder_like(host_reads_cache), hw, KernelCoster(hw, opts=OPTS), OPTS)
    for s in _subsets(p):
        part = p.materialize(s)
        part.lint()
        gc = graph_cost(part, p.coster, OPTS).total
        c = p.cost(s)
        assert c.latency_s == pytest.approx(gc.latency_s, rel=1e-12)
        assert c.link_bytes == pytest.approx(gc.link_bytes, rel=1e-12)
        assert c.energy_j == pytest.approx(gc.energy_j, rel=1e-12)
        total = p.fixed_cost()
        for k in range(len(p.clusters)):
            total = total + p.cluster_cost(k, s)
        assert total.latency_s == pytest.approx(c.latency_s, rel=1e-12)
        # sim's own walk of the partitioned graph (default schedules) says the same link bytes
        assert sum(r.link_bytes for r in sim.cost_graph(part, hw, fidelity="analytical").calls) == \
            pytest.approx(gc.link_bytes, rel=1e-12)


def test_link_bytes_by_hand():
    """Everything offloadable on the device: unmarked, the cache crosses in; marked, it does not
    (present crosses out either way, as the host's transpose reads it). All on the host: unmarked,
    nothing crosses; marked, the cache comes back to the host and the present goes to the device."""
    hw = _hw()
    word = hw.array.word_bytes
    x_b, cache_b, present_b, scores_b = (ROWS * WIDTH * word, PAST * WIDTH * word,
                                        (PAST + ROWS) * WIDTH * word, ROWS * (PAST + ROWS) * word)
    for resident in (False, True):
        p = Problem(decoder_like(resident=resident), hw, KernelCoster(hw, opts=OPTS), OPTS)
        every = frozenset(i for i in range(len(p.units)) if p.offloadable[i])
        on_device = p.cost(every).link_bytes
        on_host = p.cost(frozenset()).link_bytes
        # The transpose stays on the host: present goes out to it and its result comes back into
        # the matmul's function, which therefore cannot be the concat's (the path through the host
        # would be a cycle): k leaves one function and enters the other.
        pt_b = present_b
        k_twice = 2 * ROWS * WIDTH * word
        if resident:
            assert on_device == x_b + scores_b + present_b + pt_b + k_twice
            assert on_host == cache_b + present_b
        else:
            assert on_device == x_b + cache_b + scores_b + present_b + pt_b + k_twice
            assert on_host == 0


def test_exact_bound_stays_below_every_completion():
    from tuner.exact import _Bound
    hw = _hw()
    p = Problem(decoder_like(True), hw, KernelCoster(hw, opts=OPTS), OPTS)
    for k, members in enumerate(p.clusters):
        b = _Bound(p, k, "latency")
        for st in itertools.product((-1, 0, 1), repeat=b.n):
            free = [j for j in range(b.n) if st[j] == -1]
            best = min(p.cluster_cost(k, frozenset(b.members[j] for j in range(b.n)
                                                   if (dict(zip(free, bits)).get(j, st[j])) == 1)).latency_s
                       for bits in itertools.product((0, 1), repeat=len(free)))
            assert b(list(st)) <= best * (1 + 1e-9)


def test_call_residency_and_host_crossings_on_a_partitioned_graph():
    hw = _hw()
    p = Problem(decoder_like(True), hw, KernelCoster(hw, opts=OPTS), OPTS)
    every = frozenset(i for i in range(len(p.units)) if p.offloadable[i])
    part = p.materialize(every)
    calls = [n for n in part.nodes if n.op == "call"]
    reading = [n for n in calls if any(v.name == "cache" for v in n.inputs)]
    assert len(reading) == 1
    args, _ = call_residency(part, reading[0])
    assert args == {i for i, v in enumerate(reading[0].inputs) if v.name == "cache"}
    # the tanh on the host reads the cache: it crosses once; present is made on the device
    assert [v.name for v in host_crossings(part)] == ["cache"]


def test_marking_an_unknown_tensor_is_refused():
    g = decoder_like(resident=False)
    with pytest.raises(IRError, match="'nope' is not an input or output"):
        mark_device_resident(g, ["nope"])


KV = Path(__file__).resolve().parents[1] / "data" / "kv"


def _shapes(batch=2, past=5):
    s = {"input_ids": (batch, 1)}
    for i in range(2):
        for k in ("key", "value"):
            s[f"past_{k}.{i}"] = (batch, 2, past, 8)
    return s


def test_tuned_plan_runs_back_with_the_cache_on_the_device(tmp_path):
    """The opset-23 Attention decoder on cloud-npu: the plan's prediction equals the simulated run,
    the outputs equal the interpreter's, the packed plan keeps the marks, and no call moves a
    cache tensor that its own function reads or writes."""
    g = load_onnx(KV / "attention_decoder.onnx", input_shapes=_shapes())
    hw = sim.load_hw("cloud-npu")
    plan = tuner.tune(g, hw, trials=1, seed=0, progress=False, model_name="attention_decoder")
    plan.save(tmp_path / "plan.zip")
    mod = sim.graph.runtime.load(tmp_path / "plan.zip")
    assert set(mod.graph.meta["device_resident"]) == set(g.meta["device_resident"])
    xs = sim.graph.runtime.example_inputs(mod)
    res = mod.run(xs)
    assert res.latency_s == pytest.approx(plan.latency_s, rel=1e-9)
    for got, want in zip(res.outputs.values(), interpret(g, [xs[v.name] for v in g.inputs])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # link bytes of the run: every call's crossings less its resident ones, plus the host's
    resident = set(g.meta["device_resident"])
    moved = 0
    for node in mod.graph.nodes:
        if node.op == "call" and node.attrs["callee"] in mod.reports:
            fn = mod.graph.functions[node.attrs["callee"]]
            ins = [v for v in node.inputs if v.name not in resident]
            outs = [v for v in node.outputs if not (v.name in resident and not v.users)]
            moved += sum(device_bytes(v.type, hw) for v in (*ins, *outs))
            assert len(fn.graph.inputs) == len(node.inputs)
    moved += sum(device_bytes(v.type, hw) for v in host_crossings(mod.graph))
    assert sum(f.calls * f.per_call.link_bytes for f in res.breakdown.functions) == moved


def test_a_cache_read_and_written_inside_one_function_never_crosses():
    """x -> dense -> k; present = concat(cache, k); y = dense(present): all three in one function,
    so per step only x goes in and y comes out (the unmarked graph also moves cache and present)."""
    hw = _hw()
    word = hw.array.word_bytes
    for resident in (True, False):
        b = GraphBuilder("dec2", 0)
        x = b.input("x", (ROWS, WIDTH))
        cache = b.input("cache", (PAST, WIDTH))
        present = b.concat(cache, b.dense(x, WIDTH, name="k", bias=False), name="present", axis=0)
        y = b.dense(present, 16, name="y", bias=False)
        g = b.finish([y, present])
        if resident:
            mark_device_resident(g, ["cache", present.name])
        p = Problem(g, hw, KernelCoster(hw, opts=OPTS), OPTS)
        every = frozenset(i for i in range(len(p.units)) if p.offloadable[i])
        assert len(p.groups(every)) == 1
        c = p.cost(every)
        want = ROWS * WIDTH * word + (PAST + ROWS) * 16 * word
        if not resident:
            want += PAST * WIDTH * word + (PAST + ROWS) * WIDTH * word
        assert c.link_bytes == want
        assert graph_cost(p.materialize(every), p.coster, OPTS).total.link_bytes == want
