"""Every error flowrunner raises, under one root, each with the HTTP status it answers.

    FlowrunnerError                      500  the root
    ├── QueryError (also a ValueError)   422  a condition or value that cannot be read;
    │   └── DurationError                422  carries line, column, found, expected
    ├── BindingError                     500  the application's binding does not fit its database
    ├── RowInvalid                       422  a flow or step row refused at write time
    ├── SnapshotBroken                   409  a stored row that broke after it was written
    ├── SchemaOutdated                   503  the engine's tables need `flowrunner migrate up`
    ├── LeaseLost                        409  a write under a lease this worker no longer holds
    ├── EventRejected                    422  an event of the wrong shape (with its field
    │                                         errors when the event has a shape);
    │                                    404  an unknown event, or one naming no record
    ├── RecordRejected                   422  a record or key the runner cannot take as given
    ├── OperatorError                    409  an operator action that cannot be done;
    │                                    404  one naming no run, flow or step (of the tenant);
    │                                    422  an id that is not one (``id_invalid``)
    ├── CommandRefused                   409  raised by an application command to refuse for good
    ├── CallbackRejected                 400  a signed callback's body that cannot be used;
    │                                    401  a bad signature or time; 404 an unknown
    │                                    inbound; 409 its key reused for another body;
    │                                    413 a body past 256 KB
    ├── StepRefused                      409  a code workflow's step refused (a 4xx, a refusal);
    │                                         raised into the workflow, which may catch it
    └── ExtraMissing                     500  an optional library not installed: names the
        (also a ModuleNotFoundError)          extra that brings it (`flowrunner[console]`)

``error.status_code`` is the status and ``error.code`` a stable word for programs;
``error.to_dict()`` is the body a web handler answers with: ``{"detail": sentence,
"code": ...}``, and for ``RowInvalid`` the list FastAPI and pydantic users know
(``{"detail": [{"loc": [...], "msg": ..., "type": ...}]}``). ``flowrunner.web`` installs
handlers that answer with them.

Messages are sentences a business user can act on; nothing lark- or driver-specific
escapes through this hierarchy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from flowrunner.foundations import shapes


class FlowrunnerError(Exception):
    """The root of every error flowrunner raises on purpose.

    >>> error = OperatorError("run 7 has already ended (done)")
    >>> error.status_code, error.to_dict()
    (409, {'detail': 'run 7 has already ended (done)', 'code': 'operator_refused'})
    """

    status_code: int = 500
    """The HTTP status a web handler answers this error with."""
    code: str = "flowrunner_error"
    """A stable word for programs (the sentence may change; the code does not)."""

    def __init__(
        self, *args: object, status_code: int | None = None, code: str | None = None
    ) -> None:
        # Where it is raised, an error may answer otherwise than its class: 404 for a
        # run or an event's record that does not exist.
        super().__init__(*args)
        if status_code is not None:
            self.status_code = status_code
        if code is not None:
            self.code = code

    def to_dict(self) -> shapes.JsonDict:
        """The body of the HTTP answer: the sentence and the code."""
        return {"detail": str(self), "code": self.code}


class QueryError(FlowrunnerError, ValueError):
    """A condition (or a value, or a duration) that cannot be read.

    ``line`` and ``column`` are 1-based; ``found`` is what stood there and
    ``expected`` what would have fitted. ``str(error)`` is one sentence such as
    ``line 1, column 12: expected a value after '=', found end of text``; ``to_dict()``
    adds the position, so an editor can point at it.
    """

    status_code = 422
    code = "query_invalid"

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

    def to_dict(self) -> shapes.JsonDict:
        return {
            **super().to_dict(),
            "line": self.line,
            "column": self.column,
            "found": self.found,
            "expected": list(self.expected),
        }


class DurationError(QueryError):
    """A duration such as ``2 dayz`` that cannot be read."""

    code = "duration_invalid"


class BindingError(FlowrunnerError):
    """The binding does not fit the application's database; raised at startup."""

    code = "binding_invalid"


@dataclass(frozen=True)
class FieldError:
    """One problem with one field of a row, as a sentence for a business user."""

    field: str
    message: str
    code: str

    def to_dict(self, *, loc_prefix: Sequence[str | int] = ("body",)) -> shapes.JsonDict:
        return {"loc": [*loc_prefix, self.field], "msg": self.message, "type": self.code}


class RowInvalid(FlowrunnerError):
    """A flow or step row refused at write time, with every problem at once.

    ``status_code`` is 422 and ``to_dict()`` has the shape FastAPI and pydantic
    users know: ``{"detail": [{"loc": [...], "msg": ..., "type": ...}]}``.
    """

    status_code = 422
    code = "row_invalid"

    def __init__(self, errors: Sequence[FieldError], *, row: str | None = None) -> None:
        self.errors = list(errors)
        self.row = row
        head = f"{row}: " if row else ""
        body = "; ".join(f"{e.field}: {e.message}" for e in self.errors)
        super().__init__(f"{head}{body}")

    def to_dict(self) -> shapes.JsonDict:
        return {"detail": [e.to_dict() for e in self.errors]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)


