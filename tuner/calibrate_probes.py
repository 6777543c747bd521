"""Probe models for ``accel-tune calibrate --host``: small whole models that put every elementwise
activation kind the host may run behind a convolution and its batch norm, as networks use them,
and fully connected layers too large for the CPU's caches, at batch 1 and at 64-256 rows.

A host calibration learns from the kinds the models it times contain, and a kind that only one
model holds vanishes with that model: with efficientnet_b0 held out of the zoo and built-ins,
``silu`` is in no other model and its whole-model prediction was 10 % under onnxruntime's, 1 %
with efficientnet's own ``silu`` rows kept (experiments/bench/calibration.py's data, 2026-11-27).
The probes give every kind of ``PROBE_KINDS`` rows of its own, at the activation sizes of a
network's stages (``PROBE_SHAPES``), so a model the calibration never saw meets none of them for
the first time. Each probe is one model per shape: every kind applied, side by side, to the batch
norm of its own 1x1 convolution of one input, so each sees values of a normal spread (no chain of
activations drifting into denormals, which would time the CPU's slow path).

One regime no model of the zoo or the built-ins reaches gets probes of its own too: **fully
connected layers whose weights stream from DRAM** (``DENSE_SHAPES``, 16 to 256 MB of weights; two
layers in a row each since the seventh session, and 151 MB, AlexNet's first classifier layer, too:
a layer alone finds part of its weights in the L3 on its next run, which a whole model's never do).
Their 1.3 GB of weights are views of one 256 MB pool of random numbers (``weight_pool``, eighth
session), so the calibration holds them in a fifth of the memory.
The zoo's largest weight matrix is 9 MB, which the CPU's caches partly hold, and the calibration
carried that speed to VGG-11's 476 MB of classifier weights: 1.4 ms predicted, 11.2 ms measured,
the whole model 23 % under onnxruntime (experiments/calibration_unseen.py, 2026-11-29; within
11 % on five runs with these probes).

The same weights read by more than one row (an LM head over a prompt, a transformer's feed-forward
layers at prefill) are compute-bound instead: **GEMMs of 64-256 rows on 16-256 MB of weights**
(``GEMM_SHAPES``). Without them the only rows with that much weight were the batch-1 ones, and
the fit carried their memory-bound rate to GPT-2's 768 x 50257 head (9.9 GFLOP on 154 MB of
weights): 48 ms predicted for 24 ms measured, the whole model +29 %, on a collection where the
DRAM probes ran 1.5-1.9x their usual time (another tenant on the memory bus). With them GPT-2
stayed within 10 % offline with the DRAM probes' times scaled by 1.9.

**A language model's vocabulary projection** (``VOCAB_SHAPES``) is that regime at another shape:
512-2048 inputs to 32-64 k outputs, on 64-256 MB of weights (the LM heads of GPT-2, OPT, Pythia,
Llama and TinyLlama are 768-2048 x 32000-50304). onnxruntime ran these GEMMs at 180-220 GFLOP/s as
it ran the square ones, but with only square GEMM probes the trees put GPT-2's 768 x 50257 head
on the side of the 8192 x 8192 probe on some features and of the 4096 ones on others: 80 ms
predicted for 45-50 ms measured, and the decoders +9 to +24 % whole (GPT-2 +23 and +24 % on two
calibrations, OPT-125m +22 and +23 %). With them, refitted on five calibrations' timings: the head
57 ms, GPT-2 +11 % and OPT-125m +9 % on the four calm ones (experiments/results/calibration_unseen/
runs.md, fifteenth session).

**Grouped convolutions, from depthwise to 64 channels per group** (``GROUPED_SHAPES`` x
``GROUP_WIDTHS``, with the calibration's features of the channels per group and of each group's
GEMM's inner dimension): onnxruntime runs a
grouped convolution group by group, each group a GEMM that narrow, and RegNetY's 8-wide groups
ran 3-4x slower per FLOP than the fit predicted from dense and depthwise ones (regnet_y_400mf
27-38 % under on every calibration). Probes of widths 4 to 64 alone (2026-11-29) taught the fit
that regime but moved the MobileNets' depthwise convolutions with it when their family was held
out. The probes now hold depthwise ones too (width 1, 3x3 and 5x5), so depthwise convolutions keep
rows of their own whatever family is held out. On two collections refitted offline: RegNet from
-38 and -36 % to within 20 % and -23 %, the 17 models held out by family 14 and 16 -> 15 and 15
(experiments/results/calibration_unseen/runs.md).

**Grouped convolutions that downsample** (stride 2, every width above but the 1x1 ones, on inputs
of twice the resolution): onnxruntime ran RegNetY's and the probes' 3x3 convolutions of 8 channels
per group 1.4-1.6x slower at stride 2 than at stride 1 for the same output (depthwise 1.7x), and no
model of the zoo has a grouped one. Refitted offline on four collections (2026-11-29, fourth
session), RegNetY-400MF never seen came out -21, -15, -12 and -17 % without them and -6, -12, -8
and -16 % with them (experiments/results/calibration_unseen/runs.md).

**Each stage's resolution at three channel counts** (the stage's, three quarters and half of it,
``GROUPED_SHAPES``), and **depthwise 7x7** (ConvNeXt). At one width the channels set the number
of groups, so with one channel count per resolution the number of groups stood for the
resolution: at 8 channels per group, 32 groups were only ever 14x14, and ResNeXt-50's 32 groups at
28x28 were predicted 1.6-1.7x their time, RegNetY's 26 groups at 14x14 0.5-0.6x. With three
counts per resolution a number of groups meets two or three resolutions, and the counts of
3 x 2^k fill the gaps between the powers of two. ConvNeXt's 7x7 depthwise convolutions, in no
model of the zoo, were predicted 6.5x their time on one collection, and 11x once the new channel
counts moved the depthwise fit (ConvNeXt +20 to +28 %). Refitted offline on three collections
(2026-11-29, fifth session): RegNetY-400MF never seen from -15, -10 and -11 % to -7, -5 and -1 %,
ResNeXt-50 from -3, -3 and +1 % to -1, 0 and +3 %; the 15 files within 20 % and the 17 models
with their family held out 16 on all three either way. For real, the 15 files within 20 % on the
three calibrations timed in a fast phase (RegNet -5, -2, -5 %; runs.md).

**A second set of real models never seen** (21 more, ``experiments/zoo/export.py --set fresh``,
picked after the probes above were fixed) found three gaps, 18 of 21 within 20 % (2026-11-29,
sixth session; experiments/results/calibration_unseen/runs.md):

- **Groups off onnxruntime's channel block** (12 and 24 channels per group, with the
  calibration's ``channel_align`` feature of a grouped convolution). onnxruntime runs a convolution in its blocked NCHWc
  layout only when the channels per group are whole blocks (16 with AVX-512); 3x3 convolutions
  of 24, 40 and 56 channels per group ran 1.7-2.2x slower per FLOP than those of 32, 48 and 64.
  RegNetY-1.6GF's 24-wide groups were predicted at 0.47x their time and the model came out -27
  to -30 %. With the probes and the feature, convolutions of 40 and 56 channels per group, in no
  probe, were predicted at 0.58-0.86x their time, against 0.42-0.66x with neither.
- **Slim networks' sizes** (the activation and data-movement probes also at 32 x 28 x 28,
  64 x 14 x 14 and 128 x 7 x 7, 25-100 KB): MnasNet 0.5 and ShuffleNetV2 x0.5 (0.8 and 0.5 ms)
  were predicted +40 and +41 %, their small convolutions 1.6-2.6x their time.
- **Data movement** (``movement_probe_graph``: NHWC transpose, channel shuffle, split, slice,
  concat, pad): no model of the zoo slices channels or shuffles them, and ShuffleNet's
  transposes, concats and slices were predicted at 1.8-2.8x their time.

Refitted offline on one collection (the 17 models, every probe, both sets of unseen files
profiled together), the 21 went from 18 to 21 within 20 % (MnasNet 0.5 +16 %, ShuffleNet x0.5
+10 %, RegNetY-1.6GF -6 %) and the 15 stayed 15.

**Masks, selections and Relay's bias epilogue** (``select_probe_graph``, seventh session): of the
kinds the zoo and the built-ins hold, ``bias_add`` (a convolution's bias as TVM's Relay writes
it, which onnxruntime folds into the convolution) and ``less`` were only in byoc_demo, so with
byoc_demo held out ``less`` was predicted at 5x its time in it (4.1 us against 0.8 per run) and
the folded bias at 2.8 us though it costs nothing (collection 21 of
experiments/results/calibration_unseen/runs.md). The probe gives them, ``greater``, ``equal``, ``and``, ``or``, ``not``,
``where`` and ``div`` rows at every probe size.

**Depthwise convolutions off the channel block** (``depthwise_probe_graph``, thirteenth session,
with the calibration's ``channel_align`` feature now given to depthwise convolutions too): every
depthwise convolution the probes and the zoo held had a multiple of 16 channels but MobileNetV3's
(8 mod 16). onnxruntime runs one of 2 mod 4 channels 4-8x slower than one of a few more channels,
and ShuffleNetV2 x1.0's 58-channel ones were predicted at a tenth of their time: the model, never
seen, came out -20 to -24 % on three calibrations. Refitted on K16's timing with the feature
capped at 4, -17 -> -13 % (uncapped -10 %; on K15's, uncapped, -23 -> -7 %); MnasNet 0.5 moved
up 4-12 points on each timing refitted (experiments/results/calibration_unseen/runs.md).
The fit still left the probes' own 2 mod 4 rows 18-56 % under their time (0.95 us a channel at
28 x 28 against 0.23-0.27 for a multiple of 4): twelve rows among four thousand, on the side of
every op that is no convolution in a split on the alignment. Since the sixteenth session there are
24 (``OFF_BLOCK``) and those ops sit on the other side (``calibration.NO_ALIGN``): 4-21 % under
(one 30 %), and ShuffleNetV2 x1.0 1-5 points nearer on each of seven timings refitted.
"""
from __future__ import annotations

