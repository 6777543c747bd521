"""Deprecated: moved to ``partition.onnx.scan``."""
from .moved import moved

__getattr__ = moved(__name__, "partition.onnx.scan")
