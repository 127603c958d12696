"""The Python processes the tests start, forked from one that has imported the package.

A new interpreter spends about half a second importing SQLAlchemy, flowrunner and the
rest before it runs a line of its own, and the suite starts more than a hundred (worker
processes to kill, the command line, the console served): importing was a fifth of all
the CPU its Python processes used.
So each test process keeps one Python process that has imported them once (``serve``,
started the first time it is needed), and ``Popen`` and ``run`` ask it for a fork that
runs the script, module or code as ``python`` would: its argv, environment, working
folder, standard streams and ``sys.path`` its own, ``__main__`` new, its exit code or
the signal that killed it returned as ``subprocess`` returns them. The process is real:
it has its own pid to signal or kill, and it ends as an interpreter ends (its threads
joined, its ``atexit`` run). What it imports that the server had not imported, it imports.

Only ``python script.py``, ``python -m module`` and ``python -c code`` are forked, with no
options of the interpreter but ``-W``; anything else (``-X``, ``-u``, ...) is started by
``subprocess`` itself, as is everything when ``FLOWRUNNER_TEST_EXEC=1`` (to compare, or
to rule the forks out when a test fails). Another interpreter (the guides' environment,
where the wheel is installed), or this one with ``-W`` options, has a server of its own,
started with those options and the first request's environment, so that what it imports
first it imports as a new interpreter with them would (warnings as errors too).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import io
import json
import os
import runpy
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import traceback
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# What the forks find imported already: what a worker, the command line and the console
# import (those not installed are left out).
PRELOADED = (
    "sqlalchemy",
    "sqlalchemy.dialects.sqlite.pysqlite",
    "sqlalchemy.dialects.postgresql.psycopg",
    "psycopg",
    "alembic.command",
    "yaml",
    "httpx",
    "flowrunner.runner",
    "flowrunner.engine.worker",
    "flowrunner.cli",
    "flowrunner.web.console",
    "uvicorn",
    "fixtures.tickets.app",
    "fixtures.purchase_orders.app",
)

_HEADER = struct.Struct("!I")
_OPTIONS = frozenset(
    {"stdin", "stdout", "stderr", "text", "env", "cwd", "encoding", "errors", "bufsize"}
)


def forkable(args: Sequence[Any], options: dict[str, Any]) -> bool:
    """Whether ``args`` (with ``Popen``'s ``options``) is a plain run of a Python
    interpreter (``_interpreter``)."""
    if os.environ.get("FLOWRUNNER_TEST_EXEC") or not set(options) <= _OPTIONS:
        return False
    return _interpreter([str(a) for a in args]) is not None


def _interpreter(args: list[str]) -> tuple[tuple[str, ...], list[str]] | None:
    """``args`` as (the interpreter with its ``-W`` options, what it runs: a script, ``-m
    module`` or ``-c code``, and their arguments); None when they are something else."""
    if not args or not Path(args[0]).name.startswith("python"):
        return None
    at = 1
    while at + 1 < len(args) and args[at] == "-W":
        at += 2
    rest = args[at:]
    if not rest or (rest[0] in ("-m", "-c") and len(rest) < 2):
        return None
    if rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
        return None
    return tuple(args[:at]), rest


def popen(args: Sequence[Any], **options: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(args, **options)``, forked where it can be (``forkable``)."""
    if forkable(args, options):
        return Forked(list(args), **options)
    return subprocess.Popen(args, **options)


def run(
    args: Sequence[Any],
    *,
    input: str | bytes | None = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **options: Any,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run``, forked where it can be (``forkable``)."""
    if capture_output:
        options |= {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    if input is not None:
        options["stdin"] = subprocess.PIPE
    with popen(args, **options) as process:
        try:
            out, err = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
    done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    if check:
        done.check_returncode()
    return done


class Forked(subprocess.Popen[Any]):
    """A ``Popen`` whose child is forked by this test process's server (``serve``)."""

    _status: Any = None  # the server's answers: the pid, then the wait status

    def _execute_child(self, args: list[str], *rest: Any) -> None:
        # Popen's own order of the arguments, read here by name.
        names = [
            "executable",
            "preexec_fn",
            "close_fds",
            "pass_fds",
            "cwd",
            "env",
            "startupinfo",
            "creationflags",
            "shell",
            "p2cread",
            "p2cwrite",
            "c2pread",
            "c2pwrite",
            "errread",
            "errwrite",
        ]
        given = dict(zip(names, rest, strict=False))
        streams = [
            given["p2cread"] if given["p2cread"] != -1 else 0,
            given["c2pwrite"] if given["c2pwrite"] != -1 else 1,
            given["errwrite"] if given["errwrite"] != -1 else 2,
        ]
        env = dict(os.environ if given["env"] is None else given["env"])
        cwd = os.fspath(given["cwd"]) if given["cwd"] is not None else os.getcwd()
        found = _interpreter(args)
        assert found is not None
        interpreter, argv = found
        request = json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode()
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(_server(interpreter, env))
        socket.send_fds(connection, [_HEADER.pack(len(request))], streams)
        connection.sendall(request)
        self._status = connection.makefile("rb")
        self._connection = connection
        self.pid = int(self._status.readline())
        # Popen's own: the child's ends of the pipes are the child's alone now.
        devnull = self.__dict__.get("_devnull")
        for mine, theirs in (
            ("p2cwrite", "p2cread"),
            ("c2pread", "c2pwrite"),
            ("errread", "errwrite"),
        ):
            if given[theirs] != -1 and given[mine] != -1 and given[theirs] != devnull:
                os.close(given[theirs])
        if devnull is not None:
            os.close(devnull)
        self._closed_child_pipe_fds = True

    def _read_status(self, *, block: bool) -> None:
        """Take the child's wait status when the server has sent it (or wait for it)."""
        if self.returncode is not None:
            return
        if not block and not select.select([self._connection], [], [], 0)[0]:
            return
        said = self._status.readline()  # nothing: the server itself was killed
        self.returncode = os.waitstatus_to_exitcode(int(said)) if said else -signal.SIGKILL
        self._status.close()
        self._connection.close()

    def _internal_poll(self, *_: Any, **__: Any) -> int | None:
        self._read_status(block=False)
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        if self.returncode is None:
            ready = [self._connection]
            if timeout is not None and not select.select(ready, [], [], max(timeout, 0))[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_status(block=True)
        assert self.returncode is not None
        return self.returncode


# -- the server ------------------------------------------------------------------------

# Each test process's servers, by the interpreter and its options they fork.
_started: dict[tuple[int, tuple[str, ...]], tuple[str, subprocess.Popen[bytes]]] = {}
_SERVERS_PYTHONPATH: list[str] = []  # the server's own PYTHONPATH, which a fork leaves


def _server(interpreter: tuple[str, ...], env: dict[str, str]) -> str:
    """This test process's server's socket for ``interpreter`` (its path and options),
    the server started the first time: this test process's own interpreter in its
    environment, another in ``env``, the environment of the first request for it."""
    key = (os.getpid(), interpreter)
    mine = _started.get(key)
    if mine is None:
        folder = tempfile.mkdtemp(prefix="forks-")
        path = str(Path(folder) / "server")
        process = subprocess.Popen(
            [*interpreter, __file__, path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            cwd=Path(__file__).parent.parent,
            env=None if interpreter == (sys.executable,) else env,
        )
        assert process.stdout is not None
        ready = process.stdout.readline()
        if ready != b"ready\n":
            raise RuntimeError(f"the test process's fork server did not start: {ready!r}")
        mine = _started[key] = (path, process)
        atexit.register(_stop, process, folder)
    return mine[0]


def _stop(process: subprocess.Popen[bytes], folder: str) -> None:
    process.terminate()
    process.wait()
    if process.stdout is not None:  # read to its "ready" line only
        process.stdout.close()
    with contextlib.suppress(OSError):
        os.unlink(Path(folder) / "server")
        os.rmdir(folder)


def serve(path: str) -> None:
    """Import ``PRELOADED``, then fork a child for every request on ``path``'s socket
    until the test process that started it ends."""
    _SERVERS_PYTHONPATH.extend(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    for name in PRELOADED:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    # What was imported stays as it is: a fork's collections never walk it (which would
    # copy every page of it into the fork).
    gc.freeze()
    parent = os.getppid()
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(path)
    listening.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while os.getppid() == parent:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        if not select.select([listening], [], [], 1.0)[0]:
            continue
        connection, _ = listening.accept()
        header, streams, _, _ = socket.recv_fds(connection, _HEADER.size, 3)
        (size,) = _HEADER.unpack(header)
        request = b""
        while len(request) < size:
            request += connection.recv(size - len(request))
        if os.fork() == 0:
            listening.close()
            _watch(connection, json.loads(request), streams)
        connection.close()
        for fd in streams:
            os.close(fd)


def _watch(connection: socket.socket, request: dict[str, Any], streams: list[int]) -> None:
    """In a fork of the server: fork the child, tell its pid, wait, tell how it ended."""
    child = os.fork()
    if child == 0:
        connection.close()
        _become(request, streams)
    for fd in streams:
        os.close(fd)
    connection.sendall(f"{child}\n".encode())
    _, status = os.waitpid(child, 0)
    with contextlib.suppress(OSError):
        connection.sendall(f"{status}\n".encode())
    os._exit(0)


def _become(request: dict[str, Any], streams: list[int]) -> None:
    """Run the request as ``python`` would run it, then end as an interpreter ends."""
    for number, fd in enumerate(streams):
        os.dup2(fd, number)
    for fd in set(streams) - {0, 1, 2}:
        os.close(fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv: list[str] = request["argv"]
    given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if os.environ.get("PYTHONUNBUFFERED"):
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(write_through=True)
    base = [p for p in sys.path[1:] if p not in _SERVERS_PYTHONPATH]
    code = 0
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[:] = [os.getcwd(), *given, *base]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[:] = ["", *given, *base]
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        else:
            script = os.path.abspath(argv[0])
            sys.argv = list(argv)
            sys.path[:] = [os.path.dirname(script), *given, *base]
            runpy.run_path(script, run_name="__main__")
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        code = 1
    raise SystemExit(code)


if __name__ == "__main__":
    serve(sys.argv[1])
