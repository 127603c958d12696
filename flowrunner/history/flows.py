"""A run's history in sentences: each line in the flow's own words, naming who and what.

The engine writes each history line as a code programs read (``what``: ``answered``,
``waiting``, ``condition``, ...) with its details (``{"who": "bob", "received": 2,
"needed": 3}``); ``sentence`` turns one line into the sentence a business user reads::

    bob approved (2 of 3; waiting for cara)
    Asked ann, bob and cara for approval (all 3 must answer by Mon 9 Mar 09:00)
    Reminded bob and cara (2nd reminder)
    Waited until Tue 3 Mar 09:00 (due_at − 1 hour)
    Status is not rejected: went on at Tell the requester
    Stopped waiting: bob rejected it
    Sent to supplier
    Told ann (requester): Your order was approved
    Send to supplier failed (the supplier refused: order on hold) — went on at Cancel
    Escalated to mia (manager) after 2 days: Manager approval has waited 2 days and …

Pure: no SQL, no clock. Times are shown on the binding's wall clock (``tz``; UTC
without one). Lines written before details were structured (a text detail) read as
their code's words followed by that text. ``runner.history()`` fills
``LogRow.sentence`` with it; ``CODES`` lists every code a sentence is made for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import tzinfo
from typing import Protocol, TypeVar

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import waits
from flowrunner.foundations import shapes
from flowrunner.history import programs, runs
from flowrunner.history.words import (
    Line,
    Say,
    condition_words,
    did,
    event_words,
    listed,
    ordinal,
    times,
    when,
    who_did,
    would,
)

# What callers read here; the words (moments, names, conditions) are made in history_words.
__all__ = [
    "CODES",
    "REMINDER_OUTCOMES",
    "Line",
    "condition_words",
    "event_words",
    "listed",
    "one_line_each",
    "ordinal",
    "reminder_key",
    "sentence",
    "waiting_sentence",
    "when",
]

_VERB = re.compile(r"^[A-Za-z]+ed$")


def sentence(
    line: Line,
    snap: snapshot.FlowSnapshot | None = None,
    tz: tzinfo | None = None,
    *,
    tried: bool = False,
    names: Mapping[str, str] | None = None,
) -> str:
    """The line as one sentence in the flow's own words.

    ``snap`` is the run's snapshot (a goto names its target step by title); ``tz`` the
    wall clock times are shown on. ``tried``: the line of a try of the flow, where
    nothing leaves the try — its commands and notices read ``Would run``, ``Would tell``.
    ``names``: records' names by id (``engine.record_names``), for a line naming one.

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
    if line.what in ("started", "done") and (detail is None or detail in _PLAIN_TEXTS):
        detail = {}  # a step's start or end needs no detail: it names the step
    if render is None:
        return _legacy(line.what, detail)
    if not isinstance(detail, Mapping):
        return _legacy(line.what, detail)
    return render(Say(line, detail, snap, tz, tried, names))


class Stored(Line, Protocol):
    """A stored history line: a ``LogRow``, with the step and pass it is about."""

    @property
    def step_id(self) -> object: ...

    @property
    def pass_(self) -> int | None: ...


L = TypeVar("L", bound=Stored)


def one_line_each(lines: Sequence[L]) -> list[L]:
    """The lines a reader is shown: one line per reminder.

    The engine writes a reminder twice — ``reminder`` as it sends it, then ``reminded``
    (or ``reminder_failed``) once it is sent — so a run that stopped in between still
    says it was sending one. Once the outcome is written, the first line says nothing
    more and is left out; both stay in the store for programs.
    """
    sent = {reminder_key(line) for line in lines if line.what in REMINDER_OUTCOMES}
    return [line for line in lines if line.what != "reminder" or reminder_key(line) not in sent]


# The codes that say how a reminder went; a ``reminder`` line before them says no more.
REMINDER_OUTCOMES = ("reminded", "reminder_failed")


