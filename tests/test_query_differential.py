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


def _check(engine: sa.Engine, table: sa.Table, node: ast.Node, batch: list[Any]) -> None:
    condition = query.parse(str(node), table)
    rows = [row for row, _ in batch]
    with engine.begin() as conn:
        conn.execute(table.delete())
        conn.execute(table.insert(), rows)
    expected = sorted(r["id"] for _, r in batch if condition.matches(r, now=qs.NOW))
    statement = sa.select(table.c.id).where(condition.to_sql(table, now=qs.NOW))
    with engine.connect() as conn:
        got = sorted(conn.execute(statement).scalars())
    assert got == expected, f"{condition} on {engine.dialect.name}: sql {got} python {expected}"


@pytest.mark.parametrize("engine_name", ["sqlite_engine", "pg_engine"])
def test_python_and_sql_agree(engine_name: str, request: pytest.FixtureRequest) -> None:
    engine: sa.Engine = request.getfixturevalue(engine_name)
    table = qs.table()
    table.metadata.create_all(engine)

    @_settings
    @given(node=qs.conditions, batch=qs.record_batches())
    def run(node: ast.Node, batch: list[Any]) -> None:
        _check(engine, table, node, batch)

    run()


@pytest.mark.parametrize("engine_name", ["sqlite_engine", "pg_engine"])
def test_event_conditions_agree(engine_name: str, request: pytest.FixtureRequest) -> None:
    """``event.x`` values are bound parameters; SQL and Python still agree."""
    engine: sa.Engine = request.getfixturevalue(engine_name)
    table = qs.table()
    table.metadata.create_all(engine)

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
        condition = query.parse(text, table, event=True)
        with engine.begin() as conn:
            conn.execute(table.delete())
            conn.execute(table.insert(), [row for row, _ in batch])
        expected = sorted(r["id"] for _, r in batch if condition.matches(r, qs.NOW, event))
        clause = condition.to_sql(table, now=qs.NOW, event=event)
        with engine.connect() as conn:
            got = sorted(conn.execute(sa.select(table.c.id).where(clause)).scalars())
        assert got == expected, f"{condition} with {event}"

    run()
