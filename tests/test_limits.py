"""Limits per kind, job and code workflow step, as an application declares them and as
a workflow designer would say the cases: "score at most 3 tasks at once", "send at most
10 a minute", "a task over the limit waits its turn, the oldest first".

The rules are read once (the rate's text, the numbers, checked when declared); the
turns are kept on the database, so these run on SQLite and PostgreSQL, through the test
driver's clock, which moves only when told.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import limited
import migrated
import pytest
import sqlalchemy as sa

from flowrunner import Job, Jobs, Limit, Plan, errors, testing
from flowrunner.binding import Kind
from flowrunner.engine import commands
from flowrunner.flows import files
from flowrunner.foundations import limits
from flowrunner.runner import flow_runner
from flowrunner.store import dialects, engine_tables
from flowrunner.store import operations as ops
from flowrunner.workflows import Manual, Workflows

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


# -- the rate as people write it ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "count", "per"),
    [
        ("10/minute", 10, timedelta(minutes=1)),
        ("5/second", 5, timedelta(seconds=1)),
        ("100/hour", 100, timedelta(hours=1)),
        ("1000/day", 1000, timedelta(days=1)),
        (" 3 / Minutes ", 3, timedelta(minutes=1)),
    ],
)
def test_a_rate_reads_as_a_count_per_unit(text: str, count: int, per: timedelta) -> None:
    assert limits.parse_rate(text) == limits.Rate(count, per)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("fast", "a rate is a number of starts per second, minute, hour or day"),
        ("10/fortnight", "such as '10/minute', not '10/fortnight'"),
        ("10 per minute", "not '10 per minute'"),
        ("-1/minute", "not '-1/minute'"),
        ("0/minute", "a rate allows 1 to 10,000 starts per minute, not 0"),
        ("20000/hour", "a rate allows 1 to 10,000 starts per hour, not 20,000"),
        (10, "a rate is text such as '10/minute', not int 10"),
    ],
)
def test_a_rate_that_cannot_be_read_is_refused_with_a_sentence(text: object, said: str) -> None:
    with pytest.raises(errors.BindingError, match="rate") as refused:
        limits.parse_rate(text)
    assert said in str(refused.value)


def test_a_rate_prints_as_written() -> None:
    assert str(limits.parse_rate("7 / seconds")) == "7/second"


@pytest.mark.parametrize(
    ("concurrency", "said"),
    [
        (0, "concurrency is from 1 to 10,000 commands at once, not 0"),
        (-2, "not -2"),
        ("3", "a whole number such as 5, not '3'"),
        (True, "not True"),
        (2.5, "not 2.5"),
    ],
)
def test_a_concurrency_that_is_not_a_count_is_refused(concurrency: object, said: str) -> None:
    with pytest.raises(errors.BindingError) as refused:
        Limit(concurrency=concurrency)  # type: ignore[arg-type]
    assert said in str(refused.value)


def test_a_kind_a_job_and_a_workflows_limit_are_checked_when_declared() -> None:
    assert Kind(command="score", concurrency=5, rate="10/minute").limit == Limit(5, "10/minute")
    assert Kind(command="score").limit is None
    with pytest.raises(errors.BindingError, match="concurrency is from 1 to 10,000"):
        Kind(command="score", concurrency=0)
    with pytest.raises(errors.BindingError, match="not 'often'"):
        Kind(command="score", rate="often")
    with pytest.raises(errors.BindingError, match="the job running 'remind': a rate is"):
        Job(command="remind", run_as="bot", every="@daily", rate="daily")
    assert Job(command="remind", run_as="bot", every="@daily", concurrency=2).limit == Limit(2)
    with pytest.raises(errors.BindingError, match="is a Limit"):
        Workflows(limits={"scoring": 3})  # type: ignore[dict-item]
    with pytest.raises(errors.BindingError, match="named by a word"):
        Workflows(limits={" scoring": Limit(concurrency=1)})


# -- the turns on the database -------------------------------------------------------------


@pytest.fixture
def db(any_engine: sa.Engine) -> Iterator[sa.Engine]:
    """The engine's tables, with runs 1 to 6 of one resource due at ``T0``."""
    migrated.upgrade(any_engine)
    with dialects.begin(any_engine) as conn:
        for n in range(1, 7):
            conn.execute(
                sa.insert(engine_tables.runs).values(
                    id=n,
                    flow_id="f",
                    flow_name="Score",
                    record_id=str(n),
                    resource="task",
                    start_key=f"created:{n}",
                    digest="d",
                    status="running",
                    started_at=T0,
                    updated_at=T0,
                    snapshot={},
                    state={},
                    version=1,
                )
            )
            ops.set_due(conn, run_id=n, due_at=T0)
    yield any_engine


