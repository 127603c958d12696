"""Outbound calls: a code workflow's ``w.call`` attempt against a service on 127.0.0.1,
beside the same request made with a new ``httpx.Client`` of httpx's defaults (which
reads the certificate authorities' bundle for every client, as each call did before the
process kept one TLS context: ``flowrunner/foundations/tls.py``).

    python bench/calls.py [--calls 200] [--rounds 5]

The variants take turns in every round, so a busy machine weighs on both alike; the
script prints each one's calls per second and CPU milliseconds per call (the process's,
the service's thread included), medians over the rounds, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from flowrunner.workflows import Connection, http_call

REQUEST = {"method": "POST", "path": "/checks", "body": {"ticket": 1}}


class _Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = json.dumps({"id": "chk-1"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@contextmanager
def service() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def ours(url: str) -> Callable[[int], None]:
    connection = Connection(url, timeout=5.0)

    def call(n: int) -> None:
        outcome = http_call.attempt(connection, REQUEST, key=f"run-1/check-{n}")
        assert isinstance(outcome, http_call.Answered), outcome

    return call


def new_client(url: str) -> Callable[[int], None]:
    def call(n: int) -> None:
        with httpx.Client(base_url=url, timeout=5.0) as client:
            answer = client.request("POST", "/checks", json=REQUEST["body"])
        assert answer.status_code == 200

    return call


VARIANTS = {
    "w.call attempt (one TLS context a process)": ours,
    "a new httpx.Client a call (httpx's defaults)": new_client,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls a variant makes a round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, the variants taking turns")
    args = parser.parse_args()
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with service() as url:
        calls = {name: make(url) for name, make in VARIANTS.items()}
        for call in calls.values():
            call(0)  # warm: imports, the first connection
        for _ in range(args.rounds):
            for name, call in calls.items():
                wall, used = time.perf_counter(), time.process_time()
                for n in range(args.calls):
                    call(n)
                wall, used = time.perf_counter() - wall, time.process_time() - used
                rates[name].append(args.calls / wall)
                cpu[name].append(used / args.calls * 1000)
    print(f"{'variant':46} {'calls/s':>8} {'CPU ms/call':>12}")
    for name in VARIANTS:
        print(
            f"{name:46} {statistics.median(rates[name]):8.0f} {statistics.median(cpu[name]):12.2f}"
        )
    first, second = VARIANTS
    ratio = statistics.median(a / b for a, b in zip(rates[first], rates[second], strict=True))
    print(f"\n{first} over {second}: {ratio:.1f}x the calls a second")


if __name__ == "__main__":
    main()
