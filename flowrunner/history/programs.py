"""The sentences of the history lines that other programs than a flow write: a job's
(planned, scheduled, ran, failed), a code workflow's steps (done, waiting, diverged),
its children and forks, a timer on a record's date (fired, moved, unmatched, gone).

``history_text.sentence`` finds them here by code (``RENDER``). Pure: no SQL, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, tzinfo

from flowrunner import errors
from flowrunner.foundations import spoken
from flowrunner.history.words import Say, condition_words, event_words, humane, when, who_did
from flowrunner.jobs import schedules


def _job_planned(say: Say) -> str:
    said = f"Planned by {event_words(say.detail.get('event'))}"
    at = say.time("run_at")
    if at:
        said += f" for {at}"
    return f"{said} (key {say.detail['key']})" if say.detail.get("key") else said


def _job_zone(say: Say) -> tzinfo | None:
    """A job at times' slots are shown on its own wall clock."""
    name = say.detail.get("timezone")
    if not isinstance(name, str) or not name:
        return say.tz
    try:
        return schedules.zone(name)
    except errors.BindingError:
        return say.tz


def _slot(say: Say, key: str) -> str | None:
    value = say.detail.get(key)
    if not value:
        return None
    try:
        return when(str(value), _job_zone(say))
    except ValueError:
        return str(value)


def _job_scheduled(say: Say) -> str:
    every = say.get("every", "its schedule")
    zone = say.detail.get("timezone")
    if say.detail.get("interval"):
        said = f"Scheduled every {every}"
    else:
        said = f"Scheduled {spoken.cron(str(every))}" + (f" ({zone})" if zone else "")
    first = _slot(say, "first")
    return f"{said}; first slot {first}" if first else said


def _job_ran(say: Say) -> str:
    command = humane(str(say.get("command", "its command")))
    if say.detail.get("by"):
        return f"{who_did(say.detail['by'])} ran {command} by hand"
    said = f"Ran {command}"
    slot = _slot(say, "slot")
    if slot:
        said += f" for the slot {slot}"
    attempt = int(say.get("attempt", 1))
    if attempt > 1:
        said += f" (attempt {attempt})"
    missed = _slot(say, "missed_from")
    if missed:
        return f"{said}; the slots missed from {missed} were skipped"
    overlapped = _slot(say, "overlapped_from")
    if overlapped:
        return f"{said}; {_overlapped(say, overlapped)} came while the last one ran: skipped"
    return said


def _overlapped(say: Say, first: str) -> str:
    last = _slot(say, "overlapped_to")
    return f"the slot {first}" if not last or last == first else f"the slots {first} to {last}"


def _job_skipped(say: Say) -> str:
    following = _slot(say, "next")
    then = f"; the job runs next at {following}" if following else ""
    overlapped = _slot(say, "overlapped_from")
    if overlapped:
        return f"Skipped {_overlapped(say, overlapped)}, which came while the last one ran{then}"
    first, last = _slot(say, "missed_from"), _slot(say, "missed_to")
    if not first:
        missed = "the slots missed"
    elif not last or last == first:
        missed = f"the slot {first}"
    else:
        missed = f"the slots {first} to {last}"
    return f"Skipped {missed}, as no worker served or the job was paused{then}"


def _job_started(say: Say) -> str:
    run = say.detail.get("run")
    slot = _slot(say, "slot") or "its slot"
    if run is None:
        return f"The slot {slot} had its run already"
    return f"Started run {run} for the slot {slot}, beside any slot still running"


def _job_already(say: Say) -> str:
    command = humane(str(say.get("command", "its command")))
    return f"The slot {_slot(say, 'slot') or '?'} had run already: {command} did not run again"


def _job_tenants(say: Say) -> str:
    tenants = say.detail.get("tenants") or []
    named = ", ".join(str(tenant) for tenant in tenants)
    whom = f"tenant {named}" if len(tenants) == 1 else f"tenants {named}"
    return f"Started the job for {whom} from the slot {_slot(say, 'slot') or '?'}"


def _job_parked(say: Say) -> str:
    return f"The job is paused: the slot {_slot(say, 'slot') or '?'} waits until it is resumed"