class SnapshotBroken(FlowrunnerError):
    """A stored flow or step row that no longer fits the binding (one sentence naming it)."""

    status_code = 409
    code = "snapshot_broken"


class SchemaOutdated(FlowrunnerError):
    """The engine's tables are missing or behind; the message names the command to run."""

    status_code = 503
    code = "schema_outdated"


class LeaseLost(FlowrunnerError):
    """A worker tried to write under a lease (or fencing epoch) it no longer holds."""

    status_code = 409
    code = "lease_lost"


class EventRejected(FlowrunnerError):
    """An event with an unknown name, a wrong shape, or naming no record.

    422 (``event_rejected``) for a payload of the wrong shape; 404 for an unknown event
    (``event_unknown``) or one naming a record that does not exist (``record_unknown``).
    A payload that breaks its event's declared shape is 422 ``event_invalid`` with every
    problem in ``errors`` (``FieldError``s), and ``to_dict()`` in the shape FastAPI and
    pydantic users know, as ``RowInvalid``'s.

    >>> error = EventRejected("po.decided: decision: should be 'approved' or 'rejected'",
    ...     errors=[FieldError("decision", "should be 'approved' or 'rejected'", "literal_error")])
    >>> error.to_dict()["detail"][0]["loc"], error.code
    (['body', 'decision'], 'event_invalid')
    """

    status_code = 422
    code = "event_rejected"

    def __init__(
        self,
        *args: object,
        status_code: int | None = None,
        code: str | None = None,
        errors: Sequence[FieldError] = (),
    ) -> None:
        self.errors = list(errors)
        if self.errors and code is None:
            code = "event_invalid"
        super().__init__(*args, status_code=status_code, code=code)

    def to_dict(self) -> shapes.JsonDict:
        if not self.errors:
            return super().to_dict()
        return {"detail": [e.to_dict() for e in self.errors], "code": self.code}


class RecordRejected(FlowrunnerError):
    """A record handed to the runner without its key (or tenant), or a key its column
    cannot hold (``"007"`` for an integer key); ``expected`` says what to send instead."""

    status_code = 422
    code = "record_rejected"

    def __init__(self, message: str, *, value: object = None, expected: str = "") -> None:
        self.value = value
        self.expected = expected
        super().__init__(message)


class OperatorError(FlowrunnerError):
    """An operator action that cannot be done (unknown run, wrong state, other tenant).

    409 (``operator_refused``) for an action the run's state forbids; 404 for a run, flow
    or step that does not exist, or is another tenant's (``run_unknown``,
    ``flow_unknown``, ``step_unknown``); 422 (``id_invalid``) for an id that is not one
    (``flowrunner.foundations.ids``: a whole number from 1 to 2**63 - 1).
    """

    status_code = 409
    code = "operator_refused"


class CommandRefused(FlowrunnerError):
    """Raised by an application command to refuse for good: the step fails at once."""

    status_code = 409
    code = "command_refused"


class CallbackRejected(FlowrunnerError):
    """A signed callback refused: its HTTP status says why (the answer is the status alone).

    400 (``callback_unreadable``) for a body that cannot be read or used, 401
    (``callback_unsigned``) for a bad signature or time, 404 (``inbound_unknown``) for an
    inbound of no such name, 409 (``callback_conflict``) for a key already used for
    another body, 413 (``callback_too_large``) for a body past 256 KB.
    """

    status_code = 400
    code = "callback_unreadable"


class StepRefused(FlowrunnerError):
    """A code workflow's step was refused for good: a command refused, or a connection
    answered 4xx. Raised into the workflow at its ``await``; the workflow may catch it
    (``except StepRefused as refused: refused.step, refused.status``). Uncaught, it fails
    the run with its sentence.
    """

    status_code = 409
    code = "step_refused"

    def __init__(self, message: str, *, step: str = "", status: int | None = None) -> None:
        self.step = step
        """The refused step's name."""
        self.status = status
        """The HTTP status of a refused call (``404``), or None for a command's refusal."""
        super().__init__(message)


class ExtraMissing(FlowrunnerError, ModuleNotFoundError):
    """A part of flowrunner was used without the optional library it needs; the message
    is one line naming the extra to install (``pip install 'flowrunner[console]'``).

    Also a ``ModuleNotFoundError`` (``name`` is the missing module), so code that catches
    that goes on catching it.

    >>> error = ExtraMissing("the console", module="jinja2", extra="console")
    >>> str(error)
    "the console needs jinja2, which is not installed: pip install 'flowrunner[console]'"
    >>> isinstance(error, ModuleNotFoundError), error.name, error.extra
    (True, 'jinja2', 'console')
    """

    code = "extra_missing"

    def __init__(self, what: str, *, module: str, extra: str) -> None:
        self.extra = extra
        super().__init__(
            f"{what} needs {module}, which is not installed: pip install 'flowrunner[{extra}]'"
        )
        self.name = module
