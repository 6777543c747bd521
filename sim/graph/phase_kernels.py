"""The kernels of one device's decoder graph, each costed once: what ``sim.graph.serving`` composes.

Every node of a shape-only decoder graph (``partition.llm.graph``) is one kernel on the device,
costed as the tool costs any offloaded kernel: its workload (``sim.workload_of``) through the
``coster`` (by default ``simulate`` under the given schedule, else the default schedule or, on a
storage hierarchy, the default mapping; equal workloads are costed once). Then:

- the weight operand of a dense / batched product is stored in ``weight_bytes`` per element and the
  K/V operand of the attention products (and the ``kv_append`` write) in ``kv_bytes``: the DRAM
  bytes the simulator counted in device words (``hw.array.word_bytes``) are rescaled, and the
  kernel's time moves by the difference at the DRAM bandwidth, never below its compute (the same
  rule as an on-chip credit, ``sim.graph.subgraph.credited_cycles``; on a GPU preset a MAC
  kernel's compute holds its fixed set-up too). Weight-only quantization
  changes bytes, never MACs;
- the fused (flash-attention) form keeps the scores and probabilities of a KV block on chip: the
  scores product does not write them, the mask and softmax neither read nor write DRAM, the
  context product does not read them;
- a ``gather`` (embedding lookup, expert dispatch) reads the rows it gathers, not its whole table;
- a per-head decode kernel (``per_head``: TensorRT-LLM's masked multi-head attention, vLLM's
  paged attention v1), one thread block per query head and sequence, computes the decode attention
  products on the vector unit (scalar FMAs, no tensor cores) and reads its KV head's keys and
  values once per query head: the ``g`` query heads of a KV head's group run side by side, so the
  re-reads hit the level under DRAM (the L2) and DRAM moves the cache once, as for the grouped
  kernel. Such a product takes the longest of its grouped time, ``g`` x its K/V bytes at that
  level's read bandwidth and its MACs at one per vector lane per cycle;
- a pass is one resident program: a vector kernel pays no per-call framework overhead
  (``kernels.classes``), which the kernel costed on its own includes;
- ``all_reduce`` and ``send`` are costed on the interconnect (``sim.graph.collective``); ``recv``
  is the other end of a send (free); the head split/merge views are free.

A kernel's time splits into ``compute_s`` (the array or vector unit busy) and ``memory_s`` (DRAM
time not hidden behind it), or ``interconnect_s`` for a collective.

``per_block`` turns an attention kernel costed over one and over two KV blocks into its fixed part
(first load, last store, any per-kernel overhead the hardware model charges) and its cost per
block: ``fixed + n x per`` is exact at one and two blocks and the kernel streams on at the
marginal cost of a block (what paged and flash attention kernels do).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from ..cost.kernel import call_overhead_cycles, simulate
from ..cost.multilevel import kernel_mapping
from ..hw.config_hierarchy import hierarchy_of
from ..mapping.defaults import default_schedule
from ..cost.report import KernelReport
from ..hw.config import HardwareConfig
from ..mapping.schedule import Schedule
from ..workload.from_ir import workload_of
from ..workload.workload import VIEW_OPS, Workload
from . import collective

Coster = Callable[[Workload], tuple[KernelReport, str]]


@dataclass(frozen=True)
class KernelTime:
    """One kernel of a phase graph on one device (seconds and joules of one execution)."""
    name: str
    op: str
    part: str                 # embed, layer, head, link
    attention: bool           # grows with the context (costed per KV block)
    workload: str             # workload key ('' for collectives)
    seconds: float
    compute_s: float
    memory_s: float
    interconnect_s: float
    energy_j: float
    bytes_sent: float = 0.0   # over the interconnect, per device

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op, "part": self.part, "attention": self.attention,
                "workload": self.workload, "seconds": self.seconds, "compute_s": self.compute_s,
                "memory_s": self.memory_s, "interconnect_s": self.interconnect_s, "energy_j": self.energy_j}


def default_coster(hw: HardwareConfig, schedules: dict[str, Schedule] | None = None,
                   labels: dict[str, str] | None = None,
                   on_default: Callable[[Workload, Schedule, KernelReport], None] | None = None) -> Coster:
    """``simulate`` each workload once: under ``schedules[key]`` when given (its source
    ``labels[key]``, default 'tuned'), else the default schedule ('default schedule') or, for MAC
    kernels on a storage hierarchy, the default mapping ('default mapping'); ``on_default`` is told
    the schedule (with its mapping) each default kernel ran with, so a caller can keep it."""
    cache: dict[str, tuple[KernelReport, str]] = {}
    given = dict(schedules or {})
    names = dict(labels or {})

    def cost(wl: Workload) -> tuple[KernelReport, str]:
        hit = cache.get(wl.key)
        if hit is None:
            s = given.get(wl.key)
            if s is not None:
                hit = cache[wl.key] = (simulate(wl, hw, s), names.get(wl.key, "tuned"))
            else:
                mapped = bool(hw.levels) and wl.is_mac
                rep = simulate(wl, hw)
                hit = cache[wl.key] = (rep, "default mapping" if mapped else "default schedule")
                if on_default is not None:
                    s = default_schedule(wl, hw)
                    if mapped:
                        s = s.replace(mapping=kernel_mapping(wl, hw)[0])
                    on_default(wl, s, rep)
        return hit
    return cost


@dataclass(frozen=True)
class Storage:
    """Bytes per element as stored, against the device word the simulator counts in;
    ``link_bytes`` per element of a collective (0: ``act_bytes``)."""
    weight_bytes: float
    kv_bytes: float
    act_bytes: float
    link_bytes: float = 0.0


def _retimed(rep: KernelReport, hw: HardwareConfig, delta_s: float, delta_j: float) -> tuple[float, float, float]:
    """(cycles, compute cycles, joules) of a kernel that moves ``delta_s`` more DRAM bytes (fewer
    when negative) than the simulator timed and ``delta_j`` more than it charged energy for."""
    cycles, comp = float(rep.total_cycles), float(rep.compute_cycles)
    bw = hw.dram.bytes_per_cycle
    cycles = max(comp, cycles + delta_s / bw) if delta_s < 0 else cycles + delta_s / bw
    if delta_j < 0:
        joules = rep.energy_j - min(rep.energy_pj.get("dram", 0.0), -delta_j * hw.energy.dram_pj_per_byte) * 1e-12
    else:
        joules = rep.energy_j + delta_j * hw.energy.dram_pj_per_byte * 1e-12
    return cycles, comp, joules


def _is_view(node: Any) -> bool:
    return bool(node.meta.get("view")) or node.op in VIEW_OPS


def _after_softmax(v: Any, depth: int = 8) -> bool:
    """Whether ``v`` is the attention probabilities: a softmax, or made from one by attention
    kernels (an exporter's NaN guard, a cast) within ``depth`` steps."""
    n = v.producer
    if n is None or depth == 0 or not n.meta.get("attention"):
        return False
    return n.op == "softmax" or any(_after_softmax(x, depth - 1) for x in n.inputs)


def _extra_bytes(node: Any, rep: KernelReport, storage: Storage, weights: set[str], fused: bool,
                 word: float, base: float) -> float:
    """The DRAM bytes ``node``'s kernel moves beyond ``rep``'s, which counted ``base`` bytes per
    element (in words of ``word`` bytes): weights at ``storage.weight_bytes``, the KV cache at
    ``kv_bytes``, activations at ``act_bytes``; a gather reads only its rows; a fused attention
    kernel (``fused``) keeps a block's scores and probabilities on chip."""
    dram = rep.bytes_by_operand.get("dram", {})

    def more(counted: float, stored: float) -> float:
        return counted * (stored - base) / word

    delta = 0.0
    if node.op in ("dense", "batch_matmul", "matmul", "gemm") and len(node.inputs) > 1:
        w = node.inputs[1]
        if w.name in weights or (w.producer is not None and _is_view(w.producer)
                                 and w.producer.inputs[0].name in weights):
            delta += more(dram.get("weight", 0), storage.weight_bytes)
        elif w.producer is not None and w.producer.op == "kv_append":
            delta += more(dram.get("weight", 0), storage.kv_bytes)
        delta += more(dram.get("ifmap", 0) + dram.get("output", 0), storage.act_bytes)
    elif node.op == "kv_append":
        delta += more(rep.dram_read_bytes + rep.dram_write_bytes, storage.kv_bytes)
    elif node.op == "gather":
        # an embedding lookup (or an expert's dispatch) reads the rows it gathers, not the table
        # (the one-buffer data-move workload counts the whole data input)
        rows = node.outputs[0].type.size * storage.act_bytes
        delta += rows + more(rep.dram_write_bytes, storage.act_bytes) - rep.dram_read_bytes * base / word
    else:
        delta += more(rep.dram_read_bytes + rep.dram_write_bytes, storage.act_bytes)
    if fused:
        # the block's scores and probabilities stay on chip (flash attention); the products
        # still read Q, K and V and write the context: what the kernel moved of them goes
        if node.op in ("batch_matmul", "matmul") and not _after_softmax(node.inputs[0]):
            delta -= dram.get("output", 0) * storage.act_bytes / word      # scores: Q K^T
        elif node.op in ("batch_matmul", "matmul"):
            delta -= dram.get("ifmap", 0) * storage.act_bytes / word       # context: P V
        else:
            delta -= (rep.dram_read_bytes + rep.dram_write_bytes) * storage.act_bytes / word
    return delta


def _kv_operand(node: Any) -> Any:
    """The K or V cache operand of an attention product (the ``kv_append`` it reads, through any
    views), else None."""
    if node.op not in ("batch_matmul", "matmul") or len(node.inputs) < 2 or not node.meta.get("attention"):
        return None
    v = node.inputs[1]
    while v.producer is not None and _is_view(v.producer):
        v = v.producer.inputs[0]
    return v if v.producer is not None and v.producer.op == "kv_append" else None


def per_head_time(node: Any, kt: KernelTime, hw: HardwareConfig, storage: Storage, group: int) -> KernelTime:
    """``kt``, the grouped cost of decode attention product ``node``, as a per-head kernel of
    ``group`` query heads per KV head runs it (module docstring): the longest of ``kt``'s time,
    ``group`` x the K/V operand's bytes at the read bandwidth of the level under DRAM, and the
    MACs at one per vector lane per cycle (then all of its compute), each plus the per-kernel
    overhead (``kernels.mac_overhead_s``). Energy adds the re-reads at
    that level's energy per byte. Any other kernel as it is."""
    kv = _kv_operand(node)
    if kv is None:
        return kt
    out, a = node.outputs[0], node.inputs[0]
    macs = float(out.type.size) * float(a.shape[-1])
    vec_s = macs / (hw.vector.lanes * hw.clock_hz)
    kv_bytes = float(kv.type.size) * storage.kv_bytes
    lv = hierarchy_of(hw).levels[1]
    byte_per_word = lv.word_bits / 8
    l2_s = 0.0 if lv.read_bandwidth is None else \
        group * kv_bytes / (lv.read_bandwidth * byte_per_word * hw.clock_hz)
    # the bounds are the kernel's streaming; the per-kernel overhead its MAC kernels pay comes on top
    # (so the fixed part and the cost per KV block of ``per_block`` stay apart)
    over = hw.kernels.mac_overhead_s if hw.kernels.active else 0.0
    secs = max(kt.seconds, over + l2_s, over + vec_s)
    joules = kt.energy_j + (group - 1) * kv_bytes * lv.read_pj / (lv.block_size * byte_per_word) * 1e-12
    return replace(kt, seconds=secs, compute_s=vec_s, memory_s=secs - vec_s, energy_j=joules)


def kernel_times(graph: Any, hw: HardwareConfig, coster: Coster, storage: Storage, fused: bool,
                 sources: dict[str, tuple[str, KernelReport, list[str]]] | None = None,
                 only: Callable[[Any], bool] | None = None, per_head: int = 0) -> list[KernelTime]:
    """Every kernel of ``graph`` (those ``only`` keeps), costed once. ``sources`` collects, per
    workload key, (schedule source, report, kernel names) for the report's schedule list.
    ``per_head`` > 0: the decode attention products run as a per-head kernel of that many query
    heads per KV head (``per_head_time``); 0: as one grouped product per KV head."""
    word = hw.array.word_bytes
    weights = set(graph.meta.get("weights", ()))
    clock = hw.clock_hz
    out: list[KernelTime] = []
    for node in graph.nodes:
        if only is not None and not only(node):
            continue
        part, att = node.meta.get("part", "layer"), bool(node.meta.get("attention"))
        if _is_view(node):
            continue
        if node.op in ("all_reduce", "send", "recv"):
            nbytes = node.outputs[0].type.size * (storage.link_bytes or storage.act_bytes)
            if node.op == "all_reduce":
                c = collective.all_reduce(nbytes, int(node.attrs.get("group_size", 1)), hw)
            elif node.op == "send":
                c = collective.send(nbytes, hw)
            else:
                c = collective.CollectiveCost(0.0, 0.0, 0.0)
            out.append(KernelTime(node.name, node.op, part, att, "", c.seconds, 0.0, 0.0, c.seconds, c.joules,
                                  c.bytes_sent))
            continue
        wl = workload_of(node)
        if storage.act_bytes < wl.dtype_bytes:  # fp8 in an fp16 graph: the narrower operands' MAC rate
            wl = replace(wl, dtype_bytes=max(1, int(storage.act_bytes)))
        rep, src = coster(wl)
        if sources is not None:
            entry = sources.setdefault(wl.key, (src, rep, []))
            entry[2].append(node.name)
        # The simulator counts DRAM bytes in device words; on a machine with a kernels section it
        # times them in the kernel's element bytes (an fp8 kernel on 16-bit words moves half the
        # bytes its words say), so time and energy are rescaled from different bases.
        timed = wl.dtype_bytes if hw.kernels.active else word
        delta_s = _extra_bytes(node, rep, storage, weights, fused and att, word, timed)
        delta_j = delta_s if timed == word else _extra_bytes(node, rep, storage, weights, fused and att, word, word)
        cycles, comp, joules = _retimed(rep, hw, delta_s, delta_j)
        # one resident program: no framework call per kernel (kernels.classes' call overheads,
        # which the report counts as busy time)
        ov = call_overhead_cycles(wl, hw)
        cycles, comp = max(0, cycles - ov), max(0, comp - ov)   # a calibration may have scaled them
        kt = KernelTime(node.name, node.op, part, att, wl.key, cycles / clock, comp / clock,
                        (cycles - comp) / clock, 0.0, joules)
        out.append(per_head_time(node, kt, hw, storage, per_head) if per_head and att else kt)
    return out


def per_block(one: list[KernelTime], two: list[KernelTime]) -> list[tuple[KernelTime, KernelTime]]:
    """(fixed, per block) of each kernel of ``one`` (costed over one KV block), matched by name in
    ``two`` (the same kernels over two blocks). A cost that does not grow gives no per-block part;
    one that more than doubles is all per-block (neither part is ever negative)."""
    by_name = {k.name: k for k in two}
    out = []
    for k1 in one:
        k2 = by_name[k1.name]

        def split(a: float, b: float) -> tuple[float, float]:
            per = max(b - a, 0.0)
            return max(a - per, 0.0), (per if a - per >= 0 else a)
        fs, ps = split(k1.seconds, k2.seconds)
        fc, pc = split(k1.compute_s, k2.compute_s)
        fc, pc = min(fc, fs), min(pc, ps)
        fe, pe = split(k1.energy_j, k2.energy_j)
        fixed = replace(k1, seconds=fs, compute_s=fc, memory_s=fs - fc, energy_j=fe)
        per = replace(k1, seconds=ps, compute_s=pc, memory_s=ps - pc, energy_j=pe)
        out.append((fixed, per))
    return out


__all__ = ["KernelTime", "Storage", "Coster", "default_coster", "kernel_times", "per_block", "per_head_time"]
