"""What a kernel computes, independent of the hardware.

- ``workload``: ``Workload``, one kernel's dims for the one-level model (conv2d, grouped and
  depthwise, GEMM and batch-matmul, vector ops, pooling, softmax/layernorm, data movement);
- ``from_ir``: the workload of an IR node (its op, attrs and shapes, docs/IR.md):
  ``workload_of(node)``;
- ``nest``: ``Nest``, the multi-level model's perfect loop nest with tensors reached through affine
  projections, and ``nest_from_workload``.
"""
from .workload import Workload, WorkloadError
from .from_ir import workload_of
from .nest import Nest, NestError, nest_from_workload

from partition.moved import moved_names as _moved_names

# Before issue 21 ``sim.workload`` was the module now named ``sim.workload.workload``; its other
# names are still read from here for one release, with a DeprecationWarning.
__getattr__ = _moved_names(__name__, "sim.workload.workload")

__all__ = ["Workload", "WorkloadError", "workload_of", "Nest", "NestError", "nest_from_workload"]
