"""Timeloop mapping directives <-> ``sim.mapping.mapping.Mapping``.

A directive is ``{target, type, factors, permutation, split, keep, bypass}`` with type
``temporal``, ``spatial`` or one of ``bypass``/``datatype``/``dataspace`` (keep/bypass).
Factors are written ``R=3 P=16``, ``R=3,P=16``, ``R3 P16`` or as a list; a dim left out has
factor 1. Permutations are innermost first (Timeloop's order; ``sim.mapping.mapping`` keeps outermost
first); a spatial permutation's first ``split`` dims go along X, the rest along Y (no split: all
X). A target is a level name or a container name whose spatial level is ``inter_<name>_spatial``.
A data space neither kept nor bypassed is kept (timeloop-model's default); spatial-only levels
keep nothing.
"""
from __future__ import annotations

import re
from typing import Any

from ..hw.hierarchy import Hierarchy
from ..mapping.mapping import LevelMapping, Mapping
from ..workload.nest import Nest
from .errors import TimeloopError

KEEP_TYPES = ("bypass", "datatype", "dataspace")


def _dims_in(text: str, dims: tuple[str, ...], where: str) -> list[str]:
    """A permutation string split into dims, longest names first."""
    out, i = [], 0
    names = sorted(dims, key=len, reverse=True)
    text = text.replace(" ", "").replace(",", "")
    while i < len(text):
        for d in names:
            if text.startswith(d, i):
                out.append(d)
                i += len(d)
                break
        else:
            raise TimeloopError(f"mapping {where}: permutation {text!r} names an unknown dimension at {text[i:i+8]!r}")
    return out


def _factors(v: Any, dims: tuple[str, ...], where: str) -> dict[str, int]:
    if v is None:
        return {}
    if isinstance(v, dict):
        items = [f"{k}={x}" for k, x in v.items()]
    elif isinstance(v, list):
        items = [str(x) for x in v]
    elif isinstance(v, str):
        items = [t for t in re.split(r"[\s,]+", v) if t]
    else:
        raise TimeloopError(f"mapping {where}: factors must be text or a list, got {str(v)[:40]!r}")
    out: dict[str, int] = {}
    for tok in items:
        tok = tok.strip()
        if "=" in tok:
            name, _, val = tok.partition("=")
        else:
            m = [d for d in sorted(dims, key=len, reverse=True) if tok.startswith(d) and tok[len(d):].isdigit()]
            if not m:
                raise TimeloopError(f"mapping {where}: cannot read factor {tok[:40]!r}")
            name, val = m[0], tok[len(m[0]):]
        name, val = name.strip(), val.strip()
        if name not in dims:
            raise TimeloopError(f"mapping {where}: factor of unknown dimension {name[:40]!r}")
        if not val.isdigit() or int(val) < 1:
            raise TimeloopError(f"mapping {where}: factor {tok[:40]!r} must be a whole number >= 1")
        if name in out:
            raise TimeloopError(f"mapping {where}: dimension {name} has two factors")
        out[name] = int(val)
    return out


def _perm(v: Any, dims: tuple[str, ...], where: str) -> list[str]:
    if v is None:
        return []
    if isinstance(v, list):
        bad = [x for x in v if not isinstance(x, str) or x not in dims]
        if bad:
            raise TimeloopError(f"mapping {where}: permutation names unknown dimension {str(bad[0])[:40]!r}")
        return [str(x) for x in v]
    if isinstance(v, str):
        return _dims_in(v, dims, where)
    raise TimeloopError(f"mapping {where}: permutation must be text or a list")


def _names(v: Any, spaces: set[str], where: str) -> frozenset[str]:
    if v is None:
        return frozenset()
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise TimeloopError(f"mapping {where}: keep/bypass must be a list of data-space names")
    bad = [x for x in v if x not in spaces]
    if bad:
        raise TimeloopError(f"mapping {where}: unknown data space {str(bad[0])[:40]!r}")
    return frozenset(v)


