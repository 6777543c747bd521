"""The accelerator description: one frozen, validated configuration tree with units in field names.

``HardwareConfig`` groups: ``array`` (PE grid, dataflows, MAC word), ``buffers`` (per-operand SRAM
as SCALE-Sim has it, or one unified buffer), ``dram``, ``vector`` (the unit that runs
element-wise/pool/softmax/norm ops and fused epilogues), ``clock``, ``host`` and ``link`` models,
``energy`` and ``area`` coefficients, and ``support`` (the ops/patterns offloaded; it builds the
partition target). Every value is checked when the object is built against the ``Rule`` in its
field's metadata (numbers are finite and within physical bounds, so derived figures stay finite;
``field_rules()`` lists them for docs and ``hw show``); a bad one raises ``HardwareError`` with one
line naming the dotted field and the rule broken. A section added later declares its fields the
same way (``_int``, ``_num``, ``_R``) and gets the same checks, messages and docs.

``levels`` (optional, ``[[levels]]`` in TOML, outermost first) is the storage hierarchy: one
``LevelConfig`` per level (capacity, word and block size, fan-out to the next level or the MACs,
bandwidths, per-access energies, leakage, area, which tensors it may keep), ranged by the same
``Rule`` mechanism (``level_rules()``); ``_check_levels`` holds the rules across levels (unique
names, a backing store that keeps everything, fan-outs that multiply to the array). Without it the
config is the one-buffer machine it always was (``levels`` is then absent from ``to_dict``, so
fingerprints do not change); with it MAC kernels are costed on the hierarchy (``sim.cost.multilevel``).
Overrides name a level field ``levels.<level>.<field>``; see docs/SIMULATOR.md.

Files (TOML, YAML or JSON, read by ``sim.hw.configfile.read_config`` as untrusted input) hold the same
tree as nested tables. A file may start from ``base = "<preset name or file>"`` (a file relative to
the one naming it; a cycle of files is refused) and override only what differs. ``fingerprint`` is
the sha256 of the canonical JSON of every field except ``name`` and ``description``, so two files
describing the same machine share tuning records.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from .configfile import read_config

DATAFLOWS = ("ws", "os", "is")
MAC_DTYPES = ("int4", "int8", "int16", "fp8", "fp16", "bf16", "fp32")


class HardwareError(ValueError):
    """A hardware configuration value breaks a rule, or a config file cannot be read."""


def _fail(path: str, rule: str, value: Any) -> None:
    raise HardwareError(f"hardware.{path} must be {rule}, got {_show(value)}")


def _show(value: Any) -> str:
    """A value as a message quotes it, cut short: an error is one line, however long the input."""
    s = repr(_plain(value))
    return s if len(s) <= 80 else s[:77] + "..."


def _key(k: Any) -> str:
    """A key from a file as a message names it: plain when it is a short printable string."""
    return k if isinstance(k, str) and k.isprintable() and 0 < len(k) <= 60 else _show(k)


def _fmt(x: float) -> str:
    if isinstance(x, int):
        return f"2**{x.bit_length() - 1}" if x >= 2**20 and x & (x - 1) == 0 else f"{x:,}"
    return f"{x:g}"


# the vector workload kinds of sim.workload (VECTOR_KINDS; tests keep the two equal): sim.hw does
# not import sim.workload
VECTOR_KERNEL_KINDS = ("elementwise", "pool", "softmax", "layer_norm", "reduce", "data_move")

_NAME_CHARS = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True)
class Rule:
    """What one field accepts. ``kind``: 'int' or 'num' (finite, in [lo, hi], ``unit`` for
    messages and docs), 'bool', 'str' (at most ``hi`` printable characters), 'symbol' (a name
    that becomes part of external function symbols), 'names' (a list of distinct non-empty
    names, at most ``hi`` of them, all from ``choices`` when it is given), 'choice' (one of ``choices``),
    'protocols' (at most ``hi`` entries ``[name, start_s, step_s, bandwidth_fraction]``: a collective
    library's protocols, ``sim.graph.collective``) or 'buffering' (a storage level's
    buffering: one of ``choices`` for every tensor it keeps, or ``Tensor:mode`` pairs separated by
    commas, ``sim.hw.hierarchy.parse_buffering``). Sections added later reuse
    these kinds; a field's rule is in its dataclass metadata, so docs and checks never drift."""
    kind: str
    lo: float | None = None
    hi: float | None = None
    unit: str = ""
    choices: tuple[str, ...] = ()

    def describe(self) -> str:
        """The rule as ``hw show`` and the docs print it, e.g. 'integer 1..4,096'."""
        u = f" {self.unit}" if self.unit else ""
        if self.kind == "int":
            return f"integer {_fmt(self.lo)}..{_fmt(self.hi)}{u}"
        if self.kind == "num":
            return f"number {_fmt(self.lo)}..{_fmt(self.hi)}{u}"
        if self.kind == "bool":
            return "true or false"
        if self.kind == "str":
            return f"text, at most {self.hi:g} characters"
        if self.kind == "symbol":
            return f"name of letters, digits, '_', '.', '-' (at most {self.hi:g})"
        if self.kind == "names":
            among = f" from {', '.join(self.choices)}" if self.choices else ""
            return f"list of distinct names{among} (at most {self.hi:g})"
        if self.kind == "protocols":
            return (f"list of at most {self.hi:g} [name, start-up s, per-step s, fraction of bytes_per_s] "
                    f"(e.g. [[\"LL\", 6.6e-6, 0.6e-6, 0.2]])")
        if self.kind == "buffering":
            return f"one of {', '.join(self.choices)}, or Tensor:mode pairs (e.g. 'Inputs:stream,Outputs:double')"
        if self.kind == "classes":
            return (f"list of at most {self.hi:g} [vector kernel kind, DRAM fraction, call overhead s] "
                    f"(kinds {', '.join(self.choices)}; e.g. [[\"layer_norm\", 0.76, 36e-6]])")
        return "one of " + ", ".join(self.choices)

    def check(self, path: str, v: Any) -> None:
        k = self.kind
        if k in ("int", "num"):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                _fail(path, "a number", v)
            if isinstance(v, float) and not math.isfinite(v):
                _fail(path, f"a finite number ({self.describe()})", v)
            if k == "int" and isinstance(v, float) and not v.is_integer():
                _fail(path, "an integer", v)
            if not self.lo <= v <= self.hi:  # int vs float compares exactly, even for 10**400
                _fail(path, f"{'an integer' if k == 'int' else 'a number'} from {_fmt(self.lo)} to "
                            f"{_fmt(self.hi)}{f' {self.unit}' if self.unit else ''}", v)
        elif k == "bool":
            if not isinstance(v, bool):
                _fail(path, "true or false", v)
        elif k == "str":
            if not isinstance(v, str):
                _fail(path, "a string", v)
            if len(v) > self.hi or not v.isprintable():
                _fail(path, f"printable text of at most {self.hi:g} characters", v)
        elif k == "symbol":
            if not isinstance(v, str) or not _NAME_CHARS.match(v) or ".." in v or len(v) > self.hi:
                _fail(path, f"a name of letters, digits, '_', '.', '-' (no '..', at most {self.hi:g} "
                            f"characters)", v)
        elif k == "names":
            if not isinstance(v, tuple) or not all(isinstance(x, str) and x and len(x) <= 100 for x in v):
                _fail(path, "a list of non-empty names", v)
            if len(v) > self.hi:
                _fail(path, f"a list of at most {self.hi:g} names", v)
            if len(set(v)) != len(v):
                _fail(path, "a list without duplicates", v)
            if self.choices and not set(v) <= set(self.choices):
                _fail(path, f"a list of names from {', '.join(self.choices)}", v)
        elif k == "choice":
            if not isinstance(v, str) or v not in self.choices:
                _fail(path, f"one of {', '.join(self.choices)}", v)
        elif k == "protocols":
            _check_protocols(path, v, int(self.hi))
        elif k == "classes":
            _check_classes(path, v, int(self.hi), self.choices)
        elif k == "buffering":
            from .hierarchy import HierarchyError, parse_buffering
            try:
                parse_buffering(v)
            except HierarchyError as e:
                _fail(path, f"{self.describe()} ({e})", v)
        else:
            raise AssertionError(f"unknown rule kind {k!r} for {path}")


