"""How often a failing command is tried again: the policy a runner or a kind sets.

The interpreter decides with it (``interpreter.retry``); the binding names it per kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class RetryPolicy:
    """How often a failing command is tried again: exponential backoff with a cap.

    Attempt ``n`` (1-based) that fails waits ``min(cap, base * factor ** (n - 1))``
    before attempt ``n + 1``; after ``max_attempts`` the step fails.
    """

    max_attempts: int = 5
    base: timedelta = timedelta(seconds=10)
    factor: float = 2.0
    cap: timedelta = timedelta(hours=1)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("a retry policy needs max_attempts of at least 1")
        if self.base < timedelta(0) or self.cap < timedelta(0):
            raise ValueError("a retry policy's base and cap cannot be negative")
        if self.factor < 1:
            raise ValueError("a retry policy's factor must be at least 1")
