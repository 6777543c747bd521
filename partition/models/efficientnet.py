"""EfficientNet-B0 (Tan & Le 2019, torchvision layout): MBConv blocks with SiLU, squeeze-and-
excitation gated by a sigmoid, 3x3 and 5x5 depthwise convs."""
from __future__ import annotations

from ..builder import GraphBuilder
from ..ir import Graph, Value
from .mobilenet_v3 import squeeze_excite

# (expand ratio, kernel, first stride, output channels, repeats): the paper's table 1 (B0).
_B0 = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
       (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))


def _mbconv(b: GraphBuilder, x: Value, t: int, k: int, stride: int, out: int, name: str) -> Value:
    c = x.shape[1]
    exp = c * t
    y = x if t == 1 else b.conv_bn(x, exp, 1, name=f"{name}.expand", act="silu")
    y = b.conv_bn(y, exp, k, stride=stride, groups=exp, name=f"{name}.dw", act="silu")
    y = squeeze_excite(b, y, max(1, c // 4), name=f"{name}.se", act="silu", gate="sigmoid")
    residual = stride == 1 and c == out
    y = b.conv_bn(y, out, 1, name=f"{name}.project", act=None, gamma=0.5 if residual else 1.0)
    return b.add(y, x, name=f"{name}.add") if residual else y  # stochastic depth is identity at inference


def build(seed: int = 0) -> Graph:
    b = GraphBuilder.for_model("efficientnet_b0", seed)
    x = b.input("pixel_values", (1, 3, 224, 224))
    y = b.conv_bn(x, 32, 3, stride=2, name="features.0", act="silu")
    for s, (t, k, stride, out, n) in enumerate(_B0, 1):
        for i in range(n):
            y = _mbconv(b, y, t, k, stride if i == 0 else 1, out, f"features.{s}.{i}")
    y = b.conv_bn(y, 1280, 1, name="features.8", act="silu")
    y = b.flatten(b.global_avg_pool2d(y, name="avgpool"), axis=1, name="flatten")
    logits = b.dense(y, 1000, name="classifier.1")
    return b.finish([logits], model="efficientnet_b0")
