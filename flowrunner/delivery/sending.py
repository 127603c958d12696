"""One attempt at sending a message through a channel: e-mail over SMTP, an HTTP POST,
or the application's function.

``send`` returns when the channel took the message and raises ``Failed`` when it did
not, saying why in a sentence and whether trying again could help (``final``: the
receiver refused it — a 4xx answer, a 5xx SMTP reply, an address that is none). The
sentence is sanitized by the deliverer before it is stored.
"""

from __future__ import annotations

import email.message
import email.utils
import json
import os
import smtplib
from collections.abc import Mapping
from datetime import datetime

from flowrunner import errors
from flowrunner.delivery import channels
from flowrunner.foundations import extras, sanitize, tls

# Answers a receiver gives when it may take the message later.
_AGAIN = frozenset({408, 425, 429})


class Failed(Exception):
    """An attempt that did not deliver: ``reason`` in a sentence; ``final`` when trying
    again cannot help."""

    def __init__(self, reason: str, *, final: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.final = final


def send(
    channel: channels.Channel,
    message: channels.Message,
    *,
    now: datetime,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Send ``message`` through ``channel`` once; ``Failed`` when it was not taken."""
    environ = os.environ if environ is None else environ
    if isinstance(channel, channels.Smtp):
        _mail(channel, message, environ)
    elif isinstance(channel, channels.Webhook):
        _post(channel, message, now, environ)
    else:
        _call(channel, message)


def mail_of(channel: channels.Smtp, message: channels.Message) -> email.message.EmailMessage:
    """The e-mail a notice becomes: from the channel's sender to the recipient, its
    subject the title, its Message-ID the notice's (the same at every attempt)."""
    if "@" not in message.recipient or any(c in message.recipient for c in "\r\n<>,;"):
        raise Failed(
            f"the recipient {message.recipient!r} is not an e-mail address: the notify rule's "
            "column must hold one",
            final=True,
        )
    mail = email.message.EmailMessage()
    mail["From"] = channel.sender
    mail["To"] = message.recipient
    mail["Subject"] = " ".join(message.title.split())  # one line, whatever the title holds
    mail["Message-ID"] = channel.message_id(message.notice_id)
    if message.reply_to is not None:
        mail["Reply-To"] = message.reply_to
    mail["Date"] = email.utils.format_datetime(message.written_at)
    mail.set_content(message.text)
    return mail


def _mail(channel: channels.Smtp, message: channels.Message, environ: Mapping[str, str]) -> None:
    mail = mail_of(channel, message)
    password = None
    if channel.password_env is not None:
        password = environ.get(channel.password_env)
        if not password:
            raise Failed(
                f"the environment variable {channel.password_env} that holds the SMTP "
                "password is not set"
            )
    timeout = channel.timeout.total_seconds()
    try:
        server: smtplib.SMTP
        if channel.tls == "ssl":
            server = smtplib.SMTP_SSL(
                channel.host, channel.port, timeout=timeout, context=tls.for_mail()
            )
        else:
            server = smtplib.SMTP(channel.host, channel.port, timeout=timeout)
        with server:
            if channel.tls == "starttls":
                server.starttls(context=tls.for_mail())
            if channel.username is not None and password is not None:
                server.login(channel.username, password)
            server.send_message(mail)
    except smtplib.SMTPRecipientsRefused as exc:
        codes = sorted({code for code, _ in exc.recipients.values()})
        refused = all(code >= 500 for code in codes)
        raise Failed(
            f"the mail server refused the recipient ({', '.join(map(str, codes))})",
            final=refused,
        ) from None
    except smtplib.SMTPResponseException as exc:
        said = (
            exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else ""
        )
        raise Failed(
            f"the mail server answered {exc.smtp_code}: {said}".rstrip(": "),
            final=exc.smtp_code >= 500,
        ) from None
    except (smtplib.SMTPException, OSError) as exc:
        raise Failed(
            f"could not send through {channel.host}:{channel.port}: "
            f"{sanitize.describe_exception(exc)}"
        ) from None


def _post(
    channel: channels.Webhook,
    message: channels.Message,
    now: datetime,
    environ: Mapping[str, str],
) -> None:
    httpx = extras.require("httpx", what="a Webhook channel")
    body = json.dumps(message.body(), separators=(",", ":"), sort_keys=True).encode("utf-8")
    headers = {"content-type": "application/json", "idempotency-key": message.key}
    if channel.signing is not None:
        secret = environ.get(channel.signing.secret_env)
        if not secret:
            raise Failed(
                f"the environment variable {channel.signing.secret_env} that holds the "
                "webhook's secret is not set"
            )
        headers.update(channel.signing.sign(secret, body, now))
    try:
        answer = httpx.post(
            channel.url,
            content=body,
            headers=headers,
            timeout=channel.timeout.total_seconds(),
            follow_redirects=False,
            verify=tls.for_http(),
        )
    except httpx.HTTPError as exc:
        raise Failed(f"could not post to the webhook: {sanitize.describe_exception(exc)}") from None
    status = answer.status_code
    if 200 <= status < 300:
        return
    final = status < 500 and status not in _AGAIN
    raise Failed(f"the webhook answered {status}", final=final)


def _call(channel: channels.Deliver, message: channels.Message) -> None:
    try:
        channel.function(message)
    except errors.CommandRefused as exc:
        raise Failed(f"the application refused it: {exc}", final=True) from None
    except Exception as exc:
        raise Failed(
            f"the application's function failed: {sanitize.describe_exception(exc)}"
        ) from None
