"""The max-plus pipeline of the tile-level walk (``sim.cost.walk``): transfer engines, one per storage
level, and the MACs, over the walked steps of a loop nest. The recurrence is in ``sim.cost.walk``'s
docstring; this module solves it, exactly, step by step, skipping loop iterations that repeat."""
from __future__ import annotations

import numpy as np

_LEAF = 48   # steps simulated one by one without looking for repeats


class _State:
    """The pipeline between two steps: the last block's end, each engine's last job end ``E``
    and the block end its next job waits for when double-buffered ``W`` (the end of the block
    before its previous job: the tile that job replaced is then no longer needed)."""
    __slots__ = ("c1", "E", "W", "first")

    def __init__(self, ne: int):
        self.c1 = 0.0
        self.E = [0.0] * ne
        self.W = [0.0] * ne
        self.first = None


def _scan(cols: list[tuple[np.ndarray, np.ndarray, int, tuple[int, ...]]], block: np.ndarray, st: _State,
          a: int, b: int) -> None:
    """Advance the pipeline over steps a..b-1, one at a time (the recurrence in ``sim.cost.walk``'s
    docstring; ``cols`` = per engine, outermost first, its step jobs, block jobs, slots and the
    engines feeding it). Plain Python floats over lists: several times faster per step than
    numpy scalars."""
    E, W = st.E, st.W
    c1 = st.c1
    first = a == 0
    cols = [(step[a:b].tolist(), blk[a:b].tolist(), slots, feeders) for step, blk, slots, feeders in cols]
    block = block[a:b].tolist()
    now = [0.0] * len(cols)       # this step's job ends (0: no job)
    for x in range(b - a):
        ready = 0.0
        for j, (step, _, slots, feeders) in enumerate(cols):
            job = step[x]
            if job > 0.0:
                avail = E[j]
                if slots == 1:
                    cs = c1                       # single buffer: the previous block must be done
                else:
                    cs = W[j]                     # double: the block before the previous job's
                    W[j] = c1
                if cs > avail:
                    avail = cs
                for f in feeders:                 # the data comes down from the feeding levels
                    if now[f] > avail:
                        avail = now[f]
                d = avail + job
                E[j] = d
                now[j] = d
                if d > ready:
                    ready = d
            else:
                now[j] = 0.0
        start = c1 if c1 > ready else ready
        if first and x == 0:
            st.first = start
        for j, (_, blk, _, _) in enumerate(cols):
            bj = blk[x]
            if bj > 0.0:
                E[j] = start + bj
        c1 = start + block[x]
    st.c1 = c1


def pipeline(engines: list[tuple[np.ndarray, np.ndarray, float, int, tuple[int, ...]]], block: np.ndarray,
             shape: tuple[int, ...] = ()) -> tuple[float, float, float]:
    """(end, start of the first block, end of the last block) of the max-plus pipeline in
    ``sim.cost.walk``'s docstring; ``engines`` outermost first as (step jobs, block jobs, final drain,
    slots 1 or 2, the indices of the engines feeding it, all outer), ``block`` the blocks'
    durations (each at least every engine's block job), ``shape`` the walked loops' factors (the
    steps are their iterations in row-major order).

    Exact and fast on a loop nest: the system is max-plus, so shifting its state by a constant
    shifts everything after by the same constant. Where a loop's iteration i took the same jobs
    as iteration i-1, left the pipeline in the same state relative to its last block end (an
    engine's end that no later job can wait for, being below the block end it would wait for
    anyway, is clamped to it), and every later iteration takes the same jobs again, each later
    iteration adds the same time: they are skipped. Per-step deltas are Timeloop's extrapolated
    ones (iterations 1.. of a loop move the same words), so this happens after two or three
    iterations of most loops and a walk costs about 3**depth steps, not the product of the
    factors."""
    n = len(block)
    ne = len(engines)
    cols = [(step, blk, slots, feeders) for step, blk, _, slots, feeders in engines]
    M = np.vstack([e[0] for e in engines] + [e[1] for e in engines] + [block]) if n else None
    slots = [e[3] for e in engines]
    st = _State(ne)

    def floor(j: int) -> float:
        """What engine j's next step job waits for at least besides its own end (its next job
        starts at max(E, floor, outer); a block job moves E past the floor): so max(E, floor)
        is all of engine j's state that matters."""
        return st.c1 if slots[j] == 1 else st.W[j]

    def norm() -> tuple:
        return tuple(max(e, floor(j)) - st.c1 for j, e in enumerate(st.E))

    def run(a: int, b: int, k: int) -> None:
        if k >= len(shape) or b - a <= _LEAF:
            _scan(cols, block, st, a, b)
            return
        f = shape[k]
        size = (b - a) // f
        m3 = M[:, a:b].reshape(M.shape[0], f, size)
        same = np.ones(f + 1, dtype=bool)        # same[i]: iteration i takes iteration i-1's jobs
        same[1:f] = (m3[:, 1:, :] == m3[:, :-1, :]).all(axis=(0, 2))
        later_same = np.logical_and.accumulate(same[::-1])[::-1]   # same[i:] all
        prev = None
        for i in range(f):
            run(a + i * size, a + (i + 1) * size, k + 1)
            cur = norm()
            if prev is not None and later_same[i] and cur == prev[0]:
                r = f - 1 - i
                delta = (st.c1 - prev[1]) * r
                st.E = [max(e, floor(j)) + delta for j, e in enumerate(st.E)]
                st.W = [w + delta for w in st.W]
                st.c1 += delta
                return
            prev = (cur, st.c1)

    run(0, n, 0)
    end = st.c1
    for (_, _, final, _, _), e in zip(engines[::-1], st.E[::-1]):
        if final > 0.0:
            end = max(end, e) + final
    return end, st.first if st.first is not None else 0.0, st.c1
