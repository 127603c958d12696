"""Fuzzing what an application declares beside its flows: jobs, timers on date columns,
signed endpoints and code workflows, given anything a Python caller may pass. Each
declaration is made, or refused with ``BindingError`` and a sentence, when it is
declared or mounted — never another exception, never later, in a worker or the store.

Then what a declaration computes at run time, on SQLite and PostgreSQL: a job's
schedule answering any plan (stored, or the event refused with ``BindingError``), a job
at times' slots from any moment, a workflow started by hand with any key and input,
or by an event whose ``key`` answers anything (``OperatorError``, ``EventRejected``).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pytest
import sqlalchemy as sa
from fuzzing import ANYTHING, DURATIONS, MOMENTS, TEXT, VALUES, Tally, fuzz
from hypothesis import given
from hypothesis import strategies as st
from running import mount

from fixtures.purchase_orders import scheduled
from fixtures.tickets import app as tickets
from flowrunner import At, FlowBinding, Hmac, Inbound, Job, Jobs, Plan, errors, testing
from flowrunner.engine.mounted import Mounted
from flowrunner.inbound import endpoints
from flowrunner.jobs import schedules
from flowrunner.store import dialects
from flowrunner.timers.program import Timers
from flowrunner.workflows import Manual, OnEvent, Workflows

END = datetime.max.replace(tzinfo=UTC)
PLANNED = Tally("events whose job's schedule answered anything, by database and outcome")
STARTED = Tally("workflow starts with any key and input, by database, how and outcome")
COMMAND_NAMES = st.one_of(
    st.sampled_from(["remind_buyer", "close_stale_orders", "warn_sla", "assign_ticket"]), TEXT
)
PRINCIPALS = st.one_of(st.sampled_from(["clock", "automation"]), TEXT)
CRON = st.one_of(
    st.sampled_from(
        [
            "* * * * *",
            "0 6 * * 1-5",
            "@daily",
            "@hourly",
            "@weekly",
            "@monthly",
            "@yearly",
            "@reboot",
            "0 0 31 2 *",
            "0 0 29 2 *",
            "59 23 31 12 *",
            "*/0 * * * *",
            "0 25 * * *",
            "0 0 * * 8",
            "0 0 L * *",
            "0 0 * * 5L",
            "0 0 1W * *",
            "0 0 ? * *",
            "0 0 1-31/7 * MON-FRI",
            "0 0 * * 1#5",
            "0 6 * *",
        ]
    ),
    st.lists(
        st.sampled_from(["*", "0", "59", "60", "*/15", "1-5", "5-1", "1,2", "-1", "x", "L", "?"]),
        min_size=4,
        max_size=6,
    ).map(" ".join),
    TEXT,
)
ZONES = st.one_of(
    st.sampled_from(
        [
            "UTC",
            "America/New_York",
            "Australia/Lord_Howe",
            "Pacific/Chatham",
            "Pacific/Kiritimati",
            "Etc/GMT+12",
            "Mars/Olympus",
            "utc",
            "../etc/passwd",
            "America/New_York\x00",
        ]
    ),
    TEXT,
)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy, ANYTHING)


# -- jobs -------------------------------------------------------------------------------------


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    """A Job's keyword arguments: an event job, a job at times, or a mix of anything."""
    kind = draw(st.sampled_from(["on", "every", "any"]))
    given: dict[str, Any] = {
        "command": draw(COMMAND_NAMES | ANYTHING),
        "run_as": draw(PRINCIPALS | ANYTHING),
    }
    if kind in ("on", "any"):
        given["on"] = draw(st.sampled_from(["po.decided", "po.unknown"]) | ANYTHING)
        given["schedule"] = draw(st.sampled_from([lambda event: Plan(key=1), None]) | ANYTHING)
    if kind in ("every", "any"):
        given["every"] = draw(CRON | ANYTHING)
        given["timezone"] = draw(ZONES | ANYTHING)
    if draw(st.booleans()):
        given["timeout"] = draw(DURATIONS | ANYTHING)
    if draw(st.booleans()):
        given["retry"] = draw(ANYTHING)
    return given


