"""The op definition record and the helpers every op module shares."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..ir import IRError, TensorType


class OpError(IRError):
    """Bad attributes or input types for an op; the message names the problem."""


@dataclass(frozen=True)
class OpCost:
    macs: int = 0    # multiply-accumulates (conv, matmul)
    flops: int = 0   # all arithmetic operations, 2 per MAC included
    bytes_in: int = 0
    bytes_out: int = 0


@dataclass(frozen=True)
class InferContext:
    """What shape inference may look at besides input types: constant input data (for reshape
    targets, slice bounds, ...) and the functions in scope (for ``call`` nodes)."""
    consts: Sequence[np.ndarray | None]
    functions: dict[str, Any]


InferFn = Callable[[list[TensorType], dict[str, Any], InferContext], list[TensorType]]
ComputeFn = Callable[[list[np.ndarray], dict[str, Any]], list[np.ndarray]]
CostFn = Callable[[list[TensorType], list[TensorType], dict[str, Any]], OpCost]


@dataclass(frozen=True)
class OpDef:
    """One op: ``infer`` gives output types, ``compute`` is the numpy reference, ``cost`` the
    MAC/FLOP count. ``category`` groups ops for costing (conv, gemm, elementwise, pool, reduce,
    norm, softmax, data, control, call, other)."""
    name: str
    infer: InferFn
    compute: ComputeFn | None
    cost: CostFn
    category: str = "other"
    num_inputs: tuple[int, int] = (0, 1 << 30)  # inclusive range


def scipy_special():
    """``scipy.special``, imported on first use: it takes about half a second to import, and only
    the numerics of a few ops (erf, sigmoid, SiLU, GELU, LSTM/GRU gates) need it, not every
    command that imports the op table."""
    from scipy import special
    return special


def low_precision(dtype) -> bool:
    """float16 and bfloat16 (and the float8 types): ops accumulate these in float32."""
    name = np.dtype(dtype).name
    return name in ("float16", "bfloat16") or name.startswith("float8")


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise OpError(msg)


def elementwise_cost(flops_per_elem: int = 1) -> CostFn:
    def cost(ins: list[TensorType], outs: list[TensorType], attrs: dict) -> OpCost:
        n = sum(o.size for o in outs)
        return OpCost(0, n * flops_per_elem, sum(t.nbytes for t in ins), sum(o.nbytes for o in outs))
    return cost


def zero_cost(ins: list[TensorType], outs: list[TensorType], attrs: dict) -> OpCost:
    return OpCost(0, 0, sum(t.nbytes for t in ins), sum(o.nbytes for o in outs))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise OpError(f"shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast") from None
