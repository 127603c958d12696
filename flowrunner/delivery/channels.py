"""The channels a binding delivers notices through, as declared, and what each sends.

A binding names its channels (``FlowBinding(channels={"mail": Smtp(...), "hooks":
Webhook(...), "app": Deliver(function)})``) and each notify rule the one its notices go
through (``NotifyRule(..., channel="mail")``). Each declaration is checked when made:
one that cannot work is refused with a ``BindingError`` sentence. Secrets are never in
a declaration: ``password_env`` and ``secret_env`` name the environment variables that
hold them, read when a message is sent.

A notice becomes one ``Message``, the same at every attempt: its ``message_id`` (an
e-mail's Message-ID) and ``key`` (a webhook's Idempotency-Key) come from the notice's id,
so a receiver that sees it twice can tell.

>>> Smtp(host="127.0.0.1", port=2525, sender="flows@example.com").message_id(42)
'<notice-42@example.com>'
>>> next_attempt(retry_policy.RetryPolicy(max_attempts=3), 1, datetime(2026, 1, 5, tzinfo=UTC))
datetime.datetime(2026, 1, 5, 0, 0, 10, tzinfo=datetime.timezone.utc)
>>> next_attempt(retry_policy.RetryPolicy(max_attempts=3), 3, datetime(2026, 1, 5, tzinfo=UTC))
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

from flowrunner import errors
from flowrunner.foundations import retry_policy
from flowrunner.inbound import signing as signing_mod

# How long one attempt may take, unless a channel says.
TIMEOUT = timedelta(seconds=30)

# How often a notice is tried, unless the binding says (``FlowBinding.delivery_retry``):
# five attempts, 30 seconds after the first, then 1.5, 4.5 and 13.5 minutes.
DELIVERY_RETRY = retry_policy.RetryPolicy(
    max_attempts=5, base=timedelta(seconds=30), factor=3.0, cap=timedelta(hours=1)
)

# The headers a webhook signs with (``flowrunner.inbound.signing``'s scheme): the receiver
# checks them with ``Webhook.signing`` and the same secret.
SIGNATURE_HEADER = "x-flowrunner-signature"
TIMESTAMP_HEADER = "x-flowrunner-timestamp"

_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_ADDRESS = re.compile(r"[^@\s<>]+@([^@\s<>]+)")
_HOST = re.compile(r"[A-Za-z0-9.:\[\]_-]{1,253}")


@dataclass(frozen=True)
class Message:
    """One notice as a channel sends it: the same at every attempt.

    The text is the notify step's message as the run filled it in (the links an
    application writes into its messages come with it); ``title`` is the rule's.
    """

    notice_id: int
    channel: str
    key: str
    """The notice's id as text: a webhook's ``Idempotency-Key``."""
    audience: str
    recipient: str
    """The rule's ``to`` column's value on the record: an address, or a user's id."""
    title: str
    text: str
    run_id: int
    tenant: str | None
    written_at: datetime
    attempt: int
    """Which attempt this is (1 for the first)."""
    reply_to: str | None = None
    """An e-mail's Reply-To: where a reply goes (a reply address answers a waiting step)."""

    def body(self) -> dict[str, object]:
        """The message as JSON a webhook posts."""
        return {
            "id": self.notice_id,
            "channel": self.channel,
            "audience": self.audience,
            "recipient": self.recipient,
            "title": self.title,
            "message": self.text,
            "run_id": self.run_id,
            "tenant": self.tenant,
            "written_at": self.written_at.astimezone(UTC).isoformat(),
        }


