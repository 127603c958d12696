"""The working context of one advance: the state being changed and the effects so far.

An advance copies the run state, works on the copy and a copy of the record, and
collects effects in order; ``Turn`` holds these, the flow's clock as it catches up,
and the few moves every kind shares (log, run a command, finish or fail a lane, end
the run).
"""

from __future__ import annotations

from datetime import datetime

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.flows.interpreter import effects, happened, known, reading, state
from flowrunner.foundations import sanitize, shapes, statuses

_WAITING = statuses.LaneStatus.WAITING
# The built-in kind that runs another flow as a child run (``subflows``).
SUBFLOW = "subflow"

# Why a waiting step stopped, by the outcome it finished with (for the cancel's line).
_STOPPED = {"condition": "its condition held", "timed_out": "the wait gave up"}


class Turn:
    """One advance in progress over a copy of the run state.

    ``now`` is the flow's own clock: the logical moment being worked on, which every
    kind reads (a step starts, a timer falls due, a value resolves at ``now``). It
    starts where the run was caught up to and moves forward, event by event and
    timer by timer, up to ``until``: the driver's time, how far this advance may go.
    """

    def __init__(
        self,
        snap: snapshot.FlowSnapshot,
        run: state.RunState,
        seen: happened.Happened,
        now: datetime,
        cfg: config_mod.InterpreterConfig,
    ) -> None:
        self.snap = snap
        # What was read of this flow before, by this or another run's advance.
        self.known = known.of(snap, cfg)
        self.run = run.copy()
        self.seen = seen
        clock = self.run.clock or _latest_moment(self.run) or now
        self.now = clock
        # The clock never goes back, even for a driver whose own clock is behind.
        self.until = max(now, clock)
        self.cfg = cfg
        self.record: shapes.RowDict | None = None if seen.record is None else dict(seen.record)
        # The lanes that already waited when this advance began (``sees_record``).
        self.waited = [lane for lane in self.run.lanes if lane.status == _WAITING]
        self.effects: list[effects.Effect] = []
        self.emitted: set[str] = set()

    # -- where we are ---------------------------------------------------------------

    def pairs(self) -> list[tuple[snapshot.StepSpec, state.LaneState]]:
        """Each step at the current position with its lane (lanes follow step order),
        taken as they are now: a move may change the run's lanes while they are walked."""
        if self.run.position is None:
            return []
        # Not strict, and without the keyword (it costs as much as the pairing).
        return list(zip(self.snap.steps_at(self.run.position), self.run.lanes))  # noqa: B905

    @property
    def live(self) -> bool:
        return self.run.status in statuses.OPEN

    @property
    def busy(self) -> bool:
        """Whether a lane awaits a command's or a reminder's answer (the clock waits too)."""
        for lane in self.run.lanes:  # a loop: a generator costs more than the question
            if lane.status == statuses.LaneStatus.COMMANDING or lane.reminding is not None:
                return True
        return False

    @property
    def joined(self) -> bool:
        """Whether every lane at this position is done or failed (the join)."""
        for lane in self.run.lanes:  # noqa: SIM110 (as in busy)
            if lane.active:
                return False
        return True

    @property
    def caught_up(self) -> bool:
        return self.now >= self.until

    def take_events(self) -> None:
        """Add the driver's new events to the unread ones, in the order they are read.

        Events are read by when they were recorded (then by id); ``last_event_id``
        moves past every event taken, so passing the same events again changes nothing.
        """
        run = self.run
        if not self.seen.events:
            return
        fresh = [e for e in self.seen.events if e.id > run.last_event_id]
        if not fresh:
            return
        run.unread = sorted([*run.unread, *fresh], key=lambda e: (e.at, e.id))
        run.last_event_id = max(e.id for e in fresh)

    def when_read(self, event: happened.EventIn) -> datetime:
        """The moment an event is read: when it was recorded, but never before the
        clock (it became known late) nor after the driver's time (its clock is ahead)."""
        return min(max(event.at, self.now), self.until)

    def sees_record(self, lane: state.LaneState) -> bool:
        """Whether ``lane`` reads the record as given at the current moment.

        The driver gives the record as it is at its own time (``until``). A lane that
        already waited when this advance began read the record when the run's clock
        stopped; whatever changed since is seen at ``until`` — when the change woke the
        run, or when a worker back from an outage saw it — so a wait it ends ends then,
        and the steps after it count from there. A lane that starts during the advance
        reads the record from its start (with the run's own writes, at their moments).
        """
        return self.now >= self.until or all(waited is not lane for waited in self.waited)

    def working_record(self) -> shapes.RowDict:
        # Only called while the run goes on, which needs a record.
        return self.record if self.record is not None else {}

    # -- shared moves ---------------------------------------------------------------

    def log(
        self,
        what: str,
        detail: effects.Detail = "",
        step: snapshot.StepSpec | None = None,
        lane: state.LaneState | None = None,
        *,
        at: datetime | None = None,
    ) -> None:
        """Write a history line at the flow's current moment, or at ``at`` (a moment it
        stands for that is not the current one: a reminder's planned time)."""
        pass_ = lane.pass_ if lane is not None else None
        self.effects.append(self.line(what, detail, step, pass_, at=self.now if at is None else at))

    def line(
        self,
        what: str,
        detail: effects.Detail,
        step: snapshot.StepSpec | None,
        pass_: int | None,
        at: datetime | None = None,
    ) -> effects.Log:
        """A history line about a step's pass, or (with no step) the run at its position.

        ``detail`` is what a sentence needs beyond the code (``flowrunner.history.flows``
        renders it): a mapping of plain values, times as ISO text; a string is kept for
        the lines that have nothing more to say.
        """
        if step is None:
            return effects.Log.made(
                self.run.position, None, None, None, pass_, what, _sanitized(detail), at
            )
        return effects.Log.made(
            step.position, step.id, step.title, step.kind, pass_, what, _sanitized(detail), at
        )

    @staticmethod
    def key(step: snapshot.StepSpec, lane: state.LaneState) -> str:
        """The key of a pass's commands, the same on every attempt (``step-7/pass-1``),
        and another after each refusal an operator retried (``step-7/pass-1/retry-1``)."""
        ident = step.id if step.id is not None else f"p{step.position}"
        key = f"step-{ident}/pass-{lane.pass_}"
        return f"{key}/retry-{lane.retried}" if lane.retried else key

    def command(
        self,
        step: snapshot.StepSpec,
        lane: state.LaneState,
        kind: config_mod.KindConfig,
        *,
        reminder: int | None = None,
        at: datetime | None = None,
    ) -> None:
        """Ask the driver to run the kind's command (or its remind command) now; ``at`` is
        the moment it stands for, when not the driver's time (``RunCommand.at``)."""
        key = self.key(step, lane)
        if reminder is None:
            name, attempt = kind.command, lane.attempts
        else:
            key = f"{key}/remind-{reminder}"
            name, attempt = kind.remind or "", 1
        self._ask(key, step, lane, kind, name, attempt, reminder=reminder, at=at)

    def finish(
        self,
        step: snapshot.StepSpec,
        lane: state.LaneState,
        outcome: str,
        what: str = "done",
        detail: shapes.Payload | None = None,
        *,
        why: str | None = None,
    ) -> None:
        """The lane is done with ``outcome``; its line ``what`` says so, with ``detail``.
        ``why`` is why a waiting step stopped, for its cancel command's line."""
        # Only "complete" ends a wait by its answers; any other way out is a cancel.
        stopped = lane.status == statuses.LaneStatus.WAITING and outcome != "complete"
        lane.outcome = outcome
        lane.status = statuses.LaneStatus.DONE
        lane.pending = None
        lane.finished_at = self.now
        self.log(what, {"outcome": outcome, **(detail or {})}, step, lane)
        if stopped:
            self.cancel_command(step, lane, why or _STOPPED.get(outcome, outcome))

    def cancel_command(self, step: snapshot.StepSpec, lane: state.LaneState, why: str) -> bool:
        """Ask the driver to run the kind's cancel command for this pass, once.

        Returns whether it was asked (the step's kind has a cancel command). Its answer
        is a history line only: a failing cancel is never retried and changes nothing.
        A subflow step's cancel is its child run's, unless that ended already.
        """
        if step.kind == SUBFLOW:
            return self._cancel_child(step, lane, why)
        kind = self.cfg.kinds.get(step.kind)
        key = f"{self.key(step, lane)}/cancel"
        if kind is None or kind.cancel is None or key in self.emitted:
            return False
        self.log("cancel", {"command": kind.cancel, "why": why}, step, lane)
        self._ask(key, step, lane, kind, kind.cancel, 1, cancel=True)
        return True

    def _cancel_child(self, step: snapshot.StepSpec, lane: state.LaneState, why: str) -> bool:
        """Ask the driver to cancel the child run a subflow step waited for, once."""
        key = f"{self.key(step, lane)}/cancel"
        child = lane.child
        if child is None or key in self.emitted:
            return False
        if any(ended.run == child for ended in self.seen.children):
            return False  # it ended already: nothing to cancel
        self.emitted.add(key)
        detail = {"flow": reading.text(step, "value"), "run": child, "why": why}
        self.log("subflow_cancelled", detail, step, lane)
        self.effects.append(effects.CancelSubflow(child, why))
        return True

    def _ask(
        self,
        key: str,
        step: snapshot.StepSpec,
        lane: state.LaneState,
        kind: config_mod.KindConfig,
        command: str,
        attempt: int,
        *,
        reminder: int | None = None,
        cancel: bool = False,
        at: datetime | None = None,
    ) -> None:
        """Ask the driver to run one of the kind's commands for this pass, under ``key``."""
        self.emitted.add(key)
        self.effects.append(
            effects.RunCommand.made(
                key,
                step.id,
                lane.pass_,
                kind.name,
                command,
                reading.inputs(step, kind),
                attempt,
                reminder,
                cancel,
                at,
            )
        )

    def fail_lane(
        self,
        step: snapshot.StepSpec,
        lane: state.LaneState,
        code: str,
        message: str,
        cause: shapes.Payload | None = None,
    ) -> None:
        """The lane failed, and with it the run (a failing lane fails the run)."""
        waited = lane.status == statuses.LaneStatus.WAITING
        lane.status = statuses.LaneStatus.FAILED
        lane.pending = None
        lane.finished_at = self.now
        reason = f"{reading.describe(step)} failed: {message}"
        details: shapes.JsonDict = {
            "step_id": step.id,
            "kind": step.kind,
            "position": step.position,
            "pass": lane.pass_,
            "attempts": lane.attempts,
        }
        if cause is not None:
            details["cause"] = dict(cause)
        self.log("failed", {"code": code, "message": message}, step, lane)
        if waited:
            self.cancel_command(step, lane, "the step failed")
        self.fail_run(code, reason, details)

    def fail_run(self, code: str, reason: str, details: shapes.Payload | None = None) -> None:
        if self.run.status == statuses.RunStatus.FAILED:
            return  # a second failure while taking answers: the first stays the reason
        self.run.status = statuses.RunStatus.FAILED
        self.run.reason = sanitize.sanitize_text(reason)
        self.run.error = sanitize.error_envelope(code, reason, details=details)
        self.log("ended", {"status": self.run.status.value, "reason": self.run.reason})

    def end_run(self, status: statuses.RunStatus, reason: str) -> None:
        """End the run for good (done or cancelled) with a sentence saying why."""
        self.run.status = status
        self.run.reason = sanitize.sanitize_text(reason)
        for lane in self.run.lanes:
            # Nothing is awaited any more; keep lanes' history but drop their claims.
            lane.pending = None
            lane.reminding = None
        self.log("ended", {"status": self.run.status.value, "reason": self.run.reason})


