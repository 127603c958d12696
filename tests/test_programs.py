"""Runs of another program than a flow from rows go through the same worker.

A runner may register programs beside its flows (jobs, code workflows): a run whose
stored snapshot names one is claimed like any run — the due-work index, a lease, one
transaction per step — and handed to that program's step. A run whose program the
runner does not have any more fails with a sentence naming it, and never stalls the
worker. Run on SQLite and PostgreSQL.
"""

from __future__ import annotations

import sqlalchemy as sa
from running import MARK_AND_TELL, mount

from flowrunner import Waiting
from flowrunner.engine import claimed, commands
from flowrunner.engine.mounted import Claimed, Mounted, Stepping
from flowrunner.foundations import statuses
from flowrunner.store import dialects
from flowrunner.store import operations as ops


def _start_program_run(driver: object, name: str, key: str) -> int:
    runner = driver.runner  # type: ignore[attr-defined]
    with dialects.begin(runner.engine) as conn:
        run_id = ops.insert_run(
            conn,
            tenant=None,
            resource=runner.binding.resource,
            record_id="7",
            flow_id=f"{name}:count",
            flow_name="count",
            start_key=key,
            snapshot={"program": name},
            digest="-",
            state={"count": 0},
            now=runner.clock(),
            due_at=runner.clock(),
        )
    assert run_id is not None
    return run_id


class _Count(claimed.ClaimedStep):
    """Counts to three, one step per claim, running the ticket's ``look`` command once
    per step; then ends."""

    def advance(self) -> None:
        count = int(str(self.run.state["count"])) + 1
        context = commands.CommandContext(
            record={},
            inputs={"count": count},
            conn=self.conn,
            principal=self.mounted.run_as,
            idempotency_key=f"run-{self.run.id}/count-{count}",
            run_id=self.run.id,
            flow_name=self.run.flow_name,
            step_title=f"count {count}",
            position=count,
            now=self.now,
            clock=self.mounted.clock,
        )
        result, _ = self.command("look", context, result_key=f"count-{count}")
        assert result.ok
        self.log("counted", detail={"count": count})
        done = count == 3
        self.save(
            state={"count": count},
            status=statuses.RunStatus.DONE if done else statuses.RunStatus.RUNNING,
            due_at=None if done else self.now,
        )


class _Counter:
    """A program of the test's own: it implements the ``Program`` protocol and nothing in
    the worker, the operators' actions or the console knows its name."""

    def step(self, claimed: Claimed) -> Stepping:
        return _Count(claimed)

    def waiting(self, mounted: Mounted, run: ops.RunRow) -> tuple[Waiting, ...]:
        return ()


_count = _Counter()


def test_a_registered_program_is_claimed_and_advanced_by_the_worker(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=MARK_AND_TELL)
    looked: list[object] = []

    def look(ctx: commands.CommandContext) -> None:
        looked.append(ctx.inputs["count"])

    driver.runner.commands["look"] = look
    driver.runner.programs["counter"] = _count
    run_id = _start_program_run(driver, "counter", "once")
    assert driver.run_until_idle() == 3
    run = driver.runner.get_run(run_id)
    assert (run.status, run.state) == ("done", {"count": 3})
    assert looked == [1, 2, 3]
    assert [line.what for line in driver.history(run_id)] == ["counted"] * 3
    with any_engine.connect() as conn:
        assert ops.find_idempotent(conn, key=f"run-{run_id}/count-3") is not None


def test_a_run_of_a_program_the_runner_has_not_fails_with_a_sentence(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets", flows=MARK_AND_TELL)
    run_id = _start_program_run(driver, "workflow", "gone")
    assert driver.run_until_idle() == 1
    run = driver.runner.get_run(run_id)
    assert run.status == "failed"
    assert run.reason == (
        "this run executes a workflow 'count', which this runner does not have any more"
    )
    assert driver.runner.run_due() == 0  # nothing left due: the worker moved on