@pytest.fixture(scope="module")
def po_mounted(tmp_path_factory: pytest.TempPathFactory) -> Mounted:
    """A purchase-order runner's context, mounted once: each example mounts its jobs on a
    copy of it (jobs mount once per runner)."""
    engine = sa.create_engine(f"sqlite:///{tmp_path_factory.mktemp('jobs') / 'po.db'}")
    from fixtures.purchase_orders import app as po

    po.metadata.create_all(engine)
    runner = mount(
        engine,
        "purchase_orders",
        flows="[]",
        commands=dict(scheduled.JOB_COMMANDS),
        authorize=scheduled.grants,
    ).runner
    return runner.mounted


def _fresh(mounted: Mounted) -> Mounted:
    return dataclasses.replace(mounted, jobs=None, programs={}, on_event=[], preparing=[])


@fuzz()
@given(given=jobs(), name=st.one_of(st.sampled_from(["nightly", "remind"]), TEXT, ANYTHING))
def test_a_job_is_declared_and_mounted_or_refused_with_a_sentence(
    po_mounted: Mounted, given: dict[str, Any], name: Any
) -> None:
    try:
        job = Job(**given)
        job.describe()
        try:
            Jobs(_fresh(po_mounted), {name: job})
        except TypeError as exc:
            # A name that is not even hashable never reaches Jobs: the mapping refuses it
            # (a list: "unhashable type"; Decimal("sNaN"): "Cannot hash a signaling NaN").
            assert "unhashable" in str(exc) or "Cannot hash" in str(exc)
    except errors.BindingError as refused:
        _sentence(refused)


@fuzz()
@given(
    every=CRON,
    zone=ZONES,
    after=st.one_of(MOMENTS, st.datetimes(datetime(1970, 1, 1), datetime(2200, 1, 1))),
)
def test_the_slots_of_any_schedule_from_any_moment(every: Any, zone: Any, after: Any) -> None:
    try:
        schedule = schedules.parse(every, zone)
    except errors.BindingError as refused:
        _sentence(refused)
        return
    if not isinstance(after, datetime):
        return
    moment = after if after.tzinfo is not None else after.replace(tzinfo=UTC)
    try:
        slot = schedule.next_slot(moment)
        assert slot > moment and slot.tzinfo is not None
        later = schedule.slots(moment, min(slot, END - timedelta(hours=1)) + timedelta(hours=1))
        assert later and later[0] == slot and later == sorted(later)
        assert schedule.latest_slot(moment, later[-1]) == later[-1]
    except errors.BindingError as refused:
        _sentence(refused)


AWARE = st.one_of(
    st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=14))])),
    cast(
        "st.SearchStrategy[datetime]",
        MOMENTS.filter(lambda moment: isinstance(moment, datetime) and moment.tzinfo),
    ),
)
PLAN_KEYS = st.one_of(
    st.sampled_from([1, "1", "PO-7", {"order": 7}]),
    TEXT,
    VALUES,
)


@st.composite
def plans(draw: st.DrawFn) -> Any:
    """What a schedule answers: a Plan of any key, moment and input, or something else.
    Half the plans have an aware moment and a mapping for input, so that many are
    stored (any key, any moment from year 1 to 9999, any values) and not only refused."""
    if draw(st.integers(0, 9)) == 0:
        return draw(ANYTHING)
    inputs = st.dictionaries(TEXT, VALUES, max_size=3)
    if draw(st.booleans()):
        return Plan(key=draw(PLAN_KEYS), run_at=draw(AWARE), input=draw(inputs))
    run_at: Any = draw(st.one_of(st.none(), MOMENTS, ANYTHING))  # a date, a text...
    return Plan(key=draw(PLAN_KEYS), run_at=run_at, input=draw(st.one_of(inputs, ANYTHING)))


