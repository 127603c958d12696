"""The ``w`` a code workflow's body is given: its steps, each one awaitable.

Each method checks what it is given and returns an awaitable that hands the step
(a ``replay.Ask``) to whoever drives the body — the worker — and gives back what the
driver sends: the step's stored result, or the result of doing it now. The body must
await nothing else (no ``asyncio``): a workflow is replayed from its recorded steps,
so the code between steps may only use step results and its start.

Pure: nothing here reads a clock, a database or the network.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from flowrunner import errors
from flowrunner.foundations import durations, payloads, retry_policy, sanitize, shapes
from flowrunner.workflows import replay

T = TypeVar("T")

# A call's retries unless it says: five attempts, doubling from 10 seconds, at most 10 minutes.
CALL_RETRY = retry_policy.RetryPolicy(
    max_attempts=5, base=timedelta(seconds=10), cap=timedelta(minutes=10)
)
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})


class Step(Generic[T]):
    """One step the body awaits: yields its ``Ask`` to the driver, returns what it sends."""

    __slots__ = ("ask",)

    def __init__(self, ask: replay.Ask) -> None:
        self.ask = ask

    def __await__(self) -> Generator[replay.Ask, shapes.Json, T]:
        result: T = yield self.ask
        return result


class Context:
    """What a workflow's body is given as ``w``: its steps, its version, its run."""

    def __init__(
        self, *, workflow: str, version: int, run_id: int, key: str, record_id: str
    ) -> None:
        self.workflow = workflow
        """The workflow's name."""
        self.version = version
        """The version this run was started on (pinned: branch on it when raising it)."""
        self.run_id = run_id
        """The run's id."""
        self.key = key
        """The start's key (``key(event)`` of an event start)."""
        self.record_id = record_id
        """The record the run is on: ``wait_for`` counts the events about it."""

    def run(
        self,
        name: str,
        command: str,
        *,
        target: object = None,
        input: shapes.Payload | None = None,
        outside: bool = True,
        limit: str | None = None,
    ) -> Step[shapes.JsonDict | None]:
        """Run the application's ``command`` as the workflow's principal, exactly once:
        its writes commit with the step's record. ``target`` names the record it acts on
        (default: the run's); ``input`` is what it reads as ``ctx.inputs``. Returns its
        answer; raises ``StepRefused`` when it refuses.

        Each such step has a checkpoint of its own (its result, writes and history
        commit before the body goes on), as the command may reach outside the database.
        ``outside=False`` declares that it only writes through ``ctx.conn``: it then
        shares the next step's commit. ``limit`` names one of the ``Workflows``'
        ``limits``: the command starts only with a turn of it, waiting its turn after
        the runs that wait already.
        """
        _name(name)
        _word(name, command, "name the command to run")
        if limit is not None:
            _word(name, limit, "name one of the workflows' limits")
        options: dict[str, object] = {
            "target": None if target is None else str(target),
            "input": _plain(name, input),
        }
        if not outside:
            options["outside"] = False
        if limit is not None:
            options["limit"] = limit
        return Step(replay.Ask(name, replay.RUN, command, options))

    def call(
        self,
        name: str,
        connection: str,
        request: shapes.Payload,
        *,
        retry: shapes.Payload | retry_policy.RetryPolicy | None = None,
    ) -> Step[shapes.Json]:
        """Call the HTTP ``connection`` with ``request`` (``method``, ``path``, ``body``,
        ``headers``, ``query``) and an ``Idempotency-Key``, at least once. A 5xx, 408,
        429 or a timeout is tried again with backoff (``retry``: ``attempts``,
        ``backoff``, ``max``); a 4xx raises ``StepRefused``. Returns the answer's JSON body.
        """
        _name(name)
        _word(name, connection, "name the connection to call")
        if not isinstance(request, Mapping):
            raise errors.BindingError(f"step {name!r}: a request is a mapping (method, path, ...)")
        method = str(request.get("method", "GET")).upper()
        if method not in METHODS:
            raise errors.BindingError(
                f"step {name!r}: method {method!r} is not one of {', '.join(sorted(METHODS))}"
            )
        path = str(request.get("path", "/"))
        sent = {
            "method": method,
            "path": path if path.startswith("/") else f"/{path}",
            "body": _json(name, request.get("body")),
            "headers": _headers(name, request.get("headers")),
            "query": {str(k): str(v) for k, v in dict(request.get("query") or {}).items()},
        }
        options = {"request": sent, "retry": retry_of(name, retry)}
        return Step(replay.Ask(name, replay.CALL, connection, options))

    def child(
        self,
        workflow: str,
        *,
        input: shapes.Payload | None = None,
        key: str | None = None,
        record: object = None,
    ) -> Step[shapes.Json]:
        """Start ``workflow`` (another of the same ``Workflows``, its latest version) as a
        child run given ``input`` as its start, on this run's record unless ``record``
        says; wait until it ends, and return what it returned. Raises ``StepRefused``
        when the child fails or is cancelled.

        The step is named ``key`` (the workflow's name unless said: a run that starts one
        workflow twice names each start), and the child is started once per run and key,
        whatever crashes. Cancelling this run cancels the child it waits for.
        """
        if not isinstance(workflow, str) or not workflow.strip():
            raise errors.BindingError("w.child: name the workflow to start")
        name = workflow if key is None else key
        _name(name)
        options: dict[str, object] = {
            "input": _plain(name, input),
            "record": None if record is None else str(record),
        }
        return Step(replay.Ask(name, replay.CHILD, workflow, options))

    def wait_for(
        self,
        name: str,
        event: str,
        *,
        match: Callable[[shapes.Payload], bool] | None = None,
        timeout: str | timedelta | None = None,
    ) -> Step[shapes.JsonDict | None]:
        """The first ``event`` about the run's record since the run began for which
        ``match(payload)`` holds — one that came before this step was reached counts —
        or None once ``timeout`` (counted from when the step was reached) has passed."""
        _name(name)
        _word(name, event, "name the event to wait for")
        options = {"match": match, "timeout": None if timeout is None else _length(name, timeout)}
        return Step(replay.Ask(name, replay.WAIT_FOR, event, options))

    def sleep(self, name: str, length: str | timedelta) -> Step[None]:
        """A durable timer: goes on ``length`` (``"2 days"``) after the step before ended."""
        _name(name)
        return Step(replay.Ask(name, replay.SLEEP, None, {"length": _length(name, length)}))

    def until(self, name: str, when: datetime | str) -> Step[None]:
        """A durable timer: goes on at ``when`` (a datetime or ISO 8601; naive is UTC)."""
        _name(name)
        if isinstance(when, str):
            try:
                when = datetime.fromisoformat(when)
            except ValueError:
                raise errors.BindingError(
                    f"step {name!r}: {when!r} is not a time (write it in ISO 8601)"
                ) from None
        if not isinstance(when, datetime):
            raise errors.BindingError(f"step {name!r}: until takes a datetime")
        moment = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        return Step(replay.Ask(name, replay.UNTIL, None, {"when": moment.isoformat()}))

    def now(self, name: str) -> Step[datetime]:
        """The time, as a step: the same on every replay of this run."""
        _name(name)
        return Step(replay.Ask(name, replay.NOW))


