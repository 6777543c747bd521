"""The design points of a spec: the full grid, or ``count`` distinct points drawn at random from
it, keeping only those that meet the constraints.

A point is the base config with the axis values applied; its ``key`` (from the hardware
fingerprint) names it in the results, so a rerun recognises finished points whatever order or
sampling produced them.
"""
from __future__ import annotations

import hashlib
import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from sim import HardwareConfig, HardwareError

from .spec import MAX_POINTS, SpecError, SweepSpec

EAGER_POINTS = 2_000      # a space this small is enumerated whole even with a limit (exact counts)
MAX_EXAMINED = 200_000    # random sampling gives up looking for points that meet the constraints


@dataclass(frozen=True)
class Point:
    index: int                           # position in the grid (mixed radix over the axes)
    values: tuple[tuple[str, Any], ...]  # (dotted field, value) per swept field
    hw: HardwareConfig

    @property
    def key(self) -> str:
        return self.hw.fingerprint()[:16]

    def params(self) -> dict[str, Any]:
        return {p: (list(v) if isinstance(v, tuple) else v) for p, v in self.values}


@dataclass(frozen=True)
class Space:
    points: tuple[Point, ...]
    grid_size: int
    examined: int   # grid points looked at (random sampling may stop early)
    rejected: int   # of those, how many broke a constraint
    duplicates: int  # of those, how many described the same machine as an earlier point
    # Every point the spec wants is in ``points``. False when enumeration stopped once ``limit``
    # new points were found in a large space: more points follow, their number unknown.
    complete: bool = True


def _digits(index: int, radices: list[int]) -> list[int]:
    out = []
    for r in reversed(radices):
        index, d = divmod(index, r)
        out.append(d)
    return out[::-1]


def point_at(spec: SweepSpec, index: int) -> Point:
    """The grid point at ``index`` (the last axis varies fastest)."""
    radices = [len(a.values) for a in spec.axes]
    values: list[tuple[str, Any]] = []
    for axis, d in zip(spec.axes, _digits(index, radices)):
        values += list(zip(axis.paths, axis.values[d]))
    name = f"{spec.name}-{index}"
    try:
        hw = spec.base_hw.with_overrides({**dict(values), "name": name})
    except HardwareError as e:
        desc = ", ".join(f"{p}={v!r}" for p, v in values)
        raise SpecError(f"point {index} ({desc}): {e}") from None
    return Point(index, tuple(values), hw)


def _order(spec: SweepSpec) -> Iterator[int]:
    size = spec.grid_size
    if spec.sampling == "grid":
        yield from range(size)
        return
    rng = np.random.default_rng(spec.seed)
    if size <= 2_000_000:
        yield from (int(i) for i in rng.permutation(size))
        return
    seen: set[int] = set()
    # A huge grid: rejection-sample indices; stop after enough misses that the rest is unreachable.
    misses = 0
    while len(seen) < size and misses < 1000:
        i = int(rng.integers(size))
        if i in seen:
            misses += 1
            continue
        seen.add(i)
        yield i


def enumerate_space(spec: SweepSpec, *, limit: int | None = None,
                    done: Callable[[Point], bool] | None = None) -> Space:
    """The points to evaluate, in evaluation order. Same spec and seed, same points.

    Points are made one at a time, so a huge grid is never enumerated whole: with ``limit``,
    enumeration stops once ``limit`` points that are not ``done`` (already evaluated) have been
    found and at least ``EAGER_POINTS`` were examined (small spaces are always enumerated whole, so
    their counts are exact). Without ``limit`` a grid may hold at most ``MAX_POINTS`` points, and
    random sampling examines at most ``MAX_EXAMINED`` points looking for ``count`` that meet the
    constraints."""
    if limit is not None and limit < 0:
        raise SpecError(f"limit must be >= 0, got {limit}")
    if limit is None and spec.sampling == "grid" and spec.grid_size > MAX_POINTS:
        raise SpecError(f"the grid has {spec.grid_size:,} points, more than the {MAX_POINTS:,} a sweep evaluates; "
                        f"evaluate it in batches (--limit N), sample it (sampling.method = \"random\", "
                        f"count = N) or narrow an axis")
    want = spec.count if spec.sampling == "random" else math.inf
    pts: list[Point] = []
    keys: set[str] = set()
    examined = rejected = dups = new = 0
    complete = True
    for i in _order(spec):
        if len(pts) >= want:
            break
        if limit is not None and new >= limit and examined >= EAGER_POINTS:
            complete = False
            break
        if examined >= MAX_EXAMINED:
            warnings.warn(f"{spec.name}: stopped after examining {examined:,} of {spec.grid_size:,} grid points "
                          f"({rejected:,} broke the constraints); {len(pts)} points found", stacklevel=2)
            break
        examined += 1
        p = point_at(spec, i)
        if not all(c.ok(p.hw) for c in spec.constraints):
            rejected += 1
            continue
        if p.key in keys:
            dups += 1
            continue
        keys.add(p.key)
        pts.append(p)
        if done is None or not done(p):
            new += 1
    return Space(tuple(pts), spec.grid_size, examined, rejected, dups, complete)


def eval_key(point_key: str, settings_blob: str) -> str:
    """The results key of one point under one set of evaluation settings (models, trials,
    objective, seed): a finished row counts only for the settings that produced it."""
    return hashlib.sha256(f"{point_key}|{settings_blob}".encode()).hexdigest()[:16]