def test_a_schedule_answering_any_plan_is_stored_or_refuses_the_event(
    any_engine: sa.Engine,
) -> None:
    scheduled.metadata.create_all(any_engine)
    answer: list[Any] = [None]
    job = Job(on="po.decided", command="remind_buyer", run_as="clock", schedule=lambda e: answer[0])
    driver = mount(
        any_engine,
        "purchase_orders",
        flows="[]",
        commands=dict(scheduled.JOB_COMMANDS),
        authorize=scheduled.grants,
    )
    Jobs(driver.runner, {"fuzzed": job})
    driver.create({"id": 7, "number": "PO-7", "requester_id": "ann", "amount": 500}, run=False)
    seen = {"planned": 0, "refused": 0}

    @fuzz(0.5)
    @given(plan=plans())
    def emit(plan: Any) -> None:
        answer[0] = plan
        with dialects.connected(any_engine) as conn, conn.begin() as transaction:
            try:
                driver.runner.emit(conn, "po.decided", {"order": 7, "decision": "approved"})
                seen["planned"] += 1
                PLANNED[f"{any_engine.dialect.name}: planned"] += 1
            except errors.BindingError as refused:
                _sentence(refused)
                seen["refused"] += 1
                PLANNED[f"{any_engine.dialect.name}: refused"] += 1
            conn.execute(sa.select(1))  # the application's transaction goes on
            if not _kept(seen["planned"] + seen["refused"]):
                transaction.rollback()  # the plan was made in it, and goes with it

    emit()
    assert seen["refused"] > 0
    # The planned jobs run, or fail their runs with a sentence: nothing escapes.
    driver.advance("1 day")


# -- timers on date columns -------------------------------------------------------------------

CONDITIONS = st.one_of(
    st.sampled_from(
        ["status = open", "priority = high and status != closed", "nope = 1", "status =", "x"]
    ),
    TEXT,
)


@fuzz()
@given(
    column=st.one_of(st.sampled_from(["warn_at", "due_at", "title", "nope"]), TEXT, ANYTHING),
    command=st.one_of(st.sampled_from(["warn_sla", "assign_ticket", "nope"]), TEXT, ANYTHING),
    when=st.one_of(st.none(), CONDITIONS, ANYTHING),
    timeout=st.one_of(st.none(), DURATIONS, ANYTHING),
    retry=st.one_of(st.none(), ANYTHING),
    twice=st.booleans(),
)
def test_a_timer_is_declared_and_mounted_or_refused_with_a_sentence(
    tickets_mounted: Mounted,
    column: Any,
    command: Any,
    when: Any,
    timeout: Any,
    retry: Any,
    twice: bool,
) -> None:
    try:
        timer = At(column=column, command=command, when=when, timeout=timeout, retry=retry)
        binding = FlowBinding(**{**_binding_fields(tickets.binding), "at": [timer] * (1 + twice)})
        checked = binding.check(tickets.metadata)
        Timers(
            dataclasses.replace(tickets_mounted, binding=binding, columns=checked.resource_columns)
        )
    except errors.BindingError as refused:
        _sentence(refused)


@pytest.fixture(scope="module")
def tickets_mounted(tmp_path_factory: pytest.TempPathFactory) -> Mounted:
    engine = sa.create_engine(f"sqlite:///{tmp_path_factory.mktemp('timers') / 't.db'}")
    return mount(engine, "tickets", flows="[]").runner.mounted


def _binding_fields(binding: FlowBinding) -> dict[str, Any]:
    return {name: getattr(binding, name) for name in type(binding).model_fields}


# -- signed endpoints -------------------------------------------------------------------------