SCORING = limits.Named("kind:task:score", "kind 'score'", 2, None)
HOLD = timedelta(seconds=30)


def take(engine: sa.Engine, run_id: int, now: datetime, limit: limits.Named = SCORING) -> bool:
    """The run takes its turn, or goes in the line (as the worker does on PostgreSQL)."""
    with dialects.begin(engine) as conn:
        turn = ops.take_turn(conn, limit=limit, run_id=run_id, now=now, hold=HOLD)
        if not turn.taken:
            ops.wait_turn(conn, limit=limit, run_id=run_id, now=now)
    return turn.taken


def due_at(engine: sa.Engine, run_id: int) -> datetime:
    with engine.connect() as conn:
        moment: datetime = conn.execute(
            sa.select(engine_tables.due.c.due_at).where(engine_tables.due.c.run_id == run_id)
        ).scalar_one()
    return moment


def test_two_at_once_the_third_waits_and_the_oldest_waiting_goes_first(db: sa.Engine) -> None:
    assert take(db, 1, T0) and take(db, 2, T0)
    # Runs 3, then 4, then 5 find both slots taken: they wait in that order.
    assert not take(db, 3, T0 + timedelta(seconds=1))
    assert not take(db, 4, T0 + timedelta(seconds=2))
    assert not take(db, 5, T0 + timedelta(seconds=3))
    with db.connect() as conn:
        assert ops.waiting_runs(conn, key=SCORING.key) == [3, 4, 5]
    # Each waits, due when the first slot's lease ends (a freed slot wakes one sooner).
    with dialects.begin(db) as conn:
        for run_id in (3, 4, 5):
            ops.set_due(conn, run_id=run_id, due_at=T0 + HOLD)
    # Run 1's command ends: its slot wakes run 3, the oldest waiting, and only it.
    freed = T0 + timedelta(seconds=4)
    with dialects.begin(db) as conn:
        assert ops.free_slot(conn, limit=SCORING, run_id=1, now=freed) == [3]
    assert due_at(db, 3) == freed and due_at(db, 4) == T0 + HOLD
    # A new run 6 comes before run 3 is claimed: the free slot is run 3's turn.
    assert not take(db, 6, freed)
    assert not take(db, 4, freed)  # nor run 4's, behind run 3
    assert take(db, 3, freed)
    with db.connect() as conn:
        assert ops.waiting_runs(conn, key=SCORING.key) == [4, 5, 6]


def test_a_dead_workers_slot_frees_itself_when_its_lease_ends(db: sa.Engine) -> None:
    assert take(db, 1, T0) and take(db, 2, T0)
    assert not take(db, 3, T0 + timedelta(seconds=10))
    # Nobody frees runs 1's and 2's slots (their worker died): they end with the lease.
    assert not take(db, 3, T0 + HOLD - timedelta(seconds=1))
    assert take(db, 3, T0 + HOLD)


def test_a_rate_allows_that_many_starts_in_any_window_and_says_when_the_next_opens(
    db: sa.Engine,
) -> None:
    per_minute = limits.Named("job:task:mail", "job 'mail'", None, limits.parse_rate("2/minute"))
    assert take(db, 1, T0, per_minute)
    assert take(db, 2, T0 + timedelta(seconds=20), per_minute)
    with dialects.begin(db) as conn:
        turn = ops.take_turn(
            conn, limit=per_minute, run_id=3, now=T0 + timedelta(seconds=30), hold=HOLD
        )
    assert not turn.taken and turn.again_at == T0 + timedelta(minutes=1)
    assert not take(db, 3, T0 + timedelta(seconds=30), per_minute)
    # Run 4 waits behind run 3: its turn is the start after (20 s later).
    with dialects.begin(db) as conn:
        turn = ops.take_turn(
            conn, limit=per_minute, run_id=4, now=T0 + timedelta(seconds=40), hold=HOLD
        )
    assert not turn.taken and turn.ahead == 1
    assert turn.again_at == T0 + timedelta(seconds=80)
    assert take(db, 3, T0 + timedelta(minutes=1), per_minute)
    assert not take(db, 4, T0 + timedelta(seconds=61), per_minute)
    assert take(db, 4, T0 + timedelta(seconds=80), per_minute)


