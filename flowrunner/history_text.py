"""A run's history in sentences: each line in the flow's own words, naming who and what.

The engine writes each history line as a code programs read (``what``: ``answered``,
``waiting``, ``condition``, ...) with its details (``{"who": "bob", "received": 2,
"needed": 3}``); ``sentence`` turns one line into the sentence a business user reads::

    bob approved (2 of 3; waiting for cara)
    Asked ann, bob and cara for approval (all 3 must answer by Mon 9 Mar 09:00)
    Reminded bob and cara (2nd reminder)
    Waited until Tue 3 Mar 09:00 (due_at − 1 hour)
    Took the other way: status is not rejected → position 60 (Tell the requester)
    Told ann (requester): Your order was approved

Pure: no SQL, no clock. Times are shown on the binding's wall clock (``tz``; UTC
without one). Lines written before details were structured (a text detail) read as
their code's words followed by that text. ``runner.history()`` fills
``LogRow.sentence`` with it; ``CODES`` lists every code a sentence is made for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, tzinfo
from decimal import Decimal
from typing import Any, Protocol

from flowrunner import errors, schedules, snapshot
from flowrunner.interpreter import standing
from flowrunner.query import words

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# How many names a sentence lists before it counts the rest.
_NAMES_SHOWN = 6
_ISO_MOMENT = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_VERB = re.compile(r"^[A-Za-z]+ed$")
_SUFFIXES = {1: "st", 2: "nd", 3: "rd"}


class Line(Protocol):
    """What a sentence is made from: a history line (``LogRow``, or the interpreter's
    ``Log`` effect)."""

    @property
    def what(self) -> str: ...

    @property
    def detail(self) -> object: ...

    @property
    def kind(self) -> str | None: ...

    @property
    def position(self) -> int | None: ...


def sentence(
    line: Line,
    snap: snapshot.FlowSnapshot | None = None,
    tz: tzinfo | None = None,
    *,
    tried: bool = False,
) -> str:
    """The line as one sentence in the flow's own words.

    ``snap`` is the run's snapshot (a goto names its target step by title); ``tz`` the
    wall clock times are shown on. ``tried``: the line of a try of the flow, where
    nothing leaves the try — its commands and notices read ``Would run``, ``Would tell``.

    >>> from types import SimpleNamespace as Row
    >>> detail = {"who": "bob", "answer": {"decision": "approved"}, "again": False,
    ...           "counted": True, "received": 2, "needed": 3, "waiting_for": ["cara"]}
    >>> sentence(Row(what="answered", detail=detail, kind="approval", position=10))
    'bob approved (2 of 3; waiting for cara)'
    >>> sentence(Row(what="reminded", detail={"reminder": 2, "to": ["bob", "cara"]},
    ...              kind="approval", position=10))
    'Reminded bob and cara (2nd reminder)'
    """
    render = _RENDER.get(line.what)
    detail = line.detail
    if render is None:
        return _legacy(line.what, detail)
    if not isinstance(detail, Mapping):
        return _legacy(line.what, detail)
    return render(_Say(line, detail, snap, tz, tried))


def waiting_sentence(waiting: standing.Waiting, tz: tzinfo | None = None) -> str:
    """Where an open run stands (one of ``RunRow.waiting``), as a sentence.

    >>> from flowrunner.interpreter.standing import Awaits, Waiting
    >>> w = Waiting(position=10, step_id="7", title="Finance", kind="approval",
    ...     awaits=Awaits.EVENT, status="waiting", event="po.decided", asked=2, needed=2,
    ...     received=1, asked_names=("cfo", "ctl"), answered=("cfo",))
    >>> waiting_sentence(w)
    'Waits at Finance (position 10) for po.decided: 1 of 2 answered, waiting for ctl'
    """
    at = f"Waits at {waiting.title or waiting.kind} (position {waiting.position})"
    until = when(waiting.until, tz) if waiting.until is not None else None
    if waiting.awaits == standing.Awaits.TIME:
        if until is None:
            return f"{at} while {waiting.field or 'its date'} is empty"
        return f"{at} until {until}"
    if waiting.awaits == standing.Awaits.EVENT:
        said = f"{at} for {waiting.event or 'an event'}"
        if waiting.needed is not None:
            said += f": {waiting.received or 0} of {waiting.needed} answered"
            missing = [n for n in waiting.asked_names if n not in waiting.answered]
            if missing:
                said += f", waiting for {listed(missing)}"
        return f"{said}; gives up at {until}" if until else said
    if waiting.awaits == standing.Awaits.COMMAND:
        return f"{at} for its command's answer"
    if waiting.awaits == standing.Awaits.RETRY:
        return f"{at} to try its command again at {until}" if until else f"{at} to try again"
    return f"{at}: it starts next"


def when(moment: datetime | str, tz: tzinfo | None = None) -> str:
    """A moment as a history shows it, on the wall clock ``tz``: ``Tue 3 Mar 09:00``.

    >>> when("2026-03-03T09:00:00+00:00")
    'Tue 3 Mar 09:00'
    """
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    local = moment.astimezone(tz or UTC)
    return f"{_DAYS[local.weekday()]} {local.day} {_MONTHS[local.month - 1]} {local:%H:%M}"


def listed(names: Sequence[object]) -> str:
    """``ann``, ``ann and bob``, ``ann, bob and cara`` (a long list ends ``and 4 more``)."""
    words = [str(n) for n in names]
    if len(words) > _NAMES_SHOWN:
        rest = len(words) - (_NAMES_SHOWN - 1)
        words = [*words[: _NAMES_SHOWN - 1], f"{rest} more"]
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} and {words[-1]}"


def ordinal(number: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``22nd``."""
    suffix = "th" if 10 <= number % 100 <= 20 else _SUFFIXES.get(number % 10, "th")
    return f"{number}{suffix}"


