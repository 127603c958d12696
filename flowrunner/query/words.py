"""A condition in words, as a sentence reads it — or what holds when it does not.

``describe("status = rejected")`` is ``status is rejected``; with ``negated=True`` it
is ``status is not rejected``: the way a history line says why a branch went the other
way. Negation goes inside (``not (a and b)`` reads ``not a or not b``), so a reader
never untangles a ``not`` around parentheses. Columns keep their names and text its
words; text with spaces or signs keeps its quotes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from flowrunner import errors
from flowrunner.query import ast, parser

_NEGATED = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
_TEXT_OPS = {"contains": ("contains", "does not contain")}
_STARTS = ("starts with", "does not start with")
_WORD = re.compile(r"[\w.@-]+")  # the whole text (fullmatch): "$" would let a newline end it

Show = Callable[[object], str]


def describe(text: str, *, negated: bool = False, value: Show | None = None) -> str:
    """The condition ``text`` in words; ``negated``: what holds when it does not.

    ``value`` shows a constant (a date as the reader's calendar has it); by default a
    constant shows as written. Text that is no condition reads as itself (``not (…)``).

    >>> describe("status not in (rejected, withdrawn)")
    'status is neither rejected nor withdrawn'
    >>> describe("amount > 10000 and region = EU", negated=True)
    'amount <= 10000 or region is not EU'
    """
    try:
        node = _node(text)
    except errors.FlowrunnerError:
        return f"not ({text})" if negated else text
    return _words(node, negated, value or _plain)


@functools.lru_cache(maxsize=1024)
def _node(text: str) -> ast.Node:
    return parser.parse_node(text)


def _plain(constant: object) -> str:
    if constant is None:
        return "empty"
    return constant if isinstance(constant, str) else ast.render_value(constant)


def _words(node: ast.Node, negated: bool, show: Show) -> str:
    if isinstance(node, ast.Not):
        return _words(node.item, not negated, show)
    if isinstance(node, ast.And | ast.Or):
        joins_with_and = isinstance(node, ast.And) != negated
        parts = []
        for item in node.items:
            text = _words(item, negated, show)
            parts.append(f"({text})" if joins_with_and and _joins_with_or(item, negated) else text)
        return (" and " if joins_with_and else " or ").join(parts)
    left = str(node.left)
    if isinstance(node, ast.IsNull):
        empty = node.negated == negated
        return f"{left} is {'empty' if empty else 'not empty'}"
    if isinstance(node, ast.In):
        values = [_value(v, show) for v in node.values]
        if node.negated == negated:
            return f"{left} is {_either(values)}"
        if len(values) == 1:
            return f"{left} is not {values[0]}"
        if len(values) == 2:
            return f"{left} is neither {values[0]} nor {values[1]}"
        return f"{left} is none of {', '.join(values)}"
    right = _value(node.right, show)
    op = node.op
    if op in ast.TEXT_OPS:
        said, unsaid = _TEXT_OPS.get(op, _STARTS)
        return f"{left} {unsaid if negated else said} {right}"
    if negated:
        op = _NEGATED[op]
    if op == "=":
        return f"{left} is {right}"
    if op == "!=":
        return f"{left} is not {right}"
    return f"{left} {op} {right}"


def _joins_with_or(node: ast.Node, negated: bool) -> bool:
    """Whether ``node`` in words is an ``or`` (it then needs parentheses inside an ``and``)."""
    while isinstance(node, ast.Not):
        node, negated = node.item, not negated
    return isinstance(node, ast.And | ast.Or) and isinstance(node, ast.Or) != negated


def _either(values: list[str]) -> str:
    if len(values) <= 1:
        return "".join(values)
    return f"{', '.join(values[:-1])} or {values[-1]}"


def _value(node: ast.ValueExpr, show: Show) -> str:
    if isinstance(node, ast.Relative):
        return str(node).replace("()", "")  # now - 2 days
    if isinstance(node.value, str) and not _WORD.fullmatch(node.value):
        return str(node)  # text with spaces or signs keeps its quotes: 'RE: '
    return show(node.value)