def _latest_moment(run: state.RunState) -> datetime | None:
    """The clock of a state saved before there was one: its lanes' latest moment."""
    moments = [
        moment
        for lane in run.lanes
        for moment in (lane.started_at, lane.waiting_since, lane.finished_at)
        if moment is not None
    ]
    return max(moments) if moments else None


def _sanitized(detail: effects.Detail) -> str | shapes.JsonDict:
    """A history line's detail made safe to show: one line of text, or sanitized fields.

    Most details repeat (``{"outcome": "done"}``, the same command's first attempt): one
    of text keys and plain values sanitized before is looked up rather than sanitized
    again. The sanitizer is a pure function, so the answer is the same.
    """
    if isinstance(detail, str):
        return sanitize.sanitize_text(detail)
    # The values' types belong to the key: True equals 1, yet each is written as it is.
    kinds = tuple(map(type, detail.values()))
    if not _PLAIN.issuperset(kinds):
        return sanitize.sanitize_fields(detail)
    key = (tuple(detail.items()), kinds)
    done = _SAFE.get(key)
    if done is None:
        done = sanitize.sanitize_fields(detail)
        if _plain(detail):
            if len(_SAFE) >= _SAFE_COUNT:
                _SAFE.clear()
            _SAFE[key] = done
    return sanitize.Sanitized(done)  # each line its own, as the sanitizer gives


# Details sanitized before, by their items and their values' types: up to
# ``_SAFE_COUNT`` of them (then it starts again), none holding a long text.
_SAFE: dict[tuple[object, ...], shapes.JsonDict] = {}
_SAFE_COUNT = 4096
_SAFE_LENGTH = 300
# The types of the values a detail looked up may hold, exactly (not a float: -0.0
# equals 0.0, yet each is written as it is).
_PLAIN = frozenset({str, int, bool, type(None)})


def _plain(detail: shapes.Payload) -> bool:
    """Whether a detail of plain values may be remembered: text keys, and no long text."""
    return all(
        type(k) is str and len(k) <= _SAFE_LENGTH and (type(v) is not str or len(v) <= _SAFE_LENGTH)
        for k, v in detail.items()
    )
