"""A multi-level memory hierarchy: storage levels from DRAM down to the MACs, as Timeloop has it.

Order: ``Hierarchy.levels`` is **outermost first** (index 0 = DRAM, the backing store; the last
entry feeds the MACs), the order in which a hardware team draws the machine and in which
``sim.mapping.mapping.Mapping.levels`` lists its per-level loops. Reports that follow Timeloop's
convention (innermost first) reverse it at the edge.

Units: capacities and block sizes in words of the level's ``word_bits``; bandwidths in words per
cycle per instance; energies in pJ per access of one block (Timeloop/Accelergy's "vector access"),
leakage in pJ per cycle per instance; areas in um^2 per instance.

Spatial fan-out follows from the instance counts: a level with ``instances`` copies arranged as
``mesh_x`` x ``mesh_y`` feeds ``instances(inner) / instances(this)`` copies of the next inner level
(``mesh_x(inner) / mesh_x(this)`` along X, the same along Y); the last storage level feeds the
``Arithmetic`` instances. Every ratio must be a whole number, else ``HierarchyError``.

Buffering (``StorageLevel.buffering``, ``parse_buffering``) says how the tile-level walk
(``sim.cost.walk``) refills a level, per tensor: ``single``, ``double``, ``stream`` or ``auto``
(double when the capacity holds two of every tile, else single: the rule from before the field
existed, and Timeloop files keep it, as Timeloop's model overlaps every transfer anyway). The
closed form (``sim.cost.movement``) and the mapping's legality do not depend on it.

A level with ``spatial_only`` holds nothing and costs nothing: it only carries a spatial fan-out
(Timeloop's ``inter_<container>_spatial`` dummy level for a container with a mesh).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable


class HierarchyError(ValueError):
    """A hierarchy value breaks a rule; the message is one line naming the level and field."""


def _check(cond: Any, msg: str) -> None:
    if not cond:
        raise HierarchyError(msg)


def _pos_int(where: str, name: str, v: Any) -> None:
    _check(isinstance(v, int) and not isinstance(v, bool) and v >= 1,
           f"{where}.{name} must be an integer >= 1, got {v!r}")


def _nonneg(where: str, name: str, v: Any, allow_none: bool = False) -> None:
    if v is None and allow_none:
        return
    _check(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0,
           f"{where}.{name} must be a finite number >= 0, got {v!r}")


BUFFERING_MODES = ("auto", "single", "double", "stream")
# The mappings a hierarchy runs (``Hierarchy.family``): the mapper's whole space, or only the
# row-stationary family (sim.mapping.row_stationary) where it covers the nest.
MAPPING_FAMILIES = ("any", "row_stationary")


def parse_buffering(text: Any) -> dict[str, str]:
    """A level's buffering as {tensor: mode}; the key "" holds the mode of tensors not named.

    ``text`` is one mode for every tensor (``"stream"``) or comma-separated ``Tensor:mode``
    pairs (``"Inputs:stream,Outputs:double"``; tensors left out: ``auto``). Raises
    ``HierarchyError`` with one line naming what is wrong."""
    _check(isinstance(text, str) and 0 < len(text) <= 200 and text.isprintable(),
           f"buffering must be a short text, got {text!r}"[:120])
    if ":" not in text:
        _check(text.strip() in BUFFERING_MODES, f"unknown buffering mode {text.strip()!r}")
        return {"": text.strip()}
    out: dict[str, str] = {"": "auto"}
    for part in text.split(","):
        tensor, sep, mode = (x.strip() for x in part.partition(":"))
        _check(sep and tensor, f"{part.strip()!r} is not Tensor:mode")
        _check(mode in BUFFERING_MODES, f"unknown buffering mode {mode!r} for {tensor}")
        _check(tensor not in out, f"{tensor} is given twice")
        out[tensor] = mode
    return out


def _mesh(where: str, instances: int, mesh_x: int | None, mesh_y: int | None) -> tuple[int, int]:
    """(mesh_x, mesh_y) with a missing side derived from the instances (all along X by default)."""
    if mesh_x is None and mesh_y is None:
        mesh_x, mesh_y = instances, 1
    elif mesh_y is None:
        _pos_int(where, "mesh_x", mesh_x)
        _check(instances % mesh_x == 0, f"{where}.mesh_x={mesh_x} must divide instances={instances}")
        mesh_y = instances // mesh_x
    elif mesh_x is None:
        _pos_int(where, "mesh_y", mesh_y)
        _check(instances % mesh_y == 0, f"{where}.mesh_y={mesh_y} must divide instances={instances}")
        mesh_x = instances // mesh_y
    _pos_int(where, "mesh_x", mesh_x)
    _pos_int(where, "mesh_y", mesh_y)
    _check(mesh_x * mesh_y == instances,
           f"{where}: mesh_x*mesh_y = {mesh_x}*{mesh_y} must equal instances={instances}")
    return mesh_x, mesh_y


@dataclass(frozen=True)
class StorageLevel:
    """One storage level. ``capacity_words`` per instance (None = unbounded, e.g. DRAM);
    ``keeps`` = the data spaces it may hold (None = any)."""
    name: str
    capacity_words: int | None = None
    word_bits: int = 8
    block_size: int = 1              # words per access (one "vector access" costs one energy)
    cluster_size: int = 1            # instances sharing one access (Timeloop cluster_size)
    instances: int = 1
    mesh_x: int | None = None
    mesh_y: int | None = None
    read_bandwidth: float | None = None    # words/cycle/instance, None = unlimited
    write_bandwidth: float | None = None
    read_pj: float = 0.0             # per block read
    fill_pj: float = 0.0             # per block written from the parent (Timeloop "write")
    update_pj: float = 0.0           # per block written from below (partial sums)
    leak_pj_per_cycle: float = 0.0   # per instance
    area_um2: float = 0.0            # per instance
    keeps: frozenset[str] | None = None
    spatial_only: bool = False
    buffering: str = "auto"          # per tensor: parse_buffering's text (the walk reads it)

    def __post_init__(self):
        w = f"hierarchy level {self.name!r}"
        _check(isinstance(self.name, str) and self.name and self.name.isprintable() and len(self.name) <= 100,
               f"hierarchy level name must be non-empty printable text, got {self.name!r}")
        if self.capacity_words is not None:
            _check(isinstance(self.capacity_words, int) and not isinstance(self.capacity_words, bool)
                   and self.capacity_words >= 0, f"{w}.capacity_words must be an integer >= 0 or None, "
                                                 f"got {self.capacity_words!r}")
        for name in ("word_bits", "block_size", "cluster_size", "instances"):
            _pos_int(w, name, getattr(self, name))
        mx, my = _mesh(w, self.instances, self.mesh_x, self.mesh_y)
        object.__setattr__(self, "mesh_x", mx)
        object.__setattr__(self, "mesh_y", my)
        for name in ("read_bandwidth", "write_bandwidth"):
            v = getattr(self, name)
            _nonneg(w, name, v, allow_none=True)
            _check(v is None or v > 0, f"{w}.{name} must be > 0 or None (unlimited), got {v!r}")
        for name in ("read_pj", "fill_pj", "update_pj", "leak_pj_per_cycle", "area_um2"):
            _nonneg(w, name, getattr(self, name))
        if self.keeps is not None:
            keeps = frozenset(self.keeps) if not isinstance(self.keeps, str) else None
            _check(keeps is not None and all(isinstance(k, str) and k for k in keeps),
                   f"{w}.keeps must be a set of data-space names or None, got {self.keeps!r}")
            object.__setattr__(self, "keeps", keeps)
        try:
            parse_buffering(self.buffering)
        except HierarchyError as e:
            raise HierarchyError(f"{w}.buffering: {e}") from None
        if self.spatial_only:
            _check(not self.keeps, f"{w}: a spatial_only level keeps nothing, got keeps={sorted(self.keeps or ())}")
            object.__setattr__(self, "keeps", frozenset())

    def may_keep(self, data_space: str) -> bool:
        return self.keeps is None or data_space in self.keeps

    def buffering_of(self, data_space: str) -> str:
        """How the walk refills ``data_space`` here: single, double, stream or auto."""
        modes = parse_buffering(self.buffering)
        return modes.get(data_space, modes[""])


@dataclass(frozen=True)
class Arithmetic:
    """The MACs: ``instances`` units on a ``mesh_x`` x ``mesh_y`` grid."""
    name: str = "MAC"
    instances: int = 1
    mesh_x: int | None = None
    mesh_y: int | None = None
    mac_pj: float = 0.0
    area_um2: float = 0.0            # per instance
    word_bits: int = 8

    def __post_init__(self):
        w = f"hierarchy arithmetic {self.name!r}"
        _check(isinstance(self.name, str) and self.name, "hierarchy arithmetic name must be non-empty")
        _pos_int(w, "instances", self.instances)
        _pos_int(w, "word_bits", self.word_bits)
        mx, my = _mesh(w, self.instances, self.mesh_x, self.mesh_y)
        object.__setattr__(self, "mesh_x", mx)
        object.__setattr__(self, "mesh_y", my)
        _nonneg(w, "mac_pj", self.mac_pj)
        _nonneg(w, "area_um2", self.area_um2)


@dataclass(frozen=True)
class Hierarchy:
    """Storage levels outermost first (index 0 = backing store), then the MACs."""
    levels: tuple[StorageLevel, ...]
    arithmetic: Arithmetic = field(default_factory=Arithmetic)
    family: str = "any"       # MAPPING_FAMILIES: the mappings the default policy and the mapper consider

    def __post_init__(self):
        object.__setattr__(self, "levels", tuple(self.levels))
        _check(self.family in MAPPING_FAMILIES,
               f"hierarchy family must be one of {', '.join(MAPPING_FAMILIES)}, got {self.family!r}")
        _check(len(self.levels) >= 1, "hierarchy needs at least one storage level")
        _check(all(isinstance(lv, StorageLevel) for lv in self.levels),
               "hierarchy levels must be StorageLevel values")
        _check(isinstance(self.arithmetic, Arithmetic), "hierarchy arithmetic must be an Arithmetic value")
        names = [lv.name for lv in self.levels] + [self.arithmetic.name]
        dup = sorted({n for n in names if names.count(n) > 1})
        _check(not dup, f"hierarchy level names must be distinct, {dup[0] if dup else ''!r} appears twice")
        _check(not self.levels[0].spatial_only,
               f"hierarchy level {self.levels[0].name!r}: the outermost level must hold data (backing store)")
        for i in range(len(self.levels)):
            self.fanout(i)  # raises on a ratio that is not whole

    def _inner(self, i: int) -> StorageLevel | Arithmetic:
        return self.levels[i + 1] if i + 1 < len(self.levels) else self.arithmetic

    def fanout(self, i: int) -> tuple[int, int]:
        """(X, Y) spatial fan-out from level ``i`` to the next inner level (or the MACs)."""
        outer, inner = self.levels[i], self._inner(i)
        for axis in ("mesh_x", "mesh_y"):
            o, n = getattr(outer, axis), getattr(inner, axis)
            _check(n % o == 0, f"hierarchy level {inner.name!r}.{axis}={n} must be a multiple of "
                               f"{outer.name!r}.{axis}={o} (each outer instance feeds whole inner ones)")
        return inner.mesh_x // outer.mesh_x, inner.mesh_y // outer.mesh_y

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(lv.name for lv in self.levels)

    def index(self, name: str) -> int:
        for i, lv in enumerate(self.levels):
            if lv.name == name:
                return i
        raise HierarchyError(f"hierarchy has no storage level {name!r} (levels: {', '.join(self.names)})")

    def area_um2(self) -> float:
        """All instances of every level plus the MACs."""
        return (sum(lv.area_um2 * lv.instances for lv in self.levels)
                + self.arithmetic.area_um2 * self.arithmetic.instances)


def hierarchy_from_hardware(hw: Any, data_spaces: Iterable[str] = ("Inputs", "Weights", "Outputs")) -> Hierarchy:
    """Today's one-buffer ``HardwareConfig`` as DRAM -> buffer -> PE array.

    The buffer level is one instance holding every data space (the per-operand SRAMs together, or
    the unified buffer); the array's rows x cols PEs are the MACs (mesh_x = cols, mesh_y = rows).
    Energies: per word (block 1), word = ``hw.array.word_bytes`` bytes, from the per-byte figures
    of ``hw.energy``; areas from ``hw.area`` (mm^2 -> um^2). Bandwidths: DRAM's and the SRAM port
    in words per cycle. This is the special case the one-level simulator models; the multi-level
    model evaluates it with a mapping like any other hierarchy.
    """
    wb = hw.array.word_bytes
    e, a = hw.energy, hw.area
    buf_bytes = hw.buffers.total_bytes
    dram = StorageLevel(
        name="DRAM", capacity_words=None, word_bits=8 * wb, block_size=1, instances=1,
        read_bandwidth=hw.dram.bytes_per_cycle / wb, write_bandwidth=hw.dram.bytes_per_cycle / wb,
        read_pj=e.dram_pj_per_byte * wb, fill_pj=e.dram_pj_per_byte * wb, update_pj=e.dram_pj_per_byte * wb)
    buf = StorageLevel(
        name="Buffer", capacity_words=buf_bytes // wb, word_bits=8 * wb, block_size=1, instances=1,
        read_bandwidth=hw.buffers.sram_bytes_per_cycle / wb, write_bandwidth=hw.buffers.sram_bytes_per_cycle / wb,
        read_pj=e.sram_pj_per_byte * wb, fill_pj=e.sram_pj_per_byte * wb, update_pj=e.sram_pj_per_byte * wb,
        area_um2=buf_bytes / 1024 * a.sram_mm2_per_kib * 1e6,
        keeps=frozenset(data_spaces))
    mac = Arithmetic(name="PE", instances=hw.array.rows * hw.array.cols, mesh_x=hw.array.cols,
                     mesh_y=hw.array.rows, mac_pj=e.mac_pj, area_um2=a.pe_mm2 * 1e6, word_bits=8 * wb)
    return Hierarchy((dram, buf), mac)
