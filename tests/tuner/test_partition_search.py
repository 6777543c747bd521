"""Partition search: the fast evaluator against the partitioned graph's cost and a hand computation,
search vs the exact optimum on graphs named by shape, baselines, and acyclicity."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import sim
from partition import interpret
from partition.builder import GraphBuilder
from tuner.costing import CostOptions, KernelCoster, graph_cost, host_op_cost
from tuner.exact import cluster_enumeration, cluster_optimum, exhaustive, optimum
from tuner.partition_problem import PartitionSearchError, Problem
from tuner.partition_search import search

OPTS = CostOptions(fidelity="analytical")


def _hw(**over):
    """edge-npu with dense/matmul support only (no patterns): every dense is its own unit."""
    d = {"base": "edge-npu", "support": {"ops": ["dense", "matmul"], "patterns": []}}
    for k, v in over.items():
        sec, f = k.split("__")
        d.setdefault(sec, {})[f] = v
    return sim.HardwareConfig.from_dict(d)


def chain(n=4, width=64, rows=32, host_every=2):
    """dense, dense, tanh, dense, dense, tanh, ...: runs of offloadable units between host ops."""
    b = GraphBuilder("chain", 0)
    x = b.input("x", (rows, width))
    for i in range(n):
        x = b.dense(x, width, name=f"d{i}", bias=False)
        if (i + 1) % host_every == 0:
            x = b.tanh(x, name=f"t{i}")
    return b.finish([x])


def diamond(width=64, rows=32):
    """x -> d0 -> (d1, tanh) -> add: two branches meet."""
    b = GraphBuilder("diamond", 1)
    x = b.input("x", (rows, width))
    a = b.dense(x, width, name="d0", bias=False)
    l = b.dense(a, width, name="d1", bias=False)
    r = b.tanh(a, name="t")
    y = b.dense(b.add(l, r, name="s"), width, name="d2", bias=False)
    return b.finish([y])


def would_be_cycle(width=64, rows=32):
    """d0 -> tanh -> d2 and d0 -> d2: merging d0 and d2 with tanh on the host would be a cycle."""
    b = GraphBuilder("cyc", 2)
    x = b.input("x", (rows, width))
    a = b.dense(x, width, name="d0", bias=False)
    t = b.tanh(a, name="t")
    y = b.add(a, t, name="s")
    z = b.dense(y, width, name="d2", bias=False)
    return b.finish([z, a])


def multi_producer(width=32, rows=16):
    """Two independent denses feed one matmul; another consumer reads the first."""
    b = GraphBuilder("mp", 3)
    x = b.input("x", (rows, width))
    p = b.dense(x, width, name="p", bias=False)
    q = b.dense(x, width, name="q", bias=False)
    m = b.matmul(p, b.transpose(q, name="qt", perm=(1, 0)), name="m")
    e = b.exp(p, name="e")
    return b.finish([m, e])


def branchy(width=64, rows=32):
    """d0 -> if(c) {d1 -> tanh -> d2} else {d3} -> d4: offloadable units in both branches. Costing
    counts the then branch (more work, ``partition.ops.branch_work``) whatever is offloaded: its
    denses moved into called functions keep their work, so the evaluator (weights fixed on the
    source graph) and graph costing of each partitioned graph agree."""
    b = GraphBuilder("branchy", 4)
    x = b.input("x", (rows, width))
    c = b.input("c", (), "bool")
    tb = GraphBuilder("then", 4)
    t = tb.input("v", (rows, width))
    then_g = tb.finish([tb.dense(tb.tanh(tb.dense(t, width, name="d1", bias=False), name="t"), width, name="d2",
                                 bias=False)])
    eb = GraphBuilder("else", 4)
    else_g = eb.finish([eb.dense(eb.input("v", (rows, width)), width, name="d3", bias=False)])
    y = b.op("if", [c, b.dense(x, width, name="d0", bias=False)], {"then_branch": then_g, "else_branch": else_g},
             name="choose")
    return b.finish([b.dense(y, width, name="d4", bias=False)])


GRAPHS = {"chain": chain, "diamond": diamond, "would_be_cycle": would_be_cycle, "multi_producer": multi_producer,
          "branchy": branchy}
# Link speeds from "offloading never pays" to "offloading always pays", so the optimum moves.
LINKS = [1e6, 350e6, 2e9, 1e12]


def _problem(graph, link=350e6, launch=100e-6):
    hw = _hw(link__bytes_per_s=link, link__launch_latency_s=launch)
    return Problem(graph, hw, KernelCoster(hw, opts=OPTS), OPTS)


def _all_subsets(p):
    off = [i for i in range(len(p.units)) if p.offloadable[i]]
    for r in range(len(off) + 1):
        yield from (frozenset(c) for c in itertools.combinations(off, r))


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_evaluator_equals_cost_of_the_partitioned_graph(name):
    p = _problem(GRAPHS[name]())
    for s in _all_subsets(p):
        part = p.materialize(s)
        part.lint()
        gc = graph_cost(part, p.coster, OPTS).total
        c = p.cost(s)
        assert c.latency_s == pytest.approx(gc.latency_s, rel=1e-12)
        assert c.energy_j == pytest.approx(gc.energy_j, rel=1e-12)
        assert c.calls == gc.calls
        total = p.fixed_cost()
        for k in range(len(p.clusters)):
            total = total + p.cluster_cost(k, s)
        assert total.latency_s == pytest.approx(c.latency_s, rel=1e-12)


class _SlowerKernels(KernelCoster):
    """Every kernel 3x the cycles and 2x the joules of the default schedule's (another coster for
    ``with_coster``)."""

    def __call__(self, wl):
        from dataclasses import replace
        r = super().__call__(wl)
        return replace(r, cycles=3 * r.cycles, compute_cycles=3 * r.compute_cycles, energy_j=2 * r.energy_j)


@pytest.mark.parametrize("name", ["diamond", "multi_producer"])
def test_the_memoised_evaluator_keeps_each_costers_functions_apart(name):
    """The evaluator memoises each function's cost (and each set's functions): after every subset
    was costed, ``with_coster`` costs them as a problem built on that coster does, and the first
    problem's costs are unchanged."""
    hw = _hw()
    graph = GRAPHS[name]()
    p = Problem(graph, hw, KernelCoster(hw, opts=OPTS), OPTS)
    sets = list(_all_subsets(p))
    before = [p.cost(s) for s in sets]
    slow = _SlowerKernels(hw, opts=OPTS)
    q = p.with_coster(slow)
    fresh = Problem(graph, hw, _SlowerKernels(hw, opts=OPTS), OPTS)
    assert any(q.cost(s).device_s > c.device_s > 0 for s, c in zip(sets, before))
    for s, c in zip(sets, before):
        assert q.cost(s) == fresh.cost(s)
        assert p.cost(s) == c
        assert q.groups(s) == p.groups(s) == fresh.groups(s)


