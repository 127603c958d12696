"""What an application's command receives when a step of its kind runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.authority import grants
from flowrunner.foundations import payloads


class _Connection:
    """``CommandContext.conn``: the step's connection, told to the step the first time
    the command reads it (``on_first_use``).

    A command that never reads it cannot have written through the step's transaction,
    so the step needs no savepoint for it: the step opens one only when the command
    asks for the connection, before the command gets it.
    """

    def __get__(self, context: object, owner: type | None = None) -> sa.Connection:
        if context is None:
            raise AttributeError("conn")  # on the class: a field without a default
        values = context.__dict__
        first_use = values.pop(_FIRST_USE, None)
        if first_use is not None:
            first_use()
        connection: sa.Connection = values["_conn"]
        return connection

    def __set__(self, context: object, connection: sa.Connection) -> None:
        context.__dict__["_conn"] = connection


_FIRST_USE = "_first_use"


@dataclass(frozen=True)
class CommandContext:
    """The context an application command runs with.

    ``conn`` is the connection of the step's own transaction: what the command
    writes through it commits with the step, exactly once. Calls to outside
    systems should pass ``idempotency_key``, which is the same on every retry of
    this step's pass (they happen at least once).

    With a kind ``timeout``, ``deadline`` is when this attempt's time is up and
    ``time_left()`` the seconds until then: pass it on to whatever may block, e.g.
    ``httpx.post(url, timeout=ctx.time_left())``. An attempt that ends after its deadline
    is rolled back and counts as failed, whatever it answered.

    A command an inbound runs (``inbound`` names it) has no record and no run: its
    ``inputs`` come from the callback's body, ``conn`` is the callback's transaction and
    ``idempotency_key`` is the same for every delivery of the same key.
    """

    record: Mapping[str, object]
    inputs: Mapping[str, object]
    conn: sa.Connection
    principal: str
    idempotency_key: str
    # A step's run, flow and place; an inbound's command has none (0, "", None, 0).
    run_id: int = 0
    flow_name: str = ""
    step_title: str | None = None
    position: int = 0
    attempt: int = 1
    reminder: int | None = None
    tenant: str | None = None
    # The runner's clock at this step: use it rather than the wall clock, so tests
    # that move the clock by hand see consistent times. A reminder sent late (after an
    # outage) has the time it was due: the flow's time, as on its history line.
    now: datetime | None = None
    deadline: datetime | None = None
    # The runner's clock, which ``deadline`` is on.
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC), repr=False)
    # The inbound endpoint whose signed callback runs the command (None for a step).
    inbound: str | None = None

    def time_left(self) -> float | None:
        """Seconds until ``deadline`` (0.0 once it has passed), or None without a timeout."""
        if self.deadline is None:
            return None
        return max(0.0, (self.deadline - self.clock()).total_seconds())


# Put on the class once ``dataclass`` has made it (so ``conn`` stays a required field):
# the generated ``__init__`` sets it through ``_Connection.__set__``.
setattr(CommandContext, "conn", _Connection())  # noqa: B010


def on_first_use(context: CommandContext, call: Callable[[], None]) -> None:
    """Have ``call`` called once, the first time the command reads ``context.conn``
    (the step opens its savepoint then: a command that never reads it wrote nothing)."""
    context.__dict__[_FIRST_USE] = call


# A command answers nothing, or a mapping such as {"asked": 3}. The answer is kept as JSON
# by the rule of an event's payload (``foundations.payloads``): a Decimal, date, datetime,
# UUID, enum or pydantic model is welcome and kept as FastAPI would answer it; one that
# cannot be kept (a NaN, an arbitrary object) refuses the step with a sentence.
Command = Callable[[CommandContext], Mapping[str, object] | None]


# Whether a principal may run a command (the application's ``authorize`` hook).
Authorize = Callable[[str, str], bool]


def check_mounted(
    command: str,
    *,
    principal: str,
    commands: Mapping[str, object],
    authorize: Authorize | None,
    needed_by: str,
) -> None:
    """At mount: ``command`` is one the runner was given, and ``principal`` may run it;
    else a ``BindingError`` naming what needs it (``"kind 'approval'"``, ``"job 'nightly'"``).

    >>> check_mounted("send", principal="bot", commands={"send": print},
    ...               authorize=lambda who, command: who != "bot", needed_by="kind 'send'")
    Traceback (most recent call last):
    flowrunner.errors.BindingError: principal 'bot' is not allowed to run command 'send', ...
    """
    for what, name in (("runs as the principal", principal), ("runs command", command)):
        # Both are kept in text columns (who started a run, its snapshot): text they hold.
        if not isinstance(name, str) or not name.strip():
            raise errors.BindingError(f"{needed_by} {what} {name!r}, which is no name")
        problem = payloads.text_problem(name)
        if problem is not None:
            raise errors.BindingError(f"{needed_by} {what} {name!r}, which {problem}")
    if command not in commands:
        given = ", ".join(sorted(commands)) or "none"
        raise errors.BindingError(
            f"{needed_by} runs command {command!r}, but the runner was given no command of "
            f"that name (commands: {given})"
        )
    if isinstance(authorize, grants.Authority):
        # Declared principals: what runs unattended holds service roles alone, and each
        # command it names is granted to one of them.
        problem = authorize.run_as_problem(principal)
        if problem is not None:
            raise errors.BindingError(f"{needed_by} runs as {principal}, but {problem}")
        refusal = authorize.refusal(principal, command)
        if refusal is not None:
            raise errors.BindingError(
                f"{needed_by} runs command {command}, but {refusal}: grant it to one of "
                "the principal's roles"
            )
    if authorize is not None and not authorize(principal, command):
        raise errors.BindingError(
            f"principal {principal!r} is not allowed to run command {command!r}, "
            f"which {needed_by} needs"
        )
