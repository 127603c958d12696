"""How values look on the console's pages: the templates' filters and the words for
statuses, starts and kinds."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import jinja2
import markupsafe

from flowrunner.history import flows

if TYPE_CHECKING:
    from flowrunner.web.console.runner_view import ConsoleRunner

STARTS = {
    "created": "when a record is created",
    "updated": "when a record is updated",
    "manual": "when an operator starts it",
    "schedule": "on a schedule",
}


def install(env: jinja2.Environment, runner: ConsoleRunner) -> None:
    """The filters the templates use, on ``runner``'s wall clock."""
    tz = runner.config.timezone

    def when(moment: datetime | str | None) -> str:
        return "" if moment is None else flows.when(moment, tz)

    def iso(moment: datetime | None) -> str:
        return "" if moment is None else moment.isoformat()

    env.filters["when"] = when
    env.filters["iso"] = iso
    env.filters["short"] = short
    env.filters["plural"] = plural
    env.filters["text"] = text
    env.globals["STARTS"] = STARTS
    env.globals["diagram"] = lambda html: markupsafe.Markup(html)  # escaped by its maker


def short(digest: str | None) -> str:
    """A snapshot's digest as shown: its first eight characters."""
    return (digest or "")[:8]


def plural(count: int, one: str, many: str | None = None) -> str:
    """``1 run``, ``3 runs``."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


def text(value: Any) -> str:
    """A column's value in a form field: empty for None, ``true``/``false`` for flags."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
