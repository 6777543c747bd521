"""How one kernel runs on the accelerator: a frozen, hashable value with a JSON round trip.

Parametrisation (what a tuner enumerates and mutates)
-----------------------------------------------------
Every MAC workload is seen as ``g`` independent GEMMs ``C[M,N] += A[M,K] B[K,N]`` (``Workload.gemm_view``;
for a convolution M = output pixels n*p*q, N = filters per group, K = (c/groups)*r*s).

- ``dataflow`` in ``hw.array.dataflows``: which operand stays in the PEs. ``os`` keeps C (M, N
  spatial, K streams in time), ``ws`` keeps B (K, N spatial, M in time), ``is`` keeps A (K, M
  spatial, N in time). These are SCALE-Sim's three dataflows.
- ``spatial = (row_dim, col_dim)``: which of the two stationary dims runs down the array rows and
  which across the columns. Standard (SCALE-Sim) orientation: os ('m','n'), ws ('k','n'), is ('k','m');
  the transposed orientation swaps them (it matters on non-square arrays).
- ``tile_m``, ``tile_n``, ``tile_k``: the tile held in the on-chip buffers (one level: DRAM -> SRAM),
  in GEMM-view elements, per group. Each ``1 <= tile_x <= X``; the last tile of a dim may be short.
  Inside a tile the array folds the spatial dims over its rows/cols; tiles that are multiples of the
  array extent on the spatial dims waste no PE rows/cols. Buffer constraint (words of
  ``hw.array.word_bytes``, times 2 when double-buffered): input patch (``footprint.ifmap_tile_words``)
  <= ifmap buffer, ``tile_k*tile_n`` <= weight buffer, ``tile_m*tile_n`` <= output buffer; with a
  unified buffer the three together <= ``buffers.unified_bytes``.
- ``loop_order``: order of the three tile loops, outer to inner, a permutation of 'mnk' (the group
  loop is always outermost). An operand's tile stays resident while only loops it does not index
  run inside its innermost indexing loop; when K is not innermost, partial sums go back to DRAM.
- ``double_buffer``: two buffer halves per operand, so DMA of the next tile overlaps compute of this
  one (halves the tile that fits).
- ``epilogue``: ops applied by the vector unit to each finished output tile before it is stored
  (bias, activation, residual add): no DRAM round trip.
- ``mapping``: on a machine with a storage hierarchy (``hw.levels``), the ``sim.mapping.mapping.Mapping``
  a MAC kernel runs with (the tuner's); None there means the default mapping policy's
  (``sim.mapping.policy``). It is not a one-buffer parameter: given for any other kernel or
  machine it is refused. JSON: ``Mapping.to_dict`` under ``"mapping"``, present only when set.

Vector workloads (elementwise, pool, softmax, ...) use ``tile_m`` = elements per tile
(``tile_n = tile_k = 1``); dataflow and spatial are ignored.

``check(workload, hw)`` raises ``ScheduleError`` naming what does not fit or is not supported.
For array-based search, ``sim.batch.ScheduleArrays`` holds the same fields as integer columns.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from .footprint import cdiv, Geometry, ifmap_tile_words
from ..hw.config import DATAFLOWS, HardwareConfig
from .mapping import Mapping, mapping_from_dict
from ..workload.workload import Workload

LOOP_ORDERS = ("mnk", "mkn", "nmk", "nkm", "kmn", "knm")
STANDARD_SPATIAL = {"os": ("m", "n"), "ws": ("k", "n"), "is": ("k", "m")}


class ScheduleError(ValueError):
    """An illegal schedule: names what overflows or is unsupported."""


def check(cond: Any, msg: str) -> None:
    if not cond:
        raise ScheduleError(msg)


def _kib(nbytes: float) -> str:
    return f"{nbytes / 1024:.1f} KiB" if nbytes % 1024 else f"{int(nbytes) // 1024} KiB"


@dataclass(frozen=True)
class Schedule:
    dataflow: str = "ws"
    spatial: tuple[str, str] = ("k", "n")
    tile_m: int = 1
    tile_n: int = 1
    tile_k: int = 1
    loop_order: str = "mnk"
    double_buffer: bool = True
    epilogue: tuple[str, ...] = ()
    mapping: Mapping | None = None

    def __post_init__(self):
        object.__setattr__(self, "spatial", tuple(self.spatial))
        object.__setattr__(self, "epilogue", tuple(self.epilogue))
        check(self.dataflow in DATAFLOWS, f"schedule dataflow must be one of {', '.join(DATAFLOWS)}, "
                                          f"got {self.dataflow!r}")
        std = STANDARD_SPATIAL[self.dataflow]
        check(self.spatial in (std, std[::-1]),
              f"schedule spatial {self.spatial} does not fit dataflow {self.dataflow}: "
              f"use {std} or {std[::-1]}")
        for name in ("tile_m", "tile_n", "tile_k"):
            v = getattr(self, name)
            check(isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                  f"schedule {name} must be an integer >= 1, got {v!r}")
        check(self.loop_order in LOOP_ORDERS,
              f"schedule loop_order must be a permutation of 'mnk', got {self.loop_order!r}")
        check(isinstance(self.double_buffer, bool), "schedule double_buffer must be true or false")
        check(self.mapping is None or isinstance(self.mapping, Mapping),
              f"schedule mapping must be a sim.mapping.mapping.Mapping or None, got {type(self.mapping).__name__}")

    # ------------------------------------------------------------------ derived
    @property
    def transposed(self) -> bool:
        return self.spatial != STANDARD_SPATIAL[self.dataflow]

    @property
    def tiles(self) -> tuple[int, int, int]:
        return self.tile_m, self.tile_n, self.tile_k

    def replace(self, **changes: Any) -> "Schedule":
        if "dataflow" in changes and "spatial" not in changes:
            changes["spatial"] = STANDARD_SPATIAL[changes["dataflow"]]
        return replace(self, **changes)

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        d = {"dataflow": self.dataflow, "spatial": list(self.spatial), "tile_m": self.tile_m,
             "tile_n": self.tile_n, "tile_k": self.tile_k, "loop_order": self.loop_order,
             "double_buffer": self.double_buffer, "epilogue": list(self.epilogue)}
        if self.mapping is not None:   # absent otherwise: one-buffer schedules' JSON (and keys) unchanged
            d["mapping"] = self.mapping.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Schedule":
        known = set(cls.__dataclass_fields__)
        extra = set(d) - known
        check(not extra, f"unknown schedule field(s): {', '.join(sorted(extra))}")
        fields = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items() if k != "mapping"}
        if d.get("mapping") is not None:
            fields["mapping"] = mapping_from_dict(d["mapping"])
        return cls(**fields)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, s: str) -> "Schedule":
        try:
            d = json.loads(s)
        except json.JSONDecodeError as e:
            raise ScheduleError(f"schedule JSON does not parse: {e.msg}") from None
        check(isinstance(d, dict), "schedule JSON must be an object")
        return cls.from_dict(d)

    # ------------------------------------------------------------------ legality
    def buffer_needs(self, wl: Workload, hw: HardwareConfig) -> dict[str, int]:
        """Bytes of each buffer this schedule occupies (both halves when double-buffered)."""
        wb = hw.array.word_bytes
        mult = 2 if self.double_buffer else 1
        if not wl.is_mac:
            d = wl.d
            tm = min(self.tile_m, max(1, d["in_elems"], d["out_elems"]))
            big = max(1, d["in_elems"], d["out_elems"])
            return {"ifmap": mult * wb * cdiv(tm * d["in_elems"], big),
                    "weight": 0, "output": mult * wb * cdiv(tm * d["out_elems"], big)}
        geo = Geometry.of(wl)
        tm, tn, tk = min(self.tile_m, geo.m), min(self.tile_n, geo.n), min(self.tile_k, geo.k)
        return {"ifmap": mult * wb * int(ifmap_tile_words(geo, tm, tk)),
                "weight": mult * wb * tk * tn, "output": mult * wb * tm * tn}

    def check(self, wl: Workload, hw: HardwareConfig) -> "Schedule":
        """Raise ScheduleError unless this schedule can run ``wl`` on ``hw``; returns self."""
        if wl.is_mac:
            check(self.dataflow in hw.array.dataflows,
                  f"dataflow {self.dataflow} is not supported by {hw.name} "
                  f"(supports {', '.join(hw.array.dataflows)})")
            _, m, n, k = wl.gemm_view()
            for name, t, dim in (("tile_m", self.tile_m, m), ("tile_n", self.tile_n, n), ("tile_k", self.tile_k, k)):
                check(t <= dim, f"{name}={t} exceeds the workload's {name[-1].upper()}={dim}")
        else:
            d = wl.d
            big = max(1, d["in_elems"], d["out_elems"])
            check(self.tile_m <= big, f"tile_m={self.tile_m} exceeds the workload's {big} elements")
        need = self.buffer_needs(wl, hw)
        b = hw.buffers
        halves = " (double-buffered)" if self.double_buffer else ""
        if b.unified:
            total = sum(need.values())
            check(total <= b.unified_bytes,
                  f"tile needs {_kib(total)} of unified buffer{halves}, hardware has {_kib(b.unified_bytes)}")
        else:
            for op, have in (("ifmap", b.ifmap_bytes), ("weight", b.weight_bytes), ("output", b.output_bytes)):
                check(need[op] <= have,
                      f"tile needs {_kib(need[op])} of {op} buffer{halves}, hardware has {_kib(have)}")
        return self

    def fits(self, wl: Workload, hw: HardwareConfig) -> bool:
        try:
            self.check(wl, hw)
            return True
        except ScheduleError:
            return False

    # ------------------------------------------------------------------ constructors
    @classmethod
    def default(cls, wl: Workload, hw: HardwareConfig) -> "Schedule":
        """Deprecated: ``sim.default_schedule(wl, hw)`` (``sim.mapping.defaults``)."""
        return _moved_constructor("default_schedule")(wl, hw)

    @classmethod
    def scalesim(cls, wl: Workload, hw: HardwareConfig, dataflow: str | None = None) -> "Schedule":
        """Deprecated: ``sim.scalesim_schedule(wl, hw, dataflow)`` (``sim.mapping.defaults``)."""
        return _moved_constructor("scalesim_schedule")(wl, hw, dataflow)


def _moved_constructor(name: str):
    """The schedule constructors that search with the analytical model moved to
    ``sim.mapping.defaults`` so that this value module depends on no model (issue 21); the old
    classmethods forward there for one release, warning."""
    import importlib
    import warnings
    warnings.warn(f"Schedule.{name.split('_')[0]} is deprecated: use sim.{name} (sim.mapping.defaults)",
                  DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module("sim.mapping.defaults"), name)
