"""A mail inbound, declared, and a reply read: who sent it, to which reply address, and
what it answers.

::

    MailInbound(
        name="mail",                        # POST …/inbound/mail
        verify=Hmac(secret_env="MAIL_HOOK_SECRET", header="x-mail-signature",
                    timestamp_header="x-mail-timestamp"),
        mailbox="approvals@example.com",    # replies go to approvals+TOKEN@example.com
    )

A mail provider posts each reply it receives, signed as callbacks are (``signing``):
either its JSON (``from``, ``to``, ``subject``, ``text``, ``message_id``,
``in_reply_to``) or the raw RFC 5322 message (any other content type), which the
standard library's ``email`` parses. ``read`` turns either into a ``Reply``;
``answer_in`` finds the answer on the reply's first line, or else in its subject. Pure:
no I/O, no clock. Receiving one (the token, the sender, the event):
``flowrunner.inbound.mail_receipt``.
"""

from __future__ import annotations

import email
import email.message
import email.policy
import email.utils
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from flowrunner import errors
from flowrunner.foundations import reply_tokens
from flowrunner.inbound import signing

ANSWERS: Mapping[str, str] = {
    "approve": "approved",
    "approved": "approved",
    "yes": "approved",
    "reject": "rejected",
    "rejected": "rejected",
    "no": "rejected",
}
"""The words a reply may answer with by default, each with the answer it gives."""

MAX_TEXT = 64 * 1024
"""The most of a reply's text read for its answer; the first line is what counts."""

# A name is the last segment of the endpoint's path, as an inbound's is.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
# A reply's first word: letters (any script), digits, "_" and "-".
_WORD = re.compile(r"[^\W_][\w-]*")
# "Re:", "AW:", "Fwd:", "[ext]" and the like before a subject.
_PREFIX = re.compile(r"^\s*(?:(?:re|aw|sv|fw|fwd|wg)\s*(?:\[\d+\])?\s*:|\[[^\]]*\])\s*", re.I)
# A line a mail client writes above what it quotes: "On Mon, ann wrote:".
_QUOTE_HEAD = re.compile(r"\bwrote:\s*$", re.I)


@dataclass(frozen=True, kw_only=True)
class MailInbound:
    """A signed endpoint, ``POST …/inbound/NAME``, that takes mail replies to the reply
    addresses of ``mailbox`` and answers the waiting steps they name.

    ``verify`` (an ``Hmac``) says how the mail provider signs what it posts: the same
    rules as a callback's. ``answers`` maps the words a reply may begin with (any case)
    to the answer each gives; by default ``approve``/``yes`` → ``approved`` and
    ``reject``/``no`` → ``rejected``.

    Made with a sentence (``BindingError``) when it cannot work.
    """

    name: str
    verify: signing.Hmac
    mailbox: str
    answers: Mapping[str, str] = field(default_factory=lambda: dict(ANSWERS))

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise errors.BindingError(
                f"MailInbound: name {self.name!r} must be letters, digits, '_', '.' and '-' "
                "(it ends the endpoint's path)"
            )
        where = f"MailInbound {self.name!r}"
        if not isinstance(self.verify, signing.Hmac):
            raise errors.BindingError(f"{where}: verify is an Hmac(...) saying how it is signed")
        problem = reply_tokens.mailbox_problem(self.mailbox)
        if problem is not None:
            raise errors.BindingError(f"{where}: mailbox {problem}")
        if not isinstance(self.answers, Mapping) or not self.answers:
            raise errors.BindingError(
                f"{where}: answers maps the words a reply begins with to answers "
                "({'approve': 'approved', 'reject': 'rejected'})"
            )
        words: dict[str, str] = {}
        for word, answer in self.answers.items():
            if not isinstance(word, str) or not _WORD.fullmatch(word.strip()):
                raise errors.BindingError(f"{where}: answers: {word!r} is not one word")
            if not isinstance(answer, str) or not answer.strip() or not answer.isprintable():
                raise errors.BindingError(f"{where}: answers: {word!r} gives no answer")
            words[word.strip().lower()] = answer.strip()
        object.__setattr__(self, "answers", words)


def check(inbounds: Iterable[MailInbound]) -> dict[str, MailInbound]:
    """The mail inbounds by name; ``BindingError`` for a name given twice."""
    found: dict[str, MailInbound] = {}
    for inbound in inbounds:
        if inbound.name in found:
            raise errors.BindingError(f"inbound {inbound.name!r} is declared twice")
        found[inbound.name] = inbound
    return found


@dataclass(frozen=True)
class Reply:
    """A reply as received: its sender, recipients, subject, text and ids."""

    sender: str
    """The one address in From, lowercase."""
    recipients: tuple[str, ...]
    """The addresses in To and Cc (and the provider's ``to``), lowercase."""
    subject: str
    text: str
    """The plain text of the reply (its first ``MAX_TEXT`` characters)."""
    message_id: str
    in_reply_to: str


