"""A worker's heartbeat: keeps its claims' leases alive while a long command runs.

While a command runs in a step's transaction, a thread of its own renews the leases
of that run and of the runs its worker claimed and has not started yet, every third of
the lease's time, each renewal in a short transaction of its own connection — so a
command longer than the lease is not taken over by another worker and repeated.

What protects a long command differs by database:

- PostgreSQL: the heartbeat. It holds no lock the step needs (the step locks its
  lease row only at its save, after its commands), and waits at most one beat for a
  lease row another transaction holds. A renewal that finds the lease gone (another
  worker took it over) is remembered: the step is refused at once when its command
  returns, and its save would be refused by the fence anyway.
- SQLite: the step's own transaction. It holds the database's one write lock from its
  first statement (``BEGIN IMMEDIATE``), so no other worker can write — and so none can
  take a lease over — until it ends. A heartbeat from another connection could not
  write either; none is run.

With a kind ``timeout`` the heartbeat renews only until the attempt's deadline: a
command stuck for good loses its lease within one lease time after it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from types import TracebackType

import sqlalchemy as sa

from flowrunner.foundations import logs, sanitize
from flowrunner.store import dialects
from flowrunner.store import operations as ops

log = logs.logger("flowrunner.engine.worker")


class Heartbeat:
    """Renews ``claims``' leases from a thread while the ``with`` block runs.

    ``lost`` holds the run ids whose lease a renewal found taken over. ``point`` is the
    worker's crash-injection hook, passed ``"heartbeat"`` after each renewal commits;
    an exception it raises stops the heartbeat and is raised again when the block ends,
    as a worker killed meanwhile. ``keep`` is done at each renewal too, in its
    transaction: it holds the command's slot of its limit (``engine/claimed``).
    """

    def __init__(
        self,
        engine: sa.Engine,
        *,
        owner: str,
        claims: Sequence[ops.Claim],
        ttl: timedelta,
        clock: Callable[[], datetime],
        until: datetime | None = None,
        point: Callable[[str], None] | None = None,
        keep: Callable[[sa.Connection, datetime], None] | None = None,
    ) -> None:
        self.engine = engine
        self.owner = owner
        self.ttl = ttl
        self.clock = clock
        self.until = until
        self.point = point
        self.keep = keep
        self.lost: set[int] = set()
        self.beats = 0
        self._keep = list(claims)
        self._crash: BaseException | None = None
        # On SQLite the step's transaction already keeps every other writer out: no
        # thread, and nothing made for one (a command's heartbeat then costs nothing).
        self._thread: threading.Thread | None = None
        if self._keep and not dialects.is_sqlite(engine):
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run, name="flowrunner-heartbeat", daemon=True
            )

    @property
    def interval(self) -> float:
        """Seconds between renewals: a third of the lease, so two may fail in a row."""
        return max(0.01, self.ttl.total_seconds() / 3)

    def __enter__(self) -> Heartbeat:
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._thread is not None:
            self._stop.set()
            # No renewal may land after the block: the step gives the lease up next.
            self._thread.join()
        if self._crash is not None:
            raise self._crash

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            now = self.clock()
            if self.until is not None and now >= self.until:
                return  # past the deadline: the lease lapses within one lease time
            try:
                self._renew(now)
            except Exception as exc:  # the database is away: try again at the next beat
                log.warning(
                    "the heartbeat could not renew its leases (%s); trying again in %.1f s",
                    sanitize.describe_exception(exc),
                    self.interval,
                )
                continue
            if self._stop.is_set():
                return
            self.beats += 1
            if self.point is not None:
                try:
                    self.point("heartbeat")
                except BaseException as crash:  # a test stopping the worker here
                    self._crash = crash
                    return
            if not self._keep:
                return

    def _renew(self, now: datetime) -> None:
        with dialects.begin(self.engine) as conn:
            # A lease row another transaction holds (a worker that took it over, at its
            # save) must not keep this thread — and the step that joins it — waiting.
            dialects.limit_lock_wait(conn, timedelta(seconds=self.interval))
            for claim in list(self._keep):
                if self._stop.is_set():
                    return
                try:
                    with conn.begin_nested():
                        held = ops.refresh_lease(
                            conn,
                            name=ops.run_lease(claim.run_id),
                            owner=self.owner,
                            epoch=claim.epoch,
                            now=now,
                            ttl=self.ttl,
                        )
                except sa.exc.OperationalError:
                    continue  # its row is locked: the next beat tries again
                if not held:
                    self.lost.add(claim.run_id)
                    self._keep.remove(claim)
                    log.info("run %s: its lease was taken over during a command", claim.run_id)
            if self.keep is not None and not self._stop.is_set():
                with conn.begin_nested():
                    self.keep(conn, now)  # the command's slot of its limit
