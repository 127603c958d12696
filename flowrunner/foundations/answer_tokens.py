"""An answer link's token: which run's waiting step it answers, with what, as whom,
until when — signed, so that nothing in it can be changed and nobody can make one.

A token is two base64url texts joined by a dot: the claims as compact JSON, then the
HMAC-SHA256 of that first text under the runner's links secret::

    >>> claims = Claims(run_id=7, step_id="12", position=1, pass_=1, answer="approved",
    ...                 person="ann", expires=datetime(2026, 3, 9, 9, tzinfo=UTC),
    ...                 link_id="Zq3v0bA1xYk2", tenant=None)
    >>> token = sign(claims, b"a links secret of 32 bytes at least")
    >>> verify(token, b"a links secret of 32 bytes at least") == claims
    True
    >>> verify(token, b"another secret, as long as the first") is None
    True
    >>> claims.expired(datetime(2026, 3, 9, 9, tzinfo=UTC))
    True

The signature is compared as the text it is, in constant time, so a token changed in
any character — even one that base64 would decode to the same bytes — is refused. Pure:
no clock (``now`` is given), no I/O; the link id is random (``new_link_id``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

VERSION = 1
"""The claims' layout; a token of another version is refused."""

MAX_TOKEN = 2048
"""The longest token read; a longer one is refused unread."""

MAX_ANSWER = 64
MAX_PERSON = 200
MAX_STEP_ID = 64
MIN_SECRET = 16
"""The fewest bytes a links secret may have (32 random bytes are what to use)."""

# base64url without padding, as ``_b64`` writes it.
_B64 = re.compile(r"[A-Za-z0-9_-]+")
_LINK_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")
_MAX_UNIX = 253402300799  # 9999-12-31T23:59:59Z


@dataclass(frozen=True)
class Claims:
    """What one answer link says."""

    run_id: int
    """The run whose step it answers."""
    step_id: str
    """The step (its id, as text) the run waits at."""
    position: int
    """That step's position."""
    pass_: int
    """Which pass through the step: a link for an earlier pass answers no later one."""
    answer: str
    """The decision (``approved``), put in the event's answer field."""
    person: str
    """Who answers, put in the event's ``by`` field."""
    expires: datetime
    """When the link stops working (whole seconds, UTC)."""
    link_id: str
    """Random; the answer's idempotency key, so one link answers once."""
    tenant: str | None = None
    """The run's tenant, on a tenant binding."""

    def expired(self, now: datetime) -> bool:
        """Whether the link no longer works at ``now``."""
        return now >= self.expires


def new_link_id() -> str:
    """A random link id: 96 bits, 16 characters of base64url."""
    return secrets.token_urlsafe(12)


def check_secret(secret: object) -> bytes | str:
    """The secret as bytes, or the sentence saying why it cannot sign links."""
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    if not isinstance(secret, bytes):
        return "the links secret must be bytes or text"
    if len(secret) < MIN_SECRET:
        return (
            f"the links secret must be at least {MIN_SECRET} bytes "
            "(use 32 random bytes: secrets.token_bytes(32))"
        )
    return secret


def sign(claims: Claims, secret: bytes) -> str:
    """The token of ``claims``, signed with ``secret``."""
    expires = claims.expires if claims.expires.tzinfo else claims.expires.replace(tzinfo=UTC)
    body = [
        VERSION,
        claims.run_id,
        claims.step_id,
        claims.position,
        claims.pass_,
        claims.answer,
        claims.person,
        int(expires.timestamp()),
        claims.link_id,
        claims.tenant,
    ]
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    payload = _b64(text)
    return f"{payload}.{_mac(secret, payload)}"


def verify(token: object, secret: bytes) -> Claims | None:
    """The claims of ``token`` if ``secret`` signed it and it reads; else None."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN or token.count(".") != 1:
        return None
    payload, signature = token.split(".")
    if not _B64.fullmatch(payload) or not _B64.fullmatch(signature):
        return None
    expected = _mac(secret, payload)
    if not hmac.compare_digest(expected.encode("ascii"), signature.encode("ascii")):
        return None
    try:
        body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (binascii.Error, ValueError):
        return None
    return _claims(body)


def _claims(body: object) -> Claims | None:
    """Claims from a signed body, if it has this version's shape."""
    if not isinstance(body, list) or len(body) != 10 or body[0] != VERSION:
        return None
    _, run_id, step_id, position, pass_, answer, person, expires, link_id, tenant = body
    whole = (run_id, position, pass_, expires)
    if not all(type(n) is int and n >= 0 for n in whole) or expires > _MAX_UNIX:
        return None
    texts = ((step_id, MAX_STEP_ID), (answer, MAX_ANSWER), (person, MAX_PERSON))
    if not all(isinstance(t, str) and 0 < len(t) <= most for t, most in texts):
        return None
    if not isinstance(link_id, str) or not _LINK_ID.fullmatch(link_id):
        return None
    if tenant is not None and not isinstance(tenant, str):
        return None
    return Claims(
        run_id=run_id,
        step_id=step_id,
        position=position,
        pass_=pass_,
        answer=answer,
        person=person,
        expires=datetime.fromtimestamp(expires, UTC),
        link_id=link_id,
        tenant=tenant,
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _mac(secret: bytes, payload: str) -> str:
    return _b64(hmac.new(secret, payload.encode("ascii"), hashlib.sha256).digest())


__all__ = ["MIN_SECRET", "Claims", "check_secret", "new_link_id", "sign", "verify"]