def reminder_key(line: Stored) -> tuple[object, object, object]:
    """Which reminder a line is about: its step, pass and number."""
    number = line.detail.get("reminder") if isinstance(line.detail, Mapping) else None
    return (str(line.step_id), line.pass_, number)


def waiting_sentence(waiting: waits.Waiting, tz: tzinfo | None = None) -> str:
    """Where an open run stands (one of ``RunRow.waiting``), as a sentence.

    >>> from flowrunner.flows.interpreter.waits import Awaits, Waiting
    >>> w = Waiting(position=10, step_id="7", title="Finance", kind="approval",
    ...     awaits=Awaits.EVENT, status="waiting", event="po.decided", asked=2, needed=2,
    ...     received=1, asked_names=("cfo", "ctl"), answered=("cfo",))
    >>> waiting_sentence(w)
    'Waits at Finance (position 10) for the po decided event: 1 of 2 answered, waiting for ctl'
    """
    at = f"Waits at {waiting.title or waiting.kind} (position {waiting.position})"
    until = when(waiting.until, tz) if waiting.until is not None else None
    if waiting.awaits == waits.Awaits.TIME:
        if until is None:
            return f"{at} while {waiting.field or 'its date'} is empty" + _escalating(waiting, tz)
        return f"{at} until {until}" + _escalating(waiting, tz)
    if waiting.awaits == waits.Awaits.EVENT:
        said = f"{at} for {event_words(waiting.event)}"
        if waiting.needed is not None:
            said += f": {waiting.received or 0} of {waiting.needed} answered"
            missing = [n for n in waiting.asked_names if n not in waiting.answered]
            if missing:
                said += f", waiting for {listed(missing)}"
        said = f"{said}; gives up at {until}" if until else said
        return said + _escalating(waiting, tz)
    if waiting.awaits == waits.Awaits.SUBFLOW:
        said = f"{at} for subflow {waiting.subflow or 'its flow'}"
        said += f" (run {waiting.child}) to end" if waiting.child is not None else " to end"
        return f"{said}; gives up at {until}" if until else said
    if waiting.awaits == waits.Awaits.COMMAND:
        return f"{at} for its command's answer"
    if waiting.awaits == waits.Awaits.RETRY:
        return f"{at} to try its command again at {until}" if until else f"{at} to try again"
    return f"{at}: it starts next"


def _escalating(waiting: waits.Waiting, tz: tzinfo | None) -> str:
    """``; tells the manager at Wed 4 Mar 09:00`` (or ``; told the manager``), if it escalates."""
    if waiting.escalate_to is None:
        return ""
    if waiting.escalated or waiting.escalate_at is None:
        return f"; told the {waiting.escalate_to}"
    return f"; tells the {waiting.escalate_to} at {when(waiting.escalate_at, tz)}"


# -- the sentences of a flow's lines, code by code ----------------------------------------


def _step(say: Say) -> str:
    """The step a line is about, by its title: ``Manager approval``, ``the send step``."""
    if say.title:
        return say.title
    return f"the {say.line.kind} step" if say.line.kind else "a step"


def _started(say: Say) -> str:
    return f"Started {_step(say)}" if say.line.kind or say.title else "Started the run"


def _set(say: Say) -> str:
    field = say.get("field", "a field")
    value = say.detail.get("value")
    if value is None or value == "":
        return f"Emptied {field}"
    return f"Set {field} to {say.value(value)}"


def _notice(say: Say) -> str:
    audience = say.get("audience", "someone")
    recipient = say.detail.get("recipient")
    message = say.detail.get("message")
    who = f"{recipient} ({audience})" if recipient else f"the {audience}"
    told = "Would tell" if say.tried else "Told"
    return f"{told} {who}: {message}" if message else f"{told} {who}"


