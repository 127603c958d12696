"""A code workflow's run as recorded, and the rule that replays it.

A run of a code workflow is the list of steps it finished, in order — each with its
name, kind, target and stored result (``Recorded``) — and the step it waits at, if any
(``Pending``: a timer's moment, a wait's start, a retry's attempt). When the worker
runs the workflow's body again, each step the body asks for (``Ask``) is judged by
``replay``: a step finished at that place hands back its stored result (``Replayed``);
the first one not finished yet is done now (``Fresh``); one whose name, kind or target
is not what the run recorded there stops the run (``Diverged``, with a sentence). A
refused step the run failed on is set aside by an operator's retry (``superseded``) and
done again, under a new idempotency key (``Recording.idempotency_key``). A fork from a
step begins with the steps recorded before it (``forked``), and does the rest anew.

Pure: no SQL, no clock, no I/O. The state is plain JSON (``Recording.to_dict``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from flowrunner import errors
from flowrunner.foundations import shapes

# The kinds of step a workflow may ask for, as ``Ask.kind`` and history lines name them.
RUN = "run"
CALL = "call"
WAIT_FOR = "wait_for"
SLEEP = "sleep"
UNTIL = "until"
NOW = "now"
CHILD = "child"
KINDS = (RUN, CALL, WAIT_FOR, SLEEP, UNTIL, NOW, CHILD)

# How each kind reads in a sentence ("asked for run 'assess' (command assessLateFees)").
_TARGET_WORDS = {RUN: "command", CALL: "connection", WAIT_FOR: "event", CHILD: "workflow"}


@dataclass(frozen=True)
class Ask:
    """What the body asks for at one ``await``: a step, by name, kind and target.

    ``target`` is what the step acts on and must stay the same for a run to replay: a
    ``run`` step's command, a ``call`` step's connection, a ``wait_for`` step's event,
    a ``child`` step's workflow (None for timers and ``now``). ``options`` holds the
    rest, read when the step is done: a command's input and record, a request, a match,
    a timeout, a moment, a child's start.
    """

    name: str
    kind: str
    target: str | None = None
    options: shapes.Payload = field(default_factory=dict)

    def words(self) -> str:
        """``run 'assess' (command assessLateFees)``, ``sleep 'grace'``."""
        return describe(self.kind, self.name, self.target)


def describe(kind: str, name: str, target: str | None) -> str:
    said = f"{kind} {name!r}"
    if target is not None:
        said += f" ({_TARGET_WORDS.get(kind, 'target')} {target})"
    return said


@dataclass(frozen=True)
class Recorded:
    """A finished step as the run keeps it: its result, or the refusal it met."""

    name: str
    kind: str
    target: str | None
    result: shapes.Json = None
    """The step's result as JSON: a command's answer, a call's answer body, the event's
    payload (None when a wait timed out), the time (``now``, in ISO 8601), what a child
    run returned."""
    refused: shapes.JsonDict | None = None
    """``{"message": ..., "status": 404}`` when the step was refused (``StepRefused``)."""
    at: str | None = None
    """When it finished on the run's own clock (ISO 8601): the next timer counts from it."""

    def to_dict(self) -> shapes.JsonDict:
        found: shapes.JsonDict = {"name": self.name, "kind": self.kind, "target": self.target}
        found["result"] = self.result
        if self.refused is not None:
            found["refused"] = self.refused
        if self.at is not None:
            found["at"] = self.at
        return found

    @classmethod
    def from_dict(cls, data: shapes.Payload) -> Recorded:
        return cls(
            name=str(data["name"]),
            kind=str(data["kind"]),
            target=None if data.get("target") is None else str(data["target"]),
            result=data.get("result"),
            refused=data.get("refused"),
            at=data.get("at"),
        )


@dataclass(frozen=True)
class Pending:
    """The step a run waits at: a timer, an event, a child run, or a command's or call's
    next attempt."""

    name: str
    kind: str
    target: str | None
    since: str
    """When the step was reached on the run's own clock (a wait's timeout counts from it)."""
    until: str | None = None
    """When it is due again: a timer's moment, a wait's give-up, a retry's attempt."""
    attempt: int = 0
    """Attempts that failed so far (a ``run`` or ``call`` step retried with backoff)."""
    error: str | None = None
    """Why the last attempt failed, in a line."""
    run: int | None = None
    """The child run a ``child`` step waits for, once started."""

    def to_dict(self) -> shapes.JsonDict:
        found: shapes.JsonDict = {
            "name": self.name,
            "kind": self.kind,
            "target": self.target,
            "since": self.since,
            "until": self.until,
            "attempt": self.attempt,
            "error": self.error,
        }
        if self.run is not None:
            found["run"] = self.run
        return found

    @classmethod
    def from_dict(cls, data: shapes.Payload) -> Pending:
        return cls(
            name=str(data["name"]),
            kind=str(data["kind"]),
            target=None if data.get("target") is None else str(data["target"]),
            since=str(data["since"]),
            until=data.get("until"),
            attempt=int(data.get("attempt") or 0),
            error=data.get("error"),
            run=None if data.get("run") is None else int(data["run"]),
        )


