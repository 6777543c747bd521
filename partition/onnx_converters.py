"""Deprecated: moved to ``partition.onnx.converters``."""
from .moved import moved

__getattr__ = moved(__name__, "partition.onnx.converters")
