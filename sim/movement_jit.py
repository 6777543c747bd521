"""The closed form of ``sim.movement_batch`` compiled per mapping with numba (optional: the
``fast`` extra). Same inputs, same outputs, same formulas (see the ``movement_batch`` module
docstring); numpy's batch form spends ~40 array passes per chunk, this one loop per mapping.
The stride comparisons ("is loop j's translation the innermost one's") compare one packed
integer per data space (``_Structure.pack``, exact; rows of nests too large to pack are
evaluated one by one), a power-of-two block size divides by a shift, and tile extents are
computed only for the tensors a level keeps. Measured on the VGG-16 conv5 / 5-level
eyeriss-like bench: the kernel 1.45 us a mapping at best, ~2-2.5 us typically (4.1e5-4.2e5
mappings per CPU second end to end at load average ~3 on the shared 2-core machine), about 11x
the numpy form; the 1e6 target is not reached (docs/SIMULATOR.md has the figures and where the
time goes). ``available()`` says whether numba is installed; ``movement_batch.evaluate_batch``
uses this kernel when it is and falls back to the numpy form otherwise. Rows the closed form
does not count (a spatial dim indexing two ranks of one tensor) come back flagged and are
evaluated one by one.
"""
from __future__ import annotations

import numpy as np

try:
    import numba
except ImportError:     # the kernel is optional; movement_batch keeps the numpy form
    numba = None


def available() -> bool:
    return numba is not None


def _arrivals(ext, row, n_above, nu_dim, nu_str, K, pre, w, P, rank_lo, rank_hi, S, KEEP, b, lvl, out):
    """Weighted fetches of a box with extents ``ext[row]`` over the first ``n_above`` non-unit
    loops (those outside the level), for every data space (into ``out[S]``). ``K[j, s]``: loop
    j's projected step less the steps of every non-unit loop inside it (the wraps), data space
    s's ranks packed into one exact integer (``_Structure.pack``), so t_j == t is one comparison
    of K[j, s] with K[last, s]. ``ext`` is read at ``ext[row]``; data spaces level ``lvl`` does
    not keep (``KEEP[b, lvl]``) are skipped, all of them counted when ``lvl`` < 0. (Indices
    rather than array views: a view costs reference counting on every call.)"""
    last = n_above - 1        # the innermost non-unit loop outside the level (-1: none)
    for s in range(S):
        if lvl >= 0 and not KEEP[b, lvl, s]:
            out[s] = 0
            continue
        full = 1
        for r in range(rank_lo[s], rank_hi[s]):
            full *= ext[row, r]
        if last < 0:
            out[s] = full
            continue
        kept = 1
        for r in range(rank_lo[s], rank_hi[s]):
            t = P[r, nu_dim[last]] * nu_str[last]
            rem = ext[row, r] - (t if t >= 0 else -t)
            kept *= rem if rem > 0 else 0
        diff = full - kept
        w_eq = 0
        key = K[last, s]
        for j in range(n_above):
            if K[j, s] == key:
                w_eq += w[j]
        steps = pre[n_above] - 1
        out[s] = full + full * (steps - w_eq) + diff * w_eq


def _distinct_rank(fx, ax, n):
    """Distinct sums of a*x over up to ``n`` (factor, step) terms: a product, the two-term
    closed form (see ``movement_batch._distinct``), or an enumeration for three or more."""
    cnt = 0
    f1 = f2 = a1 = a2 = 1
    prod = 1
    for t in range(n):
        f = fx[t]
        if f > 1:
            cnt += 1
            prod *= f
            if cnt == 1:
                f1, a1 = f, ax[t]
            elif cnt == 2:
                f2, a2 = f, ax[t]
    if cnt <= 1:
        return prod
    if cnt > 2:
        # enumerate the sums (at most the level's fan-out of them) and count the distinct ones
        vals = np.zeros(prod, np.int64)
        size = 1
        for t in range(n):
            f = fx[t]
            if f > 1:
                for x in range(1, f):
                    for i in range(size):
                        vals[x * size + i] = vals[i] + x * ax[t]
                size *= f
        vals.sort()
        distinct = 1
        for i in range(1, prod):
            if vals[i] != vals[i - 1]:
                distinct += 1
        return distinct
    g = np.gcd(a1, a2)
    c1 = f1 - a2 // g
    c2 = f2 - a1 // g
    return f1 * f2 - (c1 if c1 > 0 else 0) * (c2 if c2 > 0 else 0)


