"""A restricted expression language for user-written mechanisms: arithmetic and a whitelist of numpy functions.

An expression such as ``cos(Z) - exp(-Z / 20)`` is parsed with `ast` (mode ``eval``) and compiled into a tree of
closures over numpy arrays; nothing is ever passed to `eval`/`exec`. Allowed:

* numbers (int/float literals) and the constants ``pi`` and ``e``;
* variable names (each must be one of the names the caller allows: the variable's parents), any identifier, a
  Python keyword included (a crop's `yield`: such a name is swapped for a placeholder before `ast` parses the text);
* ``+ - * / **`` and unary ``+ -``;
* calls of the whitelisted functions in `FUNCTIONS` with positional arguments.

Anything else (attribute access, subscripts, comparisons, keyword arguments, lambdas, strings, unknown names or
functions) raises `ExpressionError` naming what was refused.

What an expression may ask of the parser and of the evaluator is bounded, and checked on its tokens BEFORE `ast.parse`
(whose own recursion overflows with a RecursionError or MemoryError on a 3,000-term sum or 50,000 unary minuses):
a numeric literal's magnitude (`MAX_LITERAL`, and at most `MAX_LITERAL_CHARS` characters: a 400-digit integer
overflows `float`), the nesting depth (parentheses, or a run of unary signs: `MAX_NESTING`), the number of terms
(names and numbers: `MAX_TERMS`) and the length (`MAX_CHARS`).
"""

from __future__ import annotations

import ast
import io
import keyword
import math
import operator
import re
import tokenize
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

MAX_LITERAL = 1e12
MAX_LITERAL_CHARS = 40
MAX_NESTING = 50
MAX_TERMS = 200
MAX_CHARS = 4000
_PREFIX_AFTER = {"(", ",", "+", "-", "*", "/", "**"}  # an operator after one of these (or first) is a unary sign

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
    check_bounds(text, where)
    placeholders = {f"__name_{i}": name for i, name in enumerate(sorted(allowed_names)) if _is_keyword(name)}
    parsed = text
    for placeholder, name in placeholders.items():
        parsed = re.sub(rf"\b{re.escape(name)}\b", placeholder, parsed)
    try:
        tree = ast.parse(parsed, mode="eval")
    except SyntaxError as err:
        raise ExpressionError(f"{where}: {text!r} is not a valid expression ({err.msg})") from None
    except (RecursionError, MemoryError, ValueError) as err:  # the bounds should keep the parser from these
        raise ExpressionError(f"{where}: the expression is too large to parse ({type(err).__name__})") from None
    names: set[str] = set()

    def build(node: ast.AST) -> Evaluator:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ExpressionError(f"{where}: only numeric literals are allowed, got {node.value!r}")
            value = literal_value(node.value, where, repr(node.value))
            return lambda env: value
        if isinstance(node, ast.Name):
            node.id = placeholders.get(node.id, node.id)
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


def _is_keyword(name: str) -> bool:
    return keyword.iskeyword(name) or keyword.issoftkeyword(name)


def shortened(text: str, limit: int = 60) -> str:
    """`text` quoted, cut at `limit` characters (a 50,000-character expression is not repeated in a message)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def literal_value(value: int | float, where: str, shown: str) -> float:
    """A numeric literal (written `shown`) as a float within +-`MAX_LITERAL`, or `ExpressionError`."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or abs(number) > MAX_LITERAL:
        raise ExpressionError(f"{where}: the literal {shortened(shown)} is out of bounds: numbers must be finite and "
                              f"at most {MAX_LITERAL:g} in magnitude")
    return number


def check_bounds(text: str, where: str) -> None:
    """Refuse, from the tokens and before any parsing, an expression outside the bounds of the module docstring.
    Text that does not tokenize is left to `ast.parse`, which names the syntax error."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        tokens = []
    depth = max_depth = run = terms = 0
    previous = None
    for tok in tokens:
        if tok.type == tokenize.NUMBER:
            if len(tok.string) > MAX_LITERAL_CHARS:
                raise ExpressionError(f"{where}: the literal {shortened(tok.string)} has {len(tok.string)} characters; "
                                      f"numbers may have at most {MAX_LITERAL_CHARS}")
            if tok.string.rstrip("jJ") == tok.string:  # a complex literal is refused by name when the tree is built
                literal_value(ast.literal_eval(tok.string), where, tok.string)
        if tok.type in (tokenize.NAME, tokenize.NUMBER):
            terms += 1
        sign = tok.type == tokenize.OP and tok.string in ("+", "-") and (previous is None or previous in _PREFIX_AFTER)
        run = run + 1 if sign else 0
        if tok.type == tokenize.OP and tok.string in ("(", ")"):
            depth += 1 if tok.string == "(" else -1
        max_depth = max(max_depth, depth + run)
        if tok.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
            previous = tok.string
        if max_depth > MAX_NESTING:
            raise ExpressionError(f"{where}: the expression nests deeper than {MAX_NESTING} levels (parentheses and "
                                  f"unary signs)")
        if terms > MAX_TERMS:
            raise ExpressionError(f"{where}: the expression has more than {MAX_TERMS} terms (names and numbers)")
    if len(text) > MAX_CHARS:
        raise ExpressionError(f"{where}: the expression has {len(text)} characters; at most {MAX_CHARS}")
