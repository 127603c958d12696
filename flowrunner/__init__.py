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

Each public name is imported when it is first used (``__getattr__``), so that ``import
flowrunner`` — and the command line, which starts from it — loads none of SQLAlchemy,
Alembic, pydantic or the diagrams until something asks for them.
"""

from __future__ import annotations

import importlib
import typing

from flowrunner import moved

if typing.TYPE_CHECKING:
    from flowrunner.authority.grants import Principal, Role
    from flowrunner.binding import At, Event, FlowBinding, Kind, NotifyRule
    from flowrunner.diagrams import Diagram
    from flowrunner.engine.commands import Command, CommandContext
    from flowrunner.engine.feed import EventPage
    from flowrunner.engine.operations import RunQuery
    from flowrunner.engine.server_parts import ServerParts
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
    from flowrunner.flows.trial.result import (
        TryCommand,
        TryEnd,
        TryLine,
        TryNotice,
        TryResult,
        TrySet,
    )
    from flowrunner.flows.trial.script import Answer, Change, Refusal
    from flowrunner.foundations.durations import Duration, parse_duration
    from flowrunner.foundations.limits import Limit
    from flowrunner.foundations.retry_policy import RetryPolicy
    from flowrunner.foundations.sqltypes import UTCDateTime
    from flowrunner.foundations.statuses import LaneStatus, RunStatus
    from flowrunner.inbound.endpoints import Inbound
    from flowrunner.inbound.mail import MailInbound
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
    "Event",
    "EventPage",
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
    "Limit",
    "LogRow",
    "MailInbound",
    "Manual",
    "NoticeRow",
    "NotifyRule",
    "OnEvent",
    "OperatorError",
    "Plan",
    "Principal",
    "QueryError",
    "RecordRejected",
    "Refusal",
    "RetryPolicy",
    "Role",
    "RowInvalid",
    "RunQuery",
    "RunRow",
    "RunStatus",
    "SchemaOutdated",
    "ServerParts",
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

# public name -> the module it lives in, imported on first use.
_EXPORTS: dict[str, str] = {
    "annotations": "__future__",
    "Principal": "flowrunner.authority.grants",
    "Role": "flowrunner.authority.grants",
    "At": "flowrunner.binding",
    "Event": "flowrunner.binding",
    "FlowBinding": "flowrunner.binding",
    "Kind": "flowrunner.binding",
    "NotifyRule": "flowrunner.binding",
    "Diagram": "flowrunner.diagrams",
    "Command": "flowrunner.engine.commands",
    "CommandContext": "flowrunner.engine.commands",
    "EventPage": "flowrunner.engine.feed",
    "RunQuery": "flowrunner.engine.operations",
    "ServerParts": "flowrunner.engine.server_parts",
    "BindingError": "flowrunner.errors",
    "CallbackRejected": "flowrunner.errors",
    "CommandRefused": "flowrunner.errors",
    "DurationError": "flowrunner.errors",
    "EventRejected": "flowrunner.errors",
    "FieldError": "flowrunner.errors",
    "FlowrunnerError": "flowrunner.errors",
    "LeaseLost": "flowrunner.errors",
    "OperatorError": "flowrunner.errors",
    "QueryError": "flowrunner.errors",
    "RecordRejected": "flowrunner.errors",
    "RowInvalid": "flowrunner.errors",
    "SchemaOutdated": "flowrunner.errors",
    "SnapshotBroken": "flowrunner.errors",
    "StepRefused": "flowrunner.errors",
    "Awaits": "flowrunner.flows.interpreter.waits",
    "Waiting": "flowrunner.flows.interpreter.waits",
    "FlowSnapshot": "flowrunner.flows.snapshot",
    "FlowSpec": "flowrunner.flows.snapshot",
    "StepSpec": "flowrunner.flows.snapshot",
    "TryCommand": "flowrunner.flows.trial.result",
    "TryEnd": "flowrunner.flows.trial.result",
    "TryLine": "flowrunner.flows.trial.result",
    "TryNotice": "flowrunner.flows.trial.result",
    "TryResult": "flowrunner.flows.trial.result",
    "TrySet": "flowrunner.flows.trial.result",
    "Answer": "flowrunner.flows.trial.script",
    "Change": "flowrunner.flows.trial.script",
    "Refusal": "flowrunner.flows.trial.script",
    "Duration": "flowrunner.foundations.durations",
    "parse_duration": "flowrunner.foundations.durations",
    "RetryPolicy": "flowrunner.foundations.retry_policy",
    "Limit": "flowrunner.foundations.limits",
    "UTCDateTime": "flowrunner.foundations.sqltypes",
    "LaneStatus": "flowrunner.foundations.statuses",
    "RunStatus": "flowrunner.foundations.statuses",
    "Inbound": "flowrunner.inbound.endpoints",
    "MailInbound": "flowrunner.inbound.mail",
    "Hmac": "flowrunner.inbound.signing",
    "Jobs": "flowrunner.jobs.program",
    "Emitted": "flowrunner.jobs.spec",
    "Job": "flowrunner.jobs.spec",
    "Plan": "flowrunner.jobs.spec",
    "ColumnType": "flowrunner.query",
    "Condition": "flowrunner.query",
    "parse": "flowrunner.query",
    "parse_value": "flowrunner.query",
    "FlowRunner": "flowrunner.runner",
    "flow_runner": "flowrunner.runner",
    "NoticeRow": "flowrunner.store.events",
    "LogRow": "flowrunner.store.runs",
    "RunRow": "flowrunner.store.runs",
    "Connection": "flowrunner.workflows",
    "Manual": "flowrunner.workflows",
    "OnEvent": "flowrunner.workflows",
    "Workflows": "flowrunner.workflows",
}


def __getattr__(name: str) -> typing.Any:
    """A public name, imported from its module on first use; a submodule, imported."""
    if name == "__version__":
        version = _version()
        globals()[name] = version
        return version
    home = _EXPORTS.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value
    if not name.startswith("__"):
        # ``import flowrunner`` then ``flowrunner.errors.X``, as when every module loaded.
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("flowrunner")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"
