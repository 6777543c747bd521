import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import sim
from sim import Schedule, ScheduleArrays, Workload, load_hw, simulate, simulate_batch
from sim.cost import analytical as A
from sim.mapping.footprint import Geometry, folds, ifmap_tile_words, ifmap_words_all_tiles


def _hw(**over):
    base = {"array.fold_overlap": False, "dram.latency_cycles": 0}
    base.update(over)
    return load_hw("scalesim-32x32-os").with_overrides(base)


def _arr(s):
    return ScheduleArrays.of([s])


def test_folds_sum_over_tiles():
    assert folds(100, 100, 32) == 4
    assert folds(100, 40, 32) == 2 * 2 + 1  # tiles 40, 40, 20
    assert folds(64, 64, 32) == 2


@pytest.mark.parametrize("order,tk,expect", [
    ("mnk", 64, 4 * 64 + 4 * 62),    # one fold per tile; SCALE-Sim: folds * (K + R + C - 2)
    ("mnk", 16, 4 * 64 + 4 * 62),    # K split, but innermost: the outputs stay in the PEs
    ("kmn", 16, 4 * 64 + 16 * 62),   # K outermost: every K tile refills the array
])
def test_compute_cycles_os_by_hand(order, tk, expect):
    geo = Geometry.of(Workload.gemm(64, 64, 64))
    s = _arr(Schedule("os", ("m", "n"), 32, 32, tk, order))
    got = A.compute_cycles(geo, _hw(), s.dataflow, s.transposed, s.tile_m, s.tile_n, s.tile_k, s.order)
    assert int(got[0]) == expect


def test_compute_cycles_ws_is_and_overlap():
    geo = Geometry.of(Workload.gemm(100, 64, 64))
    s = _arr(Schedule("ws", ("k", "n"), 100, 64, 64))
    # ws: ceil(K/32)*ceil(N/32) folds of M + 2R + C - 2
    assert int(A.compute_cycles(geo, _hw(), s.dataflow, s.transposed, s.tile_m, s.tile_n, s.tile_k)[0]) == 4 * (100 + 94)
    # with fold overlap: one fill/drain per tile
    hw = _hw(**{"array.fold_overlap": True})
    assert int(A.compute_cycles(geo, hw, s.dataflow, s.transposed, s.tile_m, s.tile_n, s.tile_k)[0]) == 4 * 100 + 94
    s = _arr(Schedule("is", ("k", "m"), 100, 64, 64))
    # is: ceil(K/32)*ceil(M/32) folds of N + 2R + C - 2
    assert int(A.compute_cycles(geo, _hw(), s.dataflow, s.transposed, s.tile_m, s.tile_n, s.tile_k)[0]) == 2 * 4 * (64 + 94)


def test_group_packing_depthwise():
    geo = Geometry.of(Workload.conv2d(1, 64, 8, 8, 64, 3, 3, pad=1, groups=64))
    s = _arr(Schedule("ws", ("k", "n"), 64, 1, 9))
    # each group needs 9 rows x 1 col: 32 // 9 = 3 groups side by side -> ceil(64/3) = 22 passes
    assert int(A.group_repeats(geo, _hw(), s.dataflow, s.transposed, s.tile_m, s.tile_n, s.tile_k)[0]) == 22


@pytest.mark.parametrize("order,fa,fb,fc", [("mnk", 2, 2, 1), ("kmn", 1, 2, 4), ("nkm", 2, 1, 4), ("nmk", 2, 2, 1), ("knm", 2, 1, 4)])
def test_dram_words_reload_by_loop_order(order, fa, fb, fc):
    geo = Geometry.of(Workload.gemm(64, 64, 64))
    s = _arr(Schedule("os", ("m", "n"), 32, 32, 16, order))
    d = A.dram_words(geo, s.order, s.tile_m, s.tile_n, s.tile_k)
    assert int(d["ifmap"][0]) == 4096 * fa
    assert int(d["weight"][0]) == 4096 * fb
    assert int(d["output"][0]) == 4096 * fc
    assert int(d["psum_read"][0]) == 4096 * (fc - 1)


def test_conv_ifmap_traffic_is_real_input_not_im2col():
    geo = Geometry.of(Workload.conv2d(1, 64, 56, 56, 64, 3, 3, pad=1))
    # whole layer: every input pixel of every channel, once
    assert int(ifmap_tile_words(geo, geo.m, geo.k)) == 64 * 56 * 56
    # one output row per tile: 3 input rows each (halo re-read): 56 tiles * 3 rows * 56 cols * 64 ch
    assert int(ifmap_words_all_tiles(geo, 56, geo.k)) == 56 * 3 * 56 * 64


