"""Runs of another program than a flow from rows go through the same worker.

A runner may register programs beside its flows (jobs, code workflows): a run whose
stored snapshot names one is claimed like any run — the due-work index, a lease, one
transaction per step — and handed to that program's step. A run whose program the
runner does not have any more fails with a sentence naming it, and never stalls the
worker. Run on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
import sqlalchemy as sa
from console import console
from running import MARK_AND_TELL, mount

from flowrunner import diagrams
from flowrunner.engine import claimed, commands
from flowrunner.engine.mounted import Claimed, Mounted, Program, Stepping
from flowrunner.errors import OperatorError
from flowrunner.flows.snapshot import FlowSnapshot
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
        if not result.ok:
            self.stop(f"count {count} was refused", code="refused")
            return
        self.log("counted", detail={"count": count})
        done = count == 3
        self.save(
            state={"count": count},
            status=statuses.RunStatus.DONE if done else statuses.RunStatus.RUNNING,
            due_at=None if done else self.now,
        )


class _Counter(Program):
    """A program of the test's own: it implements the ``Program`` protocol (its step,
    and its run drawn as three counting steps) and nothing in the worker, the operators'
    actions, the Operations room or the console knows its name."""

    def step(self, claimed: Claimed) -> Stepping:
        return _Count(claimed)

    def drawn(
        self,
        mounted: Mounted,
        conn: sa.Connection,
        run: ops.RunRow,
        can_read: diagrams.CanRead | None,
    ) -> diagrams.Diagram:
        steps = [
            {
                "id": i,
                "flow_id": 1,
                "position": i,
                "kind": "wait",
                "title": f"Count {i}",
                "duration": "1 minute",
            }
            for i in (1, 2, 3)
        ]
        snap = FlowSnapshot.build({"id": 1, "name": "count", "start": "manual"}, steps)
        return diagrams.flow_diagram(snap, config=mounted.config, can_read=can_read)

    def sentence(
        self,
        mounted: Mounted,
        run: ops.RunRow,
        line: ops.LogRow,
        names: Mapping[str, str] | None = None,
    ) -> str:
        if line.what == "counted" and isinstance(line.detail, dict):
            return f"Counted to {line.detail['count']}"
        return super().sentence(mounted, run, line, names)


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
    # Its history lines read as the program says them.
    assert [line.sentence for line in driver.runner.history(run_id)] == [
        "Counted to 1",
        "Counted to 2",
        "Counted to 3",
    ]
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


def test_a_program_of_its_own_is_cancelled_retried_and_drawn_like_any_run(
    any_engine: sa.Engine,
) -> None:
    """Registered beside the flows, the test's program is steered through the runner's
    operations and shown by the console — none of which was changed for it."""
    driver = mount(any_engine, "tickets", flows=MARK_AND_TELL)
    runner = driver.runner
    runner.programs["counter"] = _count
    runner.commands["look"] = lambda ctx: None

    # Cancelled before its first claim: it ends, journaled, and the worker leaves it.
    cancelled = _start_program_run(driver, "counter", "to-cancel")
    runner.cancel(cancelled, operator="olga", reason="not needed")
    assert runner.get_run(cancelled).status == "cancelled"
    assert driver.run_until_idle() == 0
    assert [e.action for e in runner.journal().rows] == ["cancel"]

    # A refused command fails it; once the grant is back, a retry goes on from its state.
    failing = _start_program_run(driver, "counter", "to-retry")
    runner.authorize = lambda principal, command: False
    driver.run_until_idle()
    failed = runner.get_run(failing)
    assert failed.status == "failed"
    # A restart is the program's to allow: this one does not (the protocol's default).
    with pytest.raises(OperatorError, match="not a flow; retry it instead"):
        runner.restart(failing, operator="olga")

    runner.authorize = None
    runner.retry(failing, operator="olga")
    driver.run_until_idle()
    assert runner.get_run(failing).status == "done"
    assert runner.get_run(failing).state == {"count": 3}
    # Drawn by the runner and on the console's run page, as the program draws itself.
    with any_engine.connect() as conn:
        drawn = runner.diagram(conn, "count", run=failing)
    assert "Count 3" in drawn.mermaid()
    page = console(driver).get(f"/run/{failing}")
    assert page.status_code == 200
    assert "Count 2" in page.text
    assert "Counted to 3" in page.text  # its history, in its own words