def _job_paused(say: Say) -> str:
    return f"{who_did(say.detail.get('by') or 'an operator')} paused the job"


def _job_resumed(say: Say) -> str:
    return f"{who_did(say.detail.get('by') or 'an operator')} resumed the job"


def _job_failed(say: Say) -> str:
    command = humane(str(say.get("command", "its command")))
    error = say.get("error", "no reason given")
    if say.detail.get("by"):
        return f"{who_did(say.detail['by'])} ran {command} by hand: it failed ({error})"
    slot = _slot(say, "slot")
    said = f"{command[:1].upper()}{command[1:]} failed" + (f" for the slot {slot}" if slot else "")
    return f"{said} ({error}); the job waits for its next slot"


# -- a flow that starts on a schedule (flowrunner.flows.scheduled) -------------------------

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _slot_name(say: Say) -> str | None:
    """A slot as people name it, on the schedule's wall clock: ``Monday 06:00``."""
    value = say.detail.get("slot")
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
    local = moment.astimezone(_job_zone(say) or UTC)
    return f"{_WEEKDAYS[local.weekday()]} {local:%H:%M}"


def _schedule_started(say: Say) -> str:
    name = _slot_name(say)
    return f"Started by the {name} schedule" if name else "Started by its schedule"


def _schedule_slot(say: Say) -> str:
    name = _slot_name(say)
    slot = f"the {name} slot ({_slot(say, 'slot')})" if name else "its slot"
    count = int(say.get("started", 0))
    problem = say.detail.get("problem")
    if problem and count:
        said = (
            f"Started {count:,} run{'' if count == 1 else 's'} for {slot}, then stopped: {problem}"
        )
    elif problem:
        said = f"Started no run for {slot}: {problem}"
    else:
        said = f"Started {count:,} run{'' if count == 1 else 's'} for {slot}"
    missed = _slot(say, "missed_from")
    return f"{said}; the slots missed from {missed} were skipped" if missed else said


# -- a code workflow's steps (flowrunner.workflows) ---------------------------------------


def _step_name(say: Say) -> str:
    return f" ({say.get('name', say.line.kind or 'step')})"


def _workflow_step(say: Say) -> str:
    kind, target = say.line.kind, humane(str(say.get("target", "")))
    head = target[:1].upper() + target[1:]  # the target as a sentence starts with it
    named = _step_name(say)
    refused = say.detail.get("refused")
    if kind == "run":
        return f"{head} refused{named}: {refused}" if refused else f"Ran {target}{named}"
    if kind == "call":
        if refused:
            return f"{head} refused the call{named}: {refused}"
        return f"Called {target}: {say.get('request', 'a request')}{named}"
    if kind == "child":
        if refused:
            return f"{head} failed{named}: {refused}"
        run = say.detail.get("run")
        return f"{head} (run {run}) done{named}" if run else f"{head} done{named}"
    at = say.time("at")
    if kind == "wait_for":
        event = say.detail.get("target")
        if say.detail.get("arrived"):
            arrived = event_words(event)
            return f"{arrived[:1].upper()}{arrived[1:]} arrived{named}"
        came = f"No {event_words(event, article='')}" if event else "No event"
        return f"{came} came by {at}{named}" if at else f"{came} came{named}"
    if kind in ("sleep", "until") and at:
        return f"{'Slept' if kind == 'sleep' else 'Waited'} until {at}{named}"
    if kind == "now" and at:
        return f"Took the time: {at}{named}"
    return f"Done{named}"


def _workflow_waiting(say: Say) -> str:
    until = say.time("until")
    named = _step_name(say)
    if say.line.kind == "child":
        workflow = humane(str(say.get("target", "a workflow")))
        run = say.detail.get("run")
        started = f"Started {workflow} as run {run}" if run else f"Started {workflow}"
        return f"{started}; waiting for it to end{named}"
    if say.line.kind == "wait_for":
        event = event_words(say.detail.get("target"))
        return (
            f"Waiting for {event} until {until}{named}" if until else f"Waiting for {event}{named}"
        )
    if until and say.line.kind == "sleep":
        return f"Sleeping until {until}{named}"
    return f"Waiting until {until}{named}" if until else f"Waiting{named}"


def _diverged(say: Say) -> str:
    return f"Diverged: {say.get('message', 'the code asked for another step')}"


