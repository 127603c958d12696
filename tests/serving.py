"""The console served as an operator serves it: ``flowrunner console`` in its own process
(uvicorn on 127.0.0.1), on a database the test prepared."""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import forked

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "console-browser-test-token"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def served(
    app: str,
    database: str,
    *extra: str,
    env: dict[str, str] | None = None,
    log: list[str] | None = None,
) -> Iterator[str]:
    """``flowrunner console --app APP --database DATABASE`` with a token, running until the
    block ends; its base URL once uvicorn says it is listening.

    The token is handed over as the console's guide says, in ``FLOWRUNNER_CONSOLE_TOKEN``
    (not on the command line, where the process list shows it). ``log`` gets every line
    the server writes, standard output and error alike, the access log's included.
    """
    port = free_port()
    process = forked.popen(
        [
            sys.executable,
            "-m",
            "flowrunner",
            "console",
            "--app",
            app,
            "--database",
            database,
            "--port",
            str(port),
            *extra,
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "FLOWRUNNER_CONSOLE_TOKEN": TOKEN,
            **(env or {}),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    said: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            said.put(line)
            if log is not None:
                log.append(line)
        said.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    lines: list[str] = []
    try:
        while True:
            line = said.get(timeout=60)
            if line is None:
                raise RuntimeError("the console stopped before listening:\n" + "".join(lines))
            lines.append(line)
            if "Uvicorn running on" in line:
                break
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:  # pragma: no cover - uvicorn ends on SIGTERM
            process.kill()
            process.wait()
        reader.join(timeout=20)
        assert process.stdout is not None
        process.stdout.close()


def sign_in(page: Any, base: str, path: str = "/") -> None:
    """Open ``path`` in a Playwright ``page``, as a person does: the console asks for its
    token on its sign-in page, and goes on to ``path`` once it is typed."""
    page.goto(base + path)
    page.locator("#signin-token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + path)
