"""Every error flowrunner raises, under one root.

    FlowrunnerError
    ├── QueryError (also a ValueError)      a condition or value that cannot be read;
    │   └── DurationError                   carries line, column, found, expected
    ├── BindingError                        the application's binding does not fit its database
    ├── RowInvalid                          a flow or step row refused at write time (422)
    ├── SnapshotBroken                      a stored row that broke after it was written
    ├── SchemaOutdated                      the engine's tables need `flowrunner migrate up`
    ├── LeaseLost                           a write under a lease this worker no longer holds
    ├── EventRejected                       an event that names no record or is unknown
    ├── RecordRejected                      a record or key the runner cannot take as given
    ├── OperatorError                       an operator action that cannot be done
    └── CommandRefused                      raised by an application command to refuse for good

Messages are sentences a business user can act on; nothing lark- or driver-specific
escapes through this hierarchy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class FlowrunnerError(Exception):
    """The root of every error flowrunner raises on purpose."""


class QueryError(FlowrunnerError, ValueError):
    """A condition (or a value, or a duration) that cannot be read.

    ``line`` and ``column`` are 1-based; ``found`` is what stood there and
    ``expected`` what would have fitted. ``str(error)`` is one sentence such as
    ``line 1, column 12: expected a value after '=', found end of text``.
    """

    def __init__(
        self,
        message: str,
        *,
        line: int = 1,
        column: int = 1,
        found: str | None = None,
        expected: Sequence[str] = (),
        text: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.found = found
        self.expected = tuple(expected)
        self.text = text
        super().__init__(f"line {line}, column {column}: {message}")

    def context(self, span: int = 30) -> str:
        """The offending line with a caret under the column, for terminals."""
        if self.text is None:
            return ""
        lines = self.text.splitlines() or [""]
        row = lines[min(self.line, len(lines)) - 1]
        start = max(0, self.column - 1 - span)
        snippet = row[start : self.column - 1 + span]
        return f"{snippet}\n{' ' * (self.column - 1 - start)}^"


class DurationError(QueryError):
    """A duration such as ``2 dayz`` that cannot be read."""


class BindingError(FlowrunnerError):
    """The binding does not fit the application's database; raised at startup."""


@dataclass(frozen=True)
class FieldError:
    """One problem with one field of a row, as a sentence for a business user."""

    field: str
    message: str
    code: str

    def to_dict(self, *, loc_prefix: Sequence[str | int] = ("body",)) -> dict[str, Any]:
        return {"loc": [*loc_prefix, self.field], "msg": self.message, "type": self.code}


class RowInvalid(FlowrunnerError):
    """A flow or step row refused at write time, with every problem at once.

    ``status_code`` is 422 and ``to_dict()`` has the shape FastAPI and pydantic
    users know: ``{"detail": [{"loc": [...], "msg": ..., "type": ...}]}``.
    """

    status_code = 422

    def __init__(self, errors: Sequence[FieldError], *, row: str | None = None) -> None:
        self.errors = list(errors)
        self.row = row
        head = f"{row}: " if row else ""
        body = "; ".join(f"{e.field}: {e.message}" for e in self.errors)
        super().__init__(f"{head}{body}")

    def to_dict(self) -> dict[str, Any]:
        return {"detail": [e.to_dict() for e in self.errors]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)


class SnapshotBroken(FlowrunnerError):
    """A stored flow or step row that no longer fits the binding (one sentence naming it)."""


class SchemaOutdated(FlowrunnerError):
    """The engine's tables are missing or behind; the message names the command to run."""


class LeaseLost(FlowrunnerError):
    """A worker tried to write under a lease (or fencing epoch) it no longer holds."""


class EventRejected(FlowrunnerError):
    """An event with an unknown name, a wrong shape, or naming no record."""


class RecordRejected(FlowrunnerError):
    """A record handed to the runner without its key (or tenant), or a key its column
    cannot hold (``"007"`` for an integer key); ``expected`` says what to send instead."""

    def __init__(self, message: str, *, value: Any = None, expected: str = "") -> None:
        self.value = value
        self.expected = expected
        super().__init__(message)


class OperatorError(FlowrunnerError):
    """An operator action that cannot be done (unknown run, wrong state, other tenant)."""


class CommandRefused(FlowrunnerError):
    """Raised by an application command to refuse for good: the step fails at once."""