def _kernel(T, SX, SY, PERM, KEEP, P, rp, rdim, rcoef, rank_lo, rank_hi, rw, first_fan, cap_fan, inst, cluster, block,
            e_rd, e_fl, e_up, leak, rbw, wbw, macs, mac_pj, shared_dim, pack, bshift,
            reads, fills, updates, util, tcyc, cyc, energy, flag):
    B, L, D = T.shape
    S = rank_lo.shape[0]
    R = P.shape[0]
    sp = np.empty((L, D), np.int64)
    inner = np.empty((L + 1, D), np.int64)
    ext = np.empty((L, R), np.int64)
    part = np.empty((L, S), np.int64)
    arr = np.empty((L, S), np.int64)
    n_before = np.empty(L, np.int64)
    nu_dim = np.empty(L * D, np.int64)
    nu_str = np.empty(L * D, np.int64)
    nu_f = np.empty(L * D, np.int64)
    suf = np.zeros((L * D + 1, S), np.int64)
    K = np.zeros((L * D, S), np.int64)
    pre = np.empty(L * D + 1, np.int64)
    w = np.empty(L * D, np.int64)
    dist = np.empty((L, S), np.int64)
    tmp = np.empty(S, np.int64)
    box = np.empty((1, R), np.int64)
    tfx = np.empty(2 * D, np.int64)
    tax = np.empty(2 * D, np.int64)
    rank_dist = np.empty(R, np.int64)
    tomac = np.empty(S, np.int64)
    tdim = np.empty(D, np.int64)
    spin = np.empty((L + 1, D), np.int64)
    for b in range(B):
        flag[b] = 0
        for d in range(D):
            inner[L, d] = 1
        for l in range(L - 1, -1, -1):
            for d in range(D):
                sp[l, d] = SX[b, l, d] * SY[b, l, d]
                inner[l, d] = inner[l + 1, d] * T[b, l, d] * sp[l, d]
        t_all = 1
        for l in range(L):
            for d in range(D):
                t_all *= T[b, l, d]
        for l in range(L):
            for s in range(S):
                if not KEEP[b, l, s]:   # only the kept tensors' tiles are used (_arrivals skips the rest)
                    continue
                for r in range(rank_lo[s], rank_hi[s]):
                    acc = 1
                    for z in range(rp[r], rp[r + 1]):
                        acc += rcoef[z] * (inner[l, rdim[z]] - 1)
                    ext[l, r] = acc
        # distinct words over the run per level: all temporal factors x spatial at and below
        for d in range(D):
            td = 1
            for j in range(L):
                td *= T[b, j, d]
            tdim[d] = td
            spin[L, d] = 1
        for l in range(L - 1, -1, -1):
            for d in range(D):
                spin[l, d] = spin[l + 1, d] * sp[l, d]
        for l in range(L):
            for s in range(S):
                if not (rw[s] and KEEP[b, l, s]):   # only read-write tensors use it
                    part[l, s] = 0
                    continue
                prod = 1
                for r in range(rank_lo[s], rank_hi[s]):
                    acc = 1
                    for z in range(rp[r], rp[r + 1]):
                        acc += rcoef[z] * (tdim[rdim[z]] * spin[l, rdim[z]] - 1)
                    prod *= acc
                part[l, s] = prod
        # non-unit temporal loops, outermost first, with strides and weights
        n = 0
        pre[0] = 1
        for l in range(L):
            n_before[l] = n
            for k in range(D):
                d = PERM[b, l, k]
                f = T[b, l, d]
                if f > 1:
                    nu_dim[n] = d
                    nu_str[n] = sp[l, d] * inner[l + 1, d]
                    nu_f[n] = f
                    w[n] = (f - 1) * pre[n]
                    pre[n + 1] = pre[n] * f
                    n += 1
        # packed projected steps less the wraps of the loops inside (see _arrivals): per data
        # space one integer, not one per rank, so the comparisons below are one per loop
        for s in range(S):
            suf[n, s] = 0
        for j in range(n - 1, -1, -1):
            for s in range(S):
                step = pack[nu_dim[j], s] * nu_str[j]
                suf[j, s] = suf[j + 1, s] + step
                K[j, s] = step - suf[j + 1, s]
        for l in range(L):
            _arrivals(ext, l, n_before[l], nu_dim, nu_str, K, pre, w, P, rank_lo, rank_hi, S, KEEP, b, l, tmp)
            for s in range(S):
                arr[l, s] = tmp[s]
        # distinct child tiles per level and data space
        for l in range(L):
            for r in range(R):
                rank_dist[r] = 1
            if l >= first_fan and cap_fan[l]:
                for r in range(R):
                    if rp[r + 1] - rp[r] == 1:
                        # one dim: its X and Y loops never collide (see movement_batch._distinct)
                        rank_dist[r] = sp[l, rdim[rp[r]]]
                        continue
                    nt = 0
                    for z in range(rp[r], rp[r + 1]):
                        d = rdim[z]
                        tfx[nt] = SX[b, l, d]
                        tax[nt] = rcoef[z] * SY[b, l, d] * inner[l + 1, d]
                        nt += 1
                        tfx[nt] = SY[b, l, d]
                        tax[nt] = rcoef[z] * inner[l + 1, d]
                        nt += 1
                    rank_dist[r] = _distinct_rank(tfx, tax, nt)
                for d in range(D):
                    if shared_dim[d] and sp[l, d] > 1:
                        flag[b] = 1
            for s in range(S):
                prod = 1
                for r in range(rank_lo[s], rank_hi[s]):
                    prod *= rank_dist[r]
                dist[l, s] = prod
        # operands and partial sums at the MAC side
        last_sp = False
        for d in range(D):
            if sp[L - 1, d] > 1:
                last_sp = True
        if last_sp:
            for r in range(R):
                acc = 1
                for z in range(rp[r], rp[r + 1]):
                    acc += rcoef[z] * (sp[L - 1, rdim[z]] - 1)
                box[0, r] = acc
            _arrivals(box, 0, n, nu_dim, nu_str, K, pre, w, P, rank_lo, rank_hi, S, KEEP, b, -1, tomac)
        # per data space: the keeper chain
        for s in range(S):
            innerk = -1
            for l in range(L):
                if KEEP[b, l, s]:
                    innerk = l
            kk = 1
            for j in range(innerk, L - 1 if last_sp else L):
                kk *= dist[j, s]
            base = (tomac[s] if last_sp else t_all) * kk
            seen_first = False
            for l in range(L):
                if not KEEP[b, l, s]:
                    reads[b, l, s] = 0
                    fills[b, l, s] = 0
                    updates[b, l, s] = 0
                    continue
                outer = not seen_first
                seen_first = True
                # the next inner keeper, and the distinct child tiles on the way to it
                child = -1
                k = dist[l, s]
                for j in range(l + 1, L):
                    if KEEP[b, j, s]:
                        child = j
                        break
                    k *= dist[j, s]
                if rw[s]:
                    fills[b, l, s] = 0 if outer else arr[l, s] - part[l, s]
                    if child >= 0:
                        updates[b, l, s] = arr[child, s] * k
                        reads[b, l, s] = (arr[child, s] - part[child, s]) * k
                    else:
                        updates[b, l, s] = base
                        reads[b, l, s] = base - part[l, s]
                else:
                    fills[b, l, s] = 0 if outer else arr[l, s]
                    updates[b, l, s] = 0
                    reads[b, l, s] = arr[child, s] * k if child >= 0 else base
        # utilized instances, cycles with bandwidth slowdown, energy
        u = 1
        for l in range(L):
            util[b, l] = u
            for d in range(D):
                u *= sp[l, d]
        cycles = t_all
        for l in range(L):
            rd = 0
            wr = 0
            for s in range(S):
                rd += reads[b, l, s]
                wr += fills[b, l, s] + updates[b, l, s]
            slow = 1.0
            if rd / t_all > rbw[l]:
                slow = min(slow, rbw[l] / (rd / t_all))
            if wr / t_all > wbw[l]:
                slow = min(slow, wbw[l] / (wr / t_all))
            lc = t_all if slow >= 1.0 else int(np.ceil(t_all / slow))
            if lc > cycles:
                cycles = lc
        tcyc[b] = t_all
        cyc[b] = cycles
        e = macs * mac_pj
        for l in range(L):
            clusters = util[b, l]
            nc = inst[l] // cluster[l]
            if nc < 1:
                nc = 1
            if nc < clusters:
                clusters = nc
            share = util[b, l] / clusters
            acc = 0.0
            bl = block[l]
            sh = bshift[l]
            for s in range(S):
                if bl == 1:     # an integer division costs tens of cycles: skip it when it is 1
                    acc += reads[b, l, s] * e_rd[l] + fills[b, l, s] * e_fl[l] + updates[b, l, s] * e_up[l]
                elif sh > 0:    # a power-of-two block: the ceiling division is a shift (counts are >= 0)
                    acc += (((reads[b, l, s] + bl - 1) >> sh) * e_rd[l] + ((fills[b, l, s] + bl - 1) >> sh) * e_fl[l]
                            + ((updates[b, l, s] + bl - 1) >> sh) * e_up[l])
                else:
                    acc += (((reads[b, l, s] + bl - 1) // bl) * e_rd[l] + ((fills[b, l, s] + bl - 1) // bl) * e_fl[l]
                            + ((updates[b, l, s] + bl - 1) // bl) * e_up[l])
            e += acc / share * util[b, l] + leak[l] * util[b, l] * cycles
        energy[b] = e


if numba is not None:
    _arrivals = numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")(_arrivals)
    _distinct_rank = numba.njit(cache=True, nogil=True, error_model="numpy")(_distinct_rank)
    _kernel = numba.njit(cache=True, nogil=True, error_model="numpy")(_kernel)


def _static(st) -> tuple:
    """The kernel's per-(hierarchy, nest) arguments, built once and kept on the structure."""
    k = getattr(st, "_jit_args", None)
    if k is not None:
        return k
    D = len(st.dims)
    rank_lo = st.starts.astype(np.int64)
    rank_hi = np.append(st.starts[1:], st.P.shape[0]).astype(np.int64)
    cap_fan = np.array([tuple(f) != (1, 1) for f in st.fan])
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
    k = (st.P.astype(np.int64), rp, rdim, rcoef, rank_lo, rank_hi, st.rw.astype(np.bool_), 0, cap_fan,
         st.inst.astype(np.int64), st.cluster.astype(np.int64), st.block.astype(np.int64),
         st.e[:, 0].astype(np.float64), st.e[:, 1].astype(np.float64), st.e[:, 2].astype(np.float64),
         st.leak.astype(np.float64), st.rbw.astype(np.float64), st.wbw.astype(np.float64),
         int(st.macs), float(st.mac_pj), shared, st.pack.astype(np.int64), bshift)
    st._jit_args = k
    return k


def run(st, m):
    """Evaluate every row of ``m`` (a ``MappingArrays``) with the compiled kernel; returns
    (reads, fills, updates, util, compute_cycles, cycles, energy, flagged rows)."""
    B, L, D = m.temporal.shape
    S = st.S
    reads = np.empty((B, L, S), np.int64)
    fills = np.empty((B, L, S), np.int64)
    updates = np.empty((B, L, S), np.int64)
    util = np.empty((B, L), np.int64)
    tcyc = np.empty(B, np.int64)
    cyc = np.empty(B, np.int64)
    energy = np.empty(B, np.float64)
    flag = np.empty(B, np.int64)
    k = _static(st)
    _kernel(np.ascontiguousarray(m.temporal, np.int64), np.ascontiguousarray(m.spatial_x, np.int64),
            np.ascontiguousarray(m.spatial_y, np.int64), np.ascontiguousarray(m.perm, np.int64),
            np.ascontiguousarray(m.keep, np.bool_), *k,
            reads, fills, updates, util, tcyc, cyc, energy, flag)
    if not st.packable:     # rank vectors too large to pack into one int64: every row one by one
        flag[:] = 1
    return reads, fills, updates, util, tcyc, cyc, energy, flag.astype(bool)
