"""Answer links: a signed address that answers one waiting step once, as one person.

``AnswerLinks.link`` makes the address an application puts in a message ("Approve",
"Reject"); ``ask`` reads what a link asks, changing nothing (a link scanner that opens
it answers nothing); ``answer`` emits the kind's ``wait_for`` event as that person, with
the link's random id as its idempotency record, in one transaction — so one link answers
once. A link that is forged or garbled, used, expired, or for a step the run no longer
waits at is refused with a sentence (``Outcome``); ``flowrunner.web.link_pages`` shows
these as pages. ``FlowRunner.answer_link`` is ``link``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from http import HTTPStatus
from typing import Any

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.binding import Kind, Tenant
from flowrunner.engine import actions, commands, operations_room
from flowrunner.engine.changes import Changes
from flowrunner.engine.mounted import Mounted
from flowrunner.flows.interpreter import state, waits
from flowrunner.foundations import answer_tokens as tokens
from flowrunner.foundations import logs, statuses
from flowrunner.history import words
from flowrunner.store import dialects, records
from flowrunner.store import operations as ops

log = logs.logger("flowrunner.answers")

# What an outcome is, as a page and a program read it.
ASK = "ask"
ANSWERED = "answered"
INVALID = "invalid"
USED = "used"
EXPIRED = "expired"
NOT_WAITING = "not_waiting"
CHANGED = "changed"
UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class Question:
    """What a valid link asks, in the words the console uses."""

    claims: tokens.Claims
    record: str
    """The record as people name it (``PO-7``: the binding's ``record_label``)."""
    resource: str
    """The resource as people name it (``Purchase orders``)."""
    step: str
    """The step's title (its kind without one)."""
    verb: str
    """What the button says: ``Approve`` for ``approved``, else ``Answer "…"``."""
    expires: str
    """When the link stops working, on the runner's wall clock."""

    @property
    def sentence(self) -> str:
        """``Approve PO-7 as ann?``"""
        return f"{self.verb} {self.record} as {self.claims.person}?"


@dataclass(frozen=True)
class Outcome:
    """What opening or confirming a link came to: its ``code`` (``ask``, ``answered``,
    ``invalid``, ``used``, ``expired``, ``not_waiting``), the HTTP ``status`` a page answers
    with, a sentence, and the question when the link was valid."""

    code: str
    status: int
    sentence: str
    question: Question | None = None
    event_id: int | None = None

    @property
    def refused(self) -> bool:
        return self.code not in (ASK, ANSWERED)


_INVALID = Outcome(INVALID, HTTPStatus.BAD_REQUEST, "This link is not valid.")
_USED = Outcome(USED, HTTPStatus.CONFLICT, "This link has already been used.")
_CHANGED = Outcome(CHANGED, HTTPStatus.CONFLICT, "This answer was given before with another body.")
UNAVAILABLE_NOW = Outcome(
    UNAVAILABLE,
    HTTPStatus.SERVICE_UNAVAILABLE,
    "This answer cannot be taken right now. Try the link again in a few minutes.",
)
"""What a page says when the engine could not answer at all (its database failing)."""


@dataclass(frozen=True)
class AskedStep:
    """The step a link answers: its run, id, position, pass, kind, and the run's tenant."""

    run_id: int
    step_id: str
    position: int
    pass_: int
    kind: str
    tenant: str | None


# A step's command key as the flow's step makes it (``flows.interpreter.turn.Turn.key``,
# prefixed with the run): ``run-7/step-12/pass-1``, then ``/retry-1`` or ``/remind-2``.
_COMMAND_KEY = re.compile(r"^run-[0-9]+/step-(?P<step>[^/]+)/pass-(?P<pass>[0-9]+)(/.*)?$")


class _Refused(Exception):
    """A link refused inside the answer's transaction, which is rolled back."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.sentence)
        self.outcome = outcome


class AnswerLinks:
    """A runner's answer links, signed with its ``links_secret`` (None: none made)."""

    def __init__(self, mounted: Mounted, secret: bytes | str | None) -> None:
        self.mounted = mounted
        self._secret: bytes | None = None
        if secret is not None:
            checked = tokens.check_secret(secret)
            if isinstance(checked, str):
                raise errors.BindingError(checked)
            self._secret = checked

    def link(
        self,
        run_id: object,
        answer: str,
        *,
        person: str,
        expires: datetime | timedelta,
        base_url: str = "/answer",
        step: int | None = None,
        tenant: Tenant = None,
    ) -> str:
        """A signed address that answers ``answer`` (``"approved"``) as ``person`` to the
        step run ``run_id`` waits at, until ``expires`` (a moment, or a time from now).

        In the step's own command (or its reminder), give its ``CommandContext`` instead
        of the run id: the link answers the step that command asks for, on this pass —
        so the message that asks can carry its Approve and Reject links.

        The address is ``base_url`` (where the application mounts
        ``web.answer_pages(runner)``, e.g. ``https://orders.example.com/answer``; a
        message read outside the app needs the whole address), a slash, then the token.
        ``step`` names the position when the run waits at more than one step that links
        can answer. Opening it shows a confirmation page;
        confirming emits the step's kind's ``wait_for`` event with ``{by: person,
        answer: answer}`` and the record's key, once.

        ``BindingError`` without a ``links_secret`` or for a kind without ``by`` and
        ``answer``; ``OperatorError`` for a run that is not (the tenant's and) waiting
        for an answer, or an answer, person or expiry that cannot be.
        """
        secret = self.secret()
        answer = _text(answer, "answer", tokens.MAX_ANSWER)
        person = _text(person, "person", tokens.MAX_PERSON)
        until = self.until(expires, "an answer link")
        at = self.step_of(run_id, step=step, tenant=tenant)
        claims = tokens.Claims(
            run_id=at.run_id,
            step_id=at.step_id,
            position=at.position,
            pass_=at.pass_,
            answer=answer,
            person=person,
            expires=until.replace(microsecond=0),
            link_id=tokens.new_link_id(),
            tenant=at.tenant,
        )
        return f"{base_url.rstrip('/')}/{tokens.sign(claims, secret)}"

    def step_of(self, run_id: object, *, step: int | None, tenant: Tenant) -> AskedStep:
        """The step an answer made now would answer: the one a step's command (given its
        ``CommandContext``) asks for, or the one run ``run_id`` waits at (``step``: its
        position); its kind must name ``by`` and ``answer`` (``BindingError``)."""
        m = self.mounted
        if isinstance(run_id, commands.CommandContext):
            at = self._asked_by(run_id)
        else:
            at = self._waiting(m.run_id(run_id), m.need_tenant(tenant), step)
        kind = m.binding.kinds[at.kind]
        if kind.by is None or kind.answer is None:
            raise errors.BindingError(
                f"kind {at.kind!r} needs by= and answer= (the event fields naming who "
                "answered and what) for answer links"
            )
        return at

    def until(self, expires: datetime | timedelta, what: str) -> datetime:
        """When something made now with ``expires`` (a moment or a time from now) stops
        working; ``OperatorError`` when that is not later than now."""
        now = self.mounted.clock()
        until = now + expires if isinstance(expires, timedelta) else _aware(expires)
        if until <= now:
            raise errors.OperatorError(f"{what} must expire later than now")
        return until

    def _waiting(self, run_key: int, owner: str | None, step: int | None) -> AskedStep:
        """The one step the run waits at for an answer a link can give."""
        m = self.mounted
        with m.engine.connect() as conn:
            run = operations_room.standing(m, actions.run_for_operator(m, conn, run_key, owner))
        found = [w for w in _answerable(m, run) if step is None or w.position == step]
        if not found:
            at = "" if step is None else f" at position {step}"
            raise errors.OperatorError(
                f"run {run_key} does not wait{at} for an answer an answer link can give"
            )
        if len(found) > 1:
            positions = ", ".join(str(w.position) for w in found)
            raise errors.OperatorError(
                f"run {run_key} waits for answers at several steps: name one with step= "
                f"({positions})"
            )
        [waiting] = found
        return AskedStep(
            run.id,
            str(waiting.step_id),
            waiting.position,
            _pass(run, waiting),
            waiting.kind,
            run.tenant,
        )

    def _asked_by(self, ctx: commands.CommandContext) -> AskedStep:
        """The step whose command (or reminder) ``ctx`` is, read in its own transaction."""
        m = self.mounted
        key = _COMMAND_KEY.match(ctx.idempotency_key)
        if key is None or not ctx.run_id:
            raise errors.OperatorError(
                "answer links are made in a step's command or reminder, from its context"
            )
        run = actions.run_for_operator(m, ctx.conn, ctx.run_id, ctx.tenant)
        kind = _step_row(run.snapshot, key["step"]).get("kind")
        found = m.binding.kinds.get(str(kind))
        if found is None or found.wait_for is None:
            raise errors.OperatorError(
                f"step {ctx.step_title or ctx.position} does not wait for an answer an answer "
                "link can give"
            )
        return AskedStep(run.id, key["step"], ctx.position, int(key["pass"]), str(kind), run.tenant)

    def ask(self, token: str) -> Outcome:
        """What the link asks (``ask``), or why it is refused; changes nothing."""
        claims = self._verify(token)
        if claims is None:
            return _INVALID
        m = self.mounted
        with m.engine.connect() as conn:
            if ops.find_idempotent(conn, key=self._key(claims)) is not None:
                return _USED
            return self._judge(conn, claims, m.clock())

    def answer(self, token: str) -> Outcome:
        """Confirm the link: its event emitted once (``answered``), or why it is refused."""
        claims = self._verify(token)
        if claims is None:
            return _INVALID
        return self.answer_as(claims)

    def answer_as(self, claims: tokens.Claims, *, body: str | None = None) -> Outcome:
        """Answer as ``claims`` say, once per ``claims.link_id`` (the answer's idempotency
        record), or say why not: what ``answer`` does once a token verified. ``body``
        (a fingerprint of what asked) is kept with the record: the same id asked again
        with another body is ``CHANGED``, not ``USED``."""
        m = self.mounted
        key = self._key(claims)
        try:
            with dialects.begin(m.engine) as conn:
                now = m.clock()
                kept = ops.begin_idempotent(conn, key=key, tenant=claims.tenant, now=now)
                if not kept.created:
                    used = _USED
                    result = kept.result if isinstance(kept.result, Mapping) else {}
                    if body is not None and result.get("body") != body:
                        used = _CHANGED
                    _said(claims, used)
                    return used
                judged = self._judge(conn, claims, now)
                if judged.refused or judged.question is None:
                    raise _Refused(judged)  # rolled back: the link stays unused
                event_id = Changes(m).emit(conn, *self._event(conn, claims))
                result = {"run": claims.run_id, "by": claims.person, "answer": claims.answer}
                if body is not None:
                    result["body"] = body
                ops.complete_idempotent(
                    conn, key=key, result={**result, "event": event_id}, now=now
                )
        except _Refused as refused:
            _said(claims, refused.outcome)
            return refused.outcome
        question = judged.question
        answered = Outcome(
            ANSWERED,
            HTTPStatus.OK,
            f"Thank you: {_did(claims)} {question.record}.",
            question,
            event_id,
        )
        _said(claims, answered)
        return answered

    # -- judging a link ---------------------------------------------------------------

    def secret(self) -> bytes:
        """The links secret; ``BindingError`` when the runner was given none."""
        if self._secret is None:
            raise errors.BindingError(
                f"the runner of {self.mounted.binding.resource!r} has no links_secret: give "
                "flow_runner(..., links_secret=...) 32 random bytes to make answer links"
            )
        return self._secret

    def _verify(self, token: object) -> tokens.Claims | None:
        claims = None if self._secret is None else tokens.verify(token, self._secret)
        if claims is None:
            return None
        tenant_binding = self.mounted.binding.tenant is not None
        if tenant_binding != (claims.tenant is not None):
            return None
        return claims

    def _key(self, claims: tokens.Claims) -> str:
        return f"answer:{self.mounted.binding.resource}:{claims.link_id}"

    def _judge(self, conn: sa.Connection, claims: tokens.Claims, now: datetime) -> Outcome:
        """Whether a link that verified may answer now: not expired, the run still waiting
        at its step and pass, and the person not counted there yet."""
        m = self.mounted
        tz = m.config.timezone
        if claims.expired(now):
            return Outcome(
                EXPIRED,
                HTTPStatus.GONE,
                f"This link expired on {_moment(claims.expires, tz)}.",
            )
        try:
            run = actions.run_for_operator(m, conn, claims.run_id, claims.tenant)
        except errors.OperatorError:
            return _INVALID  # signed for a run that is not (or no longer) there
        record = records.load_record(conn, m.tables, run.record_id, run.tenant)
        waiting = _waiting_at(m, operations_room.standing(m, run), claims)
        question = Question(
            claims=claims,
            record=m.binding.record_name(record, run.record_id),
            resource=m.binding.resource_label,
            step=_step_title(run.snapshot, claims),
            verb=_verb(claims.answer),
            expires=_moment(claims.expires, tz),
        )
        if waiting is None or record is None:
            return Outcome(
                NOT_WAITING,
                HTTPStatus.CONFLICT,
                f"{question.step} for {question.record} no longer waits for an answer.",
                question,
            )
        if claims.person in waiting.answered:
            return Outcome(
                NOT_WAITING,
                HTTPStatus.CONFLICT,
                f"{claims.person} has already answered {question.step} for {question.record}.",
                question,
            )
        return Outcome(ASK, HTTPStatus.OK, question.sentence, question)

    def _event(self, conn: sa.Connection, claims: tokens.Claims) -> tuple[str, dict[str, Any]]:
        """The kind's event, as ``emit`` takes it: the record, who and what, the tenant."""
        m = self.mounted
        run = actions.run_for_operator(m, conn, claims.run_id, claims.tenant)
        waiting = _waiting_at(m, operations_room.standing(m, run), claims)
        assert waiting is not None
        kind = m.binding.kinds[waiting.kind]
        assert kind.wait_for is not None and kind.by is not None and kind.answer is not None
        payload: dict[str, Any] = {
            m.binding.event_field(kind.wait_for): m.tables.key_value(run.record_id),
            kind.by: claims.person,
            kind.answer: claims.answer,
        }
        if m.binding.tenant is not None:
            payload[m.binding.tenant] = run.tenant
        return kind.wait_for, payload


def _said(claims: tokens.Claims, outcome: Outcome) -> None:
    """One log line per link pressed, naming the link by its id, never its token."""
    if outcome.refused:
        log.warning(
            "answer link %s for run %d: refused (%s)", claims.link_id, claims.run_id, outcome.code
        )
    else:
        log.info(
            "answer link %s for run %d: answered (event %s)",
            claims.link_id,
            claims.run_id,
            outcome.event_id,
        )


def _answerable(m: Mounted, run: ops.RunRow) -> list[waits.Waiting]:
    """The steps the run waits at for its kind's event, whose kind links can answer."""
    found = []
    for waiting in run.waiting:
        kind: Kind | None = m.binding.kinds.get(waiting.kind)
        if (
            kind is not None
            and kind.wait_for is not None
            and waiting.awaits == waits.Awaits.EVENT
            and waiting.status == statuses.LaneStatus.WAITING
        ):
            found.append(waiting)
    return found


def _waiting_at(m: Mounted, run: ops.RunRow, claims: tokens.Claims) -> waits.Waiting | None:
    """The step the link answers, if the run still waits there, on the link's pass."""
    for waiting in _answerable(m, run):
        if waiting.step_id == claims.step_id and waiting.position == claims.position:
            return waiting if _pass(run, waiting) == claims.pass_ else None
    return None


def _pass(run: ops.RunRow, waiting: waits.Waiting) -> int:
    """Which pass through the step the run is on (1 unless the flow looped back)."""
    if not run.state:
        return 1
    lanes = state.RunState.from_dict(run.state).lanes
    for lane in lanes:
        if str(lane.step_id) == waiting.step_id:
            return int(lane.pass_)
    return 1


def _step_row(snapshot: Mapping[str, Any], step_id: str) -> Mapping[str, Any]:
    """The step's row in the run's snapshot (empty when it is not there)."""
    for row in snapshot.get("steps") or ():
        if isinstance(row, Mapping) and str(row.get("id")) == step_id:
            return row
    return {}


def _step_title(snapshot: Mapping[str, Any], claims: tokens.Claims) -> str:
    """The step's title in the run's snapshot, or its kind, or ``step N``."""
    row = _step_row(snapshot, claims.step_id)
    said = row.get("title") or row.get("kind")
    return str(said) if said else f"step {claims.position}"


def _moment(at: datetime, tz: tzinfo | None) -> str:
    """``Wed 4 Mar 09:00 UTC``: a history's moment, with its zone (a link is read anywhere)."""
    return f"{words.when(at, tz)} {at.astimezone(tz or UTC).tzname()}"


def _did(claims: tokens.Claims) -> str:
    """``ann approved``, or ``ann answered “maybe” for`` when the answer is no verb's."""
    if words.verb_of(claims.answer) is not None:
        return f"{claims.person} {claims.answer}"
    return f"{claims.person} answered \u201c{claims.answer}\u201d for"


def _verb(answer: str) -> str:
    verb = words.verb_of(answer)
    return verb if verb is not None else f"Answer \u201c{answer}\u201d"


def _text(value: object, what: str, most: int) -> str:
    if not isinstance(value, str) or not value.strip() or not value.isprintable():
        raise errors.OperatorError(f"an answer link's {what} must be one line of text")
    text = value.strip()
    if len(text) > most:
        raise errors.OperatorError(f"an answer link's {what} must be at most {most} characters")
    return text


def _aware(moment: datetime) -> datetime:
    if not isinstance(moment, datetime):
        raise errors.OperatorError("expires must be a datetime or a timedelta")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


__all__ = [
    "ANSWERED",
    "ASK",
    "CHANGED",
    "EXPIRED",
    "INVALID",
    "NOT_WAITING",
    "USED",
    "AnswerLinks",
    "AskedStep",
    "Outcome",
    "Question",
]
