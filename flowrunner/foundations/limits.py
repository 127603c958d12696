"""Limits on a kind's, a job's or a workflow step's commands: how many run at once
(``concurrency``) and how many start in a stretch of time (``rate``).

::

    >>> parse_rate("10/minute")
    Rate(count=10, per=datetime.timedelta(seconds=60))
    >>> Limit(concurrency=3, rate="5/second").rate_parsed.count
    5

Pure: a limit as declared, and its rate read from text. The store keeps the tokens
(``store/limits``); the worker takes one before a command starts (``engine/claimed``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from flowrunner import errors

# A rate's count is kept as that many rows (one per start in the window): bounded.
MOST_STARTS = 10_000
# How many commands of one limit may run at once: bounded the same way.
MOST_AT_ONCE = 10_000

UNITS = {
    "second": timedelta(seconds=1),
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
}

_RATE = re.compile(r"^\s*(\d+)\s*/\s*([a-z]+?)s?\s*$")


@dataclass(frozen=True)
class Rate:
    """At most ``count`` starts in any stretch of ``per``."""

    count: int
    per: timedelta

    def __str__(self) -> str:
        unit = next(name for name, length in UNITS.items() if length == self.per)
        return f"{self.count}/{unit}"


def parse_rate(text: object) -> Rate:
    """``"10/minute"``, ``"5/second"``, ``"100/hour"``, ``"1000/day"`` as a ``Rate``;
    ``BindingError`` with a sentence for anything else.

    >>> parse_rate("5 / seconds")
    Rate(count=5, per=datetime.timedelta(seconds=1))
    >>> parse_rate("0/minute")
    Traceback (most recent call last):
    ...
    flowrunner.errors.BindingError: a rate allows 1 to 10,000 starts per minute, not 0
    """
    if not isinstance(text, str):
        raise errors.BindingError(
            f"a rate is text such as '10/minute', not {type(text).__name__} {text!r}"
        )
    found = _RATE.match(text.lower())
    if found is None or found.group(2) not in UNITS:
        raise errors.BindingError(
            "a rate is a number of starts per second, minute, hour or day, such as "
            f"'10/minute', not {text!r}"
        )
    count = int(found.group(1))
    if not 1 <= count <= MOST_STARTS:
        raise errors.BindingError(
            f"a rate allows 1 to {MOST_STARTS:,} starts per {found.group(2)}, not {count:,}"
        )
    return Rate(count, UNITS[found.group(2)])


def check_concurrency(value: object) -> int:
    """How many commands may run at once: a whole number from 1 up; ``BindingError``
    otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.BindingError(
            f"concurrency is how many commands may run at once, a whole number such as 5, "
            f"not {value!r}"
        )
    if not 1 <= value <= MOST_AT_ONCE:
        raise errors.BindingError(
            f"concurrency is from 1 to {MOST_AT_ONCE:,} commands at once, not {value:,}: "
            "to stop a command from running, pause what starts it"
        )
    return value


@dataclass(frozen=True)
class Limit:
    """At most ``concurrency`` commands in flight and at most ``rate`` started
    (``"10/minute"``), counted across every worker on one database. Either may be None
    (no bound of that sort); checked when made."""

    concurrency: int | None = None
    rate: str | None = None

    def __post_init__(self) -> None:
        if self.concurrency is not None:
            check_concurrency(self.concurrency)
        if self.rate is not None:
            parse_rate(self.rate)

    @property
    def rate_parsed(self) -> Rate | None:
        return None if self.rate is None else parse_rate(self.rate)

    @property
    def bounds(self) -> bool:
        """Whether it limits anything at all."""
        return self.concurrency is not None or self.rate is not None


@dataclass(frozen=True)
class Named:
    """A limit with the name its tokens are kept under on the database (``key``) and the
    name a person reads (``shown``: ``kind 'approval'``, ``job 'nightly'``)."""

    key: str
    shown: str
    concurrency: int | None
    rate: Rate | None


def named(key: str, shown: str, limit: Limit | None) -> Named | None:
    """``limit`` under ``key``, or None when it limits nothing."""
    if limit is None or not limit.bounds:
        return None
    return Named(key, shown, limit.concurrency, limit.rate_parsed)


def key(sort: str, resource: str, name: str) -> str:
    """The name a limit's tokens are kept under: ``kind:purchase_order:approval``."""
    return f"{sort}:{resource}:{name}"
