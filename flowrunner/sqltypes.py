"""Column types flowrunner stores with: timestamps that stay time-zone aware everywhere."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A tz-aware datetime stored as UTC: ``timestamptz`` on PostgreSQL, UTC text on SQLite.

    SQLite drops offsets, so values are moved to UTC before they are written and come
    back marked UTC; naive values given to it are taken as UTC. Reads always return
    aware UTC datetimes, so comparisons never mix naive and aware values.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        if not isinstance(value, datetime):
            raise TypeError(f"UTCDateTime needs a datetime, not {type(value).__name__}")
        moment = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if dialect.name == "sqlite":
            return moment.replace(tzinfo=None)
        return moment

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):  # pragma: no cover - drivers return datetimes
            value = datetime.fromisoformat(value)
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
