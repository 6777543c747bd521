"""A learned calibration of the analytical cost model against measured costs: the model, its file,
and how costing applies it (``accel-tune calibrate`` makes the files: ``tuner.calibrate_host``,
``tuner.calibrate_device``).

What is learned: an XGBoost regressor of ``log(measured_s / analytical_s)`` for one op, from the
op's features (kind, FLOPs, bytes, element counts, rank (not a MAC op's), groups, window, weight
bytes, whether it follows a MAC op, a MAC op's fused activation, its class: GEMM-like, element-wise,
reduction, data movement, normalisation) and the analytical model's own breakdown of it (compute,
memory and launch seconds: ``OpSample``).
The class and context features carry over to an op kind the data never saw. A prediction is
``analytical_s * exp(model(features))``. Two kinds of file:

- ``host``: this machine's CPU timed with onnxruntime (``calibrate --host``). The analytical side
  is the roofline of a *reference* host model stored in the file (``reference_host``), so the
  prediction does not depend on the preset it is used with: it is the measured host. Its
  fingerprint is the machine's (``machine_fingerprint``: the CPU's name and family / model /
  stepping, instruction sets, caches and count): loading it on another machine is refused.
- ``device``: measured rows of one hardware preset (``calibrate --measurements``). The analytical
  side is the kernel simulator (default schedule, analytical fidelity) plus the launch latency;
  its fingerprint is ``HardwareConfig.fingerprint()``: loading it for another config is refused.

Applying it (configuration passed down, never global):

    cal = load_calibration("CAL.json", hw)        # CalibrationError: one line (corrupt, wrong hardware)
    opts = tuner.costing.CostOptions(calibration=cal)      # tune / partition search / graph_cost
    cal = cal.for_graph(graph)                    # the model it costs (tune and graph_cost bind it)
    sim.cost_graph(pg, hw, host_seconds=cal.host_seconds, kernel_scale=cal.kernel_scale)
    cal.host_seconds(node, hw)                    # seconds of one host op (the analytical model
                                                  # when the file is a device file; unbound, as
                                                  # if it ran alone)
    cal.kernel_scale(workload, report, hw)        # factor on one device kernel's cycles (1.0 for a
                                                  # host file)
    cal.predict_seconds([OpSample, ...])          # the model itself

A device kernel's calibrated seconds are ``(device_s + launch_s) * exp(f) - launch_s`` (the rows
are single-kernel calls, launch included), never below 5 % of ``device_s``; ``kernel_scale`` is
that over ``device_s``. The file is JSON: the booster (XGBoost's own JSON form) inside, with the
fingerprint, the sha256 of the training data and of the booster, the feature list and the kind.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

FORMAT = "accel-tune-calibration"
VERSION = 12  # 2: op-class, weight-bytes and after-MAC features; 3: no rank for MAC ops; 4: after-MAC through
# folded ops (``FOLDED``); 5: transposed and 3-D convolutions are MAC ops (``MAC_OPS`` named a
# ``conv_transpose`` the IR does not have); 6: a convolution's input channels per group and the
# inner dimension of each group's GEMM; 7: a grouped convolution's sizes and roofline times are one
# group's (``OpSample.one_group``); 9: the activation fused into a MAC op's kernel, on both
# (``OpSample.epilogue``, ``OpSample.fused``); 10: a depthwise convolution's channel alignment, up
# to 4 (``host_sample``); 11: the bytes a run of the whole model an op runs in touches (``OpSample.model_bytes``);
# 12: an op that is no convolution has the channel alignment ``NO_ALIGN``, above every convolution's;
# older files are refused
KINDS = ("host", "device")
# Numeric features, in order; the op kind's one-hot columns ("op=<kind>") follow them.
NUMERIC = ("log_flops", "log_bytes", "log_out_elems", "log_in_elems", "rank", "n_inputs", "log_groups",
           "log_window", "log_compute_s", "log_memory_s", "log_launch_s", "log_analytical_s", "log_intensity",
           "log_weight_bytes", "after_mac", "class_gemm", "class_elementwise", "class_reduction", "class_movement",
           "class_normalisation", "log_group_width", "log_gemm_k", "log_channel_align", "epilogue_flops",
           "fused_into_mac", "log_model_bytes")
# Pseudo-Huber on the log ratio: a few noisy timings (a shared machine) pull the fit less than
# under squared error; on the held-out host rows it gave the lowest median error of the objectives tried.
# min_child_weight 0: the pseudo-Huber hessian is small on large log ratios, and a positive minimum
# would forbid the very splits that separate a few dozen device rows.
# Five trees a round, each on its own sample of rows and features, averaged (a boosted random
# forest): one tree a round put RegNetY-400MF, never seen, anywhere from -6 to -18 % with the seed
# alone on one collection. On eight collections refitted offline (2026-11-29) every one of the 15
# unseen files was within 20 % (15, 15, 15, 14, 15, 15, 15, 15 with one tree); the fit takes 0.7 s
# instead of 0.3 and the file 4.5 MB instead of 0.9.
FIT_PARAMS = {"objective": "reg:pseudohubererror", "huber_slope": 0.3, "max_depth": 4, "eta": 0.08, "min_child_weight": 0.0,
              "subsample": 0.9, "colsample_bytree": 0.9, "num_parallel_tree": 5, "lambda": 1.0, "seed": 0,
              "nthread": 1}
FIT_ROUNDS = 300
MIN_ROWS = 4
# Multiply-accumulate ops: the model corrects an op kind it never saw only when it saw ops of the
# same class (a MAC kernel from other MAC kernels), else it keeps the analytical cost (ratio 1).
CONV_OPS = frozenset({"conv2d", "conv3d", "conv_transpose2d", "conv_transpose3d"})  # window = the weight's kernel
MAC_OPS = CONV_OPS | frozenset({"dense", "matmul", "batch_matmul", "gemm"})
# Ops onnxruntime folds into the weights of the MAC op before them (Conv+BatchNormalization, the
# bias Add): an activation after conv -> batch_norm is fused into the convolution's kernel as one
# right after the conv is (``after_mac``).
FOLDED = frozenset({"batch_norm", "bias_add"})
# Activations onnxruntime fuses into the kernel of the Conv or Gemm before them (CPU), and which
# it runs as a pass over the kernel's output: on a 3x3 depthwise convolution of 32 channels at
# 112x112 (33 us alone, onnxruntime 1.32) relu added nothing (MLAS applies it as the kernel
# stores), relu6 18 us, hard_sigmoid 27, leaky_relu 39, hard_swish 40, tanh 47, sigmoid 53; a
# 3x3 depthwise one of 144 channels at 56x56 76 us, 99 with relu6. gelu, elu and softplus stay
# kernels of their own, as does silu, exported as Sigmoid and Mul both reading the convolution
# (``epilogue_flops``). MnasNet is MobileNetV2 with relu for relu6: its depthwise convolutions ran
# 30-40 % faster than MobileNetV2's in context, and a fit blind to the activation put it +16-20 %.
FUSED_ACTIVATIONS = frozenset({"relu", "relu6", "clip", "hard_sigmoid", "hard_swish", "leaky_relu", "tanh", "sigmoid"})
FREE_ACTIVATIONS = frozenset({"relu"})
READ_TO_FUSE = frozenset({"hard_swish"})  # fused only when a node reads it (``fused_activation``)
# Op classes: features that carry over to an op kind the data never saw (a held-out kind still has
# its class, its FLOPs, its bytes); an op in none of them is "other" (all class columns 0).
OP_CLASSES = {
    "gemm": MAC_OPS,
    "elementwise": frozenset({"add", "sub", "mul", "div", "relu", "relu6", "gelu", "sigmoid", "tanh", "exp", "erf",
                              "silu", "hard_sigmoid", "hard_swish", "bias_add", "and", "or", "not", "less", "greater",
                              "equal", "where", "cast", "clip", "pow", "sqrt", "neg", "abs", "leaky_relu", "log",
                              "min", "max", "reciprocal", "softplus", "elu", "mish"}),
    "reduction": frozenset({"reduce_mean", "reduce_max", "reduce_sum", "reduce_min", "global_avg_pool2d",
                            "global_max_pool2d", "max_pool2d", "avg_pool2d", "argmax", "argmin", "topk",
                            "non_max_suppression", "cumsum"}),
    "movement": frozenset({"reshape", "flatten", "transpose", "concat", "split", "slice", "gather", "gather_elements",
                           "gather_nd", "expand", "unsqueeze", "squeeze", "pad", "tile", "resize", "upsample",
                           "identity", "scatter", "scatter_nd", "shape", "depth_to_space", "space_to_depth"}),
    "normalisation": frozenset({"batch_norm", "layer_norm", "softmax", "log_softmax", "group_norm",
                                "instance_norm", "rms_norm", "lrn"}),
}
DEVICE_FLOOR = 0.05  # a calibrated kernel keeps at least this share of its simulated time


class CalibrationError(ValueError):
    """A calibration file or data set that cannot be used: one line naming the problem."""


# ------------------------------------------------------------------------------------- samples
@dataclass(frozen=True)
class OpSample:
    """One op instance as the calibration sees it: what it computes and what the analytical model
    says of it (seconds: ``compute_s`` = FLOPs / peak, ``memory_s`` = bytes / bandwidth,
    ``launch_s`` the fixed cost; ``analytical_s`` their roofline sum)."""
    op: str
    flops: float
    bytes: float
    out_elems: float
    in_elems: float
    rank: int
    n_inputs: int
    groups: int
    window: int
    compute_s: float
    memory_s: float
    launch_s: float
    analytical_s: float
    weight_bytes: float = 0.0   # bytes of constant inputs (weights): they stream from memory in a whole model
    after_mac: bool = False     # its first input comes from a MAC op, maybe through FOLDED ops (a fused epilogue)
    # a convolution's input channels per group (1: depthwise; 0 for other ops). onnxruntime runs a
    # grouped convolution group by group, each a GEMM this wide: 3x3 convolutions of 8 channels per
    # group ran at 35-110 GFLOP/s here, those of 64 at 300-450 (``calibrate_probes``)
    group_width: int = 0
    # a grouped or depthwise convolution's channel alignment: the largest power of two, up to 64
    # (4 for a depthwise one), that divides every channel count its kernel's layout blocks by (0
    # for other ops, dense convolutions among them: ``host_sample``; ``channel_align``). onnxruntime
    # runs a convolution in its blocked (NCHWc) layout only when those counts are multiples of the
    # CPU's block (16 channels with AVX-512, 8 with AVX2); else a grouped one runs group by group
    # through a plain GEMM: 3x3 convolutions of 24 channels per group took 12.2 us a group at 14x14
    # here, those of 32 took 9.7 (2.2x the time per FLOP), RegNetY-1.6GF's 24-wide groups, never
    # seen, were predicted at 0.47x their time (2026-11-29, sixth session)
    channel_align: int = 0
    # a MAC op's fused activation's arithmetic per output element (host model FLOPs; 0 without one,
    # or for relu, which costs the kernel nothing): ``FUSED_ACTIVATIONS``, ``epilogue_flops``
    epilogue: float = 0.0
    # an activation onnxruntime runs inside the MAC op's kernel before it (``fused_into_mac``): the
    # same hard_swish after a convolution is fused, as a graph output or after a Gemm it is not
    fused: bool = False
    # the bytes a run of the whole model the op runs in reads or writes (``graph_run_bytes``; an op
    # timed alone: its own bytes). What a small model touches stays in the L3 between runs: the
    # same 1280 x 1000 classifier (5.1 MB) took 53-83 us in MnasNet 0.5 (33 MB a run), 137-160 in
    # MnasNet 1.0 (60 MB), 165-191 in MobileNetV2 (66 MB) (2026-11-30, a 32 MB L3)
    model_bytes: float = 0.0

    def numeric(self) -> list[float]:
        return (self.one_group() if self.groups > 1 and self.group_width > 0 else self)._numeric()

    def one_group(self) -> "OpSample":
        """One group's share of a grouped convolution (every total over the groups; the launch, a
        fixed cost, stays whole in ``launch_s``): onnxruntime runs the groups one after another,
        each a GEMM of its own. Described by its totals, RegNetY's 13 groups of 8 channels at 28x28
        and a probe's 16 such groups fell on different sides of the trees' splits on the totals and
        were predicted at 0.37x and 0.90x their time; one group of each is the same GEMM."""
        g = float(self.groups)
        return replace(self, flops=self.flops / g, bytes=self.bytes / g, out_elems=self.out_elems / g,
                       in_elems=self.in_elems / g, weight_bytes=self.weight_bytes / g, compute_s=self.compute_s / g,
                       memory_s=self.memory_s / g, analytical_s=self.analytical_s / g)

    def _numeric(self) -> list[float]:
        lg = lambda v: math.log10(max(float(v), 0.0) + 1.0)  # noqa: E731 - zero-safe
        ls = lambda s: math.log10(max(float(s), 1e-12))  # noqa: E731
        # a MAC op's rank says nothing of its work: a Gemm on a 2-D view and a MatMul on the 3-D view
        # of the same numbers are one GEMM call; as a feature it let GPT-2's 2-D Gemms (never seen)
        # follow the batch-1 classifiers' rows, -41 % to +20 % from one collection to the next
        rank = 0.0 if self.op in MAC_OPS else float(self.rank)
        return [lg(self.flops), lg(self.bytes), lg(self.out_elems), lg(self.in_elems), rank,
                float(self.n_inputs), math.log2(max(1, self.groups)), math.log2(max(1, self.window)),
                ls(self.compute_s), ls(self.memory_s), ls(self.launch_s), ls(self.analytical_s),
                lg(self.flops) - lg(self.bytes), lg(self.weight_bytes), float(self.after_mac),
                *(float(self.op in OP_CLASSES[c]) for c in ("gemm", "elementwise", "reduction", "movement",
                                                            "normalisation")),
                math.log2(self.group_width) if self.group_width > 0 else -1.0,
                # each group's GEMM sums over this many products (channels per group x window): its
                # rate grows with it up to ~150 and then levels off (the grouped probes)
                math.log2(self.group_width * max(1, self.window)) if self.group_width > 0 else -1.0,
                self._align(), float(self.epilogue), float(self.fused),
                lg(min(self.model_bytes, MODEL_BYTES_CAP)) if self.weight_bytes >= MODEL_BYTES_WEIGHTS else -1.0]

    def _align(self) -> float:
        """The channel alignment as a feature: log2 of it on a grouped or depthwise convolution,
        -1 on a dense one (``host_sample`` gives dense ones none), ``NO_ALIGN`` on any other op."""
        if self.channel_align > 0:
            return math.log2(self.channel_align)
        return -1.0 if self.op in CONV_OPS else NO_ALIGN

    def key(self) -> tuple:
        return (self.op, self.flops, self.bytes, self.out_elems, self.in_elems, self.rank, self.n_inputs,
                self.groups, self.window, self.compute_s, self.memory_s, self.launch_s, self.weight_bytes,
                self.after_mac, self.group_width, self.channel_align, self.epilogue, self.fused,
                self.model_bytes)


def roofline_sample(op: str, flops: float, nbytes: float, out_elems: float, in_elems: float, rank: int,
                    n_inputs: int, groups: int, window: int, peak_flops: float, bytes_per_s: float,
                    launch_s: float) -> OpSample:
    """A sample costed by a roofline: max(compute, memory) + launch (the host model's form)."""
    c, m = flops / peak_flops, nbytes / bytes_per_s
    return OpSample(op, float(flops), float(nbytes), float(out_elems), float(in_elems), int(rank), int(n_inputs),
                    int(groups), int(window), c, m, float(launch_s), max(c, m) + launch_s)


def host_sample(node: Any, host: Any, source: Any = None, users: Any = None,
                model_bytes: float | None = None) -> OpSample:
    """One IR node on a host model (``peak_flops``, ``mem_bytes_per_s``, ``op_overhead_s``): the
    same FLOPs and bytes as ``sim.graph.subgraph.host_op_work``. ``source`` (value -> value): the
    value an input stands for when the node sits in a composite (``tuner.costing.host_unit_cost``),
    whose constness and producer are the context features; ``users`` (value -> nodes): the nodes
    that really read a value (``epilogue_flops``); ``model_bytes``: the bytes a run of the whole
    model it runs in touches (``graph_run_bytes``; None: the node's own bytes, an op timed alone)."""
    src = source or (lambda v: v)
    from sim.graph.subgraph import host_op_work
    flops, nbytes = host_op_work(node)
    outs = sum(int(np.prod(o.shape, dtype=np.int64)) for o in node.outputs)
    ins = sum(int(np.prod(v.shape, dtype=np.int64)) for v in node.inputs)
    rank = max((len(o.shape) for o in node.outputs), default=0)
    groups = int(node.attrs.get("groups", 1) or 1)
    window, width, align = 1, 0, 0
    if node.op in CONV_OPS and len(node.inputs) > 1:
        window = int(np.prod(node.inputs[1].shape[2:], dtype=np.int64))
        # input channels over groups, for a convolution and a transposed one alike: how wide each
        # group's GEMM is
        width = int(node.inputs[0].shape[1]) // max(1, groups) if len(node.inputs[0].shape) > 1 else 0
        out_c = int(node.outputs[0].shape[1]) if node.outputs and len(node.outputs[0].shape) > 1 else 0
        # grouped and depthwise convolutions only. Off the block a grouped one falls to a GEMM per
        # group; a depthwise one's kernel is 4-13x slower in context on 2 mod 4 channels than on
        # a few more (``calibrate_probes.depthwise_probe_graph``), hence its cap. A dense one
        # loses less (1x1 ones of 56 and 58 channels at 28 x 28 ran 149 and 146 GFLOP/s, 64 ran
        # 196; 120 at 14 x 14 166, 128 188), and on dense convolutions too the feature let the
        # fit's seed put 40-wide groups anywhere from 0.58 to 1.55x their time (offline,
        # collection 21), on the grouped ones 0.58-0.86x; as a column of its own (capped at 16) it
        # left ShuffleNetV2 x1.0 where it was (runs.md, sixteenth session)
        align = channel_align(width, out_c, groups) if groups > 1 else 0
        if width == 1:
            align = min(align, DEPTHWISE_ALIGN_CAP)
    elif "kernel_shape" in node.attrs or "pool_size" in node.attrs:
        window = int(np.prod(node.attrs.get("kernel_shape") or node.attrs.get("pool_size"), dtype=np.int64))
    s = roofline_sample(node.op, flops, nbytes, outs, ins, rank, len(node.inputs), groups, window,
                        host.peak_flops, host.mem_bytes_per_s, host.op_overhead_s)
    weights = sum(_nbytes(v) for v in node.inputs if src(v).is_const)
    return replace(s, weight_bytes=float(weights), after_mac=after_mac(node, src), group_width=width,
                   channel_align=align, epilogue=epilogue_flops(node, users),
                   fused=fused_into_mac(node, src, users),
                   model_bytes=float(nbytes if model_bytes is None else model_bytes))


# the model bytes feature stops here (four times this machine's 32 MB L3): beyond, little of a run
# stays in the L3 for the next, and every model's own bytes would let the trees tell models apart
MODEL_BYTES_CAP = 128e6
# and is an op's only with this many bytes of weights (a classifier's, a large convolution's): on
# every op it gave the trees a way to tell small models apart (refitted on one collection,
# SqueezeNet 1.1 +13 -> +20 %, MnasNet 0.5 +20 -> +24; on these ops only +11 and +20) for what a
# few large weight matrices show
MODEL_BYTES_WEIGHTS = 1e6
# inputs an op reads a few rows of, not whole: an embedding table's bytes are not a working set
SPARSE_READS = {"gather": 0, "gather_nd": 0, "gather_elements": 0}


def graph_run_bytes(graph: Any) -> float:
    """The bytes a run of ``graph`` reads or writes: its constants (each once, not an embedding
    table it gathers rows of: ``SPARSE_READS``) and every op's outputs, in its functions (a
    partitioned graph's composites and external functions), loop bodies and if branches too
    (``Graph.walk``). A partitioned graph touches what the graph it came from does."""
    seen: dict[int, int] = {}
    for _, n in graph.walk():
        skip = SPARSE_READS.get(n.op)
        for i, v in enumerate(n.inputs):
            if v.is_const and i != skip:
                seen[id(v)] = _nbytes(v)
        if n.op not in ("call", "if", "loop"):  # theirs are their bodies' outputs
            seen.update((id(v), _nbytes(v)) for v in n.outputs)
    return float(sum(seen.values()))


def _nbytes(v: Any) -> int:
    return int(np.prod(v.shape, dtype=np.int64)) * _itemsize(v.dtype)


ALIGN_CAP = 64
# A depthwise convolution's alignment as a feature: 1 (odd channels), 2 or 4 (a multiple of 4).
# Uncapped (up to 64), its 8-channel-aligned rows (MobileNetV3's, the probes') came out of the fit
# at 1.3-1.9x their own time, and MnasNet 0.5's at 1.6-1.7x theirs; capped, at 0.8-1.3x
# (K16 of experiments/results/calibration_unseen/runs.md)
DEPTHWISE_ALIGN_CAP = 4
# The alignment feature of an op that is no convolution (``OpSample._align``): above every
# convolution's, so that one split on the feature takes the convolutions off onnxruntime's channel
# block (a depthwise one of 2 mod 4 channels runs 4x slower than one of a multiple of 4) apart
# from everything else. At -1, below them, every other op fell on their side of such a split, and
# the fit left the probes' own 2 mod 4 depthwise rows 18-56 % under their time; with this and more
# of them (``calibrate_probes.OFF_BLOCK``) 4-21 % (one 30 %), and ShuffleNetV2 x1.0, never seen,
# moved up 1-5 points on each of seven timings (experiments/results/calibration_unseen/runs.md,
# sixteenth session)
NO_ALIGN = math.log2(ALIGN_CAP) + 1.0


def channel_align(in_per_group: int, out_channels: int, groups: int) -> int:
    """The largest power of two, at most ``ALIGN_CAP``, dividing the channel counts a blocked
    convolution layout needs whole blocks of, as onnxruntime's NCHWc transformer asks: a
    depthwise convolution its channels; another grouped one each group's input and output
    channels; a dense one its input channels (its outputs are padded to the block). 0 when
    a count is unknown (0). ``host_sample`` gives it to grouped convolutions only."""
    def pow2(n: int) -> int:
        return min(n & -n, ALIGN_CAP) if n > 0 else 0
    groups = max(1, groups)
    if groups == 1:
        return pow2(in_per_group)
    if in_per_group == 1 and out_channels == groups:
        return pow2(out_channels)
    if out_channels <= 0 or out_channels % groups:
        return 0
    return min(pow2(in_per_group), pow2(out_channels // groups))


def mac_of(node: Any, source: Any = None) -> Any:
    """The MAC op ``node``'s first input comes from, directly or through ops onnxruntime folds
    into it (``FOLDED``), or None; ``source`` as in ``host_sample``."""
    src = source or (lambda v: v)
    prod = src(node.inputs[0]).producer if node.inputs else None
    for _ in range(4):              # conv -> batch_norm -> bias_add is as deep as folding goes
        if prod is None or prod.op not in FOLDED or not prod.inputs:
            break
        prod = src(prod.inputs[0]).producer
    return prod if prod is not None and prod.op in MAC_OPS else None


def after_mac(node: Any, source: Any = None) -> bool:
    """Whether ``node``'s first input comes from a MAC op (``mac_of``)."""
    return mac_of(node, source) is not None


def fused_activation(mac: Any, users: Any = None) -> Any:
    """The activation onnxruntime runs inside MAC op ``mac``'s kernel, relu included, or None: the
    one reader of its output, through ops folded into it (``FOLDED``), when in
    ``FUSED_ACTIVATIONS``. A value two nodes read is not fused. hard_swish (HardSigmoid and Mul
    once inlined) only after a convolution, and only when a node reads it: as a graph output, or
    after a Gemm, it ran as kernels of its own (conv 61 us + 17 + 16, fused 82; 64 x 56 x 56).
    ``users`` (value -> nodes) as in ``host_sample``."""
    if mac.op not in MAC_OPS or not mac.outputs:
        return None
    readers = users or (lambda v: v.users)
    v = mac.outputs[0]
    for _ in range(4):
        nxt = readers(v)
        if len(nxt) != 1:
            return None
        act = nxt[0]
        if act.op in FOLDED and act.outputs:
            v = act.outputs[0]
            continue
        if act.op not in FUSED_ACTIVATIONS:
            return None
        if act.op in READ_TO_FUSE and (mac.op not in CONV_OPS or not act.outputs or not readers(act.outputs[0])):
            return None
        return act
    return None


def epilogue_flops(node: Any, users: Any = None) -> float:
    """The arithmetic per output element of the activation onnxruntime runs inside MAC op
    ``node``'s kernel (``fused_activation``), host model FLOPs; 0 for none, or for relu
    (``FREE_ACTIVATIONS``)."""
    act = fused_activation(node, users) if node.op in MAC_OPS else None
    if act is None or act.op in FREE_ACTIVATIONS:
        return 0.0
    from sim.graph.subgraph import host_op_work
    elems = sum(int(np.prod(o.shape, dtype=np.int64)) for o in act.outputs)
    return host_op_work(act)[0] / elems if elems else 0.0


def fused_into_mac(node: Any, source: Any = None, users: Any = None) -> bool:
    """Whether onnxruntime runs activation ``node`` inside the kernel of the MAC op before it
    (``fused_activation``): its time is then the MAC's, as an epilogue."""
    if node.op not in FUSED_ACTIVATIONS:
        return False
    mac = mac_of(node, source)
    return mac is not None and fused_activation(mac, users) is node


def _itemsize(dtype: str) -> int:
    try:
        return np.dtype(dtype).itemsize
    except TypeError:  # a dtype numpy does not name (bfloat16): two bytes
        return 2


def feature_names(ops: Sequence[str]) -> tuple[str, ...]:
    return NUMERIC + tuple(f"op={o}" for o in ops)


def feature_matrix(samples: Sequence[OpSample], ops: Sequence[str]) -> np.ndarray:
    col = {o: i for i, o in enumerate(ops)}
    x = np.zeros((len(samples), len(NUMERIC) + len(ops)), dtype=np.float64)
    for r, s in enumerate(samples):
        x[r, :len(NUMERIC)] = s.numeric()
        j = col.get(s.op)
        if j is not None:
            x[r, len(NUMERIC) + j] = 1.0
    return x


# --------------------------------------------------------------------------------- fingerprints
# What in /proc/cpuinfo names the silicon, not just its marketing name: a KVM guest may show
# "AMD EPYC" for a Zen 1 host (AVX2, 8 MB L3: resnet50 113 ms in onnxruntime) and for a Zen 4 one
# (AVX-512: 38 ms), and a calibration of one loaded on the other was a silent 3x (runs.md,
# twenty-first session). x86's family / model / stepping, Arm's implementer / part / variant.
CPU_ID_FIELDS = ("vendor_id", "cpu family", "model", "stepping", "model name",
                 "CPU implementer", "CPU architecture", "CPU variant", "CPU part")
# the instruction-set extensions onnxruntime's kernels (MLAS) choose their code by
CPU_ISA_FLAGS = frozenset({
    "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",
    "asimd", "asimddp", "asimdhp", "sve", "sve2", "i8mm", "bf16", "sme"})


def cpu_identity(cpuinfo: str, caches: Iterable[str] = (), logical_cpus: int = 0, machine: str = "",
                 processor: str = "") -> dict[str, Any]:
    """The host as timing depends on it, from the text of ``/proc/cpuinfo`` (its first processor),
    the cache sizes (``"L3 Unified 8192K"``, from sysfs), the logical CPU count and the
    architecture; ``processor`` stands in for the model name where there is no cpuinfo."""
    first: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if first:
                break
            continue
        key, _, value = line.partition(":")
        first.setdefault(key.strip(), value.strip())
    ident = {k: first[k] for k in CPU_ID_FIELDS if first.get(k)}
    flags = sorted(set((first.get("flags") or first.get("Features") or "").split()) & CPU_ISA_FLAGS)
    name = ident.get("model name") or processor or "unknown"
    return {"cpu": name, "logical_cpus": logical_cpus, "machine": machine, "id": ident, "isa": flags,
            "caches": sorted(caches)}


def _caches() -> list[str]:
    """This machine's cache levels and sizes as sysfs lists them for CPU 0 (none where it does not)."""
    out = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        names = sorted(d for d in os.listdir(base) if d.startswith("index"))
    except OSError:
        return out
    for d in names:
        try:
            level, kind, size = (Path(base, d, f).read_text().strip() for f in ("level", "type", "size"))
        except OSError:
            continue
        out.append(f"L{level} {kind} {size}")
    return out


def machine_fingerprint() -> dict[str, Any]:
    """What identifies this machine's host for timing (``cpu_identity``): the CPU's name and
    family / model / stepping, the instruction sets onnxruntime uses, the cache sizes, the logical
    CPUs and the architecture; ``fingerprint`` is their sha256, ``hardware`` a line for messages."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        text = ""
    info = cpu_identity(text, _caches(), os.cpu_count() or 0, platform.machine(), platform.processor())
    return {**info, "fingerprint": hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest(),
            "hardware": machine_line(info)}


def machine_line(info: Mapping[str, Any]) -> str:
    """``cpu_identity`` in one line: "AMD EPYC (family 23 model 1 stepping 2; avx avx2; L3 8192K) x2"."""
    ident = info.get("id", {})
    step = " ".join(f"{k.replace('cpu ', '').replace('CPU ', '').lower()} {ident[k]}"
                    for k in ("cpu family", "model", "stepping", "CPU implementer", "CPU part", "CPU variant")
                    if k in ident)
    wide = [f for f in info.get("isa", ()) if f.startswith(("avx", "amx", "sve", "sme"))] or list(info.get("isa", ()))
    last = [c.split()[0] + " " + c.split()[-1] for c in info.get("caches", ()) if c.split()[0] == "L3"]
    inner = "; ".join(x for x in (step, " ".join(wide), " ".join(last)) if x)
    return f"{info.get('cpu', 'unknown')}{f' ({inner})' if inner else ''} x{info.get('logical_cpus', 0)}"


def data_sha256(rows: Iterable[Mapping[str, Any]]) -> str:
    """sha256 of the training rows in a canonical form (sorted keys, rows sorted)."""
    lines = sorted(json.dumps(r, sort_keys=True, separators=(",", ":"), default=float) for r in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


# ---------------------------------------------------------------------------------------- model
@dataclass(frozen=True, eq=False)
class Calibration:
    """A fitted calibration (see the module docstring). ``booster`` is XGBoost's JSON model text."""
    kind: str
    fingerprint: str
    hardware: str
    data_sha256: str
    ops: tuple[str, ...]
    booster: str
    reference_host: Mapping[str, float] | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    # the bytes a run of the model being costed touches (``for_graph``), not part of the file: None
    # costs each op as if it ran alone
    model_bytes: float | None = None
    _state: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise CalibrationError(f"calibration kind must be one of {', '.join(KINDS)}, got {self.kind!r}")

    @property
    def features(self) -> tuple[str, ...]:
        return feature_names(self.ops)

    def _booster(self):
        b = self._state.get("booster")
        if b is None:
            import xgboost as xgb
            b = xgb.Booster()
            try:
                b.load_model(bytearray(self.booster.encode()))
            except Exception as e:  # noqa: BLE001 - xgboost raises its own XGBoostError
                raise CalibrationError(f"calibration booster does not load: {str(e).strip().splitlines()[0]}") from None
            b.set_param({"nthread": 1})
            self._state["booster"] = b
        return b

    def predict_log_ratio(self, samples: Sequence[OpSample]) -> np.ndarray:
        """The learned log(measured / analytical) of each sample; 0 (the analytical cost) for an op
        kind not in the data whose class (MAC or not, ``MAC_OPS``) is not in the data either."""
        if not samples:
            return np.zeros(0)
        y = np.asarray(self._booster().inplace_predict(feature_matrix(samples, self.ops)), dtype=np.float64)
        classes = {o in MAC_OPS for o in self.ops}
        unseen = np.array([s.op not in self.ops and (s.op in MAC_OPS) not in classes for s in samples])
        return np.where(unseen, 0.0, y)

    def predict_seconds(self, samples: Sequence[OpSample]) -> np.ndarray:
        """Calibrated seconds of each sample: its analytical seconds times exp(the learned log
        ratio), never below its FLOPs at the fastest rate a MAC op of the data reached
        (``meta["peak_flops_per_s"]``, ``fit_calibration``)."""
        a = np.array([s.analytical_s for s in samples], dtype=np.float64)
        pred = a * np.exp(self.predict_log_ratio(samples))
        peak = self.meta.get("peak_flops_per_s")
        if peak:
            pred = np.maximum(pred, np.array([s.flops for s in samples], dtype=np.float64) / float(peak))
        return pred

    def _memo(self, sample: OpSample) -> float:
        memo = self._state.setdefault("memo", {})
        k = sample.key()
        v = memo.get(k)
        if v is None:
            v = memo[k] = float(self.predict_seconds([sample])[0])
        return v

    def describe(self) -> dict[str, Any]:
        """What a result reports of the calibration it used."""
        return {"kind": self.kind, "hardware": self.hardware, "data_sha256": self.data_sha256,
                "rows": self.meta.get("rows")}

    # -- what costing calls
    def for_graph(self, graph: Any) -> "Calibration":
        """This calibration costing the ops of ``graph``: a host op's prediction depends on the
        bytes a run of the whole model touches (``OpSample.model_bytes``). Shares the loaded
        booster and its memo (whose key holds those bytes)."""
        if self.kind != "host":
            return self
        return replace(self, model_bytes=graph_run_bytes(graph), _state=self._state)

    def host_seconds(self, node: Any, hw: Any, source: Any = None, users: Any = None) -> float:
        """Seconds of one host op: the measured host's prediction for a host file, the analytical
        host model of ``hw`` for a device file. On a host file an ``if`` or ``loop`` costs what
        onnxruntime's subgraph executor was measured to cost (``meta["control_flow"]``,
        ``tuner.calibrate_control``; its body's nodes are costed apart), and nothing in a file
        without that measurement (older files: there it went into the rows' shares of the rest)."""
        from sim.graph.subgraph import host_op_seconds
        if self.kind != "host" or node.op == "call":
            return host_op_seconds(node, hw)
        if node.op in ("if", "loop"):
            control = self.control
            return control.seconds(node) if control is not None else 0.0
        return self._memo(host_sample(node, _Host(**self.reference_host), source, users, self.model_bytes))

    @property
    def control(self):
        """The measured cost of control flow (``tuner.calibrate_control.ControlCost``), or None."""
        if "control" not in self._state:
            from .calibrate_control import control_of
            self._state["control"] = control_of(self.meta)
        return self._state["control"]

    def kernel_scale(self, workload: Any, report: Any, hw: Any) -> float:
        """Factor on one device kernel's cycles (1.0 for a host file)."""
        if self.kind != "device" or report.total_cycles <= 0:
            return 1.0
        from .calibrate_device import kernel_sample
        s = kernel_sample(workload, report, hw)
        device_s = report.total_cycles / hw.clock_hz
        want = self._memo(s) - s.launch_s
        return max(DEVICE_FLOOR, want / device_s)

    # -- the file
    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "kind": self.kind, "fingerprint": self.fingerprint,
                "hardware": self.hardware, "data_sha256": self.data_sha256, "features": list(self.features),
                "ops": list(self.ops), "reference_host": dict(self.reference_host) if self.reference_host else None,
                "meta": dict(self.meta), "booster_sha256": hashlib.sha256(_canonical(self.booster).encode()).hexdigest(),
                "booster": json.loads(self.booster)}

    def save(self, path: str | os.PathLike) -> None:
        """Write atomically (a temporary file beside ``path``, renamed into place)."""
        from partition.packed import write_atomically
        text = json.dumps(self.to_json(), indent=1, allow_nan=False)
        write_atomically(os.fspath(path), lambda f: f.write(text.encode()), "the calibration file", ".json",
                         CalibrationError)


@dataclass(frozen=True)
class _Host:
    peak_flops: float
    mem_bytes_per_s: float
    op_overhead_s: float


def reference_host_of(host: Any) -> dict[str, float]:
    return {"peak_flops": float(host.peak_flops), "mem_bytes_per_s": float(host.mem_bytes_per_s),
            "op_overhead_s": float(host.op_overhead_s)}


def model_weights(models: Sequence[str], seconds: Sequence[float]) -> np.ndarray:
    """Row weights for a fit on rows timed inside whole models: every model weighs the same in
    total, half of it shared equally over its rows and half in proportion to each row's share of
    the model's time (``seconds``: what the row costs the model per run).

    Why: what a host calibration is for is a whole model's latency, whose relative error is the
    time-weighted error of its rows; unweighted, BERT-base's 300 rows outvoted a small model's
    dozens, and a node of 0.3 us weighed as much as a convolution of 300 us. The half shared
    equally keeps every op kind in the fit (the held-out-by-kind figure). Refitted offline on four
    collections of the zoo, the built-ins and the probes, the 17 whole models within 20 % went
    from 16-17 to 17 of 17 fitted on all of them, from 13-14 to 15-16 with the model held out and
    from 12-14 to 14-16 with its family held out; the 15 unseen real models of
    experiments/calibration_unseen.py from 11-14 to 12-14 of 15
    (experiments/results/calibration_unseen/runs.md)."""
    m = list(models)
    t = np.maximum(np.asarray(seconds, dtype=np.float64), 0.0)
    if len(m) != len(t):
        raise CalibrationError(f"{len(m)} model labels but {len(t)} row times")
    count: dict[str, int] = {}
    total: dict[str, float] = {}
    for k, v in zip(m, t):
        count[k] = count.get(k, 0) + 1
        total[k] = total.get(k, 0.0) + float(v)
    return np.array([0.5 / count[k] + 0.5 * (v / total[k] if total[k] > 0 else 1.0 / count[k])
                     for k, v in zip(m, t)], dtype=np.float64)


# A model profiled in a slower phase of the machine (``calibrate_context.slower_than_most``) is
# left out of the fit when its rows add up to more than this much over what a fit of the other
# models' rows predicts for them (``slow_phase_excess``). The phase reading alone does not say
# whether a model's timing was slowed: left out by it (the twelfth session), K14's GEMM probes
# went though they ran at their usual 47.8 and 11.0 ms, and GPT-2 went from +11 to +46 %; judged
# against the others' fit they ran at 0.45 and 0.92x and stay. Refitted offline on the
# calibrations timed mostly in a slow phase (experiments/results/calibration_unseen/runs.md,
# thirteenth session), K17's unseen files within 20 % went from 10 and 15 to 14 and 19 of 15 and
# 21, K18's from 9 and 13 to 11 and 16.
SLOW_MODEL_EXCESS = 0.15


def slow_phase_excess(samples: Sequence[OpSample], measured_s: Sequence[float], models: Sequence[str],
                      suspects: Iterable[str], weights: Sequence[float], **fit_kw: Any) -> dict[str, float]:
    """{suspect: its rows' measured seconds over what a fit of the other models' rows predicts for
    them} for each of ``suspects`` (models profiled in a slower phase) with rows; ``fit_kw`` go to
    ``fit_calibration`` (the other models' rows keep their ``weights``). Empty when no other model
    has rows to fit."""
    sus = set(suspects)
    mask = np.array([m in sus for m in models], dtype=bool)
    w = np.asarray(weights, dtype=np.float64)
    if not mask.any() or not (w * ~mask).sum() > 0:
        return {}
    others = fit_calibration(samples, measured_s, weights=np.where(mask, 0.0, w), **fit_kw)
    idx = np.flatnonzero(mask)
    pred = others.predict_seconds([samples[i] for i in idx])
    meas = np.asarray(measured_s, dtype=np.float64)[idx]
    got: dict[str, list[float]] = {}
    for k, i in enumerate(idx):
        got.setdefault(models[i], [0.0, 0.0])
        got[models[i]][0] += meas[k]
        got[models[i]][1] += pred[k]
    return {m: float(t / p) for m, (t, p) in got.items() if p > 0}


def left_out_by_excess(excess: Mapping[str, float]) -> list[str]:
    """The models of ``slow_phase_excess``'s figures that the fit leaves out: over
    ``SLOW_MODEL_EXCESS``."""
    return sorted(m for m, r in excess.items() if r > 1.0 + SLOW_MODEL_EXCESS)


def without_models(weights: Sequence[float], models: Sequence[str], ops: Sequence[str],
                   leave_out: Iterable[str]) -> np.ndarray:
    """``weights`` with the rows of ``leave_out``'s models at 0, but for the rows of an op kind (of
    ``ops``, one per row) that no other model has: a kind the fit has no row of loses its own
    correction."""
    out = set(leave_out)
    w = np.asarray(weights, dtype=np.float64).copy()
    gone = np.array([m in out for m in models], dtype=bool)
    kept_kinds = {o for o, g in zip(ops, gone) if not g}
    w[gone & np.array([o in kept_kinds for o in ops], dtype=bool)] = 0.0
    return w


def fit_calibration(samples: Sequence[OpSample], measured_s: Sequence[float], *, kind: str, fingerprint: str,
                    hardware: str, rows: Sequence[Mapping[str, Any]], reference_host: Mapping[str, float] | None = None,
                    meta: Mapping[str, Any] | None = None, rounds: int = FIT_ROUNDS,
                    weights: Sequence[float] | None = None, control: Any = None) -> Calibration:
    """Fit the regressor of log(measured / analytical) on ``samples``. ``rows`` are the training
    data as stored (their sha256 goes in the file). ``weights``: one per sample (``model_weights``
    for rows of whole models), scaled here to a mean of 1 so the fit's regularisation keeps its
    strength; None weighs every row alike. ``control``: the host's measured cost of control flow
    (``tuner.calibrate_control.ControlCost``), kept in ``meta["control_flow"]``."""
    import xgboost as xgb
    if len(samples) != len(measured_s):
        raise CalibrationError(f"{len(samples)} samples but {len(measured_s)} measurements")
    if len(samples) < MIN_ROWS:
        raise CalibrationError(f"a calibration needs at least {MIN_ROWS} measured rows, got {len(samples)}")
    y_meas = np.asarray(measured_s, dtype=np.float64)
    if not np.all(np.isfinite(y_meas)) or np.any(y_meas <= 0):
        raise CalibrationError("measured seconds must be finite and > 0")
    a = np.array([s.analytical_s for s in samples])
    ops = tuple(sorted({s.op for s in samples}))
    x = feature_matrix(samples, ops)
    y = np.log(y_meas / a)
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != y.shape or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
            raise CalibrationError(f"weights must be {len(y)} finite numbers >= 0, not all 0")
        w = w / w.mean()
    d = xgb.DMatrix(x, label=y, weight=w, feature_names=[f.replace("=", "_") for f in feature_names(ops)])
    # base_score: the (weighted) mean log ratio, so the trees fit what varies around the overall bias
    booster = xgb.train({**FIT_PARAMS, "base_score": float(np.average(y, weights=w))}, d, num_boost_round=rounds)
    raw = booster.save_raw(raw_format="json").decode()
    return Calibration(kind, fingerprint, hardware, data_sha256(rows), ops, raw,
                       dict(reference_host) if reference_host else None,
                       {**(meta or {}), "rows": len(samples), "fit": {**FIT_PARAMS, "rounds": rounds},
                        "peak_flops_per_s": peak_flops_per_s(samples, y_meas), "weighted": w is not None,
                        **({"control_flow": control.to_json()} if control is not None else {})})


def peak_flops_per_s(samples: Sequence[OpSample], measured_s: Sequence[float]) -> float | None:
    """The fastest FLOP rate a MAC op of the data reached (None without one): no prediction is
    faster. Why: a tree model extrapolates flat past its data, and a GEMM larger than any it saw
    (GPT-2's 768 x 50257 head, 154 MB of weights) was predicted at ten times this machine's
    peak, 2.3 ms for 25 ms measured. The maximum, not a percentile: a mislabelled row can only
    lower the floor."""
    rates = [s.flops / m for s, m in zip(samples, measured_s) if s.op in MAC_OPS and s.flops > 0 and m > 0]
    return float(max(rates)) if rates else None


# ----------------------------------------------------------------------------------- loading
_REQUIRED = {"format": str, "version": int, "kind": str, "fingerprint": str, "hardware": str,
             "data_sha256": str, "features": list, "ops": list, "meta": dict, "booster_sha256": str,
             "booster": dict}


def read_calibration(path: str | os.PathLike) -> Calibration:
    """A calibration file, checked: JSON, every field of the right type, the booster's sha256."""
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise CalibrationError(f"calibration file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CalibrationError(f"cannot read calibration file {p}: {e}") from None
    except json.JSONDecodeError as e:
        raise CalibrationError(f"calibration file {p} is not valid JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CalibrationError(f"{p} is not an accel-tune calibration file (no \"format\": \"{FORMAT}\")")
    for k, t in _REQUIRED.items():
        if not isinstance(doc.get(k), t) or isinstance(doc.get(k), bool):
            raise CalibrationError(f"calibration file {p}: field '{k}' is missing or not a {t.__name__}")
    if doc["version"] != VERSION:
        raise CalibrationError(f"calibration file {p}: version {doc['version']} (this accel-tune reads {VERSION})")
    if doc["kind"] not in KINDS:
        raise CalibrationError(f"calibration file {p}: kind {doc['kind']!r} is not one of {', '.join(KINDS)}")
    ops = doc["ops"]
    if not all(isinstance(o, str) for o in ops) or doc["features"] != list(feature_names(ops)):
        raise CalibrationError(f"calibration file {p}: field 'features' does not match this accel-tune's "
                               f"features for its ops")
    ref = doc.get("reference_host")
    if doc["kind"] == "host":
        if not isinstance(ref, dict) or set(ref) != {"peak_flops", "mem_bytes_per_s", "op_overhead_s"} or \
                not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in ref.values()) \
                or ref["peak_flops"] <= 0 or ref["mem_bytes_per_s"] <= 0:
            raise CalibrationError(f"calibration file {p}: field 'reference_host' must give peak_flops, "
                                   f"mem_bytes_per_s (> 0) and op_overhead_s (>= 0)")
    peak = doc["meta"].get("peak_flops_per_s")
    if peak is not None and (not isinstance(peak, (int, float)) or isinstance(peak, bool) or not peak > 0
                             or not math.isfinite(peak)):
        raise CalibrationError(f"calibration file {p}: meta.peak_flops_per_s must be a number > 0, got {peak!r}")
    from .calibrate_control import control_of
    try:
        control = control_of(doc["meta"])
    except ValueError as e:
        raise CalibrationError(f"calibration file {p}: meta.control_flow: {e}") from None
    booster = json.dumps(doc["booster"], separators=(",", ":"))
    if hashlib.sha256(booster.encode()).hexdigest() != doc["booster_sha256"]:
        raise CalibrationError(f"calibration file {p}: the booster does not match its sha256 (corrupt file)")
    cal = Calibration(doc["kind"], doc["fingerprint"], doc["hardware"], doc["data_sha256"], tuple(ops), booster,
                      {k: float(v) for k, v in ref.items()} if doc["kind"] == "host" else None, doc["meta"])
    cal._state["control"] = control  # parsed once, here (``Calibration.control``)
    cal._booster()  # a booster XGBoost cannot read is refused now, not in the middle of a search
    return cal


def load_calibration(path: str | os.PathLike, hw: Any = None, *, machine: str | None = None) -> Calibration:
    """A calibration file checked for use with ``hw`` (a ``HardwareConfig``): a device file must
    have been fitted on the same config (fingerprint), a host file on this machine (``machine``:
    the fingerprint to compare with, default ``machine_fingerprint()``). One-line
    ``CalibrationError`` otherwise."""
    cal = read_calibration(path)
    p = os.fspath(path)
    if cal.kind == "host":
        here = machine or machine_fingerprint()["fingerprint"]
        if cal.fingerprint != here:
            raise CalibrationError(f"calibration file {p} was measured on another machine ({cal.hardware}); "
                                   f"rerun accel-tune calibrate --host here")
    elif hw is not None and cal.fingerprint != hw.fingerprint():
        raise CalibrationError(f"calibration file {p} was fitted for hardware {cal.hardware} "
                               f"(fingerprint {cal.fingerprint[:12]}), not {hw.name} ({hw.fingerprint()[:12]})")
    return cal


def _canonical(booster: str) -> str:
    """The booster text as the file's reader sees it (the digest is over this form)."""
    return json.dumps(json.loads(booster), separators=(",", ":"))


__all__ = ["Calibration", "CalibrationError", "OpSample", "host_sample", "roofline_sample", "feature_matrix",
           "feature_names", "fit_calibration", "model_weights", "read_calibration", "load_calibration", "machine_fingerprint",
           "cpu_identity", "machine_line",
           "data_sha256", "reference_host_of", "FORMAT", "VERSION", "KINDS", "channel_align", "SLOW_MODEL_EXCESS",
           "slow_phase_excess", "left_out_by_excess", "without_models"]
