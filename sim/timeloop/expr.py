"""Timeloop v0.4 attribute expressions: ``datawidth: INPUT_WEIGHT_DATAWIDTH``,
``depth: 2 * ROWS + 1``, ``width: log2(N)`` — names from the top-level ``variables`` and from the
attributes in scope (a container's pass down), numbers, + - * / // % **, parentheses and a few
math functions. Evaluated on a parsed syntax tree: no Python ``eval``, nothing else reachable.
A text that is not such an expression (``technology: "40nm"``, ``type: LPDDR4``) stays text.
"""
from __future__ import annotations

import ast
import math
import operator
from typing import Any, Mapping

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_FUN = {"log2": math.log2, "ceil": math.ceil, "floor": math.floor, "min": min, "max": max,
        "round": round, "sqrt": math.sqrt, "abs": abs, "int": int}
MAX_EXPR_CHARS = 200


class _NotExpr(Exception):
    pass


def _ev(node: ast.AST, scope: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Expression):
        return _ev(node.body, scope)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        v = scope.get(node.id)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _NotExpr
        return v
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _ev(node.operand, scope)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        a, b = _ev(node.left, scope), _ev(node.right, scope)
        if isinstance(node.op, ast.Pow) and (abs(b) > 64 or abs(a) > 1 << 32):
            raise _NotExpr
        return _BIN[type(node.op)](a, b)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUN
            and not node.keywords):
        return _FUN[node.func.id](*(_ev(a, scope) for a in node.args))
    raise _NotExpr


def evaluate_text(text: str, scope: Mapping[str, Any]) -> Any:
    """The value of ``text`` as an expression over ``scope``, or ``text`` unchanged."""
    if len(text) > MAX_EXPR_CHARS:
        return text
    try:
        v = _ev(ast.parse(text.strip(), mode="eval"), scope)
    except (_NotExpr, SyntaxError, ValueError, TypeError, ZeroDivisionError, OverflowError, RecursionError):
        return text
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return v


def resolve(attrs: Mapping[str, Any], scope: Mapping[str, Any]) -> dict[str, Any]:
    """``attrs`` with every text value that is an expression over ``scope`` (and the already
    numeric attributes) replaced by its number."""
    local = {**scope, **{k: v for k, v in attrs.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}}
    out = {}
    for k, v in attrs.items():
        out[k] = evaluate_text(v, local) if isinstance(v, str) else v
        if isinstance(out[k], (int, float)):
            local[k] = out[k]
    return out
