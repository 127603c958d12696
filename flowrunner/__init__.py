"""flowrunner: database rows that run as durable workflows over an application's records.

The public API::

    from flowrunner import FlowBinding, Kind, NotifyRule, flow_runner

    binding = FlowBinding(resource="ticket", flows_table="ticket_flow",
                          steps_table="ticket_flow_step", set_columns=["priority"])
    runner = flow_runner(binding, engine, commands={...})

Conditions: ``flowrunner.parse("status = open and amount > 1000")``; durations:
``flowrunner.parse_duration("1 day 4 hours")``; tests: ``flowrunner.testing.FlowDriver``.
Code workflows beside flows: ``Workflows``, ``OnEvent``, ``Manual``, ``Connection``
(``flowrunner.workflows``, docs/workflows.md).
"""

from __future__ import annotations

import importlib.metadata

from flowrunner import moved
from flowrunner.binding import At, FlowBinding, Kind, NotifyRule
from flowrunner.diagrams import Diagram
from flowrunner.engine.commands import Command, CommandContext
from flowrunner.engine.operations import RunQuery
from flowrunner.errors import (
    BindingError,
    CallbackRejected,
    CommandRefused,
    DurationError,
    EventRejected,
    FieldError,
    FlowrunnerError,
    LeaseLost,
    OperatorError,
    QueryError,
    RecordRejected,
    RowInvalid,
    SchemaOutdated,
    SnapshotBroken,
    StepRefused,
)
from flowrunner.flows.interpreter.waits import Awaits, Waiting
from flowrunner.flows.snapshot import FlowSnapshot, FlowSpec, StepSpec
from flowrunner.flows.trial.result import TryCommand, TryEnd, TryLine, TryNotice, TryResult, TrySet
from flowrunner.flows.trial.script import Answer, Change, Refusal
from flowrunner.foundations.durations import Duration, parse_duration
from flowrunner.foundations.retry_policy import RetryPolicy
from flowrunner.foundations.sqltypes import UTCDateTime
from flowrunner.foundations.statuses import LaneStatus, RunStatus
from flowrunner.inbound.endpoints import Inbound
from flowrunner.inbound.signing import Hmac
from flowrunner.jobs.program import Jobs
from flowrunner.jobs.spec import Emitted, Job, Plan
from flowrunner.query import ColumnType, Condition, parse, parse_value
from flowrunner.runner import FlowRunner, flow_runner
from flowrunner.store.events import NoticeRow
from flowrunner.store.runs import LogRow, RunRow
from flowrunner.workflows import Connection, Manual, OnEvent, Workflows

moved.install()

__all__ = [
    "Answer",
    "At",
    "Awaits",
    "BindingError",
    "CallbackRejected",
    "Change",
    "ColumnType",
    "Command",
    "CommandContext",
    "CommandRefused",
    "Condition",
    "Connection",
    "Diagram",
    "Duration",
    "DurationError",
    "Emitted",
    "EventRejected",
    "FieldError",
    "FlowBinding",
    "FlowRunner",
    "FlowSnapshot",
    "FlowSpec",
    "FlowrunnerError",
    "Hmac",
    "Inbound",
    "Job",
    "Jobs",
    "Kind",
    "LaneStatus",
    "LeaseLost",
    "LogRow",
    "Manual",
    "NoticeRow",
    "NotifyRule",
    "OnEvent",
    "OperatorError",
    "Plan",
    "QueryError",
    "RecordRejected",
    "Refusal",
    "RetryPolicy",
    "RowInvalid",
    "RunQuery",
    "RunRow",
    "RunStatus",
    "SchemaOutdated",
    "SnapshotBroken",
    "StepRefused",
    "StepSpec",
    "TryCommand",
    "TryEnd",
    "TryLine",
    "TryNotice",
    "TryResult",
    "TrySet",
    "UTCDateTime",
    "Waiting",
    "Workflows",
    "flow_runner",
    "parse",
    "parse_duration",
    "parse_value",
]

try:
    __version__ = importlib.metadata.version("flowrunner")
except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
