"""Export the models of experiments/zoo/torch_models.py to ONNX, with both of torch's exporters.

    python experiments/zoo/export.py OUT_DIR [--only NAME ...]

Needs torch (and onnxscript for the dynamo exporter) in the running environment; accel-tune does not
depend on them. For every model it writes NAME.ts.onnx (TorchScript exporter, opset 17) and
NAME.dynamo.onnx (torch.export-based exporter, opset 18), plus NAME.npz holding the example input
('in_0', ...) and torch's own outputs ('out_0', ...), which experiments/zoo/check.py compares against.
A model that fails to export is reported and skipped: that is an exporter limit, not ours.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_models import ZOO  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    for name, (ctor, example) in ZOO.items():
        if a.only and name not in a.only:
            continue
        model = ctor().eval()
        x = example()
        with torch.no_grad():
            y = model(x)
        ys = y if isinstance(y, tuple) else (y,)
        np.savez(out / f"{name}.npz", in_0=x.numpy(), **{f"out_{i}": t.numpy() for i, t in enumerate(ys)})
        for kind, kw in (("ts", dict(dynamo=False, opset_version=17)), ("dynamo", dict(dynamo=True, opset_version=18))):
            path = out / f"{name}.{kind}.onnx"
            try:
                torch.onnx.export(model, (x,), str(path), input_names=["in_0"], **kw)
            except Exception as e:  # noqa: BLE001 - an exporter failure is reported, not ours
                print(f"{name} [{kind}]: export failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
                path.unlink(missing_ok=True)
            else:
                print(f"{name} [{kind}]: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
