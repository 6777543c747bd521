"""Graph IR: typed values, constants, nodes in topological order, functions and sub-graphs.

Use-def is kept right by the graph itself: creating a node registers it as a user of its inputs,
``replace_all_uses`` and ``erase_node`` update both sides. ``Graph.lint()`` checks every invariant and
tests run it after every pass.

Sub-graphs (If/Loop bodies, function bodies) are closed: a body sees only its own inputs and
constants, so the outer values a body reads are passed to the If/Loop node explicitly (the ONNX
importer does that closure conversion).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np


class IRError(ValueError):
    """A graph that breaks an IR invariant, or a bad request to build one."""


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str  # a numpy dtype name: float32, int64, bool, ...

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype).name)
        if any(d < 0 for d in self.shape):
            raise IRError(f"negative dimension in shape {self.shape}")

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


class Value:
    """A tensor in a graph: a graph input, a constant, or an output of a node."""

    __slots__ = ("name", "type", "producer", "index", "users", "data")

    def __init__(self, name: str, type: TensorType, producer: "Node | None" = None, index: int = 0,
                 data: np.ndarray | None = None):
        self.name = name
        self.type = type
        self.producer = producer
        self.index = index
        self.users: list[Node] = []
        self.data = data

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype

    @property
    def is_const(self) -> bool:
        return self.data is not None

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


class Node:
    """One op application. ``attrs`` holds op attributes (sub-graphs of If/Loop included); ``meta``
    holds pass annotations (target, region id, ...) and never changes semantics."""

    __slots__ = ("name", "op", "inputs", "attrs", "outputs", "meta")

    def __init__(self, name: str, op: str, inputs: Sequence[Value], attrs: dict[str, Any],
                 outputs: Sequence[Value]):
        self.name = name
        self.op = op
        self.inputs: tuple[Value, ...] = tuple(inputs)
        self.attrs = dict(attrs)
        self.outputs: tuple[Value, ...] = tuple(outputs)
        self.meta: dict[str, Any] = {}

    @property
    def output(self) -> Value:
        if len(self.outputs) != 1:
            raise IRError(f"node {self.name} ({self.op}) has {len(self.outputs)} outputs")
        return self.outputs[0]

    def subgraphs(self) -> list["Graph"]:
        return [v for v in self.attrs.values() if isinstance(v, Graph)]

    def __repr__(self) -> str:
        return f"<Node {self.name}: {self.op}>"


@dataclass
class Function:
    """A graph with attributes: a composite (``Composite``, ``PartitionedFromPattern``) or an
    external function (``Compiler``, ``global_symbol``). Called by a ``call`` node whose
    ``callee`` attribute names it in the enclosing graph's (or an outer graph's) ``functions``."""

    graph: "Graph"
    attrs: dict[str, Any] = field(default_factory=dict)


_uid = itertools.count()


class Graph:
    def __init__(self, name: str = "main"):
        self.name = name
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.nodes: list[Node] = []
        self.constants: list[Value] = []
        self.functions: dict[str, Function] = {}
        self.meta: dict[str, Any] = {}
        self._names: set[str] = set()

    # ------------------------------------------------------------------ building
    def _fresh(self, base: str) -> str:
        base = base or "v"
        name = base
        i = 0
        while name in self._names:
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        return name

    def add_input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> Value:
        v = Value(self._fresh(name), TensorType(tuple(shape), dtype))
        self.inputs.append(v)
        return v

    def add_const(self, data: Any, name: str = "const", narrow: bool = True) -> Value:
        """``narrow``: float64 data (Python floats) becomes float32; False keeps a model's float64."""
        arr = np.asarray(data)
        if narrow and arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        v = Value(self._fresh(name), TensorType(arr.shape, arr.dtype.name), data=arr)
        self.constants.append(v)
        return v

    def add_node(self, op: str, inputs: Sequence[Value], attrs: dict[str, Any] | None = None,
                 name: str | None = None, out_types: Sequence[TensorType] | None = None,
                 functions: dict[str, "Function"] | None = None,
                 out_names: Sequence[str] | None = None) -> Node:
        """Append a node; output types are inferred from the op registry unless given.
        ``functions`` lets a ``call`` node's type come from a callee outside this graph."""
        attrs = dict(attrs or {})
        for v in inputs:
            if not isinstance(v, Value):
                raise IRError(f"input of {op} node is not a Value: {v!r}")
        if out_types is None:
            from .ops import infer_types
            scope = {**(functions or {}), **self.functions}
            out_types = infer_types(op, [v.type for v in inputs], attrs, scope,
                                    [v.data for v in inputs])
        node_name = self._fresh(name or op)
        node = Node(node_name, op, inputs, attrs, [])
        outs = []
        for i, t in enumerate(out_types):
            base = out_names[i] if out_names else (node_name if len(out_types) == 1 else f"{node_name}.{i}")
            outs.append(Value(self._fresh(base), t, producer=node, index=i))
        node.outputs = tuple(outs)
        for v in node.inputs:
            v.users.append(node)
        self.nodes.append(node)
        return node

    def set_outputs(self, values: Iterable[Value]) -> None:
        self.outputs = list(values)

    # ------------------------------------------------------------------ editing
    def replace_all_uses(self, old: Value, new: Value) -> None:
        for user in list(old.users):
            user.inputs = tuple(new if v is old else v for v in user.inputs)
            new.users.append(user)
        old.users = []
        self.outputs = [new if v is old else v for v in self.outputs]

    def set_input(self, node: Node, index: int, new: Value) -> None:
        old = node.inputs[index]
        ins = list(node.inputs)
        ins[index] = new
        node.inputs = tuple(ins)
        old.users.remove(node)  # one entry per use, so this drops exactly this use
        new.users.append(node)

    def rename(self, value: Value, name: str) -> None:
        """Give ``value`` a name that may have belonged to an erased value (names stay unique)."""
        if name == value.name:
            return
        live = {v.name for v in self.values()}
        if name in live:
            raise IRError(f"{self.name}: cannot rename {value.name} to {name}: the name is in use")
        self._names.discard(value.name)
        value.name = name
        self._names.add(name)

    def erase_node(self, node: Node) -> None:
        for v in node.outputs:
            if v.users or any(v is o for o in self.outputs):
                raise IRError(f"cannot erase {node.name}: output {v.name} is still used")
        for v in node.inputs:
            v.users = [u for u in v.users if u is not node]
        self.nodes.remove(node)

    def eliminate_dead_code(self) -> int:
        """Remove nodes whose outputs are unused, and unused constants. Returns nodes removed."""
        removed = 0
        live_outputs = {id(v) for v in self.outputs}
        for node in reversed(list(self.nodes)):
            if all(not v.users and id(v) not in live_outputs for v in node.outputs):
                self.erase_node(node)
                removed += 1
        self.constants = [c for c in self.constants if c.users or id(c) in live_outputs]
        return removed

    def toposort(self) -> None:
        """Reorder nodes so every node follows its producers (stable for already sorted graphs)."""
        placed: set[int] = {id(v) for v in self.inputs} | {id(c) for c in self.constants}
        order: list[Node] = []
        pending = list(self.nodes)
        while pending:
            progressed = False
            rest = []
            for n in pending:
                if all(id(v) in placed for v in n.inputs):
                    order.append(n)
                    placed.update(id(o) for o in n.outputs)
                    progressed = True
                else:
                    rest.append(n)
            if not progressed:
                raise IRError(f"graph {self.name} has a cycle or a dangling input at {rest[0].name}")
            pending = rest
        self.nodes = order

    # ------------------------------------------------------------------ queries
    def values(self) -> list[Value]:
        return [*self.inputs, *self.constants, *(o for n in self.nodes for o in n.outputs)]

    def node_by_name(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def walk(self) -> Iterable[tuple["Graph", Node]]:
        """Every (graph, node) in this graph, its sub-graphs and its functions, depth first."""
        for n in self.nodes:
            yield self, n
            for sg in n.subgraphs():
                yield from sg.walk()
        for fn in self.functions.values():
            yield from fn.graph.walk()

    def lint(self) -> None:
        """Check ownership, use-def and topological order; raise IRError naming the first fault."""
        defined: set[int] = set()
        names: set[str] = set()
        for v in [*self.inputs, *self.constants]:
            if v.producer is not None:
                raise IRError(f"{self.name}: input/constant {v.name} has a producer")
            defined.add(id(v))
        for c in self.constants:
            if c.data is None:
                raise IRError(f"{self.name}: constant {c.name} has no data")
            if tuple(c.data.shape) != c.shape or c.data.dtype.name != c.dtype:
                raise IRError(f"{self.name}: constant {c.name} data does not match its type")
        for v in self.values():
            if v.name in names:
                raise IRError(f"{self.name}: duplicate value name {v.name}")
            names.add(v.name)
        all_users: dict[int, int] = {}
        for n in self.nodes:
            for v in n.inputs:
                if id(v) not in defined:
                    raise IRError(f"{self.name}: node {n.name} uses {v.name} before it is defined "
                                  f"or from another graph")
                all_users[id(v)] = all_users.get(id(v), 0) + 1
            for i, o in enumerate(n.outputs):
                if o.producer is not n or o.index != i:
                    raise IRError(f"{self.name}: output {o.name} of {n.name} has a wrong producer")
                defined.add(id(o))
            if n.op == "call":
                callee = n.attrs.get("callee")
                if not isinstance(callee, str):
                    raise IRError(f"{self.name}: call node {n.name} has no callee")
            for sg in n.subgraphs():
                sg.lint()
        for v in self.values():
            expect = all_users.get(id(v), 0)
            if len(v.users) != expect:
                raise IRError(f"{self.name}: value {v.name} lists {len(v.users)} users, "
                              f"but {expect} uses exist")
        for v in self.outputs:
            if id(v) not in defined:
                raise IRError(f"{self.name}: output {v.name} is not defined in the graph")
        for sym, fn in self.functions.items():
            fn.graph.lint()

    # ------------------------------------------------------------------ text form
    def __str__(self) -> str:
        return "\n".join(self._lines(""))

    def _lines(self, ind: str) -> list[str]:
        lines = []
        for sym, fn in self.functions.items():
            attrs = ", ".join(f"{k}={v!r}" for k, v in fn.attrs.items())
            lines.append(f"{ind}def @{sym}({', '.join(map(repr, fn.graph.inputs))}) [{attrs}] {{")
            lines.extend(fn.graph._lines(ind + "  "))
            lines.append(f"{ind}}}")
        ins = ", ".join(map(repr, self.inputs))
        lines.append(f"{ind}graph {self.name}({ins}) {{")
        for c in self.constants:
            lines.append(f"{ind}  {c!r} = constant")
        for n in self.nodes:
            outs = ", ".join(map(repr, n.outputs))
            args = ", ".join(f"%{v.name}" for v in n.inputs)
            plain = {k: v for k, v in n.attrs.items() if not isinstance(v, Graph)}
            attr_s = (" {" + ", ".join(f"{k}={_fmt_attr(v)}" for k, v in plain.items()) + "}") if plain else ""
            lines.append(f"{ind}  {outs} = {n.op}({args}){attr_s}")
            for k, sg in ((k, v) for k, v in n.attrs.items() if isinstance(v, Graph)):
                lines.append(f"{ind}    {k}:")
                lines.extend(sg._lines(ind + "      "))
        lines.append(f"{ind}  return {', '.join('%' + v.name for v in self.outputs)}")
        lines.append(f"{ind}}}")
        return lines


def _fmt_attr(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"array{list(v.shape)}" if v.size > 8 else repr(v.tolist())
    return repr(v)


def clone_graph(graph: Graph, name: str | None = None) -> Graph:
    """Deep copy of the structure (constants' arrays are shared; they are never mutated in place)."""
    g = Graph(name or graph.name)
    g.meta = dict(graph.meta)
    vmap: dict[int, Value] = {}
    for v in graph.inputs:
        vmap[id(v)] = g.add_input(v.name, v.shape, v.dtype)
    for c in graph.constants:
        nv = g.add_const(c.data, c.name)
        vmap[id(c)] = nv
    for sym, fn in graph.functions.items():
        g.functions[sym] = Function(clone_graph(fn.graph), dict(fn.attrs))
    for n in graph.nodes:
        attrs = {k: (clone_graph(v) if isinstance(v, Graph) else v) for k, v in n.attrs.items()}
        nn = g.add_node(n.op, [vmap[id(v)] for v in n.inputs], attrs, name=n.name,
                        out_types=[o.type for o in n.outputs], out_names=[o.name for o in n.outputs])
        nn.meta = dict(n.meta)
        for o, no in zip(n.outputs, nn.outputs):
            vmap[id(o)] = no
    g.set_outputs([vmap[id(v)] for v in graph.outputs])
    return g