from typing import Any, Sequence

# Batch-1 activations of the five stages of a ResNet-style network, 3.2 MB down to 0.1 MB of fp32:
# the sizes at which networks apply their activations, from cache-resident to memory-bound.
# Then a slim network's (a 0.5x ShuffleNet's 24 x 28 x 28 ... 96 x 7 x 7, MnasNet 0.5's): 100 down to
# 25 KB, where an op's fixed cost is most of it.
PROBE_SHAPES = ((1, 64, 112, 112), (1, 64, 56, 56), (1, 128, 28, 28), (1, 256, 14, 14), (1, 512, 7, 7),
                (1, 32, 28, 28), (1, 64, 14, 14), (1, 128, 7, 7))
PROBE_KINDS = ("relu", "relu6", "leaky_relu", "elu", "selu", "celu", "sigmoid", "hard_sigmoid", "silu",
               "hard_swish", "mish", "softplus", "softsign", "tanh", "gelu", "erf", "exp", "abs", "neg")
# gates x * kind(x), as torch exports SiLU (Sigmoid, Mul) and an older HardSwish (HardSigmoid, Mul):
# the batch norm's output feeds the kind and the mul, so onnxruntime fuses neither into the
# convolution and runs both alone over the whole tensor
GATE_KINDS = ("sigmoid", "hard_sigmoid")