@dataclass
class Recording:
    """A code workflow's run: its finished steps in order, where it waits, its result."""

    steps: list[Recorded] = field(default_factory=list)
    pending: Pending | None = None
    clock: str | None = None
    """When the last finished step finished, on the run's own clock (ISO 8601)."""
    result: shapes.Json = None
    """What the workflow returned, once it has."""
    failed_on: str | None = None
    """The refused step the run failed on — its last, whose refusal the body raised out
    of (let through, or raised another error in its ``except``): an operator's retry
    runs it again."""
    superseded: list[Recorded] = field(default_factory=list)
    """Refusals an operator's retry set aside, in order: each gives its step's next
    attempts a new idempotency key (``idempotency_key``)."""

    def to_dict(self) -> shapes.JsonDict:
        data: shapes.JsonDict = {
            "steps": [step.to_dict() for step in self.steps],
            "pending": None if self.pending is None else self.pending.to_dict(),
            "clock": self.clock,
            "result": self.result,
        }
        if self.failed_on is not None:
            data["failed_on"] = self.failed_on
        if self.superseded:
            data["superseded"] = [step.to_dict() for step in self.superseded]
        return data

    @classmethod
    def from_dict(cls, data: shapes.Payload | None) -> Recording:
        if not data:
            return cls()
        pending = data.get("pending")
        return cls(
            steps=[Recorded.from_dict(step) for step in data.get("steps") or []],
            pending=None if not pending else Pending.from_dict(pending),
            clock=data.get("clock"),
            result=data.get("result"),
            failed_on=data.get("failed_on"),
            superseded=[Recorded.from_dict(step) for step in data.get("superseded") or []],
        )

    def fail_on_refusal(self, delivered: int) -> None:
        """The body raised out of the await of its ``delivered``-th step, a refusal: when
        that is the last step recorded, the run fails on it (``failed_on``)."""
        if delivered and delivered == len(self.steps) and self.steps[-1].refused is not None:
            self.failed_on = self.steps[-1].name

    def idempotency_key(self, run_id: int, name: str) -> str:
        """The key a ``run`` step's command or a ``call`` is sent with: the same on every
        attempt, a new one after each of the step's refusals an operator retried (a
        service that keeps its answer by key answers anew, not with its refusal).

        >>> rec = Recording(superseded=[Recorded("charge", RUN, "charge_card")])
        >>> rec.idempotency_key(7, "charge"), rec.idempotency_key(7, "ship")
        ('run-7/charge/retry-1', 'run-7/ship')
        """
        retried = sum(1 for step in self.superseded if step.name == name)
        key = f"run-{run_id}/{name}"
        return f"{key}/retry-{retried}" if retried else key

    def finish(
        self, ask: Ask, result: shapes.Json, at: datetime, refused: shapes.JsonDict | None
    ) -> None:
        """Record ``ask`` as finished at ``at`` with ``result`` (or its refusal)."""
        moment = at.isoformat()
        self.steps.append(Recorded(ask.name, ask.kind, ask.target, result, refused, moment))
        self.pending = None
        self.clock = moment


def reached(recording: Recording) -> list[str]:
    """The names of the steps a run reached, in order: those it finished, then the one it
    waits at (or failed at), if any."""
    names = [step.name for step in recording.steps]
    if recording.pending is not None:
        names.append(recording.pending.name)
    return names


def forked(recording: Recording, step: str, at: datetime) -> Recording | None:
    """What a fork of the run from ``step`` begins with: the steps finished before it, as
    recorded (replayed, nothing done again), its clock at ``at`` — so ``step`` and the
    steps after it are done anew from then. None when the run never reached ``step``.

    >>> rec = Recording([Recorded("grace", UNTIL, None), Recorded("assess", RUN, "fees")])
    >>> at = datetime(2026, 3, 9, tzinfo=UTC)
    >>> [s.name for s in forked(rec, "assess", at).steps], forked(rec, "assess", at).clock
    (['grace'], '2026-03-09T00:00:00+00:00')
    >>> forked(rec, "charge", at) is None
    True
    """
    names = reached(recording)
    if step not in names:
        return None
    kept = recording.steps[: names.index(step)]
    return Recording(steps=list(kept), clock=at.isoformat())