def read(content_type: str | None, body: bytes) -> Reply:
    """The reply a verified body holds: JSON when ``content_type`` says so, else a raw
    RFC 5322 message; ``CallbackRejected`` (400) when it cannot be read."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media == "application/json":
        return read_json(body)
    return read_raw(body)


def read_json(body: bytes) -> Reply:
    """A provider's JSON: ``from``, ``to`` (a text or a list), ``cc``, ``subject``,
    ``text``, ``message_id``, ``in_reply_to``."""
    try:
        parsed = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise _unreadable("the body is not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        raise _unreadable(f"the body is not JSON ({type(exc).__name__})") from None
    if not isinstance(parsed, dict):
        raise _unreadable("the body is not a JSON object of the mail's fields")

    def text(name: str) -> str:
        value = parsed.get(name)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise _unreadable(f"the field {name!r} is a {type(value).__name__}, not a text")
        return value

    def texts(name: str) -> list[str]:
        value = parsed.get(name)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        return [text(name)] if value is not None else []

    return _reply(
        senders=[text("from")],
        recipients=texts("to") + texts("cc"),
        subject=text("subject"),
        text=text("text"),
        message_id=text("message_id"),
        in_reply_to=text("in_reply_to"),
    )


def read_raw(body: bytes) -> Reply:
    """A raw RFC 5322 message, parsed with ``email`` (``policy.default``); its text is
    the plain part (``get_body``)."""
    try:
        message = email.message_from_bytes(body, policy=email.policy.default)
        assert isinstance(message, email.message.EmailMessage)
        if not message.keys():
            raise _unreadable("the body is not a mail message: it has no headers")
        part = message.get_body(preferencelist=("plain",))
        content = part.get_content() if part is not None else ""
        return _reply(
            senders=[str(v) for v in message.get_all("from") or ()],
            recipients=[str(v) for name in ("to", "cc") for v in message.get_all(name) or ()],
            subject=str(message.get("subject") or ""),
            text=content if isinstance(content, str) else "",
            message_id=str(message.get("message-id") or ""),
            in_reply_to=str(message.get("in-reply-to") or ""),
        )
    except errors.CallbackRejected:
        raise
    except Exception as exc:  # the parser's many ways of failing on what is no mail
        raise _unreadable(f"the message cannot be read ({type(exc).__name__})") from None


def answer_in(reply: Reply, answers: Mapping[str, str]) -> str | None:
    """The answer a reply gives: the first word of its first line that is not blank or
    quoted, else the first word of its subject (after ``Re:``), when it is one of
    ``answers``; None when neither is.

    >>> text = "Approve.\\n\\n> Approve or reject?"
    >>> answer_in(Reply("ann@example.com", (), "Re: PO-7 needs you", text, "", ""), ANSWERS)
    'approved'
    >>> answer_in(Reply("ann@example.com", (), "Reject", "", "", ""), ANSWERS)
    'rejected'
    >>> answer_in(Reply("ann@example.com", (), "Re: PO-7", "Looks fine to me", "", ""), ANSWERS)
    """
    for line in reply.text.splitlines():
        line = line.strip()
        if not line or line.startswith(">") or _QUOTE_HEAD.search(line):
            continue
        found = _word(line, answers)
        if found is not None:
            return found
        break
    subject = reply.subject
    while True:
        shorter = _PREFIX.sub("", subject, count=1)
        if shorter == subject:
            break
        subject = shorter
    return _word(subject, answers)


def _word(line: str, answers: Mapping[str, str]) -> str | None:
    found = _WORD.match(line.strip())
    return None if found is None else answers.get(found.group(0).lower())


def _reply(
    *,
    senders: list[str],
    recipients: list[str],
    subject: str,
    text: str,
    message_id: str,
    in_reply_to: str,
) -> Reply:
    from_ = _addresses(senders)
    if len(from_) != 1:
        said = "no sender" if not from_ else "more than one sender"
        raise _unreadable(f"the reply names {said} in From")
    return Reply(
        sender=from_[0],
        recipients=tuple(_addresses(recipients)),
        subject=" ".join(subject.split())[:998],
        text=text[:MAX_TEXT],
        message_id=message_id.strip()[:998],
        in_reply_to=in_reply_to.strip()[:998],
    )


def _addresses(values: list[str]) -> list[str]:
    """The e-mail addresses in header values, lowercase (names and comments left out)."""
    found = []
    for _, address in email.utils.getaddresses([v for v in values if v]):
        address = address.strip().lower()
        if "@" in address and address.isprintable() and " " not in address:
            found.append(address)
    return found


def _unreadable(reason: str) -> errors.CallbackRejected:
    return errors.CallbackRejected(reason)


__all__ = ["ANSWERS", "MailInbound", "Reply", "answer_in", "check", "read", "read_json", "read_raw"]
