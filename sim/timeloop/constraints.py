"""Timeloop's mapspace constraints and mapper settings, read into ``LevelConstraint`` values.

Sources, all in the merged input (files merged by top-level key, as Timeloop does):

- ``architecture_constraints`` / ``mapspace_constraints`` / ``mapspace`` / ``constraints``: a list
  of targets, or a mapping holding one under ``targets`` (or ``constraints``), as the Timeloop
  front end writes them into ``parsed-processed-input.yaml``;
- the v0.4 architecture tree (``architecture.nodes``): a component's ``constraints`` target the
  component; a container's ``spatial`` constraints target its fan-out level
  (``inter_<container>_spatial``).

Targets: ``type`` ``temporal`` / ``spatial`` (``factors``, ``permutation``, ``split``) and
``bypass`` / ``datatype`` / ``bypassing`` (``keep``, ``bypass``). Semantics follow Timeloop's
parser: ``factors`` is ``D=n`` terms (a string with any separators, or a list); ``D=0`` means the
whole dim and a factor above the dim is clamped to it; ``permutation`` is one letter per dim,
innermost first, and the loops it lists are the innermost; a spatial ``split`` sends the
permutation's first ``split`` dims along X and the rest along Y. In a v0.4 tree, a
``dataspace`` with ``keep`` and no ``bypass`` bypasses every other data space (what the front end
writes into the processed input). Other constraint kinds (max factors ``D<=n``, utilisation,
no-multicast, skews) are refused with one line naming them, never ignored.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping as TMapping

from ..mapping.mapspace import LevelConstraint, MapspaceError

_FACTOR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|=)?\s*(-?\d+)")
_TARGET_KEYS = {"target", "name", "type", "factors", "permutation", "split", "keep", "bypass", "attributes"}
_METRICS = {"delay": "delay", "cycles": "delay", "energy": "energy", "edp": "edp"}


def _letters(v: Any, where: str) -> tuple[str, ...]:
    if isinstance(v, (list, tuple)):
        if not all(isinstance(x, str) for x in v):
            raise MapspaceError(f"{where}: permutation entries must be dim names, got {str(v)[:60]!r}")
        out = [x.strip() for x in v]
    elif isinstance(v, str):
        out = [c for c in v if not c.isspace() and c != ","]
    else:
        raise MapspaceError(f"{where}: permutation must be a string or a list, got {v!r}")
    return tuple(out)


def parse_factors(v: Any, bounds: TMapping[str, int], where: str) -> tuple[tuple[str, int], ...]:
    text = " ".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v)
    out: dict[str, int] = {}
    for name, op, num in _FACTOR.findall(text):
        if op in ("<=", ">="):
            raise MapspaceError(f"{where}: factor bound {name}{op}{num} is not supported (only D=n factors)")
        if name not in bounds:
            raise MapspaceError(f"{where}: factors name dim {name!r}, not a dim of the problem "
                                f"({', '.join(bounds)})")
        n = int(num)
        if n < 0:
            raise MapspaceError(f"{where}: factor {name}={n} is negative")
        if name in out:
            raise MapspaceError(f"{where}: factor of {name} given twice")
        out[name] = bounds[name] if n == 0 or n > bounds[name] else n
    if not out and text.strip() and text.strip() not in ("[]", "None"):
        raise MapspaceError(f"{where}: cannot read factors {text!r} (expected D=n terms)")
    return tuple(out.items())


def _one(t: TMapping[str, Any], bounds: TMapping[str, int], dims: tuple[str, ...],
         tensors: tuple[str, ...]) -> LevelConstraint:
    if not isinstance(t, TMapping):
        raise MapspaceError(f"constraint target must be a mapping, got {t!r}")
    attrs = t.get("attributes") or {}
    if not isinstance(attrs, TMapping):
        raise MapspaceError(f"constraint attributes must be a mapping, got {str(attrs)[:60]!r}")
    body = {**attrs, **{k: v for k, v in t.items() if k != "attributes"}}
    level = body.get("target", body.get("name"))
    kind = body.get("type")
    if not isinstance(level, str) or not level:
        raise MapspaceError(f"constraint without a target level: {dict(t)!r}")
    where = f"constraint {kind} at {level}"
    unknown = sorted(set(body) - _TARGET_KEYS)
    if unknown:
        raise MapspaceError(f"{where}: unsupported key {unknown[0]!r}")
    if not isinstance(kind, str):
        raise MapspaceError(f"constraint at {level}: type must be temporal, spatial or bypass, got {kind!r}")
    if kind in ("temporal", "spatial"):
        factors = parse_factors(body["factors"], bounds, where) if body.get("factors") not in (None, "") else ()
        perm = _letters(body["permutation"], where) if body.get("permutation") not in (None, "") else ()
        bad = [d for d in perm if d not in dims]
        if bad:
            raise MapspaceError(f"{where}: permutation names dim {bad[0]!r}, not a dim of the problem")
        if kind == "temporal":
            if body.get("split") is not None:
                raise MapspaceError(f"{where}: split applies to spatial constraints only")
            return LevelConstraint(level, temporal=factors, permutation=perm)
        split = body.get("split")
        xs: tuple[str, ...] = ()
        ys: tuple[str, ...] = ()
        if split is not None:
            if not isinstance(split, int) or isinstance(split, bool) or split < 0:
                raise MapspaceError(f"{where}: split must be an integer >= 0, got {split!r}")
            xs, ys = perm[:split], perm[split:]
            if split <= len(perm):
                # unlisted dims come after the listed ones, hence after the split: along Y
                ys += tuple(d for d in dims if d not in perm)
        return LevelConstraint(level, spatial=factors, spatial_x=xs, spatial_y=ys)
    if kind in ("bypass", "datatype", "bypassing"):
        keep, byp = _names(body.get("keep"), where, "keep"), _names(body.get("bypass"), where, "bypass")
        for s in keep + byp:
            if s not in tensors:
                raise MapspaceError(f"{where}: names data space {s!r}, not one of {', '.join(tensors)}")
        return LevelConstraint(level, keep=keep, bypass=byp)
    raise MapspaceError(f"constraint type {kind!r} at {level} is not supported "
                        f"(supported: temporal, spatial, bypass)")


def _names(v: Any, where: str, what: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
        raise MapspaceError(f"{where}: {what} must be a list of data-space names, got {str(v)[:60]!r}")
    return tuple(v)


def _target_list(v: Any, where: str) -> list:
    if v is None:
        return []
    if isinstance(v, list):
        return v
    if isinstance(v, TMapping):
        for k in ("targets", "constraints"):
            if k in v and v[k] is not None:
                if not isinstance(v[k], list):
                    raise MapspaceError(f"{where}.{k} must be a list of constraint targets")
                return v[k]
        return []
    raise MapspaceError(f"{where} must be a list of constraint targets or hold one under 'targets'")


def _tree_constraints(nodes: Any, tensors: tuple[str, ...]) -> list[dict]:
    """Targets written per node in a v0.4 architecture tree."""
    out: list[dict] = []
    for node in nodes or []:
        if not isinstance(node, TMapping):
            continue
        if isinstance(node.get("nodes"), list):
            out += _tree_constraints(node["nodes"], tensors)
        c, name, tag = node.get("constraints"), node.get("name"), node.get("!")
        if not isinstance(c, TMapping) or not name or tag == "Nothing":
            continue
        container = tag == "Container" or (tag is None and "class" not in node)
        for kind in ("temporal", "spatial"):
            if isinstance(c.get(kind), TMapping):
                tgt = f"inter_{name}_spatial" if container and kind == "spatial" else name
                out.append({"target": tgt, "type": kind, **c[kind]})
        ds = c.get("dataspace")
        if isinstance(ds, TMapping):
            keep, byp = list(ds.get("keep") or []), ds.get("bypass")
            if byp is None and keep:
                byp = [t for t in tensors if t not in keep]   # the front end's reading of keep-only
            out.append({"target": name, "type": "bypass", "keep": keep, "bypass": list(byp or [])})
        extra = sorted(set(c) - {"temporal", "spatial", "dataspace"})
        if extra:
            raise MapspaceError(f"constraint {extra[0]!r} at {name} is not supported")
    return out


def read_constraints(doc: TMapping[str, Any], dims: Iterable[str], bounds: TMapping[str, int],
                     tensors: Iterable[str]) -> tuple[LevelConstraint, ...]:
    """Every constraint of a merged Timeloop input, as ``LevelConstraint`` values. Two constraints
    of one kind at one level are merged; giving the same factor, permutation or keep bit twice
    is an error (as in Timeloop)."""
    dims, tensors = tuple(dims), tuple(tensors)
    targets: list = []
    for key in ("architecture_constraints", "mapspace_constraints", "mapspace", "constraints"):
        targets += _target_list(doc.get(key), key)
    arch = doc.get("architecture")
    if isinstance(arch, TMapping) and isinstance(arch.get("nodes"), list):
        targets += _tree_constraints(arch["nodes"], tensors)
    merged: dict[str, dict[str, Any]] = {}
    for t in targets:
        c = _one(t, bounds, dims, tensors)
        m = merged.setdefault(c.level, {"temporal": {}, "spatial": {}, "permutation": (), "x": set(), "y": set(),
                                        "keep": set(), "bypass": set()})
        for kind, fs in (("temporal", c.temporal), ("spatial", c.spatial)):
            for d, f in fs:
                if d in m[kind]:
                    raise MapspaceError(f"constraint at {c.level}: {kind} factor of {d} given twice")
                m[kind][d] = f
        if c.permutation:
            if m["permutation"]:
                raise MapspaceError(f"constraint at {c.level}: permutation given twice")
            m["permutation"] = c.permutation
        m["x"] |= set(c.spatial_x)
        m["y"] |= set(c.spatial_y)
        both = (m["keep"] | set(c.keep)) & (m["bypass"] | set(c.bypass))
        if both:
            raise MapspaceError(f"constraint at {c.level}: {sorted(both)[0]} both kept and bypassed")
        m["keep"] |= set(c.keep)
        m["bypass"] |= set(c.bypass)
    return tuple(LevelConstraint(lv, tuple(m["temporal"].items()), tuple(m["spatial"].items()), m["permutation"],
                                 tuple(sorted(m["x"])), tuple(sorted(m["y"])), tuple(sorted(m["keep"])),
                                 tuple(sorted(m["bypass"])))
                 for lv, m in merged.items())


def mapper_metric(doc: TMapping[str, Any]) -> str:
    """The metric of the ``mapper`` section's ``optimization_metrics`` (its first entry; the
    rest only break ties, which the search does the same way): edp when there is none."""
    mapper = doc.get("mapper")
    if mapper is None:
        return "edp"
    if not isinstance(mapper, TMapping):
        raise MapspaceError("the mapper section must be a mapping")
    metrics = mapper.get("optimization_metrics") or mapper.get("optimization_metric") or []
    if isinstance(metrics, str):
        metrics = [metrics]
    if not metrics:
        return "edp"
    first = str(metrics[0])
    if first not in _METRICS:
        raise MapspaceError(f"mapper optimization metric {first!r} is not supported (delay, energy, edp)")
    return _METRICS[first]
