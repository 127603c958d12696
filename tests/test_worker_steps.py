"""A step's state belongs to the step: the worker outlives its runs and keeps none of them.

And what the runner and the test driver hand back about runs are the typed rows
exported from ``flowrunner``. Run through the real worker on SQLite and PostgreSQL.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from running import MARK_AND_TELL, app, mount, ticket

import flowrunner
from flowrunner import FlowBinding, Kind, errors, testing
from flowrunner.engine import commands, worker
from flowrunner.store import engine_tables

TICKETS = app("tickets")

# What a worker may hold between steps: its runner's context, its lease owner, its settings,
# its counts, its hook and how many of the runner's preparations it made (a job at
# times' run made before its first claim). Nothing read or gathered for one run.
LONG_LIVED = {
    "mounted",
    "owner",
    "lease_ttl",
    "batch",
    "claim",
    "stats",
    "_point",
    "_prepared",
    "_ticked",
    "_stop",  # serve's stop event
    "on_step",  # the metrics' timings, when asked for
    "on_command",
}


def test_a_batch_leaves_nothing_of_its_runs_on_the_worker(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=MARK_AND_TELL)
    points: list[str] = []
    driver.worker = worker.Worker(driver.runner, batch=10, crash_at=points.append)
    for n in (1, 2, 3):
        driver.create(ticket(n), run=False)
    before = set(vars(driver.worker))
    assert driver.run_until_idle() == 3
    assert set(vars(driver.worker)) == before == LONG_LIVED
    # One transaction for the three runs, each run's sets and notice in its own step.
    assert points.count("before-commit") == 1
    assert points.count("after-set") == points.count("after-notify") == 3
    for n in (1, 2, 3):
        [run] = driver.runs(n)
        lines = driver.history(run.id)
        assert {line.run_id for line in lines} == {run.id}
        assert [line.what for line in lines].count("set") == 1


def test_runs_history_and_notices_are_the_exported_rows(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=MARK_AND_TELL)
    driver.create(ticket(1))
    runs = driver.runs(1)
    assert runs == driver.runner.runs("1")
    [run] = runs
    assert isinstance(run, flowrunner.RunRow)
    assert (run.record_id, run.flow_name, run.status, run.ended) == ("1", "Tell", "done", True)
    history = driver.history(run.id)
    assert history and all(isinstance(line, flowrunner.LogRow) for line in history)
    assert history == driver.runner.history(run.id)
    [notice] = driver.runner.notices()
    assert isinstance(notice, flowrunner.NoticeRow)
    assert (notice.run_id, notice.audience, notice.delivered_at) == (run.id, "requester", None)
    assert driver.notices(run.id) == [notice]


# A ticket handed over and its new assignee told, then the ticket looked at twice by a
# command that only reads it: one advance does all four steps.
HAND_OVER = """
- name: Hand over
  start: created
  steps:
    - {position: 1, kind: assign, title: Hand over, assign_to: bo}
    - {position: 2, kind: notify, title: Tell, audience: assignee, message: Yours now}
    - {position: 3, kind: look, title: Look}
    - {position: 4, kind: look, title: Look again}
"""


def look(ctx: commands.CommandContext) -> dict[str, object]:
    """A command that reads the ticket through the step's connection and writes nothing."""
    table = TICKETS.ticket
    title = ctx.conn.execute(sa.select(table.c.title).where(table.c.id == ctx.record["id"]))
    return {"title": title.scalar_one(), "assignee": ctx.record["assignee"]}


def hand_over(engine: sa.Engine) -> testing.FlowDriver:
    kinds = {**TICKETS.binding.kinds, "look": Kind(command="look")}
    binding = FlowBinding(**{**TICKETS.binding.model_dump(exclude={"kinds"}), "kinds": kinds})
    return mount(engine, "tickets", flows=HAND_OVER, binding=binding, commands={"look": look})


def test_a_commands_write_is_what_the_next_step_of_the_same_advance_reads(
    any_engine: sa.Engine,
) -> None:
    driver = hand_over(any_engine)
    driver.create(ticket(1))
    [run] = driver.runs(1)
    assert run.status == "done"
    [notice] = driver.notices(run.id)
    assert (notice.audience, notice.recipient) == ("assignee", "bo")
    with any_engine.connect() as conn:
        answers = conn.execute(
            sa.select(engine_tables.idempotency.c.result).order_by(engine_tables.idempotency.c.key)
        ).scalars()
        assert [a for a in answers if a] == [{"title": "T1", "assignee": "bo"}] * 2


@contextmanager
def statements_sent(engine: sa.Engine) -> Iterator[list[str]]:
    """The statements ``engine`` sends while the block runs, in order."""
    sent: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        sent.append(statement)

    sa.event.listen(engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        sa.event.remove(engine, "before_cursor_execute", note)


def test_the_record_is_read_again_only_after_something_wrote_it(any_engine: sa.Engine) -> None:
    driver = hand_over(any_engine)
    driver.create(ticket(1), run=False)
    with statements_sent(any_engine) as sent:
        driver.run_until_idle()
    selects = [s for s in sent if s.lstrip().upper().startswith("SELECT")]
    reads = [s for s in selects if re.search(r"FROM ticket\b", s)]  # not its flows table
    # Once when the advance begins, once after the hand-over wrote it, and each look's
    # own read. SQLite tells that a look changed no row, so nothing more is read; on
    # PostgreSQL any statement a command sends may have written, so after each look the
    # ticket is read again.
    looks = 2 if any_engine.dialect.name == "sqlite" else 4
    assert len(reads) == 2 + looks, reads


# A ticket looked at by a command that answers from what it is given, then renamed by
# one that writes through the step's connection and is then refused.
LOOK_THEN_RENAME = """
- name: Look, then rename
  start: created
  steps:
    - {position: 1, kind: glance, title: Glance}
    - {position: 2, kind: rename, title: Rename}
"""


def glance(ctx: commands.CommandContext) -> dict[str, object]:
    """A command that answers from the record it was given and never reads ``ctx.conn``."""
    return {"title": ctx.record["title"]}


def rename_then_refuse(ctx: commands.CommandContext) -> dict[str, object]:
    """A command that renames the ticket, then refuses: its write must not stay."""
    table = TICKETS.ticket
    ctx.conn.execute(sa.update(table).where(table.c.id == ctx.record["id"]).values(title="gone"))
    raise errors.CommandRefused("the ticket is frozen")


def test_a_command_gets_a_savepoint_only_once_it_reads_its_connection(
    any_engine: sa.Engine,
) -> None:
    kinds = {
        **TICKETS.binding.kinds,
        "glance": Kind(command="glance"),
        "rename": Kind(command="rename"),
    }
    binding = FlowBinding(**{**TICKETS.binding.model_dump(exclude={"kinds"}), "kinds": kinds})
    driver = mount(
        any_engine,
        "tickets",
        flows=LOOK_THEN_RENAME,
        binding=binding,
        commands={"glance": glance, "rename": rename_then_refuse},
    )
    driver.create(ticket(1), run=False)
    with statements_sent(any_engine) as sent:
        driver.run_until_idle()
    savepoints = [s for s in sent if s.startswith("SAVEPOINT flowrunner_command")]
    # The glance wrote nothing it could have to undo; the rename's write was undone.
    assert savepoints == ["SAVEPOINT flowrunner_command"]
    [run] = driver.runs(1)
    assert run.status == "failed"
    with any_engine.connect() as conn:
        title = conn.execute(sa.select(TICKETS.ticket.c.title)).scalar_one()
    assert title == "T1"