def test_a_run_that_ended_while_waiting_holds_nobody_up(db: sa.Engine) -> None:
    assert take(db, 1, T0) and take(db, 2, T0)
    assert not take(db, 3, T0)
    with dialects.begin(db) as conn:
        ops.set_due(conn, run_id=3, due_at=None)  # run 3 was cancelled
        ops.free_slot(conn, limit=SCORING, run_id=1, now=T0)
    assert take(db, 4, T0)


# -- through the engine, on the driver's clock --------------------------------------------


def tasks(engine: sa.Engine, **limit: Any) -> testing.FlowDriver:
    """The tasks app with its ``score`` kind limited, on the driver's clock at ``T0``."""
    limited.prepare(engine)
    migrated.upgrade(engine)
    runner = flow_runner(limited.binding(**limit), engine, commands=limited.COMMANDS)
    with runner.engine.begin() as conn:
        docs = files.loads_yaml(limited.SCORE)
        files.import_flows(conn, runner.binding, runner.tables, docs, columns=runner.columns)
    return testing.FlowDriver(runner, start=T0)


def scored(engine: sa.Engine) -> list[int]:
    return [row.task_id for row in limited.starts(engine)]


def test_ten_a_minute_scores_ten_then_the_rest_as_the_window_opens(any_engine: sa.Engine) -> None:
    driver = tasks(any_engine, rate="2/minute")
    for n in range(1, 6):
        driver.create({"id": n, "title": f"Task {n}"}, run=False)
    driver.run_until_idle()
    assert scored(any_engine) == [1, 2]
    # The three others wait their turn on the due index: 1, 1 and 2 minutes on.
    assert driver.next_due() == T0 + timedelta(minutes=1)
    (fifth,) = driver.runs(5)
    assert driver.history(fifth.id)[-1].sentence == (
        "Waiting its turn of kind 'score' (2 runs ahead); trying again at Mon 2 Mar 09:02 "
        "or when a turn frees"
    )
    driver.advance("59 seconds")
    assert scored(any_engine) == [1, 2]
    driver.advance("1 second")
    assert scored(any_engine) == [1, 2, 3, 4]
    driver.advance("1 minute")
    assert scored(any_engine) == [1, 2, 3, 4, 5]
    assert {run.status for n in range(1, 6) for run in driver.runs(n)} == {"done"}


def test_a_task_created_later_waits_behind_those_already_waiting(any_engine: sa.Engine) -> None:
    driver = tasks(any_engine, rate="1/minute")
    for n in (1, 2, 3):
        driver.create({"id": n, "title": f"Task {n}"})
    driver.advance("30 seconds")
    driver.create({"id": 4, "title": "Task 4"})
    for _ in range(3):
        driver.advance("1 minute")
    assert scored(any_engine) == [1, 2, 3, 4]


def test_a_slow_score_holds_its_slot_and_the_next_waits_for_it(any_engine: sa.Engine) -> None:
    # The second task's score starts only after the first one's ended, here in one
    # worker: each step's command took the one slot and freed it when done.
    driver = tasks(any_engine, concurrency=1)
    for n in (1, 2, 3):
        driver.create({"id": n, "title": f"Task {n}"}, run=False)
    driver.run_until_idle()
    assert scored(any_engine) == [1, 2, 3]
    assert limited.most_in_flight(any_engine) == 1
    with any_engine.connect() as conn:
        tokens = conn.execute(
            sa.select(engine_tables.limit_tokens.c.run_id).where(
                engine_tables.limit_tokens.c.run_id.is_not(None)
            )
        ).all()
    assert tokens == []  # every slot freed


