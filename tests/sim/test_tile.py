"""The tile-level pipeline solver: hand-computed pipelines, an exact event recurrence, the former
iterative solver (bit for bit), and a long tile walk."""
import dataclasses
from fractions import Fraction

import numpy as np
import pytest

import sim
from sim import Schedule, Workload
from sim.cost.tile import solve_pipeline
from sim import default_schedule, scalesim_schedule


def _event_recurrence(dma, comp, latency, slots):
    """D[i] = max(D[i-1], C[i-S]) + dma[i]; C[i] = max(C[i-1], D[i] + latency) + comp[i], in exact
    rational arithmetic, one tile at a time (the definition, not the prefix-sum form)."""
    D, C = [], []
    for i, (a, b) in enumerate(zip(dma, comp)):
        free = C[i - slots] if i >= slots else Fraction(0)
        D.append(max(D[-1] if D else Fraction(0), free) + a)
        C.append(max(C[-1] if C else Fraction(0), D[-1] + latency) + b)
    return D, C


def _iterated_running_maxima(dma, comp, latency, slots):
    """The solver this module had before: alternate whole-array running maxima to a fixed point."""
    n = len(comp)
    P = np.cumsum(dma)
    Pprev = P - dma
    Q = np.cumsum(comp)
    Qprev = Q - comp
    D = P
    C = Q + np.maximum.accumulate(D + latency - Qprev)
    for _ in range(n + 1):
        Cs = np.zeros(n)
        if n > slots:
            Cs[slots:] = C[:-slots]
        D = P + np.maximum(0.0, np.maximum.accumulate(Cs - Pprev))
        Cn = Q + np.maximum.accumulate(D + latency - Qprev)
        if np.array_equal(Cn, C):
            break
        C = Cn
    return D, C


@pytest.mark.parametrize("slots, d_expect, c_expect", [
    # double-buffered: tile 2's load waits for tile 0's compute (ends at 8)
    (2, [2, 4, 10], [8, 13, 18]),
    # one buffer: every load waits for the previous compute, every compute for its load + latency
    (1, [2, 10, 18], [8, 16, 24]),
])
def test_three_tiles_by_hand(slots, d_expect, c_expect):
    D, C = solve_pipeline(np.array([2.0, 2.0, 2.0]), np.array([5.0, 5.0, 5.0]), 1.0, slots)
    assert D.tolist() == d_expect
    assert C.tolist() == c_expect


def test_dma_bound_pipeline_by_hand():
    # loads of 10 cycles, compute of 1: compute trails each load by latency + 1
    D, C = solve_pipeline(np.full(4, 10.0), np.ones(4), 3.0, 2)
    assert D.tolist() == [10, 20, 30, 40]
    assert C.tolist() == [14, 24, 34, 44]


@pytest.mark.parametrize("seed", range(6))
def test_matches_exact_event_recurrence(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    bw = float(rng.choice([1.0, 3.0, 7.5, 16.0]))
    dma = rng.integers(0, 4000, n) / bw  # bytes / bytes-per-cycle, as the tile walk builds it
    comp = rng.integers(0, 300, n).astype(float)
    lat = float(rng.integers(0, 200))
    for slots in (1, 2):
        D, C = solve_pipeline(dma, comp, lat, slots)
        Dx, Cx = _event_recurrence([Fraction(x) for x in dma], [Fraction(x) for x in comp], Fraction(lat), slots)
        np.testing.assert_allclose(D, [float(x) for x in Dx], rtol=1e-12)
        np.testing.assert_allclose(C, [float(x) for x in Cx], rtol=1e-12)


@pytest.mark.parametrize("seed", range(12))
def test_bit_identical_to_former_iterative_solver(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 1500)) if seed % 3 else int(rng.integers(1, 30))
    if seed % 2:
        # alternating DMA- and compute-bound stretches: the case that needed ~n/S rounds before
        dma = np.where(rng.random(n) < 0.5, rng.random(n) * 50, rng.random(n) * 3) / 1.7
        comp = np.ceil(rng.random(n) * 40)
    else:
        # DMA-bound throughout: no load ever waits for a buffer, the rounds converge at once
        dma = 150 + rng.random(n) * 30
        comp = np.ceil(rng.random(n) * 5)
    lat = float(rng.integers(0, 100))
    for slots in (1, 2):
        D, C = solve_pipeline(dma, comp, lat, slots)
        Dr, Cr = _iterated_running_maxima(dma, comp, lat, slots)
        assert np.array_equal(D, Dr) and np.array_equal(C, Cr)


def test_long_tile_walk_counts_every_tile():
    # Speed of this walk (quadratic before, linear now) is tracked by experiments/bench/sim_speed.py.
    hw = sim.load_hw("edge-npu")
    wl = Workload.conv2d(1, 3, 224, 224, 64, 7, 7, stride=2, pad=3)
    s = dataclasses.replace(default_schedule(wl, hw), tile_m=16, tile_n=16, tile_k=16, loop_order="nkm")
    r = sim.simulate(wl, hw, s, fidelity="tile")
    assert r.n_tiles == 784 * 4 * 10
    assert r.total_cycles >= r.compute_cycles >= wl.macs / hw.pes


@pytest.mark.parametrize("preset", ["edge-npu", "cloud-npu"])
def test_tile_cycles_is_the_reports_total_without_the_report(preset):
    """The measurer's shortcut (no energy, no report) gives the report's total, on the default and
    every SCALE-Sim mapping of a conv, a depthwise conv, a GEMM, and on a vector op; an illegal
    schedule is refused alike."""
    hw = sim.load_hw(preset)
    wls = [Workload.conv2d(1, 24, 20, 20, 40, 3, 3, pad=1, epilogue=("relu",)),
           Workload.conv2d(1, 32, 28, 28, 32, 3, 3, pad=1, groups=32), Workload.gemm(100, 70, 300)]
    for wl in wls:
        for s in [default_schedule(wl, hw)] + [scalesim_schedule(wl, hw, d) for d in hw.array.dataflows]:
            assert sim.tile_cycles(wl, hw, s) == sim.simulate(wl, hw, s, fidelity="tile").total_cycles
    vec = Workload.vector("elementwise", 200704, 200704, 200704)
    s = default_schedule(vec, hw)
    assert sim.tile_cycles(vec, hw, s) == sim.simulate(vec, hw, s, fidelity="tile").total_cycles
    too_big = Schedule("ws", ("k", "n"), 10**6, 10**6, 10**6, "mnk", True)
    with pytest.raises(sim.ScheduleError):
        sim.tile_cycles(wls[2], hw, too_big)