@dataclass(frozen=True)
class Replayed:
    """A step finished before: its stored result (or refusal) goes back to the body."""

    step: Recorded


@dataclass(frozen=True)
class Fresh:
    """The first step not finished yet: done now (``pending``: where it stood, if it
    waited or failed before)."""

    pending: Pending | None


@dataclass(frozen=True)
class Diverged:
    """The body asked, at a recorded place, for another step than the run recorded there."""

    sentence: str
    code: str = "workflow_diverged"


def replay(recording: Recording, index: int, ask: Ask, version: int) -> Replayed | Fresh | Diverged:
    """Judge the body's ``index``-th step (0-based) against what the run recorded.

    >>> rec = Recording([Recorded("grace", UNTIL, None, at="2026-03-02T09:00:00+00:00")])
    >>> replay(rec, 0, Ask("grace", UNTIL), 1).step.name
    'grace'
    >>> replay(rec, 1, Ask("assess", RUN, "assess_fees"), 1)
    Fresh(pending=None)
    >>> print(replay(rec, 0, Ask("assess", RUN, "assess_fees"), 1).sentence)
    step 1 asked for run 'assess' (command assess_fees), but this run recorded until 'grace' ...
    """
    earlier = [step.name for step in recording.steps[: min(index, len(recording.steps))]]
    if ask.name in earlier:
        return Diverged(
            f"step {index + 1} is named {ask.name!r} like step {earlier.index(ask.name) + 1}: "
            "give each step of a run its own name (a loop's steps take its index)",
            code="step_name_repeated",
        )
    if index < len(recording.steps):
        step = recording.steps[index]
        if (step.name, step.kind, step.target) != (ask.name, ask.kind, ask.target):
            return Diverged(_diverged(index, ask, step.kind, step.name, step.target, version))
        return Replayed(step)
    pending = recording.pending
    if index == len(recording.steps) and pending is not None:
        if (pending.name, pending.kind, pending.target) != (ask.name, ask.kind, ask.target):
            return Diverged(
                _diverged(index, ask, pending.kind, pending.name, pending.target, version)
            )
        return Fresh(pending)
    return Fresh(None)


def ended_early(recording: Recording, index: int, version: int) -> Diverged | None:
    """A body that returned after ``index`` steps while the run recorded more: diverged."""
    left = recording.steps[index:] if index < len(recording.steps) else []
    if left:
        step = left[0]
        return Diverged(
            f"the workflow returned before step {index + 1}, "
            f"{describe(step.kind, step.name, step.target)}, which this run recorded at "
            f"version {version}"
        )
    if index == len(recording.steps) and recording.pending is not None:
        pending = recording.pending
        return Diverged(
            f"the workflow returned before step {index + 1}, "
            f"{describe(pending.kind, pending.name, pending.target)}, which this run waits at "
            f"(version {version})"
        )
    return None


def _diverged(index: int, ask: Ask, kind: str, name: str, target: str | None, version: int) -> str:
    return (
        f"step {index + 1} asked for {ask.words()}, but this run recorded "
        f"{describe(kind, name, target)} there at version {version}"
    )


def delivered(step: Recorded) -> shapes.Json:
    """What the body's ``await`` gives for a finished step: its result (a ``now`` step's
    time as an aware ``datetime``), or raises ``StepRefused`` for a refused one."""
    if step.refused is not None:
        status = step.refused.get("status")
        raise errors.StepRefused(
            str(step.refused.get("message") or "refused"),
            step=step.name,
            status=int(status) if isinstance(status, int) else None,
        )
    if step.kind == NOW and isinstance(step.result, str):
        moment = datetime.fromisoformat(step.result)
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return step.result


def reaches_outside(ask: Ask) -> bool:
    """Whether a finished step may have reached outside the database: every ``call``,
    and every ``run`` but those declared ``outside=False`` (their command only writes
    through ``ctx.conn``, so they share the next step's commit)."""
    if ask.kind == CALL:
        return True
    return ask.kind == RUN and ask.options.get("outside", True) is not False


def moment(text: str) -> datetime:
    """An ISO 8601 time the state keeps, as an aware ``datetime`` (naive: UTC)."""
    found = datetime.fromisoformat(text)
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)
