"""The one rule for what a tensor weighs on the link and on the device, and who converts it.

- A float tensor crosses the host<->accelerator link and lives on the device in the device's word
  format: ``array.word_bytes`` per element (1 on an int8 NPU, 2 on a bf16 one), whatever the
  graph's float width.
- The host converts each crossing float tensor at the boundary: it quantizes an input of an
  external function before sending it (reads the graph dtype, writes device words) and
  dequantizes an output after receiving it (the reverse). That is one host element-wise pass per
  crossing, costed by the host model (``host_pass_seconds``: one FLOP per element, both formats
  read or written once, plus the per-op dispatch cost); it is free when the two sizes are equal.
- Integer and boolean tensors keep their own size (the partition targets never offload them, so
  they do not cross in practice).
- Weights are converted once, when the module is loaded, and occupy ``device_bytes`` on the device.

Every figure that counts bytes on the link or the device (kernel costing, the partition problem,
``buffer_plan``, ``inspect``, the runtime breakdown) goes through ``device_bytes``.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def is_float(dtype: str) -> bool:
    return np.dtype(dtype).kind == "f"


def elem_bytes(dtype: str, hw: Any) -> int:
    """Bytes of one element of ``dtype`` on the link and the device."""
    return int(hw.array.word_bytes) if is_float(dtype) else int(np.dtype(dtype).itemsize)


def device_bytes(t: Any, hw: Any) -> int:
    """Bytes of a tensor (a ``TensorType``, or anything with ``size`` and ``dtype``) on the link and
    the device."""
    return int(t.size) * elem_bytes(t.dtype, hw)


def array_device_bytes(a: np.ndarray, hw: Any) -> int:
    """``device_bytes`` of a constant (a weight as the device stores it)."""
    return int(a.size) * elem_bytes(a.dtype.name, hw)


def host_pass_seconds(flops: float, nbytes: float, hw: Any) -> float:
    """One op on the host: a roofline on the host CPU plus its dispatch cost."""
    h = hw.host
    return max(flops / h.peak_flops, nbytes / h.mem_bytes_per_s) + h.op_overhead_s


def host_pass_joules(flops: float, nbytes: float, hw: Any) -> float:
    """Arithmetic at ``host_pj_per_flop`` plus memory traffic at ``dram_pj_per_byte``."""
    e = hw.energy
    return (flops * e.host_pj_per_flop + nbytes * e.dram_pj_per_byte) * 1e-12


def conversion_work(t: Any, hw: Any) -> tuple[int, int]:
    """(FLOPs, host bytes) of converting one crossing tensor between the graph's format and the
    device's; (0, 0) when the sizes are equal."""
    graph = int(t.size) * int(np.dtype(t.dtype).itemsize)
    dev = device_bytes(t, hw)
    if graph == dev:
        return 0, 0
    return int(t.size), graph + dev


def conversion_seconds(t: Any, hw: Any) -> float:
    flops, nbytes = conversion_work(t, hw)
    return host_pass_seconds(flops, nbytes, hw) if nbytes else 0.0


def conversion_joules(t: Any, hw: Any) -> float:
    flops, nbytes = conversion_work(t, hw)
    return host_pass_joules(flops, nbytes, hw) if nbytes else 0.0


__all__ = ["is_float", "elem_bytes", "device_bytes", "array_device_bytes", "host_pass_seconds",
           "host_pass_joules", "conversion_work", "conversion_seconds", "conversion_joules"]
