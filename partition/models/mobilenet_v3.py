"""MobileNetV3-Small and -Large (Howard et al. 2019, torchvision layout): inverted residuals with
hard-swish, squeeze-and-excitation gated by hard-sigmoid, 3x3 and 5x5 depthwise convs."""
from __future__ import annotations

from ..builder import GraphBuilder
from ..ir import Graph, Value

# (kernel, expanded channels, output channels, squeeze-excite, activation, stride): the paper's
# tables 1 and 2, as torchvision's _mobilenet_v3_conf lists them.
_LARGE = ((3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2), (3, 72, 24, False, "relu", 1),
          (5, 72, 40, True, "relu", 2), (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1),
          (3, 240, 80, False, "hard_swish", 2), (3, 200, 80, False, "hard_swish", 1),
          (3, 184, 80, False, "hard_swish", 1), (3, 184, 80, False, "hard_swish", 1),
          (3, 480, 112, True, "hard_swish", 1), (3, 672, 112, True, "hard_swish", 1),
          (5, 672, 160, True, "hard_swish", 2), (5, 960, 160, True, "hard_swish", 1),
          (5, 960, 160, True, "hard_swish", 1))
_SMALL = ((3, 16, 16, True, "relu", 2), (3, 72, 24, False, "relu", 2), (3, 88, 24, False, "relu", 1),
          (5, 96, 40, True, "hard_swish", 2), (5, 240, 40, True, "hard_swish", 1),
          (5, 240, 40, True, "hard_swish", 1), (5, 120, 48, True, "hard_swish", 1),
          (5, 144, 48, True, "hard_swish", 1), (5, 288, 96, True, "hard_swish", 2),
          (5, 576, 96, True, "hard_swish", 1), (5, 576, 96, True, "hard_swish", 1))
_CONFIGS = {"mobilenet_v3_small": (_SMALL, 1024), "mobilenet_v3_large": (_LARGE, 1280)}


def make_divisible(v: float, divisor: int = 8) -> int:
    """torchvision's _make_divisible: round to a multiple of ``divisor``, never below 90 %."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def squeeze_excite(b: GraphBuilder, x: Value, squeeze: int, *, name: str, act: str = "relu",
                   gate: str = "hard_sigmoid") -> Value:
    """Global average pool, 1x1 conv down, ``act``, 1x1 conv up, ``gate``, scale the input."""
    c = x.shape[1]
    s = b.global_avg_pool2d(x, name=f"{name}.avgpool")
    s = b.op(act, [b.conv(s, squeeze, 1, name=f"{name}.fc1")], name=f"{name}.{act}")
    s = b.conv(s, c, 1, name=f"{name}.fc2", gain=1.0)
    # torch's Hardsigmoid is relu6(x + 3) / 6: ONNX HardSigmoid with alpha 1/6 (not its 0.2 default).
    attrs = {"alpha": 1.0 / 6.0, "beta": 0.5} if gate == "hard_sigmoid" else {}
    s = b.op(gate, [s], attrs, name=f"{name}.{gate}")
    return b.mul(x, s, name=f"{name}.scale")


def _block(b: GraphBuilder, x: Value, k: int, exp: int, out: int, se: bool, act: str, stride: int,
           name: str) -> Value:
    c = x.shape[1]
    y = x
    if exp != c:
        y = b.conv_bn(y, exp, 1, name=f"{name}.expand", act=act)
    y = b.conv_bn(y, exp, k, stride=stride, groups=exp, name=f"{name}.dw", act=act)
    if se:
        y = squeeze_excite(b, y, make_divisible(exp // 4), name=f"{name}.se")
    residual = stride == 1 and c == out
    y = b.conv_bn(y, out, 1, name=f"{name}.project", act=None, gamma=0.5 if residual else 1.0)
    return b.add(y, x, name=f"{name}.add") if residual else y


def build(name: str, seed: int = 0) -> Graph:
    blocks, last = _CONFIGS[name]
    b = GraphBuilder.for_model(name, seed)
    x = b.input("pixel_values", (1, 3, 224, 224))
    y = b.conv_bn(x, 16, 3, stride=2, name="features.0", act="hard_swish")
    for i, cfg in enumerate(blocks, 1):
        y = _block(b, y, *cfg, name=f"features.{i}")
    y = b.conv_bn(y, 6 * y.shape[1], 1, name=f"features.{len(blocks) + 1}", act="hard_swish")
    y = b.flatten(b.global_avg_pool2d(y, name="avgpool"), axis=1, name="flatten")
    y = b.hard_swish(b.dense(y, last, name="classifier.0"), name="classifier.1")
    logits = b.dense(y, 1000, name="classifier.3")
    return b.finish([logits], model=name)
