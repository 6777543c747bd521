"""Arguments and loaders several subcommands share."""
from __future__ import annotations

import argparse


def add_model_args(p: argparse.ArgumentParser) -> None:
    """``--model NAME | --onnx FILE``, exactly one required."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="NAME", help="a built-in model (`accel-tune models` lists them)")
    src.add_argument("--onnx", metavar="FILE", help="an ONNX model file")


def load_graph(args: argparse.Namespace):
    """The graph named by ``--model`` or ``--onnx``; bad names and files raise one-line errors."""
    if getattr(args, "model", None):
        from partition import models
        return models.get(args.model)
    from partition import load_onnx
    return load_onnx(args.onnx)


def model_label(args: argparse.Namespace) -> str:
    return args.model or args.onnx
