"""Op registry: a table of immutable OpDefs assembled from the op modules, and the entry points
shape inference, the interpreter and costing use."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np

from ..ir import TensorType
from .base import InferContext, OpCost, OpDef, OpError, check

from . import nn, elementwise, tensor, control, recurrent, dynamic, roi, sampling, spectral, sequence, fold, llm  # noqa: E402
# the control-flow rules costing, the simulator and MAC counts share
from .control import branch_work, loop_trip_bound, subgraph_runs  # noqa: E402

# Read-only: the registry is a value assembled once from the op modules, never extended at run time.
OPS: Mapping[str, OpDef] = MappingProxyType(
    {d.name: d for mod in (nn, elementwise, tensor, control, recurrent, dynamic, roi, sampling, spectral, sequence, fold, llm)
     for d in mod.DEFS})


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise OpError(f"unknown op '{name}'") from None


def infer_types(op: str, in_types: Sequence[TensorType], attrs: dict[str, Any],
                functions: dict[str, Any] | None = None,
                consts: Sequence[np.ndarray | None] | None = None) -> list[TensorType]:
    d = get_op(op)
    lo, hi = d.num_inputs
    check(lo <= len(in_types) <= hi, f"{op} takes {lo}..{hi} inputs, got {len(in_types)}")
    ctx = InferContext(list(consts) if consts is not None else [None] * len(in_types), functions or {})
    return list(d.infer(list(in_types), attrs, ctx))


def op_cost(node) -> OpCost:
    """MACs/FLOPs of one node (a call node counts its callee's body when attached in meta)."""
    d = get_op(node.op)
    return d.cost([v.type for v in node.inputs], [o.type for o in node.outputs], node.attrs)


__all__ = ["OPS", "OpDef", "OpCost", "OpError", "InferContext", "get_op", "infer_types", "op_cost", "loop_trip_bound",
           "subgraph_runs", "branch_work"]
