"""Source of the ``sim.cost.engines.jit`` kernel specialised to one (hierarchy, nest) *shape*: the
levels, dims and data spaces, each rank's dims and coefficients, which tensors each level may
keep and which levels fan out. Everything else (bounds, energies, bandwidths, block sizes) stays
a run-time argument, so one compiled kernel serves every conv layer on one hierarchy.

Why generate: with the shape fixed, every loop over levels, dims, ranks and data spaces is
unrolled into scalar variables (``t_2_5``: level 2's temporal factor of dim 5), the sparse
projections become straight-line sums, levels that cannot fan out or keep a tensor cost nothing,
and the compiler keeps the work in registers; a generic kernel spends most of its time on index
arithmetic and loops of one or two iterations. Only the mapping-dependent parts stay loops: the
non-unit temporal loops in each level's permutation order and the stride comparisons over them.

The formulas are the module docstring of ``sim.cost.engines.batch`` (and ``_arrivals`` of
``sim.cost.engines.jit``). The source is written to a cache directory under a name hashing the shape
and the sources it depends on, so numba's ``cache=True`` keeps the compiled kernel across
processes (``movement_jit.kernel_for``).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    """What the generated source depends on (hashable: the key of a compiled kernel)."""
    L: int
    D: int
    S: int
    ranks: tuple[tuple[tuple[int, int], ...], ...]   # per rank: (dim, coefficient) terms
    owner: tuple[int, ...]                            # data space of each rank
    rw: tuple[bool, ...]                              # per data space
    may: tuple[tuple[bool, ...], ...]                 # [L][S] may the level keep the data space
    fans: tuple[bool, ...]                            # [L] does the level fan out to the next
    shared: tuple[tuple[int, ...], ...]               # per data space: dims indexing two of its ranks


def _prod(xs: list[str]) -> str:
    xs = [x for x in xs if x != "1"]
    return " * ".join(xs) if xs else "1"


def source(sh: Shape) -> str:
    L, D, S = sh.L, sh.D, sh.S
    R = len(sh.ranks)
    ranks_of = [[r for r in range(R) if sh.owner[r] == s] for s in range(S)]
    fan = [l for l in range(L) if sh.fans[l]]

    def sp(l: int, d: int) -> str:          # spatial factor (1 where the level cannot fan out)
        return f"s_{l}_{d}" if sh.fans[l] else "1"

    def inn(l: int, d: int) -> str:         # iteration span of one instance of level l
        return f"in_{l}_{d}" if l < L else "1"

    o: list[str] = []
    w = o.append
    w("import numpy as np")
    w("from sim.cost.engines.jitloop import _distinct_rank")
    w("")
    w("")
    w("def kernel(T, SX, SY, PERM, KEEP, Pm, pack, inst_c, block, bshift, e_rd, e_fl, e_up, leak, rbw, wbw,")
    w("           macs, mac_pj, nvals, reads, fills, updates, util, tcyc, cyc, energy, flag):")
    w("    B = T.shape[0]")
    w(f"    nu_dim = np.empty({L * D}, np.int64)")
    w(f"    nu_str = np.empty({L * D}, np.int64)")
    w(f"    w = np.empty({L * D}, np.int64)")
    w(f"    pre = np.empty({L * D + 1}, np.int64)")
    w(f"    K = np.empty(({L * D}, {S}), np.int64)")
    w(f"    strd = np.empty({L * D}, np.int64)")
    w(f"    arr = np.zeros(({L}, {S}), np.int64)")
    w(f"    part = np.zeros(({L}, {S}), np.int64)")
    w(f"    tfx = np.empty({2 * D}, np.int64)")
    w(f"    tax = np.empty({2 * D}, np.int64)")
    w("    vals = np.empty(nvals, np.int64)")
    w(f"    dist = np.ones(({L}, {S}), np.int64)     # levels without a fan-out keep 1")
    w(f"    tomac = np.zeros({S}, np.int64)")
    w(f"    rw = {tuple(bool(x) for x in sh.rw)}")
    w("    for b in range(B):")
    ind = "        "
    # factors; a spatial factor > 1 where the level cannot fan out is not a legal mapping: flagged
    w(ind + "bad = False")
    for l in range(L):
        for d in range(D):
            w(ind + f"t_{l}_{d} = T[b, {l}, {d}]")
        if sh.fans[l]:
            for d in range(D):
                w(ind + f"s_{l}_{d} = SX[b, {l}, {d}] * SY[b, {l}, {d}]")
        else:
            w(ind + f"for d in range({D}):")
            w(ind + f"    bad |= ((SX[b, {l}, d] - 1) | (SY[b, {l}, d] - 1)) != 0")
    for l in range(L - 1, -1, -1):
        for d in range(D):
            w(ind + f"in_{l}_{d} = " + _prod([inn(l + 1, d), f"t_{l}_{d}", sp(l, d)]))
    for d in range(D):
        w(ind + f"td_{d} = " + _prod([f"t_{l}_{d}" for l in range(L)]))
    w(ind + "t_all = " + _prod([f"td_{d}" for d in range(D)]))
    # tile extents (ranks of tensors the level may keep) and the read-write tensors' partitions
    for l in range(L):
        for s in range(S):
            if not sh.may[l][s]:
                continue
            for r in ranks_of[s]:
                w(ind + f"e_{l}_{r} = 1" + "".join(f" + {c} * ({inn(l, d)} - 1)" for d, c in sh.ranks[r]))
            w(ind + f"full_{l}_{s} = " + _prod([f"e_{l}_{r}" for r in ranks_of[s]]))
            if sh.rw[s]:
                terms = []
                for r in ranks_of[s]:
                    sums = "".join(f" + {c} * (" + _prod([f"td_{d}"] + [sp(j, d) for j in range(l, L)]) + " - 1)"
                                   for d, c in sh.ranks[r])
                    terms.append(f"(1{sums})")
                w(ind + f"part[{l}, {s}] = " + " * ".join(terms))
    # strides of every (level, dim) loop: its step in its dim
    for l in range(L):
        for d in range(D):
            w(ind + f"strd[{l * D + d}] = " + _prod([sp(l, d), inn(l + 1, d)]))
    # non-unit temporal loops, outermost first; a unit loop is written and then overwritten
    w(ind + "n = 0")
    w(ind + "pre[0] = 1")
    for l in range(L):
        w(ind + f"nb_{l} = n")
        w(ind + f"for k in range({D}):")
        w(ind + f"    d = PERM[b, {l}, k]")
        w(ind + f"    f = T[b, {l}, d]")
        w(ind + "    nu_dim[n] = d")
        w(ind + f"    nu_str[n] = strd[{l * D} + d]")
        w(ind + "    w[n] = (f - 1) * pre[n]")
        w(ind + "    pre[n + 1] = pre[n] * f")
        w(ind + "    n += f > 1")
    # packed projected steps less the wraps of the loops inside (movement_jit._arrivals)
    for s in range(S):
        w(ind + f"suf_{s} = 0")
    w(ind + "for j in range(n - 1, -1, -1):")
    w(ind + "    dj = nu_dim[j]")
    w(ind + "    sj = nu_str[j]")
    for s in range(S):
        w(ind + f"    st = pack[dj, {s}] * sj")
        w(ind + f"    K[j, {s}] = st - suf_{s}")
        w(ind + f"    suf_{s} += st")

    def arrivals(nab: str, tag: str, box: dict[int, str], s: int, out: str, ind2: str) -> None:
        """Emit ``out`` = weighted fetches of a box (extents ``box[r]``) of data space s over
        the first ``nab`` non-unit loops (``dl{tag}``, ``sl{tag}``: the innermost of them).
        Every temporary gets its own name: numba's SSA pass is slow on reassigned names."""
        t = f"{tag}_{s}"
        full = _prod([box[r] for r in ranks_of[s]])
        w(ind2 + f"if {nab} == 0:")
        w(ind2 + f"    {out} = {full}")
        w(ind2 + "else:")
        kept = []
        for r in ranks_of[s]:
            w(ind2 + f"    tr{t}_{r} = Pm[{r}, dl{tag}] * sl{tag}")
            w(ind2 + f"    rem{t}_{r} = {box[r]} - abs(tr{t}_{r})")
            kept.append(f"max(rem{t}_{r}, 0)")
        w(ind2 + f"    key{t} = K[{nab} - 1, {s}]")
        w(ind2 + f"    weq{t} = 0")
        w(ind2 + f"    for j in range({nab}):")
        w(ind2 + f"        weq{t} += w[j] * (K[j, {s}] == key{t})")
        w(ind2 + f"    full{t} = {full}")
        w(ind2 + f"    {out} = full{t} + full{t} * (pre[{nab}] - 1 - weq{t}) + (full{t} - {_prod(kept)}) * weq{t}")

    def last_loop(nab: str, tag: str) -> None:
        w(ind + f"dl{tag} = nu_dim[max({nab} - 1, 0)]")
        w(ind + f"sl{tag} = nu_str[max({nab} - 1, 0)]")

    for l in range(L):
        if not any(sh.may[l]):
            continue
        last_loop(f"nb_{l}", f"_{l}")
        for s in range(S):
            if not sh.may[l][s]:
                continue
            w(ind + f"if KEEP[b, {l}, {s}]:")
            arrivals(f"nb_{l}", f"_{l}", {r: f"e_{l}_{r}" for r in ranks_of[s]}, s, f"arr[{l}, {s}]", ind + "    ")
    # distinct child tiles under the levels that fan out
    for l in fan:
        for s in range(S):
            factors = []
            for r in ranks_of[s]:
                terms = sh.ranks[r]
                if len(terms) == 1:
                    factors.append(sp(l, terms[0][0]))
                    continue
                nt = 0
                for d, c in terms:
                    w(ind + f"tfx[{nt}] = SX[b, {l}, {d}]")
                    w(ind + f"tax[{nt}] = {c} * SY[b, {l}, {d}] * {inn(l + 1, d)}")
                    w(ind + f"tfx[{nt + 1}] = SY[b, {l}, {d}]")
                    w(ind + f"tax[{nt + 1}] = {c} * {inn(l + 1, d)}")
                    nt += 2
                w(ind + f"dr_{l}_{r} = _distinct_rank(tfx, tax, {nt}, vals)")
                w(ind + f"bad |= dr_{l}_{r} < 0")
                factors.append(f"dr_{l}_{r}")
            w(ind + f"dist[{l}, {s}] = " + _prod(factors))
            for d in sh.shared[s]:
                w(ind + f"bad |= {sp(l, d)} > 1")
    # operands and partial sums at the MAC side when the innermost level fans out to them
    if sh.fans[L - 1]:
        w(ind + "last_sp = (" + " * ".join(sp(L - 1, d) for d in range(D)) + ") > 1")
        w(ind + "if last_sp:")
        w(ind + "    dl_m = nu_dim[max(n - 1, 0)]")
        w(ind + "    sl_m = nu_str[max(n - 1, 0)]")
        for s in range(S):
            box = {r: "(1" + "".join(f" + {c} * ({sp(L - 1, d)} - 1)" for d, c in sh.ranks[r]) + ")"
                   for r in ranks_of[s]}
            arrivals("n", "_m", box, s, f"tomac[{s}]", ind + "    ")
    else:
        w(ind + "last_sp = False")
    # per data space: the keeper chain, innermost first (loops: cheap here, and short to compile)
    w(ind + f"for s in range({S}):")
    w(ind + "    first = 0")
    w(ind + f"    while first < {L - 1} and not KEEP[b, first, s]:")
    w(ind + "        first += 1")
    w(ind + "    child = -1")
    w(ind + "    run = 1      # distinct child tiles between a keeper and the next inner one")
    w(ind + f"    for l in range({L - 1}, -1, -1):")
    w(ind + f"        own = 1 if last_sp and l == {L - 1} else dist[l, s]")
    w(ind + "        if not KEEP[b, l, s]:")
    w(ind + "            reads[b, l, s] = 0")
    w(ind + "            fills[b, l, s] = 0")
    w(ind + "            updates[b, l, s] = 0")
    w(ind + "            run *= own")
    w(ind + "            continue")
    w(ind + "        k = own * run     # (with a spatial box at the MACs the last fan-out is in the box)")
    w(ind + "        if child < 0:")
    w(ind + "            up = (tomac[s] if last_sp else t_all) * k")
    w(ind + "            rx = up - part[l, s] if rw[s] else up")
    w(ind + "        else:")
    w(ind + "            up = arr[child, s] * k")
    w(ind + "            rx = (arr[child, s] - part[child, s]) * k if rw[s] else up")
    w(ind + "        if rw[s]:")
    w(ind + "            fl = 0 if first == l else arr[l, s] - part[l, s]")
    w(ind + "        else:")
    w(ind + "            fl = 0 if first == l else arr[l, s]")
    w(ind + "            up = 0")
    w(ind + "        reads[b, l, s] = rx")
    w(ind + "        fills[b, l, s] = fl")
    w(ind + "        updates[b, l, s] = up")
    w(ind + "        child = l")
    w(ind + "        run = 1")
    # utilized instances, cycles with Timeloop's bandwidth slowdown, energy
    w(ind + "u_0 = 1")
    for l in range(L):
        w(ind + f"util[b, {l}] = u_{l}")
        w(ind + f"u_{l + 1} = " + _prod([f"u_{l}"] + [sp(l, d) for d in range(D)]))
    w(ind + "cycles = t_all")
    w(ind + f"for l in range({L}):")
    w(ind + "    rd = 0")
    w(ind + "    wr = 0")
    w(ind + f"    for s in range({S}):")
    w(ind + "        rd += reads[b, l, s]")
    w(ind + "        wr += fills[b, l, s] + updates[b, l, s]")
    w(ind + "    slow = 1.0")
    w(ind + "    if rbw[l] < np.inf:     # (a division costs ~15 cycles: none for an unlimited level)")
    w(ind + "        x = rd / t_all")
    w(ind + "        if x > rbw[l]:")
    w(ind + "            slow = min(slow, rbw[l] / x)")
    w(ind + "    if wbw[l] < np.inf:")
    w(ind + "        x = wr / t_all")
    w(ind + "        if x > wbw[l]:")
    w(ind + "            slow = min(slow, wbw[l] / x)")
    w(ind + "    if slow < 1.0:")
    w(ind + "        lc = int(np.ceil(t_all / slow))")
    w(ind + "        if lc > cycles:")
    w(ind + "            cycles = lc")
    w(ind + "tcyc[b] = t_all")
    w(ind + "cyc[b] = cycles")
    w(ind + "e = macs * mac_pj")
    w(ind + f"for l in range({L}):")
    w(ind + "    ul = util[b, l]")
    w(ind + "    bl = block[l]")
    w(ind + "    sh = bshift[l]")
    w(ind + "    acc = 0.0")
    w(ind + f"    for s in range({S}):")
    w(ind + "        r_ = reads[b, l, s]")
    w(ind + "        f_ = fills[b, l, s]")
    w(ind + "        u_ = updates[b, l, s]")
    w(ind + "        if bl == 1:     # an integer division costs tens of cycles: none for block 1")
    w(ind + "            acc += r_ * e_rd[l] + f_ * e_fl[l] + u_ * e_up[l]")
    w(ind + "        elif sh > 0:    # a power-of-two block: the ceiling division is a shift (counts >= 0)")
    w(ind + "            acc += ((r_ + bl - 1) >> sh) * e_rd[l] + ((f_ + bl - 1) >> sh) * e_fl[l] + ((u_ + bl - 1) >> sh) * e_up[l]")
    w(ind + "        else:")
    w(ind + "            acc += ((r_ + bl - 1) // bl) * e_rd[l] + ((f_ + bl - 1) // bl) * e_fl[l] + ((u_ + bl - 1) // bl) * e_up[l]")
    w(ind + "    # the instances sharing one cluster access pay it once: acc / (u / clusters) * u")
    w(ind + "    cl = inst_c[l] if inst_c[l] < ul else ul")
    w(ind + "    e += acc * cl + leak[l] * ul * cycles")
    w(ind + "energy[b] = e")
    w(ind + "flag[b] = bad")
    return "\n".join(o) + "\n"