def test_a_jobs_rate_spaces_its_runs(any_engine: sa.Engine) -> None:
    driver = tasks(any_engine)
    mailed: list[tuple[str, datetime]] = []

    def mail(ctx: commands.CommandContext) -> None:
        mailed.append((str(ctx.inputs["task"]), driver.now))

    driver.runner.mounted.commands["mail"] = mail
    Jobs(
        driver.runner,
        {
            "mail": Job(
                command="mail",
                run_as="automation",
                on="task.done",
                schedule=lambda event: Plan(
                    key=event.payload["task"], input={"task": event.payload["task"]}
                ),
                rate="1/minute",
            )
        },
    )
    for n in (1, 2, 3):
        driver.create({"id": n, "title": f"Task {n}"})
    for n in (1, 2, 3):
        driver.emit("task.done", {"task": n})
    (third,) = [run for run in driver.runs(3) if run.flow_name == "mail"]
    assert driver.history(third.id)[-1].sentence == (
        "Waiting its turn of job 'mail' (1 run ahead); trying again at Mon 2 Mar 09:02 "
        "or when a turn frees"
    )
    driver.advance("2 minutes")
    assert mailed == [("1", T0), ("2", T0 + timedelta(minutes=1)), ("3", T0 + timedelta(minutes=2))]


def test_a_workflow_step_takes_its_turn_of_a_named_limit(any_engine: sa.Engine) -> None:
    workflows = Workflows(limits={"scoring": Limit(rate="1/minute")})
    seen: list[tuple[int, datetime]] = []

    @workflows.define(start=Manual())
    async def rescore(w: Any, start: Any) -> None:
        await w.run("score", "score_again", limit="scoring")

    @workflows.define(start=Manual())
    async def unknown(w: Any, start: Any) -> None:
        await w.run("score", "score_again", limit="scorng")

    driver = tasks(any_engine)
    driver.runner.mounted.commands["score_again"] = lambda ctx: seen.append(
        (int(str(ctx.record["id"])), driver.now)
    )
    driver.runner.mount_workflows(workflows)
    for n in (1, 2):
        driver.create({"id": n, "title": f"Task {n}"})
    for n in (1, 2):
        driver.runner.start_workflow("rescore", operator="olga", record=n)
    driver.run_until_idle()
    assert seen[-1:] == [(1, T0)]
    (second,) = [run for run in driver.runs(2) if run.flow_name == "rescore"]
    assert driver.history(second.id)[-1].sentence == (
        "Waiting its turn of limit 'scoring'; trying again at Mon 2 Mar 09:01 or when a turn frees"
    )
    driver.advance("1 minute")
    assert [task for task, _ in seen[-2:]] == [1, 2] and seen[-1][1] == T0 + timedelta(minutes=1)
    run_id = driver.runner.start_workflow("unknown", operator="olga", record=1)
    driver.run_until_idle()
    (run,) = [r for r in driver.runs(1) if r.id == run_id]
    assert run.status == "failed"
    assert "limit 'scorng', which the workflows do not declare (limits: scoring)" in str(run.error)


MARK_THEN_SCORE = """
- name: Mark then score
  start: created
  steps:
    - {position: 1, kind: set, title: Mark, field: status, value: queued}
    - {position: 2, kind: score, title: Score}
"""


def status(driver: testing.FlowDriver, task_id: int) -> object:
    record = driver.record(task_id)
    assert record is not None
    return record["status"]


def test_a_run_that_waits_its_turn_does_its_steps_before_the_command_once(
    any_engine: sa.Engine,
) -> None:
    # The set step shares the command's commit: the run that waits rolls it back with
    # the rest of its step, and does it again, once, when its turn comes.
    limited.prepare(any_engine)
    migrated.upgrade(any_engine)
    runner = flow_runner(limited.binding(rate="1/minute"), any_engine, commands=limited.COMMANDS)
    with runner.engine.begin() as conn:
        docs = files.loads_yaml(MARK_THEN_SCORE)
        files.import_flows(conn, runner.binding, runner.tables, docs, columns=runner.columns)
    driver = testing.FlowDriver(runner, start=T0)
    driver.create({"id": 1, "title": "Task 1"})
    driver.create({"id": 2, "title": "Task 2"})
    assert scored(any_engine) == [1]
    assert status(driver, 2) == "new"  # rolled back: it waits before its step
    (waiting,) = driver.runs(2)
    assert "set" not in [line.what for line in driver.history(waiting.id)]
    driver.advance("1 minute")
    assert scored(any_engine) == [1, 2]
    assert status(driver, 2) == "queued"
    whats = [line.what for line in driver.history(waiting.id)]
    assert whats.count("set") == 1 and whats.count("command") == 1, whats
    assert whats[-1] == "ended", whats
