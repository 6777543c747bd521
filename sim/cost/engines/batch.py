"""The data-movement model of ``sim.cost.movement`` vectorised with numpy over many mappings of one
(hierarchy, nest): the evaluation a mapper needs, equal to ``movement.evaluate`` row by row.

Mappings are arrays (``MappingArrays``; B mappings, L levels outermost first, D dims in nest
order, S data spaces in nest order): temporal / spatial-X / spatial-Y factors ``[B, L, D]``,
loop order per level ``perm[B, L, D]`` (dim indices, outermost first, every dim once) and
``keep[B, L, S]``. ``check_batch`` is the vectorised ``Mapping.check`` (a reason code per row);
``evaluate_batch`` returns per-instance reads/fills/updates ``[B, L, S]``, utilized instances,
cycles and energy.

The closed form used here (equal to the stride-state walk of ``movement.delta_sum``): in
Timeloop's extrapolated walk the steps alternate between the innermost loop above the level
(translation t) and some outer loop j, and the state after every innermost step is t. So the
innermost loop's steps fetch the set difference for t, and a step of loop j fetches the same
difference when its translation equals t and the whole tile otherwise; with the weight of loop
j's steps ``(f_j - 1) * prod(f_k, k outside j)``:

    arrivals = tile + tile * (steps - W_eq) + diff(t) * W_eq,   W_eq = sum of weights with t_j == t

t_j == t compares ``P (s_j e_j - sum_{k inside j} s_k e_k)`` with the innermost loop's (the
wraps of loops inside the level cancel), so one array of projected suffix sums serves every
level. Spatial fan-outs where two spatial loops of one level feed one rank of a tensor (a
diagonal such as q + s, or one dim split over X and Y) are counted in closed form too (``_distinct``);
rows with a spatial dim that indexes two ranks of one tensor are evaluated by
``movement.evaluate`` (``fallback`` counts them).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from ...hw.hierarchy import Hierarchy
from ...mapping.mapping import LevelMapping, Mapping
from ..movement import evaluate as evaluate_one
from ...workload.nest import Nest

# reason codes of check_batch (0 = legal)
OK, BAD_PRODUCT, BAD_FANOUT_X, BAD_FANOUT_Y, OVERFLOW, BAD_KEEP, BACKING_STORE = range(7)
REASONS = {OK: "legal", BAD_PRODUCT: "factors of a dim do not multiply to its bound",
           BAD_FANOUT_X: "spatial X factors beyond a level's fan-out",
           BAD_FANOUT_Y: "spatial Y factors beyond a level's fan-out",
           OVERFLOW: "tiles overflow a level's capacity",
           BAD_KEEP: "a level keeps a data space it may not hold",
           BACKING_STORE: "the outermost level does not keep every data space"}


@dataclass(frozen=True)
class MappingArrays:
    temporal: np.ndarray     # [B, L, D] int64
    spatial_x: np.ndarray    # [B, L, D]
    spatial_y: np.ndarray    # [B, L, D]
    perm: np.ndarray         # [B, L, D] dim indices, outermost first
    keep: np.ndarray         # [B, L, S] bool

    def __len__(self) -> int:
        return self.temporal.shape[0]

    def take(self, rows) -> "MappingArrays":
        return MappingArrays(self.temporal[rows], self.spatial_x[rows], self.spatial_y[rows],
                             self.perm[rows], self.keep[rows])

    @classmethod
    def from_mappings(cls, hier: Hierarchy, nest: Nest, mappings: list[Mapping]) -> "MappingArrays":
        dims = nest.dim_names
        names = [ds.name for ds in nest.data_spaces]
        B, L, D, S = len(mappings), len(hier.levels), len(dims), len(names)
        t = np.ones((B, L, D), np.int64)
        sx = np.ones((B, L, D), np.int64)
        sy = np.ones((B, L, D), np.int64)
        perm = np.tile(np.arange(D), (B, L, 1))
        keep = np.zeros((B, L, S), bool)
        for b, m in enumerate(mappings):
            for i, lm in enumerate(m.levels):
                for k, d in enumerate(dims):
                    t[b, i, k], sx[b, i, k], sy[b, i, k] = lm.t(d), lm.sx(d), lm.sy(d)
                order = list(lm.loop_order(dims))
                order += [d for d in dims if d not in order]
                perm[b, i] = [dims.index(d) for d in order]
                for k, s in enumerate(names):
                    keep[b, i, k] = m.keeps(hier, i, s)
        return cls(t, sx, sy, perm, keep)

    def mapping(self, hier: Hierarchy, nest: Nest, b: int) -> Mapping:
        """Row ``b`` as a ``Mapping`` (keep given explicitly for every level)."""
        dims = nest.dim_names
        names = [ds.name for ds in nest.data_spaces]
        levels = []
        for i in range(len(hier.levels)):
            levels.append(LevelMapping(
                temporal={d: int(self.temporal[b, i, k]) for k, d in enumerate(dims)},
                permutation=tuple(dims[int(x)] for x in self.perm[b, i]),
                spatial_x={d: int(self.spatial_x[b, i, k]) for k, d in enumerate(dims)},
                spatial_y={d: int(self.spatial_y[b, i, k]) for k, d in enumerate(dims)},
                keep=frozenset(n for k, n in enumerate(names) if self.keep[b, i, k])
                if not hier.levels[i].spatial_only else None))
        return Mapping(tuple(levels))


@dataclass(frozen=True)
class BatchEvaluation:
    reads: np.ndarray        # [B, L, S] per instance
    fills: np.ndarray
    updates: np.ndarray
    utilized: np.ndarray     # [B, L]
    compute_cycles: np.ndarray   # [B]
    cycles: np.ndarray           # [B]
    energy_pj: np.ndarray        # [B]
    fallback: int                # rows evaluated one by one (see _distinct)


class _Structure:
    """Everything about (hierarchy, nest) that every mapping shares, built once."""

    def __init__(self, hier: Hierarchy, nest: Nest):
        self.dims = nest.dim_names
        self.D, self.L, self.S = len(self.dims), len(hier.levels), len(nest.data_spaces)
        rows, owner = [], []
        for s, ds in enumerate(nest.data_spaces):
            for rank in ds.projection:
                row = np.zeros(self.D, np.int64)
                for d, c in rank:
                    row[self.dims.index(d)] += c
                rows.append(row)
                owner.append(s)
        self.P = np.array(rows)                          # [R, D] all ranks of all data spaces
        self.Pf = self.P.T.astype(np.float64)
        self.owner = np.array(owner)                     # [R] data space of each rank
        self.starts = np.array([owner.index(s) for s in range(self.S)])
        # dims that index two ranks of one data space: distinct tiles are not a product of ranks
        self.shared_dims = []
        for s in range(self.S):
            used = np.array([rows[k] > 0 for k in range(len(rows)) if owner[k] == s]).sum(axis=0)
            if (used > 1).any():
                self.shared_dims.append(np.flatnonzero(used > 1))
        # exact packing of a data space's rank vector into one int64: |translation| on a rank is
        # at most 2 * sum(coef * bound), a difference of two at most twice that
        radix = [4 * 2 * int(sum(int(c) * nest.bounds[d] for d, c in zip(self.dims, r))) + 1 for r in rows]
        self.pack = np.zeros((self.D, self.S), np.int64)
        self.packable = True
        for s in range(self.S):
            mult = 1
            for k in np.flatnonzero(np.array(owner) == s):
                self.pack[:, s] += np.array(rows[k]) * mult
                mult *= radix[k]
            self.packable &= mult < (1 << 62) // max(1, max(radix))
        nz = [np.flatnonzero(r) for r in rows]
        self.single_ranks = np.array([k for k, z in enumerate(nz) if len(z) == 1], np.int64)
        self.single_dims = np.array([z[0] for z in nz if len(z) == 1], np.int64)
        self.multi_ranks = [k for k, z in enumerate(nz) if len(z) > 1]
        self.rw = np.array([ds.read_write for ds in nest.data_spaces])
        self.bounds = np.array([nest.bounds[d] for d in self.dims])
        lv = hier.levels
        self.cap = np.array([-1 if x.capacity_words is None else x.capacity_words for x in lv])
        self.may_keep = np.array([[x.may_keep(ds.name) for ds in nest.data_spaces] for x in lv])
        self.fan = np.array([hier.fanout(i) for i in range(self.L)])          # [L, 2]
        self.fan_levels = np.array([i for i in range(self.L) if tuple(self.fan[i]) != (1, 1)], np.int64)
        self.inst = np.array([x.instances for x in lv])
        self.cluster = np.array([x.cluster_size for x in lv])
        self.block = np.array([x.block_size for x in lv])
        self.e = np.array([[x.read_pj, x.fill_pj, x.update_pj] for x in lv])   # [L, 3]
        self.leak = np.array([0.0 if x.spatial_only else x.leak_pj_per_cycle for x in lv])
        self.rbw = np.array([np.inf if x.read_bandwidth is None else x.read_bandwidth for x in lv])
        self.wbw = np.array([np.inf if x.write_bandwidth is None else x.write_bandwidth for x in lv])
        self.mac_pj = hier.arithmetic.mac_pj
        self.macs = nest.macs

    def project(self, span_minus_1: np.ndarray) -> np.ndarray:
        """``x @ P.T`` in floating point (BLAS; integer matmul has none), exact below 2**53."""
        return np.rint(span_minus_1.astype(np.float64) @ self.Pf).astype(np.int64)

    def per_space(self, x: np.ndarray) -> np.ndarray:
        """Product over each data space's ranks of ``x[..., R]`` -> ``[..., S]``."""
        return np.multiply.reduceat(x, self.starts, axis=-1)

    def all_ranks(self, x: np.ndarray) -> np.ndarray:
        """``x[..., R]`` bool -> all() per data space ``[..., S]``."""
        return np.minimum.reduceat(x.astype(np.int8), self.starts, axis=-1).astype(bool)


