"""Hugging Face transformers architectures (random weights from their public configs, reduced in
depth and width, no hub access) for the same checks as experiments/zoo/torch_models.py; exported by
``python experiments/zoo/export.py OUT_DIR --set hf`` (needs torch and transformers).

``cached_decoders()``: the GPT-2 and Llama of ``models()`` as one decode step with their KV cache
(``DecodeStep``), exported by ``--set kv``.
"""
from __future__ import annotations

import torch


def _configs():
    import transformers as tf
    small = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128)
    return {"gpt2": tf.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=200, n_positions=64),
            "llama": tf.LlamaConfig(vocab_size=200, num_key_value_heads=2, max_position_embeddings=64, **small)}


class DecodeStep(torch.nn.Module):
    """One decode step of a causal LM with its cache as plain tensors: ``forward(input_ids,
    attention_mask, past_0_key, past_0_value, past_1_key, ...)`` returns ``(logits, present_0_key,
    present_0_value, ...)``, each cache tensor [batch, kv_heads, length, head_size], as
    transformers/optimum export a decoder "with past"."""

    def __init__(self, model, layers: int):
        super().__init__()
        self.m = model
        self.layers = layers

    def forward(self, input_ids, attention_mask, *past):
        import transformers as tf
        cache = tf.DynamicCache(config=self.m.config)
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.m(input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
        res = [out.logits]
        for layer in out.past_key_values.layers[:self.layers]:
            res += [layer.keys, layer.values]
        return tuple(res)


def cached_decoders() -> dict:
    """name -> (constructor of a DecodeStep, layers, kv_heads, head_size, vocabulary): the zoo's
    GPT-2 and Llama configs."""
    import transformers as tf
    c = _configs()
    return {
        "hf_gpt2_kv": (lambda: DecodeStep(tf.GPT2LMHeadModel(c["gpt2"]), 2), 2, 4, 16, 200),
        "hf_llama_kv": (lambda: DecodeStep(tf.LlamaForCausalLM(c["llama"]), 2), 2, 2, 16, 200),
    }


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


def full_models() -> dict:
    """name -> (constructor, example inputs): full-size public configurations (random weights, no
    hub access) of architectures the built-in models and ../shared/models do not hold, for
    checking a host calibration on real models it never saw (experiments/calibration_unseen.py):
    DistilBERT-base, GPT-2 small and ViT-B/16 at their published sizes; tens to hundreds of MB
    each."""
    import transformers as tf
    ids = lambda v, s=128: torch.randint(0, v, (1, s))  # noqa: E731
    return {
        "full_distilbert_base": (lambda: tf.DistilBertModel(tf.DistilBertConfig()),
                                 lambda: (ids(30522), torch.ones(1, 128, dtype=torch.int64))),
        "full_gpt2": (lambda: tf.GPT2LMHeadModel(tf.GPT2Config()), lambda: (ids(50257),)),
        "full_vit_b16": (lambda: tf.ViTForImageClassification(tf.ViTConfig(image_size=224, patch_size=16,
                                                                           num_labels=1000)),
                         lambda: (torch.randn(1, 3, 224, 224),)),
    }


def torchvision_full() -> dict:
    """name -> (constructor, example inputs): torchvision's classifiers at their published sizes
    (random weights) whose families the built-in models and ../shared/models do not hold: fire
    modules, channel shuffle, dense blocks, inception, grouped and wide residuals, NAS blocks,
    ConvNeXt's layer norms and large kernels, plain VGG; for experiments/calibration_unseen.py."""
    import torchvision.models as tv
    image = lambda: (torch.randn(1, 3, 224, 224),)  # noqa: E731
    names = ("squeezenet1_1", "shufflenet_v2_x1_0", "densenet121", "googlenet", "mnasnet1_0",
             "regnet_y_400mf", "resnext50_32x4d", "wide_resnet50_2", "convnext_tiny", "efficientnet_b1",
             "resnet34", "vgg11")
    kw = {"googlenet": {"aux_logits": False, "init_weights": True}}
    return {f"full_{n}": ((lambda n=n: getattr(tv, n)(weights=None, **kw.get(n, {}))), image) for n in names}


def fresh_models() -> dict:
    """name -> (constructor, example inputs): a second set of real models at their published sizes
    (random weights), none of them in the built-ins, ../shared/models, ``full_models`` or
    ``torchvision_full``, picked after ``calibrate --host``'s probes were last changed, so that a
    calibration is checked on models no choice of the probes was ever judged on: torchvision's
    AlexNet, VGG-16 with batch norm, ResNet-101, RegNetX-800MF, RegNetY-1.6GF, ShuffleNetV2 x0.5,
    MnasNet 0.5, DenseNet-169, SqueezeNet 1.0, Inception v3 (299x299), EfficientNet-B3,
    EfficientNetV2-S, Swin-T and ViT-B/32; transformers' RoBERTa-base, ALBERT-base, T5-small's
    encoder, OPT-125m, a Llama of 12 layers at width 768, MobileViT-small and DeiT-small."""
    import torchvision.models as tv
    import transformers as tf
    image = lambda s=224: (lambda: (torch.randn(1, 3, s, s),))  # noqa: E731
    ids = lambda v, s=128: (lambda: (torch.randint(0, v, (1, s)),))  # noqa: E731
    with_mask = lambda v, s=128: (lambda: (torch.randint(0, v, (1, s)),  # noqa: E731
                                           torch.ones(1, s, dtype=torch.int64)))
    kw = {"inception_v3": {"aux_logits": False, "init_weights": True}}
    sizes = {"inception_v3": 299, "efficientnet_b3": 300, "efficientnet_v2_s": 384}
    names = ("alexnet", "vgg16_bn", "resnet101", "regnet_x_800mf", "regnet_y_1_6gf", "shufflenet_v2_x0_5",
             "mnasnet0_5", "densenet169", "squeezenet1_0", "inception_v3", "efficientnet_b3", "efficientnet_v2_s",
             "swin_t", "vit_b_32")
    out = {f"fresh_{n}": ((lambda n=n: getattr(tv, n)(weights=None, **kw.get(n, {}))), image(sizes.get(n, 224)))
           for n in names}
    base = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    out.update({
        "fresh_roberta_base": (lambda: tf.RobertaModel(tf.RobertaConfig()), with_mask(50265)),
        "fresh_albert_base": (lambda: tf.AlbertModel(tf.AlbertConfig(embedding_size=128, **base)), with_mask(30000)),
        "fresh_t5_small_encoder": (lambda: tf.T5EncoderModel(tf.T5Config()), ids(32128)),
        "fresh_opt_125m": (lambda: tf.OPTForCausalLM(tf.OPTConfig()), ids(50272)),
        "fresh_llama_768": (lambda: tf.LlamaForCausalLM(tf.LlamaConfig(
            vocab_size=32000, num_key_value_heads=12, max_position_embeddings=512,
            **{**base, "intermediate_size": 2048})), ids(32000)),
        "fresh_mobilevit_small": (lambda: tf.MobileViTForImageClassification(tf.MobileViTConfig()), image(256)),
        "fresh_deit_small": (lambda: tf.ViTForImageClassification(tf.ViTConfig(
            hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536, num_labels=1000)),
            image()),
    })
    return out