def _check_table(path: str, v: Any, most: int, entry: str, head: Any, numbers: tuple, distinct: str) -> None:
    """A list of at most ``most`` entries ``[head, number, ...]`` (``entry`` names the form):
    ``head(where, x)`` checks an entry's first item, ``numbers`` gives (what, lo, hi, unit) of each
    number after it, and no two entries share a head (``distinct`` says so)."""
    if not isinstance(v, tuple) or len(v) > most:
        _fail(path, f"a list of {entry} entries, at most {most}", v)
    heads = []
    for i, e in enumerate(v):
        where = f"{path}[{i}]"
        if not isinstance(e, tuple) or len(e) != 1 + len(numbers):
            _fail(where, entry, e)
        head(where, e[0])
        for (what, lo, hi, unit), x in zip(numbers, e[1:]):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or not lo <= x <= hi:
                _fail(f"{where} {what}", f"a number from {_fmt(lo)} to {_fmt(hi)}{unit}", x)
        heads.append(e[0])
    if len(set(heads)) != len(heads):
        _fail(path, distinct, v)


def _check_protocols(path: str, v: Any, most: int) -> None:
    def name(where: str, x: Any) -> None:
        if not isinstance(x, str) or not _NAME_CHARS.match(x) or len(x) > 40:
            _fail(f"{where} name", "a name of letters, digits, '_', '.', '-' (at most 40)", x)
    _check_table(path, v, most, "[name, start-up s, per-step s, fraction of bytes_per_s]", name,
                 (("start-up", 0.0, 1.0, " s"), ("per-step", 0.0, 1.0, " s"), ("bandwidth fraction", 1e-6, 1.0, "")),
                 "protocols with distinct names")


def _check_classes(path: str, v: Any, most: int, kinds: tuple[str, ...]) -> None:
    def kind(where: str, x: Any) -> None:
        if x not in kinds:
            _fail(f"{where} kind", f"one of {', '.join(kinds)}", x)
    _check_table(path, v, most, "[vector kernel kind, DRAM fraction, call overhead s]", kind,
                 (("DRAM fraction", 1e-3, 1.0, ""), ("call overhead", 0.0, 1e-2, " s")), "one entry per kind")


def _validate(obj: Any, prefix: str) -> None:
    """Check every field of a section against the Rule in its metadata."""
    for f in fields(obj):
        f.metadata["rule"].check(f"{prefix}.{f.name}", getattr(obj, f.name))


def _tupled(obj: Any, numbers: bool) -> None:
    """Lists from files become tuples so the config stays hashable; with ``numbers``, 64.0 for an
    integer field becomes 64 and 11 for a real field 11.0, so the fingerprint does not depend on
    how a file spelled a number."""
    for f in fields(obj):
        v = getattr(obj, f.name)
        kind = f.metadata["rule"].kind
        if kind in ("protocols", "classes") and isinstance(v, (list, tuple)):
            # entries are [name, numbers...]: tuples (hashable), and 1 and 1.0 the same fingerprint
            v = tuple(tuple((float(x) if numbers and isinstance(x, int) and not isinstance(x, bool) else x)
                            for x in e) if isinstance(e, (list, tuple)) else e for e in v)
            object.__setattr__(obj, f.name, v)
        elif isinstance(v, list):
            object.__setattr__(obj, f.name, tuple(v))
        elif not numbers:
            continue
        elif isinstance(v, int) and not isinstance(v, bool) and kind == "num":
            object.__setattr__(obj, f.name, float(v))
        elif isinstance(v, float) and kind == "int":
            object.__setattr__(obj, f.name, int(v))


def _R(kind: str, default: Any, doc: str = "", lo: float | None = None, hi: float | None = None,
       unit: str = "", choices: tuple[str, ...] = ()) -> Any:
    return field(default=default, metadata={"rule": Rule(kind, lo, hi, unit, choices), "doc": doc})


def _int(default: int, lo: int, hi: int, unit: str, doc: str) -> Any:
    return _R("int", default, doc, lo, hi, unit)


def _num(default: float, lo: float, hi: float, unit: str, doc: str) -> Any:
    return _R("num", default, doc, lo, hi, unit)


# Physical bounds shared by several fields; wide enough for any real design space, narrow enough
# that every derived figure (PEs, area, cycles, seconds, joules) stays finite.
TIB = 2**40
_PJ = (0.0, 1e4, "pJ")          # per-access and per-op energies
_MM2 = (0.0, 10.0, "mm2")       # per-unit area coefficients


class _Section:
    """Shared construction check of every config section; ``_name`` is its key in the tree."""
    _name = ""

    def __post_init__(self):
        _tupled(self, numbers=False)
        _validate(self, self._where())  # before numbers are normalised, so errors echo the input
        _tupled(self, numbers=True)
        self._check()

    def _where(self) -> str:
        """The dotted prefix messages name this section by."""
        return self._name

    def _check(self) -> None:
        """Rules that span fields (overridden where a section has them)."""


