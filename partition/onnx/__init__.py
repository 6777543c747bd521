"""ONNX -> ``partition.Graph``: the importer and everything it needs, one concern a module.

- ``importer``: ``load_onnx`` (reading, stripped-weight filling, shapes given on the command line,
  the graph walk) and ``fill_stripped``/``fill_arrays``;
- ``context``: ``Scope`` and ``Context``, the public type every converter receives;
- ``converters``: one converter per ONNX op type; ``composites``: ONNX functions and contrib ops
  built from several canonical ops; ``scan``: Scan bodies;
- ``sizes`` and ``dynamic``: data-dependent sizes (which values may be shorter at run time) and
  the converters that emit the run-time forms;
- ``checks`` and ``external``: what an untrusted file must satisfy before import, and its
  external data read only from the model's own folder;
- ``proto`` and ``errors``: reading protobuf values, and the one-line ``OnnxImportError``;
- ``conformance``: running onnx's backend test cases through the importer;
- ``kv_cache``: a decoder step's KV cache (which inputs/outputs, which dims grow), which the
  importer marks device-resident;
- ``export`` and ``writers``: the way back, a packed plan as an ONNX file (regions as model-local
  functions), each canonical op written as standard ONNX ops.

Imports run one way inside: errors, proto <- sizes <- context <- converters <- dynamic <- importer.
"""
from .errors import OnnxImportError
from .importer import MIN_OPSET, fill_arrays, fill_stripped, load_onnx, max_opset
from .kv_cache import KVCache, KVCacheError, KVPair, cache_dims, find_kv_cache

__all__ = ["OnnxImportError", "load_onnx", "fill_arrays", "fill_stripped", "max_opset", "MIN_OPSET",
           "KVCache", "KVPair", "KVCacheError", "find_kv_cache", "cache_dims"]
