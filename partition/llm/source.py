"""Where a decoder comes from: the one small interface the serving model reads.

A ``DecoderSource`` gives the graph of one device for ``B`` sequences x ``T`` new tokens at
context ``L`` (a layer range of a pipeline stage, a tensor-parallel shard), the KV-cache bytes per
token and the parameter count. A built-in name and a Hugging Face ``config.json`` both become a
``ConfigSource``; an ONNX decoder exported with its KV cache is an ``OnnxSource``
(``partition.llm.onnx_source``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..ir import Graph
from .config import ConfigError, DecoderConfig, resolve
from .graph import Shard, decoder_graph, stage_layers


class DecoderSource(Protocol):
    name: str
    layers: int

    def graph(self, batch: int, tokens: int, context: int, *, tp: int = 1, first_layer: int = 0,
              layers: int | None = None, embed: bool | None = None, head: bool | None = None,
              dtype: str = "float16") -> Graph: ...

    def check_split(self, tp: int, pp: int) -> None: ...

    def check_context(self, tokens: int) -> None: ...

    def kv_bytes_per_token(self, elem_bytes: float) -> float: ...

    def params(self) -> int: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ConfigSource:
    """A decoder given by its configuration (built-in or config.json)."""
    config: DecoderConfig

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def layers(self) -> int:
        return self.config.layers

    def graph(self, batch, tokens, context, *, tp=1, first_layer=0, layers=None, embed=None, head=None,
              dtype="float16") -> Graph:
        return decoder_graph(self.config, batch, tokens, context, tp=tp, first_layer=first_layer, layers=layers,
                             embed=embed, head=head, dtype=dtype)

    def check_split(self, tp: int, pp: int) -> None:
        Shard.of(self.config, tp)
        stage_layers(self.config.layers, pp)

    def check_context(self, tokens: int) -> None:
        """Learned positions end at the table: a longer context has no position to embed (rotary
        positions extend, so a rotary model takes any context, its quality aside)."""
        c = self.config
        if c.positions == "learned" and tokens > c.max_positions:
            raise ConfigError(f"{c.name} has {c.max_positions} learned positions; input + output - 1 = "
                              f"{tokens} tokens do not fit")

    def kv_bytes_per_token(self, elem_bytes: float) -> float:
        """K and V of every layer for one token of one sequence (the whole model, no split)."""
        c = self.config
        return 2 * c.layers * c.kv_heads * c.head_dim * elem_bytes

    def params(self) -> int:
        return self.config.params()

    def describe(self) -> dict[str, Any]:
        c = self.config
        return {"name": c.name, "params": c.params(), "active_params": c.active_params(), "layers": c.layers,
                "hidden": c.hidden, "heads": c.heads, "kv_heads": c.kv_heads, "head_dim": c.head_dim, "ffn": c.ffn,
                "vocab": c.vocab, "activation": c.activation, "experts": c.experts,
                "experts_per_token": c.experts_per_token, "source": c.source}


def source_for(model: str) -> DecoderSource:
    """``--model``: a built-in name, a config.json, or an ONNX decoder with its KV cache."""
    if str(model).lower().endswith(".onnx"):
        from .onnx_source import OnnxSource
        return OnnxSource.load(model)
    return ConfigSource(resolve(model))


__all__ = ["DecoderSource", "ConfigSource", "source_for"]
