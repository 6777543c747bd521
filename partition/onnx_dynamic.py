"""Deprecated: moved to ``partition.onnx.dynamic``."""
from .moved import moved

__getattr__ = moved(__name__, "partition.onnx.dynamic")