def condition_words(text: str, *, negated: bool = False, tz: tzinfo | None = None) -> str:
    """A condition as a sentence reads it, or (``negated``) what holds when it does not
    (``flowrunner.query.words``), its times on the wall clock ``tz``.

    >>> condition_words("status not in (rejected, withdrawn)", negated=True)
    'status is rejected or withdrawn'
    """
    return words.describe(text, negated=negated, value=lambda v: _value(v, tz))


# -- the sentences, code by code ---------------------------------------------------------


class _Say:
    """One line being put into words: its detail, step, snapshot and wall clock."""

    def __init__(
        self,
        line: Line,
        detail: Mapping[str, Any],
        snap: snapshot.FlowSnapshot | None,
        tz: tzinfo | None,
        tried: bool = False,
    ) -> None:
        self.line = line
        self.detail = detail
        self.snap = snap
        self.tz = tz
        self.tried = tried

    def get(self, key: str, default: Any = None) -> Any:
        value = self.detail.get(key)
        return default if value is None else value

    def time(self, key: str) -> str | None:
        value = self.detail.get(key)
        if not value:
            return None
        try:
            return when(str(value), self.tz)
        except ValueError:
            return str(value)

    def value(self, value: Any) -> str:
        return _value(value, self.tz)

    @property
    def kind(self) -> str:
        return self.line.kind or "step"


def _started(say: _Say) -> str:
    return "Started"


def _set(say: _Say) -> str:
    field = say.get("field", "a field")
    value = say.detail.get("value")
    if value is None or value == "":
        return f"Emptied {field}"
    return f"Set {field} to {say.value(value)}"


def _notice(say: _Say) -> str:
    audience = say.get("audience", "someone")
    recipient = say.detail.get("recipient")
    message = say.detail.get("message")
    who = f"{recipient} ({audience})" if recipient else f"the {audience}"
    told = "Would tell" if say.tried else "Told"
    return f"{told} {who}: {message}" if message else f"{told} {who}"


def _undeliverable(say: _Say) -> str:
    audience = say.get("audience", "someone")
    column = say.detail.get("to") or say.detail.get("column")
    why = say.detail.get("why") or say.detail.get("reason")
    if why in (None, "", "empty"):
        # The telling step's code for a recipient column with nothing in it.
        why = f"the record's {column} is empty" if column else "nobody to tell"
    return f"Could not tell the {audience}: {why}"


