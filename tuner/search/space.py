"""The schedule space of one (workload, hardware) pair, valid by construction.

A point of the space is a row of seven integer genes, each an index into one axis of the space:

    DATAFLOW  into ``space.dataflows`` (only those the hardware supports)
    ORIENT    into ``space.orientations`` (False = standard spatial mapping, True = transposed;
              the transposed mapping is left out on square arrays, where it costs the same)
    TM TN TK  into ``space.tiles_m`` / ``tiles_n`` / ``tiles_k``
    ORDER     into ``space.loop_orders``
    DB        into ``space.double_buffer``

Tile candidates per GEMM-view dim are its divisors plus non-divisor tiles: balanced splits
``ceil(D / j)`` (the last tile is short, which is padding waste), those rounded up to the array
extent, and array-aligned powers of two. Which (tile_m, tile_n, tile_k, double_buffer) combinations
fit the buffers is decided once, with the simulator's own vectorised buffer check, so sampling,
mutation and crossover never produce an illegal schedule: an offspring that would not fit is
replaced by its parent. Vector workloads have a one-dim space (``tile_m`` elements per tile,
double buffering).

Mutation and crossover are small frozen objects, injected into the search; each maps a batch of gene
rows (and a ``numpy.random.Generator``) to a batch of valid gene rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import isqrt
from typing import Protocol

import numpy as np

from sim import LOOP_ORDERS, STANDARD_SPATIAL, HardwareConfig, Schedule, Workload
from sim.cost.analytical import ScheduleArrays, buffer_fits
from sim.hw.config import DATAFLOWS
from sim.mapping.mapspace import apply_weighted
from sim import default_schedule

DATAFLOW, ORIENT, TM, TN, TK, ORDER, DB = range(7)
N_GENES = 7
GENE_NAMES = ("dataflow", "orientation", "tile_m", "tile_n", "tile_k", "loop_order", "double_buffer")


class SpaceError(ValueError):
    """A workload with no legal schedule on this hardware, or a schedule outside the space."""


def divisors(d: int) -> list[int]:
    small = [i for i in range(1, isqrt(d) + 1) if d % i == 0]
    return sorted(set(small + [d // i for i in small]))


def tile_candidates(dim: int, extents: tuple[int, ...], splits: int = 16) -> tuple[int, ...]:
    """Tile sizes for one dim: divisors, balanced splits into up to ``splits`` tiles (the last
    tile short: padding waste) and those rounded up to each array extent, and extent * 2^i."""
    c = set(divisors(dim))
    for j in range(1, min(dim, splits) + 1):
        t = -(-dim // j)
        c.add(t)
        for e in extents:
            c.add(min(dim, -(-t // e) * e))
    for e in extents:
        t = e
        while t < dim:
            c.add(t)
            t *= 2
    return tuple(sorted(c))


def fused_epilogue(wl: Workload, hw: HardwareConfig) -> tuple[str, ...]:
    """Epilogue ops the vector unit applies on the fly (always worth fusing: it saves a DRAM round
    trip), so fusion is not a search axis."""
    return tuple(op for op in wl.epilogue if op in hw.vector.ops)


@dataclass(frozen=True, eq=False)
class ScheduleSpace:
    workload: Workload
    hw: HardwareConfig
    dataflows: tuple[str, ...]
    orientations: tuple[bool, ...]
    tiles_m: tuple[int, ...]
    tiles_n: tuple[int, ...]
    tiles_k: tuple[int, ...]
    loop_orders: tuple[str, ...]
    double_buffer: tuple[bool, ...]
    epilogue: tuple[str, ...]
    valid_tiles: np.ndarray  # bool [len(tiles_m), len(tiles_n), len(tiles_k), len(double_buffer)]

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, wl: Workload, hw: HardwareConfig, splits: int = 16, max_tiles: int = 1024) -> "ScheduleSpace":
        """``max_tiles``: tile combinations with more tiles per group than
        ``max(max_tiles, 4 x the fewest any legal combination needs)`` are pruned: every tile pays a
        DMA latency and an array fill, so they are never competitive, and they are what makes a
        tile-level measurement slow."""
        epi = fused_epilogue(wl, hw)
        if wl.is_mac and hw.levels:
            return cls._one_point(wl, hw, epi)
        if wl.is_mac:
            _, m, n, k = wl.gemm_view()
            ext = tuple(sorted({hw.array.rows, hw.array.cols}))
            dfs = tuple(d for d in DATAFLOWS if d in hw.array.dataflows)
            orients = (False, True) if hw.array.rows != hw.array.cols else (False,)
            tms, tns, tks = (tile_candidates(x, ext, splits) for x in (m, n, k))
            orders = LOOP_ORDERS
        else:
            d = wl.d
            big = max(1, d["in_elems"], d["out_elems"])
            dfs, orients, orders = ("ws",), (False,), ("mnk",)
            tms = tile_candidates(big, (hw.vector.lanes,), splits)
            tns = tks = (1,)
        dbs = (True, False)
        grid = np.stack(np.meshgrid(np.arange(len(tms)), np.arange(len(tns)), np.arange(len(tks)),
                                    np.arange(len(dbs)), indexing="ij"), axis=-1).reshape(-1, 4)
        sa = ScheduleArrays.from_mapping({
            "dataflow": DATAFLOWS.index(dfs[0]), "tile_m": np.asarray(tms)[grid[:, 0]],
            "tile_n": np.asarray(tns)[grid[:, 1]], "tile_k": np.asarray(tks)[grid[:, 2]],
            "double_buffer": np.asarray(dbs)[grid[:, 3]]})
        valid = buffer_fits(wl, hw, sa).reshape(len(tms), len(tns), len(tks), len(dbs))
        if not valid.any():
            raise SpaceError(f"no tile of {wl.key} fits the buffers of {hw.name}")
        dims = (m, n, k) if wl.is_mac else (big, 1, 1)
        count = np.ones(valid.shape[:3], dtype=np.int64)
        for axis, (d, cands) in enumerate(zip(dims, (tms, tns, tks))):
            shape = [1, 1, 1]
            shape[axis] = len(cands)
            count = count * (-(-d // np.asarray(cands, dtype=np.int64))).reshape(shape)
        count = np.broadcast_to(count[..., None], valid.shape)
        cap = max(max_tiles, 4 * int(count[valid].min()))
        valid = valid & (count <= cap)
        return cls(wl, hw, dfs, orients, tms, tns, tks, tuple(orders), dbs, epi, valid)

    @classmethod
    def _one_point(cls, wl: Workload, hw: HardwareConfig, epi: tuple[str, ...]) -> "ScheduleSpace":
        """On a machine with a storage hierarchy a MAC kernel's cost is its mapping's
        (``sim.cost.multilevel``), whatever the one-buffer schedule: the one-buffer space is the
        default schedule alone. Its tuning space is the mapspace, searched by
        ``tuner.tune_mappings`` (``tune_kernels`` sends such tasks there)."""
        s = default_schedule(wl, hw)
        return cls(wl, hw, (s.dataflow,), (s.transposed,), (s.tile_m,), (s.tile_n,), (s.tile_k,), (s.loop_order,),
                   (s.double_buffer,), epi, np.ones((1, 1, 1, 1), dtype=bool))

    # ------------------------------------------------------------------ size and encoding
    @property
    def radices(self) -> np.ndarray:
        return np.array([len(self.dataflows), len(self.orientations), len(self.tiles_m),
                         len(self.tiles_n), len(self.tiles_k), len(self.loop_orders),
                         len(self.double_buffer)], dtype=np.int64)

    @property
    def size(self) -> int:
        """Number of legal schedules in the space."""
        return int(self.valid_tiles.sum()) * len(self.dataflows) * len(self.orientations) * len(self.loop_orders)

    @property
    def raw_size(self) -> int:
        """Size of the Cartesian product before the buffer check."""
        return int(np.prod(self.radices))

    def encode(self, genes: np.ndarray) -> np.ndarray:
        """One int64 code per gene row (mixed radix), for de-duplication."""
        genes = np.atleast_2d(genes)
        code = np.zeros(len(genes), dtype=np.int64)
        for i, r in enumerate(self.radices):
            code = code * r + genes[:, i]
        return code

    def decode(self, codes: np.ndarray) -> np.ndarray:
        codes = np.asarray(codes, dtype=np.int64).copy()
        out = np.zeros((len(codes), N_GENES), dtype=np.int64)
        for i in range(N_GENES - 1, -1, -1):
            r = self.radices[i]
            out[:, i] = codes % r
            codes //= r
        return out

    def is_valid(self, genes: np.ndarray) -> np.ndarray:
        g = np.atleast_2d(genes)
        inside = np.all((g >= 0) & (g < self.radices), axis=1)
        gc = np.where(inside[:, None], g, 0)
        return inside & self.valid_tiles[gc[:, TM], gc[:, TN], gc[:, TK], gc[:, DB]]

    # ------------------------------------------------------------------ schedules
    def schedule(self, genes: np.ndarray) -> Schedule:
        g = [int(x) for x in np.asarray(genes).ravel()]
        df = self.dataflows[g[DATAFLOW]]
        std = STANDARD_SPATIAL[df]
        return Schedule(df, std[::-1] if self.orientations[g[ORIENT]] else std,
                        self.tiles_m[g[TM]], self.tiles_n[g[TN]], self.tiles_k[g[TK]],
                        self.loop_orders[g[ORDER]], self.double_buffer[g[DB]], self.epilogue)

    def schedules(self, genes: np.ndarray) -> list[Schedule]:
        return [self.schedule(row) for row in np.atleast_2d(genes)]

    def genes_of(self, s: Schedule) -> np.ndarray | None:
        """The gene row of a schedule, or None when it lies outside this space (a record written
        with other tile candidates, another hardware's dataflow, another epilogue)."""
        try:
            row = [self.dataflows.index(s.dataflow), self.orientations.index(s.transposed),
                   self.tiles_m.index(s.tile_m), self.tiles_n.index(s.tile_n),
                   self.tiles_k.index(s.tile_k), self.loop_orders.index(s.loop_order),
                   self.double_buffer.index(s.double_buffer)]
        except ValueError:
            return None
        if tuple(s.epilogue) != self.epilogue:
            return None
        g = np.array(row, dtype=np.int64)
        return g if self.is_valid(g)[0] else None

    def arrays(self, genes: np.ndarray) -> ScheduleArrays:
        """The schedule columns the analytical simulator takes."""
        g = np.atleast_2d(genes)
        df_idx = np.array([DATAFLOWS.index(d) for d in self.dataflows], dtype=np.int64)
        ord_idx = np.array([LOOP_ORDERS.index(o) for o in self.loop_orders], dtype=np.int64)
        unfused = len(set(self.workload.epilogue) - set(self.epilogue))
        return ScheduleArrays(df_idx[g[:, DATAFLOW]], np.asarray(self.orientations)[g[:, ORIENT]],
                              np.asarray(self.tiles_m)[g[:, TM]], np.asarray(self.tiles_n)[g[:, TN]],
                              np.asarray(self.tiles_k)[g[:, TK]], ord_idx[g[:, ORDER]],
                              np.asarray(self.double_buffer)[g[:, DB]],
                              np.full(len(g), unfused, dtype=np.int64))

    # ------------------------------------------------------------------ sampling and enumeration
    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` points drawn uniformly from the legal schedules (with replacement)."""
        flat = np.flatnonzero(self.valid_tiles)
        outer = len(self.dataflows) * len(self.orientations) * len(self.loop_orders)
        r = rng.integers(0, len(flat) * outer, size=n)
        tiles = np.stack(np.unravel_index(flat[r // outer], self.valid_tiles.shape), axis=1)
        rest = np.stack(np.unravel_index(r % outer, (len(self.dataflows), len(self.orientations),
                                                     len(self.loop_orders))), axis=1)
        out = np.empty((n, N_GENES), dtype=np.int64)
        out[:, DATAFLOW], out[:, ORIENT], out[:, ORDER] = rest[:, 0], rest[:, 1], rest[:, 2]
        out[:, TM], out[:, TN], out[:, TK], out[:, DB] = tiles.T
        return out

    def enumerate(self, chunk: int = 1 << 18):
        """Every legal point, in chunks of gene rows (for exhaustive search)."""
        flat = np.flatnonzero(self.valid_tiles)
        tiles = np.stack(np.unravel_index(flat, self.valid_tiles.shape), axis=1)
        outer = np.stack(np.meshgrid(np.arange(len(self.dataflows)), np.arange(len(self.orientations)),
                                     np.arange(len(self.loop_orders)), indexing="ij"), -1).reshape(-1, 3)
        per = max(1, chunk // len(outer))
        for start in range(0, len(tiles), per):
            t = np.repeat(tiles[start:start + per], len(outer), axis=0)
            o = np.tile(outer, (len(tiles[start:start + per]), 1))
            out = np.empty((len(t), N_GENES), dtype=np.int64)
            out[:, DATAFLOW], out[:, ORIENT], out[:, ORDER] = o[:, 0], o[:, 1], o[:, 2]
            out[:, TM], out[:, TN], out[:, TK], out[:, DB] = t.T
            yield out

    def describe(self) -> dict:
        return {"workload": self.workload.key, "hardware": self.hw.name, "size": self.size,
                "raw_size": self.raw_size, "dataflows": list(self.dataflows),
                "orientations": len(self.orientations), "tiles_m": len(self.tiles_m),
                "tiles_n": len(self.tiles_n), "tiles_k": len(self.tiles_k),
                "loop_orders": len(self.loop_orders)}


# ---------------------------------------------------------------------------- operators
class Mutation(Protocol):
    def __call__(self, space: ScheduleSpace, genes: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...


class Crossover(Protocol):
    def __call__(self, space: ScheduleSpace, a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...


def _keep_valid(space: ScheduleSpace, parent: np.ndarray, child: np.ndarray) -> np.ndarray:
    ok = space.is_valid(child)
    return np.where(ok[:, None], child, parent)


@dataclass(frozen=True)
class TileFactorMutation:
    """Move a factor between the tile loop and the outer loop of one dim: the tile grows or shrinks
    by a factor of 2 or 3, snapped to the nearest candidate (at least one candidate away)."""

    def __call__(self, space, genes, rng):
        g = genes.copy()
        n = len(g)
        dims = np.array([TM, TN, TK])[rng.integers(0, 3, n)]
        factor = np.where(rng.random(n) < 0.75, 2.0, 3.0)
        up = rng.random(n) < 0.5
        for gene, cands in ((TM, space.tiles_m), (TN, space.tiles_n), (TK, space.tiles_k)):
            rows = np.flatnonzero(dims == gene)
            if len(rows) == 0 or len(cands) == 1:
                continue
            logc = np.log(np.asarray(cands, dtype=float))
            cur = g[rows, gene]
            target = logc[cur] + np.where(up[rows], 1, -1) * np.log(factor[rows])
            idx = np.clip(np.searchsorted(logc, target), 1, len(cands) - 1)
            nearest = np.where(np.abs(logc[idx - 1] - target) <= np.abs(logc[idx] - target), idx - 1, idx)
            step = np.where(up[rows], 1, -1)
            nearest = np.where(nearest == cur, np.clip(cur + step, 0, len(cands) - 1), nearest)
            g[rows, gene] = nearest
        return _keep_valid(space, genes, g)


_SWAPS = [(0, 1), (1, 2), (0, 2)]


def _swap_table(orders: tuple[str, ...]) -> np.ndarray:
    t = np.zeros((len(orders), len(_SWAPS)), dtype=np.int64)
    for i, o in enumerate(orders):
        for j, (a, b) in enumerate(_SWAPS):
            lst = list(o)
            lst[a], lst[b] = lst[b], lst[a]
            s = "".join(lst)
            t[i, j] = orders.index(s) if s in orders else i
    return t


@dataclass(frozen=True)
class LoopOrderMutation:
    """Swap two of the three tile loops."""

    def __call__(self, space, genes, rng):
        g = genes.copy()
        table = _swap_table(space.loop_orders)
        g[:, ORDER] = table[g[:, ORDER], rng.integers(0, len(_SWAPS), len(g))]
        return g


@dataclass(frozen=True)
class DataflowMutation:
    """Flip to another supported dataflow, or flip the spatial orientation (buffers are unchanged,
    so the child stays legal)."""

    def __call__(self, space, genes, rng):
        g = genes.copy()
        n = len(g)
        nd, no = len(space.dataflows), len(space.orientations)
        flip_orient = (rng.random(n) < 0.5) if no > 1 else np.zeros(n, dtype=bool)
        if nd == 1:
            flip_orient[:] = no > 1
        g[:, DATAFLOW] = np.where(flip_orient, g[:, DATAFLOW], (g[:, DATAFLOW] + rng.integers(1, max(nd, 2), n)) % nd)
        g[:, ORIENT] = np.where(flip_orient, (g[:, ORIENT] + 1) % no, g[:, ORIENT])
        return g


@dataclass(frozen=True)
class DoubleBufferMutation:
    """Toggle double buffering (kept only where the tile still fits)."""

    def __call__(self, space, genes, rng):
        g = genes.copy()
        g[:, DB] = (g[:, DB] + 1) % len(space.double_buffer)
        return _keep_valid(space, genes, g)


@dataclass(frozen=True)
class UniformCrossover:
    """Each gene from either parent; the three tiles and the buffering travel together when the
    mix would not fit (then the child takes parent ``a``'s tiles)."""

    def __call__(self, space, a, b, rng):
        mask = rng.random(a.shape) < 0.5
        child = np.where(mask, a, b)
        ok = space.is_valid(child)
        tiles = [TM, TN, TK, DB]
        child[np.ix_(~ok, tiles)] = a[np.ix_(~ok, tiles)]
        return child


@dataclass(frozen=True)
class MutationMix:
    """Applies one of several mutations to each row, chosen with the given weights."""
    mutations: tuple[Mutation, ...] = (TileFactorMutation(), LoopOrderMutation(), DataflowMutation(),
                                       DoubleBufferMutation())
    weights: tuple[float, ...] = (0.55, 0.2, 0.15, 0.1)

    def __call__(self, space, genes, rng):
        return apply_weighted(self.mutations, self.weights, space, genes, rng)
