"""A step's state belongs to the step: the worker outlives its runs and keeps none of them.

And what the runner and the test driver hand back about runs are the typed rows
exported from ``flowrunner``. Run through the real worker on SQLite and PostgreSQL.
"""

from __future__ import annotations

import sqlalchemy as sa
from running import MARK_AND_TELL, mount, ticket

import flowrunner
from flowrunner import worker

# What a worker may hold between steps: its runner, its lease owner, its settings,
# its counts and its hook. Nothing read or gathered for one run.
LONG_LIVED = {"runner", "owner", "lease_ttl", "batch", "claim", "stats", "_point"}


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
