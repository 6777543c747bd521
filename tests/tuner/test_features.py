"""Features: fixed length, finite, the prior equals the analytical simulator run schedule by schedule,
and hand-computed values for the geometric ones."""
import math

import numpy as np
import pytest

import sim
from tuner.search.features import FEATURE_NAMES, N_FEATURES, featurize
from tuner.search.space import ScheduleSpace

COL = {n: i for i, n in enumerate(FEATURE_NAMES)}


@pytest.mark.parametrize("hw_name,wl", [
    ("edge-npu", sim.Workload.conv2d(1, 16, 14, 14, 32, 3, 3, pad=1, epilogue=("batch_norm", "relu"))),
    ("cloud-npu", sim.Workload.gemm(100, 64, 48, batch=2)),
    ("tpu-v1-like", sim.Workload.conv2d(1, 32, 28, 28, 32, 3, 3, pad=1, groups=32)),
    ("cloud-npu", sim.Workload.vector("softmax", 4096, 4096, 16384, 4096)),
])
def test_fixed_length_finite_and_prior_is_the_analytical_simulator(hw_name, wl):
    hw = sim.load_hw(hw_name)
    sp = ScheduleSpace.build(wl, hw)
    g = sp.sample(64, np.random.default_rng(0))
    X, prior = featurize(sp, g)
    assert X.shape == (64, N_FEATURES) == (64, len(FEATURE_NAMES)) and X.dtype == np.float32
    assert np.isfinite(X).all()
    for row, p in zip(g[:10], prior[:10]):
        rep = sim.simulate(wl, hw, sp.schedule(row), fidelity="analytical")
        assert p == pytest.approx(math.log(rep.total_cycles), abs=1e-6)
    # log2(total / roofline) is KernelReport.roofline_fraction, inverted
    i = 0
    rep = sim.simulate(wl, hw, sp.schedule(g[i]))
    assert X[i, COL["log_total_over_roofline"]] == pytest.approx(-math.log2(rep.roofline_fraction), rel=1e-4, abs=1e-4)


def test_hand_computed_geometry():
    hw = sim.load_hw("edge-npu")             # 16x16 array
    wl = sim.Workload.gemm(100, 40, 48)
    sp = ScheduleSpace.build(wl, hw)
    s = sim.Schedule("os", ("m", "n"), 48, 40, 48, "mnk", False)
    X, _ = featurize(sp, sp.genes_of(s)[None, :])
    x = X[0]
    assert x[COL["tile_m_frac"]] == pytest.approx(0.48)
    assert x[COL["pad_waste_m"]] == pytest.approx(3 * 48 / 100 - 1)     # tiles of 48, 48, 4 (padded to 48)
    assert x[COL["pad_waste_n"]] == pytest.approx(0.0)
    assert x[COL["row_fill"]] == pytest.approx(48 / 48)                 # M on rows: 3 full folds of 16
    assert x[COL["col_fill"]] == pytest.approx(40 / 48)                 # N on cols: 40 of 3x16 columns
    assert x[COL["df_os"]] == 1 and x[COL["df_ws"]] == 0 and x[COL["double_buffer"]] == 0
    assert x[COL["order_mnk"]] == 1 and x[COL["order_kmn"]] == 0
    assert x[COL["k_innermost"]] == 1
    rep = sim.simulate(wl, hw, s)
    assert x[COL["pe_utilization"]] == pytest.approx(wl.macs / (256 * rep.total_cycles), rel=1e-5)
    assert x[COL["log_pes"]] == pytest.approx(8.0) and x[COL["log_aspect"]] == 0
    assert x[COL["output_buf_frac"]] == pytest.approx(48 * 40 / hw.buffers.output_bytes)


def test_one_hot_groups_and_hardware_features_differ_across_hardware():
    wl = sim.Workload.gemm(64, 64, 64)
    feats = {}
    for name in ("edge-npu", "cloud-npu"):
        sp = ScheduleSpace.build(wl, sim.load_hw(name))
        X, _ = featurize(sp, sp.sample(50, np.random.default_rng(1)))
        assert (X[:, [COL[f"df_{d}"] for d in ("ws", "os", "is")]].sum(axis=1) == 1).all()
        assert (X[:, [i for n, i in COL.items() if n.startswith("order_")]].sum(axis=1) == 1).all()
        feats[name] = X
    assert feats["edge-npu"][0, COL["log_pes"]] == 8 and feats["cloud-npu"][0, COL["log_pes"]] == 14