def test_cost_of_one_offloaded_dense_by_hand():
    b = GraphBuilder("one", 0)
    x = b.input("x", (32, 64))
    y = b.tanh(b.dense(x, 16, name="d", bias=False), name="t")
    g = b.finish([y])
    hw = _hw()
    p = Problem(g, hw, KernelCoster(hw, opts=OPTS), OPTS)
    (i,) = [u.index for u in p.units if u.offloadable]
    dense = g.node_by_name("d")
    rep = sim.simulate(sim.Workload.gemm(32, 16, 64), hw, sim.default_schedule(sim.Workload.gemm(32, 16, 64), hw))
    tanh_s = hw.host.op_overhead_s + max(32 * 16 * host_flops_per_elem_tanh() / hw.host.peak_flops,
                                         2 * 32 * 16 * 4 / hw.host.mem_bytes_per_s)
    # fp32 in the graph, int8 words on the link: the host quantizes x and dequantizes the result
    assert hw.array.word_bytes == 1
    link_bytes = 32 * 64 + 32 * 16
    h = hw.host
    convert_s = sum(h.op_overhead_s + max(n / h.peak_flops, n * 5 / h.mem_bytes_per_s) for n in (32 * 64, 32 * 16))
    want = (tanh_s + convert_s + hw.link.launch_latency_s + link_bytes / hw.link.bytes_per_s
            + rep.total_cycles / hw.clock_hz)
    c = p.cost({i})
    assert c.latency_s == pytest.approx(want, rel=1e-9)
    assert c.link_bytes == link_bytes
    assert c.host_s == pytest.approx(tanh_s + convert_s, rel=1e-9)
    host_dense = host_op_cost(dense, hw, OPTS).host_s
    assert p.cost(set()).latency_s == pytest.approx(tanh_s + host_dense, rel=1e-9)


