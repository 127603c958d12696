"""What a try of a flow shows: the path it takes, the values it sets, the notices it would
send, the commands it would run, and where it ends — typed, with ``to_dict()`` for JSON.

``FlowRunner.try_flow`` returns a ``TryResult``; nothing in it happened outside the try.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal

from flowrunner.foundations import shapes, statuses
from flowrunner.foundations.shapes import StepKind


def _plain(value: object) -> object:
    """A record value as JSON holds it: a Decimal as its text, a moment as ISO 8601."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


def _at(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


@dataclass(frozen=True)
class TryLine:
    """One line of the history the run would have: when (on the flow's clock), at which
    step, its code (``what``: ``started``, ``set``, ``answered``, ...) and its sentence."""

    at: datetime
    position: int | None
    step: str | None
    """The step's title (its kind, untitled); None for a line about the whole run."""
    kind: StepKind | None
    what: str
    sentence: str

    def to_dict(self) -> shapes.JsonDict:
        return {
            "at": _at(self.at),
            "position": self.position,
            "step": self.step,
            "kind": self.kind,
            "what": self.what,
            "sentence": self.sentence,
        }


@dataclass(frozen=True)
class TrySet:
    """A value a set step would write: the record's ``field`` from ``before`` to ``after``."""

    at: datetime
    position: int | None
    step: str | None
    field: str
    before: object
    after: object

    def to_dict(self) -> shapes.JsonDict:
        return {
            "at": _at(self.at),
            "position": self.position,
            "step": self.step,
            "field": self.field,
            "before": _plain(self.before),
            "after": _plain(self.after),
        }


@dataclass(frozen=True)
class TryNotice:
    """A notice a notify step would write to the outbox (``problem``: why nobody could get
    it, as a sentence, when the recipient's column is empty)."""

    at: datetime
    position: int | None
    step: str | None
    audience: str
    recipient: str | None
    title: str | None
    message: str
    email: bool = False
    problem: str | None = None

    @property
    def deliverable(self) -> bool:
        return self.problem is None

    def to_dict(self) -> shapes.JsonDict:
        return {
            "at": _at(self.at),
            "position": self.position,
            "step": self.step,
            "audience": self.audience,
            "recipient": self.recipient,
            "title": self.title,
            "message": self.message,
            "email": self.email,
            "deliverable": self.deliverable,
            "problem": self.problem,
        }


@dataclass(frozen=True)
class TryCommand:
    """A command the run would run — shown, never run. ``answer`` is what the try took it
    to answer (``{"asked": [...]}`` for a step that asks people); ``refused`` the reason,
    where the script said it refuses (or the runner's ``authorize`` would refuse it)."""

    at: datetime
    position: int | None
    step: str | None
    command: str
    inputs: shapes.Payload = field(default_factory=dict)
    attempt: int = 1
    reminder: int | None = None
    cancel: bool = False
    answer: shapes.Payload = field(default_factory=dict)
    refused: str | None = None

    @property
    def sentence(self) -> str:
        """``Would run send_purchase_order`` (``, refused: ...`` where it refuses)."""
        said = f"Would run {self.command}"
        if self.reminder is not None:
            said += f" (reminder {self.reminder})"
        elif self.attempt > 1:
            said += f" again (attempt {self.attempt})"
        return f"{said}, refused: {self.refused}" if self.refused else said

    def to_dict(self) -> shapes.JsonDict:
        return {
            "at": _at(self.at),
            "position": self.position,
            "step": self.step,
            "command": self.command,
            "inputs": _plain(dict(self.inputs)),
            "attempt": self.attempt,
            "reminder": self.reminder,
            "cancel": self.cancel,
            "answer": _plain(dict(self.answer)),
            "refused": self.refused,
            "sentence": self.sentence,
        }


@dataclass(frozen=True)
class TryEnd:
    """Where the run stands when the try ends: ``status`` (done, failed or cancelled at
    ``at``; waiting or running at the end of the try), a sentence, and for an open run
    the steps it waits at, each a sentence."""

    status: statuses.RunStatus
    at: datetime
    sentence: str
    waiting: tuple[str, ...] = ()

    @property
    def ended(self) -> bool:
        return self.status in statuses.ENDED

    def to_dict(self) -> shapes.JsonDict:
        return {
            "status": self.status.value,
            "ended": self.ended,
            "at": _at(self.at),
            "sentence": self.sentence,
            "waiting": list(self.waiting),
        }


@dataclass(frozen=True)
class TryResult:
    """A try of a flow on one record: nothing of it left the try.

    ``lines`` is the path, step by step, each line with its sentence; ``values`` the
    values its set steps would write; ``notices`` what it would tell; ``commands`` what
    it would run; ``end`` where it stands at the end. ``condition_held`` says whether
    the flow's condition holds for the record (None: the flow has none); the try runs
    the flow either way.
    """

    flow: str
    record_id: str
    started_at: datetime
    until: datetime
    condition_held: bool | None
    lines: tuple[TryLine, ...]
    values: tuple[TrySet, ...]
    notices: tuple[TryNotice, ...]
    commands: tuple[TryCommand, ...]
    end: TryEnd
    tenant: str | None = None

    @property
    def path(self) -> tuple[str, ...]:
        """The steps it goes through, in order: ``'Manager approval' (10)`` once per pass."""
        return tuple(
            f"{line.step} ({line.position})" for line in self.lines if line.what == "started"
        )

    def to_dict(self) -> shapes.JsonDict:
        return {
            "flow": self.flow,
            "record_id": self.record_id,
            "tenant": self.tenant,
            "started_at": _at(self.started_at),
            "until": _at(self.until),
            "condition_held": self.condition_held,
            "path": list(self.path),
            "lines": [line.to_dict() for line in self.lines],
            "values": [value.to_dict() for value in self.values],
            "notices": [notice.to_dict() for notice in self.notices],
            "commands": [command.to_dict() for command in self.commands],
            "end": self.end.to_dict(),
        }
