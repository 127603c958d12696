"""The test processes' one cache of compiled statements (``tests/shared_compiles.py``):
an engine finds what another engine of the same dialect and settings compiled, and each
still reads its own database."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import shared_compiles
import sqlalchemy as sa

metadata = sa.MetaData()
note = sa.Table(
    "note", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("text", sa.Text)
)
QUERY = sa.select(note.c.text).where(note.c.id == sa.bindparam("wanted"))


def filled(engine: sa.Engine, text: str) -> sa.Engine:
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(note).values(id=1, text=text))
    return engine


def read(engine: sa.Engine) -> tuple[str, bool]:
    """The note's text, and whether its query was found compiled."""
    with engine.connect() as conn:
        result = conn.execute(QUERY, {"wanted": 1})
        hit = result.context.cache_hit == conn.dialect.CACHE_HIT
        return result.scalar_one(), hit


@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
def test_a_second_database_finds_the_query_compiled_and_reads_its_own_rows(
    engines: Callable[[], sa.Engine],
) -> None:
    first, second = filled(engines(), "first's"), filled(engines(), "second's")
    assert first.dialect is not second.dialect
    read(first)
    assert read(first) == ("first's", True)
    assert read(second) == ("second's", True)


def test_a_dialect_with_other_settings_compiles_for_itself(tmp_path: Any) -> None:
    plain = filled(sa.create_engine(f"sqlite:///{tmp_path / 'plain.db'}"), "plain")
    own = sa.create_engine(
        f"sqlite:///{tmp_path / 'own.db'}", json_serializer=lambda value: json.dumps(value)
    )
    filled(own, "own")
    try:
        read(plain)
        assert read(own) == ("own", False)
        assert read(own) == ("own", True)
        assert shared_compiles.settings(plain.dialect) != shared_compiles.settings(own.dialect)
    finally:
        plain.dispose()
        own.dispose()


def test_every_engine_made_takes_the_shared_cache(tmp_path: Any) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'any.db'}")
    try:
        with engine.connect() as conn:
            assert conn.get_execution_options()["compiled_cache"] is shared_compiles.COMPILES
        assert engine.get_execution_options()["compiled_cache"] is shared_compiles.COMPILES
    finally:
        engine.dispose()
