"""Graph IR, ops, ONNX import, built-in models, patterns, BYOC passes and the packed-module reader.
Imports nothing else of accel-tune (the import direction is partition <- sim <- tuner)."""
from .ir import Function, Graph, IRError, Node, TensorType, Value, clone_graph
from .interpreter import Interpreter, InterpretError, interpret
from .serialize import SerializeError, graph_from_json, graph_hash, graph_to_json
from .packed import PackedFormatError, PackedModule, read_packed, write_packed
from .onnx import OnnxImportError, load_onnx
from . import targets
from .targets import Target, TargetError, build_target
from .byoc import PartitionError, candidate_regions, partition_for, summarize

__all__ = ["Graph", "Node", "Value", "TensorType", "Function", "IRError", "clone_graph",
           "Interpreter", "InterpretError", "interpret",
           "SerializeError", "graph_to_json", "graph_from_json", "graph_hash",
           "PackedFormatError", "PackedModule", "read_packed", "write_packed",
           "OnnxImportError", "load_onnx",
           "targets", "Target", "TargetError", "build_target",
           "PartitionError", "partition_for", "candidate_regions", "summarize"]

from .moved import alias_modules  # noqa: E402

# Module paths before issue 21 (the importer became the partition.onnx package); one release.
alias_modules({f"partition.onnx_{old}": f"partition.onnx.{new}" for old, new in (
    ("import", "importer"), ("converters", "converters"), ("dynamic", "dynamic"), ("composites", "composites"),
    ("scan", "scan"), ("checks", "checks"), ("external", "external"), ("conformance", "conformance"))})
