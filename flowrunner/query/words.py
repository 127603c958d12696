"""A condition in words, as a sentence reads it — or what holds when it does not.

``describe("status = rejected")`` is ``status is rejected``; with ``negated=True`` it
is ``status is not rejected``: the way a history line says why a branch went the other
way. ``phrase`` does the same for a parsed condition (``flowrunner.query.ast``).

No operator syntax reaches the reader: ``amount > 10000`` reads ``amount is more than
10,000``, ``due_at < now() - 2 days`` reads ``due_at is before 2 days ago``, a field
of the latest event reads ``the decision`` (``event.decision``), and a column reads as
its label where the binding gives one. Negation goes inside (``not (a and b)`` reads
``not a or not b``), so a reader never untangles a ``not`` around parentheses. Text
with spaces or signs keeps its quotes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime
from decimal import Decimal

from flowrunner import errors
from flowrunner.query import ast, parser, types

_NEGATED = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
# An order in words: for numbers and text, and for dates and moments.
_ORDER = {"<": "is less than", "<=": "is at most", ">": "is more than", ">=": "is at least"}
_TIME_ORDER = {"<": "is before", "<=": "is on or before", ">": "is after", ">=": "is on or after"}
_TEXT_OPS = {"contains": ("contains", "does not contain")}
_STARTS = ("starts with", "does not start with")
_WORD = re.compile(r"[\w.@-]+")  # the whole text (fullmatch): "$" would let a newline end it
_TIMES = (types.ColumnType.DATE, types.ColumnType.TIMESTAMP)

Show = Callable[[object], str]


def describe(
    text: str,
    *,
    negated: bool = False,
    value: Show | None = None,
    labels: Mapping[str, str] | None = None,
) -> str:
    """The condition ``text`` in words; ``negated``: what holds when it does not.

    ``value`` shows a constant (a date as the reader's calendar has it); by default a
    constant shows as written. ``labels`` name columns as the binding labels them. Text
    that is no condition reads as itself (``not (…)``).

    >>> describe("status not in (rejected, withdrawn)")
    'status is neither rejected nor withdrawn'
    >>> describe("amount > 10000 and region = EU", negated=True)
    'amount is at most 10,000 or region is not EU'
    >>> describe("event.decision = rejected")
    'the decision is rejected'
    """
    try:
        node = _node(text)
    except errors.FlowrunnerError:
        return f"not ({text})" if negated else text
    return phrase(node, negated=negated, value=value, labels=labels)


def phrase(
    node: ast.Node,
    *,
    negated: bool = False,
    value: Show | None = None,
    labels: Mapping[str, str] | None = None,
) -> str:
    """A parsed condition as an English phrase (what ``describe`` says of its text).

    Pure and total: every condition the parser can build reads as one line.

    >>> phrase(parser.parse_node("due_at < now() - 2 days"))
    'due_at is before 2 days ago'
    >>> phrase(parser.parse_node("amount >= 500"), labels={"amount": "the amount"})
    'the amount is at least 500'
    """
    return _words(node, negated, value or _plain, labels or {})


@functools.lru_cache(maxsize=1024)
def _node(text: str) -> ast.Node:
    return parser.parse_node(text)


def _plain(constant: object) -> str:
    if constant is None:
        return "empty"
    return constant if isinstance(constant, str) else ast.render_value(constant)


def _words(node: ast.Node, negated: bool, show: Show, labels: Mapping[str, str]) -> str:
    if isinstance(node, ast.Not):
        return _words(node.item, not negated, show, labels)
    if isinstance(node, ast.And | ast.Or):
        joins_with_and = isinstance(node, ast.And) != negated
        parts = []
        for item in node.items:
            text = _words(item, negated, show, labels)
            parts.append(f"({text})" if joins_with_and and _joins_with_or(item, negated) else text)
        return (" and " if joins_with_and else " or ").join(parts)
    left = _field(node.left, labels)
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
    timely = node.right.type in _TIMES or node.ctype in _TIMES
    return f"{left} {(_TIME_ORDER if timely else _ORDER)[op]} {right}"


def _field(ref: ast.Ref, labels: Mapping[str, str]) -> str:
    """A column by its label (or name); a field of the latest event as ``the decision``."""
    if ref.scope == "record":
        return labels.get(ref.name) or ref.name
    return f"the {ref.name.replace('_', ' ')}"


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
        return _relative(node)
    constant = node.value
    if isinstance(constant, bool) or constant is None:
        return show(constant)
    if isinstance(constant, int | Decimal) and not isinstance(constant, date | datetime):
        return f"{constant:,}" if isinstance(constant, int) else format(constant, ",f")
    if isinstance(constant, str) and not _WORD.fullmatch(constant):
        return str(node)  # text with spaces or signs keeps its quotes: 'RE: '
    return show(constant)


def _relative(node: ast.Relative) -> str:
    """``now``, ``today``, ``2 days ago``, ``3 days from now``, ``1 day before today``."""
    base = node.base
    if node.offset is None:
        return base
    length = str(-node.offset if node.offset.is_negative else node.offset)
    if base == "now":
        return f"{length} ago" if node.offset.is_negative else f"{length} from now"
    return f"{length} {'before' if node.offset.is_negative else 'after'} today"
