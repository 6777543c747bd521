"""MAC kernels on a hardware config with a storage hierarchy (``HardwareConfig.levels``).

A conv2d (grouped and depthwise included), dense/GEMM or (batch) matmul workload becomes a loop
nest (``sim.workload.nest.nest_from_workload``); a mapping of it on the hierarchy (``sim.hw.config_hierarchy``)
is given by the schedule (``Schedule.mapping``, e.g. the tuner's), else chosen by the default
mapping policy (``sim.mapping.policy.default_mapping``, fewest cycles) and evaluated by the data-movement model
(``sim.cost.movement``): reads, fills and updates per level and tensor, cycles with bandwidth
throttling, energy with leakage. The kernel's report then reads:

- ``array_cycles`` = the model's cycles (the MACs' temporal iterations, slowed by any level whose
  bandwidth they exceed; the slowdown is ``stall_cycles``); fused epilogue ops add their
  ``vector_cycles`` after them, as on the one-buffer machine; no DMA prologue or epilogue (the
  model's bandwidth throttling is its DRAM timing);
- DRAM bytes: the outermost level's reads (Inputs, Weights, read-backs of Outputs) and its
  updates (Outputs written back), in the level's word size;
- energy: ``mac``, ``dram`` (outermost level accesses), ``sram`` (every other level's accesses),
  ``leakage`` (every level's), ``vector`` (epilogue ops), ``register`` 0 (the per-PE levels are
  levels here).

On a machine whose ``kernels`` section says so (a GPU preset), two things more: with
``kernels.waves`` a GEMM's larger output dim is padded up to a multiple of the fan-outs that are
not powers of two (108 SMs: thread blocks run in waves, the last one part idle) before it is
mapped (``kernel_nest``); and the cycles are the roofline of the mapping's own counts at what the
machine sustains (``sustained_cycles``): the MACs' temporal iterations at the operand width's rate
times ``kernels.mac_fraction``, every level's reads and writes at its bandwidth (the outermost at
``kernels.dram_fraction`` of it), plus ``kernels.mac_overhead_s``.

The default mapping is a pure function of (workload, hardware): chosen once and memoised, the same
in ``simulate``, the tuner and the device runtime. A tuned plan stores its mappings in its
schedules (``Schedule.mapping``), so ``run`` costs a kernel as the plan predicted. The other fields
of the ``Schedule`` of such a kernel are the one-buffer model's and do not enter this cost.

Fidelities: ``analytical`` is the closed form above; ``tile`` walks the same mapping step by step
(``sim.cost.walk``): the same reads, fills, updates and access energy, and cycles that add what the
closed form's averages hide (pipeline fill and drain, bursts when outer indices change, levels
too small to double-buffer), never fewer than the closed form's; leakage is charged over them,
and ``prologue_cycles`` / ``epilogue_cycles`` are the walk's fill and drain.
"""
from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np

from .analytical import vector_cycles
from ..hw.config import HardwareConfig
from ..hw.hierarchy import Hierarchy
from ..hw.config_hierarchy import hierarchy_of
from ..mapping.mapping import Mapping
from ..mapping.policy import PolicyStats, default_mapping
from .movement import Evaluation, evaluate
from ..workload.nest import Nest, nest_from_workload
from ..mapping.schedule import Schedule
from .walk import WalkResult, walk
from ..workload.workload import Workload

_OPERAND = {"Inputs": "ifmap", "Weights": "weight", "Outputs": "output"}


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