def probe_graph(shape: Sequence[int], kinds: Sequence[str] = PROBE_KINDS,
                gates: Sequence[str] = GATE_KINDS) -> Any:
    """One probe model: input ``shape`` (N, C, H, W); for each kind, a 1x1 convolution to C
    channels, its batch norm and the kind; for each of ``gates``, the same batch norm times the
    kind of it; every activation and gate an output.

    Why the gates: in every other model a sigmoid either follows a convolution alone (fused into
    its kernel) or gates a squeeze-excitation's few channels, and a mul of two whole activations
    is in none. Torch's EfficientNets run SiLU as a Sigmoid and a Mul over whole activations:
    predicted at 2-2.8x (sigmoid) and 1.3-2.6x (mul) their time at the probe sizes, EfficientNet-B1
    and -B3 never seen +16 to +35 % on five calibrations of a 2-core EPYC. Refitted offline on
    one of them with these gates timed as models of their own, -1 and +3 % (2026-11-30,
    experiments/results/calibration_unseen/runs.md)."""
    from partition.builder import GraphBuilder
    n, c, h, w = (int(d) for d in shape)
    b = GraphBuilder.for_model(f"probe_{c}x{h}x{w}", 0)
    x = b.input("x", [n, c, h, w])
    outs = [b.conv_bn(x, c, 1, name=f"{kind}", act=kind) for kind in kinds]
    for kind in gates:
        y = b.conv_bn(x, c, 1, name=f"{kind}_gate", act=None)
        outs.append(b.mul(y, b.op(kind, [y], name=f"{kind}_gate.{kind}"), name=f"{kind}_gate.mul"))
    return b.finish(outs)


