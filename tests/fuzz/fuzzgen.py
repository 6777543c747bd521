"""Shared pieces of the fuzz families: a case description, config-file writers that can write any
value (also the invalid ones), and value generators at and beyond every range edge of the
hardware fields (taken from the fields' own Rule metadata, so a new field is fuzzed too)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

FORMATS = ("toml", "yaml", "json")


@dataclass(frozen=True)
class Case:
    """One fuzz case: ``argv`` for the CLI; ``expect`` 'ok', 'error' or 'any' (when only the code
    can tell, e.g. whether a valid machine fits a model's layers); ``check(outcome)`` asserts the
    numbers of an ok ending are sane."""
    label: str
    argv: list[str]
    expect: str = "any"
    check: Callable[[Any], None] | None = field(default=None, compare=False)


def dump(doc: Any, fmt: str) -> str:
    """``doc`` as TOML, YAML or JSON text; values TOML cannot hold (None, mixed arrays) fall back
    to JSON, so the caller must name the file by the format actually used (see ``write``)."""
    if fmt == "toml":
        import tomli_w
        try:
            return tomli_w.dumps(doc)
        except (TypeError, ValueError):
            return dump(doc, "json")
    if fmt == "yaml":
        return yaml.safe_dump(doc, sort_keys=False)
    return json.dumps(doc, allow_nan=True)


def write(path_stem: Path, doc: Any, fmt: str) -> Path:
    """``doc`` written as ``path_stem.<fmt>`` (``.json`` when TOML cannot hold it)."""
    text = dump(doc, fmt)
    if fmt == "toml" and text.lstrip().startswith("{"):
        fmt = "json"
    p = path_stem.with_suffix(f".{fmt}")
    p.write_text(text)
    return p


def choose(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


# ------------------------------------------------------------------------------------- numbers
def ok_value(rng: np.random.Generator, rule) -> Any:
    """A value inside ``rule``'s range: an edge, or drawn log-uniformly across it."""
    lo, hi = rule.lo, rule.hi
    pick = int(rng.integers(4))
    if pick == 0:
        v = lo
    elif pick == 1:
        v = hi
    else:
        a = max(lo, 1e-3 if rule.kind == "num" else 1)
        v = float(np.exp(rng.uniform(math.log(a), math.log(hi)))) if hi > a else a
        v = min(max(v, lo), hi)
    if rule.kind == "int":
        v = int(round(v))
        return float(v) if rng.random() < 0.15 else v  # 64.0 for an integer field is fine
    return float(v) if rng.random() < 0.8 or not float(v).is_integer() else int(v)


def bad_value(rng: np.random.Generator, rule) -> Any:
    """A value outside ``rule``'s range or of the wrong type."""
    lo, hi = rule.lo, rule.hi
    cands: list[Any] = [math.inf, -math.inf, math.nan, 10**30, -(10**30), 2**64, 10**400, "12", [1], True, None,
                        {"a": 1}]
    if rule.kind == "int":
        cands += [lo - 1, hi + 1, hi * 2**32, lo + 0.5, 2**32, 1e300]
    else:
        cands += [hi * 1.001 + 1e-9, 1e308, -1.0, 1e300 if hi < 1e300 else -1e300]
        cands += [lo / 2 if lo > 0 else -1e-300, 1e-300 if lo > 0 else -5e-324]
    return choose(rng, cands)


def in_range(rule, v: Any) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if isinstance(v, float) and (not math.isfinite(v) or (rule.kind == "int" and not v.is_integer())):
        return False
    return rule.lo <= v <= rule.hi


def finite(x: Any, positive: bool = False) -> bool:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return ok and (x > 0 if positive else x >= 0)