@dataclass(frozen=True)
class Smtp:
    """E-mail through an SMTP server (the standard library's ``smtplib``).

    Each notice goes to its recipient (the rule's ``to`` column holds the address) from
    ``sender``, its subject the rule's title, its Message-ID ``<notice-ID@domain>``
    (``domain``: the sender's, unless given). ``tls``: ``"starttls"`` upgrades the
    connection, ``"ssl"`` connects over TLS, ``None`` sends in the clear (a relay on the
    same host). ``username`` with ``password_env`` (the NAME of the variable holding
    the password) logs in.
    """

    host: str
    sender: str
    port: int = 25
    tls: str | None = None
    username: str | None = None
    password_env: str | None = None
    domain: str | None = None
    timeout: timedelta = TIMEOUT

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not _HOST.fullmatch(self.host):
            raise errors.BindingError(f"Smtp: host {self.host!r} is not a host name or address")
        if not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise errors.BindingError(f"Smtp: port {self.port!r} is not a port (1 to 65535)")
        found = _ADDRESS.fullmatch(self.sender) if isinstance(self.sender, str) else None
        if found is None:
            raise errors.BindingError(
                f"Smtp: sender {self.sender!r} is not an e-mail address (flows@example.com)"
            )
        if self.tls not in (None, "starttls", "ssl"):
            raise errors.BindingError(f"Smtp: tls is 'starttls', 'ssl' or None, not {self.tls!r}")
        if (self.username is None) != (self.password_env is None):
            raise errors.BindingError(
                "Smtp: give username and password_env together (password_env names the "
                "environment variable that holds the password, never the password)"
            )
        if self.password_env is not None and not _VARIABLE.fullmatch(self.password_env):
            raise errors.BindingError(
                f"Smtp: password_env {self.password_env!r} must name an environment variable"
            )
        _positive(self.timeout, "Smtp")
        if self.domain is None:
            object.__setattr__(self, "domain", found.group(1))

    def message_id(self, notice_id: int) -> str:
        """The Message-ID of notice ``notice_id``'s e-mail, the same at every attempt."""
        return f"<notice-{notice_id}@{self.domain}>"


@dataclass(frozen=True)
class Webhook:
    """An HTTP POST of the message as JSON (``Message.body``) to ``url`` (httpx).

    Each request carries ``Idempotency-Key: <the notice's id>`` — the same at every
    attempt — and, when ``secret_env`` names the variable holding a shared secret, an
    HMAC-SHA256 signature over the timestamp and the raw body in
    ``X-Flowrunner-Signature`` (``sha256=`` and hex) with ``X-Flowrunner-Timestamp``:
    the scheme of ``flowrunner.inbound.signing``, which the receiver may check with
    ``signing.check(webhook.signing, secret, headers, body, now)``. A 2xx answer is
    sent; 408, 425, 429 and 5xx are tried again; any other answer fails at once.
    """

    url: str
    secret_env: str | None = None
    timeout: timedelta = TIMEOUT
    signing: signing_mod.Hmac | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise errors.BindingError(
                f"Webhook: url {self.url!r} is not an http(s) address (https://example.com/hook)"
            )
        if self.secret_env is not None:
            if not isinstance(self.secret_env, str) or not _VARIABLE.fullmatch(self.secret_env):
                raise errors.BindingError(
                    "Webhook: secret_env names the environment variable that holds the "
                    "secret (e.g. 'NOTICE_HOOK_SECRET'), never the secret itself"
                )
            spec = signing_mod.Hmac(
                secret_env=self.secret_env,
                header=SIGNATURE_HEADER,
                prefix="sha256=",
                timestamp_header=TIMESTAMP_HEADER,
            )
            object.__setattr__(self, "signing", spec)
        _positive(self.timeout, "Webhook")


@dataclass(frozen=True)
class Deliver:
    """The application's own function: called with each ``Message``; it sends it (a
    chat message, a push, a mail through the application's provider). Returning is
    sent; raising is a failed attempt, tried again."""

    function: Callable[[Message], object]

    def __post_init__(self) -> None:
        if not callable(self.function):
            raise errors.BindingError(
                f"Deliver: {self.function!r} is not a function; give one that takes a Message"
            )


Channel: TypeAlias = Smtp | Webhook | Deliver
"""What a binding's ``channels`` name."""


def _positive(timeout: object, what: str) -> None:
    if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
        raise errors.BindingError(f"{what}: timeout is a positive timedelta, not {timeout!r}")


def next_attempt(
    policy: retry_policy.RetryPolicy, attempts: int, now: datetime, *, final: bool = False
) -> datetime | None:
    """When a notice whose attempt number ``attempts`` just failed is tried again (the
    policy's backoff), or None when it has failed for good: its attempts are spent, or
    the failure was ``final`` (the receiver refused it)."""
    if final or attempts >= policy.max_attempts:
        return None
    wait = policy.base * policy.factor ** max(attempts - 1, 0)
    return now + min(policy.cap, wait)