def _undeliverable(say: Say) -> str:
    audience = say.get("audience", "someone")
    column = say.detail.get("to") or say.detail.get("column")
    why = say.detail.get("why") or say.detail.get("reason")
    if why in (None, "", "empty"):
        # The telling step's code for a recipient column with nothing in it.
        why = f"the record's {column} is empty" if column else "nobody to tell"
    return f"Could not tell the {audience}: {why}"


def _condition(say: Say) -> str:
    text = str(say.get("condition", ""))
    if "held" not in say.detail:
        # A wait whose condition held (an app kind's ``condition``): it stopped waiting,
        # for the parts of it that held (``status = withdrawn`` of an ``or``).
        parts = [str(p) for p in say.get("held_by", [])] or ([text] if text else [])
        if not parts:
            return "Stopped waiting: its condition held"
        return "Stopped waiting: " + " and ".join(_held(say, p) for p in parts)
    if say.detail.get("held"):
        return f"Went on: {condition_words(text, tz=say.tz)}"
    otherwise = _capital(condition_words(text, negated=True, tz=say.tz))
    target = say.detail.get("goto")
    if target is None:
        return f"{otherwise}: ended here"
    return f"{otherwise}: went on at {_position(say, target)}"


_ANSWER_HELD = re.compile(r"^event\.\w+ = '?([A-Za-z]+ed)'?$")


def _held(say: Say, part: str) -> str:
    """A part of a wait's condition that held: ``bob rejected it`` where it is the
    answer of whom the detail names, else the condition in words."""
    answer = _ANSWER_HELD.match(part.strip())
    who = say.detail.get("who")
    if answer and who:
        return f"{who} {answer.group(1)} it"
    return condition_words(part, tz=say.tz)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _position(say: Say, target: shapes.Json) -> str:
    try:
        number = int(target)
    except (TypeError, ValueError):
        return f"position {target}"
    titles = [s.title for s in say.snap.steps_at(number) if s.title] if say.snap else []
    return listed(titles) if titles else f"position {number}"


def _waiting(say: Say) -> str:
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
    event = event_words(say.detail.get("event"))
    return f"Waiting for {event} until {until}" if until else f"Waiting for {event}"


def _asked(say: Say, until: str | None) -> str:
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


def _offset(field: str, offset: object) -> str:
    text = str(offset or "").strip()
    if not text:
        return field
    if text.startswith("-"):
        return f"{field} − {text[1:].strip()}"
    return f"{field} + {text.removeprefix('+').strip()}"


def _command(say: Say) -> str:
    attempt = int(say.get("attempt", 1))
    if say.title:
        # A step that asks for answers (it waits for them) reads "Asked for ...".
        asks = bool(say.detail.get("asks"))
        ran = would(say.title, asks=asks) if say.tried else did(say.title, asks=asks)
    else:
        ran = f"{'Would run' if say.tried else 'Ran'} {_step(say)}"
    return ran if attempt <= 1 else f"{ran} again ({ordinal(attempt)} attempt)"


def _retry(say: Say) -> str:
    if say.detail.get("by"):
        return f"Will run again: {who_did(say.detail['by'])} retried the step"
    attempt = say.get("attempt", "an")
    error = say.detail.get("error")
    again = say.time("again_at")
    failed = f"Attempt {attempt} failed" + (f" ({error})" if error else "")
    return f"{failed}; trying again at {again}" if again else failed


def _whom(say: Say) -> str:
    names = list(say.get("to", []))
    return listed(names) if names else "those who have not answered"


def _reminder(say: Say) -> str:
    number = int(say.get("reminder", 1))
    reminding = "Would remind" if say.tried else "Reminding"
    return f"{reminding} {_whom(say)} ({ordinal(number)} reminder)"


def _reminded(say: Say) -> str:
    number = int(say.get("reminder", 1))
    reminded = "Would remind" if say.tried else "Reminded"
    return f"{reminded} {_whom(say)} ({ordinal(number)} reminder)"


