"""ResNet-18 and ResNet-50 (torchvision layout, v1.5: the bottleneck's stride sits on the 3x3 conv)."""
from __future__ import annotations

from ..builder import GraphBuilder
from ..ir import Graph, Value

# The last batch norm of every residual branch starts small so the sum over 8-16 blocks does not
# grow the activations by orders of magnitude (the idea behind zero-init-residual, kept non-zero).
_RESIDUAL_GAMMA = 0.3

_CONFIGS = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
}


def _basic(b: GraphBuilder, x: Value, width: int, stride: int, name: str) -> Value:
    y = b.conv_bn(x, width, 3, stride=stride, name=f"{name}.1")
    y = b.conv_bn(y, width, 3, name=f"{name}.2", act=None, gamma=_RESIDUAL_GAMMA)
    return _join(b, x, y, width, stride, name)


def _bottleneck(b: GraphBuilder, x: Value, width: int, stride: int, name: str) -> Value:
    y = b.conv_bn(x, width, 1, name=f"{name}.1")
    y = b.conv_bn(y, width, 3, stride=stride, name=f"{name}.2")
    y = b.conv_bn(y, width * 4, 1, name=f"{name}.3", act=None, gamma=_RESIDUAL_GAMMA)
    return _join(b, x, y, width * 4, stride, name)


def _join(b: GraphBuilder, x: Value, y: Value, out_ch: int, stride: int, name: str) -> Value:
    if stride != 1 or x.shape[1] != out_ch:
        x = b.conv_bn(x, out_ch, 1, stride=stride, name=f"{name}.downsample", act=None)
    return b.relu(b.add(y, x, name=f"{name}.add"), name=f"{name}.relu")


def build(name: str, seed: int = 0) -> Graph:
    kind, depths = _CONFIGS[name]
    block = _basic if kind == "basic" else _bottleneck
    b = GraphBuilder.for_model(name, seed)
    x = b.input("pixel_values", (1, 3, 224, 224))
    y = b.conv_bn(x, 64, 7, stride=2, name="stem")
    y = b.max_pool2d(y, kernel=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), name="stem.pool")
    for stage, (depth, width) in enumerate(zip(depths, (64, 128, 256, 512))):
        for i in range(depth):
            stride = 2 if (i == 0 and stage > 0) else 1
            y = block(b, y, width, stride, f"layer{stage + 1}.{i}")
    y = b.global_avg_pool2d(y, name="avgpool")
    y = b.flatten(y, axis=1, name="flatten")
    logits = b.dense(y, 1000, name="fc")
    return b.finish([logits], model=name)