@st.composite
def hmacs(draw: st.DrawFn) -> dict[str, Any]:
    given: dict[str, Any] = {
        "secret_env": draw(st.sampled_from(["HOOK_SECRET", "hook_secret", "1X", "A" * 129]) | TEXT),
        "header": draw(st.sampled_from(["x-signature", "X-Sig", "x sig", "x:sig"]) | TEXT),
    }
    for name, pool in (
        ("encoding", st.sampled_from(["hex", "base64", "HEX", "base32"])),
        ("prefix", st.sampled_from(["", "sha256=", "v1,", "\n"])),
        ("timestamp_header", st.sampled_from(["x-timestamp", "x-signature", "X-TIMESTAMP"])),
        ("window", DURATIONS),
        ("signed", st.sampled_from(["{timestamp}.{body}", "{body}", "{timestamp}", "{x}"])),
        ("algorithm", st.sampled_from(["sha256", "sha512", "md5", "SHA256"])),
    ):
        if draw(st.booleans()):
            given[name] = draw(pool | TEXT | ANYTHING)
    return given


@st.composite
def inbounds(draw: st.DrawFn) -> dict[str, Any]:
    given: dict[str, Any] = {
        "name": draw(st.sampled_from(["payment_settled", "a.b-c", "-x", "a/b"]) | TEXT),
        "verify": draw(st.one_of(st.builds(lambda: VERIFY), ANYTHING)),
        "run_as": draw(PRINCIPALS | ANYTHING),
        "key": draw(st.sampled_from([lambda body: body["id"], str]) | ANYTHING),
    }
    for name, pool in (
        ("command", COMMAND_NAMES),
        ("input", st.sampled_from([lambda body: body, dict])),
        ("emit", st.sampled_from(["po.decided", "po.unknown"])),
        ("payload", st.sampled_from([lambda body: body, lambda body: None])),
        ("tenant", st.sampled_from([lambda body: "acme"])),
    ):
        if draw(st.booleans()):
            given[name] = draw(pool | ANYTHING)
    return given


VERIFY = Hmac(secret_env="HOOK_SECRET", header="x-signature")


@fuzz()
@given(verify=hmacs(), declared=st.lists(inbounds(), max_size=3))
def test_an_inbound_is_declared_and_checked_or_refused_with_a_sentence(
    po_mounted: Mounted, verify: dict[str, Any], declared: list[dict[str, Any]]
) -> None:
    try:
        Hmac(**verify)
    except errors.BindingError as refused:
        _sentence(refused)
    try:
        made = [Inbound(**given) for given in declared]
        endpoints.check(
            made,
            binding=po_mounted.binding,
            commands=po_mounted.commands,
            authorize=po_mounted.authorize,
        )
    except errors.BindingError as refused:
        _sentence(refused)


# -- code workflows ---------------------------------------------------------------------------


async def _body(w: Any, start: Any) -> Any:
    return None


@fuzz()
@given(
    start=st.one_of(
        st.none(),
        st.builds(Manual),
        st.builds(
            OnEvent,
            st.one_of(st.sampled_from(["ticket.replied", "ticket.closed"]), TEXT, ANYTHING),
            st.one_of(st.none(), st.just(lambda payload: payload.get("reply")), ANYTHING),
        ),
        ANYTHING,
    ),
    run_as=st.one_of(st.none(), PRINCIPALS, ANYTHING),
    version=st.one_of(st.integers(-2, 3), ANYTHING),
    name=st.one_of(st.none(), st.sampled_from(["late_fees", "late_fees"]), TEXT, ANYTHING),
    body=st.sampled_from([_body, print, lambda w, start: None]),
)
def test_a_workflow_is_defined_and_mounted_or_refused_with_a_sentence(
    tickets_runner: testing.FlowDriver,
    start: Any,
    run_as: Any,
    version: Any,
    name: Any,
    body: Any,
) -> None:
    workflows = Workflows()
    try:
        workflows.define(start=start, run_as=run_as, version=version, name=name)(body)
        workflows.define(name="twice")(_body)
        tickets_runner.runner.mount_workflows(workflows)
    except errors.BindingError as refused:
        _sentence(refused)


