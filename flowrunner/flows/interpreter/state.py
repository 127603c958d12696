"""A run's instance state: where it is, each lane at that position, and why it ended.

The snapshot is the spec; this is the instance (SpiffWorkflow's split). Statuses (named
in ``flowrunner.foundations.statuses``) move only along ``TRANSITIONS``: assigning ``status`` checks
the table and raises ``IllegalMove`` (a bug in the engine, never a user's mistake).
``to_dict``/``from_dict`` round-trip a running state through JSON for storage on the
run row, statuses as their plain words.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime

from flowrunner.flows.interpreter import happened
from flowrunner.foundations import shapes, statuses
from flowrunner.foundations.shapes import StepKind

_Run = statuses.RunStatus
_Lane = statuses.LaneStatus

# The one table of legal moves: (what, from) -> the statuses it may move to.
TRANSITIONS: Mapping[tuple[str, str], frozenset[str]] = {
    ("run", _Run.RUNNING): frozenset({_Run.WAITING, _Run.DONE, _Run.FAILED, _Run.CANCELLED}),
    ("run", _Run.WAITING): frozenset({_Run.RUNNING, _Run.DONE, _Run.FAILED, _Run.CANCELLED}),
    # An operator may retry a failed run, or cancel it.
    ("run", _Run.FAILED): frozenset({_Run.RUNNING, _Run.CANCELLED}),
    ("run", _Run.DONE): frozenset(),
    ("run", _Run.CANCELLED): frozenset(),
    ("lane", _Lane.READY): frozenset({_Lane.COMMANDING, _Lane.WAITING, _Lane.DONE, _Lane.FAILED}),
    ("lane", _Lane.COMMANDING): frozenset(
        {_Lane.WAITING, _Lane.RETRYING, _Lane.DONE, _Lane.FAILED}
    ),
    # A retrying step stops (done) when another step at its position takes its fault path.
    ("lane", _Lane.RETRYING): frozenset({_Lane.COMMANDING, _Lane.DONE, _Lane.FAILED}),
    ("lane", _Lane.WAITING): frozenset({_Lane.DONE, _Lane.FAILED}),
    ("lane", _Lane.FAILED): frozenset({_Lane.READY}),
    ("lane", _Lane.DONE): frozenset(),
}


class IllegalMove(RuntimeError):
    """A status change the transition table does not allow: an engine bug."""


def check_move(what: str, current: str, target: str) -> None:
    """Raise ``IllegalMove`` unless ``what`` may go from ``current`` to ``target``."""
    if current == target:
        return
    if target not in TRANSITIONS.get((what, current), frozenset()):
        raise IllegalMove(f"a {what} cannot move from '{current}' to '{target}'")


class _Guarded:
    """Reads every ``status`` assigned as its enum, and checks each after the first
    against ``TRANSITIONS`` (a word that is no status raises ValueError).

    The check sits on ``status`` alone (``_Status``, put on each class after its
    dataclass is made), so assigning any other field costs what it costs anywhere.
    """

    _what = ""
    _statuses: type[enum.StrEnum] = enum.StrEnum


class _Status:
    """The ``status`` of a ``_Guarded`` state: kept in the instance's ``__dict__``, each
    value assigned made its enum and, after the first, checked against ``TRANSITIONS``.

    It has no ``__get__`` on purpose: a descriptor with only ``__set__`` leaves reading
    to the instance's ``__dict__``, so ``lane.status`` costs what any attribute costs
    (the engine reads statuses far more often than it changes them).
    """

    def __set__(self, instance: _Guarded, value: str) -> None:
        if type(value) is not instance._statuses:
            value = instance._statuses(value)
        held = instance.__dict__
        current = held.get("status")
        if current is not None and current is not value:
            check_move(instance._what, current, value)
        held["status"] = value


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _moment(value: object) -> datetime | None:
    return None if value is None else datetime.fromisoformat(str(value))


# The outcome of a lane whose command refused (it failed the run).
REFUSED = "refused"
# The outcome of a lane another step at its position stopped by taking its fault path.
STOPPED = "stopped"

_MOMENTS = (
    "started_at",
    "waiting_since",
    "deadline",
    "timer",
    "next_remind_at",
    "retry_at",
    "finished_at",
    "escalate_at",
)


@dataclass
class LaneState(_Guarded):
    """One step at the current position, as it runs.

    Moments are on the flow's own clock: ``started_at`` is the step's logical start
    (when the position before it logically finished; its timers, give-up and reminders
    count from it), ``finished_at`` its logical finish. ``asked``/``received`` count
    what an app kind's command asked for and the answers that count (events, or with
    the kind's ``by`` distinct answerers); ``event`` is the latest that came.
    ``answerers`` are the distinct people who answered, in order, and ``asked_names``
    whom the command said it asked (empty when it answered only a number). ``pending``
    is the key of the command this lane awaits an answer to; ``reminding`` the
    reminder awaiting one. ``retried`` counts the refusals of this pass an operator
    retried: its commands' key says so (``Turn.key``), so an outside service that keeps
    its answers by key answers anew. ``escalate_at`` is when a waiting step that
    escalates tells its ``escalate_to``, and ``escalated`` whether it did (once a pass).
    ``child`` is the run a subflow step started and waits for.
    """

    _what = "lane"
    _statuses = statuses.LaneStatus

    step_id: shapes.Plain
    kind: StepKind
    pass_: int
    status: statuses.LaneStatus = statuses.LaneStatus.READY
    started_at: datetime | None = None
    waiting_since: datetime | None = None
    deadline: datetime | None = None
    timer: datetime | None = None
    asked: int = 1
    received: int = 0
    event: shapes.JsonDict | None = None
    held: bool = False
    reminders_sent: int = 0
    next_remind_at: datetime | None = None
    attempts: int = 0
    retry_at: datetime | None = None
    pending: str | None = None
    reminding: int | None = None
    outcome: str | None = None
    answerers: list[str] = field(default_factory=list)
    asked_names: list[str] = field(default_factory=list)
    finished_at: datetime | None = None
    retried: int = 0
    escalate_at: datetime | None = None
    escalated: bool = False
    child: int | None = None

    @classmethod
    def fresh(cls, step_id: shapes.Plain, kind: StepKind, pass_: int) -> LaneState:
        """``LaneState(step_id=..., kind=..., pass_=...)``, made without checking each
        field's assignment (a lane is made for every step a run enters)."""
        lane = object.__new__(cls)
        lane.__dict__.update(_FRESH_LANE, step_id=step_id, kind=kind, pass_=pass_)
        lane.__dict__["answerers"] = []
        lane.__dict__["asked_names"] = []
        return lane

    @property
    def active(self) -> bool:
        return self.status not in _FINISHED

    def restart(self) -> None:
        """Back to ``ready`` with nothing remembered but which step and pass it is, how
        often it was retried (once more when it was refused) and whether it escalated
        (an audience is told once a pass)."""
        retried = self.retried + (1 if self.outcome == REFUSED else 0)
        escalated = self.escalated
        self.status = statuses.LaneStatus.READY
        fresh = LaneState(step_id=self.step_id, kind=self.kind, pass_=self.pass_)
        for f in fields(self):
            if f.name != "status":
                object.__setattr__(self, f.name, getattr(fresh, f.name))
        self.retried = retried
        self.escalated = escalated

    def copy(self) -> LaneState:
        """A deep, independent copy: what ``from_dict(to_dict())`` gives, made directly."""
        lane = object.__new__(LaneState)
        values = dict(self.__dict__)
        values["answerers"] = list(self.answerers)
        values["asked_names"] = list(self.asked_names)
        if self.event is not None:
            values["event"] = dict(self.event)
        lane.__dict__.update(values)
        return lane

    def to_dict(self) -> shapes.JsonDict:
        """The lane as stored: its step, kind, pass and status, and each other field that
        differs from a fresh lane's (``from_dict`` gives the rest their defaults). A lane
        holds a score of fields and most stay as they began: left out, the run's row keeps
        to its page when its state is saved."""
        held = self.__dict__
        data = {
            "step_id": held["step_id"],
            "kind": held["kind"],
            "pass": held["pass_"],
            "status": self.status.value,  # the plain word, as stored
        }
        for name, default in _LANE_DEFAULTS:
            value = held[name]
            if value != default or type(value) is not type(default):
                data[name] = _when(value) if name in _MOMENTS else value
        return data

    @classmethod
    def from_dict(cls, data: shapes.Payload) -> LaneState:
        values: shapes.JsonDict = {}
        for f in fields(cls):
            name = "pass" if f.name == "pass_" else f.name
            if name not in data:
                continue
            value = data[name]
            values[f.name] = _moment(value) if f.name in _MOMENTS else value
        if values.get("event") is not None:
            values["event"] = dict(values["event"])
        for name in ("answerers", "asked_names"):
            values[name] = [str(v) for v in values.get(name) or ()]
        return cls(**values)


