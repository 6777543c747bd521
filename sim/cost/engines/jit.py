"""The closed form of ``sim.cost.engines.batch`` compiled per mapping with numba (optional: the
``fast`` extra). Same inputs, same outputs, same formulas (see the ``movement_batch`` module
docstring); numpy's batch form spends ~40 array passes per chunk, this one loop per mapping.

Two kernels. The fast one is generated for each (hierarchy, nest) shape by
``sim.cost.engines.jitgen`` (every loop over levels, dims, ranks and data spaces unrolled into
scalars; bounds, energies and bandwidths stay arguments, so all conv layers on one hierarchy
share one kernel), written to a cache directory and compiled with ``cache=True``, so a shape is
compiled once per machine (~14 CPU-s), not per process (``ACCEL_TUNE_JIT_CACHE`` names the
directory; default ``~/.cache/accel-tune/jit``, a temporary one when that cannot be written;
compiled in memory when neither can). The generic one (``sim.cost.engines.jitloop``, about 3x
slower) serves small batches until a shape's kernel is compiled (``run``). Stride
comparisons ("is loop j's translation the innermost one's") compare one packed integer per data
space (``_Structure.pack``, exact; rows of nests too large to pack are evaluated one by one);
a power-of-two block size divides by a shift. ``available()`` says whether numba is installed;
``movement_batch.evaluate_batch`` uses these kernels when it is and falls back to the numpy form
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

from . import jitloop as movement_jitloop
from .jitgen import Shape, source

try:
    import numba
except ImportError:     # the kernel is optional; movement_batch keeps the numpy form
    numba = None


def available() -> bool:
    return numba is not None


def generic_ready() -> bool:
    """Whether the generic kernel runs without a compile: compiled in this process already, or a
    compilation valid for its current source in numba's cache on disk (numba's own index, which
    drops stale entries; an unreadable cache counts as not ready). A cold compile costs
    ``COLD_COMPILE_S``; loading a cached one about half a second."""
    if numba is None:
        return False
    k = movement_jitloop._kernel
    if k.signatures:
        return True
    try:
        return bool(k._cache._cache_file._load_index())      # numba internals: guarded
    except Exception:
        return False


COLD_COMPILE_S = 15.0   # CPU-s of the generic kernel's cold compile (14.7 measured on the 2-core CI machine)


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


_KERNELS: dict[Shape, tuple] = {}
SPECIALISE_ROWS = 1 << 15   # a batch this large pays for compiling its shape's kernel (once per machine)


def _cache_dirs() -> list[Path]:
    env = os.environ.get("ACCEL_TUNE_JIT_CACHE")
    if env:
        return [Path(env)]
    return [Path.home() / ".cache" / "accel-tune" / "jit", Path(tempfile.gettempdir()) / "accel-tune-jit"]


def kernel_for(shape: Shape) -> tuple:
    """(the specialised kernel of ``shape``, whether it is compiled already: in this process or
    in numba's cache on disk). Generated once, written where numba can cache it."""
    got = _KERNELS.get(shape)
    if got is not None:
        fn, on_disk = got
        return fn, on_disk or bool(fn.signatures)
    src = source(shape)
    # the name hashes the source, the module it calls (jitloop) and numba's version: a
    # change in any is a new file, so numba never loads a stale compilation (its cache checks
    # only the file itself)
    salt = (Path(__file__).parent / "jitloop.py").read_bytes()
    name = "mvk_" + hashlib.sha256(src.encode() + salt + numba.__version__.encode()).hexdigest()[:24]
    fn = path = None
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
            path = None
    if fn is None:     # no writable directory: compile in memory (paid once per process)
        ns: dict = {}
        exec(compile(src, f"<movement_jit {name}>", "exec"), ns)
        fn = numba.njit(nogil=True, error_model="numpy")(ns["kernel"])
    # numba's index of the compiled kernel next to the source: compiled by an earlier process
    on_disk = path is not None and any(path.parent.glob(f"__pycache__/{path.stem}.kernel-*.nbi"))
    _KERNELS[shape] = (fn, on_disk)
    return kernel_for(shape)


def _specialised_args(st) -> tuple:
    """The specialised kernel's run-time arguments, from the generic kernel's (built once)."""
    (P, _, _, _, _, _, _, _, inst_c, block, e_rd, e_fl, e_up, leak, rbw, wbw, macs, mac_pj, _, pack, bshift,
     nvals) = movement_jitloop.args(st)
    return (P, pack, inst_c, block, bshift, e_rd, e_fl, e_up, leak, rbw, wbw, macs, mac_pj, nvals)


def outputs(B: int, L: int, S: int) -> tuple:
    """Uninitialised result arrays for ``run``: reads, fills, updates [B, L, S], utilized
    instances [B, L], compute cycles, cycles, energy and the fallback flag [B]."""
    return (np.empty((B, L, S), np.int64), np.empty((B, L, S), np.int64), np.empty((B, L, S), np.int64),
            np.empty((B, L), np.int64), np.empty(B, np.int64), np.empty(B, np.int64), np.empty(B, np.float64),
            np.empty(B, np.bool_))


def run(st, m, out: tuple | None = None, specialise: bool | None = None):
    """Evaluate every row of ``m`` (a ``MappingArrays``) into ``out`` (``outputs``; new arrays
    when None); returns (reads, fills, updates, util, compute_cycles, cycles, energy, flagged
    rows). ``specialise``: the shape's generated kernel (True) or the generic one (False); None
    picks the generated one when it is compiled already or the batch has ``SPECIALISE_ROWS``
    rows or more (its compile, ~15 CPU-s once per machine, is then worth it)."""
    if out is None:
        out = outputs(len(m), st.L, st.S)
    ins = (np.ascontiguousarray(m.temporal, np.int64), np.ascontiguousarray(m.spatial_x, np.int64),
           np.ascontiguousarray(m.spatial_y, np.int64), np.ascontiguousarray(m.perm, np.int64),
           np.ascontiguousarray(m.keep, np.bool_))
    shape = getattr(st, "_jit_shape", None)
    if shape is None:
        shape = st._jit_shape = shape_of(st)
    fn, ready = kernel_for(shape)
    if specialise or (specialise is None and (ready or len(m) >= SPECIALISE_ROWS)):
        fn(*ins, *_specialised_args(st), *out)
    else:
        movement_jitloop._kernel(*ins, *movement_jitloop.args(st), *out)
    if not st.packable:     # rank vectors too large to pack into one int64: every row one by one
        out[-1][:] = True
    return out
