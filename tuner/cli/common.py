"""Arguments and loaders several subcommands share."""
from __future__ import annotations

import argparse
import os
import tempfile


def add_model_args(p: argparse.ArgumentParser) -> None:
    """``--model NAME | --onnx FILE``, exactly one required, and ``--input-shape`` for ONNX files."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="NAME", help="a built-in model (`accel-tune models` lists them)")
    src.add_argument("--onnx", metavar="FILE", help="an ONNX model file")
    add_input_shape_arg(p)


def add_input_shape_arg(p: argparse.ArgumentParser) -> None:
    """The ONNX import options: ``--input-shape`` and ``--fold-qdq``."""
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="static shape of an ONNX input with dynamic dimensions (repeatable); "
                        "a dynamic leading (batch) dimension is 1 by default")
    p.add_argument("--dim", action="append", default=[], metavar="SYMBOL=N",
                   help="size of a symbolic dimension of the ONNX inputs, by the name the file gives it "
                        "(repeatable; e.g. a decoder with its KV cache: --dim batch=8 --dim "
                        "past_sequence=127 --dim sequence=1; a dimension written as a sum, "
                        "'past_sequence + sequence', is evaluated); --input-shape wins for its input")
    p.add_argument("--fold-qdq", action="store_true",
                   help="quantized (QDQ) ONNX: treat each activation QuantizeLinear->DequantizeLinear "
                        "pair as identity, as an int8 accelerator absorbing them would run the model")


def input_shapes(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """``--input-shape`` values as {name: shape}; a malformed one is a ValueError naming it."""
    out: dict[str, tuple[int, ...]] = {}
    for item in getattr(args, "input_shape", None) or []:
        name, sep, dims = item.rpartition("=")
        if not sep or not name:
            raise ValueError(f"--input-shape {item!r}: expected NAME=D0,D1,... (e.g. input_ids=1,128)")
        shape = _dims(item, dims)
        if name in out:
            raise ValueError(f"--input-shape: '{name}' given twice")
        out[name] = shape
    if out and getattr(args, "model", None):
        raise ValueError("--input-shape applies to --onnx files; built-in models have fixed shapes")
    if getattr(args, "fold_qdq", False) and getattr(args, "model", None):
        raise ValueError("--fold-qdq applies to quantized --onnx files; built-in models are float")
    return out


def input_dims(args: argparse.Namespace) -> dict[str, int]:
    """``--dim`` values as {symbol: size}; a malformed one is a ValueError naming it."""
    out: dict[str, int] = {}
    for item in getattr(args, "dim", None) or []:
        name, sep, size = item.rpartition("=")
        if not sep or not name.strip() or not size.strip().isdigit() or int(size) < 1:
            raise ValueError(f"--dim {item!r}: expected SYMBOL=N with N >= 1 (e.g. past_sequence=127)")
        if name.strip() in out:
            raise ValueError(f"--dim: '{name.strip()}' given twice")
        out[name.strip()] = int(size)
    if out and getattr(args, "model", None):
        raise ValueError("--dim applies to --onnx files; built-in models have fixed shapes")
    return out


def _dims(item: str, text: str) -> tuple[int, ...]:
    """``D0,D1,...`` (or ``D0xD1x...``, one separator throughout): every dimension a positive
    integer, so a placeholder such as ``1,3,x,224`` is refused rather than read as rank 3."""
    sep = "," if "," in text else "x"
    parts = [p.strip() for p in text.split(sep)]
    for axis, p in enumerate(parts):
        if not p.isdigit():
            raise ValueError(f"--input-shape {item!r}: dimension {axis} is {p!r}, not an integer "
                             f"(expected NAME=D0,D1,..., e.g. input_ids=1,128)")
    return tuple(int(p) for p in parts)


def load_graph(args: argparse.Namespace):
    """The graph named by ``--model`` or ``--onnx``; bad names and files raise one-line errors."""
    shapes = input_shapes(args)
    if getattr(args, "model", None):
        from partition import models
        return models.get(args.model)
    from partition import load_onnx
    return load_onnx(args.onnx, input_shapes=shapes, fold_qdq=getattr(args, "fold_qdq", False),
                     dims=input_dims(args))


def model_label(args: argparse.Namespace) -> str:
    return args.model or args.onnx


def check_writable(path: str, what: str) -> None:
    """Fail now, naming ``path``, if a file cannot be created there: before minutes of tuning,
    not after them with the name of a temporary file. Probes by creating (and removing) a file
    beside it, which also catches read-only file systems that permission bits do not show."""
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    if os.path.isdir(target):
        raise ValueError(f"cannot write {what} {path}: it is a folder")
    if not os.path.isdir(folder):
        raise ValueError(f"cannot write {what} {path}: folder {folder} does not exist")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise ValueError(f"cannot write {what} {path}: {e.strerror or e}") from None


def add_calibration_arg(p: argparse.ArgumentParser) -> None:
    """``--calibration FILE``: a learned calibration (``accel-tune calibrate``)."""
    p.add_argument("--calibration", metavar="FILE",
                   help="a calibration file from `accel-tune calibrate` (--host: this machine's host ops "
                        "measured with onnxruntime; --measurements: a device's measured kernels): the costs "
                        "use it and the JSON says calibrated: true")


def load_calibration_arg(args: argparse.Namespace, hw=None):
    """The ``--calibration`` file checked for ``hw`` (``tuner.calibration.load_calibration``), or None."""
    path = getattr(args, "calibration", None)
    if not path:
        return None
    from tuner.calibration import load_calibration
    return load_calibration(path, hw)
