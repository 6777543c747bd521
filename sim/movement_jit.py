"""The closed form of ``sim.movement_batch`` compiled per mapping with numba (optional: the
``fast`` extra). Same inputs, same outputs, same formulas (see the ``movement_batch`` module
docstring); numpy's batch form spends ~40 array passes per chunk, this one loop per mapping.

The kernel is generated for each (hierarchy, nest) shape by ``sim.movement_jitgen`` (every loop
over levels, dims, ranks and data spaces unrolled into scalars; bounds, energies and bandwidths
stay arguments, so all conv layers on one hierarchy share one kernel), written to a cache
directory and compiled with ``cache=True``, so a shape is compiled once per machine, not per
process (``ACCEL_TUNE_JIT_CACHE`` names the directory; default ``~/.cache/accel-tune/jit``, a
temporary one when that cannot be written; compiled in memory when neither can). Stride
comparisons ("is loop j's translation the innermost one's") compare one packed integer per data
space (``_Structure.pack``, exact; rows of nests too large to pack are evaluated one by one);
a power-of-two block size divides by a shift. ``available()`` says whether numba is installed;
``movement_batch.evaluate_batch`` uses this kernel when it is and falls back to the numpy form
otherwise. Rows the closed form does not count (a spatial dim indexing two ranks of one tensor,
a spatial factor where a level has no fan-out) come back flagged and are evaluated one by one.
Measured figures: docs/SIMULATOR.md ("Speed of the multi-level model").
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from .movement_jitgen import Shape, source

try:
    import numba
except ImportError:     # the kernel is optional; movement_batch keeps the numpy form
    numba = None


def available() -> bool:
    return numba is not None


def _distinct_rank(fx, ax, n, vals):
    """Distinct sums of a*x over ``n`` (factor, step) terms of one rank at one level: a product
    when at most one factor is > 1, the two-term closed form (see ``movement_batch._distinct``),
    an enumeration (``_distinct_many``) for three or more; -1 when the enumeration would not
    fit ``vals`` (not a legal mapping: the row is evaluated one by one)."""
    cnt = 0
    prod = 1
    f1 = f2 = a1 = a2 = 0
    for t in range(n):
        f = fx[t]
        if f > 1:
            cnt += 1
            prod *= f
            if cnt == 1:
                f1, a1 = f, ax[t]
            else:
                f2, a2 = f, ax[t]
    if cnt <= 1:
        return prod
    if cnt > 2:
        return _distinct_many(fx, ax, n, vals)
    # a collision needs a2/g < f1 and a1/g < f2 (g = gcd), so a2 < f1 * a1 and a1 < f2 * a2:
    # otherwise skip the gcd, whose divisions cost more than the rest of the level
    if a2 >= f1 * a1 or a1 >= f2 * a2:
        return prod
    g = np.gcd(a1, a2)
    c1 = f1 - a2 // g
    c2 = f2 - a1 // g
    return prod - (c1 if c1 > 0 else 0) * (c2 if c2 > 0 else 0)


def _distinct_many(fx, ax, n, vals):
    """Distinct sums of a*x over three or more non-unit (factor, step) terms: enumerated into
    ``vals`` (preallocated, at least the level's fan-out long; their product is at most that)
    and counted after sorting. Rare in a search, so kept out of line."""
    size = 1
    for t in range(n):
        size *= fx[t]
    if size > vals.shape[0]:      # beyond the fan-out: not a legal mapping, flagged (one by one)
        return -1
    size = 1
    vals[0] = 0
    for t in range(n):
        f = fx[t]
        if f > 1:
            for x in range(1, f):
                for i in range(size):
                    vals[x * size + i] = vals[i] + x * ax[t]
            size *= f
    v = vals[:size]
    v.sort()
    distinct = 1
    for i in range(1, size):
        distinct += v[i] != v[i - 1]
    return distinct



if numba is not None:
    _distinct_many = numba.njit(cache=True, nogil=True, error_model="numpy")(_distinct_many)
    _distinct_rank = numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")(_distinct_rank)


def shape_of(st) -> Shape:
    """The (hierarchy, nest) shape of a ``movement_batch._Structure``: what the kernel's source
    depends on."""
    ranks = tuple(tuple((int(d), int(st.P[r, d])) for d in np.flatnonzero(st.P[r])) for r in range(st.P.shape[0]))
    return Shape(L=st.L, D=st.D, S=st.S, ranks=ranks, owner=tuple(int(x) for x in st.owner),
                 rw=tuple(bool(x) for x in st.rw),
                 may=tuple(tuple(bool(x) for x in row) for row in st.may_keep),
                 fans=tuple(tuple(f) != (1, 1) for f in st.fan),
                 shared=tuple(tuple(int(d) for d in np.flatnonzero(_shared_mask(st, s))) for s in range(st.S)))


def _shared_mask(st, s: int) -> np.ndarray:
    """Dims that index two ranks of data space s."""
    rows = st.P[st.owner == s]
    return (rows > 0).sum(axis=0) > 1


_KERNELS: dict[Shape, object] = {}


def _cache_dirs() -> list[Path]:
    env = os.environ.get("ACCEL_TUNE_JIT_CACHE")
    if env:
        return [Path(env)]
    return [Path.home() / ".cache" / "accel-tune" / "jit", Path(tempfile.gettempdir()) / "accel-tune-jit"]


def kernel_for(shape: Shape):
    """The compiled kernel of ``shape``: generated once, written where numba can cache it."""
    k = _KERNELS.get(shape)
    if k is not None:
        return k
    src = source(shape)
    # the name hashes the source, this module and numba's version: a change in any of them is a
    # new file, so numba never loads a stale compilation (its cache checks only the file itself)
    salt = Path(__file__).read_bytes() + numba.__version__.encode()
    name = "mvk_" + hashlib.sha256(src.encode() + salt).hexdigest()[:24]
    mod = None
    for d in _cache_dirs():
        try:
            d.mkdir(parents=True, exist_ok=True)
            path = d / f"{name}.py"
            if not path.exists() or path.read_text() != src:
                tmp = d / f"{name}.{os.getpid()}.tmp"
                tmp.write_text(src)
                os.replace(tmp, path)       # atomic: concurrent processes see a whole file
            spec = importlib.util.spec_from_file_location(f"sim._jit_kernels.{name}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sys.modules[spec.name] = mod      # numba's cache looks functions' modules up
            fn = numba.njit(cache=True, nogil=True, error_model="numpy")(mod.kernel)
            break
        except OSError:
            mod = None
    if mod is None:     # no writable directory: compile in memory (paid once per process)
        ns: dict = {}
        exec(compile(src, f"<movement_jit {name}>", "exec"), ns)
        fn = numba.njit(nogil=True, error_model="numpy")(ns["kernel"])
    _KERNELS[shape] = fn
    return fn


def _static(st) -> tuple:
    """The kernel and its per-(hierarchy, nest) arguments, built once and kept on the structure."""
    k = getattr(st, "_jit_args", None)
    if k is not None:
        return k
    # log2 of each block size when it is a power of two (> 1), else 0
    bshift = np.array([int(b).bit_length() - 1 if b > 1 and int(b) & (int(b) - 1) == 0 else 0 for b in st.block],
                      np.int64)
    # instances sharing one cluster access (energy divides by util / min(util, this))
    inst_c = np.maximum(1, st.inst // st.cluster).astype(np.int64)
    # room to enumerate a level's spatial offsets (their count is at most its fan-out)
    nvals = max([int(f[0]) * int(f[1]) for f in st.fan] + [1])
    k = (kernel_for(shape_of(st)),
         (st.P.astype(np.int64), st.pack.astype(np.int64), inst_c, st.block.astype(np.int64), bshift,
          st.e[:, 0].astype(np.float64), st.e[:, 1].astype(np.float64), st.e[:, 2].astype(np.float64),
          st.leak.astype(np.float64), st.rbw.astype(np.float64), st.wbw.astype(np.float64),
          int(st.macs), float(st.mac_pj), nvals))
    st._jit_args = k
    return k


def outputs(B: int, L: int, S: int) -> tuple:
    """Uninitialised result arrays for ``run``: reads, fills, updates [B, L, S], utilized
    instances [B, L], compute cycles, cycles, energy and the fallback flag [B]."""
    return (np.empty((B, L, S), np.int64), np.empty((B, L, S), np.int64), np.empty((B, L, S), np.int64),
            np.empty((B, L), np.int64), np.empty(B, np.int64), np.empty(B, np.int64), np.empty(B, np.float64),
            np.empty(B, np.bool_))


def run(st, m, out: tuple | None = None):
    """Evaluate every row of ``m`` (a ``MappingArrays``) with the compiled kernel into ``out``
    (``outputs``; new arrays when None); returns (reads, fills, updates, util, compute_cycles,
    cycles, energy, flagged rows)."""
    if out is None:
        out = outputs(len(m), st.L, st.S)
    kernel, args = _static(st)
    kernel(np.ascontiguousarray(m.temporal, np.int64), np.ascontiguousarray(m.spatial_x, np.int64),
           np.ascontiguousarray(m.spatial_y, np.int64), np.ascontiguousarray(m.perm, np.int64),
           np.ascontiguousarray(m.keep, np.bool_), *args, *out)
    if not st.packable:     # rank vectors too large to pack into one int64: every row one by one
        out[-1][:] = True
    return out
