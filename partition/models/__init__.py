"""Built-in models: no files, deterministic weights (seeded per model), float32, batch 1.

``get(name)`` builds one; ``list_models()`` describes them without building anything."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..ir import Graph
from . import bert, byoc_demo, efficientnet, mobilenet, mobilenet_v3, resnet, ssd
from .stats import ModelStats, count_macs, count_nodes, count_params, model_stats


class UnknownModelError(ValueError):
    pass


@dataclass(frozen=True)
class ModelInfo:
    name: str
    family: str
    description: str
    inputs: tuple[tuple[str, tuple[int, ...], str], ...]  # (name, shape, dtype) per graph input
    build: Callable[[int], Graph]  # seed -> graph

    def input_specs(self) -> list[dict]:
        return [{"name": n, "shape": list(s), "dtype": d} for n, s, d in self.inputs]


_IMG224 = (("pixel_values", (1, 3, 224, 224), "float32"),)
_TOKENS = (("input_ids", (1, 128), "int64"), ("attention_mask", (1, 128), "int64"))

_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("resnet18", "resnet", "ResNet-18 (basic blocks), 224x224, ImageNet head", _IMG224,
              lambda s: resnet.build("resnet18", s)),
    ModelInfo("resnet50", "resnet", "ResNet-50 v1.5 (bottlenecks, stride on the 3x3), 224x224", _IMG224,
              lambda s: resnet.build("resnet50", s)),
    ModelInfo("mobilenet_v2", "mobilenet", "MobileNetV2 1.0, 224x224, ReLU6, depthwise 3x3", _IMG224,
              mobilenet.build),
    ModelInfo("mobilenet_v3_small", "mobilenet", "MobileNetV3-Small, 224x224, hard-swish, squeeze-excite "
              "(hard-sigmoid gate)", _IMG224, lambda s: mobilenet_v3.build("mobilenet_v3_small", s)),
    ModelInfo("mobilenet_v3_large", "mobilenet", "MobileNetV3-Large, 224x224, hard-swish, squeeze-excite "
              "(hard-sigmoid gate)", _IMG224, lambda s: mobilenet_v3.build("mobilenet_v3_large", s)),
    ModelInfo("efficientnet_b0", "efficientnet", "EfficientNet-B0, 224x224, MBConv with SiLU and "
              "squeeze-excite (sigmoid gate)", _IMG224, efficientnet.build),
    ModelInfo("bert_base", "bert", "BERT-base encoder + pooler: 12 layers, hidden 768, 12 heads, seq 128",
              _TOKENS, lambda s: bert.build("bert_base", s)),
    ModelInfo("bert_tiny", "bert", "BERT-tiny encoder + pooler: 2 layers, hidden 128, 2 heads, seq 128",
              _TOKENS, lambda s: bert.build("bert_tiny", s)),
    ModelInfo("ssd_detector", "ssd", "small SSD-style detector, 256x256: conv backbone, two heads, "
              "box decode and non_max_suppression", (("image", (1, 3, 256, 256), "float32"),), ssd.build),
    ModelInfo("byoc_demo", "control", "TVM BYOC control-flow demo: reshape, add, then a Loop whose body "
              "runs conv2d+bias+relu and an If", (("x", (1, 512), "float32"),), byoc_demo.build),
)


def list_models() -> list[ModelInfo]:
    return list(_MODELS)


def info(name: str) -> ModelInfo:
    for m in _MODELS:
        if m.name == name:
            return m
    raise UnknownModelError(f"unknown model '{name}'; known models: {', '.join(m.name for m in _MODELS)}")


def get(name: str, seed: int = 0) -> Graph:
    """Build the built-in model ``name``; the same (name, seed) gives the same weights."""
    m = info(name)
    g = m.build(seed)
    g.meta.setdefault("source", f"builtin:{name}")
    g.meta.setdefault("model", name)
    return g


__all__ = ["get", "info", "list_models", "ModelInfo", "UnknownModelError", "ModelStats", "model_stats",
           "count_macs", "count_nodes", "count_params"]
