"""A real HTTP service on 127.0.0.1 for the tests of a workflow's ``call`` steps.

It keeps every request it receives (method, path, Idempotency-Key, JSON body, the
``traceparent`` header) and
answers each path from a script: the statuses to answer first (``503``, ``429``,
``404``...), then 200 with a JSON body. A request repeated with a key it answered
before gets the same answer, as an idempotent service does.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[dict[str, Any], int], dict[str, Any]]


@dataclass
class Received:
    method: str
    path: str
    key: str | None
    body: Any
    traceparent: str | None = None  # the W3C trace context it came with, if any


@dataclass
class Provider:
    """The service's script and what it received."""

    url: str = ""
    received: list[Received] = field(default_factory=list)
    failures: dict[str, list[int]] = field(default_factory=dict)
    """Per path: the statuses to answer before answering 200."""
    answer: Answer = lambda body, n: {"id": f"chk-{n}", **body}
    answered: dict[str, Any] = field(default_factory=dict)
    slow: dict[str, float] = field(default_factory=dict)
    """Per path: seconds to wait before answering (a service slower than its caller)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sent_keys(self, path: str | None = None) -> list[str]:
        """The Idempotency-Key of each request received (of ``path``), ``""`` for none."""
        return [r.key or "" for r in self.received if path is None or r.path == path]

    def handle(
        self, method: str, path: str, key: str | None, body: Any, traceparent: str | None = None
    ) -> tuple[int, Any]:
        with self.lock:
            self.received.append(Received(method, path, key, body, traceparent))
            waiting = self.failures.get(path) or []
            if waiting:
                return waiting.pop(0), {"error": "not now"}
            if key is not None and key in self.answered:
                return 200, self.answered[key]
            made = self.answer(body if isinstance(body, dict) else {}, len(self.answered) + 1)
            if key is not None:
                self.answered[key] = made
            return 200, made


class QuietServer(ThreadingHTTPServer):
    """A test's HTTP server: a client that hangs up before its answer (a timeout the test
    set) is what the test is about, not a traceback on the test run's output."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def serving() -> Iterator[Provider]:
    """The service on a free port of 127.0.0.1, for the ``with`` block."""
    provider = Provider()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            pause = provider.slow.get(self.path.split("?")[0])
            if pause:
                threading.Event().wait(pause)
            status, sent = provider.handle(
                self.command,
                self.path.split("?")[0],
                self.headers.get("Idempotency-Key"),
                body,
                self.headers.get("traceparent"),
            )
            data = json.dumps(sent).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the tests read what was received."""

    server = QuietServer(("127.0.0.1", 0), Handler)
    provider.url = f"http://127.0.0.1:{server.server_address[1]}"
    # Polled every 10 ms for the end of the block, not serve_forever's default 0.5 s:
    # a test that serves many times would otherwise wait half a second each time.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
