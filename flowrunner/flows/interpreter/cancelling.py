"""Cancel commands: telling the application that a waiting step stopped waiting.

A kind with ``cancel`` has its cancel command run once, under the key
``<step key>/cancel``, whenever one of its steps stops waiting for any reason but its
answers: its condition held or its wait gave up (``Turn.finish``), it failed itself
(``Turn.fail_lane``), or the run ended or failed around it (``sweep``, here). A step
that completes by its answers is not cancelled.

When a run fails, its waiting steps that were cancelled fail with it (outcome
``cancelled``): their asks are withdrawn, so an operator's retry asks again rather
than waiting on answers nobody will give. Steps of kinds without a cancel command
keep waiting through a failure, as before, and so does a subflow step: its child run
goes on (a cancelled or ended run cancels it).

The cancel's answer is a history line, taken even after the run has ended in the
same advance (``take_answers``); a failing cancel is never retried and changes nothing.
"""

from __future__ import annotations

import re

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter.turn import Turn
from flowrunner.foundations import statuses

# ``Turn.key`` plus the suffix ``cancel_command`` adds: which step and pass it was for.
_KEY = re.compile(r"^step-(?P<ident>.+)/pass-(?P<pass>[0-9]+)(/retry-[0-9]+)?/cancel$")


def sweep(turn: Turn) -> None:
    """The run ended or failed in this advance: cancel the steps that still wait."""
    if turn.live:
        return
    failed = turn.run.status == statuses.RunStatus.FAILED
    why = "the run failed" if failed else (turn.run.reason or "the run ended")
    for step, lane in turn.pairs():
        if lane.status != statuses.LaneStatus.WAITING:
            continue
        if failed and step.kind == "subflow":
            continue  # its child goes on: an operator's retry waits for it again
        if turn.cancel_command(step, lane, why) and failed:
            lane.status = statuses.LaneStatus.FAILED
            lane.outcome = "cancelled"


def take_answers(turn: Turn) -> None:
    """Write a history line for each cancel command's answer."""
    for result in turn.seen.results:
        found = _KEY.match(result.key)
        if found is None:
            continue
        step = _step(turn.snap, found["ident"])
        kind = turn.cfg.kinds.get(step.kind) if step is not None else None
        detail: dict[str, object] = {"command": kind.cancel if kind is not None else None}
        if result.ok:
            what = "cancel_done"
        else:
            error = result.error or {}
            what = "cancel_failed"
            detail["error"] = str(error.get("message") or error.get("code") or "no reason given")
        turn.effects.append(turn.line(what, detail, step, int(found["pass"])))


def _step(snap: snapshot.FlowSnapshot, ident: str) -> snapshot.StepSpec | None:
    for step in snap.steps:
        if (str(step.id) if step.id is not None else f"p{step.position}") == ident:
            return step
    return None