def _reminder_failed(say: Say) -> str:
    number = int(say.get("reminder", 1))
    error = say.get("error", "no reason given")
    return f"Could not remind {_whom(say)} ({ordinal(number)} reminder): {error}"


def _progress(say: Say) -> str:
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


def _answered(say: Say) -> str:
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


def _arrived(say: Say) -> str:
    event = say.detail.get("event")
    if say.detail.get("counted") is False:
        named = event_words(event, article="a")
        return f"{_capital(named)} named no {say.get('by', 'answerer')}: not counted"
    return f"{_capital(event_words(event))} arrived{_progress(say)}"


def _timed_out(say: Say) -> str:
    length = say.detail.get("duration")
    after = f" after {length}" if length else ""
    if "received" in say.detail:
        received, needed = say.get("received", 0), say.detail.get("needed")
        got = f"{received} of {needed}" if needed is not None else str(received)
        missing = list(say.get("waiting_for", []))
        tail = f"; no answer from {listed(missing)}" if missing else ""
        return f"Gave up{after}: {got} answered{tail}"
    if say.line.kind == "subflow":
        run = say.detail.get("run")
        flow = say.get("flow", "its flow")
        ran = f" (run {run})" if run else ""
        return f"Gave up{after}: subflow {flow}{ran} had not ended"
    event = say.detail.get("event")
    return f"Gave up{after}: no {event_words(event, article='') if event else 'event'} came"


def _done(say: Say) -> str:
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
    if outcome == "subflow_done":
        return f"Subflow {say.get('flow', 'its flow')} ended — went on"
    if outcome == "stopped":
        # Another step at its position took its fault path.
        why = say.detail.get("why")
        return f"Stopped: {why}" if why else "Stopped"
    return f"Finished {_step(say)}" if say.line.kind or say.title else "Done"


def _subflow(say: Say) -> str:
    """``Started subflow Credit check (run 12) on order 7``."""
    flow = say.get("flow", "its flow")
    run = say.detail.get("run")
    said = f"Would start subflow {flow}" if say.tried else f"Started subflow {flow}"
    said += f" (run {run})" if run is not None and not say.tried else ""
    record = say.detail.get("record")
    said += f" on {say.record(record)}" if record is not None else ""
    until = say.time("until")
    return f"{said}; gives up at {until}" if until else said


def _subflow_cancelled(say: Say) -> str:
    run = say.detail.get("run")
    said = f"Cancelled subflow {say.get('flow', 'its flow')}" + (f" (run {run})" if run else "")
    why = say.detail.get("why")
    return f"{said}: {why}" if why else said


def _requests(say: Say) -> str:
    """What a waiting step's cancel withdraws: ``the Manager approval requests``."""
    named = say.title or say.line.kind
    return f"the {named} requests" if named else "its requests"


def _cancel(say: Say) -> str:
    why = say.get("why", "it stopped waiting")
    if not say.detail.get("command"):
        return f"Stopped waiting ({why})"
    withdrawing = "would withdraw" if say.tried else "withdrawing"
    if why == "its condition held":  # the line before said which condition
        return f"{_capital(withdrawing)} {_requests(say)}"
    return f"Stopped waiting ({why}): {withdrawing} {_requests(say)}"


def _cancel_done(say: Say) -> str:
    command = say.detail.get("command")
    if say.tried:
        return f"Would withdraw {_requests(say)}" if command else "Would tell the application"
    if command:
        return f"Withdrew {_requests(say)}"
    return "Told the application the step stopped waiting"


def _cancel_failed(say: Say) -> str:
    return f"Could not withdraw {_requests(say)}: {say.get('error', 'no reason given')}"


def _failed(say: Say) -> str:
    target = say.detail.get("on_failure")
    name = say.title or (f"The {say.line.kind} step" if say.line.kind else "")
    failed = f"{name} failed" if name else "Failed"
    if say.get("code", "") == "command.failed" and "attempts" in say.detail:
        failed += f" {times(int(say.get('attempts', 1)))}"
    failure = say.detail.get("failure") or say.detail.get("message")
    if target is None:
        return f"{failed}: {failure or 'no reason given'}"
    # The step failed, the run did not: it went on at the step's fault path.
    why = f" ({failure})" if failure else ""
    return f"{failed}{why} — went on at {_position(say, target)}"