def _condition(say: _Say) -> str:
    text = str(say.get("condition", ""))
    if "held" not in say.detail:
        # A wait whose condition held (an app kind's ``condition``): it stopped waiting,
        # for the parts of it that held (``status = withdrawn`` of an ``or``).
        parts = [str(p) for p in say.get("held_by", [])] or ([text] if text else [])
        if not parts:
            return "Stopped waiting: its condition held"
        return "Stopped waiting: " + " and ".join(condition_words(p, tz=say.tz) for p in parts)
    if say.detail.get("held"):
        return f"Went on: {condition_words(text, tz=say.tz)}"
    otherwise = condition_words(text, negated=True, tz=say.tz)
    target = say.detail.get("goto")
    if target is None:
        return f"Ended the run here: {otherwise}"
    return f"Took the other way: {otherwise} → {_position(say, target)}"


def _position(say: _Say, target: Any) -> str:
    try:
        number = int(target)
    except (TypeError, ValueError):
        return f"position {target}"
    titles = [s.title for s in say.snap.steps_at(number) if s.title] if say.snap else []
    return f"position {number} ({listed(titles)})" if titles else f"position {number}"


def _waiting(say: _Say) -> str:
    kind = say.line.kind
    until = say.time("until")
    if kind == "wait":
        length = say.detail.get("duration")
        lasting = f" {length}" if length else ""
        return f"Waiting{lasting}, until {until}" if until else f"Waiting{lasting}"
    if kind == "until":
        field = say.get("field", "its date")
        if until is None:
            return f"Waiting while {field} is empty"
        return f"Waiting until {until} ({_offset(field, say.detail.get('offset'))})"
    if "asked" in say.detail or "needed" in say.detail:
        return _asked(say, until)
    event = say.get("event", "an event")
    return f"Waiting for {event} until {until}" if until else f"Waiting for {event}"


def _asked(say: _Say, until: str | None) -> str:
    names = list(say.get("names", []))
    asked = int(say.get("asked", len(names)))
    needed = int(say.get("needed", asked))
    counted = "one person" if asked == 1 else f"{asked} people"
    whom = listed(names) if names else counted
    if needed == 0:
        return f"Asked {whom} for {say.kind}; no answer is needed"
    if asked == 1 and needed == 1:
        must = "must answer"
    elif needed == asked:
        must = "both must answer" if asked == 2 else f"all {asked} must answer"
    else:
        must = f"{needed} of {asked} must answer" if asked else f"{needed} answers needed"
    return f"Asked {whom} for {say.kind} ({must}{f' by {until}' if until else ''})"


def _offset(field: str, offset: Any) -> str:
    text = str(offset or "").strip()
    if not text:
        return field
    if text.startswith("-"):
        return f"{field} − {text[1:].strip()}"
    return f"{field} + {text.removeprefix('+').strip()}"


def _command(say: _Say) -> str:
    command = say.get("command", "its command")
    attempt = int(say.get("attempt", 1))
    ran = "Would run" if say.tried else "Ran"
    return f"{ran} {command}" if attempt <= 1 else f"{ran} {command} again (attempt {attempt})"


def _retry(say: _Say) -> str:
    if say.detail.get("by"):
        return f"Will run again: {_by(say.detail['by'])} retried the step"
    attempt = say.get("attempt", "an")
    error = say.detail.get("error")
    again = say.time("again_at")
    failed = f"Attempt {attempt} failed" + (f" ({error})" if error else "")
    return f"{failed}; trying again at {again}" if again else failed


def _by(who: object) -> str:
    return "an operator" if who == "operator" else str(who)


def _whom(say: _Say) -> str:
    names = list(say.get("to", []))
    return listed(names) if names else "those who have not answered"


def _reminder(say: _Say) -> str:
    number = int(say.get("reminder", 1))
    return f"Sending the {ordinal(number)} reminder to {_whom(say)}"


def _reminded(say: _Say) -> str:
    number = int(say.get("reminder", 1))
    reminded = "Would remind" if say.tried else "Reminded"
    return f"{reminded} {_whom(say)} ({ordinal(number)} reminder)"


def _reminder_failed(say: _Say) -> str:
    number = int(say.get("reminder", 1))
    error = say.get("error", "no reason given")
    return f"Could not remind {_whom(say)} ({ordinal(number)} reminder): {error}"