@dataclass(frozen=True)
class ArrayConfig(_Section):
    _name = "array"
    rows: int = _int(32, 1, 4096, "PEs", "PE rows (the dimension fed from the left edge)")
    cols: int = _int(32, 1, 4096, "PEs", "PE columns")
    dataflows: tuple[str, ...] = _R("names", ("ws", "os", "is"), "dataflows the array supports", hi=3)
    mac_dtype: str = _R("choice", "int8", "MAC operand type", choices=MAC_DTYPES)
    word_bytes: int = _int(1, 1, 8, "bytes", "bytes per stored word (inputs, weights, outputs)")
    fold_overlap: bool = _R("bool", True, "consecutive folds overlap fill/drain (SCALE-Sim: false)")

    def _check(self) -> None:
        for d in self.dataflows:
            if d not in DATAFLOWS:
                _fail("array.dataflows", f"a list drawn from {', '.join(DATAFLOWS)}", list(self.dataflows))
        if not self.dataflows:
            _fail("array.dataflows", "non-empty", [])


@dataclass(frozen=True)
class BufferConfig(_Section):
    _name = "buffers"
    ifmap_bytes: int = _int(64 * 1024, 0, TIB, "bytes", "input-activation SRAM (0 with a unified buffer)")
    weight_bytes: int = _int(64 * 1024, 0, TIB, "bytes", "weight SRAM (0 with a unified buffer)")
    output_bytes: int = _int(64 * 1024, 0, TIB, "bytes", "output/accumulator SRAM (0 with a unified buffer)")
    unified_bytes: int = _int(0, 0, TIB, "bytes", "one buffer shared by all operands; 0 = per-operand buffers")
    sram_bytes_per_cycle: float = _num(1e12, 1e-3, 1e12, "bytes/cycle",
                                       "SRAM bandwidth to the array and vector unit (1e12: no limit)")

    def _check(self) -> None:
        if self.unified_bytes == 0:
            for name in ("ifmap_bytes", "weight_bytes", "output_bytes"):
                if getattr(self, name) <= 0:
                    _fail(f"buffers.{name}", "> 0 (or set buffers.unified_bytes)", getattr(self, name))

    @property
    def unified(self) -> bool:
        return self.unified_bytes > 0

    @property
    def total_bytes(self) -> int:
        return self.unified_bytes or (self.ifmap_bytes + self.weight_bytes + self.output_bytes)


@dataclass(frozen=True)
class DramConfig(_Section):
    _name = "dram"
    bytes_per_cycle: float = _num(30.0, 1e-3, 1e6, "bytes/cycle",
                                  "DRAM bandwidth shared by reads and writes (accelerator cycles)")
    latency_cycles: int = _int(1, 0, 10**7, "cycles", "latency of one DMA transfer")


@dataclass(frozen=True)
class VectorConfig(_Section):
    _name = "vector"
    lanes: int = _int(32, 1, 65536, "lanes", "element operations per cycle")
    ops: tuple[str, ...] = _R("names", ("relu", "add", "bias_add", "max_pool2d", "avg_pool2d",
                                        "global_avg_pool2d", "softmax", "layer_norm", "batch_norm"),
                              "ops the vector unit runs", hi=1000)
    special_op_cycles: float = _num(4.0, 1e-2, 1e4, "cycles",
                                    "cycles per element-lane for exp/erf/sqrt/div class ops")

    def _check(self) -> None:
        from partition.ops import OPS  # a misspelt op would silently never run on the vector unit
        bad = [o for o in self.ops if o not in OPS]
        if bad:
            raise HardwareError(f"hardware.vector.ops lists {', '.join(map(repr, bad[:5]))}, which are not "
                                f"canonical ops (docs/IR.md lists them)")


@dataclass(frozen=True)
class ClockConfig(_Section):
    _name = "clock"
    freq_mhz: float = _num(1000.0, 1.0, 1e5, "MHz", "accelerator clock (1 MHz to 100 GHz)")


@dataclass(frozen=True)
class HostConfig(_Section):
    _name = "host"
    peak_flops: float = _num(50e9, 1e6, 1e18, "FLOP/s", "host sustained FLOP/s")
    mem_bytes_per_s: float = _num(20e9, 1e6, 1e15, "bytes/s", "host memory bandwidth")
    op_overhead_s: float = _num(2e-6, 0.0, 1.0, "s", "fixed cost per host op (dispatch)")


@dataclass(frozen=True)
class LinkConfig(_Section):
    _name = "link"
    bytes_per_s: float = _num(12e9, 1e3, 1e15, "bytes/s", "host<->accelerator bandwidth")
    launch_latency_s: float = _num(10e-6, 0.0, 1.0, "s", "fixed cost per external-function call")


@dataclass(frozen=True)
class MemoryConfig(_Section):
    """Device memory as a capacity (weights, KV cache and activations must fit in it); its
    bandwidth is ``dram.bytes_per_cycle``. Optional: absent from files and fingerprints at its default."""
    _name = "memory"
    capacity_bytes: int = _int(0, 0, 2**50, "bytes", "device memory (DRAM/HBM) capacity; 0 = not stated "
                               "(nothing is refused for size)")


INTERCONNECT_TOPOLOGIES = ("ring", "switch", "mesh")
MAPPING_FAMILIES = ("any", "row_stationary")  # sim.hw.hierarchy.MAPPING_FAMILIES, same order


@dataclass(frozen=True)
class InterconnectConfig(_Section):
    """The links between identical devices (tensor and pipeline parallel). Optional: absent from
    files and fingerprints at its default, which is one device and no links."""
    _name = "interconnect"
    max_devices: int = _int(1, 1, 65536, "devices", "devices the links connect (1 = a single device)")
    bytes_per_s: float = _num(0.0, 0.0, 1e15, "bytes/s", "device-to-device bandwidth of one device, one "
                              "direction; 0 = no links")
    latency_s: float = _num(0.0, 0.0, 1.0, "s", "latency of one message over one hop")
    topology: str = _R("choice", "ring", "how the devices are wired: ring (each to two neighbours), switch "
                       "(all through one switch, e.g. NVSwitch), mesh (2-D torus)", choices=INTERCONNECT_TOPOLOGIES)
    pj_per_byte: float = _num(0.0, *_PJ, "energy of one byte sent to another device")
    protocols: tuple = _R("protocols", (), "a collective library's ring all-reduce protocols (e.g. NCCL's LL, "
                          "LL128, Simple): when given, an all-reduce over N devices costs the fastest, start-up + "
                          "2(N-1) x per-step + 2(N-1)/N x bytes / (fraction x bytes_per_s), whatever the "
                          "topology; empty = the topology's formula (sim.graph.collective)", hi=8)
    # No cross-field rule here (max_devices > 1 with bytes_per_s = 0): a split that needs the links
    # is refused where it is asked for, with the split named in the message.