def _escalated(say: Say) -> str:
    audience = say.get("audience", "someone")
    after = say.detail.get("after")
    waited = f" after {after}" if after else ""
    recipient = say.detail.get("recipient")
    message = say.detail.get("message")
    if not recipient and "to" in say.detail:
        column = say.detail.get("to")
        why = say.detail.get("why")
        if why in (None, "", "empty"):
            why = f"the record's {column} is empty" if column else "nobody to tell"
        return f"Could not escalate to the {audience}{waited}: {why}"
    who = f"{recipient} ({audience})" if recipient else f"the {audience}"
    escalated = "Would escalate" if say.tried else "Escalated"
    said = f"{escalated} to {who}{waited}"
    return f"{said}: {message}" if message else said


_ENDED = {"done": "Run done", "failed": "Run failed", "cancelled": "Run cancelled"}


def _ended(say: Say) -> str:
    status = str(say.detail.get("status"))
    head = _ENDED.get(status, "Run ended")
    # The step by its title alone, as the rest of the history names it.
    reason = runs.reason(str(say.get("reason", "")))
    if reason.startswith(f"{status} by "):
        return f"Run {reason}"  # "Run cancelled by olga: merged into ticket 2"
    return f"{head}: {reason}" if reason else head


def _cancelled(say: Say) -> str:
    reason = say.detail.get("reason")
    said = f"{who_did(say.get('by', 'an operator'))} cancelled the run"
    return f"{said}: {reason}" if reason else said


def _retried(say: Say) -> str:
    said = f"{who_did(say.get('by', 'an operator'))} retried the run"
    reason = say.detail.get("reason")
    return f"{said}: {reason}" if reason else said


def _redriven(say: Say) -> str:
    said = f"{who_did(say.get('by', 'an operator'))} redrove the run: it is due again now"
    reason = say.detail.get("reason")
    return f"{said} ({reason})" if reason else said


def _moved(say: Say) -> str:
    who = who_did(say.get("by", "an operator"))
    return (
        f"{who} moved the run from version {say.get('from', '?')} to version {say.get('to', '?')}"
    )


def _restarted(say: Say) -> str:
    said = f"{who_did(say.get('by', 'an operator'))} restarted the run"
    if say.detail.get("restarted_as") is not None:
        said += f" as run {say.detail['restarted_as']}"
    reason = say.detail.get("reason")
    return f"{said}: {reason}" if reason else said


_RENDER: dict[str, Callable[[Say], str]] = {
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
    "subflow": _subflow,
    "subflow_cancelled": _subflow_cancelled,
    "failed": _failed,
    "escalated": _escalated,
    "ended": _ended,
    "cancelled": _cancelled,
    "retried": _retried,
    "redriven": _redriven,
    "restarted": _restarted,
    "moved": _moved,
    **programs.RENDER,
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
    "command": "Ran a step",
    "retry": "To run again",
    "reminder": "Reminding",
    "reminded": "Reminded",
    "reminder_failed": "A reminder failed",
    "answered": "Answered",
    "arrived": "Arrived",
    "timed_out": "Gave up",
    "done": "Done",
    "cancel": "Stopped waiting",
    "cancel_done": "Told the application the step stopped waiting",
    "cancel_failed": "Could not tell the application the step stopped waiting",
    "subflow": "Started a subflow",
    "subflow_cancelled": "Cancelled a subflow",
    "failed": "Failed",
    "escalated": "Escalated",
    "ended": "Run ended",
}


# The text details a step's start and end carried before details were structured.
_PLAIN_TEXTS = ("", "done", "held", "goto", "ended", "complete")


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