# (inputs, outputs) of batch-1 fully connected layers: 16, 64, 151 and 256 MB of fp32 weights
# (151 MB: AlexNet's first classifier layer, GPT-2's LM head)
DENSE_SHAPES = ((2048, 2048), (4096, 4096), (6144, 6144), (8192, 8192))
# (rows, inputs, outputs) of fully connected layers on as many weights, compute-bound: 2.1-8.6 GFLOP
GEMM_SHAPES = ((64, 4096, 4096), (64, 8192, 8192), (256, 2048, 2048))
# (rows, inputs, outputs) of a language model's vocabulary projection at prefill: 512-2048 inputs,
# 32-64 k outputs, 64-256 MB of weights (``VOCAB_SHAPES`` in the module docstring)
VOCAB_SHAPES = ((128, 1024, 32768), (64, 512, 65536), (256, 512, 32768), (64, 2048, 32768))


def weight_pool(elems: int, seed: int = 0) -> Any:
    """``elems`` random normal float32 numbers (standard deviation 0.01) that the fully connected
    probes take their weight matrices from, as views at different offsets: 1.3 GB of probe weights
    then hold 256 MB of memory for the whole calibration. Values only have to be ordinary numbers
    (no denormals, no overflow) for the timing; a layer's weights still differ from every other's,
    so onnxruntime keeps a buffer of its own for each, as for a real model's."""
    import numpy as np
    pool = np.random.default_rng(seed).standard_normal(int(elems), dtype=np.float32)
    pool *= np.float32(0.01)
    return pool


def pool_size(k: int, n: int, layers: int = 1) -> int:
    """How many numbers of a weight pool ``dense_probe_graph(k, n, layers=layers)`` reads."""
    return max(n * k, n * n if layers > 1 else 0) + layers


def dense_probe_graph(k: int, n: int, m: int = 1, layers: int = 1, pool: Any = None) -> Any:
    """``layers`` fully connected layers in a row, of ``m`` rows (batch): ``k`` inputs, ``n``
    outputs, then ``n`` to ``n`` (each layer's weights ``4 k n`` bytes). The batch-1 probes have two:
    a layer alone, run again and again, finds part of its weights still in the CPU's 32 MB L3,
    which a layer of a whole model never does (the others' weights came through since): alone a
    64 MB layer ran at 57-97 GB/s, in a chain of two at 49-50 GB/s, and a 16 MB one at 142 against
    68-91 GB/s (experiments/results/calibration_unseen/runs.md, seventh session). Layer ``i``'s
    weights are a view of ``pool`` (``weight_pool``, one of its own when None) from offset ``i``."""
    from partition.builder import GraphBuilder
    need = pool_size(k, n, layers)
    pool = weight_pool(need) if pool is None else pool
    if pool.size < need:
        raise ValueError(f"a weight pool of {pool.size} numbers is too small for {layers} layers of {k}x{n}")
    b = GraphBuilder.for_model(f"dense_{m}x{k}x{n}" + (f"x{layers}" if layers > 1 else ""), 0)
    y = b.input("x", [m, k])
    for i in range(layers):
        name, width = ("fc" if i == 0 else f"fc{i}"), y.shape[-1]  # this layer's inputs
        y = b.dense(y, n, name=name, weight=b.const(pool[i:i + n * width].reshape(n, width), f"{name}.weight"))
    return b.finish([y])


