"""The generic compiled kernel of ``sim.cost.engines.jit``: one loop per mapping over the levels,
dims, ranks and data spaces of any (hierarchy, nest), compiled once (numba, ``cache=True``) for
every shape. ``movement_jit`` uses it for small batches of a shape whose specialised kernel
(``sim.cost.engines.jitgen``) is not compiled yet: that one is about 3x faster but costs ~15 CPU-s to
compile per shape (once per machine). Same inputs, outputs and formulas (the ``movement_batch``
module docstring). The stride comparisons ("is loop j's translation the innermost one's") compare
one packed integer per data space (``_Structure.pack``), and the spatial-offset counts
(``_distinct_rank``, ``_distinct_many``) are shared with the specialised kernels.
"""
from __future__ import annotations

import numpy as np

try:
    import numba
except ImportError:     # the kernel is optional; movement_batch keeps the numpy form
    numba = None


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


def _arrivals(ext, row, n_above, nu_dim, nu_str, K, pre, w, P, rank_lo, rank_hi, s):
    """Weighted fetches of a box with extents ``ext[row]`` over the first ``n_above`` non-unit
    loops (those outside the level) for data space ``s``. ``K[j, s]``: loop j's projected step
    less the steps of every non-unit loop inside it (the wraps), data space s's ranks packed into
    one exact integer (``_Structure.pack``), so t_j == t is one comparison of K[j, s] with
    K[last, s]; the weights of the equal ones are summed without a branch (the comparisons are
    as good as random, a mispredicted branch costs more than the add). (Indices rather than
    array views: a view costs reference counting on every call.)"""
    full = 1
    for r in range(rank_lo[s], rank_hi[s]):
        full *= ext[row, r]
    last = n_above - 1        # the innermost non-unit loop outside the level (-1: none)
    if last < 0:
        return full
    kept = 1
    dl = nu_dim[last]
    sl = nu_str[last]
    for r in range(rank_lo[s], rank_hi[s]):
        t = P[r, dl] * sl
        rem = ext[row, r] - (t if t >= 0 else -t)
        kept *= rem if rem > 0 else 0
    w_eq = 0
    key = K[last, s]
    for j in range(n_above):
        w_eq += w[j] * (K[j, s] == key)
    return full + full * (pre[n_above] - 1 - w_eq) + (full - kept) * w_eq


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


