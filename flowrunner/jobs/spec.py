"""What an application declares about its jobs: ``Job`` (on an event, or at times) and
the ``Plan`` an event job's ``schedule`` makes of an event.

A job only runs one of the runner's commands, as its own principal (``run_as``); there
is no free-form handler. ``flowrunner.jobs`` mounts the declarations on a runner and
runs them on its workers.

    jobs = Jobs(runner, {
        "tell_the_buyer": Job(on="po.decided", command="notify_buyer", run_as="clock",
                              schedule=lambda event: Plan(key=event.payload["order"])),
        "nightly_close": Job(every="0 6 * * 1-5", timezone="America/New_York",
                             command="close_stale_orders", run_as="clock"),
        "sync_rates": Job(every="90 seconds", command="sync_rates", run_as="clock",
                          catch_up="none", overlap="skip", realm="tenant"),
    })
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from flowrunner import errors
from flowrunner.foundations import durations, limits, payloads, retry_policy, shapes, spoken
from flowrunner.jobs import catch_up as catch_up_mod
from flowrunner.jobs import schedules

REALMS = ("platform", "tenant")


@dataclass(frozen=True)
class Emitted:
    """An event as a job's ``schedule`` reads it: stored, in the emitting transaction."""

    id: int
    """The event's id."""
    name: str
    """``po.decided``."""
    payload: shapes.Payload
    """Its fields, as plain data (``flowrunner.foundations.payloads``)."""
    record_id: str
    """The key of the record it names, as text."""
    tenant: str | None
    """The record's tenant on a tenant binding."""
    at: datetime
    """When it was emitted (the runner's clock)."""


@dataclass(frozen=True)
class Plan:
    """The job an event plans: when it runs, what makes it one, and the command's input.

    ``key`` names the job among the event's re-sendings: a re-sent event gives the same
    key and plans nothing new. ``run_at`` is an aware moment (None: at once). ``target``
    is the key of the record the command acts on (None: the event's own record), of the
    event's tenant on a tenant binding.
    """

    key: object
    run_at: datetime | None = None
    input: shapes.Payload = field(default_factory=dict)
    target: object = None


Schedule = Callable[[Emitted], Plan]


@dataclass(frozen=True)
class Job:
    """One job: ``on`` an event with a pure ``schedule``, or ``every`` cron slot on
    ``timezone``'s wall clock; it runs ``command`` as ``run_as``.

    ``every`` is five cron fields (or ``@daily``…) or an interval of elapsed time
    (``"90 seconds"``). A job at times says what happens after a stop (``catch_up``:
    ``"latest"``, ``"all"``, ``"none"``) and when a slot comes while its last one still
    runs (``overlap``: ``"wait"``, ``"skip"``, ``"allow"``): ``flowrunner.jobs.catch_up``.
    ``realm="tenant"`` runs it once per active tenant, in that tenant's scope; the
    default ``"platform"`` runs it once, in no tenant's.

    ``retry`` is how often a failing attempt is tried again (the runner's policy by
    default); ``timeout`` bounds one attempt (``"30 seconds"``). ``concurrency`` (``5``)
    and ``rate`` (``"10/minute"``) limit its command's runs across every worker on one
    database: a run over the limit waits its turn, the oldest first.
    """

    command: str
    run_as: str
    on: str | None = None
    schedule: Schedule | None = None
    every: str | None = None
    timezone: str = "UTC"
    retry: retry_policy.RetryPolicy | None = None
    timeout: str | timedelta | None = None
    catch_up: str = "latest"
    overlap: str = "wait"
    realm: str = "platform"
    concurrency: int | None = None
    rate: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.command, str) or not self.command:
            raise errors.BindingError("a job needs the name of the command it runs")
        if not isinstance(self.run_as, str) or not self.run_as:
            raise errors.BindingError(f"job command {self.command!r} needs a principal: run_as")
        if (self.on is None) == (self.every is None):
            raise errors.BindingError(
                f"a job running {self.command!r} runs either on an event (on=...) or at "
                "times (every=...): name one"
            )
        if self.on is not None and not callable(self.schedule):
            raise errors.BindingError(
                f"the job on {self.on!r} needs a schedule: a function of the event answering a Plan"
            )
        if self.every is not None:
            if self.schedule is not None:
                raise errors.BindingError(
                    "a job at times has no schedule function: its times are its cron fields"
                )
            schedules.read(self.every, self.timezone)
        for option, value, choices in (
            ("catch_up", self.catch_up, catch_up_mod.CATCH_UP),
            ("overlap", self.overlap, catch_up_mod.OVERLAP),
            ("realm", self.realm, REALMS),
        ):
            if value not in choices:
                said = ", ".join(repr(choice) for choice in choices)
                raise errors.BindingError(
                    f"the job running {self.command!r} has {option}={value!r}: "
                    f"{option} is one of {said}"
                )
        if self.on is not None and (self.catch_up, self.overlap) != ("latest", "wait"):
            raise errors.BindingError(
                f"the job on {self.on!r} runs when an event plans it: catch_up and overlap "
                "are for a job at times (every=...)"
            )
        self.timeout_delta  # noqa: B018 - read once, so a bad timeout fails at declaration
        try:
            self.limit  # noqa: B018 - made once, so a bad limit fails at declaration
        except errors.BindingError as exc:
            raise errors.BindingError(f"the job running {self.command!r}: {exc}") from None

    @property
    def limit(self) -> limits.Limit | None:
        """Its ``concurrency`` and ``rate`` as one ``Limit`` (None: unlimited)."""
        if self.concurrency is None and self.rate is None:
            return None
        return limits.Limit(self.concurrency, self.rate)

    @property
    def slots(self) -> schedules.Slots:
        """A job at times' schedule (``BindingError`` for an event job)."""
        if self.every is None:
            raise errors.BindingError(f"the job on {self.on!r} runs on an event, not at times")
        return schedules.read(self.every, self.timezone)

    @property
    def timeout_delta(self) -> timedelta | None:
        if self.timeout is None or isinstance(self.timeout, timedelta):
            return self.timeout
        try:
            length = durations.parse_duration(self.timeout)
        except errors.DurationError as exc:
            raise errors.BindingError(f"the job's timeout {self.timeout!r}: {exc}") from None
        return timedelta(days=length.days, seconds=length.seconds)

    def describe(self) -> str:
        """When it runs, as written, for programs: ``on po.decided`` or
        ``0 6 * * 1-5 (America/New_York)``."""
        return f"on {self.on}" if self.on is not None else self.slots.words()

    def said(self) -> str:
        """When it runs, as people say it: ``on the po decided event`` or ``every weekday
        at 06:00 (America/New_York)``."""
        return f"on {spoken.event(self.on)}" if self.on is not None else self.slots.said()


