"""Tile footprints and fold counts: the shared geometry of every cost term (numpy-vectorised; the
functions take scalars or arrays of tile sizes).

The input tile of a convolution is the real input patch its output pixels need (the accelerator
generates the im2col view on the fly), not the im2col matrix SCALE-Sim stores: an M-tile of ``tm``
output pixels spans ``ceil(tm / q)`` output rows (or ``tm`` pixels of one row), a K-tile of ``tk``
reduction elements spans ``ceil(tk / (r*s))`` input channels. The patch height for ``o`` output rows
is ``o * min(stride, extent) + max(extent - stride, 0)`` (extent = dilated kernel height), which is
superadditive over tiles, so the summed tile traffic is never below the whole-layer footprint.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..workload.workload import Workload


def cdiv(a, b):
    """Ceiling division: exact integer arithmetic for Python ints, float64 (exact below 2**52)
    for arrays, where numpy's integer division would be several times slower."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return np.ceil(np.true_divide(a, b))


def fdiv(a, b):
    """Floor division, as ``cdiv``."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return np.floor(np.true_divide(a, b))


@dataclass(frozen=True)
class Geometry:
    """The scalars of a MAC workload the cost terms need, in the GEMM view."""
    g: int
    m: int
    n: int
    k: int
    conv: bool
    rs: int = 1        # r*s
    c_g: int = 1       # input channels per group
    q: int = 1         # output width
    rows_total: int = 1  # n*h, the input rows of all images
    w: int = 1
    st_h: int = 1
    st_w: int = 1
    ext_h: int = 1     # dilated kernel extent
    ext_w: int = 1

    @classmethod
    def of(cls, wl: Workload) -> "Geometry":
        return _geometry(cls, wl)


@lru_cache(maxsize=4096)  # a pure function of a frozen workload; kernels repeat across a model
def _geometry(cls, wl: Workload) -> Geometry:
    g, m, n, k = wl.gemm_view()
    if wl.kind != "conv2d":
        return cls(g, m, n, k, False)
    d = wl.d
    return cls(g, m, n, k, True, d["r"] * d["s"], d["c"] // d["groups"], wl.q, d["n"] * d["h"],
               d["w"], d["stride_h"], d["stride_w"], (d["r"] - 1) * d["dil_h"] + 1,
               (d["s"] - 1) * d["dil_w"] + 1)


def ifmap_channels(geo: Geometry, tk):
    """Input channels (or K elements for a GEMM) one K-tile of ``tk`` reduction elements touches."""
    if not geo.conv:
        return tk
    return np.minimum(cdiv(tk, geo.rs), geo.c_g)


def ifmap_pixels(geo: Geometry, tm):
    """Input pixels per channel (or rows for a GEMM) one M-tile of ``tm`` output pixels touches."""
    if not geo.conv:
        return tm
    tm = np.asarray(tm)
    multi = tm >= geo.q
    rows_out = np.where(multi, cdiv(tm, geo.q), 1)
    cols_out = np.where(multi, geo.q, tm)
    rows_in = np.minimum(geo.rows_total, rows_out * min(geo.st_h, geo.ext_h) + max(geo.ext_h - geo.st_h, 0))
    cols_in = np.minimum(geo.w, cols_out * min(geo.st_w, geo.ext_w) + max(geo.ext_w - geo.st_w, 0))
    return np.where(tm > 0, rows_in * cols_in, 0)


def ifmap_tile_words(geo: Geometry, tm, tk):
    return ifmap_channels(geo, tk) * ifmap_pixels(geo, tm)


def tiled_sum(f, dim: int, t):
    """Sum of ``f(tile)`` over the tiles of a dim of size ``dim`` cut into tiles of ``t`` (the last
    one short)."""
    t = np.minimum(t, dim)
    q = fdiv(dim, t)
    # One call of ``f`` on the full and the short tile together (f is elementwise; half the
    # numpy calls, which is what small batches pay for).
    both = f(np.stack([t, dim - q * t]))
    return q * both[0] + both[1]


def ifmap_words_all_tiles(geo: Geometry, tm, tk):
    """Input words summed over every (M-tile, K-tile) pair of one group: each loaded once."""
    chans = tiled_sum(lambda x: np.where(x > 0, ifmap_channels(geo, x), 0), geo.k, tk)
    pix = tiled_sum(lambda x: ifmap_pixels(geo, x), geo.m, tm)
    return chans * pix


def folds(dim: int, t, extent: int):
    """Array folds along one spatial dim summed over its tiles (each tile folds separately)."""
    t = np.minimum(t, dim)
    q = fdiv(dim, t)
    return q * cdiv(t, extent) + cdiv(dim - q * t, extent)
