"""Text → AST: loads ``query.lark`` once, builds nodes, and turns Lark's errors into sentences.

Lark's LALR parser calls the builder's methods as it reduces, so no tree is walked
recursively and deep input cannot exhaust the stack. Every Lark exception is caught in
``parse_node``/``parse_value_node`` and replaced by ``errors.QueryError``.
"""

from __future__ import annotations

import re
import threading
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol, TypeAlias, cast

import lark
import lark.exceptions

from flowrunner import errors
from flowrunner.foundations import durations
from flowrunner.query import ast, messages, types

MAX_LENGTH = 4000
MAX_LIST = 500
MAX_DIGITS = 15  # what survives a round trip through a double, as SQLite stores numbers

# What Lark hands a rule's method: the rule's tokens and what its parts were built into
# (nodes, values, lists), different for each rule (``query.lark`` says which).
Children: TypeAlias = list[Any]


class _Token(Protocol):
    """A token as Lark's LALR parser hands it to a rule: its text and where it stands."""

    value: str
    line: int
    column: int


RESERVED = frozenset({"and", "or", "not", "in", "is", "contains", "starts", "with"})

_PACKAGE = Path(__file__).resolve().parent.parent
# A wheel carries the grammar inside the package; a source tree keeps it at the top.
GRAMMAR_PATHS = (_PACKAGE / "grammar" / "query.lark", _PACKAGE.parent / "grammar" / "query.lark")


def grammar_path() -> Path:
    for path in GRAMMAR_PATHS:
        if path.is_file():
            return path
    raise errors.FlowrunnerError(
        "the query grammar query.lark is missing from the installation "
        f"(looked in {', '.join(str(p) for p in GRAMMAR_PATHS)})"
    )


def _error(message: str, token: object, text: str, found: str | None = None) -> errors.QueryError:
    return errors.QueryError(
        message,
        line=getattr(token, "line", 1) or 1,
        column=getattr(token, "column", 1) or 1,
        found=found if found is not None else str(token),
        text=text,
    )


