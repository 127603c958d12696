"""flowrunner: database rows that run as durable workflows over an application's records."""

from __future__ import annotations

from flowrunner.errors import (
    BindingError,
    CommandRefused,
    DurationError,
    EventRejected,
    FieldError,
    FlowrunnerError,
    LeaseLost,
    OperatorError,
    QueryError,
    RowInvalid,
    SchemaOutdated,
    SnapshotBroken,
)
from flowrunner.snapshot import FlowSnapshot, FlowSpec, StepSpec

__all__ = [
    "BindingError",
    "CommandRefused",
    "DurationError",
    "EventRejected",
    "FieldError",
    "FlowSnapshot",
    "FlowSpec",
    "FlowrunnerError",
    "LeaseLost",
    "OperatorError",
    "QueryError",
    "RowInvalid",
    "SchemaOutdated",
    "SnapshotBroken",
    "StepSpec",
]
