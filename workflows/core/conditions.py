"""Parse and evaluate edge conditions, a small expression language that never runs code.

A condition is a Python-like expression over two names: ``output`` (the upstream node's
output) and ``input`` (the run input). It may use

- attribute access and subscripts into dicts and lists: ``output.score``,
  ``output["content-type"]``, ``output.items[0]``, ``input.user.tags[-1]``;
- literals: numbers, strings, lists, ``true``/``false``/``null`` and ``True``/``False``/``None``;
- comparisons ``== != < <= > >=``, ``in``, ``not in`` (chained like Python: ``0 < x < 1``);
- ``and``, ``or``, ``not``, parentheses, and arithmetic ``+ - * /`` on numbers.

Everything else (calls, lambdas, comprehensions, dunder attributes, slices, f-strings, ...)
is a ``ConditionError`` when the condition is parsed, so a bad condition is caught when a
definition is validated, never when a run reaches it.

Evaluation never raises. Attribute access reads dict keys only (``output.items`` is the key
``"items"``, never a method). A missing key, an index out of range, or arithmetic on
something that is not a number yields a *missing* value. Missing is falsy, and any
comparison that involves it is false -- ``!=`` and ``not in`` included -- as is a
comparison that Python would reject (``"a" < 1``). To branch on absence, write
``"key" not in output`` or ``not output.key``. The final value is coerced with ``bool``.

The parser is ``ast.parse(..., mode="eval")`` followed by a whitelist walk; the tree is
then interpreted node by node. Nothing is ever passed to ``eval``, ``exec`` or ``compile``.
"""

from __future__ import annotations

import ast
import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard

MAX_CONDITION_LENGTH: Final = 500
MAX_NESTING_DEPTH: Final = 64
VARIABLES: Final = ("output", "input")
_MAX_ARITHMETIC_INT: Final = 2**63

