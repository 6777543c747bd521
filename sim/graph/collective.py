"""The cost of the collective ops of tensor and pipeline parallel on ``hw.interconnect``.

``S`` is the bytes of the tensor on each device, ``N`` the devices of the group, ``bw`` the
interconnect's ``bytes_per_s`` (one device, one direction), ``lat`` its ``latency_s`` per hop:

- all-reduce, ``ring`` (reduce-scatter then all-gather around the ring, bandwidth-optimal):
  ``2 (N-1)/N x S / bw + 2 (N-1) x lat``;
- all-reduce, ``switch`` (every device one hop from every other through a switch, e.g. NVSwitch):
  the same bytes, ``2 (N-1)/N x S / bw``, and two message latencies (one per phase), ``2 x lat``;
- all-reduce, ``mesh`` (a 2-D torus of ``a x b`` devices, ``a`` the largest divisor of ``N`` not
  above its square root): the ring's bytes (rows then columns, each bandwidth-optimal) and
  ``2 ((a-1) + (b-1)) x lat`` hops;
- send/recv (one pipeline stage to the next, one hop): ``S / bw + lat``.

When the interconnect states ``protocols`` (a collective library's, e.g. NCCL's LL, LL128 and
Simple), an all-reduce is that library's ring on any topology, as NCCL runs rings over NVSwitch
too, and costs its fastest protocol: ``start + 2 (N-1) x step + 2 (N-1)/N x S / (fraction x bw)``.
That is NCCL's own model for choosing among them (``src/graph/tuning.cc``: base latency, per-step
hardware latency, bus bandwidth per protocol, ring bus-to-algorithm ratio ``N / 2(N-1)``). A send
keeps the formula above.

Each device sends ``2 (N-1)/N x S`` bytes in an all-reduce (``S`` in a send), at
``interconnect.pj_per_byte``. A group of one device costs nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..hw.config import HardwareConfig


class InterconnectError(ValueError):
    """A split that needs more devices or links than the hardware has; one line naming both."""


@dataclass(frozen=True)
class CollectiveCost:
    seconds: float
    bytes_sent: float   # per device
    joules: float       # per device


def mesh_shape(n: int) -> tuple[int, int]:
    a = max(d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0)
    return a, n // a


def check_devices(hw: HardwareConfig, tp: int, pp: int) -> None:
    """Refuse a split the interconnect cannot carry (one line)."""
    n = tp * pp
    ic = hw.interconnect
    if n > ic.max_devices:
        raise InterconnectError(f"--tp {tp} --pp {pp} needs {n} devices, but {hw.name} connects at most "
                                f"{ic.max_devices} (interconnect.max_devices)")
    if n > 1 and ic.bytes_per_s <= 0:
        raise InterconnectError(f"--tp {tp} --pp {pp} needs links between devices, but {hw.name} has none "
                                f"(interconnect.bytes_per_s = 0)")


def all_reduce(nbytes: float, n: int, hw: HardwareConfig) -> CollectiveCost:
    if n <= 1 or nbytes <= 0:
        return CollectiveCost(0.0, 0.0, 0.0)
    ic = hw.interconnect
    sent = 2.0 * (n - 1) / n * nbytes
    joules = sent * ic.pj_per_byte * 1e-12
    if ic.protocols:
        steps = 2 * (n - 1)
        return CollectiveCost(min(start + steps * step + sent / (fraction * ic.bytes_per_s)
                                  for _, start, step, fraction in ic.protocols), sent, joules)
    if ic.topology == "switch":
        hops = 2
    elif ic.topology == "mesh":
        a, b = mesh_shape(n)
        hops = 2 * ((a - 1) + (b - 1))
    else:
        hops = 2 * (n - 1)
    return CollectiveCost(sent / ic.bytes_per_s + hops * ic.latency_s, sent, joules)


def send(nbytes: float, hw: HardwareConfig) -> CollectiveCost:
    if nbytes <= 0:
        return CollectiveCost(0.0, 0.0, 0.0)
    ic = hw.interconnect
    return CollectiveCost(nbytes / ic.bytes_per_s + ic.latency_s, float(nbytes), nbytes * ic.pj_per_byte * 1e-12)


__all__ = ["CollectiveCost", "InterconnectError", "all_reduce", "send", "check_devices", "mesh_shape"]
