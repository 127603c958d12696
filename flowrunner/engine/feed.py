"""The event feed: a resource's events for a program that reads them itself, a page at a
time, in the order the store settles them, with a cursor to continue from.

    page = runner.events(after=cursor, limit=100)
    for event in page.events:
        handle(event)
    cursor = page.cursor          # keep it; the next call goes on from there

A reader that keeps the cursor it was handed sees every event once: none missed, none
twice, however many transactions emit while it reads (``store.events.feed`` says how
PostgreSQL is kept to that). The web router serves the same pages (``GET /events``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from flowrunner import errors
from flowrunner.binding import Tenant
from flowrunner.engine import event_check
from flowrunner.engine.mounted import Mounted
from flowrunner.flows import spelling
from flowrunner.foundations import payloads
from flowrunner.store import operations as ops

LONGEST_PAGE = 1000
"""The most events one page holds (``limit``)."""

_CURSOR = re.compile(r"^(\d{1,19})-(\d{1,19})$")


@dataclass(frozen=True)
class EventPage:
    """One page of the feed: its ``events`` in order, and the ``cursor`` to go on from
    (the same cursor again when the page is empty: nothing newer has settled yet)."""

    events: tuple[ops.EventRow, ...]
    cursor: str


def cursor_of(event: ops.EventRow) -> str:
    """The cursor just past ``event``: its transaction's id and its own, as text."""
    return f"{event.txid}-{event.id}"


def read_cursor(cursor: str | None) -> tuple[int, int]:
    """A cursor as the store's position; ``EventRejected`` (422) for one the feed did
    not hand out. None or empty: the beginning."""
    if cursor is None or cursor == "":
        return (0, 0)
    found = _CURSOR.match(cursor) if isinstance(cursor, str) else None
    if found is None:
        raise errors.EventRejected(
            f"{payloads.quote(cursor)} is not a cursor of the event feed: pass the cursor "
            "a page gave, or none to start at the first event",
            code="cursor_invalid",
        )
    return int(found.group(1)), int(found.group(2))


class EventFeed:
    """A runner's events, read in pages (``FlowRunner.events``)."""

    def __init__(self, mounted: Mounted) -> None:
        self.mounted = mounted

    def warnings(self) -> list[str]:
        """Each event something waits for that nothing records (``[api-event-unknown]``)."""
        return event_check.unrecorded(self.mounted)

    def events(
        self,
        after: str | None = None,
        limit: int = 100,
        names: Iterable[str] | None = None,
        *,
        tenant: Tenant = None,
    ) -> EventPage:
        """The events after ``after`` (a page's cursor; None: from the first), at most
        ``limit`` (1 to 1,000), only those named ``names`` where given, with the cursor
        to go on from.

        Events come in the order the store settles them: on PostgreSQL an event appears
        once every transaction older than its own has ended, so a long transaction
        holds the feed back while it lasts, never makes it skip. On a tenant binding
        ``tenant`` is required and only that tenant's events are read.
        """
        m = self.mounted
        position = read_cursor(after)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LONGEST_PAGE:
            raise errors.EventRejected(
                f"a page of the event feed holds 1 to {LONGEST_PAGE} events, "
                f"not {payloads.quote(limit)}",
                code="limit_invalid",
            )
        wanted = None if names is None else self._names(names)
        owner = m.need_tenant(tenant)
        with m.engine.connect() as conn:
            found = ops.feed(
                conn,
                resource=m.binding.resource,
                after=position,
                names=wanted,
                tenant=owner,
                limit=limit,
            )
        cursor = cursor_of(found[-1]) if found else f"{position[0]}-{position[1]}"
        return EventPage(events=tuple(found), cursor=cursor)

    def _names(self, names: Iterable[str]) -> tuple[str, ...]:
        wanted = (names,) if isinstance(names, str) else tuple(names)
        known = self.mounted.binding.events
        for name in wanted:
            if name not in known:
                listed = ", ".join(sorted(known)) or "none"
                raise errors.EventRejected(
                    f"there is no event {payloads.quote(name)} (events: {listed})"
                    + spelling.did_you_mean(str(name), known),
                    status_code=404,
                    code="event_unknown",
                )
        return wanted
