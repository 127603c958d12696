"""What an advance asks the driver to do, in order, inside the run's transaction.

Effects are plain frozen values: the interpreter decides, the worker applies. Every
advance ends with exactly one ``Wake`` saying when the run is next due.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

from flowrunner.foundations import shapes
from flowrunner.foundations.shapes import StepKind

# What a history line says beyond its code: plain values by name (``{"who": "bob",
# "received": 2, "needed": 3}``), or a short text on the lines with nothing more to say.
Detail: TypeAlias = shapes.Payload | str


@dataclass(frozen=True)
class SetField:
    """Write ``value`` (already resolved to its Python value) to the record's ``field``."""

    step_id: shapes.Plain
    field: str
    value: Any


@dataclass(frozen=True)
class Notify:
    """Tell ``audience`` the ``message``; the driver writes one notice per (run, step, pass).

    Everything is worked out already, from the record as the run sees it at the step:
    ``message`` and ``title`` are filled in, ``recipient`` is the value of the notify
    rule's ``to`` column. A notice nobody can receive (``recipient`` empty) is still
    written, as undeliverable: ``problem`` says why in a sentence.
    """

    step_id: shapes.Plain
    pass_: int
    audience: str
    message: str
    recipient: str | None = None
    title: str | None = None
    email: bool = False
    problem: str | None = None

    @property
    def deliverable(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class RunCommand:
    """Run an application command in the step's transaction, then advance with its result.

    ``key`` is stable across retries of one pass (``step-7/pass-1``,
    ``step-7/pass-1/remind-2`` for a reminder, ``step-7/pass-1/cancel`` for the kind's
    cancel command) and new after a refusal an operator retried
    (``step-7/pass-1/retry-1``); the driver prefixes the run id to make the
    idempotency key.
    ``reminder`` is the reminder's number, or ``None`` for the kind's own command;
    ``cancel`` marks the kind's cancel command, run once and never retried. The
    interpreter takes a reminder's or a cancel's answer as a history line only.

    ``at`` is the moment on the flow's clock the command stands for when that is not
    the driver's time: a reminder's planned time (one sent after an outage is late).
    The driver gives it to the command as its ``now``; ``None``: the driver's time.
    """

    key: str
    step_id: shapes.Plain
    pass_: int
    kind: StepKind
    command: str
    inputs: shapes.Payload
    attempt: int
    reminder: int | None = None
    cancel: bool = False
    at: datetime | None = None

    @classmethod
    def made(
        cls,
        key: str,
        step_id: shapes.Plain,
        pass_: int,
        kind: StepKind,
        command: str,
        inputs: shapes.Payload,
        attempt: int,
        reminder: int | None,
        cancel: bool,
        at: datetime | None,
    ) -> RunCommand:
        """``RunCommand(...)`` with every field given, made without the frozen class's
        ``object.__setattr__`` for each (an advance asks for many commands)."""
        command_ = object.__new__(cls)
        command_.__dict__.update(
            key=key,
            step_id=step_id,
            pass_=pass_,
            kind=kind,
            command=command,
            inputs=inputs,
            attempt=attempt,
            reminder=reminder,
            cancel=cancel,
            at=at,
        )
        return command_


@dataclass(frozen=True)
class Log:
    """One history line: ``what`` happened at a step (started, done, waiting, failed, ...).

    ``what`` is the code programs read; ``detail`` holds what a sentence needs
    (``flowrunner.history.flows`` renders the line in the flow's own words). ``at`` is
    the moment on the flow's own clock: when it happened for the flow (a wait's end is
    its timer, an arrival the event's time, a reminder when it was due), which may be
    earlier than when the worker did it.
    """

    position: int | None
    step_id: shapes.Plain
    title: str | None
    kind: StepKind | None
    pass_: int | None
    what: str
    detail: Detail = ""
    at: datetime | None = None

    @classmethod
    def made(
        cls,
        position: int | None,
        step_id: shapes.Plain,
        title: str | None,
        kind: StepKind | None,
        pass_: int | None,
        what: str,
        detail: Detail,
        at: datetime | None,
    ) -> Log:
        """``Log(...)`` with every field given, made without the frozen class's
        ``object.__setattr__`` for each (an advance writes many lines)."""
        line = object.__new__(cls)
        line.__dict__.update(
            position=position,
            step_id=step_id,
            title=title,
            kind=kind,
            pass_=pass_,
            what=what,
            detail=detail,
            at=at,
        )
        return line


@dataclass(frozen=True)
class StartSubflow:
    """Start the manual flow named ``flow`` as a child run of this one, on the run's
    record or (``record_id``) another, in the step's transaction, once under ``key``
    (``step-7/pass-1``); then advance with a ``CommandResult`` for ``key``: its answer
    ``{"run": <id>}``, or refused with why it could not start."""

    key: str
    step_id: shapes.Plain
    pass_: int
    flow: str
    record_id: str | None = None


@dataclass(frozen=True)
class CancelSubflow:
    """Cancel the child run ``run`` (and its own children) if it has not ended: the
    subflow step that waited for it stopped waiting, saying ``why``."""

    run: int
    why: str


@dataclass(frozen=True)
class Wake:
    """When the run is next due; ``None`` when only an event, a record change or an
    operator can move it (or it has ended)."""

    at: datetime | None


Effect = SetField | Notify | RunCommand | StartSubflow | CancelSubflow | Log | Wake
