"""Python evaluation and SQL (real SQLite, real PostgreSQL) agree on generated conditions.

Each example draws a batch of records, four conditions from the AST and ten lone
comparisons (every operator), stores the records, and compares, for each condition, the ids
``Condition.matches`` accepts with those ``select id ... where`` returns. About half of a
condition's literals are values the batch holds (``query_strategies.anchored``), so
boundaries and text matches are met often. Each condition goes through its canonical text
first, so ``str()`` is tested too.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, TypeVar

import pytest
import query_strategies as qs
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowrunner import query
from flowrunner.query import ast

T = TypeVar("T")


@pytest.fixture
def table(any_engine: sa.Engine) -> sa.Table:
    """The generated records' table, created on the engine."""
    created = qs.table()
    created.metadata.create_all(any_engine)
    return created


def _check(
    engine: sa.Engine,
    table: sa.Table,
    conditions: Sequence[tuple[query.Condition, dict[str, Any] | None]],
    batch: list[Any],
) -> None:
    """Each condition (with its event) selects the records Python accepts of ``batch``."""
    rows = [row for row, _ in batch]
    # The batch is stored once, each condition read against it, and all rolled back in one
    # transaction: the next example finds the table empty again, without a commit (nor a
    # delete) per example.
    with engine.connect() as conn, conn.begin() as transaction:
        conn.execute(table.insert(), rows)
        for condition, event in conditions:
            expected = sorted(r["id"] for _, r in batch if condition.matches(r, qs.NOW, event))
            where = condition.to_sql(table, now=qs.NOW, event=event)
            got = sorted(conn.execute(sa.select(table.c.id).where(where)).scalars())
            assert got == expected, (
                f"{condition} with {event} on {engine.dialect.name}: sql {got} python {expected}"
            )
        transaction.rollback()


# Drawing a batch of records costs hypothesis more than drawing a condition and checking
# it: each example checks PER_BATCH conditions against the batch it stored, and draws a
# quarter of the profile's examples, so as many conditions are checked in all.
PER_BATCH = 4
_settings = settings(
    max_examples=max(1, settings().max_examples // PER_BATCH),
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _several(each: st.SearchStrategy[T]) -> st.SearchStrategy[list[T]]:
    return st.lists(each, min_size=PER_BATCH, max_size=PER_BATCH)


# And lone comparisons beside them, every operator in each example: an operator wrong in
# one engine shows in the answer of a lone comparison, where inside ``and``/``or`` another
# item may hide it; a lone one costs a draw and a query, far less than a batch.
_lone_and_composed = st.tuples(qs.every_operator, _several(qs.conditions)).map(
    lambda drawn: drawn[0] + drawn[1]
)


def test_python_and_sql_agree(any_engine: sa.Engine, table: sa.Table) -> None:
    @_settings
    @given(nodes=_lone_and_composed, batch=qs.record_batches(), rnd=st.randoms())
    def run(nodes: list[ast.Node], batch: list[Any], rnd: random.Random) -> None:
        rows = [row for row, _ in batch]
        nodes = [qs.anchored(node, rows, rnd) for node in nodes]
        _check(any_engine, table, [(query.parse(str(node), table), None) for node in nodes], batch)

    run()


def test_event_conditions_agree(any_engine: sa.Engine, table: sa.Table) -> None:
    """``event.x`` values are bound parameters; SQL and Python still agree."""

    events = st.fixed_dictionaries(
        {
            "decision": st.one_of(
                st.none(), st.sampled_from(["approved", "rejected", "", "Rejected"])
            ),
            "score": st.one_of(st.none(), qs.numbers, st.just("not a number")),
            "when": st.one_of(st.none(), qs.dates, qs.timestamps),
        }
    )
    texts = st.sampled_from(
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
    )

    @_settings
    @given(batch=qs.record_batches(), asked=_several(st.tuples(texts, events)))
    def run(batch: list[Any], asked: list[tuple[str, dict[str, Any]]]) -> None:
        conditions = [(query.parse(text, table, event=True), event) for text, event in asked]
        _check(any_engine, table, conditions, batch)

    run()
