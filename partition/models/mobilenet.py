"""MobileNetV2 1.0 (torchvision layout): inverted residuals with depthwise 3x3 convs and ReLU6."""
from __future__ import annotations

from ..builder import GraphBuilder
from ..ir import Graph, Value

# (expansion t, output channels c, repeats n, first stride s), from the MobileNetV2 paper, table 2.
_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
             (6, 320, 1, 1))


def _inverted_residual(b: GraphBuilder, x: Value, out_ch: int, stride: int, t: int, name: str) -> Value:
    c = x.shape[1]
    y = x
    if t != 1:
        y = b.conv_bn(y, c * t, 1, name=f"{name}.expand", act="relu6")
    y = b.conv_bn(y, c * t, 3, stride=stride, groups=c * t, name=f"{name}.dw", act="relu6")
    residual = stride == 1 and c == out_ch
    y = b.conv_bn(y, out_ch, 1, name=f"{name}.project", act=None, gamma=0.5 if residual else 1.0)
    return b.add(y, x, name=f"{name}.add") if residual else y


def build(seed: int = 0) -> Graph:
    b = GraphBuilder.for_model("mobilenet_v2", seed)
    x = b.input("pixel_values", (1, 3, 224, 224))
    y = b.conv_bn(x, 32, 3, stride=2, name="features.0", act="relu6")
    idx = 1
    for t, c, n, s in _SETTINGS:
        for i in range(n):
            y = _inverted_residual(b, y, c, s if i == 0 else 1, t, f"features.{idx}")
            idx += 1
    y = b.conv_bn(y, 1280, 1, name=f"features.{idx}", act="relu6")
    y = b.global_avg_pool2d(y, name="avgpool")
    y = b.flatten(y, axis=1, name="flatten")
    logits = b.dense(y, 1000, name="classifier")
    return b.finish([logits], model="mobilenet_v2")