DENSE_LAYERS = 2

# A network's classifier (inputs, outputs) and how many of them side by side one probe holds:
# the same layer in models of 4 to 41 MB a run (``classifier_probe_graph``)
CLASSIFIER_SHAPES = ((1024, 1000), (1280, 1000))
CLASSIFIER_HEADS = (1, 2, 4, 8)


def classifier_probe_graph(k: int, n: int, heads: int, pool: Any = None) -> Any:
    """A network's head, ``heads`` times side by side: the global average pool of a (1, ``k``, 7,
    7) input, then ``heads`` fully connected layers of ``k`` inputs and ``n`` outputs reading it,
    added up. Between two runs of a small model what it touches stays in the CPU's L3: the same
    1280 x 1000 classifier (5.1 MB) took 53-83 us in MnasNet 0.5 (33 MB a run), 137-160 in
    MnasNet 1.0 (60 MB), 165-191 in MobileNetV2 (66 MB) (2026-11-30, a 2-core EPYC with a 32 MB
    L3), and of the zoo's models under 60 MB a run only MobileNetV3-Small has one (1024 x 1000,
    73-154 us). The probes hold the same layer in models of one to eight times its weights
    (``OpSample.model_bytes``: 44 us alone, 51-59 each of four, 89-130 each of eight). Head
    ``i``'s weights are a view of ``pool`` (``weight_pool``) from offset ``i``."""
    from partition.builder import GraphBuilder
    pool = weight_pool(n * k + heads) if pool is None else pool
    if pool.size < n * k + heads:
        raise ValueError(f"a weight pool of {pool.size} numbers is too small for {heads} heads of {k}x{n}")
    b = GraphBuilder.for_model(f"probe_classifier_{k}x{n}x{heads}", 0)
    x = b.flatten(b.global_avg_pool2d(b.input("x", [1, k, 7, 7]), name="avgpool"), axis=1, name="flatten")
    y = None
    for i in range(heads):
        h = b.dense(x, n, name=f"fc{i}", weight=b.const(pool[i:i + n * k].reshape(n, k), f"fc{i}.weight"))
        y = h if y is None else b.add(y, h, name=f"sum{i}")
    return b.finish([y])


