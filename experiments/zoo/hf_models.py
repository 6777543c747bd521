"""Hugging Face transformers architectures (random weights from their public configs, reduced in
depth and width, no hub access) for the same checks as experiments/zoo/torch_models.py.

    python experiments/zoo/hf_models.py OUT_DIR [--only NAME ...]

Needs torch and transformers in the running environment. Writes NAME.ts.onnx / NAME.dynamo.onnx
and NAME.npz like experiments/zoo/export.py (inputs in_0, in_1, ... in the order of ``INPUTS``).
"""
from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
import torch


def _models():
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


class _First(torch.nn.Module):
    """The model's first output tensor (logits or last hidden state), so exports have one output."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, *xs):
        out = self.m(*xs)
        if hasattr(out, "to_tuple"):
            out = out.to_tuple()
        return out[0] if isinstance(out, (tuple, list)) else out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    for name, (ctor, example) in _models().items():
        if a.only and name not in a.only:
            continue
        try:
            model = _First(ctor()).eval()
            xs = example()
            with torch.no_grad():
                y = model(*xs)
        except Exception as e:  # noqa: BLE001 - a model the installed transformers cannot build
            print(f"{name}: cannot build: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
            continue
        names = [f"in_{i}" for i in range(len(xs))]
        np.savez(out / f"{name}.npz", **{n: x.numpy() for n, x in zip(names, xs)}, out_0=y.numpy())
        for kind, kw in (("ts", dict(dynamo=False, opset_version=17)), ("dynamo", dict(dynamo=True, opset_version=18))):
            path = out / f"{name}.{kind}.onnx"
            try:
                torch.onnx.export(model, tuple(xs), str(path), input_names=names, **kw)
            except Exception as e:  # noqa: BLE001
                print(f"{name} [{kind}]: export failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
                path.unlink(missing_ok=True)
            else:
                print(f"{name} [{kind}]: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