def host_flops_per_elem_tanh():
    from partition.ops import op_cost
    b = GraphBuilder("t", 0)
    t = b.tanh(b.input("x", (1,)), name="t")
    return op_cost(t.producer).flops


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("link", LINKS)
@pytest.mark.parametrize("objective", ["latency", "energy", "edp"])
def test_search_finds_the_exhaustive_optimum(name, link, objective):
    p = _problem(GRAPHS[name](), link=link)
    got = search(p, objective)
    ex = exhaustive(p, objective)
    assert got.score == pytest.approx(ex.score, rel=1e-9)
    if objective != "edp":
        opt = optimum(p, objective)
        assert opt.certified
        assert opt.score == pytest.approx(ex.score, rel=1e-9)


@pytest.mark.parametrize("link", LINKS)
def test_search_never_worse_than_baselines(link):
    p = _problem(chain(n=6, host_every=3), link=link)
    got = search(p, "latency")
    assert got.cost.latency_s <= p.cost(p.greedy_set).latency_s * (1 + 1e-12)
    assert got.cost.latency_s <= p.cost(frozenset()).latency_s * (1 + 1e-12)


def test_baselines_at_the_extremes():
    """A hopeless link keeps everything on the host; a free link offloads what greedy BYOC does."""
    g = chain(n=4)
    slow = _problem(g, link=1e3, launch=1.0)
    assert search(slow, "latency").device == frozenset()
    fast = _problem(g, link=1e15, launch=0.0)
    assert search(fast, "latency").device == fast.greedy_set
    assert len(fast.greedy_set) == 4


def test_would_be_cycle_never_merged():
    p = _problem(would_be_cycle(), link=1e15, launch=1e-3)
    d0, d2 = p.unit_of("cyc", "d0"), p.unit_of("cyc", "d2")
    groups = p.groups({d0, d2})
    assert sorted(map(sorted, groups)) == [[d0], [d2]]
    part = p.materialize({d0, d2})
    part.lint()
    np.testing.assert_allclose(interpret(part, [np.ones((32, 64), np.float32)])[0],
                               interpret(would_be_cycle(), [np.ones((32, 64), np.float32)])[0], rtol=1e-5)


def test_random_dags_stay_acyclic_and_correct():
    rng = np.random.default_rng(0)
    for trial in range(6):
        b = GraphBuilder("rand", trial)
        vals = [b.input("x", (8, 16))]
        for j in range(9):
            a = vals[rng.integers(len(vals))]
            if rng.random() < 0.6:
                v = b.dense(a, 16, name=f"d{j}", bias=False)
            elif rng.random() < 0.5:
                v = b.tanh(a, name=f"t{j}")
            else:
                v = b.add(a, vals[rng.integers(len(vals))], name=f"a{j}")
            vals.append(v)
        g = b.finish([vals[-1], vals[-2]])
        p = _problem(g, link=1e9, launch=1e-6)
        x = rng.standard_normal((8, 16)).astype(np.float32)
        ref = interpret(g, [x])
        for s in itertools.islice(_all_subsets(p), 0, None, 7):
            part = p.materialize(s)
            part.lint()  # topological order: no cycle between functions
            for a, r in zip(interpret(part, [x]), ref):
                np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-5)


def test_same_problem_same_result():
    p = _problem(chain(n=6, host_every=3), link=2e9)
    assert search(p, "latency").device == search(p, "latency").device


def test_bad_objective_and_bad_sets():
    p = _problem(chain())
    with pytest.raises(ValueError, match="objective"):
        search(p, "speed")
    host_only = [u.index for u in p.units if not p.offloadable[u.index]]
    with pytest.raises(PartitionSearchError, match="cannot run on the device"):
        p.materialize({host_only[0]})
    with pytest.raises(PartitionSearchError, match="at most 2"):
        exhaustive(p, "latency", limit=2)


