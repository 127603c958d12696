"""Receiving a mail reply: judged as a callback is, read, then answered once.

``receive(mounted, replies, inbound, headers, body)`` is the whole handling of one post
to a ``MailInbound``; it never raises. Its answer is a status and, for a refusal, the
sentence saying why:

- 413: a body past 256 KB; 401: the secret's variable is not set, or the signature
  over the raw bytes or the time fails — the rules of callbacks (``signing.check``);
- 400: the reply cannot be read (``mail.read``), is addressed to no reply address of
  the mailbox, its address is not one this runner signed, or it says no answer;
- 403: it comes from another address than the one its reply address was given to;
- 410: its reply address has expired;
- 409: the step no longer waits, or the person has already answered there; the same
  Message-ID to the same address with another answer;
- 204: answered — the kind's event emitted as the person, with the reply's id (its
  Message-ID and token) as the answer's idempotency record, in one transaction — or the
  same reply again (nothing happens twice);
- 503: the database failed: nothing is kept, the provider posts again.

Each reply is one log line (``flowrunner.inbound``), naming the run, never the token,
the signature or the text.
"""

from __future__ import annotations

import os
from http import HTTPStatus
from typing import TYPE_CHECKING

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.engine import answer_links, worker
from flowrunner.engine.reply_addresses import ReplyAddresses
from flowrunner.foundations import logs, reply_tokens, sanitize
from flowrunner.inbound import endpoints, mail, signing
from flowrunner.inbound.receipt import Received

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted

log = logs.logger("flowrunner.inbound")


class _Refusal(Exception):
    def __init__(self, status: HTTPStatus, sentence: str) -> None:
        super().__init__(sentence)
        self.status = status
        self.sentence = sentence


def receive(
    mounted: Mounted,
    replies: ReplyAddresses,
    inbound: mail.MailInbound,
    headers: signing.Headers,
    body: bytes,
) -> Received:
    """Judge and answer one reply posted to ``inbound``; never raises (see the module)."""
    try:
        received = _receive(mounted, replies, inbound, headers, bytes(body))
    except _Refusal as refusal:
        received = Received(int(refusal.status), refusal.sentence, said=refusal.sentence)
    except Exception as exc:
        if worker.database_failed(exc) or isinstance(exc, sa.exc.DBAPIError):
            said = "The reply could not be taken now: send it again."
            received = Received(int(HTTPStatus.SERVICE_UNAVAILABLE), said, said=said)
            log.warning("inbound %s: %s (%s)", inbound.name, said, sanitize.describe_exception(exc))
            return received
        received = Received(int(HTTPStatus.INTERNAL_SERVER_ERROR), "the reply could not be handled")
        log.error(
            "inbound %s: %s: %s",
            inbound.name,
            received.reason,
            sanitize.describe_exception(exc),
        )
        return received
    if received.applied:
        log.info("inbound %s: %s", inbound.name, received.reason)
    else:
        log.warning(
            "inbound %s: refused a reply (%d): %s", inbound.name, received.status, received.reason
        )
    return received


def _receive(
    mounted: Mounted,
    replies: ReplyAddresses,
    inbound: mail.MailInbound,
    headers: signing.Headers,
    body: bytes,
) -> Received:
    if signing.too_large(len(body)):
        raise _Refusal(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "The message is past 256 KB.")
    spec = inbound.verify
    secret = os.environ.get(spec.secret_env)
    if not secret:
        raise _Refusal(
            HTTPStatus.UNAUTHORIZED, f"The environment variable {spec.secret_env} is not set."
        )
    why = signing.check(spec, secret.encode("utf-8"), headers, body, mounted.clock())
    if why is not None:
        raise _Refusal(HTTPStatus.UNAUTHORIZED, f"Refused unread: {why}.")
    content_type = next(iter(signing.values(headers, "content-type")), None)
    try:
        reply = mail.read(content_type, body)
    except errors.CallbackRejected as exc:
        raise _Refusal(HTTPStatus.BAD_REQUEST, f"The reply cannot be read: {exc}.") from None
    tokens = [
        token
        for token in (reply_tokens.token_in(to, inbound.mailbox) for to in reply.recipients)
        if token is not None
    ]
    if not tokens:
        raise _Refusal(
            HTTPStatus.BAD_REQUEST,
            f"The reply is not addressed to a reply address of {inbound.mailbox}.",
        )
    claims = replies.claims(tokens[0])
    if claims is None:
        raise _Refusal(
            HTTPStatus.BAD_REQUEST,
            "The reply address is not valid: it was changed, or not made by this application.",
        )
    if reply.sender != claims.address:
        raise _Refusal(
            HTTPStatus.FORBIDDEN,
            f"The reply comes from {reply.sender}, but its reply address was given to "
            f"{claims.person} at {claims.address}.",
        )
    answer = mail.answer_in(reply, inbound.answers)
    if answer is None:
        words = ", ".join(f"“{word.capitalize()}”" for word in inbound.answers)
        raise _Refusal(
            HTTPStatus.BAD_REQUEST,
            f"The reply says no answer: begin its first line with one of {words}.",
        )
    # One reply is its Message-ID to its reply address; what it said is its sender and
    # answer (a provider posting it again may add headers: the same reply all the same).
    said = f"{reply.message_id or endpoints.fingerprint(body)}\n{tokens[0]}"
    meant = endpoints.fingerprint(f"{reply.sender}\n{answer}".encode())
    outcome = replies.answer(claims, answer, reply=said, body=meant)
    return _answered(claims, outcome)


def _answered(claims: reply_tokens.Claims, outcome: answer_links.Outcome) -> Received:
    where = f"run {claims.run_id}"
    if outcome.code == answer_links.ANSWERED:
        sentence = outcome.sentence.removeprefix("Thank you: ")
        return Received(int(HTTPStatus.NO_CONTENT), f"{where}: {sentence}")
    if outcome.code == answer_links.USED:
        return Received(int(HTTPStatus.NO_CONTENT), f"{where}: the same reply again")
    if outcome.code == answer_links.CHANGED:
        sentence = "This reply was received before with another answer under its Message-ID."
    elif outcome.code == answer_links.EXPIRED:
        sentence = outcome.sentence.replace("This link", "The reply address")
    elif outcome.code == answer_links.INVALID:
        sentence = "The reply address names a run that is not there."
    else:
        sentence = outcome.sentence
    raise _Refusal(HTTPStatus(outcome.status), f"{where}: {sentence}")


__all__ = ["receive"]