def test_sram_counts_match_scalesim_formulas():
    geo = Geometry.of(Workload.gemm(100, 70, 50))
    hw = _hw()
    s = _arr(Schedule("os", ("m", "n"), 100, 70, 50))
    w = A.sram_words(geo, hw, s.dataflow, s.transposed, s.tile_m, s.tile_n, s.tile_k)
    # os: ifmap ceil(N/C)*M*K, filter ceil(M/R)*K*N
    assert int(w["ifmap"][0]) == 3 * 100 * 50 and int(w["weight"][0]) == 4 * 50 * 70
    s = _arr(Schedule("ws", ("k", "n"), 100, 70, 50))
    w = A.sram_words(geo, hw, s.dataflow, s.transposed, s.tile_m, s.tile_n, s.tile_k)
    # ws: ifmap ceil(N/C)*M*K, filter K*N, psum writes ceil(K/R)*M*N
    assert (int(w["ifmap"][0]), int(w["weight"][0]), int(w["output"][0])) == (3 * 5000, 3500, 2 * 7000)


def test_timing_single_tile_by_hand():
    hw = _hw(**{"dram.bytes_per_cycle": 10.0, "dram.latency_cycles": 5})
    wl = Workload.gemm(32, 32, 32)
    r = simulate(wl, hw, Schedule("os", ("m", "n"), 32, 32, 32))
    assert r.compute_cycles == 32 + 62
    assert r.prologue_cycles == 2048 / 10 + 5 + 0.2  # ceil(204.8) + 5
    assert r.epilogue_cycles == 1024 // 10 + 1 + 5
    assert r.stall_cycles == 0
    assert r.total_cycles == 210 + 94 + 108
    assert r.dram_read_bytes == 2048 and r.dram_write_bytes == 1024


def test_vector_cycles_and_roofline():
    hw = _hw(**{"vector.lanes": 16, "vector.special_op_cycles": 4.0})
    assert A.vector_cycles(hw, 160, ("relu",)) == 10
    assert A.vector_cycles(hw, 160, ("relu", "gelu")) == 50
    wl = Workload.gemm(64, 64, 64)
    # 64^3 MACs on 1024 PEs = 256 cycles; compulsory 3 * 4096 B at 30 B/cycle = 410
    assert A.roofline_cycles(wl, hw) == 410


def test_energy_components_by_hand():
    hw = _hw()
    wl = Workload.gemm(32, 32, 32)
    r = simulate(wl, hw, Schedule("os", ("m", "n"), 32, 32, 32))
    e = hw.energy
    assert r.energy_pj["mac"] == pytest.approx(32**3 * e.mac_pj)
    assert r.energy_pj["dram"] == pytest.approx(3 * 1024 * e.dram_pj_per_byte)
    assert r.energy_pj["leakage"] == pytest.approx(e.leakage_mw_per_mm2 * hw.area_mm2() * 1e-3 * r.total_cycles / hw.clock_hz * 1e12)
    assert r.energy_j == pytest.approx(sum(r.energy_pj.values()) * 1e-12)


def test_batch_equals_single_and_marks_invalid():
    hw = load_hw("edge-npu")
    wl = Workload.conv2d(1, 64, 56, 56, 64, 3, 3, pad=1)
    ss = [Schedule("ws", ("k", "n"), tm, tn, tk, order)
          for tm in (56, 112, 3136) for tn in (16, 64) for tk in (64, 576) for order in ("mnk", "kmn")]
    res = simulate_batch(wl, hw, ss)
    for i, s in enumerate(ss):
        if s.fits(wl, hw):
            assert res["valid"][i]
            assert res["total_cycles"][i] == simulate(wl, hw, s).total_cycles
        else:
            assert not res["valid"][i] and res["total_cycles"][i] == np.inf
    assert res["valid"].any() and not res["valid"].all()
    cols = ScheduleArrays.of(ss)
    res2 = simulate_batch(wl, hw, {f: getattr(cols, f) for f in cols.__dataclass_fields__})
    assert np.array_equal(res2["total_cycles"], res["total_cycles"])


