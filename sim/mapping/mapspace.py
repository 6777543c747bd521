"""The space of multi-level mappings of one loop nest onto one storage hierarchy.

A mapping says, per storage level (innermost first): the temporal factor of every dim and the
order of those loops, the spatial factors along X and Y that fan out to the level below, and
which tensors the level keeps. Factorisations are perfect (the factors of a dim multiply to the
dim), as in Timeloop's mapper.

A point is one int64 gene row, three parts laid out one after the other:

    slot of every prime factor of every dim   P genes, each an index into the S = 3 x levels slots
                                              (slot 3L + 0: X of level L, + 1: Y, + 2: temporal)
    permutation per level, innermost first    levels x dims genes (dim indices)
    keep bit per level and tensor             levels x tensors genes (0/1)

Moving a prime between slots moves a factor between loops and never changes the product, so every
row is a perfect factorisation by construction. Slot order is loop order, innermost first (a
level's spatial loops sit inside its temporal loops), so the tile a level holds is spanned by the
slots up to and including its temporal slot.

What the constraints allow (fixed factors, X-only or Y-only dims, fixed innermost loops, forced
keep or bypass, no fan-out where the hierarchy has none) is built into which slot each prime may
take and which genes are free, so sampling and every operator respect it by construction. What
depends on the whole row (capacity per level, fan-out per level) is checked vectorised by
``valid``; generation repairs a violation by moving primes outwards (each move shrinks the tiles
and fan-outs below the destination), and an operator whose child cannot be repaired returns the
parent.

Nothing here evaluates a mapping: ``arrays`` hands the factors, permutations and keep bits to a
cost model as ``sim.cost.engines.batch.MappingArrays`` (levels and loop orders outermost first, as
``sim`` has them) and the search ranks by what it returns.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np

from .mapping import prime_factors
from ..cost.engines.batch import MappingArrays


X, Y, T = 0, 1, 2


class MapspaceError(ValueError):
    """Constraints that no mapping satisfies, or a constraint that names what does not exist."""


# ---------------------------------------------------------------------------- the description
@dataclass(frozen=True)
class TensorSpec:
    """A data space: one entry per rank, each a tuple of (dim index, coefficient) terms; the
    extent of a rank over a box of sizes ``b`` is ``sum(coef * (b[d] - 1)) + 1``."""
    name: str
    ranks: tuple[tuple[tuple[int, int], ...], ...]
    is_output: bool = False


@dataclass(frozen=True)
class LevelSpec:
    """One storage level as the mapspace sees it. ``capacity_words`` per instance (None:
    unbounded, e.g. DRAM); ``fanout_x`` / ``fanout_y``: the spatial fan-out to the level below
    (mesh columns / rows); ``keep`` per tensor: True forced keep, False forced bypass, None free;
    ``temporal_loops``: False for a level that only carries a fan-out (Timeloop's dummy
    ``inter_*_spatial`` level, whose temporal factors its front end fixes at 1)."""
    name: str
    capacity_words: int | None
    fanout_x: int = 1
    fanout_y: int = 1
    keep: tuple[bool | None, ...] = ()
    temporal_loops: bool = True


@dataclass(frozen=True)
class LevelConstraint:
    """What a user constrains at one level (Timeloop's ``temporal``/``spatial``/``bypass`` targets).

    ``temporal`` / ``spatial``: fixed factors (dim -> factor; the spatial one is X x Y);
    ``permutation``: dims fixed at the innermost temporal positions, innermost first;
    ``spatial_x`` / ``spatial_y``: dims whose spatial loops may lie only along X / only along Y;
    ``keep`` / ``bypass``: tensor names."""
    level: str
    temporal: tuple[tuple[str, int], ...] = ()
    spatial: tuple[tuple[str, int], ...] = ()
    permutation: tuple[str, ...] = ()
    spatial_x: tuple[str, ...] = ()
    spatial_y: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()
    bypass: tuple[str, ...] = ()


@dataclass(frozen=True)
class MapspaceSpec:
    dims: tuple[str, ...]
    sizes: tuple[int, ...]
    tensors: tuple[TensorSpec, ...]
    levels: tuple[LevelSpec, ...]          # innermost first; the last is the backing store
    constraints: tuple[LevelConstraint, ...] = ()
    # Each dim's spatial factor at a level along X or along Y, never both: Timeloop's spatial
    # directive lists a dim once (before or after ``split``), so mappings bound for a Timeloop
    # file, or compared with Timeloop's mapper, must stay inside that space.
    spatial_one_axis: bool = False

    def __post_init__(self):
        if len(self.dims) != len(self.sizes) or not self.dims:
            raise MapspaceError("mapspace: dims and sizes differ in length or are empty")
        if any(int(s) < 1 for s in self.sizes):
            raise MapspaceError(f"mapspace: every dim size must be >= 1, got {dict(zip(self.dims, self.sizes))}")
        if not self.levels:
            raise MapspaceError("mapspace: no storage level")
        for lv in self.levels:
            if len(lv.keep) != len(self.tensors):
                raise MapspaceError(f"mapspace: level {lv.name} has {len(lv.keep)} keep entries for "
                                    f"{len(self.tensors)} tensors")
            if lv.fanout_x < 1 or lv.fanout_y < 1:
                raise MapspaceError(f"mapspace: level {lv.name} has a fan-out below 1")


def _take(pool: list[int], f: int, what: str) -> list[int]:
    """Remove the prime factors of ``f`` from ``pool`` (the primes of a dim not yet pinned)."""
    taken = []
    for p in prime_factors(f):
        if p not in pool:
            raise MapspaceError(f"{what} does not divide what is left of the dim")
        pool.remove(p)
        taken.append(p)
    return taken


# ---------------------------------------------------------------------------- the space
@dataclass(frozen=True, eq=False)
class Mapspace:
    spec: MapspaceSpec
    prime_dim: np.ndarray        # [P] dim index of each prime gene
    prime_val: np.ndarray        # [P] the prime
    allowed: np.ndarray          # [P, S] bool: slots each prime may take
    perm_fixed: tuple[tuple[int, ...], ...]   # per level: dims pinned innermost
    keep_forced: np.ndarray      # [L, T] int: 1 keep, 0 bypass, -1 free
    fanout: np.ndarray           # [L, 2] X, Y
    capacity: np.ndarray         # [L] float, inf = unbounded

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, spec: MapspaceSpec) -> "Mapspace":
        L, D, Tn = len(spec.levels), len(spec.dims), len(spec.tensors)
        S = 3 * L
        names = [lv.name for lv in spec.levels]
        tnames = [t.name for t in spec.tensors]
        dim_ix = {d: i for i, d in enumerate(spec.dims)}
        fanout = np.array([[lv.fanout_x, lv.fanout_y] for lv in spec.levels], dtype=np.int64)
        capacity = np.array([np.inf if lv.capacity_words is None else float(lv.capacity_words)
                             for lv in spec.levels])
        keep = np.array([[-1 if k is None else int(k) for k in lv.keep] for lv in spec.levels],
                        dtype=np.int64).reshape(L, Tn)
        keep[L - 1, :] = np.where(keep[L - 1] == 0, 0, 1)   # the backing store holds everything
        if (keep[L - 1] == 0).any():
            raise MapspaceError(f"the outermost level {names[-1]} must keep every tensor")
        # Slots each dim may use: X/Y only where there is a fan-out.
        dim_slots = np.ones((D, S), dtype=bool)
        for lv in range(L):
            if not spec.levels[lv].temporal_loops:
                dim_slots[:, 3 * lv + T] = False
            if fanout[lv, 0] == 1:
                dim_slots[:, 3 * lv + X] = False
            if fanout[lv, 1] == 1:
                dim_slots[:, 3 * lv + Y] = False
        pools = [prime_factors(int(s)) for s in spec.sizes]
        pinned: list[list[tuple[int, int, tuple[int, ...]]]] = [[] for _ in range(D)]  # (prime, slots)
        perm_fixed: list[tuple[int, ...]] = [() for _ in range(L)]

        def dim_of(name: str, where: str) -> int:
            if name not in dim_ix:
                raise MapspaceError(f"constraint at {where} names dim {name!r}, not a dim of the problem "
                                    f"({', '.join(spec.dims)})")
            return dim_ix[name]

        def tensor_of(name: str, where: str) -> int:
            if name not in tnames:
                raise MapspaceError(f"constraint at {where} names data space {name!r}, not one of "
                                    f"{', '.join(tnames)}")
            return tnames.index(name)

        for c in spec.constraints:
            if c.level not in names:
                raise MapspaceError(f"constraint targets {c.level!r}, not a storage level "
                                    f"({', '.join(names)})")
            lv = names.index(c.level)
            for nm in c.spatial_x:
                dim_slots[dim_of(nm, c.level), 3 * lv + Y] = False
            for nm in c.spatial_y:
                dim_slots[dim_of(nm, c.level), 3 * lv + X] = False
            for nm, f in c.temporal:
                d = dim_of(nm, c.level)
                if f < 1:
                    raise MapspaceError(f"constraint at {c.level}: temporal factor {nm}={f} is not >= 1")
                dim_slots[d, 3 * lv + T] = False
                for p in _take(pools[d], f, f"constraint at {c.level}: temporal factor {nm}={f}"):
                    pinned[d].append((p, (3 * lv + T,)))
            for nm, f in c.spatial:
                d = dim_of(nm, c.level)
                if f < 1:
                    raise MapspaceError(f"constraint at {c.level}: spatial factor {nm}={f} is not >= 1")
                slots = tuple(3 * lv + k for k in (X, Y) if dim_slots[d, 3 * lv + k])
                dim_slots[d, 3 * lv + X] = dim_slots[d, 3 * lv + Y] = False
                primes = _take(pools[d], f, f"constraint at {c.level}: spatial factor {nm}={f}")
                if primes and not slots:
                    raise MapspaceError(f"constraint at {c.level}: spatial factor {nm}={f} but the level "
                                        f"has no fan-out for it")
                pinned[d] += [(p, slots) for p in primes]
            if c.permutation:
                perm = tuple(dim_of(nm, c.level) for nm in c.permutation)
                if len(set(perm)) != len(perm):
                    raise MapspaceError(f"constraint at {c.level}: permutation repeats a dim")
                perm_fixed[lv] = perm
            for nm in c.keep:
                keep[lv, tensor_of(nm, c.level)] = 1
            for nm in c.bypass:
                t = tensor_of(nm, c.level)
                if lv == L - 1:
                    raise MapspaceError(f"constraint bypasses {nm} at the outermost level {c.level}")
                keep[lv, t] = 0
        dims_, vals, allowed = [], [], []
        for d in range(D):
            for p, slots in pinned[d]:
                row = np.zeros(S, dtype=bool)
                row[list(slots)] = True
                dims_.append(d), vals.append(p), allowed.append(row)
            if pools[d] and not dim_slots[d].any():
                raise MapspaceError(f"the constraints leave no loop for dim {spec.dims[d]} "
                                    f"(factor {int(np.prod(pools[d]))} unplaced)")
            for p in pools[d]:
                dims_.append(d), vals.append(p), allowed.append(dim_slots[d].copy())
        allowed_arr = np.array(allowed, dtype=bool).reshape(len(vals), S)
        return cls(spec, np.array(dims_, dtype=np.int64), np.array(vals, dtype=np.int64), allowed_arr,
                   tuple(perm_fixed), keep, fanout, capacity)

    # ------------------------------------------------------------------ layout
    @property
    def n_levels(self) -> int:
        return len(self.spec.levels)

    @property
    def n_dims(self) -> int:
        return len(self.spec.dims)

    @property
    def n_tensors(self) -> int:
        return len(self.spec.tensors)

    @property
    def n_primes(self) -> int:
        return len(self.prime_val)

    @property
    def n_genes(self) -> int:
        return self.n_primes + self.n_levels * (self.n_dims + self.n_tensors)

    def split(self, genes: np.ndarray):
        """(prime slots [n, P], permutations [n, L, D], keep [n, L, T]) views of gene rows."""
        g = np.atleast_2d(genes)
        P, L, D, Tn = self.n_primes, self.n_levels, self.n_dims, self.n_tensors
        return (g[:, :P], g[:, P:P + L * D].reshape(len(g), L, D),
                g[:, P + L * D:].reshape(len(g), L, Tn))

    def join(self, slots: np.ndarray, perms: np.ndarray, keep: np.ndarray) -> np.ndarray:
        n = len(slots)
        return np.concatenate([slots, perms.reshape(n, -1), keep.reshape(n, -1)], axis=1).astype(np.int64)

    # ------------------------------------------------------------------ derived quantities
    def factors(self, genes: np.ndarray) -> np.ndarray:
        """[n, S, D] factor of every dim in every slot (slot 3L + X/Y/T): each prime gene
        multiplies its cell, all at once by one unbuffered ``multiply.at`` (exact integers;
        measured 2-9x faster than a pass per gene or a bincount per distinct prime, 1-200 rows)."""
        slots, _, _ = self.split(genes)
        n = len(slots)
        S, D = 3 * self.n_levels, self.n_dims
        F = np.ones(n * S * D, dtype=np.int64)
        if self.n_primes and n:
            if slots.min() < 0 or slots.max() >= S:    # a flat index would land in another row's cells
                raise IndexError(f"prime slot outside 0..{S - 1}")
            cell = (np.arange(n)[:, None] * S + slots) * D + self.prime_dim[None, :]
            np.multiply.at(F, cell.ravel(), np.broadcast_to(self.prime_val, cell.shape).ravel())
        return F.reshape(n, S, D)

    def tile_words(self, F: np.ndarray) -> np.ndarray:
        """[n, L, T] words of each tensor's tile at each level (the box of all slots at and below
        the level's temporal slot, projected through the tensor's ranks)."""
        box = np.cumprod(F, axis=1)[:, 2::3, :]          # [n, L, D]
        proj, rank_tensor = self._projection
        ext = 1.0 + (box - 1).astype(np.float64) @ proj.T        # [n, L, R] rank extents
        return np.multiply.reduceat(ext, rank_tensor, axis=2)

    @cached_property
    def _projection(self):
        """(coefficients [R, D] of every rank of every tensor, the first rank of each tensor)."""
        rows, starts = [], []
        for ts in self.spec.tensors:
            starts.append(len(rows))
            for rank in ts.ranks:
                r = np.zeros(self.n_dims)
                for d, coef in rank:
                    r[d] += coef
                rows.append(r)
        return np.array(rows).reshape(len(rows), self.n_dims), np.array(starts, dtype=np.int64)

    def violations(self, genes: np.ndarray):
        """(capacity overflow [n, L] bool, X/Y fan-out overflow [n, L, 2] bool; with
        ``spatial_one_axis`` a dim split over both X and Y at a level is a Y overflow there)."""
        _, _, keep = self.split(genes)
        return self.limits(self.factors(genes), keep)

    def limits(self, F: np.ndarray, keep: np.ndarray):
        """``violations`` of rows given by their factors [n, S, D] and keep bits [n, L, T]."""
        used = (self.tile_words(F) * keep).sum(axis=2)
        cap = used > self.capacity[None, :]
        spatial = np.stack([F[:, 0::3, :].prod(axis=2), F[:, 1::3, :].prod(axis=2)], axis=2)
        fan = spatial > self.fanout[None, :, :]
        if self.spec.spatial_one_axis:   # a dim on both axes counts as a Y violation: repair moves it out of Y
            fan[:, :, 1] |= ((F[:, 0::3, :] > 1) & (F[:, 1::3, :] > 1)).any(axis=2)
        return cap, fan

    def valid(self, genes: np.ndarray, limits: bool = True) -> np.ndarray:
        """Legal rows: every gene inside the space's constraints, capacity and fan-out respected
        (``limits=False``: the constraints alone, capacity and fan-outs unchecked)."""
        g = np.atleast_2d(genes)
        if g.shape[1] != self.n_genes:
            return np.zeros(len(g), dtype=bool)
        slots, perms, keep = self.split(g)
        S = 3 * self.n_levels
        ok = np.all((slots >= 0) & (slots < S), axis=1)
        sl = np.where(ok[:, None], slots, 0)
        ok &= np.all(self.allowed[np.arange(self.n_primes)[None, :], sl], axis=1)
        ok &= np.all(np.sort(perms, axis=2) == np.arange(self.n_dims), axis=(1, 2))
        for lv, fixed in enumerate(self.perm_fixed):
            if fixed:
                ok &= np.all(perms[:, lv, :len(fixed)] == np.array(fixed), axis=1)
        forced = self.keep_forced >= 0
        ok &= np.all(((keep == 0) | (keep == 1)), axis=(1, 2))
        ok &= np.all(np.where(forced[None], keep == self.keep_forced[None], True), axis=(1, 2))
        if limits and ok.any():
            cap, fan = self.violations(np.where(ok[:, None], g, self._anchor()[None, :]))
            ok &= ~cap.any(axis=1) & ~fan.any(axis=(1, 2))
        return ok

    def _anchor(self) -> np.ndarray:
        """A structurally legal row (every prime in its outermost allowed slot, identity-like
        permutations, forced keeps, free keeps off): where ``valid`` points rows it rejected
        early, so they do not break the vectorised capacity check."""
        slots = (self.allowed.shape[1] - 1 - np.argmax(self.allowed[:, ::-1], axis=1))[None, :]
        perms = np.stack([self._perm_fill(lv, np.arange(self.n_dims)) for lv in range(self.n_levels)])[None]
        keep = np.where(self.keep_forced >= 0, self.keep_forced, 0)[None]
        return self.join(slots, perms, keep)[0]

    @cached_property
    def _prime_class(self) -> np.ndarray:
        """[P] one id per (dim, value, allowed slots) of a prime gene: primes of one class are
        interchangeable (``neighbours``)."""
        cls: dict = {}
        return np.array([cls.setdefault((int(d), int(v), a.tobytes()), len(cls)) for d, v, a in
                         zip(self.prime_dim, self.prime_val, self.allowed)], dtype=np.int64)

    def _perm_fill(self, lv: int, order: np.ndarray) -> np.ndarray:
        fixed = list(self.perm_fixed[lv])
        return np.array(fixed + [d for d in order if d not in fixed], dtype=np.int64)

    # ------------------------------------------------------------------ canonical form
    def keys(self, genes: np.ndarray, F: np.ndarray | None = None) -> np.ndarray:
        """One hashable key per row that is equal exactly when two rows are the same mapping:
        factors per slot, the order of the loops with a factor above 1, and the keep bits of
        levels (two rows differing only in where equal primes sit or in the order of unit loops
        are one mapping). ``F``: the rows' ``factors`` when the caller has them."""
        g = np.atleast_2d(genes)
        if len(g) == 0:
            return np.zeros(0, dtype=np.dtype((np.void, 8)))
        F = self.factors(g) if F is None else F
        _, perms, keep = self.split(g)
        Ft = F[:, 2::3, :]                                   # temporal factors [n, L, D]
        nonunit = np.take_along_axis(Ft, perms, axis=2) > 1
        # unit loops sort after every non-unit loop, by dim index; non-unit ones keep their order
        pos = np.where(nonunit, np.arange(self.n_dims)[None, None, :], self.n_dims + perms)
        canon = np.take_along_axis(perms, np.argsort(pos, axis=2, kind="stable"), axis=2)
        canon = np.where(np.sort(pos, axis=2) < self.n_dims, canon, -1)
        rows = np.concatenate([F.reshape(len(g), -1), canon.reshape(len(g), -1),
                               keep.reshape(len(g), -1)], axis=1).astype(np.int64)
        rows = np.ascontiguousarray(rows)
        return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()

    # ------------------------------------------------------------------ generation
    def sample(self, n: int, rng: np.random.Generator, max_rounds: int = 64) -> np.ndarray:
        """``n`` legal rows. Each row places every prime in its outermost allowed slot with its own
        probability (drawn per row, so both shallow and deep tilings appear) and otherwise in a
        uniformly drawn allowed slot; overflows are then repaired by moving primes outwards.
        Raises ``MapspaceError`` when no legal mapping turns up (nothing fits)."""
        if n <= 0:
            return np.zeros((0, self.n_genes), dtype=np.int64)
        out: list[np.ndarray] = []
        got = 0
        for _ in range(max_rounds):
            want = max(2 * (n - got), 16)
            rows = self.repair(self._raw(want, rng), rng)
            rows = rows[self.valid(rows)]
            out.append(rows)
            got += len(rows)
            if got >= n:
                break
        allrows = np.concatenate(out) if out else np.zeros((0, self.n_genes), dtype=np.int64)
        if len(allrows) == 0:
            raise MapspaceError("no mapping fits: every sampled mapping overflows a level's capacity "
                                "or fan-out, even with every free factor at the outermost level")
        if len(allrows) < n:
            allrows = allrows[rng.integers(0, len(allrows), n)]
        return allrows[:n]

    def _raw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        P, S = self.allowed.shape
        slots = np.empty((n, P), dtype=np.int64)
        outer = (S - 1 - np.argmax(self.allowed[:, ::-1], axis=1))
        bias = rng.random(n)
        for j in range(P):
            choices = np.flatnonzero(self.allowed[j])
            pick = choices[rng.integers(0, len(choices), n)]
            slots[:, j] = np.where(rng.random(n) < bias, outer[j], pick)
        perms = np.empty((n, self.n_levels, self.n_dims), dtype=np.int64)
        for lv in range(self.n_levels):
            order = np.argsort(rng.random((n, self.n_dims)), axis=1)
            fixed = self.perm_fixed[lv]
            if fixed:
                free = np.array([d for d in range(self.n_dims) if d not in fixed], dtype=np.int64)
                order = np.concatenate([np.broadcast_to(np.array(fixed), (n, len(fixed))),
                                        free[np.argsort(rng.random((n, len(free))), axis=1)]], axis=1)
            perms[:, lv] = order
        keep = np.where(self.keep_forced[None] >= 0, self.keep_forced[None],
                        rng.random((n,) + self.keep_forced.shape) < 0.5).astype(np.int64)
        return self.join(slots, perms, keep)

    def repair(self, genes: np.ndarray, rng: np.random.Generator, rounds: int = 48) -> np.ndarray:
        """Move primes outwards until capacity and fan-out hold (or ``rounds`` run out): for each
        row with a violation, one movable prime from inside the innermost violation goes to a
        random allowed slot beyond it. Rows already legal are unchanged."""
        g = np.array(genes, dtype=np.int64, copy=True)
        P, S = self.allowed.shape
        active = np.arange(len(g))
        for _ in range(rounds):
            if len(active) == 0:
                break
            cap, fan = self.violations(g[active])
            # the innermost violated slot boundary per row: capacity at L -> slots <= 3L+2;
            # fan-out X at L -> slot 3L, Y -> slot 3L+1
            lim = np.full(len(active), S, dtype=np.int64)
            lo = np.zeros(len(active), dtype=np.int64)   # moved primes come from slots in [lo, lim]
            for lv in range(self.n_levels - 1, -1, -1):
                for k, bad in ((T, cap[:, lv]), (Y, fan[:, lv, 1]), (X, fan[:, lv, 0])):
                    s = 3 * lv + k
                    lim = np.where(bad, s, lim)
                    lo = np.where(bad, 0 if k == T else s, lo)
            bad_rows = lim < S
            active, lim, lo = active[bad_rows], lim[bad_rows], lo[bad_rows]
            if len(active) == 0:
                break
            slots = g[active, :P]
            src = (slots >= lo[:, None]) & (slots <= lim[:, None])
            # a destination strictly outside the violated range must exist for the prime
            beyond = self.allowed[None, :, :] & (np.arange(S)[None, None, :] > lim[:, None, None])
            movable = src & beyond.any(axis=2)
            has = movable.any(axis=1)
            active, movable, beyond = active[has], movable[has], beyond[has]
            if len(active) == 0:
                break
            pick = _random_true(movable, rng)
            g[active, pick] = _random_true(beyond[np.arange(len(active)), pick], rng)
        return g

    # ------------------------------------------------------------------ output
    def arrays(self, genes: np.ndarray, F: np.ndarray | None = None) -> MappingArrays:
        """The rows as ``sim``'s batch of mappings (levels and loop orders outermost first);
        ``F``: the rows' ``factors`` when the caller has them."""
        F = (self.factors(genes) if F is None else F)[:, ::-1]   # slots outermost first: T, Y, X per level
        _, perms, keep = self.split(genes)
        return MappingArrays(np.ascontiguousarray(F[:, 0::3, :]), np.ascontiguousarray(F[:, 2::3, :]),
                             np.ascontiguousarray(F[:, 1::3, :]), np.ascontiguousarray(perms[:, ::-1, ::-1]),
                             np.ascontiguousarray(keep[:, ::-1].astype(bool)))

    def describe(self) -> dict:
        return {"dims": dict(zip(self.spec.dims, self.spec.sizes)),
                "levels": [lv.name for lv in self.spec.levels],
                "tensors": [t.name for t in self.spec.tensors],
                "prime_genes": self.n_primes, "free_keep_bits": int((self.keep_forced < 0).sum())}