@dataclass(frozen=True)
class MapspaceConfig(_Section):
    """Which mappings the hardware can run on its storage hierarchy. Optional: absent from files
    and fingerprints at its default, the mapper's whole space. ``row_stationary``: only Eyeriss's
    row-stationary family (``sim.mapping.row_stationary``), as a fabricated chip runs only what its
    compiler emits; a nest the family does not cover (not a convolution) keeps the whole space."""
    _name = "mapspace"
    family: str = _R("choice", "any", "mappings the array runs: any (the mapper's whole space) or "
                     "row_stationary (Eyeriss's RS family only)", choices=MAPPING_FAMILIES)


@dataclass(frozen=True)
class EnergyConfig(_Section):
    _name = "energy"
    mac_pj: float = _num(0.23, *_PJ, "one multiply-accumulate")
    reg_pj_per_byte: float = _num(0.03, *_PJ, "PE register access, per byte")
    sram_pj_per_byte: float = _num(1.25, *_PJ, "on-chip buffer access, per byte")
    dram_pj_per_byte: float = _num(80.0, *_PJ, "DRAM access, per byte")
    host_pj_per_flop: float = _num(20.0, *_PJ, "host CPU arithmetic, per FLOP (mobile-class fp32 "
                                   "core with SIMD: ~10-30 pJ; its memory traffic is dram_pj_per_byte)")
    link_pj_per_byte: float = _num(60.0, *_PJ, "host link transfer, per byte")
    vector_op_pj: float = _num(0.5, *_PJ, "one vector-unit element operation")
    leakage_mw_per_mm2: float = _num(0.1, 0.0, 1e4, "mW/mm2", "static power density")


@dataclass(frozen=True)
class AreaConfig(_Section):
    _name = "area"
    pe_mm2: float = _num(0.0012, *_MM2, "one PE (MAC + registers)")
    sram_mm2_per_kib: float = _num(0.004, *_MM2, "SRAM density, per KiB")
    vector_lane_mm2: float = _num(0.002, *_MM2, "one vector lane")
    fixed_mm2: float = _num(5.0, 0.0, 1e5, "mm2", "control, DMA, interconnect, I/O")


@dataclass(frozen=True)
class SupportConfig(_Section):
    _name = "support"
    target: str = _R("symbol", "npu", "partition target name (compiler name and prefix of external "
                     "function symbols)", hi=64)
    ops: tuple[str, ...] = _R("names", ("conv2d", "dense", "matmul", "batch_matmul", "gemm"),
                              "canonical ops offloaded one by one", hi=1000)
    patterns: tuple[str, ...] = _R("names", ("conv2d_bias_relu", "conv2d_bias", "conv2d_relu",
                                             "dense_bias_relu", "dense_bias"),
                                   "composite patterns offloaded as one kernel", hi=1000)

    def _check(self) -> None:
        from ..workload.workload import OFFLOADABLE_OPS
        bad = [o for o in self.ops if o not in OFFLOADABLE_OPS]
        if bad:
            raise HardwareError(f"hardware.support.ops lists {', '.join(map(repr, bad[:5]))}, which the "
                                f"accelerator model cannot cost (unknown or host-only ops); offloadable ops: "
                                f"{', '.join(sorted(OFFLOADABLE_OPS))}")
        known = _pattern_names()
        bad = [p for p in self.patterns if p.removeprefix(f"{self.target}.") not in known]
        if bad:
            raise HardwareError(f"hardware.support.patterns lists {', '.join(map(repr, bad[:5]))}, which are not "
                                f"pattern names (<op>[_bias][_bn][_residual][_<activation>], e.g. conv2d_bias_relu; "
                                f"partition.patterns.pattern_names() lists them)")


@functools.cache
def _pattern_names() -> frozenset[str]:
    """partition.patterns.pattern_names(), built once: every sweep point checks its patterns."""
    from partition.patterns import pattern_names
    return frozenset(pattern_names())


# Tensor (data space) names of the multi-level model, as Timeloop's problem specs name them: a
# GEMM's A is Inputs, B Weights, C Outputs.
TENSORS = ("Weights", "Inputs", "Outputs")
MAX_LEVELS = 16
ARITHMETIC_NAME = "MAC"  # the array, as the hierarchy names it below the last level
BUFFERING_MODES = ("auto", "single", "double", "stream")  # sim.hw.hierarchy.BUFFERING_MODES, same order
NO_LIMIT = 1e12  # a bandwidth of 1e12 words/cycle: no throttling (as buffers.sram_bytes_per_cycle)


@dataclass(frozen=True)
class LevelConfig(_Section):
    """One storage level of a multi-level hierarchy (``[[levels]]`` in a file, outermost first:
    DRAM, then on-chip buffers, then per-PE scratchpads; the MACs of ``array`` sit below the
    last). Capacities, bandwidths, energies, leakage and area are per instance; ``fanout_x`` x
    ``fanout_y`` instances of the next level (or MACs) hang below each instance, so a level's
    instance count is the product of the fan-outs above it."""
    _name = "levels[]"
    name: str = _R("symbol", "level", "level name (unique; Timeloop's component name)", hi=64)
    capacity_words: int = _int(0, 0, 2**50, "words", "words one instance holds; 0 = unbounded (outermost only)")
    word_bits: int = _int(8, 1, 64, "bits", "bits per word")
    block_size: int = _int(1, 1, 65536, "words", "words per access (one vector access costs one energy)")
    cluster_size: int = _int(1, 1, 65536, "instances", "instances sharing one access (Timeloop cluster_size)")
    fanout_x: int = _int(1, 0, 4096, "instances", "instances of the level below per instance, mesh X; "
                         "0 = what the array's cols leave (one level per axis at most)")
    fanout_y: int = _int(1, 0, 4096, "instances", "instances of the level below per instance, mesh Y; "
                         "0 = what the array's rows leave (one level per axis at most)")
    read_bandwidth: float = _num(NO_LIMIT, 1e-3, NO_LIMIT, "words/cycle",
                                 "read bandwidth per instance (1e12: no limit)")
    write_bandwidth: float = _num(NO_LIMIT, 1e-3, NO_LIMIT, "words/cycle",
                                  "write (fill + update) bandwidth per instance (1e12: no limit)")
    read_pj: float = _num(0.0, *_PJ, "one read access of block_size words")
    fill_pj: float = _num(0.0, *_PJ, "one fill access from the level above (Timeloop/Accelergy 'write')")
    update_pj: float = _num(0.0, *_PJ, "one update access (partial sums written back from below)")
    leak_pj_per_cycle: float = _num(0.0, *_PJ, "leakage of one instance per cycle")
    area_um2: float = _num(0.0, 0.0, 1e10, "um2", "fixed area of one instance (ports, address generation)")
    area_um2_per_word: float = _num(0.0, 0.0, 1e6, "um2", "storage area per word of capacity, so a swept "
                                    "capacity moves the area")
    keeps: tuple[str, ...] = _R("names", TENSORS, "tensors the level may hold (" + ", ".join(TENSORS)
                                + "); the others bypass it; [] = a network level that holds nothing, costs "
                                  "nothing and only fans out (Timeloop's container mesh)", hi=len(TENSORS))
    buffering: str = _R("buffering", "auto", "how the tile-level walk refills the level, per tensor it keeps: "
                        "single (a load waits for the compute on the tile it replaces), double (the next tile "
                        "loads while the compute uses this one; capacity_words is one buffer's), stream (a "
                        "FIFO / line buffer: refills flow in while the compute consumes them), auto (double "
                        "when the capacity holds two of every tile, else single)", choices=BUFFERING_MODES)

    def instance_area_um2(self) -> float:
        """One instance: its fixed area plus its capacity at ``area_um2_per_word``."""
        return self.area_um2 + self.area_um2_per_word * self.capacity_words

    def _where(self) -> str:
        n = self.name  # a level is named by its name once that name is itself valid
        return f"levels.{n}" if isinstance(n, str) and _NAME_CHARS.match(n) and len(n) <= 64 else self._name

    def _check(self) -> None:
        bad = [t for t in self.keeps if t not in TENSORS]
        if bad:
            raise HardwareError(f"hardware.levels.{self.name}.keeps lists {', '.join(map(repr, bad))}; "
                                f"tensors are {', '.join(TENSORS)}")
        from .hierarchy import parse_buffering
        stray = [t for t in parse_buffering(self.buffering) if t and t not in self.keeps]
        if stray:  # a mode for a tensor the level never holds is a mistake, not a no-op
            raise HardwareError(f"hardware.levels.{self.name}.buffering names {', '.join(stray)}, which the level "
                                f"does not keep (keeps: {', '.join(self.keeps) or 'nothing'})")