class _Builder(lark.Transformer[lark.Token, object]):
    """One method per grammar alias; each returns an AST node (or a piece of one)."""

    @property
    def text(self) -> str:
        # The parser (and so this builder) is shared between threads; the text being
        # parsed, needed only for messages, is per thread.
        return str(getattr(_local, "text", ""))

    def start(self, c: Children) -> object:
        return c[0]

    value_start = start
    pass_through = start

    def group(self, c: Children) -> object:
        return c[1]

    def _limit(self, node: ast.Node, token: _Token) -> ast.Node:
        if node.depth > ast.MAX_DEPTH:
            raise _error(
                f"the condition nests too deeply (more than {ast.MAX_DEPTH} levels)",
                token,
                self.text,
            )
        return node

    def or_(self, c: Children) -> ast.Node:
        return self._limit(ast.Or((c[0], c[2])), c[1])

    def and_(self, c: Children) -> ast.Node:
        return self._limit(ast.And((c[0], c[2])), c[1])

    def not_(self, c: Children) -> ast.Node:
        return self._limit(ast.Not(c[1]), c[0])

    def compare(self, c: Children) -> ast.Node:
        left, op, right = c
        if isinstance(right, ast.Literal) and right.type is None:
            word = "is null" if op.value == "=" else "is not null" if op.value == "!=" else None
            hint = f" — write '{left} {word}'" if word else ""
            raise _error(f"null cannot be compared with '{op.value}'{hint}", op, self.text)
        return ast.Compare(left, str(op.value), right)

    def contains(self, c: Children) -> ast.Node:
        return self._text_op(c[0], "contains", c[1], c[2])

    def starts_with(self, c: Children) -> ast.Node:
        return self._text_op(c[0], "starts with", c[1], c[3])

    def _text_op(self, left: ast.Ref, op: str, token: _Token, right: ast.ValueExpr) -> ast.Node:
        if isinstance(right, ast.Literal) and right.type is None:
            raise _error(f"'{op}' needs a text to look for, not null", token, self.text)
        return ast.Compare(left, op, right)

    def in_(self, c: Children) -> ast.Node:
        return ast.In(c[0], tuple(c[2]))

    def not_in(self, c: Children) -> ast.Node:
        return ast.In(c[0], tuple(c[3]), negated=True)

    def is_null(self, c: Children) -> ast.Node:
        return ast.IsNull(c[0])

    def is_not_null(self, c: Children) -> ast.Node:
        return ast.IsNull(c[0], negated=True)

    def field(self, c: list[_Token]) -> ast.Ref:
        token = c[0]
        return ast.Ref(str(token.value), "record", token.line, token.column)

    def dotted(self, c: list[_Token]) -> ast.Ref:
        scope, name = c[0], c[2]
        return ast.Ref(str(name.value), str(scope.value).lower(), scope.line, scope.column)

    def value_list(self, c: Children) -> list[ast.Literal]:
        return list(c[1])

    def first_item(self, c: Children) -> list[ast.Literal]:
        return [self._item(c[0])]

    def more_items(self, c: Children) -> list[ast.Literal]:
        items: list[ast.Literal] = c[0]
        if len(items) >= MAX_LIST:
            raise _error(f"a list holds at most {MAX_LIST} values", c[1], self.text)
        items.append(self._item(c[2]))
        return items

    def _item(self, value: ast.ValueExpr) -> ast.Literal:
        if isinstance(value, ast.Relative):
            raise _error(
                f"a list holds plain values, not {value}", value, self.text, found=str(value)
            )
        if value.type is None:
            raise _error(
                "a list cannot hold null — add 'or … is null' instead", value, self.text, "null"
            )
        return value

    # values

    def string(self, c: list[_Token]) -> ast.Literal:
        token = c[0]
        value = ast.unescape(token.value[1:-1])
        if "\x00" in value:
            raise _error("a text value cannot hold the NUL character", token, self.text)
        return ast.Literal(value, types.ColumnType.TEXT, token.line, token.column)

    def word(self, c: list[_Token]) -> ast.Literal:
        token = c[0]
        if token.value.lower() in RESERVED:
            raise _error(
                f"found '{token.value}' where a value was expected — to mean the text, "
                f"write '{token.value}' in quotes",
                token,
                self.text,
            )
        return ast.Literal(str(token.value), types.ColumnType.TEXT, token.line, token.column)

    def number(self, c: list[_Token]) -> ast.Literal:
        token = c[0]
        return ast.Literal(
            read_number(token.value, token, self.text),
            types.ColumnType.NUMBER,
            token.line,
            token.column,
        )

    def date_value(self, c: list[_Token]) -> ast.Literal:
        token = c[0]
        try:
            value = date.fromisoformat(token.value)
        except ValueError:
            raise _error(
                f"'{token.value}' is not a date of the calendar", token, self.text
            ) from None
        return ast.Literal(value, types.ColumnType.DATE, token.line, token.column)

    def timestamp(self, c: list[_Token]) -> ast.Literal:
        token = c[0]
        try:
            value = datetime.fromisoformat(token.value.upper())
        except ValueError:
            raise _error(f"'{token.value}' is not a date and time", token, self.text) from None
        moment = types.to_timestamp(value)
        if moment is None:
            raise _error(outside_calendar(token.value), token, self.text)
        return ast.Literal(moment, types.ColumnType.TIMESTAMP, token.line, token.column)

    def true(self, c: list[_Token]) -> ast.Literal:
        return ast.Literal(True, types.ColumnType.BOOLEAN, c[0].line, c[0].column)

    def false(self, c: list[_Token]) -> ast.Literal:
        return ast.Literal(False, types.ColumnType.BOOLEAN, c[0].line, c[0].column)

    def null(self, c: list[_Token]) -> ast.Literal:
        return ast.Literal(None, None, c[0].line, c[0].column)

    def now(self, c: list[_Token]) -> ast.Relative:
        return ast.Relative("now", None, c[0].line, c[0].column)

    def today(self, c: list[_Token]) -> ast.Relative:
        return ast.Relative("today", None, c[0].line, c[0].column)

    def now_offset(self, c: Children) -> ast.Relative:
        return ast.Relative("now", self._offset(c[3], c[4]), c[0].line, c[0].column)

    def today_offset(self, c: Children) -> ast.Relative:
        return ast.Relative("today", self._offset(c[3], c[4]), c[0].line, c[0].column)

    def _offset(self, sign: _Token, token: _Token) -> durations.Duration:
        try:
            duration = durations.parse_duration(token.value)
        except errors.DurationError as exc:
            raise errors.DurationError(
                exc.message,
                line=token.line,
                column=token.column + exc.column - 1,
                found=exc.found,
                expected=exc.expected,
                text=self.text,
            ) from None
        return -duration if sign.value == "-" else duration


