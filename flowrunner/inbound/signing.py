"""Signed callbacks, judged: an HMAC over a request's raw bytes, its time and its size.

An outside system (a payment processor) signs each callback with a secret both sides
know. ``Hmac`` says how it signs — which header holds the signature, in hex or base64
(after a prefix such as ``sha256=``), which header holds the time, what string is
signed — and ``check`` judges one request by it, before its body is read as anything
but bytes::

    >>> spec = Hmac(secret_env="PAYMENT_CALLBACK_SECRET", header="x-processor-signature",
    ...             timestamp_header="x-processor-timestamp", window="5 minutes")
    >>> now = datetime(2026, 1, 5, 9, tzinfo=UTC)
    >>> headers = spec.sign(b"s3cret", b'{"id": "evt_1"}', now)
    >>> headers["x-processor-timestamp"], check(spec, b"s3cret", headers, b'{"id": "evt_1"}', now)
    ('1767603600', None)
    >>> check(spec, b"another", headers, b'{"id": "evt_1"}', now)
    'the signature does not match'

Pure: no I/O, no clock (``now`` is given), no environment (the secret is given: the
runner reads the variable ``secret_env`` names at each request, never earlier).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hmac
import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

from flowrunner import errors
from flowrunner.foundations import durations

# The largest body a callback may have: 256 KB. Longer ones are refused (413) from
# their Content-Length, or as soon as more bytes than this have been read.
MAX_BODY = 256 * 1024

# Headers as a web framework gives them: a mapping (any case), or ASGI's (name, value)
# pairs of bytes, which may repeat a name.
Headers: TypeAlias = Mapping[str, str] | Iterable[tuple[str | bytes, str | bytes]]

ENCODINGS = ("hex", "base64")
ALGORITHMS = ("sha256", "sha512", "sha384", "sha1")
PLACEHOLDERS = ("timestamp", "body")

# A signature header's value is refused unread past this length (a sha512 in base64
# after a long prefix is under 200 characters).
_MAX_SIGNATURE = 512
# Unix seconds: up to twelve digits (the year 33658), so no timestamp overflows.
_SECONDS = re.compile(r"[0-9]{1,12}")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# A header name as HTTP spells one (RFC 9110 "token").
_HEADER = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}")


def too_large(size: int) -> bool:
    """Whether a body of ``size`` bytes is over the limit (``MAX_BODY``)."""
    return size > MAX_BODY


@dataclass(frozen=True)
class Hmac:
    """How a sender signs its callbacks: an HMAC of ``signed`` with the secret.

    ``secret_env`` is the NAME of the environment variable holding the secret (its text,
    as UTF-8 bytes, is the key), never the secret. ``header`` holds the signature,
    ``encoding`` ``"hex"`` (either case) or ``"base64"``, after ``prefix`` when the sender
    writes one (``"sha256="``, as GitHub does). ``timestamp_header`` holds the time the
    sender signed at, in Unix seconds; a time further than ``window`` from now, before
    or after, is refused. ``signed`` is what is signed: ``{timestamp}`` and ``{body}``
    (the raw bytes) with the text around them, by default ``"{timestamp}.{body}"`` with
    a timestamp header, else ``"{body}"``. ``algorithm``: ``sha256`` unless said.

    A declaration that cannot work is refused with ``BindingError`` when made.
    """

    secret_env: str
    header: str
    encoding: str = "hex"
    prefix: str = ""
    timestamp_header: str | None = None
    window: str | timedelta = "5 minutes"
    signed: str | None = None
    algorithm: str = "sha256"

    def __post_init__(self) -> None:
        if not isinstance(self.secret_env, str) or not _VARIABLE.fullmatch(self.secret_env):
            raise errors.BindingError(
                "Hmac: secret_env names the environment variable that holds the secret "
                "(e.g. 'PAYMENT_CALLBACK_SECRET'), never the secret itself"
            )
        object.__setattr__(self, "header", _header_name(self.header, "header"))
        if self.timestamp_header is not None:
            name = _header_name(self.timestamp_header, "timestamp_header")
            object.__setattr__(self, "timestamp_header", name)
            if name == self.header:
                raise errors.BindingError("Hmac: the signature and the time need two headers")
        if self.encoding not in ENCODINGS:
            raise errors.BindingError(
                f"Hmac: encoding {self.encoding!r} is not one of {', '.join(ENCODINGS)}"
            )
        if self.algorithm not in ALGORITHMS:
            raise errors.BindingError(
                f"Hmac: algorithm {self.algorithm!r} is not one of {', '.join(ALGORITHMS)}"
            )
        if not isinstance(self.prefix, str) or not self.prefix.isprintable():
            raise errors.BindingError("Hmac: prefix is the printable text before the signature")
        if self.signed is None:
            default = "{timestamp}.{body}" if self.timestamp_header else "{body}"
            object.__setattr__(self, "signed", default)
        pieces = _pieces(self.template)
        if ((True, "timestamp") in pieces) != (self.timestamp_header is not None):
            raise errors.BindingError(
                "Hmac: signed must hold {timestamp} when there is a timestamp_header, and "
                "only then: an unsigned time could be changed on the way"
            )
        self.window_delta  # noqa: B018  (judged now, not at the first request)

    @property
    def template(self) -> str:
        """``signed``, filled in when the declaration left it to its default."""
        assert self.signed is not None  # set by __post_init__
        return self.signed

    @property
    def window_delta(self) -> timedelta:
        """``window`` as elapsed time (positive, a day at most)."""
        return _window(self.window)

    def message(self, body: bytes, timestamp: str | None = None) -> bytes:
        """The bytes signed: ``signed`` with the timestamp's text and the raw body."""
        parts = {"timestamp": (timestamp or "").encode("ascii"), "body": body}
        return b"".join(
            parts[text] if placeholder else text.encode("utf-8")
            for placeholder, text in _pieces(self.template)
        )

    def signature(self, secret: bytes, body: bytes, timestamp: str | None = None) -> str:
        """The signature header's value a sender sends for this body (and time)."""
        digest = hmac.new(secret, self.message(body, timestamp), self.algorithm).digest()
        if self.encoding == "hex":
            return self.prefix + digest.hex()
        return self.prefix + base64.b64encode(digest).decode("ascii")

    def sign(self, secret: str | bytes, body: bytes, now: datetime) -> dict[str, str]:
        """The headers a sender sends with ``body`` at ``now``: what tests of an app need.

        >>> spec = Hmac(secret_env="HOOK_SECRET", header="x-signature", prefix="sha256=")
        >>> spec.sign("s3cret", b"{}", datetime(2026, 1, 5, tzinfo=UTC))["x-signature"][:15]
        'sha256=adbde1ce'
        """
        key = secret.encode("utf-8") if isinstance(secret, str) else secret
        timestamp = None
        headers: dict[str, str] = {}
        if self.timestamp_header is not None:
            timestamp = str(int(now.timestamp()))
            headers[self.timestamp_header] = timestamp
        headers[self.header] = self.signature(key, body, timestamp)
        return headers


