"""How values look on the console's pages: the templates' filters and the words for
statuses, starts and kinds."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, tzinfo
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import jinja2
import markupsafe

from flowrunner.history import flows, runs
from flowrunner.jobs import schedules

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
        return "" if moment is None else moment_in(moment, tz)

    def value(found: Any) -> str:
        return shown_value(found, tz)

    def iso(moment: datetime | None) -> str:
        return "" if moment is None else moment.isoformat()

    env.filters["when"] = when
    env.filters["value"] = value
    env.filters["iso"] = iso
    env.filters["short"] = short
    env.filters["plural"] = plural
    env.filters["text"] = text
    env.filters["schedule"] = schedules.in_words
    env.filters["reason"] = runs.reason
    env.globals["STARTS"] = STARTS
    env.globals["diagram"] = lambda html: markupsafe.Markup(html)  # escaped by its maker


def moment_in(moment: datetime | str, tz: tzinfo | None) -> str:
    """A moment as every page of the console writes it: on the reader's wall clock (the
    runner's timezone), its zone named — ``Wed 2 Dec 00:49 UTC``, ``Mon 9 Mar 07:00 CET``.

    >>> from zoneinfo import ZoneInfo
    >>> moment_in("2026-03-09T06:00:00+00:00", ZoneInfo("Europe/Berlin"))
    'Mon 9 Mar 07:00 CET'
    """
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    local = moment.astimezone(tz or UTC)
    return f"{flows.when(local, tz or UTC)} {local.tzname() or 'UTC'}"


def shown_value(found: Any, tz: tzinfo | None = None) -> str:
    """A record's value or a step's input or answer as a page shows it: a moment on the
    reader's clock, a date as ``2026-03-09``, a number as written, a structure as
    compact JSON, nothing as ``—``.

    >>> shown_value(None), shown_value(Decimal("25000.00")), shown_value({"asked": ["ann"]})
    ('—', '25000.00', '{"asked": ["ann"]}')
    """
    if found is None or found == "":
        return "—"
    if isinstance(found, bool):
        return "yes" if found else "no"
    if isinstance(found, datetime):
        return moment_in(found, tz)
    if isinstance(found, date):
        return found.isoformat()
    if isinstance(found, (int, float, Decimal, str)):
        return str(found)
    return json.dumps(found, ensure_ascii=False, default=str)


class Focus:
    """One page's first refused field: the templates ask ``claim()`` for each field with
    a sentence beside it, and only the first gets ``autofocus`` (and the address's
    fragment, from the page's script), so a refused save returns the reader to it."""

    def __init__(self) -> None:
        self.taken: str | None = None

    def claim(self, field_id: str) -> bool:
        if self.taken is not None:
            return False
        self.taken = field_id
        return True


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