def _started_as_child(say: Say) -> str:
    parent = say.get("run", "?")
    step = say.detail.get("step")
    return f"Started by run {parent} at its step {step!r}" if step else f"Started by run {parent}"


def _cancelled_with_parent(say: Say) -> str:
    said = f"Cancelled with its parent, run {say.get('parent', '?')}"
    reason = say.detail.get("reason")
    return f"{said} ({reason})" if reason else said


def _steps(count: int) -> str:
    return f"{count} step{'' if count == 1 else 's'}"


def _forked(say: Say) -> str:
    said = f"{who_did(say.get('by', 'an operator'))} forked the run from {say.get('step', '?')!r}"
    if say.detail.get("forked_as") is not None:
        said += f" as run {say.detail['forked_as']}"
    reason = say.detail.get("reason")
    return f"{said}: {reason}" if reason else said


def _forked_from(say: Say) -> str:
    step = say.get("step", "?")
    said = f"Forked by {who_did(say.get('by', 'an operator'))} from run {say.get('run', '?')}"
    said += f" at {step!r} ({_steps(int(say.get('kept', 0)))} before it kept as recorded)"
    reason = say.detail.get("reason")
    return f"{said}: {reason}" if reason else said


def _timer_passed(say: Say) -> str:
    column = say.get("column", "its date")
    instant = say.time("instant")
    return f"{column} passed ({instant})" if instant else f"{column} passed"


def _timer_fired(say: Say) -> str:
    command = humane(str(say.get("command", "its command")))
    if say.detail.get("already"):
        return f"{_timer_passed(say)}: {command} had run for it already"
    attempt = int(say.get("attempt", 1))
    again = f" (attempt {attempt})" if attempt > 1 else ""
    return f"{_timer_passed(say)}: ran {command}{again}"


def _timer_moved(say: Say) -> str:
    column = say.get("column", "its date")
    instant = say.time("instant") or "that time"
    holds = say.time("holds")
    now = f"it holds {holds}" if holds else "it is empty"
    return f"{column} no longer holds {instant} ({now}): nothing to run"


def _timer_unmatched(say: Say) -> str:
    command = humane(str(say.get("command", "its command")))
    text = str(say.get("when", ""))
    otherwise = condition_words(text, negated=True, tz=say.tz) if text else "its condition failed"
    return f"{_timer_passed(say)} but {otherwise}: {command} did not run"


def _timer_gone(say: Say) -> str:
    command = humane(str(say.get("command", "its command")))
    resource = say.get("resource", "record")
    return f"{_timer_passed(say)} but the {resource} record is gone: {command} did not run"


def _turn_waited(say: Say) -> str:
    """A run whose command's limit had no turn for it (any program's: ``engine/worker``)."""
    limit = say.get("limit", "its limit")
    ahead = int(say.get("ahead", 0))
    again = say.time("again_at")
    said = f"Waiting its turn of {limit}"
    if ahead:
        said += f" ({ahead} run{'s' if ahead != 1 else ''} ahead)"
    return f"{said}; trying again at {again} or when a turn frees" if again else said


# Each code these programs write, and its sentence.
RENDER: dict[str, Callable[[Say], str]] = {
    "job_planned": _job_planned,
    "job_scheduled": _job_scheduled,
    "job_ran": _job_ran,
    "job_failed": _job_failed,
    "schedule_started": _schedule_started,
    "schedule_slot": _schedule_slot,
    "job_skipped": _job_skipped,
    "job_started": _job_started,
    "job_already": _job_already,
    "job_tenants": _job_tenants,
    "job_parked": _job_parked,
    "job_paused": _job_paused,
    "job_resumed": _job_resumed,
    "workflow_step": _workflow_step,
    "workflow_waiting": _workflow_waiting,
    "diverged": _diverged,
    "started_as_child": _started_as_child,
    "cancelled_with_parent": _cancelled_with_parent,
    "forked": _forked,
    "forked_from": _forked_from,
    "timer_fired": _timer_fired,
    "timer_moved": _timer_moved,
    "timer_unmatched": _timer_unmatched,
    "timer_gone": _timer_gone,
    "turn_waited": _turn_waited,
}
