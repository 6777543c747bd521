"""The storage hierarchy of a ``HardwareConfig`` as the multi-level model's ``Hierarchy``.

A config with ``levels`` (``[[levels]]`` in a file, outermost first) gives one ``StorageLevel``
per entry: instances and mesh from the fan-outs above it (``fanout_x`` x ``fanout_y`` instances
of the next level per instance; 0 = what the array leaves on that axis), unbounded capacity for ``capacity_words = 0``, unlimited
bandwidth for the ``NO_LIMIT`` value, a network level (``spatial_only``: fans out, holds nothing)
for ``keeps = []``, the walk's buffering per tensor (``buffering``); the MACs are the ``array`` (cols along X, rows along Y, one
MAC costs ``energy.mac_pj``, one PE ``area.pe_mm2``). The hierarchy's mapping family is ``mapspace.family``. A config without ``levels`` is today's
one-buffer machine, DRAM -> buffer -> array (``sim.hw.hierarchy.hierarchy_from_hardware``).
"""
from __future__ import annotations

import functools

from .config import ARITHMETIC_NAME, NO_LIMIT, HardwareConfig, resolved_fanouts
from .hierarchy import Arithmetic, Hierarchy, StorageLevel, hierarchy_from_hardware


@functools.lru_cache(maxsize=256)  # a pure function of a frozen value, asked once per kernel
def hierarchy_of(hw: HardwareConfig) -> Hierarchy:
    if not hw.levels:
        return hierarchy_from_hardware(hw)
    out = []
    mx = my = 1
    for lv, (fx, fy) in zip(hw.levels, resolved_fanouts(hw.levels, hw.array)):
        out.append(StorageLevel(
            name=lv.name, capacity_words=lv.capacity_words or None, word_bits=lv.word_bits,
            block_size=lv.block_size, cluster_size=lv.cluster_size, instances=mx * my, mesh_x=mx, mesh_y=my,
            read_bandwidth=None if lv.read_bandwidth >= NO_LIMIT else lv.read_bandwidth,
            write_bandwidth=None if lv.write_bandwidth >= NO_LIMIT else lv.write_bandwidth,
            read_pj=lv.read_pj, fill_pj=lv.fill_pj, update_pj=lv.update_pj,
            leak_pj_per_cycle=lv.leak_pj_per_cycle, area_um2=lv.instance_area_um2(),
            keeps=frozenset(lv.keeps) if lv.keeps else None, spatial_only=not lv.keeps,
            buffering=lv.buffering))
        mx, my = mx * fx, my * fy
    a = hw.array
    mac = Arithmetic(name=ARITHMETIC_NAME, instances=a.rows * a.cols, mesh_x=a.cols, mesh_y=a.rows,
                     mac_pj=hw.energy.mac_pj, area_um2=hw.area.pe_mm2 * 1e6, word_bits=8 * a.word_bytes)
    return Hierarchy(tuple(out), mac, family=hw.mapspace.family)
