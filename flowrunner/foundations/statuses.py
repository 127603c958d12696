"""What a run and each of its steps (lanes) can be, named once for the engine and the store.

The members are strings (``RunStatus.DONE == "done"``), so stored JSON and database
values are the plain words. Which status may follow which is the interpreter's one
table of legal moves, ``flowrunner.flows.interpreter.state.TRANSITIONS``.
"""

from __future__ import annotations

import enum


class RunStatus(enum.StrEnum):
    """Where a run stands.

    >>> RunStatus("done") is RunStatus.DONE, f"{RunStatus.DONE}"
    (True, 'done')
    """

    RUNNING = "running"  # due now: a step is starting or a command is out
    WAITING = "waiting"  # on an event, a timer or a retry
    DONE = "done"
    FAILED = "failed"  # an operator may retry it, or cancel it
    CANCELLED = "cancelled"


class LaneStatus(enum.StrEnum):
    """Where one step at the run's current position stands."""

    READY = "ready"
    COMMANDING = "commanding"  # its command is out, the answer not yet taken
    WAITING = "waiting"
    RETRYING = "retrying"  # its command failed and runs again at a set time
    DONE = "done"
    FAILED = "failed"


# A run in one of these no longer moves by itself (only an operator retries a failed one).
ENDED: frozenset[RunStatus] = frozenset({RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED})
# Runs that have not ended: the ones a record's change or event wakes.
OPEN: frozenset[RunStatus] = frozenset(RunStatus) - ENDED
# Ended for good: nothing, not even an operator, moves a run on from these.
FINAL: frozenset[RunStatus] = frozenset({RunStatus.DONE, RunStatus.CANCELLED})