@dataclass(frozen=True)
class Planned:
    """A plan made keepable: its key as text, when (UTC), the input, the record acted on."""

    key: str
    run_at: datetime
    input: shapes.JsonDict
    target: str


def plan_of(job_name: str, job: Job, event: Emitted) -> Planned:
    """What ``job``'s schedule plans for ``event``: the key as text, when, the input, and
    the record the command acts on (the event's own unless the plan names a ``target``).

    A schedule that raises, or answers anything but a ``Plan`` with a plain key, an aware
    ``run_at`` and plain input, is the application's mistake: ``BindingError`` naming it.
    """
    assert job.schedule is not None
    try:
        plan = job.schedule(event)
    except Exception as exc:
        raise errors.BindingError(
            f"job {job_name!r}: its schedule raised {type(exc).__name__} on event "
            f"{event.name!r}: {exc}"
        ) from exc
    if not isinstance(plan, Plan):
        raise errors.BindingError(
            f"job {job_name!r}: its schedule answered a {type(plan).__name__}, not a Plan"
        )
    run_at = event.at if plan.run_at is None else plan.run_at
    if not isinstance(run_at, datetime) or run_at.tzinfo is None:
        raise errors.BindingError(
            f"job {job_name!r}: its plan's run_at must be an aware moment, not {run_at!r}"
        )
    try:
        key = plan_key(plan.key)
        given = payloads.plain(dict(plan.input))
        at = run_at.astimezone(UTC)
        target = event.record_id if plan.target is None else target_key(plan.target)
    except OverflowError:
        raise errors.BindingError(
            f"job {job_name!r}: its plan's run_at is outside the calendar in UTC"
        ) from None
    except (payloads.NotPlain, TypeError, ValueError) as exc:
        raise errors.BindingError(f"job {job_name!r}: its plan cannot be kept: {exc}") from None
    return Planned(key, at, given, target)


def target_key(target: object) -> str:
    """A plan's target as the record key runs keep (text): a text or a whole number.

    >>> target_key(7), target_key("PO-7")
    ('7', 'PO-7')
    """
    if isinstance(target, bool) or not isinstance(target, str | int) or target == "":
        raise ValueError(
            f"a plan's target is the key of a record, a text or a whole number, not {target!r}"
        )
    if isinstance(target, str):
        problem = payloads.text_problem(target)
        if problem is not None:
            raise ValueError(f"a plan's target {problem}")
    return str(target)


def plan_key(key: object) -> str:
    """A plan's key as the text that makes its job once: a text or number as it is
    written, a mapping or list as canonical JSON. ``ValueError`` for what cannot be one:
    nothing, true or false, text the store cannot keep (``\\x00``, a lone surrogate), or
    what a payload cannot hold (``flowrunner.foundations.payloads``).

    >>> plan_key(42), plan_key("PO-7"), plan_key({"order": 7, "a": [1]})
    ('42', 'PO-7', '{"a":[1],"order":7}')
    """
    if key is None or key == "":
        raise ValueError("a plan needs a key")
    if isinstance(key, str):
        # The key is kept in text columns: what they cannot hold is refused here, the
        # same on SQLite and PostgreSQL (a mapping's texts are judged by ``plain``).
        problem = payloads.text_problem(key)
        if problem is not None:
            raise ValueError(f"a plan's key {problem}")
        return key
    if isinstance(key, bool):
        raise ValueError("a plan's key is a text, a number or a mapping, not true or false")
    if isinstance(key, int):
        if not payloads.MIN_INT <= key <= payloads.MAX_INT:
            raise ValueError(
                f"a plan's key is a whole number from {payloads.MIN_INT} to {payloads.MAX_INT}"
            )
        return str(key)
    return json.dumps(payloads.plain({"key": key})["key"], sort_keys=True, separators=(",", ":"))
