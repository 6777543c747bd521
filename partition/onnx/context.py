"""The public context of ONNX import that every converter receives: ``Scope`` (the names visible
while importing one graph, outer names pulled in on first use) and ``Context`` (one ONNX node
being converted: its attributes, inputs and ``emit``, which infers types and folds constants).

Converters, composites, scan and the dynamic-size wrappers import it from here; the importer
creates it. ``Context.imp`` is the importer (its ``opset``, ``main``, ``declared`` shapes,
``unified`` and ``import_body``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import Graph, IRError, Value
from ..ops import get_op, infer_types
from .errors import OnnxImportError, one_line
from .proto import attr_dict
from .sizes import DynInfo

# Folding evaluates eagerly; beyond this many elements a constant sub-computation stays a node.
FOLD_LIMIT = 1 << 24


class Scope:
    """Names visible while importing one ONNX graph; outer names are pulled in on first use."""

    def __init__(self, graph: Graph, parent: "Scope | None" = None):
        self.graph = graph
        self.parent = parent
        self.env: dict[str, Value] = {}
        self.captured: list[Value] = []  # outer values, in the order of the extra body inputs
        self.dyn: DynInfo = parent.dyn if parent is not None else DynInfo()  # data-dependent sizes

    def lookup(self, name: str, where: str) -> Value:
        v = self.env.get(name)
        if v is not None:
            return v
        if self.parent is None:
            raise OnnxImportError(f"node '{where}' reads '{name}', which no node, input or initializer defines")
        outer = self.parent.lookup(name, where)
        if outer.is_const:
            v = self.graph.add_const(outer.data, name)
        else:
            v = self.graph.add_input(name, outer.shape, outer.dtype)
            self.captured.append(outer)
            self.dyn.inherit(outer, v)
        self.env[name] = v
        return v



def as_type(a: np.ndarray, shape: tuple) -> np.ndarray:
    return a.reshape(shape) if a.size == int(np.prod(shape, dtype=np.int64)) else a


class Context:
    """One ONNX node being converted: its attributes, inputs and the ``emit`` helper."""

    def __init__(self, imp: Any, scope: Scope, node, name: str, ins: list[Value | None]):
        self.imp = imp
        self.scope = scope
        self.graph = scope.graph
        self.node = node
        self.name = name
        self.ins = ins
        self.attrs = attr_dict(node)
        self.opset = imp.opset
        self.dyn = scope.dyn

    def fail(self, msg: str) -> OnnxImportError:
        return OnnxImportError(f"node '{self.name}' ({self.node.op_type}): {msg}")

    def inp(self, i: int) -> Value | None:
        return self.ins[i] if i < len(self.ins) else None

    def need(self, i: int) -> Value:
        v = self.inp(i)
        if v is None:
            raise self.fail(f"input {i} is missing")
        return v

    def const(self, i: int, what: str) -> np.ndarray | None:
        """The data of input ``i`` (None when absent); the IR needs it static, so a value computed
        at run time is an error naming the node."""
        v = self.inp(i)
        if v is None:
            return None
        if not v.is_const:
            raise self.fail(f"{what} input '{self.node.input[i]}' must be a constant "
                            f"(it is computed at run time); the IR keeps it as a static attribute")
        return v.data

    def declared(self, i: int, what: str) -> tuple[int, ...]:
        """The shape the model declares for this node's output 0, standing in for the static value
        of input ``i`` that is computed at run time (the op checks the actual value gives exactly
        this shape when it runs). Without a fully static declared shape, or when another input's
        size is data-dependent, it is the usual static-input error."""
        out = self.node.output[0] if self.node.output else ""
        shape = self.imp.declared.get(out)
        if shape is None and self.scope.graph is self.imp.main:
            shape = self.imp.unified(out)
        if shape is None or any(self.dyn.is_shaped(v) for v in self.ins):
            self.const(i, what)  # raises the one-line error naming the node
        return shape

    def emit(self, op: str, inputs: list[Value], attrs: dict | None = None, *, out_names: list[str] | None = None,
             node_name: str | None = None) -> list[Value]:
        attrs = dict(attrs or {})
        names = out_names if out_names is not None else [o for o in self.node.output if o]
        try:
            types = infer_types(op, [v.type for v in inputs], attrs, self.graph.functions,
                                [v.data for v in inputs])
        except IRError as e:
            raise self.fail(str(e)) from None
        d = get_op(op)
        if (inputs and d.compute is not None and all(v.is_const for v in inputs)
                and sum(t.size for t in types) <= FOLD_LIMIT):
            try:
                arrs = d.compute([v.data for v in inputs], attrs)
            except Exception as e:  # numpy errors carry no context; add the node
                raise self.fail(f"constant folding failed: {one_line(e)}") from None
            # A folded data-dependent size (NonZero of a constant) is its actual size, not the bound.
            return [self.graph.add_const(as_type(np.asarray(a).astype(t.dtype, copy=False), t.shape), nm)
                    for a, t, nm in zip(arrs, types, self._pad_names(names, len(types)))]
        node = self.graph.add_node(op, inputs, attrs, name=node_name or self.name, out_types=types,
                                   out_names=self._pad_names(names, len(types)))
        self.dyn.after_node(op, attrs, list(inputs), list(node.outputs), d.compute)
        return list(node.outputs)

    def _pad_names(self, names: list[str], n: int) -> list[str]:
        base = names[0] if names else self.name
        return [names[i] if i < len(names) and names[i] else f"{base}.{i}" for i in range(n)]

    def new_const(self, data, name: str | None = None) -> list[Value]:
        # the op's own data: a float64 Constant/EyeLike stays float64
        return [self.graph.add_const(np.asarray(data), name or self.node.output[0], narrow=False)]

    def tmp(self, suffix: str) -> list[str]:
        return [f"{self.node.output[0]}_{suffix}"]

