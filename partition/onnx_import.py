"""Deprecated: moved to ``partition.onnx.importer``."""
from .moved import moved

__getattr__ = moved(__name__, "partition.onnx.importer")
