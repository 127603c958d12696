"""The Operations room: runs across records, the operator journal and the notices outbox."""

from __future__ import annotations

from typing import Any

ROUTES: list[tuple[str, str, Any]] = []