def test_resnet50_and_bert_base_never_worse_than_greedy():
    """Search speed lives in experiments/bench/partition_gain.py; here only its result."""
    from partition import models
    for name in ("resnet50", "bert_base"):
        hw = sim.load_hw("edge-npu")
        p = Problem(models.get(name), hw, KernelCoster(hw, opts=OPTS), OPTS)
        r = search(p, "latency")
        assert r.cost.latency_s <= p.cost(p.greedy_set, siblings=False).latency_s
        assert r.cost.latency_s <= p.cost(frozenset()).latency_s


def test_intermediate_kept_on_chip_by_hand():
    """Two denses in one function: the value between them stays in the output buffer, so the first
    kernel saves its DRAM write and the second its read (cycles never below compute)."""
    b = GraphBuilder("two", 0)
    x = b.input("x", (32, 64))
    y = b.tanh(b.dense(b.dense(x, 64, name="d0", bias=False), 16, name="d1", bias=False), name="t")
    hw = _hw(link__bytes_per_s=1e12, link__launch_latency_s=0.0)
    p = Problem(b.finish([y]), hw, KernelCoster(hw, opts=OPTS), OPTS)
    d0, d1 = p.unit_of("two", "d0"), p.unit_of("two", "d1")
    words = 32 * 64 * hw.array.word_bytes
    assert words <= hw.buffers.output_bytes
    want_s, want_j = 0.0, 0.0
    for wl in (sim.Workload.gemm(32, 64, 64), sim.Workload.gemm(32, 16, 64)):
        rep = sim.simulate(wl, hw, sim.default_schedule(wl, hw))
        cyc = max(rep.compute_cycles, int(rep.total_cycles - words / hw.dram.bytes_per_cycle))
        want_s += cyc / hw.clock_hz
        want_j += rep.energy_j - min(rep.energy_pj["dram"], words * hw.energy.dram_pj_per_byte) * 1e-12
    c = p.cost({d0, d1})
    assert c.calls == 1
    assert c.device_s == pytest.approx(want_s, rel=1e-12)
    assert c.device_j == pytest.approx(want_j, rel=1e-12)
    apart = p.cost({d0}).device_s + p.cost({d1}).device_s
    assert c.device_s < apart


def qkv(width=64, rows=32):
    """One activation read by three denses (attention's Q, K, V) whose results meet on the host."""
    b = GraphBuilder("qkv", 4)
    x = b.tanh(b.input("x", (rows, width)), name="t")
    q, k, v = (b.dense(x, width, name=n, bias=False) for n in ("q", "k", "v"))
    return b.finish([b.add(b.add(b.tanh(q, name="tq"), k, name="s1"), v, name="s2")])


def test_siblings_share_one_call_and_one_transfer():
    g = qkv()
    p = _problem(g, link=1e9, launch=1e-4)
    all3 = frozenset(p.unit_of("qkv", n) for n in ("q", "k", "v"))
    merged, plain = p.cost(all3), p.cost(all3, siblings=False)
    assert len(p.groups(all3)) == 1 and len(p.groups(all3, siblings=False)) == 3
    assert merged.calls == 1 and plain.calls == 3
    x_bytes = 32 * 64 * p.hw.array.word_bytes  # fp32 in the graph, device words on the link
    assert plain.link_bytes - merged.link_bytes == 2 * x_bytes
    assert plain.host_s > merged.host_s  # and the host quantizes x once per call
    part = p.materialize(all3)
    part.lint()
    x = np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32)
    np.testing.assert_allclose(interpret(part, [x])[0], interpret(g, [x])[0], rtol=1e-5, atol=1e-6)
    assert search(p, "latency").score == pytest.approx(exhaustive(p, "latency").score, rel=1e-12)


@pytest.mark.parametrize("model", ["resnet18", "bert_tiny"])
def test_plain_greedy_equals_the_simulator_on_byoc_partition(model):
    """Greedy BYOC as the search's baseline costs exactly what sim.cost_graph says of the graph
    partition_for makes (an independent implementation of the same performance model)."""
    from partition import models
    from partition.byoc import partition_for
    hw = sim.load_hw("edge-npu")
    g = models.get(model)
    p = Problem(g, hw, KernelCoster(hw, opts=OPTS), OPTS)
    ref = sim.cost_graph(partition_for(g, hw.partition_target()), hw, fidelity="analytical")
    got = p.cost(p.greedy_set, siblings=False)
    assert got.latency_s == pytest.approx(ref.latency_s, rel=1e-12)
    assert got.calls == len(ref.calls)


