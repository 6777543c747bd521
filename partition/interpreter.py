"""A numpy interpreter for any graph: control flow, composites and external functions (run by
their bodies). Analyses subclass ``Interpreter`` and override ``run_node``; errors name the node."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .ir import Function, Graph, IRError, Node
from .ops import get_op


class InterpretError(IRError):
    pass


class Interpreter:
    def __init__(self, graph: Graph, functions: Mapping[str, Function] | None = None):
        self.graph = graph
        self.functions: dict[str, Function] = {**(functions or {}), **graph.functions}

    # -- entry -------------------------------------------------------------
    def run(self, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray], *,
            bounded: bool = False) -> list[np.ndarray]:
        """``bounded``: an input may be shorter than its type along any axis (a sub-graph or function
        reached by a value of data-dependent size, whose type is an upper bound, docs/IR.md); the
        graph's own inputs (``bounded`` False) must match exactly."""
        args = self._bind(inputs, bounded)
        env: dict[int, Any] = {id(c): c.data for c in self.graph.constants}
        for v, a in zip(self.graph.inputs, args):
            env[id(v)] = a
        for node in self.graph.nodes:
            try:
                outs = self.run_node(node, [env[id(v)] for v in node.inputs])
            except InterpretError:
                raise
            except Exception as e:  # numpy errors carry no context; add the node
                raise InterpretError(f"node {node.name} ({node.op}) in graph {self.graph.name}: {e}") from e
            if len(outs) != len(node.outputs):
                raise InterpretError(f"node {node.name} ({node.op}) returned {len(outs)} values, "
                                     f"expected {len(node.outputs)}")
            for o, a in zip(node.outputs, outs):
                env[id(o)] = a
        return [env[id(v)] for v in self.graph.outputs]

    def _bind(self, inputs, bounded: bool = False) -> list[np.ndarray]:
        g = self.graph
        if isinstance(inputs, Mapping):
            missing = [v.name for v in g.inputs if v.name not in inputs]
            if missing:
                raise InterpretError(f"missing input(s): {', '.join(missing)}")
            inputs = [inputs[v.name] for v in g.inputs]
        inputs = list(inputs)
        if len(inputs) != len(g.inputs):
            raise InterpretError(f"graph {g.name} takes {len(g.inputs)} inputs, got {len(inputs)}")
        out = []
        for v, a in zip(g.inputs, inputs):
            a = np.asarray(a)
            if bounded and a.ndim == len(v.shape) and all(d <= b for d, b in zip(a.shape, v.shape)):
                pass
            elif tuple(a.shape) != v.shape:
                raise InterpretError(f"input {v.name}: expected shape {list(v.shape)}, got {list(a.shape)}")
            out.append(a.astype(v.dtype, copy=False))
        return out

    # -- per node ----------------------------------------------------------
    def run_node(self, node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        if node.op == "if":
            branch = node.attrs["then_branch"] if bool(np.asarray(args[0]).reshape(-1)[0]) else node.attrs["else_branch"]
            return self.run_subgraph(branch, args[1:])
        if node.op == "loop":
            return self._run_loop(node, args)
        if node.op == "call":
            callee = node.attrs["callee"]
            fn = self.functions.get(callee)
            if fn is None:
                raise InterpretError(f"node {node.name}: call to unknown function '{callee}'")
            return self.run_function(fn, args)
        d = get_op(node.op)
        outs = d.compute(args, node.attrs)
        return [np.asarray(o) for o in outs]

    def run_subgraph(self, graph: Graph, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        return type(self)(graph, self.functions).run(args, bounded=True)

    def run_function(self, fn: Function, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self.run_subgraph(fn.graph, args)

    def _run_loop(self, node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        body: Graph = node.attrs["body"]
        k = int(node.attrs.get("num_carried", 0))
        trip = int(np.asarray(args[0]).reshape(-1)[0])
        cond = bool(np.asarray(args[1]).reshape(-1)[0])
        carried = list(args[2:2 + k])
        captured = list(args[2 + k:])
        scans: list[list[np.ndarray]] = [[] for _ in body.outputs[1 + k:]]
        i = 0
        while i < trip and cond:
            outs = self.run_subgraph(body, [np.array(i, dtype=np.int64), np.array(cond), *carried, *captured])
            cond = bool(np.asarray(outs[0]).reshape(-1)[0])
            carried = list(outs[1:1 + k])
            for s, o in zip(scans, outs[1 + k:]):
                s.append(o)
            i += 1
        stacked = []
        for s, v in zip(scans, body.outputs[1 + k:]):
            stacked.append(np.stack(s) if s else np.zeros((0, *v.shape), dtype=v.dtype))
        if stacked and "trip_bound" in node.attrs:
            # a max trip count computed at run time: the declared scan length is exact unless the
            # body can stop early, then a bound
            want, exact = int(node.attrs["trip_bound"]), bool(node.attrs.get("trip_exact"))
            if i > want or (exact and i != want):
                raise InterpretError(f"node {node.name} (loop): {i} trips at run time, not the declared "
                                     f"{'scan length' if exact else 'bound'} {want}")
        return carried + stacked


def interpret(graph: Graph, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray],
              functions: Mapping[str, Function] | None = None) -> list[np.ndarray]:
    """Run ``graph`` on numpy inputs (a list in graph-input order, or a dict by input name)."""
    return Interpreter(graph, functions).run(inputs)
