"""The one bytes-per-element rule (sim/graph/transfer.py), by hand."""
import numpy as np
import pytest

from partition.ir import TensorType
from sim import load_hw
from sim.graph.transfer import (array_device_bytes, conversion_joules, conversion_seconds, conversion_work,
                          device_bytes)


def test_float_tensors_take_device_words_integers_their_own_size():
    edge, cloud = load_hw("edge-npu"), load_hw("cloud-npu")   # int8 (1 B) and bf16 (2 B) words
    t = TensorType((2, 3, 4), "float32")
    assert device_bytes(t, edge) == 24 and device_bytes(t, cloud) == 48
    assert device_bytes(TensorType((24,), "float16"), edge) == 24
    assert device_bytes(TensorType((24,), "int64"), edge) == 24 * 8
    assert device_bytes(TensorType((24,), "bool"), cloud) == 24
    assert array_device_bytes(np.zeros((5, 5), np.float32), cloud) == 50


def test_conversion_is_one_host_pass_and_free_when_sizes_match():
    hw = load_hw("edge-npu")
    t = TensorType((1, 64, 56, 56), "float32")
    n, h, e = t.size, hw.host, hw.energy
    assert conversion_work(t, hw) == (n, n * 4 + n * 1)
    want_s = h.op_overhead_s + max(n / h.peak_flops, 5 * n / h.mem_bytes_per_s)
    assert conversion_seconds(t, hw) == pytest.approx(want_s, rel=1e-12)
    assert conversion_joules(t, hw) == pytest.approx((n * e.host_pj_per_flop + 5 * n * e.dram_pj_per_byte) * 1e-12)
    fp32_device = hw.with_overrides({"array.word_bytes": 4})
    assert conversion_work(t, fp32_device) == (0, 0)
    assert conversion_seconds(t, fp32_device) == 0.0 == conversion_joules(t, fp32_device)
    assert conversion_seconds(TensorType((8,), "int64"), hw) == 0.0
