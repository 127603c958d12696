"""Events, the notices outbox, idempotency records and the operator journal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from flowrunner.store import dialects, ledger
from flowrunner.store import operations as ops

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def test_events_are_read_after_an_id_in_order(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        ids = [
            ops.insert_event(
                conn,
                tenant="acme",
                resource="po",
                record_id="42",
                name=name,
                payload={"order": 42, "n": n},
                at=T0 + timedelta(minutes=n),
            )
            for n, name in enumerate(["po.decided", "po.noted", "po.decided"])
        ]
        ops.insert_event(
            conn, tenant="acme", resource="po", record_id="43", name="po.decided", payload={}, at=T0
        )
        every = ops.events_after(conn, resource="po", record_id="42")
        assert [e.id for e in every] == ids
        assert every[1].payload == {"order": 42, "n": 1} and every[1].at == T0 + timedelta(
            minutes=1
        )
        later = ops.events_after(conn, resource="po", record_id="42", after_id=ids[0])
        assert [e.id for e in later] == ids[1:]
        decided = ops.events_after(conn, resource="po", record_id="42", names=["po.decided"])
        assert [e.id for e in decided] == [ids[0], ids[2]]
        assert ops.events_after(conn, resource="po", record_id="42", tenant="bolt") == []
        assert len(ops.events_after(conn, resource="po", record_id="42", limit=2)) == 2


def test_a_notice_is_told_once_per_run_step_and_pass(engine: sa.Engine) -> None:
    def tell(conn: sa.Connection, pass_: int) -> bool:
        return ops.insert_notice(
            conn,
            tenant=None,
            run_id=1,
            step_id="s3",
            pass_=pass_,
            audience="requester",
            recipient="u-9",
            title="PO-42: approved",
            message="approved",
            email=True,
            at=T0,
        )

    with dialects.begin(engine) as conn:
        assert tell(conn, 1)
        assert not tell(conn, 1)  # a replayed run tells nobody twice
        assert tell(conn, 2)  # a loop's next pass does
        outbox = ops.notices(conn, run_id=1)
        assert [(n.pass_, n.recipient, n.email) for n in outbox] == [
            (1, "u-9", True),
            (2, "u-9", True),
        ]
        assert ops.mark_delivered(conn, notice_id=outbox[0].id, at=T0)
        assert not ops.mark_delivered(conn, notice_id=outbox[0].id, at=T0)
        assert [n.id for n in ops.notices(conn, undelivered=True)] == [outbox[1].id]


def test_idempotency_records(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        first = ops.begin_idempotent(conn, key="run-1/s2#1", tenant="acme", now=T0)
        assert first.created and first.status == ledger.IN_PROGRESS and not first.completed
        again = ops.begin_idempotent(conn, key="run-1/s2#1", tenant="acme", now=T0)
        assert not again.created and again.created_at == T0
        assert ops.complete_idempotent(
            conn,
            key="run-1/s2#1",
            result={"asked": 3, "api_token": "t"},
            now=T0 + timedelta(seconds=1),
        )
        assert not ops.complete_idempotent(conn, key="missing", now=T0)
        done = ops.find_idempotent(conn, key="run-1/s2#1")
        assert done is not None and done.completed
        assert done.result == {"asked": 3, "api_token": "[redacted]"}
        ops.record_idempotent(conn, key="run-2/s1#1", result={"asked": 1}, now=T0)
        ops.record_idempotent(conn, key="run-2/s1#1", result={"asked": 2}, now=T0)
        recorded = ops.find_idempotent(conn, key="run-2/s1#1")
        assert recorded is not None and recorded.completed and recorded.result == {"asked": 2}
        assert ops.find_idempotent(conn, key="nope") is None


def test_the_journal_names_each_operator_action(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        ops.journal(
            conn,
            operator="ann",
            action="cancel",
            at=T0,
            tenant="acme",
            run_id=5,
            resource="po",
            record_id="42",
            detail={"reason": "duplicate\norder"},
        )
        ops.journal(conn, operator="bob", action="redrive", at=T0, run_id=6)
        entries = ops.journal_entries(conn)
        assert [(e.operator, e.action, e.run_id) for e in entries] == [
            ("ann", "cancel", 5),
            ("bob", "redrive", 6),
        ]
        assert entries[0].detail == {"reason": "duplicate order"}
        assert [e.operator for e in ops.journal_entries(conn, run_id=6)] == ["bob"]
        assert [e.operator for e in ops.journal_entries(conn, tenant="acme")] == ["ann"]
