"""Data-dependent sizes during ONNX import: which values may be shorter at run time than their
type (the upper bound), and the bound of values computed from such sizes.

Two facts are tracked per imported value (``DynInfo``, shared by a graph and its sub-graphs):
- *shape-dynamic*: its run-time shape may be smaller than its type. Sources are NonZero,
  NonMaxSuppression, RoiAlign over such boxes, an If whose branches differ in shape, the scan
  outputs of a Loop that can stop early, and the run-time forms of the ops below;
  any node reading a shape-dynamic value makes shape-dynamic values, except ``shape``/``size``.
- *bound*: a value computed at run time from such sizes (``Shape`` of a shape-dynamic value and
  the arithmetic on it) also has the value it takes at the bound, computed at import like constant
  folding. For the monotone arithmetic of exports (min, +, *) that is an upper bound; where it is
  not (``axis - n``), the run-time check of each op against its bound says so in one line. Ops that need a static attribute (Reshape's target, Slice's ends, TopK's K,
  ConstantOfShape, Range, Expand, Tile) put the bound in the attribute, for shape inference and
  costing, and read the actual value as an extra input at run time (``partition/ops/dynamic.py``).

So costing uses the upper bound and running uses the real sizes (docs/IR.md). The converters that
use these facts are in ``dynamic``.
"""
from __future__ import annotations

import numpy as np

from ..ir import Value

# Ops whose outputs may be shorter at run time than their type, whatever their inputs.
SOURCES = frozenset({"non_zero", "compress", "unique", "non_max_suppression", "dyn_reshape", "dyn_slice", "dyn_topk",
                     "dyn_expand", "dyn_tile", "dyn_split", "constant_of_shape", "range", "roi_align"})
# Ops whose output shape never depends on their input's run-time shape.
_SHAPE_STATIC = frozenset({"shape", "size"})
# Folding bound values beyond this many elements is not worth it (they are shape vectors).
_BOUND_LIMIT = 1 << 16


class DynInfo:
    """Shape-dynamic values and bound data, by value identity (values live as long as the graph)."""

    def __init__(self):
        self._shaped: dict[int, Value] = {}
        self._bounds: dict[int, tuple[Value, np.ndarray]] = {}

    def is_shaped(self, v: Value | None) -> bool:
        return v is not None and id(v) in self._shaped

    def mark_shaped(self, v: Value) -> None:
        self._shaped[id(v)] = v

    def bound(self, v: Value | None) -> np.ndarray | None:
        """The data of a constant, the bound of a bound value, else None."""
        if v is None:
            return None
        if v.is_const:
            return v.data
        hit = self._bounds.get(id(v))
        return None if hit is None else hit[1]

    def set_bound(self, v: Value, data: np.ndarray) -> None:
        self._bounds[id(v)] = (v, np.asarray(data))

    def inherit(self, outer: Value, inner: Value) -> None:
        """A sub-graph input standing for an outer value carries its facts."""
        if self.is_shaped(outer):
            self.mark_shaped(inner)
        b = None if outer.is_const else self.bound(outer)
        if b is not None:
            self.set_bound(inner, b)

    def after_node(self, op: str, attrs: dict, inputs: list[Value], outputs: list[Value], compute) -> None:
        """Facts of a new node's outputs."""
        # a run-time form typed by the model's declared shape is checked to give exactly that shape
        source = op in SOURCES and "declared" not in attrs
        shaped = source or (op not in _SHAPE_STATIC and any(self.is_shaped(v) for v in inputs))
        if op == "if":
            t, e = attrs["then_branch"].outputs, attrs["else_branch"].outputs
            shaped = shaped or any(a.shape != b.shape or self.is_shaped(a) or self.is_shaped(b)
                                   for a, b in zip(t, e))
        if op == "loop" and not shaped:
            # scan outputs are as long as the max trip count unless the body's condition can stop
            # the loop early (or the loop is entered with a condition computed at run time)
            body, k = attrs["body"], int(attrs.get("num_carried", 0))
            cond = body.outputs[0]
            early = not (cond.is_const and bool(np.asarray(cond.data).reshape(-1)[0]))
            early = early or not (inputs[1].is_const and bool(np.asarray(inputs[1].data).reshape(-1)[0]))
            if early:
                for o in outputs[k:]:
                    self.mark_shaped(o)
        if shaped:
            for o in outputs:
                self.mark_shaped(o)
            return
        if compute is None or not inputs:
            return
        arrays = [self.bound(v) for v in inputs]
        if any(a is None for a in arrays) or sum(a.size for a in arrays) > _BOUND_LIMIT:
            return
        try:
            outs = compute(arrays, attrs)
        except Exception:  # noqa: BLE001 - no bound: a consumer that needs one says so
            return
        for o, a in zip(outputs, outs):
            a = np.asarray(a)
            if a.shape == o.shape:
                self.set_bound(o, a.astype(o.dtype, copy=False))

