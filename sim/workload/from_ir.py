"""Workloads of IR nodes: reads an op's name, attrs and input/output shapes (docs/IR.md)."""
from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from .workload import (ELEMENTWISE_FLOPS, ELEMENTWISE_OPS, MOVE_OPS, REDUCE_OPS, SOFTMAX_OPS, SPECIAL_OPS,
                       VIEW_OPS, Workload, WorkloadError)


def _shape(node: Any, i: int) -> tuple[int, ...]:
    try:
        return tuple(node.inputs[i].shape)
    except IndexError:
        raise WorkloadError(f"node {node.name} ({node.op}) has no input {i}") from None


def _dbytes(node: Any) -> int:
    v = node.outputs[0] if node.outputs else node.inputs[0]
    return max(1, np.dtype(v.dtype).itemsize)


def _out_elems(node: Any) -> int:
    return sum(int(prod(o.shape)) for o in node.outputs)


def _in_elems(node: Any) -> int:
    return sum(int(prod(v.shape)) for v in node.inputs)


def _conv(cls, node, epi):
    x, w = _shape(node, 0), _shape(node, 1)
    if len(x) != 4 or len(w) != 4:
        raise WorkloadError(f"node {node.name}: conv2d needs 4-D input and weight, got {x} and {w}")
    a = node.attrs
    groups = int(a.get("groups", 1))
    if len(node.inputs) > 2:
        epi = ("bias_add",) + epi
    return cls.conv2d(x[0], x[1], x[2], x[3], w[0], w[2], w[3], stride=tuple(a.get("strides", (1, 1))),
                      pad=tuple(a.get("pads", (0, 0, 0, 0))), dilation=tuple(a.get("dilations", (1, 1))),
                      groups=groups, dtype_bytes=_dbytes(node), epilogue=epi)


def _matmul_dims(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of numpy matmul; a weight shared across the batch folds into M."""
    if len(a) == 1:
        a = (1,) + a
    if len(b) == 1:
        b = b + (1,)
    m, k = a[-2], a[-1]
    n = b[-1]
    if len(b) == 2:
        return 1, int(prod(a[:-1])), n, k
    batch = int(prod(np.broadcast_shapes(a[:-2], b[:-2])))
    return batch, m, n, k


def workload_of_node(cls, node: Any, epi: tuple[str, ...]):
    op = node.op
    db = _dbytes(node)
    if op == "conv2d":
        return _conv(cls, node, epi)
    if op == "dense":
        x, w = _shape(node, 0), _shape(node, 1)
        if len(node.inputs) > 2:
            epi = ("bias_add",) + epi
        return cls.gemm(int(prod(x[:-1])), w[0], x[-1], dtype_bytes=db, epilogue=epi)
    if op == "matmul":
        b, m, n, k = _matmul_dims(_shape(node, 0), _shape(node, 1))
        return cls.gemm(m, n, k, batch=b, dtype_bytes=db, epilogue=epi)
    if op == "batch_matmul":
        a, b = _shape(node, 0), _shape(node, 1)
        ta, tb = bool(node.attrs.get("transpose_a", False)), bool(node.attrs.get("transpose_b", False))
        m, k = (a[-1], a[-2]) if ta else (a[-2], a[-1])
        n = b[-2] if tb else b[-1]
        return cls.gemm(m, n, k, batch=int(prod(a[:-2])) or 1, dtype_bytes=db, epilogue=epi)
    if op == "gemm":
        a, b = _shape(node, 0), _shape(node, 1)
        m, k = (a[1], a[0]) if node.attrs.get("trans_a", 0) else a
        n = b[0] if node.attrs.get("trans_b", 0) else b[1]
        if len(node.inputs) > 2:
            epi = ("bias_add",) + epi
        return cls.gemm(m, n, k, dtype_bytes=db, epilogue=epi)
    out = _out_elems(node)
    if op in ("max_pool2d", "avg_pool2d"):
        kh, kw = node.attrs.get("kernel", (1, 1))
        return cls.vector("pool", _in_elems(node), out, out * int(kh) * int(kw), 0, db, op)
    if op in REDUCE_OPS:
        inn = int(prod(_shape(node, 0)))
        return cls.vector("reduce", inn, out, inn, 0, db, op)
    if op in SOFTMAX_OPS:
        inn = int(prod(_shape(node, 0)))
        # max, subtract, exp, sum, divide: 4 simple passes and one exp per element.
        return cls.vector("softmax", inn, out, 4 * inn, inn, db, op)
    if op == "layer_norm":
        x = _shape(node, 0)
        inn = int(prod(x))
        axis = int(node.attrs.get("axis", -1)) % max(1, len(x))
        rows = int(prod(x[:axis]))
        # mean, centre, square, sum, scale, shift: 6 passes; one rsqrt per row.
        return cls.vector("layer_norm", _in_elems(node), out, 6 * inn, rows, db, op)
    if op == "rms_norm":
        x = _shape(node, 0)
        inn = int(prod(x))
        # square, sum, scale, mul gamma: 4 passes; one rsqrt per row (the last axis is normalised).
        return cls.vector("layer_norm", _in_elems(node), out, 4 * inn, inn // max(1, x[-1]), db, op)
    if op == "kv_append":
        # an in-place write of the new tokens into the device-resident cache: never a cache copy
        new = int(prod(_shape(node, 1)))
        return cls.vector("data_move", new, new, 0, 0, db, op)
    if op in ELEMENTWISE_OPS:
        per = ELEMENTWISE_FLOPS.get(op, 1)
        special = out if op in SPECIAL_OPS else 0
        return cls.vector("elementwise", _in_elems(node), out, out * per, special, db, op)
    if op in VIEW_OPS:
        return cls.vector("data_move", 0, 0, 0, 0, db, op)
    if op in MOVE_OPS:
        inn = int(prod(_shape(node, 0))) if op != "concat" else _in_elems(node)
        return cls.vector("data_move", inn, out, 0, 0, db, op)
    raise WorkloadError(f"node {node.name}: op '{op}' has no accelerator workload")


def workload_of(node: Any, epilogue: tuple[str, ...] = ()) -> Workload:
    """The workload of one IR node (ops and attrs per docs/IR.md), with the ops fused after it as
    its ``epilogue``."""
    return workload_of_node(Workload, node, tuple(epilogue))
