"""Reply addresses: an address to put in an asking message's Reply-To, so that a person
answers a waiting step by replying "Approve" or "Reject".

``ReplyAddresses.address`` makes ``approvals+TOKEN@example.com`` for one waiting step and
one person at one e-mail address; ``claims`` reads a token back; ``answer`` emits the
kind's ``wait_for`` event as that person, once per reply, through the answer links'
rules (``AnswerLinks.answer_as``): the run must still wait at that step and pass, the
person not have answered there yet. ``FlowRunner.reply_address`` is ``address``; the
mail inbound (``flowrunner.inbound.mail_receipt``) receives the replies.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import datetime, timedelta

from flowrunner import errors
from flowrunner.binding import Tenant
from flowrunner.engine.answer_links import AnswerLinks, Outcome
from flowrunner.foundations import answer_tokens, reply_tokens

EXPIRES = timedelta(days=14)
"""How long a reply address answers, unless said."""


class ReplyAddresses:
    """A runner's reply addresses, signed with its ``links_secret``."""

    def __init__(self, links: AnswerLinks) -> None:
        self.links = links

    def address(
        self,
        run_id: object,
        *,
        person: str,
        mailbox: str,
        email: str | None = None,
        expires: datetime | timedelta = EXPIRES,
        step: int | None = None,
        tenant: Tenant = None,
    ) -> str:
        """``approvals+TOKEN@example.com``: an address that answers, as ``person``, the
        step run ``run_id`` waits at (or, given a step command's ``CommandContext``, the
        step it asks for, on this pass) — for replies from ``email`` only (default:
        ``person``, when it is an address), until ``expires``.

        ``mailbox`` is where the mail inbound receives (``MailInbound(mailbox=...)``).
        Put the address in the asking message's ``Reply-To``: the reply's first line (or
        its subject) says the answer. ``BindingError`` without a ``links_secret`` or for
        a kind without ``by`` and ``answer``; ``OperatorError`` for a run that does not
        wait for an answer, or a person, address or expiry that cannot be.
        """
        secret = self.links.secret()
        problem = reply_tokens.mailbox_problem(mailbox)
        if problem is not None:
            raise errors.OperatorError(f"a reply address's mailbox: {problem}")
        person = _line(person, "person", reply_tokens.MAX_PERSON)
        to = _line(person if email is None else email, "email", reply_tokens.MAX_ADDRESS)
        if "@" not in to or any(c in to for c in " <>,;\"'"):
            raise errors.OperatorError(
                f"a reply address needs the e-mail address its message goes to, not {to!r}: "
                "give email="
            )
        until = self.links.until(expires, "a reply address")
        at = self.links.step_of(run_id, step=step, tenant=tenant)
        claims = reply_tokens.Claims(
            run_id=at.run_id,
            step_id=at.step_id,
            position=at.position,
            pass_=at.pass_,
            person=person,
            address=to.lower(),
            expires=until.replace(microsecond=0),
            tenant=at.tenant,
        )
        return reply_tokens.reply_address(mailbox, reply_tokens.sign(claims, secret))

    def claims(self, token: str) -> reply_tokens.Claims | None:
        """What a reply address's token says, if this runner signed it; else None."""
        try:
            secret = self.links.secret()
        except errors.BindingError:
            return None
        claims = reply_tokens.verify(token, secret)
        if claims is None:
            return None
        tenant_binding = self.links.mounted.binding.tenant is not None
        return claims if tenant_binding == (claims.tenant is not None) else None

    def answer(self, claims: reply_tokens.Claims, answer: str, *, reply: str, body: str) -> Outcome:
        """Answer ``answer`` as the address's person, once per ``reply`` (the mail's
        Message-ID with its token); ``body`` (a fingerprint of what the reply says) tells
        the same reply sent again from another one under the same id."""
        as_link = answer_tokens.Claims(
            run_id=claims.run_id,
            step_id=claims.step_id,
            position=claims.position,
            pass_=claims.pass_,
            answer=answer,
            person=claims.person,
            expires=claims.expires,
            link_id=reply_id(reply),
            tenant=claims.tenant,
        )
        return self.links.answer_as(as_link, body=body)


def reply_id(reply: str) -> str:
    """The answer's idempotency id of one reply: 22 characters of its SHA-256."""
    digest = hashlib.sha256(b"mail-reply\x00" + reply.encode("utf-8", "replace")).digest()
    return base64.urlsafe_b64encode(digest[:16]).decode("ascii").rstrip("=")


def _line(value: object, what: str, most: int) -> str:
    if not isinstance(value, str) or not value.strip() or not value.isprintable():
        raise errors.OperatorError(f"a reply address's {what} must be one line of text")
    text = value.strip()
    if len(text) > most:
        raise errors.OperatorError(f"a reply address's {what} must be at most {most} characters")
    return text


__all__ = ["EXPIRES", "ReplyAddresses", "reply_id"]
