"""The application's own Alembic, kept off flowrunner's tables.

flowrunner's tables (``flowrunner_runs``, ``flowrunner_due``, … and their version table,
``flowrunner_alembic_version``) live in the application's database but not in its
``MetaData``, so the application's ``alembic revision --autogenerate`` would propose
dropping them. One line in the application's ``env.py`` leaves them out::

    from flowrunner.alembic import include_name

    context.configure(..., target_metadata=metadata, include_name=include_name)

(``include_object`` does the same for an ``env.py`` that uses that hook.) The tables an
application declares for its flows and steps (``flowrunner.tables``) are its own, in its
own ``MetaData``: its autogenerate sees them as any other. flowrunner's tables move with
``flowrunner migrate up``, never with the application's migrations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Every table of flowrunner's own starts so (``store.migrate.TABLE_PREFIX``); kept here
# as text so that an application's env.py imports nothing else of flowrunner.
PREFIX = "flowrunner_"


def is_flowrunner_table(name: str | None) -> bool:
    """Whether ``name`` is one of flowrunner's own tables (or its version table).

    >>> is_flowrunner_table("flowrunner_runs"), is_flowrunner_table("purchase_order")
    (True, False)
    """
    return name is not None and name.startswith(PREFIX)


def include_name(name: str | None, type_: str, parent_names: Mapping[str, Any]) -> bool:
    """Alembic's ``include_name`` hook: everything but flowrunner's tables and what is on
    them (their columns, indexes and constraints).

    >>> include_name("flowrunner_due", "table", {}), include_name("po", "table", {})
    (False, True)
    >>> include_name("ix_due_at", "index", {"table_name": "flowrunner_due"})
    False
    """
    if type_ == "table":
        return not is_flowrunner_table(name)
    return not is_flowrunner_table(parent_names.get("table_name"))


def include_object(
    object: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Alembic's ``include_object`` hook: everything but flowrunner's tables and what is
    on them."""
    if type_ == "table":
        return not is_flowrunner_table(name)
    table = getattr(object, "table", None)
    return not is_flowrunner_table(getattr(table, "name", None))
