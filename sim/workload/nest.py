"""A kernel as a perfect loop nest with tensors reached through affine projections (Timeloop's
problem spec).

``Nest.dims`` are the loop dims with their bounds; each ``DataSpace`` is a tensor whose every
rank (dimension) is indexed by a sum of ``coefficient * dim`` terms, e.g. a convolution's input
width ``Wstride*P + Wdilation*R``. Exactly one data space is ``read_write`` (the output the MACs
accumulate into). One iteration of the full nest is one MAC.

A tile of a data space over a box of the iteration space (each dim spanning ``span[d]``
consecutive values) is the axis-aligned bounding box of the box's projection: rank extent =
``sum(coef * (span - 1)) + 1``, the same hyper-rectangle Timeloop uses (so a strided tile with
holes counts its holes, as Timeloop does).

Constructors: ``conv1d``, ``conv2d`` (grouped and depthwise through ``groups``), ``gemm``,
``batch_matmul``; ``nest_from_workload`` derives the nest of a ``sim.workload.workload.Workload``.
Data spaces are named as Timeloop's examples name them: Weights, Inputs, Outputs.
Padding is not part of a nest (Timeloop ignores it too): the input extent is
``stride*(P-1) + dilation*(R-1) + 1``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping


class NestError(ValueError):
    """A loop nest that is not well formed; one line naming the problem."""


def _check(cond: Any, msg: str) -> None:
    if not cond:
        raise NestError(msg)


Term = tuple[str, int]          # (dim, coefficient)
Rank = tuple[Term, ...]         # one tensor dimension: sum of terms


@dataclass(frozen=True)
class DataSpace:
    name: str
    projection: tuple[Rank, ...]
    read_write: bool = False

    def __post_init__(self):
        _check(isinstance(self.name, str) and self.name and self.name.isprintable(),
               f"data space name must be non-empty printable text, got {self.name!r}")
        ranks = []
        for rank in self.projection:
            terms = []
            for term in rank:
                _check(isinstance(term, (tuple, list)) and len(term) == 2,
                       f"data space {self.name}: a projection term must be (dim, coefficient), got {term!r}")
                dim, coef = term
                _check(isinstance(coef, int) and not isinstance(coef, bool) and coef >= 1,
                       f"data space {self.name}: coefficient of {dim} must be an integer >= 1, got {coef!r}")
                terms.append((str(dim), coef))
            _check(terms, f"data space {self.name}: a rank with no term")
            ranks.append(tuple(terms))
        _check(ranks, f"data space {self.name} has no rank")
        object.__setattr__(self, "projection", tuple(ranks))

    @cached_property
    def dims(self) -> frozenset[str]:
        """The dims that index this data space (a loop over any other dim reuses its tile)."""
        return frozenset(d for rank in self.projection for d, _ in rank)

    def extents(self, span: Mapping[str, int]) -> tuple[int, ...]:
        """Bounding-box extent of each rank over a box spanning ``span[d]`` values of each dim
        (a dim missing from ``span`` spans 1)."""
        return tuple(sum(c * (span.get(d, 1) - 1) for d, c in rank) + 1 for rank in self.projection)

    def tile_words(self, span: Mapping[str, int]) -> int:
        return math.prod(self.extents(span))


@dataclass(frozen=True)
class Nest:
    name: str
    dims: tuple[tuple[str, int], ...]
    data_spaces: tuple[DataSpace, ...]

    def __post_init__(self):
        object.__setattr__(self, "dims", tuple((str(d), b) for d, b in self.dims))
        object.__setattr__(self, "data_spaces", tuple(self.data_spaces))
        names = [d for d, _ in self.dims]
        _check(names, f"nest {self.name}: no dims")
        _check(len(set(names)) == len(names), f"nest {self.name}: a dim is named twice in {names}")
        for d, b in self.dims:
            _check(isinstance(b, int) and not isinstance(b, bool) and b >= 1,
                   f"nest {self.name}: dim {d} bound must be an integer >= 1, got {b!r}")
        ds_names = [ds.name for ds in self.data_spaces]
        _check(len(set(ds_names)) == len(ds_names), f"nest {self.name}: a data space is named twice in {ds_names}")
        for ds in self.data_spaces:
            _check(isinstance(ds, DataSpace), f"nest {self.name}: data spaces must be DataSpace values")
            unknown = sorted(ds.dims - set(names))
            _check(not unknown, f"nest {self.name}: data space {ds.name} uses unknown dim {unknown[0] if unknown else ''}")
        rw = [ds.name for ds in self.data_spaces if ds.read_write]
        _check(len(rw) == 1, f"nest {self.name}: exactly one data space must be read_write (the output), got {rw}")

    @cached_property
    def bounds(self) -> dict[str, int]:
        return dict(self.dims)

    @property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(d for d, _ in self.dims)

    @property
    def output(self) -> DataSpace:
        return next(ds for ds in self.data_spaces if ds.read_write)

    def data_space(self, name: str) -> DataSpace:
        for ds in self.data_spaces:
            if ds.name == name:
                return ds
        raise NestError(f"nest {self.name} has no data space {name!r} "
                        f"(it has {', '.join(d.name for d in self.data_spaces)})")

    @property
    def macs(self) -> int:
        return math.prod(self.bounds.values())

    def size(self, name: str) -> int:
        """Words of the whole tensor (its tile over the full iteration space)."""
        return self.data_space(name).tile_words(self.bounds)


# ---------------------------------------------------------------------------- constructors
def _ds(name: str, *ranks: Any, rw: bool = False) -> DataSpace:
    """Ranks given as 'D' or (('D', coef), ...)."""
    return DataSpace(name, tuple(((r, 1),) if isinstance(r, str) else tuple(r) for r in ranks), rw)


def conv1d(c: int, k: int, r: int, p: int, n: int = 1, stride: int = 1, dilation: int = 1,
           name: str = "conv1d") -> Nest:
    """``O[n,k,p] += W[k,c,r] * I[n,c, stride*p + dilation*r]`` (p = OUTPUT width)."""
    return Nest(name, (("N", n), ("C", c), ("K", k), ("R", r), ("P", p)), (
        _ds("Weights", "C", "K", "R"),
        _ds("Inputs", "N", "C", (("R", dilation), ("P", stride))),
        _ds("Outputs", "N", "K", "P", rw=True)))


def conv2d(c: int, m: int, r: int, s: int, p: int, q: int, n: int = 1, stride: Any = 1,
           dilation: Any = 1, groups: int = 1, name: str = "conv2d") -> Nest:
    """A 2-D convolution with OUTPUT height ``p`` x width ``q``, ``c`` input and ``m`` output
    channels in all, ``r`` x ``s`` kernel (r along height). ``groups`` > 1 adds a dim G and
    channels per group C = c/groups, M = m/groups (depthwise: groups = c = m). Each data space
    then has a G rank of its own, so a tile spanning part of the groups is exact."""
    sh, sw = (stride, stride) if isinstance(stride, int) else tuple(stride)
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else tuple(dilation)
    _check(groups >= 1 and c % groups == 0 and m % groups == 0,
           f"conv2d groups={groups} must divide c={c} and m={m}")
    g = ("G",) if groups > 1 else ()
    dims = (("G", groups),) if groups > 1 else ()
    dims += (("N", n), ("C", c // groups), ("M", m // groups), ("R", r), ("S", s), ("P", p), ("Q", q))
    return Nest(name, dims, (
        _ds("Weights", *g, "M", "C", "R", "S"),
        _ds("Inputs", "N", *g, "C", (("R", dh), ("P", sh)), (("S", dw), ("Q", sw))),
        _ds("Outputs", "N", *g, "M", "P", "Q", rw=True)))


def gemm(m: int, n: int, k: int, name: str = "gemm") -> Nest:
    """``Outputs[m,n] += Inputs[m,k] * Weights[k,n]``."""
    return Nest(name, (("M", m), ("N", n), ("K", k)), (
        _ds("Weights", "K", "N"), _ds("Inputs", "M", "K"), _ds("Outputs", "M", "N", rw=True)))


def batch_matmul(b: int, m: int, n: int, k: int, name: str = "batch_matmul") -> Nest:
    """``b`` independent GEMMs: no operand is shared between batches (dim B indexes all three)."""
    return Nest(name, (("B", b), ("M", m), ("N", n), ("K", k)), (
        _ds("Weights", "B", "K", "N"), _ds("Inputs", "B", "M", "K"), _ds("Outputs", "B", "M", "N", rw=True)))


def nest_from_workload(w: Any) -> Nest:
    """The loop nest of a MAC ``sim.workload.workload.Workload`` (conv2d incl. grouped/depthwise, gemm and
    batched gemm). Vector workloads have no MAC nest: ``NestError``."""
    if w.kind == "conv2d":
        d = w.d
        return conv2d(c=d["c"], m=d["k"], r=d["r"], s=d["s"], p=w.p, q=w.q, n=d["n"],
                      stride=(d["stride_h"], d["stride_w"]), dilation=(d["dil_h"], d["dil_w"]),
                      groups=d["groups"], name=w.key)
    if w.kind == "gemm":
        d = w.d
        if d["b"] > 1:
            return batch_matmul(d["b"], d["m"], d["n"], d["k"], name=w.key)
        return gemm(d["m"], d["n"], d["k"], name=w.key)
    raise NestError(f"a {w.kind} workload has no MAC loop nest (only conv2d and gemm kinds do)")