# Activations of the four later stages of a ResNet-style network, each also at half and three
# quarters of its channels (so a number of groups is not a resolution: the docstring), and the
# (channels per group, kernel) of each grouped convolution a probe holds: depthwise 3x3, 5x5 and
# 7x7 (MobileNet, EfficientNet, ConvNeXt), then 2 to 64 channels per group (RegNet's 8 and 16,
# ResNeXt's 4 and 8 ... wider)
STAGE_SHAPES = ((1, 64, 56, 56), (1, 128, 28, 28), (1, 256, 14, 14), (1, 512, 7, 7))
GROUPED_SHAPES = tuple((n, c * q // 4, h, w) for n, c, h, w in STAGE_SHAPES for q in (2, 3, 4))
GROUP_WIDTHS = ((1, 3), (1, 5), (1, 7), (2, 3), (4, 1), (4, 3), (8, 1), (8, 3), (12, 3), (16, 1), (16, 3), (24, 1),
                (24, 3), (32, 1), (32, 3), (64, 1), (64, 3))


# The stride-2 probes hold the kernels that downsample: a 1x1 grouped convolution does not.
STRIDED_WIDTHS = tuple((gw, k) for gw, k in GROUP_WIDTHS if k > 1)


def grouped_probe_graph(shape: Sequence[int], widths: Sequence[tuple[int, int]] = GROUP_WIDTHS,
                        stride: int = 1) -> Any:
    """One grouped-convolution probe: input ``shape`` (N, C, H, W); for each (channels per group,
    kernel) of ``widths`` narrower than C, a convolution of C to C channels in C / width groups at
    ``stride``, its batch norm and a relu, side by side on the input."""
    from partition.builder import GraphBuilder
    n, c, h, w = (int(d) for d in shape)
    b = GraphBuilder.for_model(f"probe_grouped{'_s%d' % stride if stride > 1 else ''}_{c}x{h}x{w}", 0)
    x = b.input("x", [n, c, h, w])
    return b.finish([b.conv_bn(x, c, k, stride=stride, groups=c // gw, name=f"g{gw}k{k}", act="relu")
                     for gw, k in widths if c % gw == 0 and gw < c])


# Depthwise convolutions off onnxruntime's channel block (``depthwise_probe_graph``): (divisor,
# offset, stride, kernel), the channels a stage's count over the divisor plus the offset. 3x3 ones
# of 2, 4, 6, 8 and 12 mod 16 at stride 1 and 2; 5x5 ones (MnasNet, MobileNetV3) of 8 and 12; then
# more of 2 mod 4 (the slowest: four at stride 1, two at stride 2 per stage), so the fit has
# enough of them to follow (sixteenth session: ``calibration.NO_ALIGN``)
OFF_BLOCK = ((2, -10, 1, 3), (2, -4, 1, 3), (2, 2, 1, 3), (2, 8, 1, 3), (2, -10, 2, 3), (2, 4, 2, 3),
             (2, 8, 1, 5), (2, -4, 2, 5), (2, -2, 1, 3), (2, 10, 1, 3), (2, 2, 2, 3))


def off_block_channels(c: int) -> list[tuple[int, int, int]]:
    """(channels, stride, kernel) of each ``OFF_BLOCK`` branch of a ``depthwise_probe_graph`` on
    ``c`` input channels."""
    return [(c // d + o, s, k) for d, o, s, k in OFF_BLOCK]


def depthwise_probe_graph(shape: Sequence[int]) -> Any:
    """One probe of depthwise convolutions whose channels are not whole blocks of onnxruntime's
    NCHWc layout: input ``shape`` (N, C, H, W) and, for each (channels, stride, kernel) of
    ``off_block_channels``, a 1x1 convolution to that many channels with its batch norm and a
    relu, a depthwise convolution at that stride and kernel with its batch norm, and a 1x1
    convolution back to C channels with its batch norm and a relu: a ShuffleNet or MobileNet
    block, so each convolution reads and writes tensors inside the model.

    The grouped probes' channels are all multiples of 16, as are those of the zoo's depthwise
    convolutions but MobileNetV3's (8 mod 16). In these probes onnxruntime ran a 3x3 depthwise
    convolution of 2 mod 4 channels 4-8x slower than one of six more channels (54 channels at
    28 x 28 55.1 us, 60 channels 8.8; 246 at 7 x 7 51.0 us, 252 7.3), and one of 8 mod 16 up to
    2.3x slower than one of 4 mod 16 (72 channels at 28 x 28 20.2 us; 2026-11-30, a 2-core EPYC).
    ShuffleNetV2 x1.0's depthwise convolutions of 58 channels were predicted at a tenth of their
    time in context, and the model came out -20 to -24 % on K11, K14 and K15
    (experiments/results/calibration_unseen/runs.md)."""
    from partition.builder import GraphBuilder
    n, c, h, w = (int(d) for d in shape)
    b = GraphBuilder.for_model(f"probe_depthwise_{c}x{h}x{w}", 0)
    x = b.input("x", [n, c, h, w])
    outs = []
    for k, s, window in off_block_channels(c):
        name = f"dw{k}s{s}k{window}"
        y = b.conv_bn(x, k, 1, name=f"{name}.in")
        y = b.conv_bn(y, k, window, stride=s, groups=k, name=f"{name}.dw", act=None)
        outs.append(b.conv_bn(y, c, 1, name=f"{name}.out"))
    return b.finish(outs)


def movement_probe_graph(shape: Sequence[int]) -> Any:
    """One data-movement probe: input ``shape`` (N, C, H, W) and, each on the input, the layout
    changes networks make: NCHW to NHWC, a channel shuffle (reshape, transpose, reshape), a split
    into halves, a slice of the first half, a concat of two copies and a pad by one pixel.

    The shuffle sits between two relus, as in a network: onnxruntime's Reshape aliases an
    intermediate tensor for free but copies a graph input or output. With the shuffle on the
    input and its result an output, the probes' reshapes took 1-77 us (a copy), the fit put
    ShuffleNetV2 x0.5's 32 reshapes at 42 us where its profile shows no kernel, and the model
    came out +23 and +24 % (2026-11-30, K12 and K13 of experiments/results/calibration_unseen/runs.md)."""
    from partition.builder import GraphBuilder
    n, c, h, w = (int(d) for d in shape)
    b = GraphBuilder.for_model(f"probe_movement_{c}x{h}x{w}", 0)
    x = b.input("x", [n, c, h, w])
    inner = b.relu(x, name="shuffle_pre")
    shuffled = b.transpose(b.reshape(inner, shape=(n, 2, c // 2, h, w), name="shuffle_in"), perm=(0, 2, 1, 3, 4),
                           name="shuffle")
    halves = b.ops("split", [x], {"axis": 1, "sizes": (c // 2, c - c // 2)}, name="split")
    return b.finish([b.transpose(x, perm=(0, 2, 3, 1), name="to_nhwc"),
                     b.relu(b.reshape(shuffled, shape=(n, c, h, w), name="shuffle_out"), name="shuffle_post"),
                     *halves,
                     b.slice(x, starts=(0,), ends=(c // 2,), axes=(1,), name="slice"),
                     b.concat(x, x, axis=1, name="concat"),
                     b.pad(x, pads=(0, 0, 1, 1, 0, 0, 1, 1), name="pad")])


def select_probe_graph(shape: Sequence[int]) -> Any:
    """One probe of masks and selections and of the bias epilogue as TVM's Relay writes it: input
    ``shape`` (N, C, H, W) and, each on the input, a 1x1 convolution with no bias of its own, a
    ``bias_add`` and a relu (onnxruntime folds both into the convolution); comparisons against
    constants (less, greater, equal), their and / or / not, a where on a mask and a division by a
    constant. The where's condition is a mask as networks have (an attention mask with no padding:
    all true), not the sign of random values: onnxruntime's Where ran 776 us on 200 K elements
    under a random condition and 103-123 us under an all-true or causal one (branches the CPU
    mispredicts), and probes with the random one put ALBERT's 24 masks at 4.5-4.8x their time."""
    import numpy as np
    from partition.builder import GraphBuilder
    n, c, h, w = (int(d) for d in shape)
    b = GraphBuilder.for_model(f"probe_select_{c}x{h}x{w}", 0)
    x = b.input("x", [n, c, h, w])
    y = b.bias_add(b.conv(x, c, 1, bias=False, name="conv"), b.normal("conv.bias", (c,), 0.01), axis=1, name="bias")
    zero, half = b.const(np.float32(0.0), "zero"), b.const(np.float32(0.5), "half")
    neg, big = b.less(x, zero, name="less"), b.greater(x, half, name="greater")
    return b.finish([b.relu(y, name="relu"), b.equal(x, zero, name="equal"), b.op("and", [neg, big], name="and"),
                     b.op("or", [neg, big], name="or"), b.op("not", [neg], name="not"),
                     b.where(b.equal(x, x, name="mask"), x, zero, name="where"),
                     b.div(x, b.const(np.float32(3.0), "three"), name="div")])


def dense_label(k: int, n: int) -> str:
    """The label of the fully connected probe with ``k`` inputs and ``n`` outputs."""
    return f"probe:dense:{k}x{n}"


def dense_probe(k: int, n: int, pool: Any = None) -> tuple[str, Any]:
    """(label, graph) of the fully connected probe of ``DENSE_SHAPES`` with ``k`` inputs and ``n``
    outputs (its own weight pool when ``pool`` is None: the same sizes, other values)."""
    pool = weight_pool(pool_size(k, n, DENSE_LAYERS)) if pool is None else pool
    return dense_label(k, n), dense_probe_graph(k, n, layers=DENSE_LAYERS, pool=pool)


def probe_graphs(shapes: Sequence[Sequence[int]] = PROBE_SHAPES) -> list[tuple[str, Any]]:
    """(label, graph) of one activation, one data-movement and one select probe per shape, one fully connected
    probe per ``DENSE_SHAPES``, ``GEMM_SHAPES`` and ``VOCAB_SHAPES``, one grouped-convolution probe per
    ``GROUPED_SHAPES`` (and one at stride 2), one depthwise probe per ``STAGE_SHAPES`` and one
    classifier probe per ``CLASSIFIER_SHAPES`` and ``CLASSIFIER_HEADS``."""
    pool = weight_pool(max([pool_size(k, n, DENSE_LAYERS) for k, n in DENSE_SHAPES]
                           + [pool_size(k, n) for _, k, n in GEMM_SHAPES + VOCAB_SHAPES]))
    return ([(f"probe:{s[1]}x{s[2]}x{s[3]}", probe_graph(s)) for s in shapes]
            + [(f"probe:movement:{s[1]}x{s[2]}x{s[3]}", movement_probe_graph(s)) for s in shapes]
            + [(f"probe:select:{s[1]}x{s[2]}x{s[3]}", select_probe_graph(s)) for s in shapes]
            + [dense_probe(k, n, pool) for k, n in DENSE_SHAPES]
            + [(f"probe:gemm:{m}x{k}x{n}", dense_probe_graph(k, n, m, pool=pool)) for m, k, n in GEMM_SHAPES]
            + [(f"probe:vocab:{m}x{k}x{n}", dense_probe_graph(k, n, m, pool=pool)) for m, k, n in VOCAB_SHAPES]
            + [(f"probe:grouped:{s[1]}x{s[2]}x{s[3]}", grouped_probe_graph(s)) for s in GROUPED_SHAPES]
            + [(f"probe:grouped:s2:{s[1]}x{2 * s[2]}x{2 * s[3]}",
                grouped_probe_graph((s[0], s[1], 2 * s[2], 2 * s[3]), STRIDED_WIDTHS, stride=2))
               for s in GROUPED_SHAPES]
            + [(f"probe:depthwise:{s[1]}x{s[2]}x{s[3]}", depthwise_probe_graph(s)) for s in STAGE_SHAPES]
            + [(f"probe:classifier:{k}x{n}x{h}", classifier_probe_graph(k, n, h, pool))
               for k, n in CLASSIFIER_SHAPES for h in CLASSIFIER_HEADS])


__all__ = ["CLASSIFIER_HEADS", "CLASSIFIER_SHAPES", "GATE_KINDS", "DENSE_LAYERS", "DENSE_SHAPES", "GEMM_SHAPES",
           "GROUPED_SHAPES", "GROUP_WIDTHS", "OFF_BLOCK", "PROBE_KINDS", "PROBE_SHAPES", "STAGE_SHAPES",
           "STRIDED_WIDTHS", "VOCAB_SHAPES", "classifier_probe_graph", "dense_label", "dense_probe",
           "dense_probe_graph", "depthwise_probe_graph", "grouped_probe_graph", "movement_probe_graph",
           "off_block_channels", "probe_graph", "probe_graphs", "select_probe_graph", "weight_pool", "pool_size"]
