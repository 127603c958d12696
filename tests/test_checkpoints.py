"""Each step that reaches outside has a checkpoint of its own: a worker killed inside a
call repeats that call only.

Five steps each call the outside world (``five_calls``: a line written to a file before
the ticket is marked), as a flow of rows and as a code workflow. For every k of the
five, a worker process is killed inside call k — after its outside effect, before its
database write — and a new worker takes the run over once the lease has run out.
Afterwards the outside world saw call k twice, with the same idempotency key, and
every other call once; the ticket carries each call's mark once; the run is done.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import five_calls
import forked
import pytest
import sqlalchemy as sa
from running import app, mount, stored, ticket

from flowrunner import Kind, testing
from flowrunner.engine import worker
from flowrunner.store import engine_tables

HERE = Path(__file__).parent
MARKS = "T1" + "".join(f" +a{n}" for n in range(1, five_calls.CALLS + 1))


def desk(engine: sa.Engine, program: str, outside: Path) -> testing.FlowDriver:
    """The tickets desk with the five calls: a flow of rows, or a code workflow."""
    workflow = program == "workflow"
    return mount(
        engine,
        "tickets",
        flows="[]" if workflow else five_calls.FLOW,
        commands=five_calls.commands(outside),
        workflows=five_calls.workflows() if workflow else None,
    )


def killed_inside(
    engine: sa.Engine, program: str, call: int, driver: testing.FlowDriver, outside: Path
) -> int:
    """A worker process that takes the ticket's run and is killed inside ``call``."""
    url = engine.url.render_as_string(hide_password=False)
    schema = getattr(engine, "info_schema", None)
    env = {
        **os.environ,
        "CRASH_DB": url,
        "CRASH_OPTIONS": f"-csearch_path={schema}" if schema else "",
        "FIVE_OUTSIDE": str(outside),
        "FIVE_CRASH_IN": str(call),
    }
    done = forked.run(
        [
            sys.executable,
            str(HERE / "crashing_worker.py"),
            f"five-{program}",
            driver.now.isoformat(),
            "never",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, five_calls.KILLED), done.stderr
    return done.returncode


@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize("program", ["flow", "workflow"])
def test_a_worker_killed_inside_any_of_five_calls_repeats_only_that_call(
    engines: Callable[[], sa.Engine], program: str, tmp_path: Path
) -> None:
    for call in range(1, five_calls.CALLS + 1):
        outside = tmp_path / f"{program}-{call}.sent"
        engine = engines()
        driver = desk(engine, program, outside)
        driver.create(ticket(1), run=False)
        if program == "workflow":
            driver.emit("ticket.replied", {"ticket": 1}, run=False)
        engine.dispose()

        assert killed_inside(engine, program, call, driver, outside) == five_calls.KILLED
        # A new worker, once the killed one's lease has run out, takes the run over.
        driver.worker = worker.Worker(driver.runner)
        driver.now = driver.now + timedelta(seconds=2)
        driver.run_until_idle()

        sent = five_calls.sent(outside)
        times = Counter(who for who, _ in sent)
        assert times == {f"a{n}": 2 if n == call else 1 for n in range(1, 6)}, (call, sent)
        keys = {key for who, key in sent if who == f"a{call}"}
        assert len(keys) == 1, f"call {call} came again with another key: {keys}"
        assert stored(driver, 1)["title"] == MARKS, f"killed inside call {call}"
        (run,) = driver.runs(1)
        assert run.status == "done", (call, run.reason)
        with engine.connect() as conn:
            kept = conn.execute(sa.select(engine_tables.idempotency.c.key)).scalars().all()
        assert sorted(k for k in kept if f"run-{run.id}/" in k) == sorted(
            {key for _, key in sent}
        ), "each call's answer is kept once, under the key it was sent with"
        engine.dispose()


def commits_of_one_run(engine: sa.Engine, outside: bool, tmp_path: Path) -> int:
    """The commits a worker makes to take one ticket through the five calls."""
    tickets = app("tickets")
    kinds = {"assign": Kind(command="assign_ticket", input=["assign_to"], outside=outside)}
    driver = mount(
        engine,
        "tickets",
        flows=five_calls.FLOW,
        commands=five_calls.commands(tmp_path / f"outside-{outside}.sent"),
        binding=tickets.binding.model_copy(update={"kinds": kinds}),
    )
    driver.create(ticket(1), run=False)
    counted = {"n": 0}

    def count(_conn: sa.Connection) -> None:
        counted["n"] += 1

    sa.event.listen(driver.runner.engine, "commit", count)
    driver.run_until_idle()
    (run,) = driver.runs(1)
    assert run.status == "done" and stored(driver, 1)["title"] == MARKS
    return counted["n"]


@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
def test_a_kind_that_only_writes_to_the_database_shares_one_commit_for_its_steps(
    engines: Callable[[], sa.Engine], tmp_path: Path
) -> None:
    """Five calls that may reach outside: a commit each (the fifth's is the run's save).
    Declared ``outside=False`` (their commands only write through ``ctx.conn``), the five
    steps share the run's one commit."""
    each = commits_of_one_run(engines(), True, tmp_path)
    shared = commits_of_one_run(engines(), False, tmp_path)
    assert each - shared == five_calls.CALLS - 1
