"""The shapes of the values that pass between flowrunner's layers, each named once.

Most of what flowrunner moves is typed exactly: a run's row, a history line, a step of a
snapshot. A few values are the application's or the database's, whatever they hold: a
record's columns, an event's payload, a command's answer, a run's state. Their values
are of any type the database or the application chose, so ``Any`` is kept there — but a
signature names which of them it takes or gives, by these names:

- ``Row``: a row's columns as read or typed — a record, a flow or step row, a form's
  fields: column name → value;
- ``RowDict``: the same, as a fresh ``dict`` the receiver may change;
- ``Payload``: a JSON object as given — an event's payload, a command's answer, a run's
  state, an error envelope;
- ``JsonDict``: the same, as a fresh ``dict`` (what ``payloads.plain`` returns);
- ``Json``: one JSON value as stored, of whatever shape its reader expects (a command's
  answer kept for its idempotency key, a history line's detail);
- ``Plain``: one value of JSON that is no container: text, a number, a flag or null.

And the names every layer passes: a record's key (``RecordId``), its tenant (``Tenant``)
and a step's kind (``StepKind``). ``flowrunner.binding``, which judges them, hands them
out too.

A value only passed on, never looked into, is typed ``object``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

Row: TypeAlias = Mapping[str, Any]
RowDict: TypeAlias = dict[str, Any]
Payload: TypeAlias = Mapping[str, Any]
JsonDict: TypeAlias = dict[str, Any]
Json: TypeAlias = Any
Plain: TypeAlias = str | int | float | bool | None

# A record's key as the application passes it: its key column's value (runs keep it as text).
RecordId: TypeAlias = int | str
# A tenant as the application passes it: its tenant column's value; None without tenants.
Tenant: TypeAlias = str | int | None
# A step's kind as a flow names it: a built-in kind in its one spelling (``set``,
# ``waitFor``; ``flows.spelling.canonical_kind``) or one of the binding's ``kinds``.
StepKind: TypeAlias = str

__all__ = [
    "Json",
    "JsonDict",
    "Payload",
    "Plain",
    "RecordId",
    "Row",
    "RowDict",
    "StepKind",
    "Tenant",
]