def neighbours(space: Mapspace, row: np.ndarray) -> np.ndarray:
    """Every legal mapping one change away, in the order its first gene row has among all single
    changes: one prime in another allowed slot, two free loops of one level swapped, one free keep
    bit flipped. A move of a prime equal to one already moved from the same slot is left out (the
    same mapping); other repeats (two unit loops swapped) stay for the caller's ``keys``."""
    P, D = space.n_primes, space.n_dims
    row = np.asarray(row)
    parts = []

    def copies(n: int) -> np.ndarray:
        return np.repeat(row[None, :], n, axis=0)
    # equal primes of one dim in one slot are interchangeable: moving any of them gives the same
    # mapping (the same ``keys``), so only the first is moved (a 2^17-long dim has 17 of them)
    if P:
        S = space.allowed.shape[1]
        _, first = np.unique(space._prime_class * S + row[:P], return_index=True)
        first = np.sort(first)                       # the first prime of each group, in gene order
        jj, to = np.nonzero(space.allowed[first])    # every allowed slot of each, slots in order
        j = first[jj]
        j, to = j[to != row[j]], to[to != row[j]]
        r = copies(len(j))
        r[np.arange(len(j)), j] = to
        parts.append(r)
    i, k = np.triu_indices(D, 1)
    for lv in range(space.n_levels):
        free = i >= len(space.perm_fixed[lv])
        a, b = P + lv * D + i[free], P + lv * D + k[free]
        r = copies(len(a))
        at = np.arange(len(a))
        r[at, a], r[at, b] = row[b], row[a]
        parts.append(r)
    flips = P + space.n_levels * D + np.flatnonzero((space.keep_forced < 0).ravel())
    r = copies(len(flips))
    r[np.arange(len(flips)), flips] ^= 1
    parts.append(r)
    nb = np.concatenate(parts).astype(np.int64, copy=False)
    if not len(nb):
        return np.zeros((0, len(row)), dtype=np.int64)
    if space.valid(row, limits=False)[0]:
        # each change keeps a structurally legal row legal (allowed slots, free loops, free
        # bits): only capacities and fan-outs are left to check
        cap, fan = space.violations(nb)
        return nb[~cap.any(axis=1) & ~fan.any(axis=(1, 2))]
    return nb[space.valid(nb)]