def test_control_flow_bodies_partition_and_run():
    """byoc_demo offloads inside a Loop body and If branches: every offload set of its units
    materialises to a graph that lints, runs like the original, and costs what the evaluator says
    (a loop body's units count once per trip)."""
    from partition import models
    g = models.get("byoc_demo")
    hw = sim.HardwareConfig.from_dict({"base": "cloud-npu", "link": {"bytes_per_s": 1e12}})
    p = Problem(g, hw, KernelCoster(hw, opts=OPTS), OPTS)
    assert len({u.graph for u in p.units if p.offloadable[u.index]}) > 1  # units in bodies
    assert any(u.weight > 1 for u in p.units)
    x = np.random.default_rng(2).standard_normal((1, 512)).astype(np.float32)
    ref = interpret(g, [x])
    off = sorted(i for i in range(len(p.units)) if p.offloadable[i])
    for s in (frozenset(off), frozenset(off[::2]), frozenset(off[1::3]), search(p, "latency").device):
        part = p.materialize(s)
        part.lint()
        for a, r in zip(interpret(part, [x]), ref):
            np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-6)
        assert p.cost(s).latency_s == pytest.approx(graph_cost(part, p.coster, OPTS).total.latency_s, rel=1e-12)


def _random_dag(seed, n=14):
    """Mostly denses, some tanhs and adds, wired at random: chains, diamonds, shared inputs and
    host islands in clusters of up to ~12 units."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("rand", seed)
    vals = [b.input("x", (8, 16))]
    for j in range(n):
        a = vals[-1 - rng.integers(min(3, len(vals)))]
        r = rng.random()
        if r < 0.7:
            v = b.dense(a, 16, name=f"d{j}", bias=False)
        elif r < 0.85:
            v = b.tanh(a, name=f"t{j}")
        else:
            v = b.add(a, vals[rng.integers(len(vals))], name=f"a{j}")
        vals.append(v)
    return b.finish([vals[-1], vals[-3]])


@pytest.mark.parametrize("objective", ["latency", "energy"])
def test_branch_and_bound_equals_enumeration_on_random_dags(objective):
    """The branch and bound prunes with a lower bound; enumerating every subset of every cluster
    (the reference) must find nothing better, at links near break-even where the optimum is a
    mixed plan that none of the branch and bound's starting plans (all host, all device, greedy
    BYOC) is, so only a sound bound gets it right."""
    # Break-even is set by the link's speed for latency and by its energy per byte for energy.
    knobs = ([{"link__bytes_per_s": s} for s in (1e8, 2e8, 4e8)] if objective == "latency" else
             [{"energy__link_pj_per_byte": pj} for pj in (200.0, 300.0, 500.0)])
    mixed = 0
    for seed in range(8):
        g = _random_dag(seed)
        for knob in knobs:
            hw = _hw(link__launch_latency_s=3e-6, **knob)
            p = Problem(g, hw, KernelCoster(hw, opts=OPTS), OPTS)
            ref = cluster_enumeration(p, objective)
            got = optimum(p, objective)
            assert got.score == pytest.approx(ref.score, rel=1e-12), (seed, knob)
            assert got.certified == ref.certified
            starts = (frozenset(), frozenset(i for c in p.clusters for i in c), p.greedy_set)
            mixed += ref.score < min(p.score(s, objective) for s in starts) * (1 - 1e-9)
    assert mixed >= 5


def _apart_pair():
    """d0 feeds the matmul directly and also through tanh -> dense -> transpose on the host side:
    d0 and the matmul form one cluster, yet can never share a function (it would not be convex)."""
    b = GraphBuilder("apart", 0)
    x = b.input("x", (32, 64))
    d0 = b.dense(x, 64, name="d0", bias=False)
    d1 = b.dense(b.tanh(d0, name="t"), 64, name="d1", bias=False)
    return b.finish([b.matmul(d0, b.transpose(d1, perm=(1, 0), name="tr"), name="mm")])


def test_bound_is_tight_for_units_that_cannot_share_a_function():
    """Both on the device, d0 and the matmul are two calls and d0's output crosses the link twice
    (out to tanh, back into the matmul's function). The bound knows it, so at this leaf it equals
    the cost, where a bound merging them into one call with one crossing would fall short."""
    from tuner.exact import _Bound
    hw = _hw(link__launch_latency_s=3e-6, link__bytes_per_s=1e8)
    p = Problem(_apart_pair(), hw, KernelCoster(hw, opts=OPTS), OPTS)
    k = next(k for k, c in enumerate(p.clusters) if len(c) == 2)
    b = _Bound(p, k, "latency")
    cost = p.cluster_cost(k, frozenset(b.members))
    assert cost.calls == 2
    assert b([1, 1]) == pytest.approx(cost.latency_s, rel=1e-6)


@pytest.mark.parametrize("objective", ["latency", "energy"])
def test_bound_never_exceeds_the_best_completion(objective):
    """Soundness of the branch and bound's lower bound itself, separation terms included: for
    random partial assignments of small clusters, the bound is at most the cheapest completion
    (found by enumerating every completion), and at full assignments it is at most the cost."""
    from tuner.exact import _Bound
    rng = np.random.default_rng(3)
    checked = 0
    for seed in range(11):
        for knob in ({"link__bytes_per_s": 1e8}, {"link__bytes_per_s": 4e8}):
            hw = _hw(link__launch_latency_s=3e-6, **knob)
            p = Problem(_random_dag(seed) if seed < 10 else _apart_pair(), hw, KernelCoster(hw, opts=OPTS), OPTS)
            for k, members in enumerate(p.clusters):
                if not 2 <= len(members) <= 10:
                    continue
                b = _Bound(p, k, objective)
                for _ in range(6):
                    st = [int(rng.integers(-1, 2)) for _ in range(b.n)]
                    free = [j for j in range(b.n) if st[j] == -1]
                    best = float("inf")
                    for bits in itertools.product((0, 1), repeat=len(free)):
                        full = list(st)
                        for j, v in zip(free, bits):
                            full[j] = v
                        c = p.cluster_cost(k, frozenset(b.members[j] for j in range(b.n) if full[j] == 1))
                        best = min(best, c.latency_s if objective == "latency" else c.energy_j)
                    assert b(st) <= best * (1 + 1e-9), (seed, k, st)
                    checked += 1
    assert checked >= 50


def test_a_hint_changes_the_work_not_the_answer():
    """A seeded incumbent (the search's answer) can only prune sooner: the same optimum, never
    more nodes (the depth-first order is fixed, the incumbent only better); an empty hint
    changes nothing."""
    hw = _hw(link__launch_latency_s=3e-6, link__bytes_per_s=2e8)
    for seed in range(6):
        p = Problem(_random_dag(seed), hw, KernelCoster(hw, opts=OPTS), OPTS)
        plain = optimum(p, "latency")
        hinted = optimum(p, "latency", hint=search(p, "latency").device)
        empty = optimum(p, "latency", hint=frozenset())
        assert hinted.score == pytest.approx(plain.score, rel=1e-12) == empty.score
        assert hinted.evaluations <= plain.evaluations == empty.evaluations


def test_branch_and_bound_prunes_and_covers_a_large_cluster():
    """resnet50 on cloud-npu: one cluster of 89 units (2^89 subsets, beyond enumeration). The
    branch and bound proves the optimum in a few nodes per unit, and the search reaches it."""
    from partition import models
    hw = sim.load_hw("cloud-npu")
    p = Problem(models.get("resnet50"), hw, KernelCoster(hw, opts=OPTS), OPTS)
    assert max(len(c) for c in p.clusters) > 64
    ex = optimum(p, "latency")
    assert ex.certified
    assert ex.evaluations < 20 * len(p.units)
    assert search(p, "latency").score == pytest.approx(ex.score, rel=1e-9)
    with pytest.raises(PartitionSearchError, match="branch-and-bound nodes"):
        cluster_optimum(p, 0, "latency", max_nodes=3)
    with pytest.raises(PartitionSearchError, match="separable"):
        cluster_optimum(p, 0, "edp")
