"""Timeloop's problem spec (``problem:`` with ``shape`` and ``instance``) -> ``sim.workload.nest.Nest``."""
from __future__ import annotations

from typing import Any

from ..workload.nest import DataSpace, Nest, NestError
from .errors import TimeloopError


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
        raise TimeloopError(f"problem: {where} must be an integer, got {str(v)[:40]!r}")
    return int(v)


def read_problem(doc: Any) -> Nest:
    if not isinstance(doc, dict) or "shape" not in doc or "instance" not in doc:
        raise TimeloopError("problem: needs 'shape' and 'instance'")
    shape, inst = doc["shape"], doc["instance"]
    if not isinstance(shape, dict) or not isinstance(inst, dict):
        raise TimeloopError("problem: 'shape' and 'instance' must be mappings")
    dims = shape.get("dimensions")
    if not isinstance(dims, list) or not dims or not all(isinstance(d, str) for d in dims):
        raise TimeloopError("problem: shape.dimensions must be a list of dimension names")
    coefs: dict[str, int] = {}
    for c in shape.get("coefficients") or []:
        if not isinstance(c, dict) or "name" not in c:
            raise TimeloopError("problem: each shape.coefficients entry needs a name")
        coefs[str(c["name"])] = _int(c.get("default", 1), f"coefficient {c['name']} default")
    for k, v in inst.items():
        if k == "densities":
            if v:
                raise TimeloopError("problem: instance.densities (sparse tensors) is not supported")
            continue
        if k in coefs:
            coefs[k] = _int(v, f"instance.{k}")
    bounds = []
    for d in dims:
        if d not in inst:
            raise TimeloopError(f"problem: instance gives no size for dimension {d}")
        bounds.append((d, _int(inst[d], f"instance.{d}")))
    spaces = []
    for ds in shape.get("data_spaces") or []:
        if not isinstance(ds, dict) or "name" not in ds or "projection" not in ds:
            raise TimeloopError("problem: each data space needs a name and a projection")
        name = str(ds["name"])
        proj = ds["projection"]
        if isinstance(proj, str):
            raise TimeloopError(f"problem: data space {name}: projection expressions as text are not supported")
        ranks = []
        for rank in proj:
            terms = []
            for term in rank:
                if not isinstance(term, list) or not 1 <= len(term) <= 2:
                    raise TimeloopError(f"problem: data space {name}: a projection term must be [dim] or "
                                        f"[dim, coefficient], got {str(term)[:40]}")
                dim = [t for t in term if t in dims]
                other = [t for t in term if t not in dims]
                if len(dim) != 1:
                    raise TimeloopError(f"problem: data space {name}: term {term} names no (or two) dimensions")
                if not other:
                    coef = 1
                elif isinstance(other[0], int) and not isinstance(other[0], bool):
                    coef = other[0]
                elif other[0] in coefs:
                    coef = coefs[other[0]]
                else:
                    raise TimeloopError(f"problem: data space {name}: unknown coefficient {str(other[0])[:40]!r}")
                terms.append((dim[0], coef))
            ranks.append(tuple(terms))
        try:
            spaces.append(DataSpace(name, tuple(ranks), bool(ds.get("read_write", False))))
        except NestError as e:
            raise TimeloopError(f"problem: {e}") from None
    try:
        return Nest(str(shape.get("name", "problem")), tuple(bounds), tuple(spaces))
    except NestError as e:
        raise TimeloopError(f"problem: {e}") from None
