"""Deprecated: moved to ``partition.onnx.external``."""
from .moved import moved

__getattr__ = moved(__name__, "partition.onnx.external")