PLAIN_TEXT = st.from_regex(r"[A-Za-z0-9 _.:-]{0,12}", fullmatch=True)
PLAIN = st.one_of(st.none(), st.booleans(), st.integers(-(10**9), 10**9), PLAIN_TEXT)


@st.composite
def starts(draw: st.DrawFn) -> tuple[Any, Any, Any, Any]:
    """A start by hand, ``(key, start, record, name)``: anything, or (half of them) the
    manual workflow on a ticket that exists with a plain key and input, so that many
    start and their keys meet, not only refusals."""
    if draw(st.booleans()):
        return (
            draw(st.one_of(st.none(), PLAIN_TEXT)),
            draw(st.dictionaries(PLAIN_TEXT, PLAIN, max_size=3)),
            draw(st.sampled_from([None, 1, "1"])),
            "by_hand",
        )
    return (
        draw(st.one_of(st.none(), TEXT, ANYTHING)),
        draw(st.one_of(st.dictionaries(TEXT, VALUES, max_size=3), ANYTHING)),
        draw(st.one_of(st.none(), st.sampled_from([1, "1", 2]), ANYTHING)),
        draw(st.one_of(st.sampled_from(["by_hand", "on_reply"]), TEXT, ANYTHING)),
    )


@pytest.fixture(scope="module")
def tickets_runner(tmp_path_factory: pytest.TempPathFactory) -> testing.FlowDriver:
    engine = sa.create_engine(f"sqlite:///{tmp_path_factory.mktemp('flows') / 't.db'}")
    return mount(engine, "tickets", flows="[]")


def test_a_workflow_started_with_any_key_and_input_starts_or_is_refused(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()
    keyed: list[Any] = [None]

    @workflows.define(start=Manual())
    async def by_hand(w: Any, start: Any) -> Any:
        return await w.now("when")

    @workflows.define(start=OnEvent("ticket.replied", key=lambda payload: keyed[0]))
    async def on_reply(w: Any, start: Any) -> Any:
        return await w.now("when")

    driver = mount(any_engine, "tickets", flows="[]", workflows=workflows)
    driver.create({"id": 1, "title": "Printer on fire", "requester_id": "ann"}, run=False)

    examples = [0]

    @fuzz(0.5)
    @given(drawn=starts())
    def start_once(drawn: tuple[Any, Any, Any, Any]) -> None:
        key, start, record, name = drawn
        examples[0] += 1
        database = any_engine.dialect.name
        try:
            driver.runner.start_workflow(name, start, operator="fuzz", record=record, key=key)
            STARTED[f"{database}: by hand, started"] += 1
        except errors.OperatorError as refused:
            _sentence(refused)
            STARTED[f"{database}: by hand, refused"] += 1
        keyed[0] = key
        with dialects.connected(any_engine) as conn, conn.begin() as transaction:
            try:
                driver.runner.emit(conn, "ticket.replied", {"ticket": 1})
                STARTED[f"{database}: by an event, taken"] += 1
            except errors.EventRejected as refused:
                _sentence(refused)
                STARTED[f"{database}: by an event, refused"] += 1
            conn.execute(sa.select(1))
            if not _kept(examples[0]):
                transaction.rollback()
        if examples[0] % 200 == 0:  # the runs started by hand run, as a worker would
            driver.run_until_idle()

    start_once()
    driver.run_until_idle()


def _kept(example: int) -> bool:
    """Whether the ``example``-th example's writes are committed: the first 200, then one
    in 100; the others are rolled back. The runs they plan are all open on one record,
    and an event about it wakes each of them, so keeping every one would make each
    example slower than the last (a long run at 100,000 would slow to a quarter)."""
    return example <= 200 or example % 100 == 0


def _sentence(error: errors.FlowrunnerError) -> None:
    """A refusal is a sentence: some words, on one line."""
    said = str(error)
    assert said.strip(), repr(error)
    assert "\n" not in said, said