@pytest.mark.parametrize("hw_name", ["edge-npu", "cloud-npu", "scalesim-32x32-os"])
def test_mixed_batch_equals_each_schedule_alone(hw_name):
    """A batch mixing every dataflow, orientation and loop order (per-element selection) gives
    bit for bit what each schedule gives alone (dataflow, orientation and order as ints)."""
    hw = load_hw(hw_name)
    rng = np.random.default_rng(7)
    for wl in (Workload.conv2d(1, 32, 28, 28, 48, 3, 3, pad=1, epilogue=("bias_add", "relu")),
               Workload.conv2d(1, 32, 14, 14, 32, 3, 3, pad=1, groups=32), Workload.gemm(128, 768, 3072, batch=2)):
        g, m, n, k = wl.gemm_view()
        cols = {"dataflow": rng.integers(0, 3, 40), "transposed": rng.random(40) < 0.5,
                "tile_m": rng.integers(1, m + 1, 40), "tile_n": rng.integers(1, n + 1, 40),
                "tile_k": rng.integers(1, k + 1, 40), "order": rng.integers(0, 6, 40),
                "double_buffer": rng.random(40) < 0.5, "unfused": rng.integers(0, len(wl.epilogue) + 1, 40)}
        batch = A.evaluate(wl, hw, ScheduleArrays.from_mapping(cols))
        for i in range(40):
            one = A.evaluate(wl, hw, ScheduleArrays.from_mapping({c: v[i:i + 1] for c, v in cols.items()}))
            for key, v in one.items():
                if key == "energy":
                    for part, e in v.items():
                        assert batch["energy"][part][i] == e[0], (key, part, i)
                else:
                    assert batch[key].dtype == np.float64
                    assert batch[key][i] == np.asarray(v).ravel()[0], (key, i)
        single = A.evaluate(wl, hw, ScheduleArrays.from_mapping({**cols, "dataflow": 1, "transposed": True,
                                                                  "order": 4}))
        assert single["total_cycles"].shape == (40,)


# ---------------------------------------------------------------------------- properties
@st.composite
def cases(draw):
    if draw(st.booleans()):
        c = draw(st.sampled_from([1, 3, 8, 16, 32]))
        groups = draw(st.sampled_from([1, c])) if c > 1 else 1
        k = c if groups == c else draw(st.sampled_from([4, 16, 64]))
        r = draw(st.sampled_from([1, 3, 5]))
        h = draw(st.integers(r, 24))
        wl = Workload.conv2d(draw(st.integers(1, 2)), c, h, draw(st.integers(r, 24)), k, r, r,
                             stride=draw(st.sampled_from([1, 2, 3])), pad=draw(st.integers(0, r // 2)),
                             groups=groups)
    else:
        wl = Workload.gemm(draw(st.integers(1, 300)), draw(st.integers(1, 300)), draw(st.integers(1, 300)),
                           batch=draw(st.sampled_from([1, 1, 4])))
    hw = load_hw(draw(st.sampled_from(["scalesim-32x32-os", "edge-npu", "eyeriss-like", "cloud-npu"])))
    g, m, n, k = wl.gemm_view()
    df = draw(st.sampled_from(hw.array.dataflows))
    s = Schedule(df, sim.STANDARD_SPATIAL[df][:: (-1 if draw(st.booleans()) else 1)],
                 # at least 1/12 of each dim per tile keeps the tile walk short (fast test)
                 draw(st.integers(-(-m // 12), m)), draw(st.integers(-(-n // 12), n)), draw(st.integers(-(-k // 12), k)),
                 draw(st.sampled_from(sim.LOOP_ORDERS)), draw(st.booleans()))
    return wl, hw, s


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_never_faster_than_roofline_and_fidelities_agree_on_traffic(case):
    wl, hw, s = case
    if not s.fits(wl, hw):
        return
    a = simulate(wl, hw, s)
    t = simulate(wl, hw, s, fidelity="tile")
    assert a.total_cycles >= np.floor(a.roofline_cycles)
    assert t.total_cycles >= np.floor(t.roofline_cycles)
    assert t.total_cycles >= t.compute_cycles and a.total_cycles >= a.compute_cycles
    # the tile walk loads exactly what the closed-form reload factors say
    assert t.dram_read_bytes == pytest.approx(a.dram_read_bytes, rel=1e-9)
    assert t.dram_write_bytes == pytest.approx(a.dram_write_bytes, rel=1e-9)
    assert t.compute_cycles == a.compute_cycles
