"""What happens while a flow is tried: who answers, what the application changes, which
command refuses — as typed items, or read from lines written the way people say them.

A try (``FlowRunner.try_flow``) runs a flow on one record on a clock of its own; its
script is the world around the run. Each item happens ``after`` a time counted from the
start of the try (at once when it says nothing)::

    Answer(who="bob", says="approved", after="2 days")     # bob answers the step he was asked
    Change(values={"status": "withdrawn"}, after="1 day")  # the application changes the record
    Refusal(command="send_purchase_order", reason="the supplier is closed")

The same as text, one item a line (``read``; keywords in any case)::

    WHO VERB [with FIELD = VALUE, ...] [after DURATION]     bob approves after 2 days
    EVENT arrives [with FIELD = VALUE, ...] [after DURATION]  ticket.replied arrives after 1 day
    COLUMN becomes VALUE [after DURATION]                   status becomes withdrawn after 1 day
    COMMAND refuses [because REASON]                        send_purchase_order refuses
    nobody answers                                          (nothing happens: an empty line too)

A verb says what its past form says (``approves`` says ``approved``, ``denies``
``denied``; ``answers`` says nothing more). Values are written as a set step's value is
(``'on hold'`` in quotes when it has spaces). What the items mean for one flow — which
event, whose answer, which field — is ``flowrunner.flows.trial.plan``'s. A line that cannot be
read raises ``Unreadable`` with one of ``CODES`` and a sentence saying what to write.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta

from flowrunner import errors
from flowrunner.foundations import durations, shapes

# Every code a problem of a try's script can carry, and what it means.
CODES = {
    "answer_unreadable": "a line that is none of the forms a script is written in",
    "duration_invalid": "an 'after' that is not a duration (or a negative one)",
    "answer_too_late": "an item that happens after the try ends",
    "event_unknown": "an event that is not one of the binding's",
    "event_ambiguous": "an answer that does not name its event, where the steps wait for several",
    "event_not_awaited": "an answer when no step of the flow waits for an event",
    "who_unknown": "an answer by someone, to an event that names nobody",
    "answer_ambiguous": "a verb, where the waiting steps read several fields of the answer",
    "field_invalid": "an answer's field that is not a plain name, or a value that cannot be sent",
    "column_unknown": "a change of a column the record does not have",
    "column_not_changeable": "a change of the record's key or tenant",
    "value_invalid": "a change's value that does not fit its column",
    "command_unknown": "a refusal of a command no kind of the binding runs",
}

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = r"(?:'[^']*'|\"[^\"]*\"|\S+)"
_VERB = re.compile(r"[a-z]+s")
_ANSWER = re.compile(
    rf"(?P<who>{_TOKEN})\s+(?P<verb>[A-Za-z]+)(?:\s+with\s+(?P<fields>.+))?", re.I | re.S
)
_ARRIVES = re.compile(r"(?P<event>\S+)\s+arrives(?:\s+with\s+(?P<fields>.+))?", re.I | re.S)
_BECOMES = re.compile(r"(?P<column>\S+)\s+becomes\s+(?P<value>.+)", re.I | re.S)
_REFUSES = re.compile(r"(?P<command>\S+)\s+refuses(?:\s+because\s+(?P<reason>.+))?", re.I | re.S)
_NOBODY = re.compile(r"(?:nobody|no one|no-one)\s+answers", re.I)
_AFTER = re.compile(r"\s+after\s+", re.I)

After = str | timedelta


@dataclass(frozen=True)
class Answer:
    """An answer to the steps waiting for an event: ``bob approves after 2 days``.

    ``who`` answers (the kind's answerer field), ``says`` what (the field the waiting
    steps read, ``approved``); ``event`` is needed only where the flow waits for several;
    ``fields`` are more of the event's fields. Without ``who`` and ``says`` it is the
    event arriving: ``Answer(event="ticket.replied", after="1 day")``.
    """

    who: str | None = None
    says: str | None = None
    event: str | None = None
    fields: shapes.Payload = field(default_factory=dict)
    after: After = timedelta(0)


@dataclass(frozen=True)
class Change:
    """The application changes the record: ``status becomes withdrawn after 1 day``.

    ``values`` are Python values of their columns; with ``written`` they are text as a
    set step's value is written (``'on hold'`` in quotes, ``today() + 2 days``), as a
    line gives them.
    """

    values: shapes.Row
    after: After = timedelta(0)
    written: bool = False


@dataclass(frozen=True)
class Refusal:
    """A command refuses, for good, every time it would run: the step fails with ``reason``."""

    command: str
    reason: str = "it refused in the try"


Item = Answer | Change | Refusal


class Unreadable(ValueError):
    """A line of a script that cannot be read; ``code`` says how (``CODES``)."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)