def _check_levels(levels: tuple[LevelConfig, ...], array: ArrayConfig) -> None:
    """Rules that span the levels: distinct names, the outermost keeps every tensor and is the
    only unbounded one, and the fan-outs reach exactly the MACs of ``array``."""
    if not levels:
        return
    if len(levels) > MAX_LEVELS:
        raise HardwareError(f"hardware.levels must list at most {MAX_LEVELS} levels, got {len(levels)}")
    names = [lv.name for lv in levels]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise HardwareError(f"hardware.levels names {dup[0]!r} twice; level names must be unique")
    if ARITHMETIC_NAME in names:
        raise HardwareError(f"hardware.levels: the name {ARITHMETIC_NAME!r} is the array's (the MACs below the "
                            f"last level); name the level otherwise")
    top = levels[0]
    if set(top.keeps) != set(TENSORS):
        raise HardwareError(f"hardware.levels.{top.name} (the outermost level) must keep every tensor "
                            f"({', '.join(TENSORS)}): it is the backing store")
    for lv in levels[1:]:
        if lv.capacity_words == 0 and lv.keeps:  # keeps = []: a network level, holds nothing
            raise HardwareError(f"hardware.levels.{lv.name}.capacity_words must be > 0: only the outermost "
                                f"level ({top.name}) may be unbounded")
    for axis, size, what in (("fanout_x", array.cols, "array.cols"), ("fanout_y", array.rows, "array.rows")):
        given = [getattr(lv, axis) for lv in levels]
        auto = [lv.name for lv in levels if getattr(lv, axis) == 0]
        if len(auto) > 1:
            raise HardwareError(f"hardware.levels: {auto[0]} and {auto[1]} both set {axis} = 0 (what the array "
                                f"leaves); at most one level per axis may")
        fixed = math.prod(g for g in given if g)
        if size % fixed if auto else size != fixed:
            raise HardwareError(f"hardware.levels: the {axis} of the levels multiply to {fixed}, which "
                                f"{'does not divide' if auto else 'is not'} {what} = {size} (the MACs below "
                                f"the last level)")