_CACHE: dict[tuple[int, int], _Structure] = {}


def _structure(hier: Hierarchy, nest: Nest) -> _Structure:
    key = (id(hier), id(nest))
    st = _CACHE.get(key)
    if st is None or st.dims != nest.dim_names:
        if len(_CACHE) > 64:
            _CACHE.clear()
        st = _CACHE[key] = _Structure(hier, nest)
        st._refs = (hier, nest)   # keep the ids alive while cached
    return st


def _spans(m: MappingArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sp = m.spatial_x * m.spatial_y
    ts = m.temporal * sp
    inner = np.cumprod(ts[:, ::-1], axis=1)[:, ::-1]               # [B, L, D] prod over levels >= i
    below = np.concatenate([inner[:, 1:], np.ones_like(inner[:, :1])], axis=1)
    return sp, inner, below


def _distinct(st: _Structure, m: MappingArrays, below: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct child tiles per level and data space ``[B, L, S]`` (identical tiles are one read or
    one reduced update), and the rows this closed form cannot count (``[B]``).

    A rank's spatial offsets are sums of ``coef * step * x`` over the level's spatial loops of
    the dims in that rank. One such loop: its factor. Two (a diagonal such as q + s, or one dim
    split over X and Y), with a = coef*step values: g = gcd, a' = a/g, b' = b/g, the sums take
    ``f1*f2 - max(0, f1 - b') * max(0, f2 - a')`` distinct values (equal sums form chains along
    (b', -a')). More than two (rare): the sums are enumerated for those rows. A spatial dim that
    indexes two ranks of one tensor: those rows fall back to ``movement.evaluate``."""
    B, L = m.temporal.shape[:2]
    R = st.P.shape[0]
    sp = m.spatial_x * m.spatial_y
    # a rank of one dim: X and Y loops of it never collide (the X step is Y's factor times Y's)
    per_rank = np.ones((B, L, R), np.int64)
    per_rank[:, :, st.single_ranks] = sp[:, :, st.single_dims]
    bad = np.zeros(B, bool)
    fl = st.fan_levels            # a legal mapping has spatial loops only where a level fans out
    sx, sy, bl = m.spatial_x[:, fl], m.spatial_y[:, fl], below[:, fl]
    for r in st.multi_ranks:
        fs, coefs = [], []
        for d in np.flatnonzero(st.P[r]):
            c = st.P[r, d]
            fs += [sx[:, :, d], sy[:, :, d]]
            coefs += [c * sy[:, :, d] * bl[:, :, d], c * bl[:, :, d]]
        f = np.stack(fs, axis=2)                              # [B, L, terms]
        a = np.stack(coefs, axis=2)
        nu = f > 1
        cnt = nu.sum(axis=2)
        prod = np.where(nu, f, 1).prod(axis=2)
        if f.shape[2] >= 2:
            # the two non-unit terms, where there are exactly two
            order = np.argsort(~nu, axis=2, kind="stable")
            f1 = np.take_along_axis(f, order[:, :, :1], 2)[:, :, 0]
            f2 = np.take_along_axis(f, order[:, :, 1:2], 2)[:, :, 0]
            a1 = np.take_along_axis(a, order[:, :, :1], 2)[:, :, 0]
            a2 = np.take_along_axis(a, order[:, :, 1:2], 2)[:, :, 0]
            g = np.gcd(a1, a2)
            two = f1 * f2 - np.maximum(0, f1 - a2 // g) * np.maximum(0, f2 - a1 // g)
            per_rank[:, fl, r] = np.where(cnt == 2, two, prod)
        else:
            per_rank[:, fl, r] = prod
        # three or more spatial terms in one rank: count the offsets of those (row, level) pairs
        for b, j in zip(*np.nonzero(cnt > 2)):
            vals = np.zeros(1, np.int64)
            for ft, at in zip(f[b, j], a[b, j]):
                if ft > 1:
                    vals = (vals[:, None] + at * np.arange(ft)[None, :]).ravel()
            per_rank[b, fl[j], r] = np.unique(vals).size
    for dims_twice in st.shared_dims:
        bad |= ((m.spatial_x[:, :, dims_twice] * m.spatial_y[:, :, dims_twice]) > 1).any(axis=(1, 2))
    return st.per_space(per_rank), bad


def check_batch(hier: Hierarchy, nest: Nest, m: MappingArrays) -> np.ndarray:
    """Reason code per mapping (``OK`` = 0 for a legal one), as ``Mapping.check`` decides."""
    st = _structure(hier, nest)
    sp, inner, _ = _spans(m)
    code = np.zeros(len(m), np.int64)

    def mark(bad, c):
        code[(code == 0) & bad] = c

    mark((inner[:, 0] != st.bounds).any(axis=1), BAD_PRODUCT)
    mark((m.spatial_x.prod(axis=2) > st.fan[:, 0]).any(axis=1), BAD_FANOUT_X)
    mark((m.spatial_y.prod(axis=2) > st.fan[:, 1]).any(axis=1), BAD_FANOUT_Y)
    mark((m.keep & ~st.may_keep).any(axis=(1, 2)), BAD_KEEP)
    mark(~m.keep[:, 0].all(axis=1), BACKING_STORE)
    tile = st.per_space(1 + st.project(inner - 1))                  # [B, L, S]
    words = (tile * m.keep).sum(axis=2)
    mark(((st.cap >= 0) & (words > st.cap)).any(axis=1), OVERFLOW)
    return code


def evaluate_batch(hier: Hierarchy, nest: Nest, m: MappingArrays, engine: str = "auto",
                   specialise: bool | None = None) -> BatchEvaluation:
    """Counts, cycles and energy of every mapping (assumed legal: filter with ``check_batch``).
    ``engine``: ``numpy`` (this module's array form), ``jit`` (``sim.cost.engines.jit``, the same
    closed form compiled per mapping with numba, the ``fast`` extra) or ``auto`` (jit when numba
    is installed and its kernel is compiled already, or once the numpy form has cost as much as
    a compile: ``_jit_pays``). Both give the same numbers (tested). ``specialise`` (jit only): the kernel
    generated for this (hierarchy, nest) shape (True), the generic one (False), or None: the
    generated one when it is compiled already or the batch is large (``movement_jit.run``)."""
    if engine not in ("auto", "numpy", "jit"):
        raise ValueError(f"engine must be auto, numpy or jit, got {engine!r}")
    movement_jit = _jit_module() if engine == "jit" or (engine == "auto" and _jit_worth_asking()) else None
    if engine == "jit" and not movement_jit.available():
        raise ValueError("engine='jit' needs numba (pip install 'accel-tune[fast]')")
    st = _structure(hier, nest)
    if engine == "jit" or (movement_jit is not None and _jit_pays(movement_jit)):
        reads, fills, updates, util, tcyc, cycles, energy, flagged = movement_jit.run(st, m, specialise=specialise)
        return _fallback(hier, nest, m, reads, fills, updates, util, tcyc, cycles, energy, flagged)
    t0 = time.process_time()
    try:
        return _evaluate_numpy(hier, nest, m, st)
    finally:
        if engine == "auto":
            _NUMPY_SPENT[0] += time.process_time() - t0


# CPU seconds this process has spent in the numpy form under engine="auto" while the jit kernel
# was cold: rent or buy. A cold compile costs ``movement_jit.COLD_COMPILE_S`` (~15 s), more than
# a whole mapper search spends evaluating in numpy (its own work dominates: same result in the
# same time either way), so ``auto`` rents the numpy form until it has spent that much and only
# then pays the compile, never more than twice the better of the two choices. A kernel already
# compiled, in this process or in numba's cache on disk, is used at once.
_NUMPY_SPENT = [0.0]


# CPU seconds of importing numba (0.4 s) and loading the generic kernel from its disk cache,
# numba's own checks included (0.9 s; both measured on the 2-core CI-class machine, 2026-11-27):
# what buying the jit costs, so the rent-or-buy threshold. Until the numpy form has spent that
# much, ``auto`` does not even import the jit module (unless this process imported it already,
# which costs nothing more), so a short run (one LLM serving point, a few dozen small batches)
# pays neither; past it, the rent-or-buy rule below decides as before.
JIT_LOAD_S = 1.5


def _jit_worth_asking() -> bool:
    return __package__ + ".jit" in sys.modules or _NUMPY_SPENT[0] >= JIT_LOAD_S


def _jit_module():
    from . import jit as movement_jit      # imports numba when installed: deferred (see JIT_LOAD_S)
    return movement_jit


def _jit_pays(movement_jit) -> bool:
    return movement_jit.available() and (movement_jit.generic_ready()
                                         or _NUMPY_SPENT[0] >= movement_jit.COLD_COMPILE_S)


def _fallback(hier, nest, m, reads, fills, updates, util, tcyc, cycles, energy, flagged) -> BatchEvaluation:
    """Rows the closed form does not count, evaluated one by one with ``movement.evaluate``."""
    nfb = int(flagged.sum())
    for b in np.flatnonzero(flagged):
        ev = evaluate_one(hier, nest, m.mapping(hier, nest, b), check=False)
        for i, lvr in enumerate(ev.levels):
            got = dict(lvr.tensors)
            for s, ds in enumerate(nest.data_spaces):
                c = got.get(ds.name)
                reads[b, i, s], fills[b, i, s], updates[b, i, s] = (c.reads, c.fills, c.updates) if c else (0, 0, 0)
        energy[b], cycles[b] = ev.energy_pj, ev.cycles
    return BatchEvaluation(reads, fills, updates, util, tcyc, cycles, energy, nfb)


def _evaluate_numpy(hier: Hierarchy, nest: Nest, m: MappingArrays, st: "_Structure") -> BatchEvaluation:
    B, L, D, S = len(m), st.L, st.D, st.S
    T = m.temporal
    sp, inner, below = _spans(m)
    P = st.P                                                        # [R, D]
    ext = 1 + st.project(inner - 1)                                 # [B, L, R] tile extents
    t_all = T.prod(axis=(1, 2))
    tdim = T.prod(axis=1)                                           # [B, D]
    sp_inner = np.cumprod(sp[:, ::-1], axis=1)[:, ::-1]             # spatial at levels >= i
    part = st.per_space(1 + st.project(tdim[:, None, :] * sp_inner - 1))

    # the temporal loop sequence, outermost first: level by level, each in its permutation order
    f = np.take_along_axis(T, m.perm, axis=2).reshape(B, L * D)
    stride = np.take_along_axis(sp * below, m.perm, axis=2).reshape(B, L * D)
    dq = m.perm.reshape(B, L * D)
    nonunit = f > 1
    # Each data space's projected translation packed into one exact integer key (st.pack), so
    # "t_j == t" is one comparison per data space; only the loops with a factor > 1 matter
    # (weight 0 otherwise), so they are moved to the front and the rest cut off.
    pk = st.pack[dq] * (stride * nonunit)[:, :, None]               # [B, Q, S] packed steps
    suf = np.cumsum(pk[:, ::-1], axis=1)[:, ::-1]
    key = 2 * pk - suf                                              # = pk - suffix after the loop
    pre = np.concatenate([np.ones((B, 1), np.int64), np.cumprod(f, axis=1)], axis=1)   # [B, Q+1]
    w = (f - 1) * pre[:, :-1]                                       # [B, Q]
    Qn = int(nonunit.sum(axis=1).max()) if B else 0
    order = np.argsort(~nonunit, axis=1, kind="stable")[:, :max(Qn, 1)]
    ckey = np.take_along_axis(key, order[:, :, None], 1)            # [B, K, S]
    cw = np.take_along_axis(w, order, 1)                            # 0 for padding (unit loops)
    cpos = np.take_along_axis(np.arange(L * D)[None, :].repeat(B, 0), order, 1)
    pos = np.where(nonunit, np.arange(L * D)[None, :], -1)
    lastpos = np.concatenate([np.full((B, 1), -1), np.maximum.accumulate(pos, axis=1)], axis=1)
    rowsB = np.arange(B)

    def arrivals(Q: int, ext_box: np.ndarray) -> np.ndarray:
        """Weighted fetches of a box with extents ``ext_box[B, R]`` over the loops [0, Q)."""
        full = st.per_space(ext_box)
        if Q == 0:
            return full
        last = lastpos[:, Q]
        lc = np.maximum(last, 0)
        tau = P.T[dq[rowsB, lc]] * stride[rowsB, lc][:, None]      # [B, R] innermost translation
        diff = full - st.per_space(np.maximum(0, ext_box - np.abs(tau)))
        eq = (ckey == key[rowsB, lc][:, None, :]) & (cpos < Q)[:, :, None]
        w_eq = (cw[:, :, None] * eq).sum(axis=1)
        steps = (pre[:, Q] - 1)[:, None]
        out = full + full * (steps - w_eq) + diff * w_eq
        return np.where((last >= 0)[:, None], out, full)

    arr = np.stack([arrivals(i * D, ext[:, i]) for i in range(L)], axis=1)     # [B, L, S]

    # distinct child tiles per level: per rank, the distinct values of its spatial offsets
    dist, diag = _distinct(st, m, below)
    if not st.packable:          # tensors so large that a rank vector does not pack into int64
        diag[:] = True
    cumd = np.concatenate([np.ones((B, 1, S), np.int64), np.cumprod(dist, axis=1)], axis=1)  # [B, L+1, S]

    def between(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return np.take_along_axis(cumd, hi[:, None, :], 1)[:, 0] // np.take_along_axis(cumd, lo[:, None, :], 1)[:, 0]

    keep = m.keep
    # innermost keeper per data space, and each level's next inner keeper
    lvl = np.arange(L)[None, :, None]
    inner_keeper = np.where(keep, lvl, -1).max(axis=1)              # [B, S]
    nxt = np.full((B, L, S), -1)
    run = np.full((B, S), -1)
    for i in range(L - 1, -1, -1):
        nxt[:, i] = run
        run = np.where(keep[:, i], i, run)

    last_sp = sp[:, L - 1].prod(axis=1) > 1                         # innermost loop of the nest spatial?
    box = 1 + st.project(sp[:, L - 1] - 1)                          # [B, R]
    per_box = arrivals(L * D, box)
    base_t = t_all[:, None] * between(inner_keeper, np.full_like(inner_keeper, L))
    base_s = per_box * between(inner_keeper, np.full_like(inner_keeper, L - 1))
    to_macs = np.where(last_sp[:, None], base_s, base_t)            # [B, S]

    first = np.argmax(keep, axis=1)                                 # outermost keeper
    has_child = nxt >= 0
    child = np.maximum(nxt, 0)
    arr_child = np.take_along_axis(arr, child, axis=1)
    part_child = np.take_along_axis(part, child, axis=1)
    k = np.stack([between(np.full((B, S), i), child[:, i]) for i in range(L)], axis=1)
    outer = lvl == first[:, None, :]
    rw = st.rw[None, None, :]
    fills = np.where(outer, 0, np.where(rw, arr - part, arr))
    reads_in = np.where(has_child, arr_child * k, to_macs[:, None, :])
    reads_out = np.where(has_child, (arr_child - part_child) * k, to_macs[:, None, :] - part)
    updates = np.where(rw, np.where(has_child, arr_child * k, to_macs[:, None, :]), 0)
    reads = np.where(rw, reads_out, reads_in)
    reads, fills, updates = (np.where(keep, x, 0) for x in (reads, fills, updates))

    # cycles with Timeloop's per-level bandwidth slowdown
    util = np.concatenate([np.ones((B, 1), np.int64), np.cumprod(sp.prod(axis=2), axis=1)[:, :-1]], axis=1)
    rd = reads.sum(axis=2) / t_all[:, None]
    wr = (fills + updates).sum(axis=2) / t_all[:, None]
    slow = np.minimum(1.0, np.minimum(st.rbw / np.maximum(rd, 1e-300), st.wbw / np.maximum(wr, 1e-300)))
    lc = np.where(slow < 1.0, np.ceil(t_all[:, None] / slow), t_all[:, None])
    cycles = lc.max(axis=1).astype(np.int64)

    clusters = np.minimum(util, np.maximum(1, st.inst // st.cluster)[None, :])
    share = util / clusters
    blk = st.block[None, :, None]
    acc = (-(-reads // blk) * st.e[None, :, 0, None] + -(-fills // blk) * st.e[None, :, 1, None]
           + -(-updates // blk) * st.e[None, :, 2, None])
    energy = ((acc.sum(axis=2) / share) * util).sum(axis=1) + (st.leak[None] * util).sum(axis=1) * cycles
    energy = energy + st.macs * st.mac_pj

    # rows whose spatial offsets the closed form does not count: evaluated exactly one by one
    return _fallback(hier, nest, m, reads.copy(), fills.copy(), updates.copy(), util, t_all, cycles.copy(),
                     energy.copy(), diag)

