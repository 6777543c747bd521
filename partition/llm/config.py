"""Decoder configurations: one frozen, validated ``DecoderConfig``, the built-in models with their
published hyper-parameters (each with its source), and a reader of Hugging Face ``config.json``
files of the llama, mistral, mixtral, qwen2, gpt2, gptj and falcon families by their documented
fields. Bad input raises ``ConfigError`` with one line naming the field."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

ACTIVATIONS = ("silu_gated", "gelu", "gelu_tanh", "relu")
NORMS = ("rms", "layer")
POSITIONS = ("rotary", "learned")

# Bounds that catch typos and absurd files (a hidden size of 10**9 is not a model), wide enough for
# any published decoder.
_LIMITS = {"layers": 4096, "hidden": 1 << 20, "heads": 1 << 14, "kv_heads": 1 << 14, "head_dim": 1 << 14,
           "ffn": 1 << 22, "vocab": 1 << 24, "max_positions": 1 << 26, "experts": 4096, "experts_per_token": 4096,
           "rotary_dim": 1 << 14}


class ConfigError(ValueError):
    """A decoder configuration that cannot describe a model; the message names the field."""


@dataclass(frozen=True)
class DecoderConfig:
    """A decoder-only transformer as its shapes. ``ffn`` is the hidden size of the MLP (of one
    expert for a mixture of experts); ``activation`` ``silu_gated`` is the Llama MLP (gate, up,
    down), the others are two-matrix MLPs. ``parallel_attn``: attention and MLP read the same
    input and add to the residual together (GPT-J, Falcon); ``parallel_norms`` 2 gives each its own
    norm (Falcon's new decoder architecture). ``rotary_dim`` rotates the first features of each head
    (GPT-J: 64 of 256)."""
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    activation: str = "silu_gated"
    norm: str = "rms"
    positions: str = "rotary"
    head_dim: int = 0                 # 0: hidden // heads
    rotary_dim: int = 0               # 0: the whole head
    rope_theta: float = 10000.0
    max_positions: int = 4096
    parallel_attn: bool = False
    parallel_norms: int = 1
    tied_embeddings: bool = False
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    lm_head_bias: bool = False
    experts: int = 1
    experts_per_token: int = 1
    source: str = ""

    def __post_init__(self):
        for f in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "max_positions", "experts",
                  "experts_per_token"):
            _positive(self.name, f, getattr(self, f))
        for f in ("head_dim", "rotary_dim"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _LIMITS[f]:
                raise ConfigError(f"{self.name}: {f} must be an integer from 0 to {_LIMITS[f]}, got {v!r}")
        if self.head_dim == 0:
            if self.hidden % self.heads:
                raise ConfigError(f"{self.name}: hidden size {self.hidden} is not divisible by {self.heads} heads")
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if self.heads % self.kv_heads:
            raise ConfigError(f"{self.name}: {self.heads} attention heads are not divisible by "
                              f"{self.kv_heads} key/value heads")
        if self.rotary_dim == 0:
            object.__setattr__(self, "rotary_dim", self.head_dim)
        if self.rotary_dim > self.head_dim or self.rotary_dim % 2:
            raise ConfigError(f"{self.name}: rotary_dim {self.rotary_dim} must be even and at most the head "
                              f"dimension {self.head_dim}")
        if self.experts_per_token > self.experts:
            raise ConfigError(f"{self.name}: {self.experts_per_token} experts per token exceed the "
                              f"{self.experts} experts")
        for f, allowed in (("activation", ACTIVATIONS), ("norm", NORMS), ("positions", POSITIONS)):
            if getattr(self, f) not in allowed:
                raise ConfigError(f"{self.name}: {f} must be one of {', '.join(allowed)}, got {getattr(self, f)!r}")
        if self.parallel_norms not in (1, 2):
            raise ConfigError(f"{self.name}: parallel_norms must be 1 or 2, got {self.parallel_norms!r}")
        if not (isinstance(self.rope_theta, (int, float)) and math.isfinite(self.rope_theta) and self.rope_theta > 1):
            raise ConfigError(f"{self.name}: rope_theta must be a finite number > 1, got {self.rope_theta!r}")

    # ------------------------------------------------------------------ derived
    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def moe(self) -> bool:
        return self.experts > 1

    def layer_params(self) -> int:
        """Parameters of one decoder layer (biases and norms included)."""
        d = self.hidden
        attn = d * (self.q_dim + 2 * self.kv_dim) + self.q_dim * d
        attn += (self.q_dim + 2 * self.kv_dim) * self.qkv_bias + d * self.out_bias
        mats = 3 if self.activation == "silu_gated" else 2
        mlp = mats * d * self.ffn + (self.ffn * (mats - 1) + d) * self.mlp_bias
        mlp = mlp * self.experts + (d * self.experts if self.moe else 0)
        norms = (1 if self.parallel_attn and self.parallel_norms == 1 else 2) * d * (2 if self.norm == "layer" else 1)
        return attn + mlp + norms

    def params(self) -> int:
        """All parameters: embeddings (and learned positions), layers, final norm, the LM head
        unless tied."""
        d = self.hidden
        emb = self.vocab * d + (self.max_positions * d if self.positions == "learned" else 0)
        head = 0 if self.tied_embeddings else self.vocab * d + self.vocab * self.lm_head_bias
        final = d * (2 if self.norm == "layer" else 1)
        return emb + self.layers * self.layer_params() + final + head

    def active_params(self) -> int:
        """Parameters one token uses (a mixture of experts runs ``experts_per_token`` of them)."""
        if not self.moe:
            return self.params()
        mats = 3 if self.activation == "silu_gated" else 2
        idle = (self.experts - self.experts_per_token) * (mats * self.hidden * self.ffn)
        return self.params() - self.layers * idle

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _positive(name: str, field: str, v: Any) -> None:
    hi = _LIMITS.get(field, 1 << 30)
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
        raise ConfigError(f"{name}: {field} must be an integer from 1 to {hi:,}, got {v!r}")


# ---------------------------------------------------------------------------- built-ins
def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


_LLAMA = dict(activation="silu_gated", norm="rms", positions="rotary")
BUILTINS: dict[str, DecoderConfig] = {c.name: c for c in (
    # GPT-2 small (124M): n_layer 12, n_embd 768, n_head 12, n_inner 4*768, vocab 50257, n_positions
    # 1024, gelu_new, tied wte/lm_head, biases everywhere.
    DecoderConfig("gpt2", 12, 768, 12, 12, 3072, 50257, activation="gelu_tanh", norm="layer", positions="learned",
                  max_positions=1024, tied_embeddings=True, qkv_bias=True, out_bias=True, mlp_bias=True,
                  source=_hf("openai-community/gpt2")),
    # GPT-J 6B: 28 layers, 4096, 16 heads, n_inner 16384, vocab 50400, rotary_dim 64 (interleaved),
    # parallel attention + MLP with one LayerNorm, no attention biases, MLP and LM-head biases.
    DecoderConfig("gpt-j-6b", 28, 4096, 16, 16, 16384, 50400, activation="gelu_tanh", norm="layer",
                  rotary_dim=64, max_positions=2048, parallel_attn=True, mlp_bias=True, lm_head_bias=True,
                  source=_hf("EleutherAI/gpt-j-6b")),
    # Llama 2 (Touvron et al. 2023, Table 1 and the HF configs): RMSNorm, SwiGLU, RoPE, vocab 32000.
    DecoderConfig("llama-2-7b", 32, 4096, 32, 32, 11008, 32000, **_LLAMA, source=_hf("meta-llama/Llama-2-7b-hf")),
    DecoderConfig("llama-2-13b", 40, 5120, 40, 40, 13824, 32000, **_LLAMA, source=_hf("meta-llama/Llama-2-13b-hf")),
    DecoderConfig("llama-2-70b", 80, 8192, 64, 8, 28672, 32000, **_LLAMA, source=_hf("meta-llama/Llama-2-70b-hf")),
    # Llama 3.1 / 3.2: vocab 128256, rope_theta 500000, GQA with 8 KV heads; 3.2-1B ties embeddings.
    DecoderConfig("llama-3.1-8b", 32, 4096, 32, 8, 14336, 128256, **_LLAMA, rope_theta=500000.0,
                  max_positions=131072, source=_hf("meta-llama/Llama-3.1-8B")),
    DecoderConfig("llama-3.1-70b", 80, 8192, 64, 8, 28672, 128256, **_LLAMA, rope_theta=500000.0,
                  max_positions=131072, source=_hf("meta-llama/Llama-3.1-70B")),
    DecoderConfig("llama-3.2-1b", 16, 2048, 32, 8, 8192, 128256, **_LLAMA, head_dim=64, rope_theta=500000.0,
                  max_positions=131072, tied_embeddings=True, source=_hf("meta-llama/Llama-3.2-1B")),
    # Mistral 7B v0.1: 32 layers, 4096, 32 heads, 8 KV heads, 14336, vocab 32000 (its 4096-token
    # sliding window is not modelled: contexts up to the window behave the same).
    DecoderConfig("mistral-7b", 32, 4096, 32, 8, 14336, 32000, **_LLAMA, max_positions=32768,
                  source=_hf("mistralai/Mistral-7B-v0.1")),
    # Mixtral 8x7B: Mistral's attention, 8 SwiGLU experts of 14336, top-2 routing.
    DecoderConfig("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, **_LLAMA, rope_theta=1e6, max_positions=32768,
                  experts=8, experts_per_token=2, source=_hf("mistralai/Mixtral-8x7B-v0.1")),
    # Qwen2.5 7B: 28 layers, 3584, 28 heads, 4 KV heads, 18944, vocab 152064, q/k/v biases.
    DecoderConfig("qwen2.5-7b", 28, 3584, 28, 4, 18944, 152064, **_LLAMA, rope_theta=1e6, max_positions=131072,
                  qkv_bias=True, source=_hf("Qwen/Qwen2.5-7B")),
    # Falcon 180B: 80 layers, 14848, 232 heads of 64, 8 KV heads, MLP 4x, vocab 65024, parallel
    # attention + MLP with two LayerNorms (new_decoder_architecture), GELU, no biases, tied embeddings.
    DecoderConfig("falcon-180b", 80, 14848, 232, 8, 59392, 65024, activation="gelu", norm="layer",
                  max_positions=2048, parallel_attn=True, parallel_norms=2, tied_embeddings=True,
                  source=_hf("tiiuae/falcon-180B")),
)}


def builtin(name: str) -> DecoderConfig:
    try:
        return BUILTINS[name]
    except KeyError:
        raise ConfigError(f"unknown model '{name}'; built-in LLMs: {', '.join(BUILTINS)} "
                          f"(or give a Hugging Face config.json)") from None


# ---------------------------------------------------------------------------- config.json
FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "gpt2", "gptj", "falcon")
_ACT = {"silu": "silu_gated", "swish": "silu_gated", "gelu": "gelu", "gelu_new": "gelu_tanh",
        "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh", "relu": "relu"}


class _Fields:
    """Typed access to a config.json's fields: every message names the file and the field."""

    def __init__(self, d: Mapping[str, Any], where: str):
        self.d, self.where = d, where

    def int(self, key: str, default: Any = None) -> int:
        v = self.d.get(key, default)
        if v is None:
            raise ConfigError(f"{self.where}: field '{key}' is missing")
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{self.where}: field '{key}' must be an integer, got {v!r}"[:200])
        return v

    def bool(self, key: str, default: bool) -> bool:
        v = self.d.get(key, default)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise ConfigError(f"{self.where}: field '{key}' must be true or false, got {v!r}"[:200])
        return v

    def num(self, key: str, default: float) -> float:
        v = self.d.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(f"{self.where}: field '{key}' must be a finite number, got {v!r}"[:200])
        return float(v)

    def act(self, key: str, default: str, gated: bool) -> str:
        v = self.d.get(key, default)
        if v not in _ACT:
            raise ConfigError(f"{self.where}: field '{key}' = {v!r} is not an activation this reader knows "
                              f"({', '.join(_ACT)})"[:300])
        a = _ACT[v]
        if gated and a == "silu_gated":
            return a
        if gated:
            raise ConfigError(f"{self.where}: field '{key}' = {v!r}: this family's MLP is gated SiLU")
        return "gelu" if a == "silu_gated" else a


def from_hf_dict(d: Any, name: str = "config.json") -> DecoderConfig:
    """A ``DecoderConfig`` from the fields of a Hugging Face ``config.json`` (transformers'
    LlamaConfig, MistralConfig, MixtralConfig, Qwen2Config, GPT2Config, GPTJConfig, FalconConfig)."""
    if not isinstance(d, Mapping):
        raise ConfigError(f"{name}: a config.json must be a JSON object, got {type(d).__name__}")
    mt = d.get("model_type")
    if mt not in FAMILIES:
        raise ConfigError(f"{name}: model_type {mt!r} is not a decoder family this reader knows "
                          f"({', '.join(FAMILIES)})"[:300])
    f = _Fields(d, name)
    label = Path(name).parent.name if Path(name).name == "config.json" and Path(name).parent.name else name
    try:
        if mt in ("llama", "mistral", "mixtral", "qwen2"):
            heads = f.int("num_attention_heads")
            hd = d.get("head_dim")
            cfg = DecoderConfig(
                label, f.int("num_hidden_layers"), f.int("hidden_size"), heads,
                f.int("num_key_value_heads", heads), f.int("intermediate_size"), f.int("vocab_size"),
                activation=f.act("hidden_act", "silu", gated=True), norm="rms", positions="rotary",
                head_dim=f.int("head_dim") if hd is not None else 0, rope_theta=f.num("rope_theta", 10000.0),
                max_positions=f.int("max_position_embeddings", 4096),
                tied_embeddings=f.bool("tie_word_embeddings", False),
                qkv_bias=True if mt == "qwen2" else f.bool("attention_bias", False),
                out_bias=f.bool("attention_bias", False) if mt == "llama" else False,
                mlp_bias=f.bool("mlp_bias", False) if mt == "llama" else False,
                experts=f.int("num_local_experts") if mt == "mixtral" else 1,
                experts_per_token=f.int("num_experts_per_tok") if mt == "mixtral" else 1,
                source=f"config.json ({mt})")
        elif mt == "gpt2":
            hidden = f.int("n_embd")
            inner = d.get("n_inner")
            cfg = DecoderConfig(
                label, f.int("n_layer"), hidden, f.int("n_head"), f.int("n_head"),
                f.int("n_inner") if inner is not None else 4 * hidden, f.int("vocab_size"),
                activation=f.act("activation_function", "gelu_new", gated=False), norm="layer",
                positions="learned", max_positions=f.int("n_positions", 1024),
                tied_embeddings=f.bool("tie_word_embeddings", True), qkv_bias=True, out_bias=True, mlp_bias=True,
                source="config.json (gpt2)")
        elif mt == "gptj":
            hidden = f.int("n_embd")
            inner = d.get("n_inner")
            rd = d.get("rotary_dim")
            cfg = DecoderConfig(
                label, f.int("n_layer"), hidden, f.int("n_head"), f.int("n_head"),
                f.int("n_inner") if inner is not None else 4 * hidden, f.int("vocab_size"),
                activation=f.act("activation_function", "gelu_new", gated=False), norm="layer",
                rotary_dim=f.int("rotary_dim") if rd is not None else 0, max_positions=f.int("n_positions", 2048),
                parallel_attn=True, tied_embeddings=f.bool("tie_word_embeddings", False), mlp_bias=True,
                lm_head_bias=True, source="config.json (gptj)")
        else:  # falcon
            heads = f.int("num_attention_heads")
            new_arch = f.bool("new_decoder_architecture", False)
            if f.bool("alibi", False):
                raise ConfigError(f"{name}: Falcon with ALiBi positions (alibi: true) is not supported")
            if new_arch:
                kv = f.int("num_kv_heads", heads)
            else:
                kv = 1 if f.bool("multi_query", True) else heads
            hidden = f.int("hidden_size")
            ffn = d.get("ffn_hidden_size")
            bias = f.bool("bias", False)
            cfg = DecoderConfig(
                label, f.int("num_hidden_layers"), hidden, heads, kv,
                f.int("ffn_hidden_size") if ffn is not None else 4 * hidden, f.int("vocab_size"),
                activation=f.act("activation", "gelu", gated=False), norm="layer",
                rope_theta=f.num("rope_theta", 10000.0), max_positions=f.int("max_position_embeddings", 2048),
                parallel_attn=new_arch or f.bool("parallel_attn", True), parallel_norms=2 if new_arch else 1,
                tied_embeddings=f.bool("tie_word_embeddings", True), qkv_bias=bias, out_bias=bias, mlp_bias=bias,
                source="config.json (falcon)")
    except ConfigError as e:
        msg = str(e)
        raise ConfigError(msg if msg.startswith(name) else f"{name}: {msg.split(': ', 1)[-1]}") from None
    return cfg


def read_hf_config(path: str | Path) -> DecoderConfig:
    """Read a Hugging Face ``config.json`` (one line for a missing, unreadable or bad file)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read {p}: {e.strerror or e}") from None
    try:
        d = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: not valid JSON ({e})"[:300]) from None
    return from_hf_dict(d, str(p))


def resolve(model: str) -> DecoderConfig:
    """A built-in name or a path to a config.json."""
    if model in BUILTINS:
        return BUILTINS[model]
    if model.endswith(".json") or Path(model).is_file():
        return read_hf_config(model)
    return builtin(model)


__all__ = ["DecoderConfig", "ConfigError", "BUILTINS", "builtin", "from_hf_dict", "read_hf_config", "resolve",
           "replace"]
