"""Decoder configurations: parameter counts against the published sizes, the config.json reader
(round trip and one-line errors)."""
import json

import pytest

from partition.llm.config import BUILTINS, ConfigError, DecoderConfig, from_hf_dict, read_hf_config, resolve

# Published parameter counts (model cards / papers), in billions.
PUBLISHED = {"gpt2": 0.124, "gpt-j-6b": 6.05, "llama-2-7b": 6.74, "llama-2-13b": 13.0, "llama-2-70b": 69.0,
             "llama-3.1-8b": 8.03, "llama-3.1-70b": 70.6, "llama-3.2-1b": 1.24, "mistral-7b": 7.24,
             "mixtral-8x7b": 46.7, "qwen2.5-7b": 7.62, "falcon-180b": 180.0}


def test_twelve_builtins():
    assert set(BUILTINS) == set(PUBLISHED)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_params_match_published(name):
    assert BUILTINS[name].params() / 1e9 == pytest.approx(PUBLISHED[name], rel=0.02)


def test_llama_2_7b_hand_count():
    # embeddings + head 2 x 32000 x 4096; per layer 4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096; final norm
    per_layer = 4 * 4096 ** 2 + 3 * 4096 * 11008 + 2 * 4096
    assert BUILTINS["llama-2-7b"].params() == 2 * 32000 * 4096 + 32 * per_layer + 4096 == 6_738_415_616


def test_mixtral_active_params():
    assert BUILTINS["mixtral-8x7b"].active_params() / 1e9 == pytest.approx(12.9, rel=0.01)


def _llama_json(**over):
    d = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000, "hidden_act": "silu",
         "max_position_embeddings": 4096, "tie_word_embeddings": False}
    d.update(over)
    return d


def test_hf_llama_round_trip(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(_llama_json()))
    cfg = read_hf_config(p)
    assert cfg.params() == BUILTINS["llama-2-7b"].params()
    assert resolve(str(p)).params() == cfg.params()


@pytest.mark.parametrize("family,d,params", [
    ("gpt2", {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257,
              "n_positions": 1024, "activation_function": "gelu_new"}, BUILTINS["gpt2"].params()),
    ("gptj", {"model_type": "gptj", "n_embd": 4096, "n_layer": 28, "n_head": 16, "vocab_size": 50400,
              "n_positions": 2048, "rotary_dim": 64, "activation_function": "gelu_new"}, BUILTINS["gpt-j-6b"].params()),
    ("falcon", {"model_type": "falcon", "hidden_size": 14848, "num_hidden_layers": 80, "num_attention_heads": 232,
                "num_kv_heads": 8, "new_decoder_architecture": True, "vocab_size": 65024, "bias": False,
                "parallel_attn": True, "alibi": False}, BUILTINS["falcon-180b"].params()),
    ("mixtral", dict(_llama_json(model_type="mixtral", num_key_value_heads=8, intermediate_size=14336,
                                 num_local_experts=8, num_experts_per_tok=2)), BUILTINS["mixtral-8x7b"].params()),
    ("qwen2", dict(_llama_json(model_type="qwen2", hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
                               num_key_value_heads=4, intermediate_size=18944, vocab_size=152064)),
     BUILTINS["qwen2.5-7b"].params()),
])
def test_hf_families(family, d, params):
    assert from_hf_dict(d).params() == params


@pytest.mark.parametrize("over,needle", [
    ({"hidden_size": None}, "'hidden_size' is missing"),
    ({"num_hidden_layers": 0}, "layers must be an integer from 1"),
    ({"num_attention_heads": -4}, "heads must be an integer from 1"),
    ({"hidden_size": 10 ** 9}, "hidden must be an integer from 1"),
    ({"num_key_value_heads": 5}, "not divisible by 5 key/value heads"),
    ({"num_attention_heads": 31}, "not divisible by 31 heads"),
    ({"vocab_size": "32000"}, "'vocab_size' must be an integer"),
    ({"hidden_act": "swiglu9"}, "not an activation"),
    ({"model_type": "bert"}, "not a decoder family"),
])
def test_hf_bad_fields_one_line(over, needle):
    d = _llama_json(**over)
    if over.get("hidden_size", 0) is None:
        del d["hidden_size"]
    with pytest.raises(ConfigError) as e:
        from_hf_dict(d, "x/config.json")
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_unreadable_and_unknown(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        read_hf_config(bad)
    with pytest.raises(ConfigError, match="unknown model 'llama-9'"):
        resolve("llama-9")


def test_config_rules():
    with pytest.raises(ConfigError, match="experts per token"):
        DecoderConfig("x", 2, 64, 4, 4, 128, 100, experts=2, experts_per_token=3)
    with pytest.raises(ConfigError, match="rotary_dim"):
        DecoderConfig("x", 2, 64, 4, 4, 128, 100, rotary_dim=15)
