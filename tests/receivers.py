"""Real receivers on 127.0.0.1 for the tests of notices delivered: a mail server
(aiosmtpd) that keeps every message it is handed, and a webhook receiver that checks
each request's signature, answers from a script (500 twice, then 200) and dedupes by
the Idempotency-Key, as a careful receiver does."""

from __future__ import annotations

import email
import email.message
import email.policy
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session
from provider import QuietServer

from flowrunner.inbound import signing

SECRET = "hook-s3cret"


@dataclass
class Mailbox:
    """What the mail server was handed: each message as parsed."""

    host: str = "127.0.0.1"
    port: int = 0
    received: list[email.message.EmailMessage] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or b""
        parsed = email.message_from_bytes(content, policy=email.policy.default)
        assert isinstance(parsed, email.message.EmailMessage)
        with self.lock:
            self.received.append(parsed)
        return "250 OK"

    def ids(self) -> list[str]:
        with self.lock:
            return [str(m["Message-ID"]) for m in self.received]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def mail_server() -> Iterator[Mailbox]:
    """An SMTP server on a free port of 127.0.0.1, for the ``with`` block."""
    box = Mailbox()
    box.port = _free_port()
    controller = Controller(box, hostname=box.host, port=box.port)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


@dataclass
class Received:
    key: str | None
    signed: str | None
    """Why the signature fails, or None when it holds."""
    body: dict[str, Any]


@dataclass
class Hooks:
    """The webhook receiver's script and what it received."""

    url: str = ""
    spec: signing.Hmac | None = None
    failures: list[int] = field(default_factory=list)
    """The statuses to answer before answering 200 (``always`` keeps answering them)."""
    always: int | None = None
    received: list[Received] = field(default_factory=list)
    accepted: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What it acted on, once per Idempotency-Key."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, headers: Any, raw: bytes) -> int:
        signed = None
        if self.spec is not None:
            pairs = list(headers.items())
            signed = signing.check(self.spec, SECRET.encode(), pairs, raw, datetime.now(UTC))
        key = headers.get("Idempotency-Key")
        body = json.loads(raw)
        with self.lock:
            self.received.append(Received(key, signed, body))
            if self.always is not None:
                return self.always
            if self.failures:
                return self.failures.pop(0)
            if signed is not None:
                return 401
            if key is not None and key not in self.accepted:
                self.accepted[key] = body
            return 200

    def keys(self) -> list[str | None]:
        with self.lock:
            return [r.key for r in self.received]


@contextmanager
def webhook_receiver(spec: signing.Hmac | None = None) -> Iterator[Hooks]:
    """The receiver on a free port of 127.0.0.1, for the ``with`` block."""
    hooks = Hooks(spec=spec)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            status = hooks.handle(self.headers, self.rfile.read(length))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the tests read what was received."""

    server = QuietServer(("127.0.0.1", 0), Handler)
    hooks.url = f"http://127.0.0.1:{server.server_address[1]}/notices"
    # Polled every 10 ms for the end of the block (serve_forever's default: 0.5 s).
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield hooks
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
