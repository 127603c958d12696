"""Lark's parse errors turned into sentences a business user can act on.

``translate`` is the only place that knows Lark's exception types; it names what was
found (a word, a symbol, or the end of text), what would have fitted there, and the
word it came after, e.g. ``expected a value after '=', found end of text``. Where the
text reads like another language's habit — ``==``, ``<>``, ``&&``, ``like``,
``between``, ``now`` without brackets, ``'it''s'`` — the sentence says how to write
it here (``_habit``).
"""

from __future__ import annotations

import difflib
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
    word = _WORDS.get(char)
    if char in "'\"":
        message = f"this text has no closing quote — end it with {char}"
    elif word is not None:
        at = exc.pos_in_stream or 0
        written = char * 2 if text[at + 1 : at + 2] == char else char
        message = f"'{written}' is not a word of conditions — write '{word}'"
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
    habit = None if at_end else _habit(token, names, before, text)
    if habit is not None:
        message, line, column = habit
    elif before and before.lower() == "in" and names == {"LPAR"}:
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


# A character of another language's "and" and "or" (``&&``, ``||``), and what to write.
_WORDS = {"&": "and", "|": "or"}
# Two comparison signs written together, and the one operator meant.
_PAIRS = {"==": "=", "<>": "!=", "=>": ">=", "=<": "<=", "!==": "!=", "=!": "!="}


def _habit(
    token: lark.Token, names: set[str], before: str | None, text: str
) -> tuple[str, int, int] | None:
    """The sentence (with its line and column) for a token that reads like another
    language's way of writing a condition, or None."""
    value, line, column = str(token.value), token.line or 1, token.column or 1
    word = value.lower()
    if before is None:
        return None
    joined = _joined(text, token, before)
    if token.type == "COMPARE" and joined:
        pair = before + value
        if pair in _PAIRS:
            # Pointed at where the pair begins, the way it was written.
            return (
                f"'{pair}' is not an operator — write '{_PAIRS[pair]}'",
                line,
                column - len(before),
            )
    if names == {"LPAR"} and before.lower() in ("now", "today"):
        name = before.lower()
        sign = value if value in ("+", "-") else "+"
        return (
            f"expected '(' after '{before}', found '{value}' — write {name}(), "
            f"e.g. {name}() {sign} 2 days",
            line,
            column,
        )
    if names & _OPERATOR and token.type == "NAME":
        if word == "like":
            return ("'like' is not an operator — use 'contains' or 'starts with'", line, column)
        if word == "between":
            return (
                f"'between' is not an operator — write e.g. {before} >= 1 and {before} <= 5",
                line,
                column,
            )
        if word == "does":
            return (
                f"to say 'does not contain', write not {before} contains …",
                line,
                column,
            )
    if word in ("contains", "starts") and before.lower() == "not" and "IN" in names:
        operator = "starts with" if word == "starts" else word
        head = text[: token.start_pos].rstrip()
        field = _TOKEN_BEFORE.search(head[: len(head) - len(before)])
        return (
            f"'not' goes before the column: write not {field.group(1) if field else '…'} "
            f"{operator} …",
            line,
            column,
        )
    meant_null = difflib.SequenceMatcher(None, word, "null").ratio() >= 0.6  # a typo of it
    if not meant_null and (
        names == {"NOT", "NULL"} or (names == {"NULL"} and before.lower() in ("is", "not"))
    ):
        sign = "!=" if before.lower() == "not" else "="
        return (
            f"found '{value}' where 'null' was expected — 'is' only tests for null; "
            f"compare a value with '{sign}'",
            line,
            column,
        )
    if token.type == "STRING" and joined and before[:1] == value[:1] and before[:1] in "'\"":
        quote = value[:1]
        other = '"' if quote == "'" else "'"
        return (
            f"a text ends at its second {quote} — to put {quote} inside it, write "
            f"\\{quote}, or enclose the text in {other}",
            line,
            column,
        )
    return None


def _joined(text: str, token: lark.Token, before: str) -> bool:
    """Whether ``token`` follows ``before`` with nothing between them."""
    start = token.start_pos
    if start is None or start < len(before):
        return False
    return text[start - len(before) : start] == before
