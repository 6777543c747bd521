"""The accelerator description: one frozen, validated configuration tree with units in field names.

``HardwareConfig`` groups: ``array`` (PE grid, dataflows, MAC word), ``buffers`` (per-operand SRAM
as SCALE-Sim has it, or one unified buffer), ``dram``, ``vector`` (the unit that runs
element-wise/pool/softmax/norm ops and fused epilogues), ``clock``, ``host`` and ``link`` models,
``energy`` and ``area`` coefficients, and ``support`` (the ops/patterns offloaded; it builds the
partition target). Every value is checked when the object is built; a bad one raises
``HardwareError`` with one line naming the dotted field and the rule broken.

Files (TOML, YAML or JSON) hold the same tree as nested tables. A file may start from a preset with
``base = "<preset name>"`` and override only what differs. ``fingerprint`` is the sha256 of the
canonical JSON of every field except ``name`` and ``description``, so two files describing the same
machine share tuning records.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

DATAFLOWS = ("ws", "os", "is")
MAC_DTYPES = ("int4", "int8", "int16", "fp8", "fp16", "bf16", "fp32")


class HardwareError(ValueError):
    """A hardware configuration value breaks a rule, or a config file cannot be read."""


def _fail(path: str, rule: str, value: Any) -> None:
    raise HardwareError(f"hardware.{path} must be {rule}, got {value!r}")


def _num(path: str, v: Any, *, gt: float | None = None, ge: float | None = None,
         integer: bool = False) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        _fail(path, "a number", v)
    if integer and not float(v).is_integer():
        _fail(path, "an integer", v)
    if gt is not None and not v > gt:
        _fail(path, f"> {gt:g}", v)
    if ge is not None and not v >= ge:
        _fail(path, f">= {ge:g}", v)


def _validate(obj: Any, prefix: str) -> None:
    """Check every field of a section against the rule in its metadata (``rule``: 'pos', 'nonneg',
    'pos_int', 'nonneg_int', 'bool', 'str', 'ops' or a tuple of allowed strings)."""
    for f in fields(obj):
        rule = f.metadata.get("rule")
        v = getattr(obj, f.name)
        path = f"{prefix}.{f.name}"
        if rule == "pos":
            _num(path, v, gt=0)
        elif rule == "nonneg":
            _num(path, v, ge=0)
        elif rule == "pos_int":
            _num(path, v, gt=0, integer=True)
        elif rule == "nonneg_int":
            _num(path, v, ge=0, integer=True)
        elif rule == "bool":
            if not isinstance(v, bool):
                _fail(path, "true or false", v)
        elif rule == "str":
            if not isinstance(v, str):
                _fail(path, "a string", v)
        elif rule == "ops":
            if not isinstance(v, tuple) or not all(isinstance(x, str) and x for x in v):
                _fail(path, "a list of non-empty names", v)
            if len(set(v)) != len(v):
                _fail(path, "a list without duplicates", list(v))
        elif isinstance(rule, tuple):
            if v not in rule:
                _fail(path, f"one of {', '.join(rule)}", v)


def _tupled(obj: Any, numbers: bool) -> None:
    """Lists from files become tuples so the config stays hashable; with ``numbers``, 64.0 for an
    integer field becomes 64 and 11 for a real field 11.0, so the fingerprint does not depend on
    how a file spelled a number."""
    for f in fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, list):
            object.__setattr__(obj, f.name, tuple(v))
        elif not numbers:
            continue
        elif isinstance(v, int) and not isinstance(v, bool) and f.metadata.get("rule") in ("pos", "nonneg"):
            object.__setattr__(obj, f.name, float(v))
        elif (isinstance(v, float) and v.is_integer()
              and f.metadata.get("rule") in ("pos_int", "nonneg_int")):
            object.__setattr__(obj, f.name, int(v))


def _R(rule: Any, default: Any, doc: str = "") -> Any:
    return field(default=default, metadata={"rule": rule, "doc": doc})


class _Section:
    """Shared construction check of every config section; ``_name`` is its key in the tree."""
    _name = ""

    def __post_init__(self):
        _tupled(self, numbers=False)
        _validate(self, self._name)  # before numbers are normalised, so errors echo the input
        _tupled(self, numbers=True)
        self._check()

    def _check(self) -> None:
        """Rules that span fields (overridden where a section has them)."""


@dataclass(frozen=True)
class ArrayConfig(_Section):
    _name = "array"
    rows: int = _R("pos_int", 32, "PE rows (the dimension fed from the left edge)")
    cols: int = _R("pos_int", 32, "PE columns")
    dataflows: tuple[str, ...] = _R("ops", ("ws", "os", "is"), "dataflows the array supports")
    mac_dtype: str = _R(MAC_DTYPES, "int8", "MAC operand type")
    word_bytes: int = _R("pos_int", 1, "bytes per stored word (inputs, weights, outputs)")
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
    ifmap_bytes: int = _R("nonneg_int", 64 * 1024, "input-activation SRAM (0 with a unified buffer)")
    weight_bytes: int = _R("nonneg_int", 64 * 1024, "weight SRAM (0 with a unified buffer)")
    output_bytes: int = _R("nonneg_int", 64 * 1024, "output/accumulator SRAM (0 with a unified buffer)")
    unified_bytes: int = _R("nonneg_int", 0, "one buffer shared by all operands; 0 = per-operand buffers")
    sram_bytes_per_cycle: float = _R("pos", 1e12, "SRAM bandwidth to the array and vector unit")

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
    bytes_per_cycle: float = _R("pos", 30.0, "DRAM bandwidth shared by reads and writes (accelerator cycles)")
    latency_cycles: int = _R("nonneg_int", 1, "latency of one DMA transfer")


@dataclass(frozen=True)
class VectorConfig(_Section):
    _name = "vector"
    lanes: int = _R("pos_int", 32, "element operations per cycle")
    ops: tuple[str, ...] = _R("ops", ("relu", "add", "bias_add", "max_pool2d", "avg_pool2d",
                                      "global_avg_pool2d", "softmax", "layer_norm", "batch_norm"),
                              "ops the vector unit runs")
    special_op_cycles: float = _R("pos", 4.0, "cycles per element-lane for exp/erf/sqrt/div class ops")


@dataclass(frozen=True)
class ClockConfig(_Section):
    _name = "clock"
    freq_mhz: float = _R("pos", 1000.0, "accelerator clock")


@dataclass(frozen=True)
class HostConfig(_Section):
    _name = "host"
    peak_flops: float = _R("pos", 50e9, "host sustained FLOP/s")
    mem_bytes_per_s: float = _R("pos", 20e9, "host memory bandwidth")
    op_overhead_s: float = _R("nonneg", 2e-6, "fixed cost per host op (dispatch)")


@dataclass(frozen=True)
class LinkConfig(_Section):
    _name = "link"
    bytes_per_s: float = _R("pos", 12e9, "host<->accelerator bandwidth")
    launch_latency_s: float = _R("nonneg", 10e-6, "fixed cost per external-function call")


@dataclass(frozen=True)
class EnergyConfig(_Section):
    _name = "energy"
    mac_pj: float = _R("nonneg", 0.23, "one multiply-accumulate")
    reg_pj_per_byte: float = _R("nonneg", 0.03, "PE register access")
    sram_pj_per_byte: float = _R("nonneg", 1.25, "on-chip buffer access")
    dram_pj_per_byte: float = _R("nonneg", 80.0, "DRAM access")
    host_pj_per_flop: float = _R("nonneg", 20.0, "host CPU arithmetic, per FLOP (mobile-class fp32 "
                                 "core with SIMD: ~10-30 pJ; its memory traffic is dram_pj_per_byte)")
    link_pj_per_byte: float = _R("nonneg", 60.0, "host link transfer")
    vector_op_pj: float = _R("nonneg", 0.5, "one vector-unit element operation")
    leakage_mw_per_mm2: float = _R("nonneg", 0.1, "static power density")


@dataclass(frozen=True)
class AreaConfig(_Section):
    _name = "area"
    pe_mm2: float = _R("nonneg", 0.0012, "one PE (MAC + registers)")
    sram_mm2_per_kib: float = _R("nonneg", 0.004, "SRAM density")
    vector_lane_mm2: float = _R("nonneg", 0.002, "one vector lane")
    fixed_mm2: float = _R("nonneg", 5.0, "control, DMA, interconnect, I/O")


@dataclass(frozen=True)
class SupportConfig(_Section):
    _name = "support"
    target: str = _R("str", "npu", "partition target name (compiler name of external functions)")
    ops: tuple[str, ...] = _R("ops", ("conv2d", "dense", "matmul", "batch_matmul", "gemm"),
                              "canonical ops offloaded one by one")
    patterns: tuple[str, ...] = _R("ops", ("conv2d_bias_relu", "conv2d_bias", "conv2d_relu",
                                           "dense_bias_relu", "dense_bias"),
                                   "composite patterns offloaded as one kernel")

    def _check(self) -> None:
        if not self.target:
            _fail("support.target", "a non-empty name", self.target)
        from .workload import OFFLOADABLE_OPS
        bad = [o for o in self.ops if o not in OFFLOADABLE_OPS]
        if bad:
            raise HardwareError(f"hardware.support.ops lists {', '.join(map(repr, bad))}, which the accelerator "
                                f"model cannot cost (unknown or host-only ops); offloadable ops: "
                                f"{', '.join(sorted(OFFLOADABLE_OPS))}")


_SECTIONS: dict[str, type] = {
    "array": ArrayConfig, "buffers": BufferConfig, "dram": DramConfig, "vector": VectorConfig,
    "clock": ClockConfig, "host": HostConfig, "link": LinkConfig, "energy": EnergyConfig,
    "area": AreaConfig, "support": SupportConfig,
}


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

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            _fail("name", "a non-empty string", self.name)
        for sec, cls in _SECTIONS.items():
            if not isinstance(getattr(self, sec), cls):
                _fail(sec, f"a {cls.__name__}", getattr(self, sec))

    # ------------------------------------------------------------------ derived figures
    @property
    def pes(self) -> int:
        return self.array.rows * self.array.cols

    @property
    def clock_hz(self) -> float:
        return self.clock.freq_mhz * 1e6

    def area_mm2(self) -> float:
        a = self.area
        return (self.pes * a.pe_mm2 + self.buffers.total_bytes / 1024 * a.sram_mm2_per_kib
                + self.vector.lanes * a.vector_lane_mm2 + a.fixed_mm2)

    def peak_macs_per_s(self) -> float:
        return self.pes * self.clock_hz

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "description": self.description}
        for sec in _SECTIONS:
            d[sec] = {f.name: (list(v) if isinstance(v := getattr(getattr(self, sec), f.name), tuple) else v)
                      for f in fields(_SECTIONS[sec])}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base: "HardwareConfig | None" = None) -> "HardwareConfig":
        """Build from nested mappings; sections and fields left out keep ``base``'s values (or the
        defaults). Unknown sections or fields are errors (a typo must not be silently ignored)."""
        if not isinstance(d, Mapping):
            raise HardwareError(f"hardware config must be a table of sections, got {type(d).__name__}")
        d = dict(d)
        for derived in _DERIVED_KEYS:  # printed by `hw show --json`; recomputed, never trusted
            d.pop(derived, None)
        preset = d.pop("base", None)
        if preset is not None:
            base = load_hw(preset)
        start = (base or cls()).to_dict()
        for key, val in d.items():
            if key in ("name", "description"):
                start[key] = val
            elif key in _SECTIONS:
                if not isinstance(val, Mapping):
                    raise HardwareError(f"hardware.{key} must be a table, got {val!r}")
                known = {f.name for f in fields(_SECTIONS[key])}
                for k, v in val.items():
                    if k not in known:
                        raise HardwareError(f"hardware.{key}.{k} is not a known field "
                                            f"(known: {', '.join(sorted(known))})")
                    start[key][k] = v
            else:
                raise HardwareError(f"hardware.{key} is not a known section "
                                    f"(known: name, description, base, {', '.join(_SECTIONS)})")
        kwargs: dict[str, Any] = {"name": start["name"], "description": start["description"]}
        for sec, scls in _SECTIONS.items():
            kwargs[sec] = scls(**start[sec])
        return cls(**kwargs)

    def fingerprint(self) -> str:
        d = self.to_dict()
        d.pop("name")
        d.pop("description")
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def with_overrides(self, changes: Mapping[str, Any]) -> "HardwareConfig":
        """A copy with dotted-path changes, e.g. ``{"array.rows": 64, "dram.bytes_per_cycle": 16}``."""
        nested: dict[str, Any] = {}
        for path, v in changes.items():
            parts = path.split(".")
            if len(parts) == 1 and parts[0] in ("name", "description"):
                nested[parts[0]] = v
            elif len(parts) == 2:
                nested.setdefault(parts[0], {})[parts[1]] = v
            else:
                raise HardwareError(f"override '{path}' must look like section.field (e.g. array.rows)")
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


_DERIVED_KEYS = ("fingerprint", "area_mm2")
FLOAT_DTYPES = ("float32", "float16", "float64")


def _read_file(p: Path) -> dict[str, Any]:
    suffix = p.suffix.lower()
    try:
        text = p.read_text()
    except OSError as e:
        raise HardwareError(f"cannot read hardware config {p}: {e.strerror}") from None
    try:
        if suffix == ".toml":
            import tomllib
            return tomllib.loads(text)
        if suffix in (".yaml", ".yml"):
            import yaml
            return yaml.safe_load(text) or {}
        if suffix == ".json":
            return json.loads(text)
    except Exception as e:  # parse errors of three libraries, reported as one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise HardwareError(f"cannot parse hardware config {p}: {first}") from None
    raise HardwareError(f"hardware config {p} must end in .toml, .yaml, .yml or .json")


def load_hw(path_or_name: "str | Path | HardwareConfig") -> HardwareConfig:
    """A preset by name (see ``sim.presets.names()``) or a TOML/YAML/JSON file."""
    from . import presets
    if isinstance(path_or_name, HardwareConfig):
        return path_or_name
    s = str(path_or_name)
    if s in presets.names():
        return HardwareConfig.from_dict(_read_file(presets.path(s)))
    p = Path(s)
    if not p.exists():
        raise HardwareError(f"no hardware preset or file named '{s}' "
                            f"(presets: {', '.join(presets.names())})")
    data = _read_file(p)
    if not data:
        # An empty file would silently become the built-in defaults: a wrong answer, not a config.
        raise HardwareError(f"hardware config {p} is empty: give its sections, or base = \"<preset>\" "
                            f"and the fields that differ")
    return _own_name(HardwareConfig.from_dict(data), data, p)


def _own_name(hw: HardwareConfig, data: Mapping[str, Any], p: Path) -> HardwareConfig:
    """A file that starts from a base and changes it describes another machine: unless it names
    (describes) itself, it is named after the file and its description says what it changed."""
    if "base" not in data or ("name" in data and "description" in data):
        return hw
    base = HardwareConfig.from_dict({"base": data["base"]})
    old, new = base.to_dict(), hw.to_dict()
    changed = [f"{sec}.{k} = {v!r}" for sec in _SECTIONS for k, v in new[sec].items() if old[sec][k] != v]
    if not changed:
        return hw
    return dataclasses.replace(hw, name=str(data.get("name", p.stem)),
                               description=str(data.get("description", f"{base.name} with {', '.join(changed)}")))
