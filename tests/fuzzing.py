"""What the fuzz suites share: how many examples each draws, and pools of values that
have broken something somewhere — text a database cannot keep, numbers past 64 bits or
past a float's range, moments at the calendar's ends, nesting past the limits.

A suite draws the hypothesis profile's examples (moderate in CI) unless
``FLOWRUNNER_FUZZ_EXAMPLES`` says how many, as ``python bench/fuzz.py 100000`` does.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

F = TypeVar("F", bound=Callable[..., Any])


class Tally(Counter[str]):
    """What a suite's inputs came to (``tally["GET 422"] += 1``), printed under the run's
    summary when ``FLOWRUNNER_FUZZ_TALLY`` is set (``bench/fuzz.py`` sets it): the proof a
    long run looked at many kinds of answer, not one."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what
        TALLIES.append(self)

    def lines(self) -> list[str]:
        """The tally as printed: its total and what, then each kind with its count."""
        if not self:
            return []
        return [f"{self.total():,} inputs, {self.what}:"] + [
            f"  {key:<40} {count:>9,}" for key, count in sorted(self.items())
        ]


TALLIES: list[Tally] = []


def examples(share: float = 1.0) -> int:
    """How many examples: ``share`` of the profile's, or FLOWRUNNER_FUZZ_EXAMPLES."""
    wanted = os.environ.get("FLOWRUNNER_FUZZ_EXAMPLES")
    return int(wanted) if wanted else max(10, int(settings().max_examples * share))


def fuzz(share: float = 1.0) -> Callable[[F], F]:
    """Hypothesis settings for a fuzz test: ``examples(share)``, no deadline (a loaded
    machine may take its time: what each example does is checked, never how fast)."""
    decorate: Callable[[F], F] = settings(
        max_examples=examples(share),
        deadline=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )
    return decorate


# Text that has broken a store, a parser or a message somewhere.
ODD_TEXT = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "a\x00b",
        "\ud800",
        "x\udfff",
        "\n",
        "a\nb",
        "'; DROP TABLE x; --",
        "٣",
        "１",
        "é" * 300,
        "x" * 5000,
        "{timestamp}",
        "{{",
        "%s",
        "\u202e",
        "\ufeff",
    ]
)
TEXT = st.one_of(st.text(max_size=12), ODD_TEXT)
# Anything a Python caller may hand over where a name or a value is expected.
ANYTHING = st.one_of(
    TEXT,
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**63 - 1, 2**63, -(2**63) - 1, 10**400]),
    st.floats(),
    st.decimals(),
    st.binary(max_size=4),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just(object()),
    st.just(print),
)
NUMBERS = st.one_of(
    st.integers(),
    st.sampled_from([2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**30, 10**400]),
    st.floats(),
    st.decimals(),
    st.just(Decimal("1e400")),
)
MOMENTS = st.one_of(
    st.datetimes(timezones=st.sampled_from([None, UTC, timezone(timedelta(hours=14))])),
    st.sampled_from(
        [
            datetime(1, 1, 1, tzinfo=UTC),
            datetime(1, 1, 1, 5, tzinfo=timezone(timedelta(hours=14))),
            datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            datetime(9999, 12, 31, 20, tzinfo=timezone(timedelta(hours=-3))),
            datetime(9999, 12, 31, 23),
        ]
    ),
    st.dates(),
    st.just(date(9999, 12, 31)),
)
DURATIONS = st.one_of(
    st.sampled_from(
        [
            "1 day",
            "30 minutes",
            "PT30M",
            "P2D",
            "0 seconds",
            "-2 days",
            "1 month",
            "99999999 years",
            "10000 years",
            "1.5 hours",
            "soon",
            "",
        ]
    ),
    st.timedeltas(),
    st.just(timedelta.max),
    TEXT,
)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    NUMBERS,
    TEXT,
    MOMENTS,
    st.uuids(),
    st.binary(max_size=4),
    st.frozensets(st.integers(0, 3), max_size=2),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.one_of(TEXT, st.integers(), st.none()), inner, max_size=3)
    ),
    max_leaves=12,
)


def nested(depth: int, leaf: Any = 1) -> Any:
    """A value nested ``depth`` deep, lists and mappings in turn."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"x": value}
    return value
