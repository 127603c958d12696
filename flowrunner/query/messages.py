"""Lark's parse errors turned into sentences a business user can act on.

``translate`` is the only place that knows Lark's exception types; it names what was
found (a word, a symbol, or the end of text), what would have fitted there, and the
word it came after, e.g. ``expected a value after '=', found end of text``.
"""

from __future__ import annotations

import re
from collections.abc import Collection

import lark.exceptions

from flowrunner import errors

_OPERATOR = frozenset({"COMPARE", "IN", "IS", "CONTAINS", "STARTS"})
_AFTER_COMPARISON = frozenset({"AND", "OR", "RPAR", "$END"})
_TOKEN_BEFORE = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[\w.:+-]+|!=|<=|>=|\S)\s*$""")

OPERATORS = "an operator such as =, !=, <, >, in, is null, contains or starts with"


def _describe(expected: Collection[str]) -> str:
    names = set(expected)
    if "STRING" in names:
        return "a value"
    if names & _OPERATOR:
        return OPERATORS
    if "NAME" in names:
        return "a column name"
    if names == {"LPAR"}:
        return "'('"
    if names <= {"COMMA", "RPAR"}:
        return "',' or ')'"
    if names & {"AND", "OR"}:
        words = ["'and'", "'or'"]
        if "SIGN" in names:
            words.insert(0, "'+' or '-' and a duration")
        if "RPAR" in names:
            words.append("')'")
        return ", ".join(words[:-1]) + " or " + words[-1]
    singles = {
        "WITH": "'with'",
        "NULL": "'null'",
        "IN": "'in'",
        "DURATION": "a duration",
        "RPAR": "')'",
        "DOT": "'.'",
    }
    known = [singles[n] for n in sorted(names) if n in singles]
    return " or ".join(known) if known else "something else"


def _before(text: str, line: int, column: int) -> str | None:
    lines = text.split("\n")
    head = "\n".join([*lines[: line - 1], lines[line - 1][: column - 1]]) if lines else ""
    match = _TOKEN_BEFORE.search(head)
    return match.group(1) if match else None


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    last = len(lines[-1].rstrip())
    # Trailing blank lines: point just after the last character written.
    while len(lines) > 1 and not lines[-1].strip():
        lines.pop()
        last = len(lines[-1].rstrip())
    return len(lines), last + 1


def translate(exc: lark.exceptions.LarkError, text: str) -> errors.QueryError:
    """The ``QueryError`` for a Lark parse failure on ``text``."""
    if isinstance(exc, lark.exceptions.UnexpectedCharacters):
        return _characters(exc, text)
    if isinstance(exc, lark.exceptions.UnexpectedToken):
        return _token(exc, text)
    if isinstance(exc, lark.exceptions.UnexpectedEOF):
        line, column = _end_position(text)
        expected = _describe(exc.expected)
        return errors.QueryError(
            f"expected {expected}, found end of text",
            line=line,
            column=column,
            found="end of text",
            expected=(expected,),
            text=text,
        )
    return errors.QueryError("this condition cannot be read", text=text)  # pragma: no cover


def _characters(exc: lark.exceptions.UnexpectedCharacters, text: str) -> errors.QueryError:
    line, column, char = exc.line, exc.column, exc.char
    allowed = set(exc.allowed or ())
    expected = _describe(allowed) if allowed else "something else"
    if char in "'\"":
        message = f"this text has no closing quote — end it with {char}"
    elif allowed == {"LPAR"}:
        message = f"expected '(' after '{_before(text, line, column)}', found '{char}'"
    elif char.isdigit() and allowed & {"DURATION"}:
        message = "this is not a duration — write e.g. '2 days' or '30 minutes'"
    else:
        message = f"found '{char}' where {expected} was expected"
    return errors.QueryError(
        message, line=line, column=column, found=char, expected=(expected,), text=text
    )


def _token(exc: lark.exceptions.UnexpectedToken, text: str) -> errors.QueryError:
    token = exc.token
    names = set(exc.expected or ())
    expected = _describe(names)
    at_end = token.type == "$END"
    if at_end:
        line, column = _end_position(text)
    else:
        line, column = token.line, token.column
    before = _before(text, line, column)
    found = "end of text" if at_end else f"'{token.value}'"
    after = f" after '{before}'" if before else ""
    if before and before.lower() == "in" and names == {"LPAR"}:
        message = f"'in' needs a list in parentheses, e.g. (a, b), found {found}"
    elif before == "(" and token.type == "RPAR" and "STRING" in names:
        message = "a list cannot be empty — write e.g. (a, b)"
    elif names <= {"COMMA", "RPAR"} and names:
        message = f"the list is not closed — expected ',' or ')'{after}, found {found}"
    elif "RPAR" in names and at_end:
        message = f"a '(' is not closed — expected ')'{after}, found end of text"
    elif at_end:
        message = f"expected {expected}{after}, found end of text"
    elif token.type == "RPAR" and "RPAR" not in names:
        message = f"found ')' without a matching '(' — expected {expected}"
    else:
        message = f"found {found} where {expected} was expected"
    return errors.QueryError(
        message,
        line=line,
        column=column,
        found="end of text" if at_end else str(token.value),
        expected=(expected,),
        text=text,
    )
