"""Where an open run of a code workflow stands, as ``runner.runs()`` shows every run.

Pure: read from the run's recorded steps (``replay.Recording``), no SQL, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowrunner.flows.interpreter import waits as flow_waits
from flowrunner.foundations import statuses
from flowrunner.workflows import replay

_AWAITS = {
    replay.SLEEP: flow_waits.Awaits.TIME,
    replay.UNTIL: flow_waits.Awaits.TIME,
    replay.WAIT_FOR: flow_waits.Awaits.EVENT,
    replay.CHILD: flow_waits.Awaits.EVENT,
}


def where(state: Mapping[str, Any]) -> tuple[flow_waits.Waiting, ...]:
    """The step an open run waits at: a timer, an event (and when it gives up), a child
    run's end, or a step's next attempt after a failure; empty while it has nothing to
    wait for.

    >>> rec = replay.Recording(pending=replay.Pending(
    ...     "grace", "until", None, "2026-03-02T09:00:00+00:00", "2026-03-05T00:00:00+00:00"))
    >>> found = where(rec.to_dict())[0]
    >>> found.title, found.awaits.value, found.until.day
    ('grace', 'time', 5)
    >>> rec.pending = replay.Pending("credit", "child", "credit_check", "2026-03-02", run=12)
    >>> where(rec.to_dict())[0].event
    'run 12 (credit_check) to end'
    """
    rec = replay.Recording.from_dict(state)
    pending = rec.pending
    if pending is None:
        return ()
    retrying = pending.kind in (replay.RUN, replay.CALL)
    awaits = flow_waits.Awaits.RETRY if retrying else _AWAITS[pending.kind]
    event = pending.target if pending.kind == replay.WAIT_FOR else None
    if pending.kind == replay.CHILD:
        # A child's end is what the run waits for: "for run 12 (credit_check) to end".
        event = f"run {pending.run} ({pending.target}) to end"
    return (
        flow_waits.Waiting(
            position=len(rec.steps) + 1,
            step_id=pending.name,
            title=pending.name,
            kind=pending.kind,
            awaits=awaits,
            status=statuses.LaneStatus.RETRYING if retrying else statuses.LaneStatus.WAITING,
            event=event,
            until=None if pending.until is None else replay.moment(pending.until),
        ),
    )