def _progress(say: _Say) -> str:
    received = say.detail.get("received")
    needed = say.detail.get("needed")
    if received is None:
        return ""
    if needed is None:
        return f" ({received} so far)"
    missing = list(say.get("waiting_for", []))
    text = f"{received} of {needed}"
    if missing and int(received) < int(needed):
        text += f"; waiting for {listed(missing)}"
    return f" ({text})"


def _answered(say: _Say) -> str:
    who = say.get("who", "someone")
    answer = {k: v for k, v in dict(say.get("answer", {})).items() if v not in (None, "")}
    if len(answer) == 1 and _VERB.match(str(next(iter(answer.values())))):
        said = f"{who} {next(iter(answer.values()))}"
    elif answer:
        said = f"{who} answered " + ", ".join(f"{k} {say.value(v)}" for k, v in answer.items())
    else:
        said = f"{who} answered"
    if say.detail.get("asked") is False:
        return f"{said} but was not asked: not counted"
    if say.detail.get("again"):
        said += " again"
    return said + _progress(say)


def _arrived(say: _Say) -> str:
    event = say.get("event", "an event")
    if say.detail.get("counted") is False:
        return f"A {event} event named no {say.get('by', 'answerer')}: not counted"
    return f"{event} arrived{_progress(say)}"


def _timed_out(say: _Say) -> str:
    length = say.detail.get("duration")
    after = f" after {length}" if length else ""
    if "received" in say.detail:
        received, needed = say.get("received", 0), say.detail.get("needed")
        got = f"{received} of {needed}" if needed is not None else str(received)
        missing = list(say.get("waiting_for", []))
        tail = f"; no answer from {listed(missing)}" if missing else ""
        return f"Gave up{after}: {got} answered{tail}"
    event = say.get("event", "the event")
    return f"Gave up{after}: no {event} came"


def _done(say: _Say) -> str:
    outcome = say.detail.get("outcome")
    kind = say.line.kind
    until = say.time("until")
    if kind == "wait" and until:
        length = say.detail.get("duration")
        return f"Waited {length}, until {until}" if length else f"Waited until {until}"
    if kind == "until" and until:
        return f"Waited until {until} ({_offset(say.get('field', 'its date'), say.get('offset'))})"
    if outcome == "complete":
        received, needed = say.detail.get("received"), say.detail.get("needed")
        if received is not None and needed is not None:
            return f"Got the answers it needed ({received} of {needed})"
        return "Got the answers it needed"
    return "Done"


def _cancel(say: _Say) -> str:
    why = say.get("why", "it stopped waiting")
    command = say.detail.get("command")
    running = "would run" if say.tried else "running"
    ran = f"; {running} {command}" if command else ""
    return f"Stopped waiting ({why}){ran}"


def _cancel_done(say: _Say) -> str:
    command = say.detail.get("command")
    if say.tried:
        return f"Would run {command}" if command else "Would tell the application"
    return f"Ran {command}" if command else "Told the application the step stopped waiting"


def _cancel_failed(say: _Say) -> str:
    command = say.get("command", "the cancel command")
    return f"{command} failed: {say.get('error', 'no reason given')}"


def _failed(say: _Say) -> str:
    return f"Failed: {say.get('message', 'no reason given')}"


_ENDED = {"done": "Run done", "failed": "Run failed", "cancelled": "Run cancelled"}


def _ended(say: _Say) -> str:
    status = str(say.detail.get("status"))
    head = _ENDED.get(status, "Run ended")
    reason = str(say.get("reason", ""))
    if reason.startswith(f"{status} by "):
        return f"Run {reason}"  # "Run cancelled by olga: merged into ticket 2"
    return f"{head}: {reason}" if reason else head


def _cancelled(say: _Say) -> str:
    reason = say.detail.get("reason")
    said = f"{_by(say.get('by', 'an operator'))} cancelled the run"
    return f"{said}: {reason}" if reason else said


def _retried(say: _Say) -> str:
    said = f"{_by(say.get('by', 'an operator'))} retried the run"
    reason = say.detail.get("reason")
    return f"{said}: {reason}" if reason else said


def _redriven(say: _Say) -> str:
    said = f"{_by(say.get('by', 'an operator'))} redrove the run: it is due again now"
    reason = say.detail.get("reason")
    return f"{said} ({reason})" if reason else said


