"""Deprecated: moved to ``partition.onnx.checks``."""
from .moved import moved

__getattr__ = moved(__name__, "partition.onnx.checks")
