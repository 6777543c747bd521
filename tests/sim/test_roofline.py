"""No kernel report is ever faster than its roofline: the bound is a lower bound on the cycles of
what is actually costed, alone and inside a function that keeps intermediates on chip."""
import math

import numpy as np
import pytest

import sim
from partition import Graph, partition_for
from partition.models import get, list_models
from sim import Schedule, Workload, cost_graph, load_hw, simulate, simulate_function
from sim import default_schedule

# eyeriss-chip is eyeriss with the chip's slow link: every kernel there is bound by the link, where
# the bound's input words and rounding matter, so it runs on the two ResNets (not every model: the
# suite's time)
RETIMED = ("eyeriss-chip",)
PRESETS = [p for p in sim.hw.presets.names() if p not in RETIMED]
MODELS = [m.name for m in list_models()]
# GPU and LLM presets (a kernels section; 100+ cores to map on) cost a mapping search of about a second
# a kernel: here they run the transformer models, their workload, so that the suite stays fast;
# their one-op costs are bounded against peak compute and bandwidth in tests/tuner/test_measured.py.
GPU_MODELS = ("byoc_demo", "bert_tiny")


def _models(preset: str) -> list[str]:
    return [m for m in MODELS if m in GPU_MODELS] if load_hw(preset).kernels.active else MODELS


MATRIX = [(m, p) for p in PRESETS for m in _models(p)] + [(m, p) for m in ("resnet18", "resnet50") for p in RETIMED]


def _check(rep, hw, where: str) -> None:
    assert rep.roofline_cycles <= rep.total_cycles, f"{where}: {rep.roofline_fraction:.3f} of its roofline"
    assert rep.roofline_fraction <= 1.0
    # The bound is not vacuous: never below the PE array's share of the MACs.
    assert rep.roofline_cycles >= math.ceil(rep.macs / hw.pes), where


@pytest.mark.parametrize("model, preset", MATRIX)
def test_simulate_never_beats_the_roofline(model, preset):
    hw = load_hw(preset)
    cost = cost_graph(partition_for(get(model), hw.partition_target()), hw)
    for call in cost.calls:
        for k in call.kernels:
            _check(k.report, hw, f"{model} on {preset}, {call.symbol}/{k.name}")


def _chain(c=16, hw_=56, stride=1):
    """Two 1x1 convolutions (the second maybe strided) whose intermediate stays on chip: the
    140 % case of issue 11 (a fused kernel reading its input from the buffer)."""
    g = Graph("chain")
    x = g.add_input("x", (1, c, hw_, hw_))
    w1 = g.add_const(np.ones((c, c, 1, 1), "float32"), "w1")
    w2 = g.add_const(np.ones((c, c, 1, 1), "float32"), "w2")
    a = g.add_node("conv2d", [x, w1], {}).output
    g.set_outputs([g.add_node("conv2d", [a, w2], {"strides": (stride, stride)}).output])
    return g


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("fidelity", ["analytical", "tile"])
def test_fused_chain_bound_knows_the_on_chip_operand(stride, fidelity):
    hw = load_hw("edge-npu")
    pg = partition_for(_chain(stride=stride), hw.partition_target())
    (fn,) = [f for f in pg.functions.values() if "Compiler" in f.attrs]
    rep = simulate_function(fn, hw, fidelity=fidelity)
    assert len(rep.kernels) == 2 and rep.spilled_bytes == 0
    first, second = (k.report for k in rep.kernels)
    wl1 = Workload.conv2d(1, 16, 56, 56, 16, 1, 1)
    wl2 = Workload.conv2d(1, 16, 56, 56, 16, 1, 1, stride=stride)
    alone1 = simulate(wl1, hw, default_schedule(wl1, hw), fidelity)
    alone2 = simulate(wl2, hw, default_schedule(wl2, hw), fidelity)
    # The intermediate (16x56x56 int8 words) never touches DRAM: the first kernel does not write
    # it, the second does not read it (at most what it read alone: a strided reader reads part).
    inter = 16 * 56 * 56 * hw.array.word_bytes
    assert alone1.dram_write_bytes - first.dram_write_bytes == min(inter, alone1.dram_write_bytes)
    assert alone2.dram_read_bytes - second.dram_read_bytes == min(inter, alone2.dram_read_bytes - 16 * 16)
    for r in (first, second):
        _check(r, hw, f"stride {stride} {fidelity}")
        parts = r.prologue_cycles + r.compute_cycles + r.stall_cycles + r.epilogue_cycles
        assert abs(r.total_cycles - parts) <= 1  # each rounded on its own
    # The bound of the fused kernel is below the kernel's bound alone: its compulsory traffic shrank.
    assert second.roofline_cycles <= alone2.roofline_cycles


TUNED_ON_LEVELS = ("resnet18", "mobilenet_v3_small", "bert_tiny", "ssd_detector", "byoc_demo")


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_tuned_plans_never_beat_the_roofline(preset):
    """Every kernel of a short tune (tile-level measurements, tuned schedules, the partition the
    search picks) on every built-in model: the fraction a plan and a sweep row record is <= 1."""
    from tuner.sweep.evaluate import kernel_rows
    from tuner.tune import tune
    hw = load_hw(preset)
    # a tune on a storage hierarchy searches mappings (seconds a model): there one model of each
    # kind of kernel (conv stages, depthwise, attention, detection head, a toy graph), so the suite stays short
    models = [m for m in _models(preset) if not hw.levels or m in TUNED_ON_LEVELS]
    for model in models:
        try:
            plan = tune(get(model), hw, trials=4, progress=False, map_budget=300)  # any budget: a bound
        except ValueError:
            continue  # the accelerator runs none of the model's ops
        for sym, fc in plan.functions.items():
            for k in fc.kernels:
                assert k.roofline_fraction <= 1.0, f"{model} on {preset}: {sym}/{k.name} {k.roofline_fraction:.3f}"
        for t in plan.tasks:
            assert t.roofline_fraction <= 1.0, f"{model} on {preset}: task {t.workload}"
        for row in kernel_rows(plan, hw):
            assert row["roofline_fraction"] <= 1.0
