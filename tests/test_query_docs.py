"""Every ``example`` block in docs/query-language.md holds, in Python and on SQLite."""

from __future__ import annotations

import itertools
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from flowrunner import errors, query
from flowrunner.foundations import sqltypes

DOC = Path(__file__).resolve().parent.parent / "docs" / "query-language.md"
DEFAULT_NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
_SQL_TYPES: dict[query.ColumnType, Any] = {
    query.ColumnType.TEXT: sa.String(),
    query.ColumnType.NUMBER: sa.Numeric(),
    query.ColumnType.BOOLEAN: sa.Boolean(),
    query.ColumnType.DATE: sa.Date(),
    query.ColumnType.TIMESTAMP: sqltypes.UTCDateTime(),
}


def _blocks() -> list[str]:
    return re.findall(r"```example\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def _lines(block: str) -> list[tuple[str, str]]:
    return [
        (key.strip(), value.strip())
        for key, value in (line.split(":", 1) for line in block.strip().splitlines())
    ]


def test_the_doc_has_examples() -> None:
    assert len(_blocks()) >= 20


@pytest.mark.parametrize("block", _blocks())
def test_example(block: str, sqlite_engine: sa.Engine) -> None:
    lines = _lines(block)
    fields = dict(lines)
    text = fields["condition"]
    columns = json.loads(fields["columns"]) if "columns" in fields else None
    now = datetime.fromisoformat(fields["now"]) if "now" in fields else DEFAULT_NOW
    if "error" in fields:
        with pytest.raises(errors.QueryError) as caught:
            query.parse(text, columns)
        assert str(caught.value) == fields["error"]
        return
    condition = query.parse(text, columns)
    if "canonical" in fields:
        assert str(condition) == fields["canonical"]
        assert query.parse(str(condition), columns) == condition
    cases = [
        (json.loads(record), result == "true")
        for (key, record), (_, result) in itertools.pairwise(lines)
        if key == "record"
    ]
    for record, expected in cases:
        assert condition.matches(record, now=now) is expected, (text, record)
    if cases:
        _agree_in_sql(sqlite_engine, condition, columns, cases, now)


def _agree_in_sql(
    engine: sa.Engine,
    condition: query.Condition,
    columns: dict[str, str] | None,
    cases: list[tuple[dict[str, Any], bool]],
    now: datetime,
) -> None:
    types = query.column_types(columns) if columns else {}
    for node_column in condition.columns:
        types.setdefault(node_column, _guess(condition, node_column))
    table = sa.Table(
        "doc",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        *(sa.Column(name, _SQL_TYPES[kind]) for name, kind in types.items()),
    )
    table.metadata.create_all(engine)
    rows = [
        {"id": i, **{n: query.coerce(r.get(n), types[n]) for n in types}}
        for i, (r, _) in enumerate(cases)
    ]
    with engine.begin() as conn:
        conn.execute(table.insert(), rows)
        got = set(conn.execute(sa.select(table.c.id).where(condition.to_sql(table, now))).scalars())
        table.drop(conn)
    assert got == {i for i, (_, expected) in enumerate(cases) if expected}


def _guess(condition: query.Condition, column: str) -> query.ColumnType:
    from flowrunner.query import ast

    for node in ast.walk(condition.node):
        if isinstance(node, ast.Compare | ast.In) and node.left.name == column and node.ctype:
            return node.ctype
    return query.ColumnType.TIMESTAMP if column.endswith("_at") else query.ColumnType.TEXT
