"""The sweep spec: a TOML or YAML file naming a base accelerator, the axes to vary, how to sample
them, constraints, the models to tune on every point and the objective. See docs/SWEEPS.md.

``load_spec(path)`` (or ``parse_spec(mapping, where=...)``) validates everything once and returns a
frozen ``SweepSpec``; a bad key raises ``SpecError`` with one line naming it, e.g.
``sweep spec s.toml: axes."array.rows"[2]: hardware.array.rows must be > 0, got 0``.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from sim import HardwareConfig, HardwareError, load_hw
from sim.graph.serving import DECODE_KERNELS
from sim.hw.configfile import read_config

OBJECTIVES = ("latency", "energy", "edp")
SAMPLINGS = ("grid", "random")
# Derived figures a constraint can bound, with how each is computed from a HardwareConfig.
METRICS = {
    "area_mm2": lambda hw: hw.area_mm2(),
    "pes": lambda hw: float(hw.pes),
    "sram_kib": lambda hw: hw.buffers.total_bytes / 1024,
    "peak_gmacs": lambda hw: hw.peak_macs_per_s() / 1e9,
    "dram_gb_per_s": lambda hw: hw.dram.bytes_per_cycle * hw.clock_hz / 1e9,
}
_TOP_KEYS = ("name", "description", "base", "objective", "seed", "trials", "share_cost_model",
             "warm_start", "sampling", "axes", "constraints", "models")
MAX_AXIS_VALUES = 10_000   # values of one axis; each is checked against the base when the spec loads
MAX_TOTAL_AXIS_VALUES = 20_000  # values of all axes together (a few seconds of checks)
MAX_GRID = 10**9           # grid points (a larger grid is a typo); only random sampling or --limit
                           # visit a grid above MAX_POINTS, and never all of it
MAX_POINTS = 100_000       # points one sweep may want evaluated: a grid or a random count
MAX_TRIALS = 100_000       # measurements per model per point


class SpecError(ValueError):
    """A sweep spec that cannot be used; the message names the key."""


@dataclass(frozen=True)
class Axis:
    """One swept dimension. ``paths`` has several entries for tied fields (``"array.rows,array.cols"``
    moves rows and cols together); every value is a tuple with one entry per path."""
    key: str
    paths: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class Constraint:
    metric: str
    bound: str  # 'max' or 'min'
    limit: float

    def ok(self, hw: HardwareConfig) -> bool:
        v = METRICS[self.metric](hw)
        return v <= self.limit if self.bound == "max" else v >= self.limit

    @property
    def key(self) -> str:
        return f"{self.bound}_{self.metric}"


@dataclass(frozen=True)
class ModelSpec:
    """A built-in model (``name``), an ONNX file (``onnx``, resolved against the spec's folder) or
    one serving point of a decoder LLM (``llm``: ``accel-tune llm``'s settings)."""
    label: str
    name: str | None
    onnx: str | None
    trials: int
    # Static shapes of ONNX inputs with dynamic dimensions: ((input name, shape), ...).
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    llm: "LLMPointSpec | None" = None


@dataclass(frozen=True)
class LLMPointSpec:
    """One ``accel-tune llm`` point: the decoder (built-in name or config.json, resolved) and the
    serving settings."""
    model: str
    batch: int
    input_len: int
    output_len: int
    tp: int = 1
    pp: int = 1
    dtype: str = "fp16"
    kv_dtype: str = ""
    decode_attention: str = "auto"

    def to_dict(self) -> dict[str, Any]:
        d = {f: getattr(self, f) for f in ("model", "batch", "input_len", "output_len", "tp", "pp", "dtype",
                                            "kv_dtype")}
        if self.decode_attention != "auto":  # a late field: the settings of older sweeps keep their key
            d["decode_attention"] = self.decode_attention
        return d


LLM_KEYS = ("llm", "batch", "input_len", "output_len", "tp", "pp", "dtype", "kv_dtype", "decode_attention",
            "trials", "label")
LLM_DTYPES = ("fp32", "fp16", "bf16", "fp8", "int8", "int4")
MAX_LLM_POINTS = 10_000     # serving points one [[models]] entry expands to


def _ints(where: str, v: Any, lo: int, hi: int) -> list[int]:
    vals = v if isinstance(v, list) else [v]
    if not vals:
        raise SpecError(f"{where} must be an integer or a non-empty list of integers")
    out = [_int(f"{where}[{i}]" if isinstance(v, list) else where, x, lo, hi) for i, x in enumerate(vals)]
    if len(set(out)) != len(out):
        raise SpecError(f"{where} lists a value twice")
    return out


def _parse_llm(where: str, m: Mapping[str, Any], root: Path) -> list[ModelSpec]:
    """``[[models]]`` with ``llm = "<built-in, config.json or FILE.onnx>"``: ``batch``, ``input_len`` and
    ``output_len`` take one integer or a list (their product gives one model entry per point,
    labelled ``<label>.b<B>.i<I>.o<O>``); ``tp``, ``pp``, ``dtype``, ``kv_dtype``,
    ``decode_attention`` (auto, grouped or per-head) one value;
    ``trials`` (default 0: default schedules) tunes each point's distinct MAC kernels first."""
    from partition.llm.config import resolve
    _unknown(f"{where}.", m, LLM_KEYS)
    model = _str(f"{where}.llm", m["llm"])
    onnx_file = model.lower().endswith(".onnx")
    if model.endswith(".json") or onnx_file:
        p = Path(model)
        model = str((p if p.is_absolute() else root / p).resolve())
    try:
        if onnx_file:  # an ONNX decoder with its KV cache: read once here so a bad file is one line now
            from partition.llm.source import source_for
            source_for(model).check_split(int(m.get("tp", 1)) if isinstance(m.get("tp", 1), int) else 1,
                                          int(m.get("pp", 1)) if isinstance(m.get("pp", 1), int) else 1)
        else:
            resolve(model)
    except ValueError as e:  # ConfigError, SplitError, an import error: one line
        raise SpecError(f"{where}.llm: {e}") from None
    for k in ("batch", "input_len", "output_len"):
        if k not in m:
            raise SpecError(f"{where}: an llm entry needs '{k}'")
    bs = _ints(f"{where}.batch", m["batch"], 1, 1 << 20)
    ins = _ints(f"{where}.input_len", m["input_len"], 1, 1 << 24)
    outs = _ints(f"{where}.output_len", m["output_len"], 1, 1 << 24)
    if len(bs) * len(ins) * len(outs) > MAX_LLM_POINTS:
        raise SpecError(f"{where}: {len(bs) * len(ins) * len(outs):,} serving points; at most {MAX_LLM_POINTS:,}")
    tp = _int(f"{where}.tp", m.get("tp", 1), 1, 65536)
    pp = _int(f"{where}.pp", m.get("pp", 1), 1, 65536)
    dtypes = {}
    for k, default in (("dtype", "fp16"), ("kv_dtype", "")):
        v = m.get(k, default)
        if v != "" and v not in LLM_DTYPES:
            raise SpecError(f"{where}.{k} must be one of {', '.join(LLM_DTYPES)}, got {_show(v)}")
        dtypes[k] = v
    dec = m.get("decode_attention", "auto")
    if dec not in DECODE_KERNELS:
        raise SpecError(f"{where}.decode_attention must be one of {', '.join(DECODE_KERNELS)}, got {_show(dec)}")
    trials = _int(f"{where}.trials", m.get("trials", 0), 0, MAX_TRIALS)
    default = Path(model).parent.name if model.endswith(".json") else Path(model).stem if onnx_file else model
    base = _label(f"{where}.label", m.get("label", default))
    return [ModelSpec(_label(f"{where}.label", f"{base}.b{b}.i{i}.o{o}"), None, None, trials,
                      llm=LLMPointSpec(model, b, i, o, tp, pp, dtypes["dtype"], dtypes["kv_dtype"], dec))
            for b in bs for i in ins for o in outs]


@dataclass(frozen=True)
class SweepSpec:
    name: str
    description: str
    base: str
    base_hw: HardwareConfig = field(repr=False)
    axes: tuple[Axis, ...]
    sampling: str
    count: int | None
    seed: int
    constraints: tuple[Constraint, ...]
    models: tuple[ModelSpec, ...]
    objective: str
    # A point's cost model starts from the one the previous point of its chain ended with
    # (tuner.sweep.runner); False: every point starts untrained.
    share_cost_model: bool = True
    # Seed each point's search with the best schedules of the nearest earlier point of its chain.
    warm_start: bool = True

    @property
    def grid_size(self) -> int:
        return math.prod(len(a.values) for a in self.axes)

    def to_dict(self) -> dict[str, Any]:
        """The resolved spec (ranges expanded, paths absolute, base config included), for writing
        beside the results."""
        return {
            "name": self.name, "description": self.description, "base": self.base,
            "base_hw": self.base_hw.to_dict(), "objective": self.objective, "seed": self.seed,
            "share_cost_model": self.share_cost_model, "warm_start": self.warm_start,
            "sampling": {"method": self.sampling, "count": self.count},
            "axes": {a.key: [list(v) if len(a.paths) > 1 else v[0] for v in a.values] for a in self.axes},
            "constraints": {c.key: c.limit for c in self.constraints},
            "models": [{"label": m.label, "name": m.name, "onnx": m.onnx, "trials": m.trials,
                        **({"input_shapes": {k: list(v) for k, v in m.input_shapes}} if m.input_shapes else {}),
                        **({"llm": m.llm.to_dict()} if m.llm else {})}
                       for m in self.models],
        }


# ---------------------------------------------------------------------------------------- helpers
def _int(where: str, v: Any, lo: int, hi: int = 2**63 - 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise SpecError(f"{where} must be an integer from {lo:,} to {hi:,}, got {_show(v)}")
    return v


def _num(where: str, v: Any) -> float:
    # abs(int) first: math.isfinite(10**400) would raise OverflowError instead of saying no
    if (isinstance(v, bool) or not isinstance(v, (int, float))
            or (isinstance(v, int) and abs(v) > 2**63) or not math.isfinite(v)):
        raise SpecError(f"{where} must be a finite number, got {_show(v)}")
    return v


def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


def _str(where: str, v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise SpecError(f"{where} must be a non-empty string, got {_show(v)}")
    return v


def _text(where: str, v: Any, max_len: int = 100) -> str:
    """A name that is printed in tables and becomes part of hardware names: printable, short."""
    v = _str(where, v)
    if not v.isprintable() or len(v) > max_len:
        raise SpecError(f"{where} must be printable text of at most {max_len} characters, got {_show(v)}")
    return v


def _label(where: str, v: Any) -> str:
    """A model label names files (records/<point>.<label>.jsonl): no path separators, no leading dot."""
    v = _text(where, v)
    if "/" in v or "\\" in v or v.startswith("."):
        raise SpecError(f"{where} must not contain '/' or '\\' or start with '.', got {_show(v)}")
    return v


def _table(where: str, v: Any) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise SpecError(f"{where} must be a table, got {_show(v)}")
    return v


def _unknown(where: str, d: Mapping[str, Any], known: tuple[str, ...]) -> None:
    for k in d:
        if k not in known:
            raise SpecError(f"{where}{k} is not a known key (known: {', '.join(known)})")


def _expand_range(where: str, r: Mapping[str, Any]) -> list[Any]:
    """``{start, stop, step}`` (arithmetic) or ``{start, stop, factor}`` (geometric); stop is
    included when it lands on the sequence. The count is computed before any value is made, so a
    range of a billion values is refused in one line, not built."""
    _unknown(f"{where}.", r, ("start", "stop", "step", "factor"))
    for k in ("start", "stop"):
        if k not in r:
            raise SpecError(f"{where} is a range and needs '{k}' (and 'step' or 'factor')")
    start, stop = _num(f"{where}.start", r["start"]), _num(f"{where}.stop", r["stop"])
    if ("step" in r) == ("factor" in r):
        raise SpecError(f"{where} needs exactly one of 'step' or 'factor'")
    integral = all(isinstance(r[k], int) for k in r)
    out: list[Any] = []
    if "step" in r:
        step = _num(f"{where}.step", r["step"])
        if step <= 0 or stop < start:
            raise SpecError(f"{where} needs step > 0 and stop >= start")
        span = (stop - start) / step  # inf when the difference overflows
        if not span < MAX_AXIS_VALUES:
            _too_many(where)
        out = [start + i * step for i in range(math.floor(span + 1e-9) + 1)]
    else:
        factor = _num(f"{where}.factor", r["factor"])
        if factor <= 1 or start <= 0 or stop < start:
            raise SpecError(f"{where} needs factor > 1, start > 0 and stop >= start")
        v = start
        while v <= stop * (1 + 1e-9) and math.isfinite(v):  # repeated products, as specs have always been expanded
            if len(out) >= MAX_AXIS_VALUES:
                _too_many(where)
            out.append(v)
            v = v * factor
    return [int(round(x)) if integral else float(x) for x in out]


def _too_many(where: str) -> None:
    raise SpecError(f"{where} expands to more than {MAX_AXIS_VALUES:,} values; use a coarser step or factor")


def _parse_axis(key: str, raw: Any, base: HardwareConfig, budget: int = 10**9) -> Axis:
    where = f'axes."{key}"'
    paths = tuple(p.strip() for p in key.split(","))
    for p in paths:
        level = p.startswith("levels.") and p.count(".") >= 2 and all(p[len("levels."):].rpartition("."))
        if not level and (p.count(".") != 1 or not all(p.split("."))):
            raise SpecError(f"{where}: '{p}' must look like section.field (e.g. array.rows) or "
                            f"levels.<level>.field (e.g. levels.shared_glb.capacity_words)")
    if len(set(paths)) != len(paths):
        raise SpecError(f"{where} names a field twice")
    if isinstance(raw, Mapping):
        vals = _expand_range(where, raw)
    elif isinstance(raw, list):
        vals = list(raw)
    else:
        raise SpecError(f"{where} must be a list of values or a range table {{start, stop, step|factor}}, "
                        f"got {_show(raw)}")
    if not vals:
        raise SpecError(f"{where} is empty")
    if len(vals) > budget:
        raise SpecError(f"{where}: the axes list more than {MAX_TOTAL_AXIS_VALUES:,} values in all; "
                        f"use coarser ranges")
    tuples: list[tuple[Any, ...]] = []
    for i, v in enumerate(vals):
        if len(paths) > 1 and isinstance(v, list):
            if len(v) != len(paths):
                raise SpecError(f"{where}[{i}] must have {len(paths)} entries, one per field, got {_show(v)}")
            t = tuple(v)
        else:
            t = (v,) * len(paths)
        # Each value alone must make a valid machine: the error names the axis and the value's index.
        try:
            base.with_overrides(dict(zip(paths, (tuple(x) if isinstance(x, list) else x for x in t))))
        except HardwareError as e:
            raise SpecError(f"{where}[{i}]: {e}") from None
        tuples.append(tuple(tuple(x) if isinstance(x, list) else x for x in t))
    if len(set(map(_canon, tuples))) != len(tuples):
        raise SpecError(f"{where} lists a value twice")
    return Axis(key, paths, tuple(tuples))


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=list)


def _input_shapes(where: str, raw: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
    out = []
    for name, dims in _table(where, raw).items():
        if (not isinstance(dims, list) or not dims
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims)):
            raise SpecError(f"{where}.{name} must be a list of positive integers, got {_show(dims)}")
        out.append((str(name), tuple(dims)))
    return tuple(out)


def _check_onnx(where: str, path: Path, shapes: tuple[tuple[str, tuple[int, ...]], ...]) -> None:
    """Import the file once now, so that a malformed file or a missing input shape fails the spec
    with one line instead of every sweep point."""
    import warnings

    from partition import load_onnx
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the default batch of 1 is reported by the points' import
            load_onnx(str(path), input_shapes=dict(shapes))
    except ValueError as e:
        raise SpecError(f"{where}.onnx: {e}") from None


def _parse_models(raw: Any, default_trials: int, root: Path) -> tuple[ModelSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise SpecError("models must be a non-empty list of tables ([[models]] with name = ..., onnx = ... or llm = ...)")
    from partition import models as builtin
    out: list[ModelSpec] = []
    for i, m in enumerate(raw):
        where = f"models[{i}]"
        if isinstance(m, str):
            m = {"name": m}
        m = _table(where, m)
        if "llm" in m:
            out.extend(_parse_llm(where, m, root))
            continue
        _unknown(f"{where}.", m, ("name", "onnx", "trials", "label", "input_shapes", "llm"))
        if ("name" in m) == ("onnx" in m):
            raise SpecError(f"{where} needs exactly one of 'name' (a built-in model) or 'onnx' (a file)")
        trials = _int(f"{where}.trials", m.get("trials", default_trials), 0, MAX_TRIALS)
        if "name" in m:
            name = _str(f"{where}.name", m["name"])
            try:
                builtin.info(name)
            except ValueError as e:
                raise SpecError(f"{where}.name: {e}") from None
            out.append(ModelSpec(_label(f"{where}.label", m.get("label", name)), name, None, trials))
        else:
            p = Path(_str(f"{where}.onnx", m["onnx"]))
            p = p if p.is_absolute() else (root / p)
            if not p.is_file():
                raise SpecError(f"{where}.onnx: no file {p}")
            shapes = _input_shapes(f"{where}.input_shapes", m.get("input_shapes", {}))
            _check_onnx(where, p, shapes)
            out.append(ModelSpec(_label(f"{where}.label", m.get("label", p.stem)), None, str(p.resolve()), trials,
                                 shapes))
        if "name" in m and "input_shapes" in m:
            raise SpecError(f"{where}.input_shapes applies to 'onnx' models; built-in models have fixed shapes")
    labels = [m.label for m in out]
    for lab in labels:
        if labels.count(lab) > 1:
            raise SpecError(f"models: label '{lab}' appears twice (give one a 'label')")
    return tuple(out)


def _parse_constraints(raw: Any) -> tuple[Constraint, ...]:
    d = _table("constraints", raw)
    out = []
    known = tuple(f"{b}_{m}" for m in METRICS for b in ("max", "min"))
    for k, v in d.items():
        bound, _, metric = k.partition("_")
        if bound not in ("max", "min") or metric not in METRICS:
            raise SpecError(f"constraints.{k} is not a known key (known: {', '.join(known)})")
        out.append(Constraint(metric, bound, float(_num(f"constraints.{k}", v))))
    return tuple(out)


def _flatten_axes(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``[axes.array] rows = [...]`` and ``"array.rows" = [...]`` both give the key array.rows."""
    flat: dict[str, Any] = {}
    for k, v in raw.items():
        if isinstance(v, Mapping) and "." not in k and "," not in k and not ({"start", "stop"} & set(v)):
            for kk, vv in v.items():
                flat[f"{k}.{kk}"] = vv
        else:
            flat[k] = v
    return flat


# ---------------------------------------------------------------------------------------- entry points
def parse_spec(d: Any, root: str | Path = ".") -> SweepSpec:
    """Validate a spec already read into a mapping; relative paths resolve against ``root``."""
    root = Path(root)
    d = _table("the spec", d)
    _unknown("", d, _TOP_KEYS)
    name = _text("name", d.get("name", "sweep"))
    description = d.get("description", "")
    if not isinstance(description, str):
        raise SpecError(f"description must be a string, got {_show(description)}")
    base = _str("base", d.get("base", ""))
    if not base.isprintable():
        raise SpecError(f"base must name a hardware preset or file, got {_show(base)}")
    base_path = root / base
    try:
        base_hw = load_hw(str(base_path) if base_path.is_file() else base)
    except HardwareError as e:
        raise SpecError(f"base: {e}") from None
    objective = d.get("objective", "latency")
    if objective not in OBJECTIVES:
        raise SpecError(f"objective must be one of {', '.join(OBJECTIVES)}, got {_show(objective)}")
    seed = _int("seed", d.get("seed", 0), 0)
    trials = _int("trials", d.get("trials", 64), 0, MAX_TRIALS)
    share = d.get("share_cost_model", True)
    if not isinstance(share, bool):
        raise SpecError(f"share_cost_model must be true or false, got {_show(share)}")
    warm_start = d.get("warm_start", True)
    if not isinstance(warm_start, bool):
        raise SpecError(f"warm_start must be true or false, got {_show(warm_start)}")

    samp = d.get("sampling", {"method": "grid"})
    if isinstance(samp, str):
        samp = {"method": samp}
    samp = _table("sampling", samp)
    _unknown("sampling.", samp, ("method", "count"))
    method = samp.get("method", "grid")
    if method not in SAMPLINGS:
        raise SpecError(f"sampling.method must be one of {', '.join(SAMPLINGS)}, got {_show(method)}")
    count = samp.get("count")
    if count is not None:
        count = _int("sampling.count", count, 1, MAX_POINTS)
    if method == "random" and count is None:
        raise SpecError("sampling.count is required with sampling.method = \"random\"")

    raw_axes = _flatten_axes(_table("axes", d.get("axes", {})))
    axes: tuple[Axis, ...] = ()
    for k, v in raw_axes.items():
        # Every value is checked against the base (about 0.1 ms each): bound them all, not each axis.
        budget = MAX_TOTAL_AXIS_VALUES - sum(len(a.values) for a in axes)
        axes += (_parse_axis(k, v, base_hw, budget),)
    seen: dict[str, str] = {}
    for a in axes:
        for p in a.paths:
            if p in seen:
                raise SpecError(f'axes."{a.key}" sets {p}, which axes."{seen[p]}" already sets')
            seen[p] = a.key
    size = math.prod(len(a.values) for a in axes)
    if size > MAX_GRID:
        raise SpecError(f"axes span {size:,} points (more than {MAX_GRID:,}); narrow an axis")
    if method == "grid" and count is not None and count < size:
        raise SpecError(f"sampling.count = {count} is below the grid's {size} points; "
                        f"use method = \"random\" to draw a subset")
    constraints = _parse_constraints(d.get("constraints", {}))
    models = _parse_models(d.get("models"), trials, root)
    return SweepSpec(name, description, base, base_hw, axes, method, count, seed, constraints, models,
                     objective, share, warm_start)


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a TOML (.toml) or YAML (.yaml/.yml) spec; JSON (.json) works too. The file
    is read as untrusted input (``sim.hw.configfile.read_config``: size cap, text only, no YAML
    aliases)."""
    p = Path(path)
    d = read_config(p, "sweep spec", SpecError)
    try:
        return parse_spec(d, root=p.resolve().parent)
    except SpecError as e:
        raise SpecError(f"sweep spec {p.name}: {e}") from None