def _name(name: object) -> None:
    if not isinstance(name, str) or not name.strip():
        raise errors.BindingError("every step of a workflow needs a name (a non-empty text)")
    # A step's name is kept in text and JSON columns (its record, its history, its
    # command's idempotency key): text they hold, on SQLite and PostgreSQL alike.
    problem = payloads.text_problem(name)
    if problem is not None:
        raise errors.BindingError(f"step {name!r}: its name {problem}")


def _word(name: str, given: object, ask: str) -> None:
    """A command's, a connection's or an event's name, kept with the step's record."""
    if not isinstance(given, str) or not given.strip():
        raise errors.BindingError(f"step {name!r}: {ask}")
    problem = payloads.text_problem(given)
    if problem is not None:
        raise errors.BindingError(f"step {name!r}: {ask}: {given!r} {problem}")


def _length(name: str, length: str | timedelta) -> str:
    """A duration as the state keeps it (its text), checked now: read back as the run
    will read it (a negative timedelta is refused as ``-1 day`` is)."""
    if isinstance(length, timedelta):
        text = str(durations.Duration(days=length.days, seconds=length.seconds))
    else:
        text = str(length)
    try:
        durations.parse_duration(text)
    except errors.DurationError as exc:
        raise errors.BindingError(f"step {name!r}: {exc.message}") from None
    return text


def _plain(name: str, given: shapes.Payload | None) -> shapes.JsonDict:
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise errors.BindingError(f"step {name!r}: input is a mapping of names to values")
    try:
        return payloads.plain(given)
    except payloads.NotPlain as exc:
        raise errors.BindingError(f"step {name!r}: {exc}") from None


def _json(name: str, body: object) -> shapes.Json:
    if body is None or isinstance(body, str | int | float | bool):
        return body
    if isinstance(body, Mapping):
        return _plain(name, body)
    if isinstance(body, list | tuple):
        return _plain(name, {"list": list(body)})["list"]
    raise errors.BindingError(f"step {name!r}: a request's body is JSON data")


def retry_of(
    name: str, given: shapes.Payload | retry_policy.RetryPolicy | None
) -> retry_policy.RetryPolicy:
    """A call's retry (``{"attempts": 4, "backoff": "30 seconds", "max": "10 minutes"}``).

    >>> retry_of("x", {"attempts": 4, "backoff": "30 seconds"}).base
    datetime.timedelta(seconds=30)
    """
    if given is None:
        return CALL_RETRY
    if isinstance(given, retry_policy.RetryPolicy):
        return given
    unknown = sorted(set(given) - {"attempts", "backoff", "max"})
    if unknown:
        raise errors.BindingError(
            f"step {name!r}: a retry says attempts, backoff and max, not {', '.join(unknown)}"
        )
    now = datetime(2000, 1, 1, tzinfo=UTC)

    def length(key: str, default: timedelta) -> timedelta:
        if given.get(key) is None:
            return default
        return durations.parse_duration(_length(name, given[key])).add_to(now) - now

    try:
        return retry_policy.RetryPolicy(
            max_attempts=int(given.get("attempts", CALL_RETRY.max_attempts)),
            base=length("backoff", CALL_RETRY.base),
            cap=length("max", CALL_RETRY.cap),
        )
    except ValueError as exc:
        raise errors.BindingError(f"step {name!r}: {exc}") from None


def _headers(name: str, given: object) -> dict[str, str]:
    """A call's headers as text; ``BindingError`` for one HTTP cannot carry (not ASCII,
    or a line break), refused where the body asks rather than when the step is sent."""
    headers = {str(k): str(v) for k, v in dict(given or {}).items()}  # type: ignore[call-overload]
    for key, value in headers.items():
        if not (key + value).isascii() or any(ch in key + value for ch in "\r\n\x00"):
            raise errors.BindingError(
                f"step {name!r}: header {sanitize.sanitize_text(key, 40)!r} holds text an "
                "HTTP header cannot carry (only ASCII, no line breaks)"
            )
    return headers