def _kernel(T, SX, SY, PERM, KEEP, P, rp, rdim, rcoef, rank_lo, rank_hi, rw, fan_lv, inst_c, block,
            e_rd, e_fl, e_up, leak, rbw, wbw, macs, mac_pj, shared_dim, pack, bshift, nvals,
            reads, fills, updates, util, tcyc, cyc, energy, flag):
    B, L, D = T.shape
    S = rank_lo.shape[0]
    R = P.shape[0]
    NF = fan_lv.shape[0]
    last_fans = NF > 0 and fan_lv[NF - 1] == L - 1     # may the innermost level fan out to the MACs?
    any_shared = False
    for d in range(D):
        any_shared |= shared_dim[d]
    sp = np.empty((L, D), np.int64)
    inner = np.empty((L + 1, D), np.int64)
    spin = np.empty((L + 1, D), np.int64)
    tdim = np.empty(D, np.int64)
    ext = np.empty((L, R), np.int64)
    part = np.zeros((L, S), np.int64)
    arr = np.zeros((L, S), np.int64)
    n_before = np.empty(L + 1, np.int64)
    nu_dim = np.empty(L * D, np.int64)
    nu_str = np.empty(L * D, np.int64)
    K = np.zeros((L * D, S), np.int64)
    suf = np.zeros(S, np.int64)
    pre = np.empty(L * D + 1, np.int64)
    w = np.empty(L * D, np.int64)
    dist = np.ones((L, S), np.int64)     # levels without a fan-out keep 1
    box = np.empty((1, R), np.int64)
    tfx = np.empty(2 * D, np.int64)
    tax = np.empty(2 * D, np.int64)
    tomac = np.empty(S, np.int64)
    rd = np.empty(L, np.int64)
    wr = np.empty(L, np.int64)
    vals = np.empty(nvals, np.int64)   # per call: the kernel releases the GIL
    for d in range(D):
        inner[L, d] = 1
        spin[L, d] = 1
    isfan = np.zeros(L, np.bool_)
    for i in range(NF):
        isfan[fan_lv[i]] = True
    for b in range(B):
        bad = False
        # spans: every level's iteration box (inner) and spatial fan-out below it (spin)
        for d in range(D):
            tdim[d] = 1
        for l in range(L - 1, -1, -1):
            for d in range(D):
                s_ = SX[b, l, d] * SY[b, l, d]
                t_ = T[b, l, d]
                sp[l, d] = s_
                inner[l, d] = inner[l + 1, d] * t_ * s_
                spin[l, d] = spin[l + 1, d] * s_
                tdim[d] *= t_
                # a spatial factor where the level does not fan out: not legal, one by one
                bad |= (s_ != 1) & (not isfan[l])
        t_all = 1
        for d in range(D):
            t_all *= tdim[d]
        # tile extents of the kept tensors, and the read-write ones' distinct words over the run
        for l in range(L):
            for s in range(S):
                if not KEEP[b, l, s]:
                    continue
                for r in range(rank_lo[s], rank_hi[s]):
                    acc = 1
                    for z in range(rp[r], rp[r + 1]):
                        acc += rcoef[z] * (inner[l, rdim[z]] - 1)
                    ext[l, r] = acc
                if rw[s]:
                    prod = 1
                    for r in range(rank_lo[s], rank_hi[s]):
                        acc = 1
                        for z in range(rp[r], rp[r + 1]):
                            acc += rcoef[z] * (tdim[rdim[z]] * spin[l, rdim[z]] - 1)
                        prod *= acc
                    part[l, s] = prod
        # non-unit temporal loops, outermost first, with strides and weights; a unit loop is
        # written too and then overwritten (n does not advance), which beats a branch on f > 1
        n = 0
        pre[0] = 1
        for l in range(L):
            n_before[l] = n
            for k in range(D):
                d = PERM[b, l, k]
                f = T[b, l, d]
                nu_dim[n] = d
                nu_str[n] = sp[l, d] * inner[l + 1, d]
                w[n] = (f - 1) * pre[n]
                pre[n + 1] = pre[n] * f
                n += f > 1
        n_before[L] = n
        # packed projected steps less the wraps of the loops inside (see _arrivals)
        for s in range(S):
            suf[s] = 0
        for j in range(n - 1, -1, -1):
            dj = nu_dim[j]
            sj = nu_str[j]
            for s in range(S):
                step = pack[dj, s] * sj
                K[j, s] = step - suf[s]
                suf[s] += step
        for l in range(L):
            for s in range(S):
                if KEEP[b, l, s]:
                    arr[l, s] = _arrivals(ext, l, n_before[l], nu_dim, nu_str, K, pre, w, P, rank_lo, rank_hi, s)
        # distinct child tiles under the levels that fan out (1 elsewhere)
        flag[b] = bad
        for i in range(NF):
            l = fan_lv[i]
            for s in range(S):
                prod = 1
                for r in range(rank_lo[s], rank_hi[s]):
                    z0 = rp[r]
                    if rp[r + 1] - z0 == 1:
                        # one dim: its X and Y loops never collide (see movement_batch._distinct)
                        prod *= sp[l, rdim[z0]]
                        continue
                    # several dims: the distinct sums of coef * step * x over their X and Y loops
                    nt = 0
                    for z in range(z0, rp[r + 1]):
                        d = rdim[z]
                        tfx[nt] = SX[b, l, d]
                        tax[nt] = rcoef[z] * SY[b, l, d] * inner[l + 1, d]
                        tfx[nt + 1] = SY[b, l, d]
                        tax[nt + 1] = rcoef[z] * inner[l + 1, d]
                        nt += 2
                    many = _distinct_rank(tfx, tax, nt, vals)
                    if many < 0:
                        flag[b] = True
                    prod *= many
                dist[l, s] = prod
            if any_shared:
                for d in range(D):
                    if shared_dim[d] and sp[l, d] > 1:
                        flag[b] = True
        # operands and partial sums at the MAC side when the innermost level fans out to them
        last_sp = False
        if last_fans:
            for d in range(D):
                last_sp |= sp[L - 1, d] > 1
        if last_sp:
            for r in range(R):
                acc = 1
                for z in range(rp[r], rp[r + 1]):
                    acc += rcoef[z] * (sp[L - 1, rdim[z]] - 1)
                box[0, r] = acc
            for s in range(S):
                tomac[s] = _arrivals(box, 0, n, nu_dim, nu_str, K, pre, w, P, rank_lo, rank_hi, s)
        # per data space: the keeper chain, innermost first; run = the distinct child tiles
        # between a keeper and the next inner one
        for l in range(L):
            rd[l] = 0
            wr[l] = 0
        for s in range(S):
            first = 0
            while not KEEP[b, first, s] and first < L - 1:
                first += 1
            child = -1
            run = 1
            for l in range(L - 1, -1, -1):
                if not KEEP[b, l, s]:
                    reads[b, l, s] = 0
                    fills[b, l, s] = 0
                    updates[b, l, s] = 0
                    if not (last_sp and l == L - 1):
                        run *= dist[l, s]
                    continue
                # (with a spatial box at the MACs the innermost level's own fan-out is in the box)
                k = run if last_sp and l == L - 1 else dist[l, s] * run
                if child < 0:
                    # innermost keeper: one access per distinct operand / partial sum at the MACs
                    base = (tomac[s] if last_sp else t_all) * k
                    up = base
                    rx = base - part[l, s] if rw[s] else base
                else:
                    up = arr[child, s] * k
                    rx = (arr[child, s] - part[child, s]) * k if rw[s] else up
                fl = 0 if l == first else (arr[l, s] - part[l, s] if rw[s] else arr[l, s])
                if not rw[s]:
                    up = 0
                reads[b, l, s] = rx
                fills[b, l, s] = fl
                updates[b, l, s] = up
                rd[l] += rx
                wr[l] += fl + up
                child = l
                run = 1
        # utilized instances, cycles with bandwidth slowdown, energy
        u = 1
        for l in range(L):
            util[b, l] = u
            for d in range(D):
                u *= sp[l, d]
        cycles = t_all
        for l in range(L):
            slow = 1.0
            if rbw[l] < np.inf:      # (a division costs ~15 cycles: none for an unlimited level)
                x = rd[l] / t_all
                if x > rbw[l]:
                    slow = min(slow, rbw[l] / x)
            if wbw[l] < np.inf:
                x = wr[l] / t_all
                if x > wbw[l]:
                    slow = min(slow, wbw[l] / x)
            if slow < 1.0:
                lc = int(np.ceil(t_all / slow))
                if lc > cycles:
                    cycles = lc
        tcyc[b] = t_all
        cyc[b] = cycles
        e = macs * mac_pj
        for l in range(L):
            ul = util[b, l]
            clusters = inst_c[l] if inst_c[l] < ul else ul
            acc = 0.0
            bl = block[l]
            sh = bshift[l]
            for s in range(S):
                if not KEEP[b, l, s]:
                    continue
                if bl == 1:     # an integer division costs tens of cycles: skip it when it is 1
                    acc += reads[b, l, s] * e_rd[l] + fills[b, l, s] * e_fl[l] + updates[b, l, s] * e_up[l]
                elif sh > 0:    # a power-of-two block: the ceiling division is a shift (counts are >= 0)
                    acc += (((reads[b, l, s] + bl - 1) >> sh) * e_rd[l] + ((fills[b, l, s] + bl - 1) >> sh) * e_fl[l]
                            + ((updates[b, l, s] + bl - 1) >> sh) * e_up[l])
                else:
                    acc += (((reads[b, l, s] + bl - 1) // bl) * e_rd[l] + ((fills[b, l, s] + bl - 1) // bl) * e_fl[l]
                            + ((updates[b, l, s] + bl - 1) // bl) * e_up[l])
            e += acc * clusters + leak[l] * ul * cycles
        energy[b] = e



if numba is not None:
    _arrivals = numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")(_arrivals)
    _distinct_many = numba.njit(cache=True, nogil=True, error_model="numpy")(_distinct_many)
    _distinct_rank = numba.njit(cache=True, nogil=True, error_model="numpy")(_distinct_rank)
    _kernel = numba.njit(cache=True, nogil=True, error_model="numpy")(_kernel)


def args(st) -> tuple:
    """The kernel's per-(hierarchy, nest) arguments, built once and kept on the structure."""
    k = getattr(st, "_jit_loop_args", None)
    if k is not None:
        return k
    D = len(st.dims)
    rank_lo = st.starts.astype(np.int64)
    rank_hi = np.append(st.starts[1:], st.P.shape[0]).astype(np.int64)
    fan_lv = np.array([i for i, f in enumerate(st.fan) if tuple(f) != (1, 1)], np.int64)
    shared = np.zeros(D, bool)
    for dims in st.shared_dims:
        shared[dims] = True
    # the projection as sparse rows (rank r: dims rdim[rp[r]:rp[r+1]] with coefficients rcoef)
    nz = [np.flatnonzero(row) for row in st.P]
    rp = np.cumsum([0] + [len(z) for z in nz]).astype(np.int64)
    rdim = np.concatenate(nz).astype(np.int64)
    rcoef = np.concatenate([st.P[r, z] for r, z in enumerate(nz)]).astype(np.int64)
    # log2 of each block size when it is a power of two (> 1), else 0
    bshift = np.array([int(b).bit_length() - 1 if b > 1 and int(b) & (int(b) - 1) == 0 else 0 for b in st.block],
                      np.int64)
    # instances sharing one cluster access (energy divides by util / min(util, this))
    inst_c = np.maximum(1, st.inst // st.cluster).astype(np.int64)
    # room to enumerate a level's spatial offsets (their count is at most its fan-out)
    nvals = max([int(f[0]) * int(f[1]) for f in st.fan] + [1])
    k = (st.P.astype(np.int64), rp, rdim, rcoef, rank_lo, rank_hi, st.rw.astype(np.bool_), fan_lv, inst_c,
         st.block.astype(np.int64), st.e[:, 0].astype(np.float64), st.e[:, 1].astype(np.float64),
         st.e[:, 2].astype(np.float64), st.leak.astype(np.float64), st.rbw.astype(np.float64),
         st.wbw.astype(np.float64), int(st.macs), float(st.mac_pj), shared, st.pack.astype(np.int64), bshift, nvals)
    st._jit_loop_args = k
    return k
