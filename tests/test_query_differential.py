"""Python evaluation and SQL (real SQLite, real PostgreSQL) agree on generated conditions.

Each example draws a condition from the AST and a batch of records, stores the records,
and compares the ids ``Condition.matches`` accepts with those ``select id ... where``
returns. The condition goes through its canonical text first, so ``str()`` is tested too.
"""

from __future__ import annotations

from typing import Any

import pytest
import query_strategies as qs
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowrunner import query
from flowrunner.query import ast

_settings = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def table(any_engine: sa.Engine) -> sa.Table:
    """The generated records' table, created on the engine."""
    created = qs.table()
    created.metadata.create_all(any_engine)
    return created


def _check(
    engine: sa.Engine,
    table: sa.Table,
    condition: query.Condition,
    batch: list[Any],
    event: dict[str, Any] | None = None,
) -> None:
    rows = [row for row, _ in batch]
    expected = sorted(r["id"] for _, r in batch if condition.matches(r, qs.NOW, event))
    statement = sa.select(table.c.id).where(condition.to_sql(table, now=qs.NOW, event=event))
    # The batch is stored, read back and rolled back in one transaction: the next example
    # finds the table empty again, without a commit (nor a delete) per example.
    with engine.connect() as conn, conn.begin() as transaction:
        conn.execute(table.insert(), rows)
        got = sorted(conn.execute(statement).scalars())
        transaction.rollback()
    assert got == expected, (
        f"{condition} with {event} on {engine.dialect.name}: sql {got} python {expected}"
    )


def test_python_and_sql_agree(any_engine: sa.Engine, table: sa.Table) -> None:
    @_settings
    @given(node=qs.conditions, batch=qs.record_batches())
    def run(node: ast.Node, batch: list[Any]) -> None:
        _check(any_engine, table, query.parse(str(node), table), batch)

    run()


def test_event_conditions_agree(any_engine: sa.Engine, table: sa.Table) -> None:
    """``event.x`` values are bound parameters; SQL and Python still agree."""

    @_settings
    @given(
        batch=qs.record_batches(),
        decision=st.one_of(st.none(), st.sampled_from(["approved", "rejected", "", "Rejected"])),
        score=st.one_of(st.none(), qs.numbers, st.just("not a number")),
        when=st.one_of(st.none(), qs.dates, qs.timestamps),
        text=st.sampled_from(
            [
                "event.decision = rejected",
                "event.decision != rejected and status = open",
                "not event.decision in (approved, rejected) or amount > 100",
                "event.score >= 10 or event.decision is null",
                "event.decision starts with 'rej' and event.score < 0",
                "event.decision < 'b' or event.score not in (1, 2)",
                "event.when < today() and (event.when >= 2025-03-29 or flag = true)",
                "event.when >= now() - 1 day or event.when is null and status = open",
                "event.when = 2025-03-30T12:30:00Z or event.when != 2025-03-29",
            ]
        ),
    )
    def run(batch: list[Any], decision: Any, score: Any, when: Any, text: str) -> None:
        event = {"decision": decision, "score": score, "when": when}
        _check(any_engine, table, query.parse(text, table, event=True), batch, event)

    run()
