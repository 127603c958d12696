"""A condition's SQL as text, for ``flowrunner query`` to show a business user.

The condition becomes the WHERE of a ``SELECT *`` over a table named ``records`` with
the columns the caller names, compiled for SQLite or PostgreSQL; the values stay
parameters, shown beside the text. Nothing is executed.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from flowrunner import query
from flowrunner.foundations import shapes, sqltypes

SQL_TYPES: dict[query.ColumnType, sqltypes.SqlType] = {
    query.ColumnType.TEXT: sa.String(),
    query.ColumnType.NUMBER: sa.Numeric(),
    query.ColumnType.BOOLEAN: sa.Boolean(),
    query.ColumnType.DATE: sa.Date(),
    query.ColumnType.TIMESTAMP: sqltypes.UTCDateTime(),
}
_DIALECTS = {"sqlite": sqlite.dialect, "postgresql": postgresql.dialect}
DIALECTS = tuple(sorted(_DIALECTS))


def compiled(
    condition: query.Condition,
    columns: Mapping[str, query.ColumnType],
    dialect: str,
    *,
    now: datetime,
    event: shapes.Row | None = None,
) -> tuple[str, shapes.RowDict]:
    """The SQL text of ``condition`` for ``dialect`` and its parameters by name.

    Raises ``QueryError`` where the condition cannot be SQL over these columns.
    """
    table = sa.Table(
        "records",
        sa.MetaData(),
        *(sa.Column(name, SQL_TYPES[kind]) for name, kind in sorted(columns.items())),
    )
    clause = condition.to_sql(table, now=now, event=event)
    statement: sqltypes.Query = sa.select(sa.literal_column("*")).select_from(table).where(clause)
    done = statement.compile(dialect=_DIALECTS[dialect]())
    return str(done), dict(done.params)
