"""A static-batch serving point of a decoder LLM: prefill of ``I`` tokens, then ``O - 1`` decode
steps, on ``tp x pp`` identical devices (docs/LLM.md has the whole model).

- The phases are graphs of the IR (``partition.llm``): one layer of one device's shard, its embedding
  or ``recv``, its LM head or ``send``; every kernel is costed once (``sim.graph.phase_kernels``) and
  a stage costs ``embed + layers x layer + head``.
- Attention iterates over KV blocks of ``kv_block`` tokens (paged / flash attention). Each
  attention kernel is costed over one and over two blocks, which gives its fixed part and its cost
  per block (``phase_kernels.per_block``); a pass over ``n`` blocks costs ``fixed + n x per``.
  Decode step ``j = 1 .. O-1`` attends to ``L = I + j`` positions and streams their KV: ``n = L /
  block``; the sum over every step is evaluated exactly (numpy over every ``L``), never sampled.
  Prefill is causal: ``n (n + 1) / 2`` (query tile, KV block) pairs of ``n = ceil(I / block)``.
  The fused form (scores and probabilities on chip) is taken when one sequence-head tile of a block
  (its scores, queries, keys and values) fits the on-chip buffer (``on_chip_capacity``).
- Pipeline parallel: ``m`` micro-batches (default ``min(B, pp)``) of ``ceil(B / m)`` sequences;
  the first token comes after ``sum_s t_s + (m - 1) max_s t_s``; a decode step of every sequence
  takes ``max(m max_s t_s, sum_s t_s)`` (a micro-batch's next token needs its previous one through
  every stage); the bubble is the idle share of the stages.
- Memory per device (the fullest stage): weights (linear-layer weights in ``--dtype``'s storage,
  the rest in the compute type), the KV cache of every sequence at ``I + O - 1`` tokens, and the
  peak of live activations of a prefill pass (liveness over the layer's graph). When the weights
  do not fit beside even one sequence's KV cache and activations, the weights stream over the host
  link every pass (two layers resident, double-buffered; ``max(device, weights / link)``, overlapped layer by
  layer). ``fits`` says whether what stays resident, the KV cache and the activations fit;
  ``max_batch`` and ``max_context`` are the largest batch (at this context) and context (at this
  batch) that would.
- A launch (``hw.link.launch_latency_s``) per forward pass of a stage.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from ..hw.config import HardwareConfig
from .collective import check_devices
from .phase_kernels import Coster, KernelTime, Storage, default_coster, kernel_times, per_block
from .subgraph import on_chip_capacity

DTYPE_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
WEIGHT_ONLY = ("int8", "int4")
GRAPH_DTYPE = {4.0: "float32", 2.0: "float16", 1.0: "float16"}  # a shape-only graph's float type
ATTENTION_FORMS = ("auto", "fused", "unfused")
DECODE_KERNELS = ("auto", "grouped", "per-head")
# Grouped decode kernels (TensorRT-LLM's XQA, FlashDecoding-style) pack a KV head's query heads
# into one tensor-core tile: the XQA kernels are built for 1-8 and 16 query heads per KV head. A
# model with another group (Falcon-180B: 29) decodes with the per-head kernel.
GROUPED_DECODE = frozenset((1, 2, 3, 4, 5, 6, 7, 8, 16))


def decode_kernel(requested: str, group: int) -> str:
    """The decode attention kernel of ``requested`` (``auto``: grouped where a grouped kernel
    exists for ``group`` query heads per KV head, ``GROUPED_DECODE``, else per-head)."""
    if requested != "auto":
        return requested
    return "grouped" if group in GROUPED_DECODE else "per-head"


_LIMITS = {"batch": 1 << 20, "input_len": 1 << 24, "output_len": 1 << 24, "tp": 65536, "pp": 65536,
           "kv_block": 1 << 20}


class ServingError(ValueError):
    """A serving point that cannot be costed: one line naming the problem."""


@dataclass(frozen=True)
class ServingPoint:
    batch: int
    input_len: int
    output_len: int
    tp: int = 1
    pp: int = 1
    micro_batches: int = 0     # 0: min(batch, pp)
    dtype: str = "fp16"
    kv_dtype: str = ""         # '': the compute dtype of --dtype
    kv_block: int = 256
    attention: str = "auto"
    decode_attention: str = "auto"   # grouped, per-head (sim.graph.phase_kernels.per_head_time): decode_kernel

    def __post_init__(self):
        for f in ("batch", "input_len", "output_len", "tp", "pp", "kv_block"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ServingError(f"{f.replace('_', '-')} must be an integer >= 1, got {v!r}")
            if v > _LIMITS[f]:  # sizes past these overflow the shapes' 64-bit products; no real point needs them
                raise ServingError(f"{f.replace('_', '-')} must be at most {_LIMITS[f]:,}, got {v:,}")
        if isinstance(self.micro_batches, bool) or not isinstance(self.micro_batches, int) or self.micro_batches < 0:
            raise ServingError(f"micro-batches must be an integer >= 1, got {self.micro_batches!r}")
        if self.micro_batches > self.batch:
            raise ServingError(f"{self.micro_batches} micro-batches exceed the batch of {self.batch}")
        if self.dtype not in DTYPE_BYTES:
            raise ServingError(f"unknown dtype {self.dtype!r}; choose one of {', '.join(DTYPE_BYTES)}")
        if self.kv_dtype and self.kv_dtype not in DTYPE_BYTES:
            raise ServingError(f"unknown kv dtype {self.kv_dtype!r}; choose one of {', '.join(DTYPE_BYTES)}")
        if self.attention not in ATTENTION_FORMS:
            raise ServingError(f"attention must be one of {', '.join(ATTENTION_FORMS)}, got {self.attention!r}")
        if self.decode_attention not in DECODE_KERNELS:
            raise ServingError(f"decode attention must be one of {', '.join(DECODE_KERNELS)}, "
                               f"got {self.decode_attention!r}")

    @property
    def micro(self) -> int:
        return self.micro_batches or min(self.batch, self.pp)

    @property
    def devices(self) -> int:
        return self.tp * self.pp


def compute_dtype(dtype: str, hw: HardwareConfig) -> str:
    """The arithmetic type of ``--dtype`` on ``hw`` (int8/int4 are weight-only: fp16 compute, or
    the array's integer type on an integer array); one line when the array cannot compute it."""
    mac = hw.array.mac_dtype
    if dtype in WEIGHT_ONLY:
        comp = mac if mac in ("int8", "int4") else "fp16"
    else:
        comp = dtype
    also = hw.kernels.dtypes  # a GPU's tensor cores: fp8 at kernels.rate_1byte
    same = comp == mac or {comp, mac} <= {"fp16", "bf16"}
    if not same and comp not in also:
        extra = f" or {', '.join(also)} (kernels.dtypes)" if also else ""
        raise ServingError(f"--dtype {dtype} computes in {comp}, but {hw.name}'s array computes in {mac} "
                           f"(array.mac_dtype){extra}")
    if DTYPE_BYTES[comp] != hw.array.word_bytes and comp not in ("int4", *also):
        raise ServingError(f"--dtype {dtype}: {hw.name} stores {hw.array.word_bytes}-byte words "
                           f"(array.word_bytes), not the {DTYPE_BYTES[comp]:g} bytes of {comp}")
    return comp


# ---------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Memory:
    weights_bytes: float
    kv_bytes: float
    activation_bytes: float
    peak_bytes: float
    capacity_bytes: int
    fits: bool
    max_batch: int | None
    max_context: int | None
    weights_streamed: bool
    kv_bytes_per_token: float

    def to_dict(self) -> dict[str, Any]:
        return {k: (int(round(v)) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class ServingReport:
    model: str
    hardware: str
    point: ServingPoint
    compute_dtype: str
    ttft_s: float
    step_s: np.ndarray = field(repr=False)      # every decode step (O - 1 of them)
    energy_j: float = 0.0
    memory: Memory | None = None
    phases: dict[str, Any] = field(default_factory=dict)
    schedules: tuple[dict[str, Any], ...] = ()
    calibrated: bool = False

    @property
    def tpot_s(self) -> float:
        return float(self.step_s.mean()) if len(self.step_s) else 0.0

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + float(self.step_s.sum())

    @property
    def throughput_tok_s(self) -> float:
        return self.point.batch * self.point.output_len / self.e2e_s

    def to_dict(self) -> dict[str, Any]:
        p = self.point
        return {"model": self.model, "hardware": self.hardware, "batch": p.batch, "input_len": p.input_len,
                "output_len": p.output_len, "tp": p.tp, "pp": p.pp, "devices": p.devices,
                "micro_batches": p.micro, "dtype": p.dtype, "compute_dtype": self.compute_dtype,
                "kv_dtype": p.kv_dtype or self.compute_dtype,
                "ttft_ms": self.ttft_s * 1e3, "tpot_ms": self.tpot_s * 1e3, "e2e_ms": self.e2e_s * 1e3,
                "throughput_tok_s": self.throughput_tok_s,
                "throughput_tok_s_per_device": self.throughput_tok_s / p.devices,
                "energy_j_per_token": self.energy_j / (p.batch * p.output_len),
                "memory": self.memory.to_dict() if self.memory else None,
                "phases": self.phases, "schedules": list(self.schedules), "calibrated": self.calibrated}


# ---------------------------------------------------------------------------- costing
@dataclass(frozen=True)
class _Stage:
    first_layer: int
    layers: int
    embed: bool
    head: bool


def _stages(source: Any, pp: int) -> list[_Stage]:
    from partition.llm.graph import stage_layers
    ranges = stage_layers(source.layers, pp)
    return [_Stage(a, n, s == 0, s == pp - 1) for s, (a, n) in enumerate(ranges)]


def _sum(ks: list[KernelTime], attr: str = "seconds", **match) -> float:
    return sum(getattr(k, attr) for k in ks if all(getattr(k, a) == v for a, v in match.items()))


def _blocks(pairs: list[tuple[KernelTime, KernelTime]], n) -> tuple[Any, Any]:
    """(seconds, joules) of attention kernels, given as (fixed, per block), over ``n`` KV blocks
    (a scalar or an array)."""
    return (sum(f.seconds for f, _ in pairs) + n * sum(p.seconds for _, p in pairs),
            sum(f.energy_j for f, _ in pairs) + n * sum(p.energy_j for _, p in pairs))


def _kernel_rows(ks: list[KernelTime], att: list[tuple[KernelTime, KernelTime]], att_blocks: float,
                 passes: float) -> list[dict[str, Any]]:
    """The per-layer kernels of one device, seconds summed over the phase: ``passes`` executions
    of each; the attention kernels (fixed, per block) over ``att_blocks`` blocks in all."""
    rows = []

    def row(k, secs, comp, mem, link, joules):
        return {"name": k.name, "op": k.op, "attention": k.attention, "workload": k.workload, "seconds": secs,
                "compute_s": comp, "memory_s": mem, "interconnect_s": link, "energy_j": joules}
    for k in ks:
        if k.part in ("layer", "model") and not k.attention:
            rows.append(row(k, passes * k.seconds, passes * k.compute_s, passes * k.memory_s,
                            passes * k.interconnect_s, passes * k.energy_j))
    for f, p in att:
        if f.part in ("layer", "model"):
            rows.append(row(f, passes * f.seconds + att_blocks * p.seconds,
                            passes * f.compute_s + att_blocks * p.compute_s,
                            passes * f.memory_s + att_blocks * p.memory_s, 0.0,
                            passes * f.energy_j + att_blocks * p.energy_j))
    return rows


def _liveness_bytes(graph: Any, elem_bytes: float, skip: Callable[[Any], bool]) -> float:
    """Peak bytes of live activations while the graph's nodes run in order (weights, the KV cache
    and graph inputs excluded; a view aliases its input; ``skip`` drops kernels' outputs)."""
    weights = set(graph.meta.get("weights", ()))
    root: dict[int, Any] = {}
    last: dict[int, int] = {}
    for i, n in enumerate(graph.nodes):
        for v in n.inputs:
            r = root.get(id(v), v)
            last[id(r)] = i
        if n.meta.get("view") or n.op in ("reshape", "flatten", "squeeze", "unsqueeze"):
            for o in n.outputs:
                root[id(o)] = root.get(id(n.inputs[0]), n.inputs[0])
    for v in graph.outputs:
        last[id(root.get(id(v), v))] = len(graph.nodes)
    live, peak = 0.0, 0.0
    alive: dict[int, float] = {}
    for i, n in enumerate(graph.nodes):
        is_view = n.meta.get("view") or n.op in ("reshape", "flatten", "squeeze", "unsqueeze")
        if not is_view and n.op != "kv_append" and not skip(n):
            for o in n.outputs:
                if o.name in weights or not np.dtype(o.dtype).kind == "f":
                    continue
                b = o.type.size * elem_bytes
                alive[id(o)] = b
                live += b
        peak = max(peak, live)
        for key in [k for k in alive if last.get(k, -1) <= i]:
            live -= alive.pop(key)
    return peak


def serve(source: Any, hw: HardwareConfig, point: ServingPoint, coster: Coster | None = None,
          calibrated: bool = False) -> ServingReport:
    """Cost ``point`` of the decoder ``source`` (a ``partition.llm.DecoderSource``) on ``hw``.
    ``coster`` costs one kernel workload (default: ``default_coster(hw)``); a calibration wraps it
    and passes ``calibrated=True`` so the report says so."""
    check_devices(hw, point.tp, point.pp)
    source.check_split(point.tp, point.pp)
    source.check_context(point.input_len + point.output_len - 1)
    comp = compute_dtype(point.dtype, hw)
    kv_dtype = point.kv_dtype or comp
    act_b = DTYPE_BYTES[comp]
    # fp8 engines quantize a GEMM's inputs and keep its output, and what crosses the links, in 16
    # bits: TensorRT-LLM's NCCL plugin runs in the model's float16, vLLM's all-reduce in bf16
    storage = Storage(DTYPE_BYTES[point.dtype], DTYPE_BYTES[kv_dtype], act_b,
                      link_bytes=2.0 if comp == "fp8" else 0.0)
    gdt = GRAPH_DTYPE.get(act_b, "float16")
    coster = coster or default_coster(hw)
    b, i_len, o_len = point.batch, point.input_len, point.output_len
    m = point.micro
    bm = -(-b // m)
    blk_pre = min(point.kv_block, i_len)
    blk_dec = min(point.kv_block, i_len + 1)
    stages = _stages(source, point.pp)
    cap_on_chip = on_chip_capacity(hw)

    probe = source.graph(1, 1, 1, tp=point.tp, first_layer=0, layers=1, embed=False, head=False, dtype=gdt)
    kv_in = next(v for v in probe.inputs if v.name in probe.meta["kv_cache"])
    kv_heads, dh = kv_in.shape[1], kv_in.shape[3]
    # query rows per KV head of one token: the rows of the first attention product (1 when an
    # imported graph repeats the KV heads instead)
    first = next((n for n in probe.nodes if n.meta.get("attention") and n.op in ("batch_matmul", "matmul")
                  and len(n.inputs[0].shape) == 4), None)
    group = first.inputs[0].shape[2] if first is not None else 1

    dec_kernel = decode_kernel(point.decode_attention, group)

    def fits_fused(t_blk: int, blk: int) -> bool:
        tile = (group * t_blk * blk + group * t_blk * dh + 2 * blk * dh) * act_b
        return tile <= cap_on_chip

    forms = {}
    for phase, t_blk, blk in (("prefill", blk_pre, blk_pre), ("decode", 1, blk_dec)):
        ok = fits_fused(t_blk, blk)
        if point.attention == "fused" and not ok:
            raise ServingError(f"attention=fused: one {phase} tile of {blk} keys does not fit the on-chip "
                               f"buffer of {hw.name} ({cap_on_chip:,} bytes)")
        forms[phase] = "fused" if (point.attention == "fused" or (point.attention == "auto" and ok)) else "unfused"

    sources: dict[str, tuple[str, Any, list[str]]] = {}
    kinds = {}
    for s in stages:
        key = (s.embed, s.head)
        if key in kinds:
            continue
        kw = dict(tp=point.tp, first_layer=s.first_layer, layers=1, embed=s.embed, head=s.head, dtype=gdt)
        pre = source.graph(bm, i_len, i_len, **kw)
        pre_att = source.graph(bm, blk_pre, blk_pre, **kw)
        pre_att2 = source.graph(bm, blk_pre, 2 * blk_pre, **kw)
        dec = source.graph(bm, 1, blk_dec, **kw)
        dec2 = source.graph(bm, 1, 2 * blk_dec, **kw)
        not_att = lambda n: not n.meta.get("attention")  # noqa: E731
        is_att = lambda n: bool(n.meta.get("attention"))  # noqa: E731
        fp, fd = forms["prefill"] == "fused", forms["decode"] == "fused"
        ph = group if dec_kernel == "per-head" else 0
        kinds[key] = {
            "pre": kernel_times(pre, hw, coster, storage, fp, sources, not_att),
            "pre_att": per_block(kernel_times(pre_att, hw, coster, storage, fp, sources, is_att),
                                 kernel_times(pre_att2, hw, coster, storage, fp, sources, is_att)),
            "dec": kernel_times(dec, hw, coster, storage, fd, sources, not_att),
            "dec_att": per_block(kernel_times(dec, hw, coster, storage, fd, sources, is_att, ph),
                                 kernel_times(dec2, hw, coster, storage, fd, sources, is_att, ph)),
            "graph": pre, "att_graph": pre_att}

    # ---------------------------------------------------------------- memory (per device)
    w_pp = {}
    for key, kd in kinds.items():
        g = kd["graph"]
        quant = set()   # the weight operands of the linear layers (through a view: an expert slice)
        for n in g.nodes:
            if n.op in ("dense", "batch_matmul", "matmul", "gemm") and len(n.inputs) > 1:
                w = n.inputs[1]
                while w.producer is not None and w.producer.meta.get("view"):
                    w = w.producer.inputs[0]
                quant.add(w.name)
        per = {"layer": 0.0, "other": 0.0}
        users_part = {}
        for n in g.nodes:
            for v in n.inputs:
                users_part.setdefault(v.name, n.meta.get("part", "layer"))
        for v in g.inputs:
            if v.name in g.meta["weights"]:
                nb = v.type.size * (storage.weight_bytes if v.name in quant else act_b)
                per["layer" if users_part.get(v.name) == "layer" else "other"] += nb
        w_pp[key] = per
    kv_tok_dev = 2 * kv_heads * dh * storage.kv_bytes          # one layer, one token, one device
    ctx_tokens = i_len + o_len - 1
    worst = None
    for s in stages:
        kd, w = kinds[(s.embed, s.head)], w_pp[(s.embed, s.head)]
        weights = w["other"] + s.layers * w["layer"]
        kv = s.layers * kv_tok_dev * b * ctx_tokens
        att_skip = forms["prefill"] == "fused"
        act = _liveness_bytes(kd["graph"], act_b, lambda n: bool(n.meta.get("attention")))
        if not att_skip:
            act += _liveness_bytes(kd["att_graph"], act_b, lambda n: not n.meta.get("attention"))
        row = (weights + kv + act, weights, kv, act, s, w["layer"])
        if worst is None or row[0] > worst[0]:
            worst = row
    total, weights, kv, act, wstage, layer_w = worst
    cap = hw.memory.capacity_bytes
    streamed = False
    fits = True
    max_batch = max_context = None
    if cap:
        kv_seq = wstage.layers * kv_tok_dev * ctx_tokens
        act_seq = act / bm
        resident = weights
        if weights + kv_seq + act_seq > cap and weights > 2 * layer_w:
            # the weights do not fit even beside one sequence: two layers' worth stay on the device,
            # double-buffered, the rest streams
            streamed, resident = True, 2 * layer_w
        fits = resident + kv + act <= cap
        room = cap - resident
        max_batch = max(0, int(room // (kv_seq + act_seq / m))) if room > 0 else 0
        kv_tok_all = wstage.layers * kv_tok_dev * b
        max_context = max(0, int((cap - resident - act) // kv_tok_all)) if cap > resident + act else 0
        total = resident + kv + act
    memory = Memory(weights, kv, act, total, cap, fits, max_batch, max_context, streamed,
                    source.kv_bytes_per_token(storage.kv_bytes))

    # ---------------------------------------------------------------- time and energy
    launch = hw.link.launch_latency_s
    steps = np.arange(1, o_len, dtype=np.int64)
    ctx = i_len + steps                                       # every decode step's context
    nb_dec = ctx / blk_dec    # a step streams the KV of its L positions (a paged kernel reads the pages holding them)
    nq = -(-i_len // blk_pre)
    pairs = nq * (nq + 1) // 2
    t_pre, t_dec, e_pre, e_dec = [], [], 0.0, np.zeros(len(steps))
    stream_pre, stream_dec = [], []
    for s in stages:
        kd = kinds[(s.embed, s.head)]
        w = w_pp[(s.embed, s.head)]
        s_weights = w["other"] + s.layers * w["layer"]
        stream = s_weights / hw.link.bytes_per_s if streamed else 0.0
        pre_fixed = _sum([k for k in kd["pre"] if k.part != "layer"])
        pre_layer = _sum([k for k in kd["pre"] if k.part == "layer"])
        # attention kernels of a layer run once per layer; any outside the layers (a whole-model
        # graph, part 'model') once per pass
        att_pre_t, att_pre_j = _blocks([p for p in kd["pre_att"] if p[0].part == "layer"], pairs)
        once_pre_t, once_pre_j = _blocks([p for p in kd["pre_att"] if p[0].part != "layer"], pairs)
        tp_ = pre_fixed + once_pre_t + s.layers * (pre_layer + att_pre_t) + launch
        t_pre.append(max(tp_, stream))
        stream_pre.append(stream)
        dec_fixed = _sum([k for k in kd["dec"] if k.part != "layer"])
        dec_layer = _sum([k for k in kd["dec"] if k.part == "layer"])
        att_dec_t, att_dec_j = _blocks([p for p in kd["dec_att"] if p[0].part == "layer"], nb_dec)
        once_dec_t, once_dec_j = _blocks([p for p in kd["dec_att"] if p[0].part != "layer"], nb_dec)
        td = dec_fixed + once_dec_t + s.layers * (dec_layer + att_dec_t) + launch
        t_dec.append(np.maximum(td, stream))
        stream_dec.append(stream)
        link_j = (s_weights * hw.energy.link_pj_per_byte * 1e-12) if streamed else 0.0
        ej = lambda ks: sum(k.energy_j for k in ks)  # noqa: E731
        e_pre += m * point.tp * (ej([k for k in kd["pre"] if k.part != "layer"]) + once_pre_j
                                 + s.layers * (ej([k for k in kd["pre"] if k.part == "layer"]) + att_pre_j) + link_j)
        e_dec = e_dec + m * point.tp * (ej([k for k in kd["dec"] if k.part != "layer"]) + once_dec_j
                                        + s.layers * (ej([k for k in kd["dec"] if k.part == "layer"])
                                                      + att_dec_j) + link_j)
    t_pre_a = np.array(t_pre)
    ttft = float(t_pre_a.sum() + (m - 1) * t_pre_a.max())
    t_dec_a = np.vstack(t_dec) if t_dec and len(steps) else np.zeros((len(stages), 0))
    if len(steps):
        step = np.maximum(m * t_dec_a.max(axis=0), t_dec_a.sum(axis=0))
        busy = m * t_dec_a.sum(axis=0)
        bubble = float(1.0 - busy.sum() / (len(stages) * step.sum()))
    else:
        step, bubble = np.zeros(0), 0.0
    energy = e_pre + float(e_dec.sum())

    # ---------------------------------------------------------------- report
    first = kinds[(stages[0].embed, stages[0].head)]
    whole = any(k.part == "model" for k in first["pre"])
    pre_rows = _kernel_rows(first["pre"], first["pre_att"], m * pairs, m)
    dec_rows = _kernel_rows(first["dec"], first["dec_att"], float(m * nb_dec.sum()), m * len(steps))
    def outside(key: str, passes: float) -> list[dict[str, Any]]:
        rows, seen = [], set()
        for i, st in enumerate(stages):
            kind = (st.embed, st.head)
            if kind in seen:
                continue
            seen.add(kind)
            for k in kinds[kind][key]:
                if k.part not in ("layer", "model"):
                    rows.append({"stage": i, "name": k.name, "op": k.op, "part": k.part, "workload": k.workload,
                                 "seconds": passes * k.seconds, "compute_s": passes * k.compute_s,
                                 "memory_s": passes * k.memory_s, "interconnect_s": passes * k.interconnect_s,
                                 "energy_j": passes * k.energy_j})
        return rows

    stage_rows = [{"stage": i, "first_layer": s.first_layer, "layers": s.layers, "embed": s.embed, "head": s.head,
                   "prefill_s": float(t_pre[i]),
                   "decode_first_step_s": float(t_dec_a[i][0]) if len(steps) else 0.0,
                   "decode_last_step_s": float(t_dec_a[i][-1]) if len(steps) else 0.0,
                   "weights_stream_s": stream_pre[i]} for i, s in enumerate(stages)]
    phases = {
        "prefill": {"seconds": ttft, "tokens": i_len, "micro_batches": m, "micro_batch": bm,
                    "attention_form": forms["prefill"], "kv_block": blk_pre, "attention_blocks": pairs,
                    "kernels_per_layer_of": ("the whole model (an imported graph, its layers not separated)"
                                             if whole else "stage 0, one device, summed over the phase"),
                    "kernels": pre_rows, "outside_layers": outside("pre", m)},
        "decode": {"seconds": float(step.sum()), "steps": int(len(steps)),
                   "context_first": int(ctx[0]) if len(steps) else None,
                   "context_last": int(ctx[-1]) if len(steps) else None,
                   "first_step_s": float(step[0]) if len(steps) else 0.0,
                   "last_step_s": float(step[-1]) if len(steps) else 0.0,
                   "attention_form": forms["decode"], "decode_kernel": dec_kernel,
                   "query_heads_per_kv_head": int(group), "kv_block": blk_dec,
                   "attention_blocks": int((-(-ctx // blk_dec)).sum()), "pipeline_bubble": bubble,
                   "kernels": dec_rows, "outside_layers": outside("dec", m * len(steps))},
        "stages": stage_rows,
        "weights_streamed": streamed,
        "weights_stream_s_per_pass": max(stream_pre) if streamed else 0.0,
    }
    scheds = []
    for key, (src, rep, names) in sources.items():
        row = {"workload": key, "source": src, "kernels": sorted(set(names)), "schedule": rep.schedule,
               "cycles": rep.total_cycles}
        if rep.mapping is not None:
            row["mapping"] = rep.mapping
        scheds.append(row)
    return ServingReport(source.name, hw.name, point, comp, ttft, step, energy, memory, phases, tuple(scheds),
                         calibrated)


__all__ = ["ServingPoint", "ServingReport", "ServingError", "Memory", "serve", "compute_dtype", "DTYPE_BYTES"]
