"""The deliverer: claims the notices due for delivery, sends each through its channel and
records what came of it.

Each notice is sent at least once, as the same message every time (its Message-ID, its
Idempotency-Key): a claim holds it for long enough to try it, and a deliverer that dies
mid-send leaves it due again when the claim runs out. A failed attempt is tried again
after the binding's backoff (``FlowBinding.delivery_retry``); after the last attempt,
or at once when the receiver refused it, the notice has failed for good — shown in the
Operations room, where an operator may send it again. Nothing is sent inside a database
transaction: the claim commits first, each outcome commits on its own.

    deliverer = Deliverer(runner)
    deliverer.deliver_due()              # what is due now, then return
    deliverer.serve(stop, poll=1.0)      # until ``stop`` is set
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from flowrunner.delivery import channels, sending
from flowrunner.engine import worker
from flowrunner.engine.mounted import Mountable, Mounted
from flowrunner.foundations import extras, logs, sanitize
from flowrunner.store import dialects
from flowrunner.store import operations as ops

log = logs.logger("flowrunner.delivery")

# What a claim holds beyond its notices' timeouts: the outcomes' commits, a slow clock.
MARGIN = timedelta(seconds=30)
# The longest an error stays (one line, secrets masked).
ERROR_LENGTH = 500


@dataclass
class DeliveryStats:
    """What one deliverer did since it started."""

    claimed: int = 0
    sent: int = 0
    retried: int = 0
    failed: int = 0
    handed_back: int = 0


class Deliverer:
    """Sends one runner's notices through the binding's channels.

    ``batch`` notices are claimed at a time, each held for its channel's timeout (and a
    margin) times its place in the batch, so none is taken by another deliverer while
    this one still means to send it. ``environ`` is where secrets' variables are read
    (the process's environment unless given).
    """

    def __init__(
        self,
        mounted: Mounted | Mountable,
        *,
        batch: int = 10,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.mounted = Mounted.of(mounted)
        self.batch = max(1, batch)
        self.environ = os.environ if environ is None else environ
        self.stats = DeliveryStats()
        self._stop: threading.Event | None = None
        declared = self.mounted.binding.channels.values()
        if any(isinstance(c, channels.Webhook) for c in declared):
            extras.require("httpx", what="a Webhook channel")  # at start, not at a send

    def unset_secrets(self) -> list[str]:
        """The environment variables the channels read their secrets from that are not
        set: each of their sends would fail, saying so."""
        names = []
        for channel in self.mounted.binding.channels.values():
            if isinstance(channel, channels.Smtp) and channel.password_env is not None:
                names.append(channel.password_env)
            elif isinstance(channel, channels.Webhook) and channel.secret_env is not None:
                names.append(channel.secret_env)
        return sorted({name for name in names if not self.environ.get(name)})

    @property
    def stopping(self) -> bool:
        """Whether ``serve`` was told to stop: it sends nothing more."""
        return self._stop is not None and self._stop.is_set()

    def _hold(self) -> timedelta:
        timeouts = [
            c.timeout
            for c in self.mounted.binding.channels.values()
            if isinstance(c, (channels.Smtp, channels.Webhook))
        ]
        longest = max(timeouts, default=channels.TIMEOUT)
        return (longest + MARGIN) * self.batch

    def deliver_due(self) -> int:
        """Claim the notices due now (up to ``batch``), send each and record what came of
        it; how many were claimed."""
        m = self.mounted
        now = m.clock()
        with dialects.begin(m.engine) as conn:
            held = ops.claim_notices(
                conn,
                resource=m.binding.resource,
                now=now,
                until=now + self._hold(),
                limit=self.batch,
            )
        self.stats.claimed += len(held)
        for place, one in enumerate(held):
            if self.stopping:
                self._hand_back(held[place:])
                break
            self._deliver(one)
        return len(held)

    def deliver_all(self) -> int:
        """Deliver until nothing is due now; how many notices were claimed."""
        total = 0
        while claimed := self.deliver_due():
            total += claimed
            if self.stopping:
                break
        return total

    def _deliver(self, held: ops.Held) -> None:
        m = self.mounted
        notice = held.notice
        channel = None if notice.channel is None else m.binding.channels.get(notice.channel)
        try:
            if channel is None:
                raise sending.Failed(
                    f"the binding has no channel {notice.channel!r} any more", final=True
                )
            # A webhook's signed time is judged by the receiver against its own clock:
            # it is the wall clock's, not the runner's (a test's clock may stand still).
            signed_at = datetime.now(UTC)
            sending.send(channel, message_of(notice), now=signed_at, environ=self.environ)
        except sending.Failed as failed:
            self._failed(held, failed)
            return
        with dialects.begin(m.engine) as conn:
            recorded = ops.record_sent(conn, held, at=m.clock())
        if recorded:
            self.stats.sent += 1
            log.info(
                "sent notice %d through %s (attempt %d)",
                notice.id,
                notice.channel,
                notice.attempts,
            )
        else:
            log.warning("sent notice %d, but its claim had run out meanwhile", notice.id)

    def _failed(self, held: ops.Held, failed: sending.Failed) -> None:
        m = self.mounted
        notice = held.notice
        now = m.clock()
        retry_at = channels.next_attempt(
            m.binding.delivery_retry, notice.attempts, now, final=failed.final
        )
        error = sanitize.sanitize_text(failed.reason, ERROR_LENGTH)
        with dialects.begin(m.engine) as conn:
            ops.record_failure(conn, held, error=error, retry_at=retry_at, at=now)
        if retry_at is None:
            self.stats.failed += 1
            log.error(
                "notice %d failed for good after %d attempt(s): %s",
                notice.id,
                notice.attempts,
                error,
            )
        else:
            self.stats.retried += 1
            log.warning(
                "notice %d: attempt %d failed (%s); trying again at %s",
                notice.id,
                notice.attempts,
                error,
                retry_at.isoformat(),
            )

    def _hand_back(self, held: list[ops.Held]) -> None:
        m = self.mounted
        with dialects.begin(m.engine) as conn:
            back = ops.hand_back_notices(conn, held, at=m.clock())
        self.stats.handed_back += back
        log.info("stopping: handed back %d claimed notice(s) not sent", back)

    def serve(self, stop: threading.Event, *, poll: float = 1.0) -> None:
        """Deliver until ``stop`` is set, resting up to ``poll`` seconds when nothing is
        due. Once it is set, the notice in hand is sent and recorded, and the ones
        claimed but not sent are handed back, due again at once. A failing database is
        logged and tried again after a rest."""
        self._stop = stop
        for name in self.unset_secrets():
            log.warning("the environment variable %s is not set: a channel needs it", name)
        while not stop.is_set():
            try:
                claimed = self.deliver_due()
            except Exception as exc:
                if not worker.database_failed(exc):
                    raise
                log.warning(
                    "the database failed (%s); trying again in %.1f s",
                    sanitize.describe_exception(exc),
                    poll,
                )
                stop.wait(poll)
                continue
            if claimed < self.batch:
                stop.wait(poll)


def message_of(notice: ops.NoticeRow) -> channels.Message:
    """The message a notice becomes, the same at every attempt."""
    return channels.Message(
        notice_id=notice.id,
        channel=notice.channel or "",
        key=str(notice.id),
        audience=notice.audience,
        recipient=notice.recipient or "",
        title=notice.title or notice.message,
        text=notice.message,
        run_id=notice.run_id,
        tenant=notice.tenant,
        written_at=notice.at,
        attempt=notice.attempts,
    )
