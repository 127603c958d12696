"""Pages that refresh themselves while open: the Operations room and a record's page.

The page says how often in its ``flowrunner-refresh`` meta; the console's own
``refresh.js`` (same origin, as its content policy allows) reloads it then, unless the
reader is typing in a form or has ticked something, or the tab is hidden — it tries again
a period later. Without script a ``<noscript>`` refresh does it. ``?refresh=off`` in the
address stops it; the page links to both.
"""

from __future__ import annotations

import dataclasses

from flowrunner.web.console.page import Page

SECONDS = 30
"""How often a refreshing page reloads."""

OFF = "off"


@dataclasses.dataclass(frozen=True)
class Refresh:
    """Whether the page refreshes, every how many seconds, and the links that stop or
    start it."""

    on: bool
    seconds: int
    stop: str
    start: str


def of(page: Page, path: str, **query: object) -> Refresh:
    """How the page at ``path`` (with ``query``) refreshes, as its reader asked."""
    on = page.query.get("refresh", "") != OFF
    return Refresh(
        on=on,
        seconds=SECONDS,
        stop=page.url(path, **query, refresh=OFF),
        start=page.url(path, **query),
    )
