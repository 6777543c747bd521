"""The one error of ONNX import, and how a foreign exception becomes its one-line message."""
from __future__ import annotations


class OnnxImportError(ValueError):
    """An ONNX file the importer cannot turn into a graph; the message names the file or node."""


def one_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__

