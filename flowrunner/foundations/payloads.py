"""What an event's payload (or a command's answer) may hold: the JSON both databases store.

``plain(payload)`` checks a payload whole before anything is written and returns it as
the store keeps it, or raises ``NotPlain`` naming the field and what to send instead
(the runner turns it into ``EventRejected``). What web payloads carry is converted by
pydantic's JSON conversion (``pydantic_core.to_jsonable_python``), as FastAPI would
answer it: a ``Decimal`` becomes its text (``"1.50"``, every digit kept), a ``date``,
``datetime``, ``time`` or ``timedelta`` its ISO 8601 text, a ``UUID`` its text, an enum
its value, a pydantic model or a dataclass its fields. A naive datetime is taken to be
UTC first. The limits, the same on SQLite and PostgreSQL:

- a mapping whose names are text; a list or tuple (kept as a list);
- text without the character ``\\x00`` (PostgreSQL refuses it) and without lone
  surrogates (they are not UTF-8);
- whole numbers from ``-2**63`` to ``2**63 - 1``, what a 64-bit integer holds
  (``MIN_INT``, ``MAX_INT``);
- finite numbers: no NaN, no infinities (JSON has no way to write them), as floats or
  as Decimals;
- ``True``, ``False`` and ``None``;
- containers nested at most ``MAX_DEPTH`` (32) deep: the payload itself is depth 1.

Refused rather than guessed at: bytes (text or base64?) and sets (in which order?),
and whatever pydantic cannot convert (an arbitrary object): send text or a number.

>>> from datetime import date
>>> from decimal import Decimal
>>> plain({"order": 7, "lines": ({"qty": 2.5, "price": Decimal("9.90")},), "on": date(2026, 3, 2)})
{'order': 7, 'lines': [{'qty': 2.5, 'price': '9.90'}], 'on': '2026-03-02'}
>>> plain({"price": float("nan")})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
flowrunner.foundations.payloads.NotPlain: field 'price' is NaN, which cannot be stored: ...
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pydantic_core

from flowrunner.foundations import shapes

MAX_DEPTH = 32
"""How deep containers may nest in a payload (the payload itself is depth 1)."""
MIN_INT = -(2**63)
"""The smallest whole number a payload may hold (a 64-bit integer's)."""
MAX_INT = 2**63 - 1
"""The largest whole number a payload may hold (a 64-bit integer's)."""


class NotPlain(ValueError):
    """A payload the store cannot keep as it is; the message names the field."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        shown = quote(field, 80)
        super().__init__(f"field {shown} {problem}" if field else f"the payload {problem}")


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored (``\\x00``, a lone surrogate), or None if it can.

    >>> text_problem("ok") is None
    True
    >>> text_problem("a\\x00b")
    'contains the character \\\\x00, which cannot be stored'
    """
    if "\x00" in text:
        return "contains the character \\x00, which cannot be stored"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate, which is not text (not UTF-8)"
    return None


def quote(value: object, limit: int = 40) -> str:
    """``repr(value)``, cut to ``limit`` characters for a message."""
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def plain(payload: shapes.Payload) -> shapes.JsonDict:
    """The payload as the store keeps it; ``NotPlain`` names the first field it cannot."""
    if not isinstance(payload, Mapping):
        raise NotPlain("", "must be a mapping of names to values")
    return _mapping(payload, "", 1)


def plain_json(value: object) -> shapes.Json:
    """``plain`` for a JSON value of any shape — a mapping, a list, a text, a number — such
    as a callback's parsed body: the same limits, the value itself at depth 1.

    >>> plain_json([{"id": "evt_1"}, 7])
    [{'id': 'evt_1'}, 7]
    >>> plain_json(["ok", {"note": "a\\x00"}])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    flowrunner.foundations.payloads.NotPlain: field '[1].note' contains the character \\x00, ...
    """
    return _value(value, "", 0)


def _mapping(value: Mapping[Any, object], path: str, depth: int) -> shapes.JsonDict:
    if depth > MAX_DEPTH:
        raise NotPlain(
            path, f"nests deeper than {MAX_DEPTH} levels, which cannot be stored: send it flatter"
        )
    kept: shapes.JsonDict = {}
    for name, item in value.items():
        if not isinstance(name, str):
            raise NotPlain(
                path, f"has the name {quote(name)}, which is not text: names must be text"
            )
        problem = text_problem(name)
        if problem is not None:
            raise NotPlain(path, f"has a name that {problem}: send names of plain text")
        kept[str.__str__(name)] = _value(item, f"{path}.{name}" if path else name, depth)
    return kept


def _value(value: object, path: str, depth: int) -> object:
    # bool before int: True is an int to Python, and stays a boolean here.
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):  # a str enum too: its value
        problem = text_problem(value)
        if problem is not None:
            raise NotPlain(path, f"{problem}: send text without it")
        return str.__str__(value)
    if isinstance(value, int):  # an int enum too: its value
        if not MIN_INT <= value <= MAX_INT:
            raise NotPlain(
                path,
                f"is a whole number beyond {MIN_INT}..{MAX_INT}, which cannot be stored: "
                "send it as text",
            )
        return int(value)
    if isinstance(value, float | Decimal):
        _finite(value, path)
        if isinstance(value, float):
            return float(value)
    if isinstance(value, Mapping):
        return _mapping(value, path, depth + 1)
    if isinstance(value, list | tuple):
        if depth + 1 > MAX_DEPTH:
            raise NotPlain(
                path,
                f"nests deeper than {MAX_DEPTH} levels, which cannot be stored: send it flatter",
            )
        return [_value(item, f"{path}[{index}]", depth + 1) for index, item in enumerate(value)]
    if isinstance(value, datetime) and value.tzinfo is None:
        value = value.replace(tzinfo=UTC)  # naive means UTC, as everywhere in flowrunner
    if isinstance(value, bytes | bytearray | memoryview | set | frozenset):
        converted = _UNCONVERTED
    else:
        converted = _jsonable(value)
    if converted is _UNCONVERTED:
        raise NotPlain(
            path,
            f"is of type {type(value).__name__} ({quote(value)}), which is not plain data: "
            "send text, a number, true/false, null, a list or a mapping",
        )
    # What pydantic made of it is plain JSON, checked by the same limits (a model's
    # fields may hold a NaN or nest too deep); it is never converted twice.
    return _value(converted, path, depth)


_UNCONVERTED = object()


def _jsonable(value: object) -> object:
    """Pydantic's JSON form of ``value`` (``_UNCONVERTED`` when it has none)."""
    try:
        return pydantic_core.to_jsonable_python(value)
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError):
        return _UNCONVERTED


def _finite(value: float | Decimal, path: str) -> None:
    if isinstance(value, Decimal):
        nan, infinite = value.is_nan(), value.is_infinite()
    else:
        nan, infinite = math.isnan(value), math.isinf(value)
    if nan:
        raise NotPlain(path, "is NaN, which cannot be stored: send a finite number, or null")
    if infinite:
        raise NotPlain(path, "is infinite, which cannot be stored: send a finite number, or null")


__all__ = [
    "MAX_DEPTH",
    "MAX_INT",
    "MIN_INT",
    "NotPlain",
    "plain",
    "plain_json",
    "quote",
    "text_problem",
]
