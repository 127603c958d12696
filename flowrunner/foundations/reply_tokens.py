"""A reply address's token: which run's waiting step a mail reply answers, as whom, from
which address, until when — signed, so that nobody can make one or change it.

An asking message carries a reply address such as ``approvals+<token>@example.com``: the
mailbox the mail inbound receives, a ``+`` and the token. Unlike an answer link's token
it holds no answer — the reply says that — but the address the message went to, which
the reply's sender must be. The token is lowercase base32 (mail systems may change the
case of an address), the claims as compact JSON, then 120 bits of HMAC-SHA256::

    >>> claims = Claims(run_id=7, step_id="12", position=1, pass_=1, person="ann",
    ...                 address="ann@example.com",
    ...                 expires=datetime(2026, 3, 9, 9, tzinfo=UTC), tenant=None)
    >>> token = sign(claims, b"a links secret of 32 bytes at least")
    >>> verify(token.upper(), b"a links secret of 32 bytes at least") == claims
    True
    >>> verify(token, b"another secret, as long as the first") is None
    True
    >>> at = reply_address("approvals@example.com", "abc234")
    >>> at, token_in(at, "approvals@example.com"), token_in(at, "orders@example.com")
    ('approvals+abc234@example.com', 'abc234', None)

Pure: no clock (``now`` is given), no I/O. The key is the runner's links secret, under a
label of its own, so an answer link's signature never signs a reply address.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

VERSION = 1
"""The claims' layout; a token of another version is refused."""

MAX_TOKEN = 1024
"""The longest token read; a longer one is refused unread."""

MAX_PERSON = 200
MAX_ADDRESS = 254
MAX_STEP_ID = 64

_LABEL = b"flowrunner reply address\x00"
_MAC_BYTES = 15  # 120 bits: 24 characters of base32, no padding
_MAC_CHARS = 24
_B32 = re.compile(r"[a-z2-7]+")
_MAX_UNIX = 253402300799  # 9999-12-31T23:59:59Z
# A mailbox the inbound receives at: one local part and one domain, no "+" of its own.
_MAILBOX = re.compile(r"(?P<local>[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64})@(?P<domain>[^@\s<>]+)")


@dataclass(frozen=True)
class Claims:
    """What one reply address says."""

    run_id: int
    """The run whose step a reply answers."""
    step_id: str
    """The step (its id, as text) the run waits at."""
    position: int
    """That step's position."""
    pass_: int
    """Which pass through the step: an address for an earlier pass answers no later one."""
    person: str
    """Who answers, put in the event's ``by`` field."""
    address: str
    """The e-mail address the message went to, lowercase: the reply must come from it."""
    expires: datetime
    """When the address stops answering (whole seconds, UTC)."""
    tenant: str | None = None
    """The run's tenant, on a tenant binding."""

    def expired(self, now: datetime) -> bool:
        """Whether the address no longer answers at ``now``."""
        return now >= self.expires


def sign(claims: Claims, secret: bytes) -> str:
    """The token of ``claims``, signed with ``secret`` (lowercase base32)."""
    expires = claims.expires if claims.expires.tzinfo else claims.expires.replace(tzinfo=UTC)
    body = [
        VERSION,
        claims.run_id,
        claims.step_id,
        claims.position,
        claims.pass_,
        claims.person,
        claims.address.lower(),
        int(expires.timestamp()),
        claims.tenant,
    ]
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    payload = _b32(text)
    return payload + _mac(secret, payload)


def verify(token: object, secret: bytes) -> Claims | None:
    """The claims of ``token`` (any case) if ``secret`` signed it and it reads; else None."""
    if not isinstance(token, str) or not _MAC_CHARS < len(token) <= MAX_TOKEN:
        return None
    token = token.lower()
    if not _B32.fullmatch(token):
        return None
    payload, signature = token[:-_MAC_CHARS], token[-_MAC_CHARS:]
    if not hmac.compare_digest(_mac(secret, payload).encode(), signature.encode()):
        return None
    try:
        body = json.loads(base64.b32decode(payload.upper() + "=" * (-len(payload) % 8)))
    except (binascii.Error, ValueError):
        return None
    return _claims(body)


def mailbox_problem(mailbox: object) -> str | None:
    """Why ``mailbox`` cannot receive replies (None when it can).

    >>> mailbox_problem("approvals@example.com") is None, mailbox_problem("a+b@example.com")
    (True, "'a+b@example.com' already holds a '+': give the mailbox alone (approvals@example.com)")
    """
    if not isinstance(mailbox, str) or not _MAILBOX.fullmatch(mailbox):
        return f"{mailbox!r} is not an e-mail address (approvals@example.com)"
    if "+" in mailbox:
        return f"{mailbox!r} already holds a '+': give the mailbox alone (approvals@example.com)"
    return None


def reply_address(mailbox: str, token: str) -> str:
    """``approvals+TOKEN@example.com``: the mailbox with the token after a ``+``."""
    local, _, domain = mailbox.rpartition("@")
    return f"{local}+{token}@{domain}"


def token_in(address: str, mailbox: str) -> str | None:
    """The token of ``address`` when it is a reply address of ``mailbox`` (any case)."""
    local, _, domain = address.strip().lower().rpartition("@")
    want_local, _, want_domain = mailbox.lower().rpartition("@")
    if domain != want_domain or not local.startswith(want_local + "+"):
        return None
    token = local[len(want_local) + 1 :]
    return token or None


def _claims(body: object) -> Claims | None:
    """Claims from a signed body, if it has this version's shape."""
    if not isinstance(body, list) or len(body) != 9 or body[0] != VERSION:
        return None
    _, run_id, step_id, position, pass_, person, address, expires, tenant = body
    whole = (run_id, position, pass_, expires)
    if not all(type(n) is int and n >= 0 for n in whole) or expires > _MAX_UNIX:
        return None
    texts = ((step_id, MAX_STEP_ID), (person, MAX_PERSON), (address, MAX_ADDRESS))
    if not all(isinstance(t, str) and 0 < len(t) <= most for t, most in texts):
        return None
    if tenant is not None and not isinstance(tenant, str):
        return None
    return Claims(
        run_id=run_id,
        step_id=step_id,
        position=position,
        pass_=pass_,
        person=person,
        address=address,
        expires=datetime.fromtimestamp(expires, UTC),
        tenant=tenant,
    )


def _b32(data: bytes) -> str:
    return base64.b32encode(data).decode("ascii").rstrip("=").lower()


def _mac(secret: bytes, payload: str) -> str:
    digest = hmac.new(secret, _LABEL + payload.encode("ascii"), hashlib.sha256).digest()
    return _b32(digest[:_MAC_BYTES])


__all__ = ["Claims", "mailbox_problem", "reply_address", "sign", "token_in", "verify"]
