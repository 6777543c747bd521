"""Deprecated: moved to ``partition.onnx.conformance``."""
from .moved import moved

__getattr__ = moved(__name__, "partition.onnx.conformance")