LaneState.status = _Status()  # type: ignore[assignment]

# The statuses of a lane that is no longer active.
_FINISHED = frozenset({statuses.LaneStatus.DONE, statuses.LaneStatus.FAILED})

# A new lane's fields but its step, kind and pass (and its lists, made anew each time).
_FRESH_LANE = {
    k: v
    for k, v in LaneState(step_id=None, kind="", pass_=0).__dict__.items()
    if k not in ("step_id", "kind", "pass_", "answerers", "asked_names")
}

# The fields a stored lane leaves out while they hold a fresh lane's value (all but its
# step, kind, pass and status), in their order, with that value.
_LANE_DEFAULTS = tuple(
    (name, value)
    for name, value in LaneState(step_id=None, kind="", pass_=0).__dict__.items()
    if name not in ("step_id", "kind", "pass_", "status")
)


@dataclass
class RunState(_Guarded):
    """A run's state: status, current position and lanes, and how it ended.

    ``moves`` counts positions entered (the loop bound); ``passes`` how often each
    position was entered (a step's pass number); ``last_event_id`` the highest event
    id taken from the driver (events up to it are read, or in ``unread``); ``error`` a
    sanitized envelope when failed; ``reason`` a sentence saying why the run ended;
    ``last_goto`` the position of the latest goto taken; ``cancel_requested`` an
    operator's cancel (its sentence) that the next advance carries out.

    The flow's own clock: ``clock`` is the logical moment the run has been caught up
    to (the run's creation before its first advance); ``entered_at`` the logical
    moment the current position was entered. ``unread`` holds events taken but not yet
    read, in the order they will be read: while a command pauses the catch-up at an
    earlier moment, or while the run is failed. A state saved before the clock existed
    has neither: the interpreter takes its lanes' latest moment as its clock.

    Fault paths: ``failure`` is what the command of the last step that ran one said when
    it failed for good and the run took the step's ``on_failure`` (empty again once a
    later step's command answers); ``fault_to`` the position the run goes on at, from
    the moment a step took its fault path until the run left the position.
    """

    _what = "run"
    _statuses = statuses.RunStatus

    status: statuses.RunStatus = statuses.RunStatus.RUNNING
    position: int | None = None
    moves: int = 0
    passes: dict[int, int] = field(default_factory=dict)
    lanes: list[LaneState] = field(default_factory=list)
    last_event_id: int = 0
    error: shapes.JsonDict | None = None
    reason: str | None = None
    last_goto: int | None = None
    cancel_requested: str | None = None
    clock: datetime | None = None
    entered_at: datetime | None = None
    unread: list[happened.EventIn] = field(default_factory=list)
    failure: str | None = None
    fault_to: int | None = None

    @property
    def ended(self) -> bool:
        return self.status in statuses.ENDED

    def to_dict(self) -> shapes.JsonDict:
        """The state as stored; what is not there (no error, no reason, no unread
        events) is left out, as a lane's fresh fields are."""
        data: shapes.JsonDict = {
            "status": self.status.value,
            "position": self.position,
            "moves": self.moves,
            "passes": {str(p): n for p, n in sorted(self.passes.items())},
            "lanes": [lane.to_dict() for lane in self.lanes],
            "last_event_id": self.last_event_id,
        }
        for name in ("error", "reason", "last_goto", "cancel_requested", "failure", "fault_to"):
            value = self.__dict__[name]
            if value is not None:
                data[name] = value
        data["clock"] = _when(self.clock)
        data["entered_at"] = _when(self.entered_at)
        if self.unread:
            data["unread"] = [
                {"id": e.id, "name": e.name, "payload": dict(e.payload), "at": e.at.isoformat()}
                for e in self.unread
            ]
        return data

    @classmethod
    def from_dict(cls, data: shapes.Payload) -> RunState:
        return cls(
            status=statuses.RunStatus(data["status"]),
            position=None if data.get("position") is None else int(data["position"]),
            moves=int(data.get("moves", 0)),
            passes={int(p): int(n) for p, n in dict(data.get("passes") or {}).items()},
            lanes=[LaneState.from_dict(lane) for lane in data.get("lanes") or ()],
            last_event_id=int(data.get("last_event_id", 0)),
            error=None if data.get("error") is None else dict(data["error"]),
            reason=data.get("reason"),
            last_goto=None if data.get("last_goto") is None else int(data["last_goto"]),
            cancel_requested=data.get("cancel_requested"),
            failure=None if data.get("failure") is None else str(data["failure"]),
            fault_to=None if data.get("fault_to") is None else int(data["fault_to"]),
            clock=_moment(data.get("clock")),
            entered_at=_moment(data.get("entered_at")),
            unread=[
                happened.EventIn(
                    id=int(e["id"]),
                    name=str(e["name"]),
                    payload=dict(e.get("payload") or {}),
                    at=datetime.fromisoformat(str(e["at"])),
                )
                for e in data.get("unread") or ()
            ],
        )

    def copy(self) -> RunState:
        """A deep, independent copy (advance never changes the state it is given): what
        ``from_dict(to_dict())`` gives, made directly."""
        run = object.__new__(RunState)
        values = dict(self.__dict__)
        values["passes"] = dict(self.passes)
        values["lanes"] = list(map(LaneState.copy, self.lanes))
        values["error"] = None if self.error is None else dict(self.error)
        values["unread"] = list(map(_event_copy, self.unread))
        run.__dict__.update(values)
        return run


RunState.status = _Status()  # type: ignore[assignment]


def _event_copy(event: happened.EventIn) -> happened.EventIn:
    return happened.EventIn(event.id, event.name, dict(event.payload), event.at)


def cancel_pending(data: shapes.Payload | None) -> bool:
    """Whether a stored state holds an operator's cancel that no advance carried out yet.

    The operator's cancel marks the run cancelled at once and leaves the rest to the
    next worker advance (which tells the application through the kinds' cancel
    commands); the worker advances such a run although its row reads ``cancelled``.
    """
    if not data or not data.get("cancel_requested"):
        return False
    return str(data.get("status")) not in statuses.FINAL
