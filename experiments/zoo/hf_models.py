"""Hugging Face transformers architectures (random weights from their public configs, reduced in
depth and width, no hub access) for the same checks as experiments/zoo/torch_models.py; exported by
``python experiments/zoo/export.py OUT_DIR --set hf`` (needs torch and transformers).
"""
from __future__ import annotations

import torch


def models() -> dict:
    """name -> (constructor, example inputs as a tuple)."""
    import transformers as tf
    small = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128)
    ids = lambda v, s=16: torch.randint(0, v, (1, s))  # noqa: E731
    img = lambda size=32, c=3: torch.randn(1, c, size, size)  # noqa: E731
    return {
        "hf_gpt2": (lambda: tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=200,
                                                             n_positions=64)), lambda: (ids(200),)),
        "hf_distilbert": (lambda: tf.DistilBertModel(tf.DistilBertConfig(n_layers=2, dim=64, n_heads=4,
                                                                         hidden_dim=128, vocab_size=200)),
                          lambda: (ids(200), torch.ones(1, 16, dtype=torch.int64))),
        "hf_llama": (lambda: tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=200, num_key_value_heads=2,
                                                               max_position_embeddings=64, **small)),
                     lambda: (ids(200),)),
        "hf_vit": (lambda: tf.ViTForImageClassification(tf.ViTConfig(image_size=32, patch_size=8, num_labels=5,
                                                                     **small)), lambda: (img(),)),
        "hf_swin": (lambda: tf.SwinModel(tf.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                                                       num_heads=[2, 4], window_size=4)), lambda: (img(),)),
        "hf_convnext": (lambda: tf.ConvNextForImageClassification(tf.ConvNextConfig(
            hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, num_labels=5)), lambda: (img(),)),
        "hf_mobilevit": (lambda: tf.MobileViTForImageClassification(tf.MobileViTConfig(
            image_size=64, hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 8, 16, 24, 32, 48, 96],
            num_labels=5)), lambda: (img(64),)),
        "hf_whisper_encoder": (lambda: tf.WhisperModel(tf.WhisperConfig(
            d_model=64, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=32,
            vocab_size=200, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)).get_encoder(),
            lambda: (torch.randn(1, 16, 64),)),
        "hf_t5_encoder": (lambda: tf.T5EncoderModel(tf.T5Config(vocab_size=200, d_model=64, d_kv=16, d_ff=128,
                                                                 num_layers=2, num_heads=4)), lambda: (ids(200),)),
        "hf_resnet": (lambda: tf.ResNetForImageClassification(tf.ResNetConfig(
            embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="bottleneck", num_labels=5)),
            lambda: (img(),)),
    }
