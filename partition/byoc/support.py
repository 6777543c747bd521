"""Op-support predicates: one ``Support = Callable[[Node], bool]`` per question, and combinators to
build a target's predicate from them. Kept apart from the partitioning algorithm, which only ever
asks ``target.is_supported(node)``."""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from ..ir import Node

Support = Callable[[Node], bool]


def op_in(ops: Iterable[str]) -> Support:
    names = frozenset(ops)

    def pred(node: Node) -> bool:
        return node.op in names
    pred.__doc__ = f"op in {sorted(names)}"
    return pred


def dtype_in(dtypes: Iterable[str]) -> Support:
    """Every input and output tensor has one of ``dtypes`` (an accelerator with no int64 path keeps
    index arithmetic on the host)."""
    allowed = frozenset(np.dtype(d).name for d in dtypes)

    def pred(node: Node) -> bool:
        return all(v.dtype in allowed for v in (*node.inputs, *node.outputs))
    return pred


def max_rank(rank: int) -> Support:
    def pred(node: Node) -> bool:
        return all(len(v.shape) <= rank for v in (*node.inputs, *node.outputs))
    return pred


def static_size(max_elements: int) -> Support:
    """No tensor of the node exceeds ``max_elements`` elements."""
    def pred(node: Node) -> bool:
        return all(v.type.size <= max_elements for v in (*node.inputs, *node.outputs))
    return pred


def attr_is(op: str, key: str, allowed: Iterable, default=None) -> Support:
    """Nodes of ``op`` pass only when attribute ``key`` (``default`` when absent) is in ``allowed``;
    other ops pass."""
    ok = frozenset(allowed)

    def pred(node: Node) -> bool:
        return node.op != op or node.attrs.get(key, default) in ok
    return pred


def all_of(*preds: Support) -> Support:
    def pred(node: Node) -> bool:
        return all(p(node) for p in preds)
    return pred


def any_of(*preds: Support) -> Support:
    def pred(node: Node) -> bool:
        return any(p(node) for p in preds)
    return pred


def not_(p: Support) -> Support:
    def pred(node: Node) -> bool:
        return not p(node)
    return pred


def never(node: Node) -> bool:
    return False


__all__ = ["Support", "op_in", "dtype_in", "max_rank", "static_size", "attr_is", "all_of", "any_of",
           "not_", "never"]
