"""A code workflow's run drawn as its recorded steps so far, on the flows' drawings.

A code workflow has no rows to draw ahead of its run: its picture is the steps the run
recorded, each a column in order (its kind's mark, its name, what it acted on, how it
ended and when), then the step it waits at, if any. Pure: read from the run's stored
state (``workflows.replay.Recording``), no SQL, no clock.
"""

from __future__ import annotations

from datetime import datetime, tzinfo

from flowrunner.diagrams import marks, model, progress
from flowrunner.foundations import shapes, statuses
from flowrunner.history import words
from flowrunner.workflows import replay

# Each step kind drawn with the mark of the built-in kind that does the same, or its own.
_MARKS = {replay.SLEEP: "wait", replay.UNTIL: "until", replay.WAIT_FOR: "waitFor"}
_TARGETS = {
    replay.RUN: "command",
    replay.CALL: "connection",
    replay.WAIT_FOR: "event",
    replay.CHILD: "workflow",
}


def picture(
    name: str,
    version: object,
    state: shapes.Payload,
    *,
    run_id: int,
    status: str,
    reason: str | None = None,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
    zone: tzinfo | None = None,
) -> model.Picture:
    """The run's recorded steps as a ``model.Picture`` the renderers draw.

    >>> rec = replay.Recording(
    ...     [replay.Recorded("grace", "until", None, at="2026-03-06T00:00:00+00:00")],
    ...     replay.Pending("assess", "run", "assess_fees", "2026-03-06T00:00:00+00:00",
    ...                    "2026-03-06T00:00:10+00:00", attempt=1, error="ledger down"))
    >>> drawn = picture("late_fees", 1, rec.to_dict(), run_id=7, status="waiting")
    >>> [(c.boxes[0].title, c.state, c.boxes[0].run.state) for c in drawn.columns]
    [('grace', 'done', 'done'), ('assess', 'current', 'retrying')]
    """
    rec = replay.Recording.from_dict(state)
    failed = status == statuses.RunStatus.FAILED
    columns: list[model.Column] = []
    for index, step in enumerate(rec.steps):
        moment = None if step.at is None else replay.moment(step.at)
        if step.refused is not None:
            run = model.StepRun(
                "failed", "Refused", (model.clean(str(step.refused.get("message", ""))),), moment
            )
        elif step.kind == replay.WAIT_FOR and step.result is None:
            run = model.StepRun("timed_out", f"Gave up {progress.when(moment, zone)}", (), moment)
        else:
            run = model.StepRun("done", f"Done {progress.when(moment, zone)}", (), moment, 1)
        columns.append(_column(index, step.name, step.kind, step.target, run, "done"))
    pending = rec.pending
    if pending is not None:
        until = None if pending.until is None else replay.moment(pending.until)
        if failed:
            run = model.StepRun("failed", "Failed", (model.clean(reason or ""),), until)
        elif pending.attempt:
            details = (f"attempt {pending.attempt} failed: {pending.error or ''}".strip(),)
            run = model.StepRun("retrying", f"Again {progress.when(until, zone)}", details, until)
        elif pending.kind == replay.WAIT_FOR:
            text = f"Waiting for {words.event_words(pending.target)}"
            run = model.StepRun("waiting", text, _gives_up(until, zone), until)
        elif pending.kind == replay.CHILD:
            run = model.StepRun("waiting", f"Waiting for run {pending.run} to end", (), None)
        else:
            run = model.StepRun("waiting", f"Waiting until {progress.when(until, zone)}", (), until)
        columns.append(
            _column(len(rec.steps), pending.name, pending.kind, pending.target, run, "current")
        )
    ways = [model.Way(-1, 0 if columns else None, "next")]
    ways += [
        model.Way(i, i + 1 if i + 1 < len(columns) else None, "next") for i in range(len(columns))
    ]
    sentence = _sentence(status, reason, pending)
    return model.Picture(
        flow_name=model.clean(name),
        start=f"a workflow in code (version {version})",
        columns=tuple(columns),
        ways=tuple(ways),
        digest=f"workflow:{name}:{version}",
        run=model.RunSummary(run_id, status, sentence, started_at, ended_at, zone),
    )


def _column(
    index: int, name: str, kind: str, target: str | None, run: model.StepRun, state: str
) -> model.Column:
    facts = () if target is None else (model.Fact(_TARGETS.get(kind, "target"), target),)
    box = model.Box(
        key=f"s{index + 1}",
        step_id=name,
        position=index + 1,
        lane=0,
        kind=kind,
        mark=marks.mark(_MARKS.get(kind, kind)),
        title=model.clean(name),
        facts=tuple(model.Fact(f.name, model.clean(f.value)) for f in facts),
        run=run,
    )
    column_state: model.ColumnState = "done" if state == "done" else "current"
    return model.Column(index, index + 1, (box,), column_state, 1)


def _gives_up(until: datetime | None, zone: tzinfo | None = None) -> tuple[str, ...]:
    return () if until is None else (f"gives up {progress.when(until, zone)}",)


def _sentence(status: str, reason: str | None, pending: replay.Pending | None) -> str:
    if reason:
        return model.clean(reason)
    if status == statuses.RunStatus.DONE:
        return "Done"
    if pending is not None:
        return f"Waits at {model.clean(pending.name)}"
    return str(status).capitalize()
