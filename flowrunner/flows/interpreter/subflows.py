"""A subflow step: another flow of the resource run as a child run, waited for.

A ``subflow`` step names a manual flow in ``value``. It starts that flow as a run of its
own — on the run's record, or with ``field`` on the record whose id that column holds —
and waits until the child run ends:

- ``begin`` asks the driver to start the child (``StartSubflow``, under the pass's key,
  so it starts once whatever the crashes); the lane is ``commanding`` until the driver
  answers with the child's run id (``on_result``), then ``waiting`` for it;
- ``tick`` sees the child's end (``Happened.children``, read like the record: at the
  driver's time): done, the step is done and the run goes on; failed or cancelled, the
  step fails and takes its ``on_failure`` (``faults.take``), as a command that failed
  for good does; its ``duration`` gives up waiting, as a waitFor's does;
- a subflow step that stops waiting for any other reason — it gave up, another step at
  its position took its fault path, the run was cancelled or ended — cancels the child
  (``Turn.cancel_command`` asks for a ``CancelSubflow``). A run that fails elsewhere
  keeps its child: an operator's retry goes on waiting for it.

History lines: ``subflow`` when the child started (its flow and run), ``done`` with the
outcome ``subflow_done`` when it ended and the run went on, ``failed`` with the code
``subflow.failed`` otherwise, ``subflow_cancelled`` when the step cancelled it.
"""

from __future__ import annotations

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import effects, faults, happened, reading, state
from flowrunner.flows.interpreter.turn import Turn
from flowrunner.foundations import shapes, statuses

KIND = "subflow"
# How a child run ended, as ``ChildEnded.status`` says it.
DONE, FAILED, CANCELLED, GONE = "done", "failed", "cancelled", "gone"


def flow_name(step: snapshot.StepSpec) -> str:
    """The manual flow the step runs (its ``value``); ``Broken`` when it is empty."""
    name = reading.text(step, "value")
    if name is None:
        raise reading.Broken(step, "it names no flow to run (its value is empty)")
    return name


def begin(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    """Ask the driver to start the child run (on the record ``field`` names, if any)."""
    name = flow_name(step)
    reading.on_failure(step, turn.snap)
    length = reading.duration(step)
    if length is not None:
        lane.deadline = reading.later(step, turn.cfg, length, turn.now)
    record_id: str | None = None
    field = reading.text(step, "field")
    if field is not None:
        value = turn.working_record().get(field)
        if value is None or (isinstance(value, str) and not value.strip()):
            said = f"{field} is empty, so there is no record to run {name} on"
            lane.outcome = state.REFUSED
            faults.take(turn, step, lane, "subflow.no_record", said, said)
            return
        record_id = str(value).strip()
    lane.attempts = 1
    lane.pending = turn.key(step, lane)
    lane.status = statuses.LaneStatus.COMMANDING
    _ask(turn, step, lane, name, record_id)


def _ask(
    turn: Turn, step: snapshot.StepSpec, lane: state.LaneState, name: str, record_id: str | None
) -> None:
    key = turn.key(step, lane)
    turn.emitted.add(key)
    turn.effects.append(effects.StartSubflow(key, step.id, lane.pass_, name, record_id))


def on_result(
    turn: Turn, step: snapshot.StepSpec, lane: state.LaneState, result: happened.CommandResult
) -> None:
    """The driver's answer to the start: the child's run id, or why it did not start."""
    if lane.status != statuses.LaneStatus.COMMANDING or result.key != lane.pending:
        return
    lane.pending = None
    name = flow_name(step)
    run = (result.answer or {}).get("run")
    if not result.ok or not isinstance(run, int):
        error = result.error or {}
        said = str(error.get("message") or "it could not be started")
        lane.outcome = state.REFUSED
        message = f"subflow {name} could not start: {said}"
        faults.take(turn, step, lane, "subflow.refused", message, said, result.error)
        return
    lane.child = run
    lane.waiting_since = turn.now
    lane.status = statuses.LaneStatus.WAITING
    detail: shapes.JsonDict = {"flow": name, "run": run, "until": _iso(lane)}
    record = (result.answer or {}).get("record")
    if reading.text(step, "field") is not None and record is not None:
        detail["record"] = str(record)
    turn.log("subflow", detail, step, lane)


def tick(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    """A waiting subflow step: its child's end once the run sees it, else its give-up."""
    ended = _ended(turn, lane)
    name = flow_name(step)
    if ended is not None and turn.sees_record(lane):
        detail: shapes.JsonDict = {"flow": name, "run": ended.run, "status": ended.status}
        if ended.status == DONE:
            turn.finish(step, lane, "subflow_done", detail=detail)
            return
        said = _why(name, ended)
        lane.outcome = state.REFUSED  # a retry starts the subflow again, as a new run
        faults.take(turn, step, lane, "subflow.failed", said, said, {"run": ended.run, **detail})
        return
    if lane.deadline is not None and lane.deadline <= turn.now:
        detail = {"flow": name, "run": lane.child, "duration": reading.text(step, "duration")}
        turn.finish(step, lane, "timed_out", "timed_out", detail)


def _ended(turn: Turn, lane: state.LaneState) -> happened.ChildEnded | None:
    for ended in turn.seen.children:
        if ended.run == lane.child:
            return ended
    return None


def _why(name: str, ended: happened.ChildEnded) -> str:
    """``subflow Credit check (run 12) failed: ...``."""
    head = f"subflow {name} (run {ended.run})"
    if ended.status == GONE:
        return f"{head} is gone"
    verb = "was cancelled" if ended.status == CANCELLED else "failed"
    return f"{head} {verb}" + (f": {ended.reason}" if ended.reason else "")


def reissue(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    """Ask again for a start whose answer never came (the start is kept by its key)."""
    if (
        lane.status == statuses.LaneStatus.COMMANDING
        and lane.pending
        and lane.pending not in turn.emitted
    ):
        field = reading.text(step, "field")
        record_id = None
        if field is not None:
            value = turn.working_record().get(field)
            record_id = None if value is None else str(value).strip()
        _ask(turn, step, lane, flow_name(step), record_id)


def _iso(lane: state.LaneState) -> str | None:
    return None if lane.deadline is None else lane.deadline.isoformat()
