"""Benchmark: ``add_business_time`` per call, beside time as it passes.

Run ``python bench/business_time.py``. For each calendar and length it times
``add_business_time(instant, "4 business hours", calendar)`` over many random instants
of 2026–2027, and beside it, interleaved in the same rounds, the same length as time as
it passes (``parse_duration("4 hours").add_to(instant, zone)``): prints microseconds per
call and the ratio. Nothing here is a test (``tests/test_calendars.py`` checks the
counts against a minute-by-minute walk).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from flowrunner.calendars import Calendar, add_business_time, parse_business
from flowrunner.foundations.durations import parse_duration

CALLS = 2_000
ROUNDS = 5
HOLIDAYS = [
    "2026-01-01", "2026-01-19", "2026-02-16", "2026-05-25", "2026-06-19", "2026-07-03",
    "2026-09-07", "2026-10-12", "2026-11-11", "2026-11-26", "2026-12-25", "2027-01-01",
]  # fmt: skip
CALENDARS = {
    "New York, Mon-Fri 09-17, 12 holidays a year": Calendar(
        "desk", "America/New_York", {"mon-fri": "09:00-17:00"}, HOLIDAYS
    ),
    "Berlin, two ranges a day and Sat 10-14": Calendar(
        "berlin",
        "Europe/Berlin",
        {"mon-fri": "09:00-12:00, 13:00-17:00", "sat": "10:00-14:00"},
    ),
    "Tokyo, Mon-Fri 09-18": Calendar("kobe", "Asia/Tokyo", {"mon-fri": "09:00-18:00"}),
}
LENGTHS = ("30 business minutes", "4 business hours", "2 business days", "10 business days")


def instants(count: int = CALLS, seed: int = 7) -> list[datetime]:
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return [start + timedelta(minutes=rng.randrange(2 * 365 * 24 * 60)) for _ in range(count)]


def interleaved(rounds: int, **works: Callable[[], object]) -> dict[str, list[float]]:
    """Each work's timings, one per round, each work once a round, its turn moving."""
    timings: dict[str, list[float]] = {name: [] for name in works}
    names = list(works)
    for round_ in range(rounds):
        turn = round_ % len(names)
        for name in names[turn:] + names[:turn]:
            began = time.perf_counter()
            works[name]()
            timings[name].append(time.perf_counter() - began)
    return timings


def main() -> None:
    moments = instants()
    print(f"{CALLS:,} random instants of 2026-2027, median of {ROUNDS} interleaved rounds\n")
    print(f"{'calendar':<46} {'length':<22} {'ours µs':>8} {'plain µs':>9} {'ratio':>7}")
    for title, calendar in CALENDARS.items():
        for text in LENGTHS:
            length = parse_business(text)
            assert length is not None
            plain = parse_duration(text.replace("business ", ""))
            zone = calendar.tz

            def ours(calendar: Calendar = calendar, length: object = length) -> None:
                for moment in moments:
                    add_business_time(moment, length, calendar)  # type: ignore[arg-type]

            def passing(plain: object = plain, zone: object = zone) -> None:
                for moment in moments:
                    plain.add_to(moment, zone)  # type: ignore[attr-defined]

            timings = interleaved(ROUNDS, ours=ours, plain=passing)
            us = statistics.median(timings["ours"]) / CALLS * 1e6
            base = statistics.median(timings["plain"]) / CALLS * 1e6
            print(f"{title:<46} {text:<22} {us:>8.1f} {base:>9.1f} {us / base:>6.1f}x")


if __name__ == "__main__":
    main()
