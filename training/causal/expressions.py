"""A restricted expression language for user-written mechanisms: arithmetic and a whitelist of numpy functions.

An expression such as ``cos(Z) - exp(-Z / 20)`` is parsed with `ast` (mode ``eval``) and compiled into a tree of
closures over numpy arrays; nothing is ever passed to `eval`/`exec`. Allowed:

* numbers (int/float literals) and the constants ``pi`` and ``e``;
* variable names (each must be one of the names the caller allows: the variable's parents);
* ``+ - * / **`` and unary ``+ -``;
* calls of the whitelisted functions in `FUNCTIONS` with positional arguments.

Anything else (attribute access, subscripts, comparisons, keyword arguments, lambdas, strings, unknown names or
functions) raises `ExpressionError` naming what was refused.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np


class ExpressionError(ValueError):
    """An expression outside the restricted language; the message names the offending part."""


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# name -> (function, number of arguments)
FUNCTIONS: dict[str, tuple[Callable, int]] = {
    "exp": (np.exp, 1), "log": (np.log, 1), "sqrt": (np.sqrt, 1), "abs": (np.abs, 1),
    "sin": (np.sin, 1), "cos": (np.cos, 1), "tan": (np.tan, 1), "tanh": (np.tanh, 1),
    "sigmoid": (_sigmoid, 1), "square": (np.square, 1), "minimum": (np.minimum, 2), "maximum": (np.maximum, 2),
}
CONSTANTS = {"pi": float(np.pi), "e": float(np.e)}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}

Evaluator = Callable[[Mapping[str, np.ndarray]], np.ndarray | float]


@dataclass(frozen=True)
class Expression:
    """A compiled expression: `source` text, the variable `names` it reads, and `__call__(values) -> array`."""

    source: str
    names: frozenset[str]
    _fn: Evaluator

    def __call__(self, values: Mapping[str, np.ndarray]) -> np.ndarray | float:
        return self._fn(values)


def compile_expression(source: str, allowed_names: set[str] | frozenset[str], where: str = "expression"
                       ) -> Expression:
    """Parse `source` into an `Expression` that may read only `allowed_names`; `where` prefixes error messages."""
    if not isinstance(source, (str, int, float)) or isinstance(source, bool):
        raise ExpressionError(f"{where}: must be a string expression or a number, got {type(source).__name__}")
    text = str(source)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise ExpressionError(f"{where}: {text!r} is not a valid expression ({err.msg})") from None
    names: set[str] = set()

    def build(node: ast.AST) -> Evaluator:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ExpressionError(f"{where}: only numeric literals are allowed, got {node.value!r}")
            value = float(node.value)
            return lambda env: value
        if isinstance(node, ast.Name):
            if node.id in CONSTANTS:
                value = CONSTANTS[node.id]
                return lambda env: value
            if node.id not in allowed_names:
                raise ExpressionError(
                    f"{where}: name {node.id!r} is not allowed here (allowed: {sorted(allowed_names)}, constants "
                    f"{sorted(CONSTANTS)}, functions {sorted(FUNCTIONS)})")
            names.add(node.id)
            key = node.id
            return lambda env: env[key]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            op, left, right = _BINARY[type(node.op)], build(node.left), build(node.right)
            return lambda env: op(left(env), right(env))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            op, operand = _UNARY[type(node.op)], build(node.operand)
            return lambda env: op(operand(env))
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                shown = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
                raise ExpressionError(f"{where}: function {shown!r} is not allowed (allowed: {sorted(FUNCTIONS)})")
            if node.keywords:
                raise ExpressionError(f"{where}: keyword arguments are not allowed in {node.func.id}()")
            fn, arity = FUNCTIONS[node.func.id]
            if len(node.args) != arity:
                raise ExpressionError(f"{where}: {node.func.id}() takes {arity} argument(s), got {len(node.args)}")
            args = [build(a) for a in node.args]
            if arity == 1:
                (a,) = args
                return lambda env: fn(a(env))
            return lambda env: fn(*(a(env) for a in args))
        raise ExpressionError(f"{where}: {type(node).__name__} is not allowed in {text!r} (only arithmetic, "
                              f"numbers, variable names and the functions {sorted(FUNCTIONS)})")

    fn = build(tree.body)
    return Expression(source=text, names=frozenset(names), _fn=fn)
