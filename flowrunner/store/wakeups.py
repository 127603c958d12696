"""Waking idle workers the moment work falls due: PostgreSQL's ``NOTIFY`` and ``LISTEN``.

The writing side is a column, ``wake(resource)``: ``pg_notify(channel, resource)``, added
to the statement that makes a run due now — a start's due row, an event's or a change's
wake-up of a record's runs, a claim handed back — so it costs no statement of its own.
It is sent in the writer's transaction: PostgreSQL delivers it when that transaction
commits, and never if it rolls back, so only committed work wakes anyone. The payload is
the resource's name and nothing else (no tenant, no record).

The waiting side is a ``Listener``: one connection of its own per worker, in autocommit,
that ``LISTEN``s on the channel and is used only to wait between polls. A notice for the
worker's resource ends the wait at once; the poll interval stays as the fallback, for
due times that come by the clock (timers, reminders, leases run out) and whenever the
listening connection is lost (it is opened again later). On SQLite nothing is sent and
the listener only waits: polling, as before.

The channel is ``flowrunner_due_`` and a hash of the schema the engine's tables are in
(``current_schema()``), computed by the database on both sides: several deployments in
one database, each in its own schema, wake only their own workers.
"""

from __future__ import annotations

import re
import threading
import time
from types import TracebackType
from typing import Any

import sqlalchemy as sa

from flowrunner.foundations import logs, sanitize, sqltypes

log = logs.logger("flowrunner.wakeups")

CHANNEL_PREFIX = "flowrunner_due_"

# A waiting worker looks at its stop event this often: a signal's handler sets it while
# the wait is in the socket.
STOP_CHECK = 0.2
# After the listening connection was lost, or could not be opened, try again this late.
RETRY_AFTER = 5.0

_CHANNEL = re.compile(r"[a-z0-9_]{1,63}")


def channel() -> sa.ColumnElement[str]:
    """The channel's name as the database computes it: one per schema."""
    digest = sa.func.left(sa.func.md5(sa.func.current_schema()), 16, type_=sa.Text)
    return sa.literal(CHANNEL_PREFIX, sa.Text) + digest


def wake(dialect: sa.Dialect, resource: sqltypes.Expression) -> sqltypes.Expression | None:
    """A column that wakes ``resource``'s workers once its statement's transaction commits.

    Add it to the RETURNING or the select list of a statement that makes runs due now:
    it is evaluated for each row the statement returns (one wake however many rows: the
    database folds the same notice sent twice in one transaction), and for none if it
    returns none. None where there is nothing to send (SQLite).
    """
    if dialect.name != "postgresql":
        return None
    return sa.func.pg_notify(channel(), sa.cast(resource, sa.Text)).label("woken")


class Listener:
    """A worker's wait between polls, ended early when its resource's work falls due.

    Use it as a context manager around the serving loop: it starts to listen on entry
    (before the first claim, so no wake between a claim and the wait is missed) and
    closes its connection on exit. ``enabled=False`` (or SQLite) waits the whole time.
    """

    def __init__(self, engine: sa.Engine, resource: str, *, enabled: bool = True) -> None:
        self.engine = engine
        self.resource = resource
        self.enabled = enabled and engine.dialect.name == "postgresql"
        self.channel: str | None = None
        self.wakes = 0
        self._opened: Any = None  # the driver's connection, listening or not
        self._conn: Any = None
        self._retry_at = 0.0
        self._lost = False

    @property
    def listening(self) -> bool:
        """Whether a notice can end the wait now (else the wait is plain polling)."""
        return self._conn is not None

    def __enter__(self) -> Listener:
        if self.enabled:
            self._listen()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening and close the connection (nothing is raised if it is gone).

        Closed by the driver itself: it is no longer the pool's, and the pool would first
        try to roll back a connection that may be cut.
        """
        opened, self._opened, self._conn = self._opened, None, None
        if opened is not None:
            try:
                opened.close()
            except Exception as exc:
                log.debug("closing the wake-up connection: %s", sanitize.describe_exception(exc))

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """Wait up to ``seconds``, less if ``stop`` is set; True when woken early.

        Woken: a notice for this resource arrived (those already waiting are read too,
        so a burst wakes once), or listening was just restored after a loss (what was
        sent meanwhile was missed, so the worker looks at once).
        """
        deadline = time.monotonic() + seconds
        if self._restored():
            return True
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._conn is None:
                stop.wait(left)
                return False
            try:
                if self._received(min(left, STOP_CHECK)):
                    self.wakes += 1
                    return True
            except Exception as exc:
                self._drop(exc)
        return False

    def drain(self) -> int:
        """Read the notices that arrived while the worker was busy, without waiting; how
        many there were.

        A busy worker calls it between claims: PostgreSQL keeps every notice until each
        listener has read it, so one that is never read holds the server's notice queue.
        """
        if self._conn is None:
            return 0
        read = 0
        try:
            for _notice in self._conn.notifies(timeout=0):
                read += 1
        except Exception as exc:
            self._drop(exc)
        return read

    def _restored(self) -> bool:
        """Try to listen again if it is time to; whether listening was just restored."""
        if not self.enabled or self._conn is not None or time.monotonic() < self._retry_at:
            return False
        restored = self._listen() and self._lost
        self._lost = not self.listening
        return restored

    def _received(self, timeout: float) -> bool:
        """Whether a notice for our resource arrives within ``timeout`` seconds."""
        ours = False
        for notice in self._conn.notifies(timeout=timeout, stop_after=1):
            ours = ours or notice.payload == self.resource
        if ours:
            self.drain()  # what else is waiting: one wake for a burst
        return ours

    def _listen(self) -> bool:
        """Open the listening connection; False (and polling until a later try) if not."""
        self.close()
        try:
            pooled = self.engine.raw_connection()
        except Exception as exc:
            return self._failed(exc, "could not be opened")
        conn: Any = pooled.driver_connection
        # Its own connection, outside the pool: it lives as long as the worker.
        pooled.detach()
        self._opened = conn
        if not callable(getattr(conn, "notifies", None)):
            log.warning("the database driver cannot listen (psycopg 3.2 or later can); polling")
            self.enabled = False
            self.close()
            return False
        try:
            conn.rollback()
            conn.autocommit = True
            name = conn.execute(_channel_query(self.engine.dialect)).fetchone()[0]
            if not _CHANNEL.fullmatch(name):
                raise ValueError(f"unexpected channel name {name!r}")
            conn.execute(f'LISTEN "{name}"')
        except Exception as exc:
            return self._failed(exc, "could not listen")
        self._conn, self.channel = conn, name
        log.debug("listening for due work on %s", name)
        return True

    def _failed(self, exc: BaseException, what: str) -> bool:
        self.close()
        self._retry_at = time.monotonic() + RETRY_AFTER
        self._lost = True
        log.warning(
            "the wake-up connection %s (%s); polling, and trying again in %.0f s",
            what,
            sanitize.describe_exception(exc),
            RETRY_AFTER,
        )
        return False

    def _drop(self, exc: BaseException) -> None:
        self._failed(exc, "was lost")


def _channel_query(dialect: sa.Dialect) -> str:
    """``SELECT`` the channel's name, as the driver's own text."""
    return str(
        sa.select(channel()).compile(dialect=dialect, compile_kwargs={"literal_binds": True})
    )
