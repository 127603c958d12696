"""The pure decision whether a failed command is tried again, and when.

Like procrastinate's ``retry.py``: attempts in, ``RetryDecision`` out; the interpreter
stores the decision on the lane and the worker wakes the run at ``retry_at``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from flowrunner.foundations import retry_policy


@dataclass(frozen=True)
class RetryDecision:
    """``retry_at`` is when to try again, or ``None`` to give up."""

    retry_at: datetime | None

    @property
    def gives_up(self) -> bool:
        return self.retry_at is None


def backoff(policy: retry_policy.RetryPolicy, attempts: int) -> timedelta:
    """The wait after failed attempt number ``attempts`` (1-based), capped."""
    exponent = max(0, attempts - 1)
    # Compare in seconds before building a timedelta, so a huge exponent cannot overflow.
    cap = policy.cap.total_seconds()
    try:
        seconds = min(cap, policy.base.total_seconds() * policy.factor**exponent)
    except OverflowError:
        seconds = cap
    return timedelta(seconds=seconds)


def decide(policy: retry_policy.RetryPolicy, attempts: int, now: datetime) -> RetryDecision:
    """Decide after ``attempts`` failed tries (the latest just now).

    >>> from datetime import UTC
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> decide(retry_policy.RetryPolicy(), 1, t).retry_at - t
    datetime.timedelta(seconds=10)
    >>> decide(retry_policy.RetryPolicy(max_attempts=2), 2, t).gives_up
    True
    """
    if attempts >= policy.max_attempts:
        return RetryDecision(None)
    return RetryDecision(now + backoff(policy, attempts))
