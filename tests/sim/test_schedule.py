import pytest

from sim import Schedule, ScheduleError, Workload, load_hw
from sim import default_schedule, scalesim_schedule


def test_json_round_trip_and_hashable():
    s = Schedule("os", ("n", "m"), 64, 32, 128, "kmn", False, ("relu",))
    back = Schedule.from_json(s.to_json())
    assert back == s and hash(back) == hash(s)
    assert len({s, back, s.replace(tile_m=32)}) == 2
    assert s.transposed


@pytest.mark.parametrize("kwargs,msg", [
    (dict(dataflow="rs"), "dataflow must be one of ws, os, is"),
    (dict(dataflow="os", spatial=("k", "n")), "spatial ('k', 'n') does not fit dataflow os"),
    (dict(tile_m=0), "tile_m must be an integer >= 1, got 0"),
    (dict(loop_order="mkk"), "loop_order must be a permutation of 'mnk'"),
])
def test_bad_schedules(kwargs, msg):
    with pytest.raises(ScheduleError) as e:
        Schedule(**kwargs)
    assert msg in str(e.value)


def test_from_json_errors():
    with pytest.raises(ScheduleError, match="does not parse"):
        Schedule.from_json("{")
    with pytest.raises(ScheduleError, match="unknown schedule field"):
        Schedule.from_dict({"tile_q": 3})


def test_check_names_the_overflowing_buffer():
    hw = load_hw("scalesim-32x32-os")  # 64 KiB per operand
    wl = Workload.gemm(1024, 1024, 1024)
    s = Schedule("os", ("m", "n"), 256, 128, 1024, "mnk", True)
    # ifmap tile 256*1024 words x 2 halves = 512 KiB
    with pytest.raises(ScheduleError, match=r"tile needs 512 KiB of ifmap buffer \(double-buffered\), hardware has 64 KiB"):
        s.check(wl, hw)
    with pytest.raises(ScheduleError, match="tile_m=2048 exceeds the workload's M=1024"):
        s.replace(tile_m=2048).check(wl, hw)
    with pytest.raises(ScheduleError, match="dataflow is is not supported by tpu-v1-like"):
        Schedule("is", ("k", "m"), 1, 1, 1).check(wl, load_hw("tpu-v1-like"))


def test_unified_buffer_counts_all_operands():
    hw = load_hw("eyeriss-like")  # 108 KiB unified, 2-byte words
    wl = Workload.gemm(256, 256, 256)
    s = Schedule("ws", ("k", "n"), 64, 64, 64, "mnk", True)
    # (64*64 * 3 operands) words * 2 B * 2 halves = 48 KiB
    assert s.buffer_needs(wl, hw) == {"ifmap": 16384, "weight": 16384, "output": 16384}
    s.check(wl, hw)
    with pytest.raises(ScheduleError, match="of unified buffer"):
        s.replace(tile_m=256, tile_k=256).check(wl, hw)


def test_conv_ifmap_tile_is_the_input_patch_not_im2col():
    hw = load_hw("cloud-npu")
    wl = Workload.conv2d(1, 64, 56, 56, 64, 3, 3, pad=1)
    # 56 output pixels = one output row; K tile of 9*8 = 8 channels: patch 3 rows x 56 cols x 8 ch
    s = Schedule("ws", ("k", "n"), 56, 64, 72, "mnk", False)
    assert s.buffer_needs(wl, hw)["ifmap"] == 3 * 56 * 8 * 2


@pytest.mark.parametrize("preset", ["scalesim-32x32-os", "edge-npu", "tpu-v1-like", "eyeriss-like", "cloud-npu"])
def test_default_schedule_is_legal(preset):
    hw = load_hw(preset)
    for wl in (Workload.conv2d(1, 64, 56, 56, 256, 1, 1), Workload.conv2d(1, 32, 112, 112, 32, 3, 3, pad=1, groups=32),
               Workload.gemm(128, 3072, 768, epilogue=("bias_add", "gelu"))):
        s = default_schedule(wl, hw)
        s.check(wl, hw)
        assert set(s.epilogue) <= set(hw.vector.ops)


def test_scalesim_schedule_is_whole_layer_when_it_fits():
    hw = load_hw("scalesim-32x32-os").with_overrides({"buffers.ifmap_bytes": 2**22, "buffers.weight_bytes": 2**22,
                                                      "buffers.output_bytes": 2**22})
    wl = Workload.conv2d(1, 64, 56, 56, 64, 3, 3, pad=1)
    s = scalesim_schedule(wl, hw, "ws")
    assert (s.dataflow, s.spatial, s.tiles) == ("ws", ("k", "n"), (56 * 56, 64, 576))
    small = scalesim_schedule(wl, load_hw("scalesim-32x32-os"), "os")
    small.check(wl, load_hw("scalesim-32x32-os"))
    assert small.tile_m % 32 == 0 and small.tile_n % 32 == 0
