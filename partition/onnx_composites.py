"""Deprecated: moved to ``partition.onnx.composites``."""
from .moved import moved

__getattr__ = moved(__name__, "partition.onnx.composites")
