"""Export the zoo's models to ONNX, with both of torch's exporters.

    python experiments/zoo/export.py OUT_DIR [--set torch|hf|hf-full|tv-full|fresh|det|det-full|kv] [--only NAME ...]

``--set torch`` (default): experiments/zoo/torch_models.py; ``--set hf``: the transformers
architectures of experiments/zoo/hf_models.py (needs transformers too); ``--set det``: torchvision
detectors with their full post-processing (experiments/zoo/detection_models.py; needs torchvision),
whose NAME.npz holds every output (boxes, scores, labels); ``--set det-full``: torchvision's own
full-size detector builders (SSDlite, Faster R-CNN MobileNetV3, RetinaNet and FCOS ResNet-50), random
weights, tens of MB each; ``--set hf-full``: DistilBERT-base, GPT-2 small and ViT-B/16 at their
published sizes (``hf_models.full_models``, random weights); ``--set tv-full``: twelve torchvision
classifiers at their published sizes whose families the built-ins and ../shared/models lack
(``hf_models.torchvision_full``, random weights); ``--set fresh``: 21 more real models, torchvision's
and transformers', in none of the sets above (``hf_models.fresh_models``); ``--set kv``: the GPT-2 and Llama of
``--set hf`` as one decode step WITH their KV cache (``hf_models.cached_decoders``), TorchScript
exporter only, as transformers/optimum name it: inputs ``input_ids`` [batch, sequence], ``attention_mask`` [batch, past_sequence + sequence],
``past_key_values.{i}.key|value`` [batch, kv_heads, past_sequence, head_size]; outputs ``logits`` and
``present.{i}.key|value`` [batch, kv_heads, past_sequence + sequence, head_size], the dims symbolic;
NAME.npz holds the example inputs by their names (batch 2, past 5, one new token, the first past
position of row 0 masked), NAME.out.npz torch's outputs by their names. Needs torch (and onnxscript
for the dynamo exporter) in the running environment; accel-tune does not depend on them. For every
model it writes NAME.ts.onnx (TorchScript exporter, opset 17) and NAME.dynamo.onnx (torch.export-based
exporter, opset 18), plus NAME.npz holding the example inputs ('in_0', 'in_1', ...) and torch's own
first output ('out_0'), which experiments/zoo/check.py compares against. A model that cannot be
built or exported is reported and skipped: that is a limit of the installed libraries, not ours.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


class FirstOutput(torch.nn.Module):
    """The wrapped model's first output tensor (logits or last hidden state), so that every export
    has one output whatever the model returns (a tensor, a tuple, a transformers ModelOutput)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, *xs):
        out = self.m(*xs)
        if hasattr(out, "to_tuple"):
            out = out.to_tuple()
        return out[0] if isinstance(out, (tuple, list)) else out


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}"


def export(name: str, ctor, example, out: Path) -> None:
    try:
        built = ctor()
        # Detectors return (boxes, scores, labels) already; everything else: its first output.
        model = (built if getattr(built, "all_outputs", False) else FirstOutput(built)).eval()
        xs = example()
        xs = xs if isinstance(xs, tuple) else (xs,)
        with torch.no_grad():
            y = model(*xs)
    except Exception as e:  # noqa: BLE001 - a model the installed libraries cannot build
        print(f"{name}: cannot build: {_one_line(e)}")
        return
    names = [f"in_{i}" for i in range(len(xs))]
    ys = y if isinstance(y, tuple) else (y,)
    np.savez(out / f"{name}.npz", **{n: x.numpy() for n, x in zip(names, xs)},
             **{f"out_{i}": t.numpy() for i, t in enumerate(ys)})
    for kind, kw in (("ts", dict(dynamo=False, opset_version=17)), ("dynamo", dict(dynamo=True, opset_version=18))):
        path = out / f"{name}.{kind}.onnx"
        # Detectors swap in an export-friendly batched NMS for torch.export (detection_models.py).
        ctx = getattr(model, "dynamo_context", None) if kind == "dynamo" else None
        try:
            with ctx() if ctx else contextlib.nullcontext():
                torch.onnx.export(model, xs, str(path), input_names=names, **kw)
        except Exception as e:  # noqa: BLE001 - an exporter failure is reported, not ours
            print(f"{name} [{kind}]: export failed: {_one_line(e)}")
            path.unlink(missing_ok=True)
        else:
            print(f"{name} [{kind}]: {path.stat().st_size} bytes")


def export_cached(name: str, ctor, layers: int, kv_heads: int, head_size: int, vocab: int, out: Path) -> None:
    """One decode step with its cache (``hf_models.DecodeStep``), TorchScript exporter, opset 17."""
    try:
        model = ctor().eval()
    except Exception as e:  # noqa: BLE001 - a model the installed libraries cannot build
        print(f"{name}: cannot build: {_one_line(e)}")
        return
    batch, past = 2, 5
    ids = torch.randint(0, vocab, (batch, 1))
    mask = torch.ones(batch, past + 1, dtype=torch.int64)
    mask[0, 0] = 0  # a left-padded row
    caches = [torch.randn(batch, kv_heads, past, head_size) for _ in range(2 * layers)]
    cache_names = [f"past_key_values.{i}.{k}" for i in range(layers) for k in ("key", "value")]
    names = ["input_ids", "attention_mask"] + cache_names
    outs = ["logits"] + [f"present.{i}.{k}" for i in range(layers) for k in ("key", "value")]
    dyn = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "past_sequence + sequence"},
           "logits": {0: "batch", 1: "sequence"}}
    dyn.update({n: {0: "batch", 2: "past_sequence"} for n in cache_names})
    dyn.update({n: {0: "batch", 2: "past_sequence + sequence"} for n in outs[1:]})
    xs = (ids, mask, *caches)
    with torch.no_grad():
        ys = model(*xs)
    # inputs alone, by name, so `accel-tune run PLAN --inputs NAME.npz` reads the file as it is
    np.savez(out / f"{name}.npz", **{n: x.numpy() for n, x in zip(names, xs)})
    np.savez(out / f"{name}.out.npz", **{n: t.numpy() for n, t in zip(outs, ys)})
    path = out / f"{name}.ts.onnx"
    try:
        torch.onnx.export(model, xs, str(path), input_names=names, output_names=outs, dynamic_axes=dyn,
                          opset_version=17, dynamo=False)
    except Exception as e:  # noqa: BLE001 - an exporter failure is reported, not ours
        print(f"{name} [ts]: export failed: {_one_line(e)}")
        path.unlink(missing_ok=True)
    else:
        print(f"{name} [ts]: {path.stat().st_size} bytes")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--set", choices=("torch", "hf", "hf-full", "tv-full", "fresh", "det", "det-full", "kv"),
                    default="torch")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    if a.set == "kv":
        from hf_models import cached_decoders
        for name, spec in cached_decoders().items():
            if not a.only or name in a.only:
                export_cached(name, *spec, out)
        return 0
    if a.set == "torch":
        from torch_models import ZOO as models
    elif a.set == "det":
        from detection_models import DETECTORS as models
    elif a.set == "det-full":
        from detection_models import FULL as models
    elif a.set == "hf-full":
        from hf_models import full_models
        models = full_models()
    elif a.set == "fresh":
        from hf_models import fresh_models
        models = fresh_models()
    elif a.set == "tv-full":
        from hf_models import torchvision_full
        models = torchvision_full()
    else:
        from hf_models import models
        models = models()
    for name, (ctor, example) in models.items():
        if not a.only or name in a.only:
            export(name, ctor, example, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