def _restarted(say: _Say) -> str:
    said = f"{_by(say.get('by', 'an operator'))} restarted the run"
    if say.detail.get("restarted_as") is not None:
        said += f" as run {say.detail['restarted_as']}"
    reason = say.detail.get("reason")
    return f"{said}: {reason}" if reason else said


def _job_planned(say: _Say) -> str:
    said = f"Planned by {say.get('event', 'an event')}"
    at = say.time("run_at")
    if at:
        said += f" for {at}"
    return f"{said} (key {say.detail['key']})" if say.detail.get("key") else said


def _job_zone(say: _Say) -> tzinfo | None:
    """A job at times' slots are shown on its own wall clock."""
    name = say.detail.get("timezone")
    if not isinstance(name, str) or not name:
        return say.tz
    try:
        return schedules.zone(name)
    except errors.BindingError:
        return say.tz


def _slot(say: _Say, key: str) -> str | None:
    value = say.detail.get(key)
    if not value:
        return None
    try:
        return when(str(value), _job_zone(say))
    except ValueError:
        return str(value)


def _job_scheduled(say: _Say) -> str:
    every = say.get("every", "its schedule")
    zone = say.detail.get("timezone")
    said = f"Scheduled {every}" + (f" ({zone})" if zone else "")
    first = _slot(say, "first")
    return f"{said}; first slot {first}" if first else said


def _job_ran(say: _Say) -> str:
    command = say.get("command", "its command")
    if say.detail.get("by"):
        return f"{_by(say.detail['by'])} ran {command} by hand"
    said = f"Ran {command}"
    slot = _slot(say, "slot")
    if slot:
        said += f" for the slot {slot}"
    attempt = int(say.get("attempt", 1))
    if attempt > 1:
        said += f" (attempt {attempt})"
    missed = _slot(say, "missed_from")
    return f"{said}; the slots missed from {missed} were skipped" if missed else said


def _job_failed(say: _Say) -> str:
    command = say.get("command", "its command")
    error = say.get("error", "no reason given")
    if say.detail.get("by"):
        return f"{_by(say.detail['by'])} ran {command} by hand: it failed ({error})"
    slot = _slot(say, "slot")
    said = f"{command} failed" + (f" for the slot {slot}" if slot else "")
    return f"{said} ({error}); the job waits for its next slot"


# -- a code workflow's steps (flowrunner.workflows) ---------------------------------------


def _step_name(say: _Say) -> str:
    return f" ({say.get('name', say.line.kind or 'step')})"


def _workflow_step(say: _Say) -> str:
    kind, target = say.line.kind, say.get("target", "")
    named = _step_name(say)
    refused = say.detail.get("refused")
    if kind == "run":
        return f"{target} refused{named}: {refused}" if refused else f"Ran {target}{named}"
    if kind == "call":
        if refused:
            return f"{target} refused the call{named}: {refused}"
        return f"Called {target}: {say.get('request', 'a request')}{named}"
    at = say.time("at")
    if kind == "wait_for":
        if say.detail.get("arrived"):
            return f"{target} arrived{named}"
        return f"No {target} came by {at}{named}" if at else f"No {target} came{named}"
    if kind in ("sleep", "until") and at:
        return f"{'Slept' if kind == 'sleep' else 'Waited'} until {at}{named}"
    if kind == "now" and at:
        return f"Took the time: {at}{named}"
    return f"Done{named}"


def _workflow_waiting(say: _Say) -> str:
    until = say.time("until")
    named = _step_name(say)
    if say.line.kind == "wait_for":
        event = say.get("target", "an event")
        return (
            f"Waiting for {event} until {until}{named}" if until else f"Waiting for {event}{named}"
        )
    if until and say.line.kind == "sleep":
        return f"Sleeping until {until}{named}"
    return f"Waiting until {until}{named}" if until else f"Waiting{named}"


def _diverged(say: _Say) -> str:
    return f"Diverged: {say.get('message', 'the code asked for another step')}"


def _timer_passed(say: _Say) -> str:
    column = say.get("column", "its date")
    instant = say.time("instant")
    return f"{column} passed ({instant})" if instant else f"{column} passed"