_LITERAL_NAMES: Final[Mapping[str, object]] = {
    "true": True,
    "false": False,
    "null": None,
}
_COMPARE: Final[Mapping[type[ast.cmpop], Callable[[Any, Any], Any]]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_ARITHMETIC: Final[Mapping[type[ast.operator], Callable[[Any, Any], Any]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_FORBIDDEN: Final[Mapping[type[ast.AST], str]] = {
    ast.Call: "function calls",
    ast.Lambda: "lambdas",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.IfExp: "conditional expressions",
    ast.NamedExpr: "assignment expressions",
    ast.Dict: "dict literals",
    ast.Set: "set literals",
    ast.Starred: "starred expressions",
    ast.JoinedStr: "f-strings",
    ast.Slice: "slices",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
}
_SYMBOLS: Final[Mapping[type[ast.AST], str]] = {
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.Pow: "**",
    ast.Mod: "%",
    ast.FloorDiv: "//",
    ast.MatMult: "@",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.Invert: "~",
}


class ConditionError(ValueError):
    """Reject a condition; the message says what is wrong and at which column."""


class _Missing:
    """Stand for a value that is not there: a missing key, a bad index, failed arithmetic."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


class _Rejected(Exception):
    """Carry a whitelist violation and its position up to ``parse_condition``."""

    def __init__(self, node: ast.AST, message: str, byte_offset: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.lineno: int = getattr(node, "lineno", 1)
        self.byte_offset: int = getattr(node, "col_offset", 0) if byte_offset is None else byte_offset


@dataclass(frozen=True)
class Condition:
    """Hold a parsed edge condition; equal conditions have equal source text."""

    source: str
    _tree: ast.Expression = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_tree", _parse(self.source))

    def evaluate(self, output: object, input: object) -> bool:  # noqa: A002
        """Return the condition's truth for this output and run input; never raise."""
        env = {"output": output, "input": input}
        return bool(_evaluate(self._tree.body, env))

    def value(self, output: object, input: object) -> object:  # noqa: A002
        """Return the expression's value (None where it is missing); never raise.

        The same language computes values where a node needs one from the data (a wait
        node's event key, a timer's end).
        """
        result = _evaluate(self._tree.body, {"output": output, "input": input})
        return None if result is MISSING else result


def parse_condition(src: str) -> Condition:
    """Parse a condition or raise ConditionError naming the problem and its column."""
    return Condition(src)


def _parse(src: object) -> ast.Expression:
    """Check the source text's type and length, then parse it."""
    if not isinstance(src, str):
        raise ConditionError(f"condition must be a string, not {type(src).__name__}")
    if not src.strip():
        raise ConditionError("condition is empty")
    if len(src) > MAX_CONDITION_LENGTH:
        raise ConditionError(f"condition is {len(src)} characters long; the limit is {MAX_CONDITION_LENGTH}")
    return _parse_text(src)


@functools.lru_cache(maxsize=1024)
def _parse_text(src: str) -> ast.Expression:
    """Parse and check a condition; cached because versions repeat the same conditions.

    The cached trees are shared and must never be mutated.
    """
    tree = _parse_syntax(src)
    if _depth(tree.body) > MAX_NESTING_DEPTH:
        raise ConditionError(f"condition is nested more than {MAX_NESTING_DEPTH} levels deep")
    try:
        _check(tree.body)
    except _Rejected as rejected:
        raise ConditionError(f"{rejected.message} {_where(src, rejected)}") from None
    return tree


def _parse_syntax(src: str) -> ast.Expression:
    """Run Python's parser, turning its errors into ConditionError."""
    try:
        return ast.parse(src, mode="eval")
    except SyntaxError as err:
        column = err.offset if err.offset and err.offset > 0 else len(src) + 1
        line = f"line {err.lineno}, " if err.lineno and err.lineno > 1 else ""
        raise ConditionError(f"{err.msg} ({line}column {column})") from None
    except ValueError as err:  # e.g. a NUL character
        raise ConditionError(str(err)) from None
    except RecursionError:
        raise ConditionError("condition is nested too deeply") from None


def _depth(root: ast.AST) -> int:
    """Measure a tree's depth without recursing, so the recursive walks below stay bounded."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _where(src: str, rejected: _Rejected) -> str:
    """Describe a position as a 1-based character column (and the line if not the first)."""
    lines = src.splitlines() or [src]
    text = lines[min(rejected.lineno, len(lines)) - 1]
    column = len(text.encode()[: rejected.byte_offset].decode(errors="ignore")) + 1
    line = f"line {rejected.lineno}, " if rejected.lineno > 1 else ""
    return f"({line}column {column})"


def _check(node: ast.AST) -> None:
    """Raise _Rejected unless every node of the tree is on the whitelist."""
    checker = _CHECKERS.get(type(node))
    if checker is None:
        raise _Rejected(node, f"{_describe(node)} are not allowed in conditions")
    checker(node)


def _describe(node: ast.AST) -> str:
    """Name a forbidden construct for an error message."""
    if isinstance(node, ast.BinOp):
        return f"'{_symbol(node.op)}' operators"
    return _FORBIDDEN.get(type(node), f"{type(node).__name__} expressions")


def _symbol(op: ast.AST) -> str:
    """Spell an operator the way it was written."""
    return _SYMBOLS.get(type(op), type(op).__name__)


def _check_all(nodes: Sequence[ast.AST]) -> None:
    """Check each node in turn."""
    for child in nodes:
        _check(child)


def _check_constant(node: ast.Constant) -> None:
    """Allow only JSON-like literal values."""
    if node.value is not None and not isinstance(node.value, (str, int, float)):
        raise _Rejected(node, f"{type(node.value).__name__} literals are not allowed")


def _check_name(node: ast.Name) -> None:
    """Allow the two variables and the JSON literal names."""
    if node.id not in VARIABLES and node.id not in _LITERAL_NAMES:
        raise _Rejected(node, f"unknown name '{node.id}'; use output, input, true, false or null")


def _check_attribute(node: ast.Attribute) -> None:
    """Allow key access by attribute, but never a dunder name."""
    if node.attr.startswith("__"):
        attr_offset = (node.end_col_offset or 0) - len(node.attr.encode())
        raise _Rejected(node, f"attribute '{node.attr}' is not allowed", attr_offset)
    _check(node.value)


def _check_subscript(node: ast.Subscript) -> None:
    """Allow indexing by an expression, but not slicing."""
    _check(node.value)
    _check(node.slice)


def _check_compare(node: ast.Compare) -> None:
    """Allow the whitelisted comparison operators."""
    for op in node.ops:
        if type(op) not in _COMPARE:
            message = f"'{_symbol(op)}' comparisons are not allowed; use == or !="
            raise _Rejected(node, message)
    _check_all([node.left, *node.comparators])


def _check_bool_op(node: ast.BoolOp) -> None:
    """Allow and/or."""
    _check_all(node.values)


def _check_unary(node: ast.UnaryOp) -> None:
    """Allow not, unary minus and unary plus."""
    if not isinstance(node.op, (ast.Not, ast.USub, ast.UAdd)):
        raise _Rejected(node, f"'{_symbol(node.op)}' operators are not allowed")
    _check(node.operand)


def _check_arithmetic(node: ast.BinOp) -> None:
    """Allow + - * / only."""
    if type(node.op) not in _ARITHMETIC:
        raise _Rejected(node, f"{_describe(node)} are not allowed in conditions")
    _check_all([node.left, node.right])


def _check_sequence(node: ast.List | ast.Tuple) -> None:
    """Allow list (and tuple) literals of allowed expressions."""
    _check_all(node.elts)


_CHECKERS: Final[Mapping[type[ast.AST], Callable[[Any], None]]] = {
    ast.Constant: _check_constant,
    ast.Name: _check_name,
    ast.Attribute: _check_attribute,
    ast.Subscript: _check_subscript,
    ast.Compare: _check_compare,
    ast.BoolOp: _check_bool_op,
    ast.UnaryOp: _check_unary,
    ast.BinOp: _check_arithmetic,
    ast.List: _check_sequence,
    ast.Tuple: _check_sequence,
}

_Env = Mapping[str, object]


def _evaluate(node: ast.expr, env: _Env) -> object:
    """Interpret a whitelisted node."""
    return _EVALUATORS[type(node)](node, env)


def _eval_constant(node: ast.Constant, env: _Env) -> object:
    """Return the literal."""
    return node.value


def _eval_name(node: ast.Name, env: _Env) -> object:
    """Return a variable or a JSON literal."""
    return env[node.id] if node.id in env else _LITERAL_NAMES[node.id]


def _eval_attribute(node: ast.Attribute, env: _Env) -> object:
    """Read a dict key named like the attribute."""
    return _lookup(_evaluate(node.value, env), node.attr)


def _eval_subscript(node: ast.Subscript, env: _Env) -> object:
    """Read a dict key or a list element."""
    return _lookup(_evaluate(node.value, env), _evaluate(node.slice, env))


def _lookup(container: object, key: object) -> object:
    """Return container[key] for dicts and sequences, or MISSING."""
    if isinstance(container, Mapping):
        try:
            return container.get(key, MISSING)
        except TypeError:  # unhashable key
            return MISSING
    if isinstance(container, (list, tuple, str)) and _is_index(key):
        in_range = -len(container) <= key < len(container)
        return container[key] if in_range else MISSING
    return MISSING


def _is_index(key: object) -> TypeGuard[int]:
    """Tell whether a key can index a list."""
    return isinstance(key, int) and not isinstance(key, bool)


def _eval_compare(node: ast.Compare, env: _Env) -> bool:
    """Evaluate a (possibly chained) comparison, short-circuiting like Python."""
    left = _evaluate(node.left, env)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        right = _evaluate(right_node, env)
        if not _compare(op, left, right):
            return False
        left = right
    return True


def _compare(op: ast.cmpop, left: object, right: object) -> bool:
    """Compare two values; missing values and type errors compare false."""
    if left is MISSING or right is MISSING:
        return False
    try:
        return bool(_COMPARE[type(op)](left, right))
    except (TypeError, ValueError, OverflowError, RecursionError):
        return False


def _eval_bool_op(node: ast.BoolOp, env: _Env) -> object:
    """Evaluate and/or with Python's short-circuit rules."""
    stop_when = not isinstance(node.op, ast.And)
    value: object = MISSING
    for child in node.values:
        value = _evaluate(child, env)
        if bool(value) == stop_when:
            return value
    return value


def _eval_unary(node: ast.UnaryOp, env: _Env) -> object:
    """Evaluate not, unary minus and unary plus."""
    value = _evaluate(node.operand, env)
    if isinstance(node.op, ast.Not):
        return not value
    if not _is_number(value):
        return MISSING
    return -value if isinstance(node.op, ast.USub) else value


def _eval_arithmetic(node: ast.BinOp, env: _Env) -> object:
    """Evaluate + - * / on numbers; anything else is MISSING."""
    left = _evaluate(node.left, env)
    right = _evaluate(node.right, env)
    if not (_is_number(left) and _is_number(right)):
        return MISSING
    try:
        return _ARITHMETIC[type(node.op)](left, right)
    except (ZeroDivisionError, OverflowError):
        return MISSING


def _is_number(value: object) -> TypeGuard[int | float]:
    """Tell whether arithmetic may use a value; huge ints are refused to bound the work."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return not isinstance(value, int) or abs(value) < _MAX_ARITHMETIC_INT


def _eval_sequence(node: ast.List | ast.Tuple, env: _Env) -> object:
    """Build a list literal."""
    return [_evaluate(child, env) for child in node.elts]


_EVALUATORS: Final[Mapping[type[ast.AST], Callable[[Any, _Env], object]]] = {
    ast.Constant: _eval_constant,
    ast.Name: _eval_name,
    ast.Attribute: _eval_attribute,
    ast.Subscript: _eval_subscript,
    ast.Compare: _eval_compare,
    ast.BoolOp: _eval_bool_op,
    ast.UnaryOp: _eval_unary,
    ast.BinOp: _eval_arithmetic,
    ast.List: _eval_sequence,
    ast.Tuple: _eval_sequence,
}
