"""Runs and their history: once per start key, optimistic saves, sanitized errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from flowrunner import errors
from flowrunner.flows.interpreter import state as state_mod
from flowrunner.foundations import statuses
from flowrunner.store import dialects, engine_tables
from flowrunner.store import operations as ops

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def start(conn: sa.Connection, **overrides: Any) -> int | None:
    values: dict[str, Any] = {
        "tenant": None,
        "resource": "po",
        "record_id": "42",
        "flow_id": "7",
        "flow_name": "Approve",
        "start_key": "created:42",
        "snapshot": {"flow": {"name": "Approve"}, "steps": [{"kind": "wait"}]},
        "digest": "abc",
        "state": {},
        "now": T0,
        "started_by": "automation",
    }
    values.update(overrides)
    return ops.insert_run(conn, **values)


def test_a_flow_starts_once_per_start_key(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        first = start(conn)
        assert first is not None
        assert start(conn) is None
        other_flow = start(conn, flow_id="8")
        other_change = start(conn, start_key="updated:1b2c")
        other_resource = start(conn, resource="ticket")
    assert len({first, other_flow, other_change, other_resource}) == 4


def test_a_run_started_due_is_due_with_its_resource_and_tenant(engine: sa.Engine) -> None:
    due = engine_tables.due
    with dialects.begin(engine) as conn:
        run_id = start(conn, tenant="acme", resource="ticket", due_at=T0)
        assert run_id is not None
        assert start(conn, tenant="acme", resource="ticket", due_at=T0) is None  # started once
        rows = conn.execute(sa.select(due.c.run_id, due.c.tenant, due.c.resource, due.c.due_at))
        assert [tuple(row) for row in rows] == [(run_id, "acme", "ticket", T0)]
        assert ops.due_count(conn, now=T0, resource="ticket", tenant="acme") == 1


def test_a_run_reads_back_as_written(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        run_id = start(conn, tenant="acme")
    assert run_id is not None
    with engine.connect() as conn:
        run = ops.load_run(conn, run_id)
    assert run.id == run_id and run.tenant == "acme" and run.record_id == "42"
    assert run.snapshot == {"flow": {"name": "Approve"}, "steps": [{"kind": "wait"}]}
    assert run.status == "running" and run.version == 1 and not run.ended
    assert run.started_at == T0 and run.started_at.tzinfo is not None
    assert run.ended_at is None and run.error is None and run.started_by == "automation"


def test_a_run_started_broken_is_ended(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        run_id = start(conn, status="failed", reason="step 'Ask' at position 2: no such kind")
        assert run_id is not None
        run = ops.load_run(conn, run_id)
    assert run.ended and run.ended_at == T0
    assert run.reason == "step 'Ask' at position 2: no such kind"


def test_a_missing_run_is_an_operator_error(engine: sa.Engine) -> None:
    with engine.connect() as conn:
        assert ops.find_run(conn, 999) is None
        with pytest.raises(errors.OperatorError, match="there is no run 999"):
            ops.load_run(conn, 999)


def test_saves_are_optimistic(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        run_id = start(conn)
    assert run_id is not None
    with dialects.begin(engine) as conn:
        version = ops.save_run(
            conn, run_id, expected_version=1, state={"p": 1}, status="waiting", now=T0
        )
    assert version == 2
    with (
        pytest.raises(errors.LeaseLost, match="changed since version 1"),
        dialects.begin(engine) as conn,
    ):
        ops.save_run(conn, run_id, expected_version=1, state={"p": 9}, status="done", now=T0)
    with engine.connect() as conn:
        run = ops.load_run(conn, run_id)
    assert (run.version, run.state, run.status) == (2, {"p": 1}, "waiting")


def test_ending_records_the_end_once_and_a_retry_reopens(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        run_id = start(conn)
        assert run_id is not None
        failed_at = T0 + timedelta(hours=1)
        error = {"code": "command_failed", "message": "boom\nsecret=xyz", "password": "p"}
        ops.save_run(
            conn,
            run_id,
            expected_version=1,
            state={},
            status="failed",
            now=failed_at,
            error=error,
            reason="the command failed",
        )
        run = ops.load_run(conn, run_id)
        assert run.ended_at == failed_at
        assert run.error == {
            "code": "command_failed",
            "message": "boom secret=[redacted]",
            "password": "[redacted]",
        }
        ops.save_run(
            conn,
            run_id,
            expected_version=2,
            state={},
            status="failed",
            now=failed_at + timedelta(1),
        )
        assert ops.load_run(conn, run_id).ended_at == failed_at
        ops.save_run(conn, run_id, expected_version=3, state={}, status="running", now=T0)
        reopened = ops.load_run(conn, run_id)
    assert reopened.ended_at is None and reopened.error is None and not reopened.ended


def test_an_unknown_status_is_refused(engine: sa.Engine) -> None:
    with pytest.raises(ValueError, match="status"), dialects.begin(engine) as conn:
        start(conn, status="paused")


def test_statuses_are_stored_as_their_plain_words(engine: sa.Engine) -> None:
    # StrEnum members equal their words; what reaches the database must be the word
    # itself, never a member's name or repr (psycopg, for one, dumps an Enum by name).
    run = state_mod.RunState(
        status=statuses.RunStatus.DONE,
        lanes=[
            state_mod.LaneState(step_id=1, kind="wait", pass_=1, status=statuses.LaneStatus.DONE)
        ],
    )
    with dialects.begin(engine) as conn:
        run_id = start(conn, status=statuses.RunStatus.WAITING)
        assert run_id is not None
        ops.save_run(
            conn,
            run_id,
            expected_version=1,
            state=run.to_dict(),
            status=run.status,
            now=T0,
        )
        table = engine_tables.runs
        status, text = conn.execute(
            sa.select(table.c.status, sa.cast(table.c.state, sa.Text)).where(table.c.id == run_id)
        ).one()
        found = ops.list_runs(conn, status=statuses.RunStatus.DONE)
    assert type(status) is str and status == "done"
    assert "Status" not in text and "DONE" not in text
    assert text.count('"done"') == 2  # the run's status and its lane's
    assert [r.id for r in found] == [run_id]
    assert found[0].status is statuses.RunStatus.DONE and found[0].ended
    assert state_mod.RunState.from_dict(found[0].state) == run


def test_runs_for_a_record_and_lists(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        a = start(conn, tenant="acme")
        b = start(conn, tenant="acme", flow_id="8", status="done")
        start(conn, tenant="bolt", record_id="43", start_key="created:43")
        mine = ops.runs_for_record(conn, resource="po", record_id="42", tenant="acme")
        assert [r.id for r in mine] == [b, a]  # newest first
        assert ops.runs_for_record(conn, resource="po", record_id="42", tenant="bolt") == []
        assert [r.id for r in ops.list_runs(conn, status="done")] == [b]
        assert [r.id for r in ops.list_runs(conn, tenant="acme")] == [b, a]
        assert [r.id for r in ops.list_runs(conn, limit=1, before_id=b)] == [a]


def test_history_is_kept_in_order_and_sanitized(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        run_id = start(conn, tenant="acme")
        assert run_id is not None
        ops.append_log(
            conn, run_id=run_id, at=T0, what="started", position=1, step_id="s1", kind="wait"
        )
        ops.append_log(
            conn,
            run_id=run_id,
            at=T0 + timedelta(minutes=1),
            what="failed",
            position=1,
            step_id="s1",
            title="Ask",
            kind="approval",
            pass_=2,
            detail={"error": "card 4111111111111111\nrefused", "token": "t0k"},
        )
        history = ops.run_history(conn, run_id)
    assert [line.what for line in history] == ["started", "failed"]
    assert history[0].tenant == "acme"  # taken from the run
    assert history[1].pass_ == 2 and history[1].title == "Ask"
    assert history[1].detail == {"error": "card [card ****1111] refused", "token": "[redacted]"}


def test_a_steps_lines_are_written_together_as_each_would_be_alone(engine: sa.Engine) -> None:
    later = T0 + timedelta(hours=2)
    lines = [
        ops.LogLine("started", position=1, step_id="s1", title="Ask", kind="approval", pass_=1),
        ops.LogLine(
            "failed",
            position=1,
            step_id="s1",
            kind="approval",
            pass_=1,
            detail={"error": "card 4111111111111111\nrefused", "n": 3},
            due_at=T0,
        ),
        ops.LogLine("ended", detail="the flow ended", due_at=T0),
    ]
    with dialects.begin(engine) as conn:
        run_id = start(conn, tenant=7)
        assert run_id is not None
        ops.append_logs(conn, run_id=run_id, at=later, tenant=7, lines=lines)
        history = ops.run_history(conn, run_id)
    assert [(line.what, line.position, line.pass_) for line in history] == [
        ("started", 1, 1),
        ("failed", 1, 1),
        ("ended", None, None),
    ]
    assert {line.tenant for line in history} == {"7"}
    assert {line.at for line in history} == {later}
    assert all(line.at.tzinfo is not None for line in history)
    assert [line.due_at for line in history] == [None, T0, T0]
    assert history[1].detail == {"error": "card [card ****1111] refused", "n": 3}
    assert history[2].detail == "the flow ended" and history[0].detail is None


def test_commands_answers_are_recorded_together_each_once(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        ops.begin_idempotent(conn, key="run-1/a", tenant="acme", now=T0)
        ops.record_completed(
            conn,
            [
                ops.Completed("run-1/a", "acme", {"asked": 2}),
                ops.Completed("run-1/b", "acme", {"token": "t0k"}),
                ops.Completed("run-2/a", None),
            ],
            now=T0 + timedelta(minutes=5),
        )
        found = {
            key: ops.find_idempotent(conn, key=key) for key in ("run-1/a", "run-1/b", "run-2/a")
        }
    assert all(row is not None and row.completed for row in found.values())
    first, second, third = found["run-1/a"], found["run-1/b"], found["run-2/a"]
    assert first is not None and second is not None and third is not None
    assert (first.result, first.created_at, first.updated_at) == (
        {"asked": 2},
        T0,
        T0 + timedelta(minutes=5),
    )
    assert second.result == {"token": "[redacted]"} and second.tenant == "acme"
    assert third.result is None and third.tenant is None


def test_integer_tenants_are_kept_as_text_and_found_either_way(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        run_id = start(conn, tenant=7)
        assert ops.load_run(conn, run_id or 0).tenant == "7"
        assert [r.id for r in ops.runs_for_record(conn, resource="po", record_id="42", tenant=7)]
        assert [r.id for r in ops.list_runs(conn, tenant="7")] == [run_id]
        ops.set_due(conn, run_id=run_id or 0, due_at=T0, tenant=7)
        assert ops.due_count(conn, now=T0, tenant=7) == 1