def _random_true(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per row of a bool matrix with at least one True, the column of a uniformly drawn True."""
    r = rng.random(mask.shape) * mask
    return np.argmax(r + mask * 1e-12, axis=1)


# ---------------------------------------------------------------------------- operators
class MapMutation(Protocol):
    def __call__(self, space: Mapspace, genes: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...


class MapCrossover(Protocol):
    def __call__(self, space: Mapspace, a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...


def keep_legal(space: Mapspace, parent: np.ndarray, child: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The child, repaired where it overflows; the parent where it cannot be repaired."""
    fixed = space.repair(child, rng, rounds=8)
    return np.where(space.valid(fixed)[:, None], fixed, parent)


@dataclass(frozen=True)
class FactorMove:
    """Move one prime factor of one dim to another allowed slot (a factor changes level, or
    temporal <-> spatial)."""

    def __call__(self, space, genes, rng):
        g = genes.copy()
        n, P = len(g), space.n_primes
        movable = space.allowed.sum(axis=1) > 1
        if P == 0 or not movable.any():
            return g
        j = np.flatnonzero(movable)[rng.integers(0, int(movable.sum()), n)]
        g[np.arange(n), j] = _random_true(space.allowed[j], rng)
        return keep_legal(space, genes, g, rng)


@dataclass(frozen=True)
class FactorSwap:
    """Swap the slots of two primes of different dims (trades a factor of one dim for a factor
    of another at the same two loops: the tile shape changes, its size stays similar)."""

    def __call__(self, space, genes, rng):
        g = genes.copy()
        n, P = len(g), space.n_primes
        if P < 2:
            return g
        a = rng.integers(0, P, n)
        b = rng.integers(0, P, n)
        rows = np.arange(n)
        sa, sb = g[rows, a], g[rows, b]
        ok = space.allowed[a, sb] & space.allowed[b, sa]
        g[rows, a] = np.where(ok, sb, sa)
        g[rows, b] = np.where(ok, sa, sb)
        return keep_legal(space, genes, g, rng)


@dataclass(frozen=True)
class PermutationSwap:
    """Swap two free loops of one level's order."""

    def __call__(self, space, genes, rng):
        g = genes.copy()
        n, D, P = len(g), space.n_dims, space.n_primes
        lv = rng.integers(0, space.n_levels, n)
        nfix = np.array([len(f) for f in space.perm_fixed])[lv]
        free = D - nfix
        rows = np.flatnonzero(free >= 2)
        if len(rows) == 0:
            return g
        i = nfix[rows] + (rng.random(len(rows)) * free[rows]).astype(np.int64)
        k = nfix[rows] + (rng.random(len(rows)) * free[rows]).astype(np.int64)
        base = P + lv[rows] * D
        gi, gk = g[rows, base + i].copy(), g[rows, base + k].copy()
        g[rows, base + i], g[rows, base + k] = gk, gi
        return g


@dataclass(frozen=True)
class KeepFlip:
    """Flip one free keep/bypass bit (keeping may overflow the level: then the parent stays)."""

    def __call__(self, space, genes, rng):
        free = np.flatnonzero((space.keep_forced < 0).ravel())
        if len(free) == 0:
            return genes.copy()
        g = genes.copy()
        base = space.n_primes + space.n_levels * space.n_dims
        col = base + free[rng.integers(0, len(free), len(g))]
        g[np.arange(len(g)), col] ^= 1
        return keep_legal(space, genes, g, rng)


@dataclass(frozen=True)
class MapUniformCrossover:
    """Per dim all of its primes, per level its whole permutation, per bit the keep, each from
    either parent (so factorisations and orders stay whole); an unrepairable child is ``a``."""

    def __call__(self, space, a, b, rng):
        n, L, D, Tn = len(a), space.n_levels, space.n_dims, space.n_tensors
        take_dim = rng.random((n, D)) < 0.5
        take_lvl = rng.random((n, L)) < 0.5
        mask = np.concatenate([take_dim[:, space.prime_dim], np.repeat(take_lvl, D, axis=1),
                               rng.random((n, L * Tn)) < 0.5], axis=1)
        child = np.where(mask, b, a)
        return keep_legal(space, a, child, rng)


def apply_weighted(mutations, weights, space, genes, rng) -> np.ndarray:
    """Each row mutated by one of ``mutations``, drawn with ``weights`` (shared with the one-level
    space's ``tuner.search.space.MutationMix``, which mixes its own operators the same way)."""
    p = np.asarray(weights, dtype=float)
    which = rng.choice(len(mutations), size=len(genes), p=p / p.sum())
    out = genes.copy()
    for i, m in enumerate(mutations):
        rows = np.flatnonzero(which == i)
        if len(rows):
            out[rows] = m(space, genes[rows], rng)
    return out


@dataclass(frozen=True)
class MapMutationMix:
    """One of the mapping mutations per row, with these weights."""
    mutations: tuple[MapMutation, ...] = (FactorMove(), FactorSwap(), PermutationSwap(), KeepFlip())
    weights: tuple[float, ...] = (0.45, 0.2, 0.25, 0.1)

    def __call__(self, space: "Mapspace", rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return apply_weighted(self.mutations, self.weights, space, rows, rng)


__all__ = ["MapspaceError", "TensorSpec", "LevelSpec", "LevelConstraint", "MapspaceSpec", "Mapspace",
           "FactorMove", "FactorSwap", "PermutationSwap", "KeepFlip",
           "MapUniformCrossover", "MapMutationMix", "apply_weighted", "keep_legal", "neighbours"]