def read_mapping(directives: Any, hier: Hierarchy, nest: Nest) -> Mapping:
    if isinstance(directives, dict) and "targets" in directives:
        directives = directives["targets"]
    if not isinstance(directives, list):
        raise TimeloopError("mapping must be a list of directives")
    dims = nest.dim_names
    spaces = {ds.name for ds in nest.data_spaces}
    names = set(hier.names)
    per: dict[str, dict[str, Any]] = {n: {} for n in hier.names}
    for dvt in directives:
        if not isinstance(dvt, dict):
            raise TimeloopError("mapping: each directive must be a mapping")
        target = dvt.get("target")
        if not isinstance(target, str):
            raise TimeloopError(f"mapping: a directive needs a target level name, got {str(target)[:40]!r}")
        if target not in names:
            alt = f"inter_{target}_spatial"
            if alt not in names:
                raise TimeloopError(f"mapping: target {str(target)[:40]!r} is not a level of the architecture "
                                    f"({', '.join(hier.names)})")
            target = alt
        typ = dvt.get("type", "temporal")
        if not isinstance(typ, str):
            raise TimeloopError(f"mapping: directive type at {target} must be text, got {str(typ)[:40]!r}")
        kind = "keep" if typ in KEEP_TYPES else typ
        if kind not in ("temporal", "spatial", "keep"):
            raise TimeloopError(f"mapping: directive type {str(typ)[:40]!r} at {target} is not supported")
        unknown = set(dvt) - {"target", "type", "factors", "permutation", "split", "keep", "bypass"}
        if unknown:
            raise TimeloopError(f"mapping: directive at {target} has unsupported key {sorted(unknown)[0]!r}")
        if kind in per[target]:
            raise TimeloopError(f"mapping: two {kind} directives for {target}")
        per[target][kind] = dvt
    levels = []
    for lv in hier.levels:
        d = per[lv.name]
        where = lv.name
        t = d.get("temporal", {})
        temporal = _factors(t.get("factors"), dims, where)
        perm = _perm(t.get("permutation"), dims, where)
        s = d.get("spatial", {})
        sf = _factors(s.get("factors"), dims, where)
        sperm = _perm(s.get("permutation"), dims, where)
        sperm += [x for x in dims if x not in sperm]
        split = s.get("split")
        if split is None:
            split = len(sperm)
        if isinstance(split, bool) or not isinstance(split, int) or split < 0:
            raise TimeloopError(f"mapping {where}: split must be a whole number, got {str(split)[:40]!r}")
        xs = [x for x in sperm[:split] if sf.get(x, 1) > 1]
        ys = [x for x in sperm[split:] if sf.get(x, 1) > 1]
        k = d.get("keep", {})
        keep = _names(k.get("keep"), spaces, where)
        byp = _names(k.get("bypass"), spaces, where)
        if keep & byp:
            raise TimeloopError(f"mapping {where}: {sorted(keep & byp)[0]} is both kept and bypassed")
        if lv.spatial_only:
            keep_set = frozenset()
        else:
            keep_set = frozenset(spaces - byp)
        levels.append(LevelMapping(
            temporal={x: temporal.get(x, 1) for x in dims},
            permutation=tuple(reversed(perm)),
            spatial_x=[(x, sf[x]) for x in reversed(xs)],
            spatial_y=[(x, sf[x]) for x in reversed(ys)],
            keep=keep_set, bypass=byp if not lv.spatial_only else frozenset()))
    return Mapping(tuple(levels))


def mapping_directives(hier: Hierarchy, nest: Nest, mapping: Mapping) -> list[dict[str, Any]]:
    """The mapping as Timeloop directives (permutations innermost first, every dim listed)."""
    dims = nest.dim_names
    spaces = [ds.name for ds in nest.data_spaces]
    out: list[dict[str, Any]] = []

    def perm_text(seq: list[str]) -> Any:
        return "".join(seq) if all(len(x) == 1 for x in dims) else list(seq)

    for lv, lm in zip(hier.levels, mapping.levels):
        order = list(lm.loop_order(dims))                      # outermost first, factor > 1
        inner_first = list(reversed(order)) + [x for x in dims if x not in order]
        out.append({"target": lv.name, "type": "temporal",
                    "factors": " ".join(f"{x}={lm.t(x)}" for x in dims),
                    "permutation": perm_text(inner_first)})
        xs = [x for x, f in reversed(lm.spatial_x) if f > 1]
        ys = [x for x, f in reversed(lm.spatial_y) if f > 1]
        both = [x for x in xs if x in ys]
        if both:   # a spatial directive lists each dim once, before or after `split`
            raise TimeloopError(f"mapping splits dim {both[0]} over both X and Y at level {lv.name}, which a "
                                f"Timeloop mapping file cannot express (one spatial factor per dim and level)")
        if xs or ys:
            rest = [x for x in dims if x not in xs and x not in ys]
            out.append({"target": lv.name, "type": "spatial",
                        "factors": " ".join(f"{x}={lm.s(x)}" for x in dims),
                        "permutation": perm_text(xs + ys + rest), "split": len(xs)})
        kept = [s for s in spaces if mapping.keeps(hier, hier.index(lv.name), s)]
        out.append({"target": lv.name, "type": "bypass", "keep": kept,
                    "bypass": [s for s in spaces if s not in kept]})
    return out


def mapping_yaml(hier: Hierarchy, nest: Nest, mapping: Mapping) -> str:
    """A Timeloop mapping file (``mapping:`` list) for ``mapping``; reads back to the same value."""
    import yaml
    return yaml.safe_dump({"mapping": mapping_directives(hier, nest, mapping)}, sort_keys=False)
