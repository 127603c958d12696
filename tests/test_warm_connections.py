"""The tests' kept PostgreSQL connections (``tests/warm_connections.py``) behave as new."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
import warm_connections

pytestmark = pytest.mark.postgres


def test_kept_connections_run_statements_they_had_prepared_before_they_were_wiped(
    pg_url: str,
) -> None:
    """psycopg prepares a statement the fifth time it runs it; the wipe drops the server's
    prepared statements, so the next engine that takes a kept connection must not reach
    for names the server forgot -- however often a connection is kept, with or without
    statements prepared, as an engine's first connection or a later one."""
    made = sa.make_url(pg_url)
    for turn, runs in enumerate([1, 7, 1, 7, 7, 1, 7]):
        engine = sa.create_engine(
            made, creator=warm_connections.connector(made, "public", "-csearch_path=public")
        )
        with engine.connect() as first, engine.connect() as second:
            for conn in (first, second):
                got = [
                    conn.execute(sa.text("SELECT :n + 1"), {"n": n}).scalar() for n in range(runs)
                ]
                conn.commit()
                assert got == [n + 1 for n in range(runs)], turn
        engine.dispose()