def padded_workload(wl: Workload, hw: HardwareConfig) -> Workload:
    """``wl`` as a machine with ``kernels.waves`` maps it: a GEMM's largest parallel dim (M, N or
    the batch of a batched product, which a decode attention kernel spreads over the cores)
    padded up to a multiple of the least common multiple of the fan-outs that are not powers of
    two; any other workload, or any other machine, as it is."""
    if wl.kind != "gemm" or not hw.kernels.waves or not hw.levels:
        return wl
    from ..hw.config import resolved_fanouts
    odd = [f for fx, fy in resolved_fanouts(hw.levels, hw.array) for f in (fx, fy) if f > 1 and not _pow2(f)]
    if not odd:
        return wl
    step = math.lcm(*odd)
    d = wl.d
    dim = max(("m", "n", "b"), key=lambda k: d[k])
    if d[dim] % step == 0:
        return wl
    dims = {**d, dim: -(-d[dim] // step) * step}
    return Workload.gemm(dims["m"], dims["n"], dims["k"], batch=dims["b"], dtype_bytes=wl.dtype_bytes,
                         epilogue=wl.epilogue)


def kernel_nest(wl: Workload, hw: HardwareConfig) -> Nest:
    """The loop nest a MAC workload is mapped as on ``hw`` (``padded_workload``'s)."""
    return nest_from_workload(padded_workload(wl, hw))


def sustained_cycles(ev: Evaluation, hier: Hierarchy, wl: Workload, hw: HardwareConfig) -> int:
    """The cycles of evaluation ``ev`` on a machine with a ``kernels`` section: the larger of the
    MACs' temporal iterations at the operand width's rate x ``mac_fraction`` and every level's
    per-instance reads and writes at its bandwidth (the outermost at ``dram_fraction`` of it), in
    bytes of the kernel's elements (an fp32 kernel on a machine of 16-bit words moves twice the
    bytes its word counts say), plus ``mac_overhead_s``. Without the section, ``ev.cycles`` as the model gives them."""
    k = hw.kernels
    if not k.active:
        return ev.cycles
    t = ev.compute_cycles / (k.rate(wl.dtype_bytes) * k.mac_fraction)
    for i, (lv, res) in enumerate(zip(hier.levels, ev.levels)):
        # a level's words are of its word_bits; the kernel's elements are dtype_bytes each
        frac = (k.dram_fraction if i == 0 else 1.0) * lv.word_bits / 8 / wl.dtype_bytes
        rd = sum(c.reads for _, c in res.tensors)
        wr = sum(c.fills + c.updates for _, c in res.tensors)
        if lv.read_bandwidth is not None:
            t = max(t, rd / (lv.read_bandwidth * frac))
        if lv.write_bandwidth is not None:
            t = max(t, wr / (lv.write_bandwidth * frac))
    return int(math.ceil(t + k.mac_overhead_s * hw.clock_hz))


def kernel_mapping(wl: Workload, hw: HardwareConfig) -> tuple[Mapping, PolicyStats, Evaluation]:
    """The mapping of a MAC workload on ``hw``'s hierarchy (fewest cycles, then least energy),
    the search's statistics and the model's evaluation of it. Kernels that differ only in their
    epilogue share one loop nest, hence one search."""
    return _nest_mapping(wl.with_epilogue(()) if wl.epilogue else wl, hw)


@functools.lru_cache(maxsize=4096)  # pure in two frozen values; asked by costing, tuning and the runtime
def _nest_mapping(wl: Workload, hw: HardwareConfig) -> tuple[Mapping, PolicyStats, Evaluation]:
    hier = hierarchy_of(hw)
    nest = kernel_nest(wl, hw)
    m, stats = default_mapping(hier, nest, "delay")
    return m, stats, evaluate(hier, nest, m)


@functools.lru_cache(maxsize=4096)  # pure, like the mapping it walks; a tuner measures a kernel many times
def kernel_walk(wl: Workload, hw: HardwareConfig, mapping: Mapping | None = None) -> WalkResult:
    """The tile-level walk of ``mapping`` (default: the kernel's default mapping, ``kernel_mapping``)
    of the kernel's nest; epilogue-free as the nest is. A given mapping must already be checked."""
    wl = wl.with_epilogue(()) if wl.epilogue else wl
    m = mapping if mapping is not None else kernel_mapping(wl, hw)[0]
    return walk(hierarchy_of(hw), kernel_nest(wl, hw), m, check=False)


def mapping_dict(m: Mapping, hier: Hierarchy) -> list[dict]:
    """The mapping as JSON: one entry per level, outermost first, factors > 1 only."""
    return [{"level": lv.name, "temporal": dict(lm.temporal), "permutation": list(lm.permutation),
             "spatial_x": dict(lm.spatial_x), "spatial_y": dict(lm.spatial_y)}
            for lv, lm in zip(hier.levels, m.levels)]


def traffic_cycles(wl: Workload, hw: HardwareConfig, on_chip_bytes: float = 0.0) -> float:
    """The roofline's traffic term on the hierarchy: every word of every tensor the nest touches
    (``touched_words``) through the outermost level's read (Inputs, Weights) and write (Outputs)
    bandwidth, each port on its own, in whole cycles. With a ``kernels`` section, the words are in
    the kernel's element bytes (the sustained fractions stay out: this is the peak's bound).
    Inside a function that keeps ``on_chip_bytes`` of the kernel's DRAM traffic on chip, the bound
    drops by what that credit takes off (``sim.graph.subgraph.credited_cycles``: the bytes at
    ``dram.bytes_per_cycle``)."""
    hier = hierarchy_of(hw)
    nest = nest_from_workload(wl)
    top = hier.levels[0]
    reads = sum(touched_words(ds, dict(nest.bounds)) for ds in nest.data_spaces if not ds.read_write)
    writes = nest.size(nest.output.name)
    if hw.kernels.active:  # its bytes in the level's words
        scale = wl.dtype_bytes * 8 / top.word_bits
        reads, writes = reads * scale, writes * scale
    traffic = 0.0
    if top.read_bandwidth is not None:
        traffic = max(traffic, reads / top.read_bandwidth)
    if top.write_bandwidth is not None:
        traffic = max(traffic, writes / top.write_bandwidth)
    # the model counts whole cycles of a port's words (a bound of 1,979,733.3 cycles is met by
    # 1,979,733): the bound is the whole cycles below it
    return float(math.floor(traffic - on_chip_bytes / hw.dram.bytes_per_cycle + 1e-9))


def roofline_cycles(wl: Workload, hw: HardwareConfig, on_chip_bytes: float = 0.0) -> float:
    """The cycles no mapping beats: every MAC on the array, plus the epilogue; or the traffic
    (``traffic_cycles``); the compute bound stays whatever stays on chip."""
    rate = hw.kernels.rate(wl.dtype_bytes) if hw.kernels.active else 1.0  # the operand width's peak rate
    compute = math.ceil(nest_from_workload(wl).macs / hierarchy_of(hw).arithmetic.instances / rate) \
        + _epilogue_cycles(wl, hw)
    return float(max(compute, traffic_cycles(wl, hw, on_chip_bytes)))


def touched_words(ds, bounds: dict[str, int], limit: int = 1 << 16) -> int:
    """Words of ``ds`` the loop nest reads at least once: per rank, the distinct values of its
    affine sum (a 1x1 convolution of stride 2 touches every other input row, not the rows
    between; the data space's box counts those too). Ranks are independent, so the count is the
    product. A rank of two or more terms with more than ``limit`` index pairs counts its largest
    term alone (fewer than it touches: still a bound no mapping beats)."""
    out = 1
    for rank in ds.projection:
        if len(rank) == 1:
            out *= bounds[rank[0][0]]
            continue
        if math.prod(bounds[d] for d, _ in rank) > limit:
            out *= max(bounds[d] for d, _ in rank)
            continue
        vals = {0}
        for d, c in rank:
            vals = {v + c * i for v in vals for i in range(bounds[d])}
        out *= len(vals)
    return out


def _epilogue_cycles(wl: Workload, hw: HardwareConfig) -> int:
    g, m, n, _ = wl.gemm_view()
    return vector_cycles(hw, g * m * n, wl.epilogue)


def hierarchy_terms(wl: Workload, hw: HardwareConfig, s: Schedule, fidelity: str) -> dict:
    """The cost terms of MAC workload ``wl`` on hierarchical ``hw`` (see module docstring), keyed
    as the one-level model keys them (``sim.cost.analytical.evaluate``'s columns, one value each)
    plus ``mapping``: under the schedule's mapping when it has one (checked: ``MappingError``
    names the first problem), else the default policy's. ``sim.cost.kernel`` turns them into the
    ``KernelReport``."""
    hier = hierarchy_of(hw)
    if s.mapping is not None:
        m, searched = s.mapping, 0
        ev = evaluate(hier, kernel_nest(wl, hw), m)        # checks it against this nest and hierarchy
    else:
        m, stats, ev = kernel_mapping(wl, hw)
        searched = stats.evaluations
    fill = drain = 0
    if fidelity == "tile":
        w = kernel_walk(wl, hw, m)
        ev, fill, drain = w.evaluation, int(w.fill_cycles), int(w.drain_cycles)   # floors: parts add up
    g, mm, n, _ = wl.gemm_view()
    vec = _epilogue_cycles(wl, hw)
    cycles = sustained_cycles(ev, hier, wl, hw)
    total = cycles + vec
    # the MACs' busy cycles at the operand width's sustained rate (what a fused function's on-chip
    # credit can never cut below); the model's own count without a kernels section
    k = hw.kernels
    busy = math.ceil(ev.compute_cycles / (k.rate(wl.dtype_bytes) * k.mac_fraction)) if k.active else ev.compute_cycles
    top = ev.levels[0]
    wb_top = hier.levels[0].word_bits / 8
    dram = {op: 0.0 for op in _OPERAND.values()}
    sram = {op: 0.0 for op in _OPERAND.values()}
    dram_read = dram_write = 0.0
    for i, (lv, res) in enumerate(zip(hier.levels, ev.levels)):
        wb = lv.word_bits / 8
        for name, c in res.tensors:
            op = _OPERAND.get(name, name)
            words = (c.reads + c.fills + c.updates) * res.utilized_instances
            if i == 0:
                dram_read += c.reads * res.utilized_instances * wb_top
                dram_write += c.updates * res.utilized_instances * wb_top
                dram[op] += words * wb
            else:
                sram[op] += words * wb
    e = hw.energy
    energy = {"mac": ev.mac_energy_pj, "register": 0.0, "sram": sum(lv.access_energy_pj for lv in ev.levels[1:]),
              "dram": top.access_energy_pj, "vector": g * mm * n * len(wl.epilogue) * e.vector_op_pj,
              "leakage": sum(lv.leak_energy_pj for lv in ev.levels)}
    # the floor no on-chip credit goes below: the MACs busy, plus the kernel's fixed set-up
    # (kernels.mac_overhead_s), which is no DRAM time; the parts still add up to the total
    over = int(math.ceil(k.mac_overhead_s * hw.clock_hz)) if k.active else 0
    busy = min(busy + over, cycles)
    return {"total_cycles": cycles + vec, "compute_cycles": busy + vec,
            "stall_cycles": max(0, cycles - busy - fill - drain), "prologue_cycles": fill,
            "epilogue_cycles": drain, "array_cycles": cycles, "vector_cycles": vec,
            "dram_read_bytes": dram_read, "dram_write_bytes": dram_write,
            **{f"dram_{k}_bytes": v for k, v in dram.items()}, **{f"sram_{k}_bytes": v for k, v in sram.items()},
            "n_tiles": 1, "energy": energy,
            "mapping": {"levels": mapping_dict(m, hier), "utilized_macs": ev.utilized_macs,
                        "search_evaluations": searched, "given": s.mapping is not None}}