def resolved_fanouts(levels: tuple[LevelConfig, ...], array: ArrayConfig) -> tuple[tuple[int, int], ...]:
    """Each level's (X, Y) fan-out with the 0 ('what the array leaves') filled in."""
    out = []
    for axis, size in (("fanout_x", array.cols), ("fanout_y", array.rows)):
        fixed = math.prod(getattr(lv, axis) for lv in levels if getattr(lv, axis))
        out.append([getattr(lv, axis) or size // fixed for lv in levels])
    return tuple(zip(*out))


@dataclass(frozen=True)
class KernelsConfig(_Section):
    """How kernels run on a many-core machine (a GPU) beyond its peaks: thread blocks in waves over
    the cores, the MAC rate of each operand width, and what the machine sustains of its peak rates
    per kernel class, fitted on measured kernels that ``source`` names. Optional: absent from files
    and fingerprints at its default, where nothing below changes a cost."""
    _name = "kernels"
    waves: bool = _R("bool", False, "tiles run in waves over the cores: a GEMM dim that a fan-out does not "
                     "divide is padded up to a multiple of it (the idle tail of the last wave) rather than "
                     "mapped on fewer cores")
    rate_1byte: float = _num(1.0, 1e-3, 64.0, "x", "MAC rate of 1-byte operands (int8/fp8) relative to "
                             "array.mac_dtype's")
    rate_2byte: float = _num(1.0, 1e-3, 64.0, "x", "MAC rate of 2-byte operands (fp16/bf16) relative to "
                             "array.mac_dtype's")
    rate_4byte: float = _num(1.0, 1e-3, 64.0, "x", "MAC rate of 4-byte operands (fp32/tf32) relative to "
                             "array.mac_dtype's")
    dtypes: tuple[str, ...] = _R("names", (), "operand types the MAC units also compute besides "
                                 "array.mac_dtype (a GPU's fp8 tensor cores), each at its width's rate_*; "
                                 "left out of files and fingerprints when empty", hi=len(MAC_DTYPES),
                                 choices=MAC_DTYPES)
    mac_fraction: float = _num(1.0, 1e-3, 1.0, "", "fraction of the peak MAC rate a large GEMM sustains")
    dram_fraction: float = _num(1.0, 1e-3, 1.0, "", "fraction of the peak DRAM bandwidth a streaming "
                                "kernel sustains")
    softmax_dram_fraction: float = _num(0.0, 0.0, 1.0, "", "the same for softmax kernels (row max, sum of "
                                        "exponentials, normalise); 0 = dram_fraction")
    mac_overhead_s: float = _num(0.0, 0.0, 1e-2, "s", "fixed time of a MAC kernel beyond its launch "
                                 "(a GEMM library's set-up)")
    source: str = _R("str", "", "the measured data the fractions and overheads were fitted on", hi=2000)
    classes: tuple = _R("classes", (), "per vector kernel kind measured on its own: the fraction of the DRAM "
                        "bandwidth it sustains (before softmax_dram_fraction and dram_fraction) and the fixed "
                        "time of one framework call of it beyond the launch (a compiled op's dispatch), which "
                        "every such kernel simulate, tune and run cost pays and a serving pass, one resident "
                        "program, does not; "
                        "left out of files and fingerprints when empty", hi=len(VECTOR_KERNEL_KINDS),
                        choices=VECTOR_KERNEL_KINDS)

    @property
    def active(self) -> bool:
        return self != KernelsConfig()

    def rate(self, dtype_bytes: int) -> float:
        """The MAC rate of operands of ``dtype_bytes`` bytes relative to ``array.mac_dtype``'s."""
        return {1: self.rate_1byte, 2: self.rate_2byte}.get(dtype_bytes, self.rate_4byte)

    def _class(self, kind: str) -> tuple | None:
        return next((e for e in self.classes if e[0] == kind), None)

    def dram_fraction_of(self, kind: str) -> float:
        """The sustained DRAM fraction of a vector kernel of workload ``kind``: its ``classes``
        entry, else ``softmax_dram_fraction`` for softmax, else ``dram_fraction``."""
        c = self._class(kind)
        if c is not None:
            return float(c[1])
        return self.softmax_dram_fraction if kind == "softmax" and self.softmax_dram_fraction else self.dram_fraction

    def call_overhead_of(self, kind: str) -> float:
        """The fixed time of one call of a vector kernel of workload ``kind`` (its ``classes``
        entry; 0 without one)."""
        c = self._class(kind)
        return float(c[2]) if c is not None else 0.0


_SECTIONS: dict[str, type] = {
    "array": ArrayConfig, "buffers": BufferConfig, "dram": DramConfig, "vector": VectorConfig,
    "clock": ClockConfig, "host": HostConfig, "link": LinkConfig, "energy": EnergyConfig,
    "area": AreaConfig, "support": SupportConfig, "memory": MemoryConfig, "interconnect": InterconnectConfig,
    "kernels": KernelsConfig, "mapspace": MapspaceConfig,
}
# Sections added after fingerprints were in use: left out of ``to_dict`` (so of files and
# fingerprints) while they hold their defaults, and optional in a complete (packed) config.
_OPTIONAL_SECTIONS = ("memory", "interconnect", "kernels", "mapspace")
# Fields added to a section (or to a level) after its configs were in use: left out of files and
# fingerprints at their defaults (so those configs keep their fingerprints; ``_file_dict``) and
# optional in a complete config.
_LATE_FIELDS: dict[str, tuple[str, ...]] = {"kernels": ("dtypes", "classes"), "levels": ("buffering",),
                                             "interconnect": ("protocols",)}


@dataclass(frozen=True)
class HardwareConfig:
    name: str = "custom"
    description: str = ""
    array: ArrayConfig = field(default_factory=ArrayConfig)
    buffers: BufferConfig = field(default_factory=BufferConfig)
    dram: DramConfig = field(default_factory=DramConfig)
    vector: VectorConfig = field(default_factory=VectorConfig)
    clock: ClockConfig = field(default_factory=ClockConfig)
    host: HostConfig = field(default_factory=HostConfig)
    link: LinkConfig = field(default_factory=LinkConfig)
    energy: EnergyConfig = field(default_factory=EnergyConfig)
    area: AreaConfig = field(default_factory=AreaConfig)
    support: SupportConfig = field(default_factory=SupportConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    interconnect: InterconnectConfig = field(default_factory=InterconnectConfig)
    kernels: KernelsConfig = field(default_factory=KernelsConfig)
    mapspace: MapspaceConfig = field(default_factory=MapspaceConfig)
    # The multi-level hierarchy, outermost first; () = today's one-buffer machine (DRAM ->
    # buffers -> array), costed exactly as before (sim.hw.config_hierarchy derives its hierarchy).
    levels: tuple[LevelConfig, ...] = ()

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            _fail("name", "a non-empty string", self.name)
        _NAME_RULE.check("name", self.name)
        _DESCRIPTION_RULE.check("description", self.description)
        for sec, cls in _SECTIONS.items():
            if not isinstance(getattr(self, sec), cls):
                _fail(sec, f"a {cls.__name__}", getattr(self, sec))
        object.__setattr__(self, "levels", tuple(self.levels))
        if not all(isinstance(lv, LevelConfig) for lv in self.levels):
            _fail("levels", "a list of LevelConfig", self.levels)
        _check_levels(self.levels, self.array)

    # ------------------------------------------------------------------ derived figures
    @property
    def pes(self) -> int:
        return self.array.rows * self.array.cols

    @property
    def clock_hz(self) -> float:
        return self.clock.freq_mhz * 1e6

    @property
    def multilevel(self) -> bool:
        """Whether MAC kernels are costed on an explicit storage hierarchy (``levels``)."""
        return bool(self.levels)

    def level_instances(self) -> tuple[int, ...]:
        """Instances of each level, outermost first: the product of the fan-outs above it."""
        out, n = [], 1
        for fx, fy in resolved_fanouts(self.levels, self.array):
            out.append(n)
            n *= fx * fy
        return tuple(out)

    def area_mm2(self) -> float:
        """PEs + storage + vector lanes + fixed. With ``levels``, the storage is every level's
        instances at its per-instance area (the buffers then only stage vector ops and share the
        global buffer's area); without, the buffers at ``sram_mm2_per_kib``."""
        a = self.area
        if self.levels:
            storage = sum(n * lv.instance_area_um2() for n, lv in zip(self.level_instances(), self.levels)) * 1e-6
        else:
            storage = self.buffers.total_bytes / 1024 * a.sram_mm2_per_kib
        return self.pes * a.pe_mm2 + storage + self.vector.lanes * a.vector_lane_mm2 + a.fixed_mm2

    def peak_macs_per_s(self) -> float:
        return self.pes * self.clock_hz

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self, *, every_section: bool = False) -> dict[str, Any]:
        """The tree as a file holds it; optional sections at their defaults are left out unless
        ``every_section`` (``hw show`` prints them all, so a user sees what can be stated)."""
        d: dict[str, Any] = {"name": self.name, "description": self.description}
        for sec in _SECTIONS:
            v = getattr(self, sec)
            if every_section or sec not in _OPTIONAL_SECTIONS or v != _SECTIONS[sec]():
                d[sec] = _section_dict(v) if every_section else _file_dict(v, sec)
        if self.levels:  # absent when empty: one-buffer configs keep their fingerprints
            d["levels"] = [_file_dict(lv, "levels") for lv in self.levels]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base: "HardwareConfig | None" = None, *,
                  complete: bool = False) -> "HardwareConfig":
        """Build from nested mappings; sections and fields left out keep ``base``'s values (or the
        defaults). Unknown sections or fields are errors (a typo must not be silently ignored).
        ``base`` in ``d`` names a preset (or a file, relative to the working folder). With
        ``complete``, every section and field must be given (a packed plan's hardware: an empty
        or partial object must not silently become the defaults)."""
        if not isinstance(d, Mapping):
            raise HardwareError(f"hardware config must be a table of sections, got {type(d).__name__}")
        d = dict(d)
        for derived in _DERIVED_KEYS:  # printed by `hw show --json`; recomputed, never trusted
            d.pop(derived, None)
        if "base" in d:
            base = _load(_base_ref(d.pop("base"), "hardware.base"), None, ())
        start = (base or cls()).to_dict()
        start.setdefault("levels", [])
        for sec in _OPTIONAL_SECTIONS:
            start.setdefault(sec, _section_dict(_SECTIONS[sec]()))
        for key, val in d.items():
            if key in ("name", "description"):
                start[key] = val
            elif key == "levels":  # a list replaces the base's levels whole (lists do not merge)
                start[key] = _levels_from(val)
            elif key in _SECTIONS:
                if not isinstance(val, Mapping):
                    raise HardwareError(f"hardware.{key} must be a table, got {_show(val)}")
                known = {f.name for f in fields(_SECTIONS[key])}
                for k, v in val.items():
                    if k not in known:
                        raise HardwareError(f"hardware.{key}.{_key(k)} is not a known field "
                                            f"(known: {', '.join(sorted(known))})")
                    start[key][k] = v
            else:
                raise HardwareError(f"hardware.{_key(key)} is not a known section "
                                    f"(known: name, description, base, {', '.join(_SECTIONS)}, levels)")
        if complete:  # after the unknown-key checks: a typo is the likelier fault, so it is named first
            missing = [k for k in ("name", *_SECTIONS) if k not in d and k not in _OPTIONAL_SECTIONS]
            missing += [f"{sec}.{f.name}" for sec, scls in _SECTIONS.items() if sec in d
                        for f in fields(scls) if f.name not in d[sec] and f.name not in _LATE_FIELDS.get(sec, ())]
            if missing:
                raise HardwareError(f"hardware config is incomplete: {', '.join(missing[:6])}"
                                    f"{', ...' if len(missing) > 6 else ''} missing")
        kwargs: dict[str, Any] = {"name": start["name"], "description": start["description"]}
        for sec, scls in _SECTIONS.items():
            kwargs[sec] = scls(**start[sec])
        kwargs["levels"] = tuple(LevelConfig(**lv) for lv in start["levels"])
        return cls(**kwargs)

    def fingerprint(self) -> str:
        d = self.to_dict()
        d.pop("name")
        d.pop("description")
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def with_overrides(self, changes: Mapping[str, Any]) -> "HardwareConfig":
        """A copy with dotted-path changes, e.g. ``{"array.rows": 64, "dram.bytes_per_cycle": 16}``;
        a level's field is ``levels.<level name>.<field>`` (``{"levels.glb.capacity_words": 65536}``)."""
        nested: dict[str, Any] = {}
        levels = [_section_dict(lv) for lv in self.levels]
        by_name = {lv["name"]: lv for lv in levels}
        for path, v in changes.items():
            parts = path.split(".") if isinstance(path, str) else [path]
            if parts[0] == "levels" and len(parts) > 3:  # a level name may hold dots: the field is last
                parts = ["levels", ".".join(parts[1:-1]), parts[-1]]
            if len(parts) == 1 and parts[0] in ("name", "description"):
                nested[parts[0]] = v
            elif len(parts) == 3 and parts[0] == "levels":
                lv = by_name.get(parts[1])
                if lv is None:
                    raise HardwareError(f"override '{path}': {self.name} has no level named {_key(parts[1])} "
                                        f"(levels: {', '.join(by_name) or 'none'})")
                if parts[2] not in lv:
                    raise HardwareError(f"hardware.levels.{parts[1]}.{_key(parts[2])} is not a known field "
                                        f"(known: {', '.join(sorted(lv))})")
                lv[parts[2]] = v
                nested["levels"] = levels
            elif len(parts) == 2 and parts[0] != "levels":
                nested.setdefault(parts[0], {})[parts[1]] = v
            else:
                raise HardwareError(f"override '{_key(path)}' must look like section.field (e.g. array.rows) "
                                    f"or levels.<level>.field")
        return HardwareConfig.from_dict(nested, base=self)

    def replace(self, **changes: Any) -> "HardwareConfig":
        """``replace(array=..., name=...)`` with whole sections, or ``replace(array_rows=64)`` with
        section_field keywords."""
        flat: dict[str, Any] = {}
        for k, v in changes.items():
            if k in ("name", "description") or k in _SECTIONS:
                if k in _SECTIONS and isinstance(v, _SECTIONS[k]):
                    v = {f.name: getattr(v, f.name) for f in fields(v)}
                    flat.update({f"{k}.{kk}": vv for kk, vv in v.items()})
                elif k in _SECTIONS and isinstance(v, Mapping):
                    flat.update({f"{k}.{kk}": vv for kk, vv in v.items()})
                else:
                    flat[k] = v
            else:
                sec, _, fld = k.partition("_")
                if sec not in _SECTIONS or not fld:
                    raise HardwareError(f"replace() got unknown field '{k}'")
                flat[f"{sec}.{fld}"] = v
        return self.with_overrides(flat)

    def save(self, path: str | Path) -> None:
        p = Path(path)
        d = self.to_dict()
        suffix = p.suffix.lower()
        if suffix == ".toml":
            import tomli_w
            p.write_text(tomli_w.dumps(d))
        elif suffix in (".yaml", ".yml"):
            import yaml
            p.write_text(yaml.safe_dump(d, sort_keys=False))
        elif suffix == ".json":
            p.write_text(json.dumps(d, indent=2) + "\n")
        else:
            raise HardwareError(f"cannot save hardware config as '{p.suffix}': use .toml, .yaml or .json")

    @classmethod
    def load(cls, path_or_name: str | Path) -> "HardwareConfig":
        return load_hw(path_or_name)

    def partition_target(self):
        """The partition target (op predicate + pattern table) this accelerator offloads. Any
        float model runs on it (the array computes in ``array.mac_dtype`` whatever the model's
        float width); integer tensors (indices, shapes, masks) stay on the host."""
        from partition.targets import build_target  # lazy: partition never imports sim
        return build_target(self.support.target, self.support.ops, self.support.patterns,
                            dtypes=FLOAT_DTYPES)


def _plain(v: Any) -> Any:
    return [_plain(x) for x in v] if isinstance(v, tuple) else v


def _section_dict(sec: Any) -> dict[str, Any]:
    return {f.name: _plain(getattr(sec, f.name)) for f in fields(sec)}


def _file_dict(sec: Any, kind: str) -> dict[str, Any]:
    """A section or level as files and fingerprints hold it: the fields added after configs were
    in use (``_LATE_FIELDS[kind]``) only when they differ from their defaults, so every config
    written before a field existed keeps its fingerprint."""
    late = _LATE_FIELDS.get(kind, ())
    d = _section_dict(sec)
    for f in fields(sec):
        if f.name in late and getattr(sec, f.name) == f.default:
            del d[f.name]
    return d


def _levels_from(val: Any) -> list[dict[str, Any]]:
    """``levels`` from a file: a list of tables, each with known fields only."""
    if not isinstance(val, (list, tuple)) or not all(isinstance(x, Mapping) for x in val):
        raise HardwareError(f"hardware.levels must be a list of tables ([[levels]] in TOML), got {_show(val)}")
    known = {f.name for f in fields(LevelConfig)}
    out = []
    for i, lv in enumerate(val):
        where = f"levels.{_key(lv['name'])}" if isinstance(lv.get("name"), str) else f"levels[{i}]"
        for k in lv:
            if k not in known:
                raise HardwareError(f"hardware.{where}.{_key(k)} is not a known field "
                                    f"(known: {', '.join(sorted(known))})")
        out.append(dict(lv))
    return out


_DERIVED_KEYS = ("fingerprint", "area_mm2")
FLOAT_DTYPES = ("float32", "float16", "float64")
_NAME_RULE = Rule("str", hi=200)
_DESCRIPTION_RULE = Rule("str", hi=2000)
MAX_BASE_DEPTH = 16  # files chained by `base`; a longer chain is a mistake, not a design


def field_rules() -> list[tuple[str, Rule, str]]:
    """(dotted field, rule, doc) for every field of every section: what ``hw show`` and the docs
    print beside each value."""
    return [(f"{sec}.{f.name}", f.metadata["rule"], f.metadata["doc"])
            for sec, scls in _SECTIONS.items() for f in fields(scls)]


def level_rules() -> list[tuple[str, Rule, str]]:
    """(field, rule, doc) for every field of a storage level (``[[levels]]``); an override names
    one as ``levels.<level name>.<field>``."""
    return [(f.name, f.metadata["rule"], f.metadata["doc"]) for f in fields(LevelConfig)]


def load_hw(path_or_name: "str | Path | HardwareConfig") -> HardwareConfig:
    """A preset by name (see ``sim.hw.presets.names()``) or a TOML/YAML/JSON file. A file may start
    from ``base = "<preset or file>"`` (a file relative to the one naming it), chained up to
    ``MAX_BASE_DEPTH`` files; a file reached twice is a cycle, refused with one line naming it."""
    if isinstance(path_or_name, HardwareConfig):
        return path_or_name
    return _load(str(path_or_name), None, ())


def _base_ref(ref: Any, where: str) -> str:
    if not isinstance(ref, str) or not ref:
        raise HardwareError(f"{where} must name a preset or a hardware file, got {_show(ref)}")
    return ref


def _load(ref: str, root: Path | None, chain: tuple[Path, ...]) -> HardwareConfig:
    """``ref`` (a preset name or a path, relative to ``root`` when given) as a config; ``chain``
    holds the files whose ``base`` led here."""
    from . import presets
    via = f" (base of {chain[-1]})" if chain else ""
    if not ref.isprintable():  # NUL and control characters: no file has such a name worth opening
        raise HardwareError(f"no hardware preset or file named {_show(ref)}{via}")
    if ref in presets.names():
        p = presets.path(ref)
    else:
        p = Path(ref)
        if root is not None and not p.is_absolute():
            p = root / p
        if not p.exists():
            raise HardwareError(f"no hardware preset or file named '{ref}'{via} "
                                f"(presets: {', '.join(presets.names())})")
    key = p.resolve()
    if key in chain:
        cycle = [*chain[chain.index(key):], key]
        raise HardwareError(f"hardware config base cycle: {' -> '.join(_short_path(c) for c in cycle)}")
    if len(chain) >= MAX_BASE_DEPTH:
        raise HardwareError(f"hardware config {p}: more than {MAX_BASE_DEPTH} files chained by 'base'")
    data = read_config(p, "hardware config", HardwareError)
    if not data:
        # An empty file would silently become the built-in defaults: a wrong answer, not a config.
        raise HardwareError(f"hardware config {p} is empty: give its sections, or base = \"<preset>\" "
                            f"and the fields that differ")
    if not isinstance(data, Mapping):
        raise HardwareError(f"hardware config {p} must be a table of sections, got {type(data).__name__}")
    data = dict(data)
    base = None
    if "base" in data:
        base = _load(_base_ref(data.pop("base"), f"hardware config {p}: base"), key.parent, (*chain, key))
    try:
        return _own_name(HardwareConfig.from_dict(data, base=base), base, data, p)
    except HardwareError as e:
        if chain or ref not in presets.names():
            raise HardwareError(f"hardware config {p}: {e}") from None
        raise


def _own_name(hw: HardwareConfig, base: HardwareConfig | None, data: Mapping[str, Any], p: Path) -> HardwareConfig:
    """A file that starts from a base and changes it describes another machine: unless it names
    (describes) itself, it is named after the file and its description says what it changed
    (shortened: a changed list of a thousand ops must not make the description itself invalid)."""
    if base is None or ("name" in data and "description" in data):
        return hw
    old, new = base.to_dict(), hw.to_dict()
    changed = [_clip(f"{sec}.{k} = {v!r}", 60) for sec in _SECTIONS for k, v in new.get(sec, {}).items()
               if old.get(sec, {}).get(k) != v]
    if old.get("levels") != new.get("levels"):
        changed.append(f"levels {' > '.join(lv.name for lv in hw.levels) or 'removed'}")
    if not changed:
        return hw
    stem = "".join(c if c.isprintable() else "_" for c in p.stem)[:_NAME_RULE.hi] or "custom"
    return dataclasses.replace(hw, name=str(data.get("name", stem)), description=str(data.get(
        "description", _clip(f"{base.name} with {', '.join(changed)}", 1000))))


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n - 3] + "..."


def _short_path(p: Path) -> str:
    """``p`` relative to the working folder when it lies below it (messages stay short)."""
    try:
        return str(p.relative_to(Path.cwd()))
    except ValueError:
        return str(p)
