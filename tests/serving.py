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

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "console-browser-test-token"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def served(
    app: str, database: str, *extra: str, env: dict[str, str] | None = None
) -> Iterator[str]:
    """``flowrunner console --app APP --database DATABASE`` with a token, running until the
    block ends; its base URL once uvicorn says it is listening."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flowrunner",
            "console",
            "--app",
            app,
            "--database",
            database,
            "--token",
            TOKEN,
            "--port",
            str(port),
            *extra,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    said: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            said.put(line)
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
        assert process.stderr is not None
        process.stderr.close()