def check(spec: Hmac, secret: bytes, headers: Headers, body: bytes, now: datetime) -> str | None:
    """Why a request fails ``spec`` (a short sentence for the log), or None when it passes.

    The signature is compared with ``hmac.compare_digest`` in constant time; the time
    is judged once the signature is: a request whose headers name a signature or a
    time twice is refused, as is one without them. Never says the secret or the body.
    """
    given = _one(headers, spec.header)
    if given is None:
        return f"no single {spec.header} header"
    timestamp = None
    if spec.timestamp_header is not None:
        timestamp = _one(headers, spec.timestamp_header)
        if timestamp is None:
            return f"no single {spec.timestamp_header} header"
        timestamp = timestamp.strip()
        if not _SECONDS.fullmatch(timestamp):
            return "the timestamp is not a whole number of seconds"
    sent = _decoded(spec, given.strip())
    if sent is None:
        return f"the signature is not {spec.encoding} after {spec.prefix!r}"
    expected = hmac.new(secret, spec.message(body, timestamp), spec.algorithm).digest()
    if not hmac.compare_digest(expected, sent):
        return "the signature does not match"
    if timestamp is not None:
        signed_at = datetime.fromtimestamp(int(timestamp), UTC)
        if abs(now - signed_at) > spec.window_delta:
            return f"the timestamp is further than {_words(spec.window_delta)} from now"
    return None


def values(headers: Headers, name: str) -> list[str]:
    """Every value of header ``name`` (any case), as text (bytes read as Latin-1)."""
    wanted = name.lower()
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    found = []
    for key, value in pairs:
        key_text = key.decode("latin-1") if isinstance(key, bytes) else str(key)
        if key_text.lower() == wanted:
            found.append(value.decode("latin-1") if isinstance(value, bytes) else str(value))
    return found


def _one(headers: Headers, name: str) -> str | None:
    found = values(headers, name)
    return found[0] if len(found) == 1 else None


def _decoded(spec: Hmac, value: str) -> bytes | None:
    if len(value) > _MAX_SIGNATURE or not value.startswith(spec.prefix):
        return None
    text = value[len(spec.prefix) :]
    try:
        if spec.encoding == "hex":
            return binascii.unhexlify(text)
        return base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        return None


def _pieces(template: str) -> tuple[tuple[bool, str], ...]:
    """``signed`` in pieces: (False, a literal text) and (True, ``timestamp`` or ``body``)."""
    if not isinstance(template, str):  # before the cache, which could not hash a list
        raise errors.BindingError("Hmac: signed is a text such as '{timestamp}.{body}'")
    return _text_pieces(template)


@functools.lru_cache(maxsize=64)
def _text_pieces(template: str) -> tuple[tuple[bool, str], ...]:
    pieces: list[tuple[bool, str]] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise errors.BindingError(f"Hmac: signed {template!r} cannot be read: {exc}") from None
    for literal, field, spec, conversion in parsed:
        if literal:
            pieces.append((False, literal))
        if field is None:
            continue
        if field not in PLACEHOLDERS or spec or conversion:
            raise errors.BindingError(
                f"Hmac: signed {template!r} may hold {{timestamp}} and {{body}} only, "
                f"not {{{field}}}"
            )
        if (True, field) in pieces:
            raise errors.BindingError(f"Hmac: signed {template!r} holds {{{field}}} twice")
        pieces.append((True, field))
    if (True, "body") not in pieces:
        raise errors.BindingError(f"Hmac: signed {template!r} must hold the {{body}}")
    return tuple(pieces)


def _header_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not _HEADER.fullmatch(name):
        raise errors.BindingError(f"Hmac: {what} {name!r} is not a header name")
    return name.lower()


def _window(window: str | timedelta) -> timedelta:
    if isinstance(window, timedelta):
        length = window
    else:
        try:
            parsed = durations.parse_duration(window)
        except errors.DurationError as exc:
            raise errors.BindingError(f"Hmac: window: {exc.message}") from None
        if parsed.months:
            raise errors.BindingError("Hmac: window is given in minutes, hours or days")
        length = timedelta(days=parsed.days, seconds=parsed.seconds)
    if not timedelta(0) < length <= timedelta(days=1):
        raise errors.BindingError("Hmac: window is longer than zero and a day at most")
    return length


def _words(length: timedelta) -> str:
    return str(durations.Duration(days=length.days, seconds=length.seconds))


__all__ = ["MAX_BODY", "Hmac", "check", "too_large", "values"]