# -- reading lines -------------------------------------------------------------------


def read(line: str) -> Item | None:
    """One line of a script as its item; None for a line that says nothing happens.

    >>> read("bob approves after 2 days")
    Answer(who='bob', says='approved', event=None, fields={}, after='2 days')
    >>> read("status becomes 'on hold' after 1 day")
    Change(values={'status': "'on hold'"}, after='1 day', written=True)
    >>> try:
    ...     read("bob approves after two days")
    ... except Unreadable as unreadable:
    ...     print(unreadable.code, "-", unreadable.message)
    duration_invalid - 'two days' is not a duration — write e.g. '2 days' or '30 minutes'
    """
    text = " ".join(line.split())
    if not text or text.startswith("#") or _NOBODY.fullmatch(text):
        return None
    body, after = _after(text)
    refused = _REFUSES.fullmatch(body)
    if refused:
        if after != timedelta(0):
            raise Unreadable(
                "answer_unreadable",
                f"'{text}': a command refuses every time it would run — leave out 'after'",
            )
        reason = (refused["reason"] or "").strip() or "it refused in the try"
        return Refusal(command=refused["command"], reason=reason)
    becomes = _BECOMES.fullmatch(body)
    if becomes:
        value = becomes["value"].strip()
        return Change(values={becomes["column"]: value}, after=after, written=True)
    arrives = _ARRIVES.fullmatch(body)
    if arrives:
        return Answer(event=arrives["event"], fields=_fields(arrives["fields"]), after=after)
    answer = _ANSWER.fullmatch(body)
    if answer and _VERB.fullmatch(answer["verb"].lower()):
        verb = answer["verb"].lower()
        says = None if verb == "answers" else past(verb)
        who = _unquoted(answer["who"])
        return Answer(who=who, says=says, fields=_fields(answer["fields"]), after=after)
    raise Unreadable(
        "answer_unreadable",
        f"'{text}' is not a line a try reads — write e.g. 'bob approves after 2 days', "
        "'status becomes withdrawn after 1 day' or 'send_purchase_order refuses'",
    )


def past(verb: str) -> str:
    """A verb's regular past form: ``approves`` → ``approved``, ``denies`` → ``denied``.

    >>> [past(v) for v in ("approves", "rejects", "denies", "vetoes", "passes")]
    ['approved', 'rejected', 'denied', 'vetoed', 'passed']
    """
    stem = verb.lower().removesuffix("s")
    return stem + ("d" if stem.endswith("e") else "ed")


def _after(text: str) -> tuple[str, After]:
    """The line without its trailing ``after DURATION``, and the duration's text."""
    parts = _AFTER.split(text)
    if len(parts) < 2:
        return text, timedelta(0)
    body, when = " after ".join(parts[:-1]), parts[-1]
    try:
        durations.parse_duration(when)
    except errors.DurationError as exc:
        raise Unreadable("duration_invalid", exc.message) from None
    return body, when


def _fields(text: str | None) -> shapes.JsonDict:
    """``decision = rejected, reason = 'too dear'`` as the event's fields (values as text)."""
    if not text:
        return {}
    found: shapes.JsonDict = {}
    for pair in re.findall(r"(?:'[^']*'|\"[^\"]*\"|[^,])+", text):
        name, equals, value = pair.partition("=")
        name = name.strip()
        if not equals or not NAME.fullmatch(name) or not value.strip():
            raise Unreadable(
                "field_invalid",
                f"'{pair.strip()}' is not a field of the answer — write e.g. "
                "'with decision = rejected'",
            )
        found[name] = _unquoted(value.strip())
    return found


def _unquoted(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def lines(text: str | Iterable[str]) -> list[str]:
    """A script's text (one item a line) or its lines, as lines."""
    if isinstance(text, str):
        return text.splitlines()
    return list(text)