def outside_calendar(raw: str) -> str:
    """The sentence for a date and time that lies outside years 1 to 9999 in UTC."""
    # Only a time-zone offset can carry a moment over an end: year 1 back, year 9999 on.
    edge = "before 0001-01-01" if raw.strip().startswith("0001") else "after 9999-12-31"
    return f"'{raw}' is outside the calendar: in UTC it falls {edge}"


def read_number(raw: str, token: object, text: str) -> int | Decimal:
    value = Decimal(raw)
    if len(value.normalize().as_tuple().digits) > MAX_DIGITS:
        raise _error(
            f"'{raw}' has more than {MAX_DIGITS} significant digits, more than can be compared",
            token,
            text,
        )
    return value if "." in raw else int(raw)


# A lone surrogate: a code point Python's text may hold but UTF-8 cannot write.
_SURROGATE = re.compile("[\ud800-\udfff]")
_local = threading.local()
_builder = _Builder()
_parser: lark.Lark | None = None


def _lark() -> lark.Lark:
    global _parser
    if _parser is None:
        _parser = lark.Lark(
            grammar_path().read_text(encoding="utf-8"),
            parser="lalr",
            lexer="contextual",
            start=["start", "value_start"],
            transformer=_builder,
            maybe_placeholders=False,
        )
    return _parser


def _run(text: str, start: str, what: str) -> object:
    if not isinstance(text, str):
        raise errors.QueryError(f"{what} must be text, not {type(text).__name__}", text=str(text))
    if len(text) > MAX_LENGTH:
        raise errors.QueryError(
            f"{what} is longer than {MAX_LENGTH} characters",
            column=MAX_LENGTH + 1,
            found=text[MAX_LENGTH : MAX_LENGTH + 10],
            text=text,
        )
    if not text.strip():
        raise errors.QueryError(
            f"{what} is empty", found="end of text", expected=(f"{what}",), text=text
        )
    lone = _SURROGATE.search(text)
    if lone is not None:
        # Not text (not UTF-8): no column or database could compare it, and a message
        # quoting it could not be written out. Said by its code point.
        at = lone.start()
        raise errors.QueryError(
            f"{what} holds a lone surrogate (U+{ord(lone.group()):04X}), which is not text",
            line=text.count("\n", 0, at) + 1,
            column=at - (text.rfind("\n", 0, at) + 1) + 1,
            found=f"U+{ord(lone.group()):04X}",
            text=_SURROGATE.sub("\ufffd", text),
        )
    parser = _lark()
    _local.text = text
    try:
        return parser.parse(text, start=start)
    except lark.exceptions.LarkError as exc:
        raise messages.translate(exc, text) from None


def parse_node(text: str) -> ast.Node:
    """The AST of a condition, unchecked against any columns."""
    return cast(ast.Node, _run(text, "start", "a condition"))


def parse_value_node(text: str) -> ast.ValueExpr:
    """The AST of one value (``'open'``, ``42``, ``today() + 2 days``...)."""
    return cast(ast.ValueExpr, _run(text, "value_start", "a value"))