def _timer_fired(say: _Say) -> str:
    command = say.get("command", "its command")
    if say.detail.get("already"):
        return f"{_timer_passed(say)}: {command} had run for it already"
    attempt = int(say.get("attempt", 1))
    again = f" (attempt {attempt})" if attempt > 1 else ""
    return f"{_timer_passed(say)}: ran {command}{again}"


def _timer_moved(say: _Say) -> str:
    column = say.get("column", "its date")
    instant = say.time("instant") or "that time"
    holds = say.time("holds")
    now = f"it holds {holds}" if holds else "it is empty"
    return f"{column} no longer holds {instant} ({now}): nothing to run"


def _timer_unmatched(say: _Say) -> str:
    command = say.get("command", "its command")
    text = str(say.get("when", ""))
    otherwise = condition_words(text, negated=True, tz=say.tz) if text else "its condition failed"
    return f"{_timer_passed(say)} but {otherwise}: {command} did not run"


def _timer_gone(say: _Say) -> str:
    command = say.get("command", "its command")
    resource = say.get("resource", "record")
    return f"{_timer_passed(say)} but the {resource} record is gone: {command} did not run"


_RENDER: dict[str, Callable[[_Say], str]] = {
    "started": _started,
    "set": _set,
    "notice": _notice,
    "undeliverable": _undeliverable,
    "condition": _condition,
    "waiting": _waiting,
    "command": _command,
    "retry": _retry,
    "reminder": _reminder,
    "reminded": _reminded,
    "reminder_failed": _reminder_failed,
    "answered": _answered,
    "arrived": _arrived,
    "timed_out": _timed_out,
    "done": _done,
    "cancel": _cancel,
    "cancel_done": _cancel_done,
    "cancel_failed": _cancel_failed,
    "failed": _failed,
    "ended": _ended,
    "cancelled": _cancelled,
    "retried": _retried,
    "redriven": _redriven,
    "restarted": _restarted,
    "job_planned": _job_planned,
    "job_scheduled": _job_scheduled,
    "job_ran": _job_ran,
    "job_failed": _job_failed,
    "workflow_step": _workflow_step,
    "workflow_waiting": _workflow_waiting,
    "diverged": _diverged,
    "timer_fired": _timer_fired,
    "timer_moved": _timer_moved,
    "timer_unmatched": _timer_unmatched,
    "timer_gone": _timer_gone,
}

# Every code a history line may carry; each has its sentence.
CODES: frozenset[str] = frozenset(_RENDER)

# A line whose detail is a text (written before details were structured, or a line
# with nothing more to say): its code's words, then the text.
_WORDS = {
    "started": "Started",
    "set": "Set",
    "notice": "Told the",
    "undeliverable": "Could not tell",
    "condition": "Condition",
    "waiting": "Waiting",
    "command": "Ran",
    "retry": "To run again",
    "reminder": "Sending a reminder",
    "reminded": "Reminded",
    "reminder_failed": "A reminder failed",
    "answered": "Answered",
    "arrived": "Arrived",
    "timed_out": "Gave up",
    "done": "Done",
    "cancel": "Stopped waiting",
    "cancel_done": "Told the application the step stopped waiting",
    "cancel_failed": "Could not tell the application the step stopped waiting",
    "failed": "Failed",
    "ended": "Run ended",
}


def _legacy(what: str, detail: object) -> str:
    text = "" if detail is None else str(detail).strip()
    if what == "notice":
        return f"Told the {text}" if text else "Told someone"
    if what in ("cancelled", "retried", "restarted") and text:
        # The operators' lines were sentences already ("cancelled by olga: ...").
        return text[0].upper() + text[1:] if what != "retried" else f"Retried {text}"
    if what == "done" and text in ("done", "held", "goto", "ended", "complete", ""):
        return "Done"
    head = _WORDS.get(what)
    if head is None:
        head = what.replace("_", " ").capitalize() if what else "Something happened"
    return f"{head}: {text}" if text else head


# -- values in words ---------------------------------------------------------------------


def _value(value: Any, tz: tzinfo | None) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return when(value, tz)
    if isinstance(value, date):
        return f"{_DAYS[value.weekday()]} {value.day} {_MONTHS[value.month - 1]} {value.year}"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, str) and _ISO_MOMENT.match(value):
        try:
            return when(value, tz)
        except ValueError:
            return value
    return str(value)
