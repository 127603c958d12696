"""A schedule read as a person says it: ``0 6 * * 1-5`` is ``every weekday at 06:00``.

Wherever a reader meets a schedule (a job's history line, the jobs and flows listed, a
flow's page), its cron fields read in words; any text at all is said without raising,
and any cron fields the schedule reads are said without a star, a slash or a range."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowrunner.foundations import spoken
from flowrunner.jobs import schedules


@pytest.mark.parametrize(
    ("every", "said"),
    [
        ("0 6 * * 1-5", "every weekday at 06:00"),
        ("0 6 * * mon", "every Monday at 06:00"),
        ("0 6 * * MON", "every Monday at 06:00"),
        ("30 7 * * 0,6", "every Saturday and Sunday at 07:30"),
        ("0 8 * * 7", "every Sunday at 08:00"),
        ("0 6,18 * * *", "every day at 06:00 and 18:00"),
        ("45 2 * * *", "every day at 02:45"),
        ("*/15 * * * *", "every 15 minutes"),
        ("* * * * *", "every minute"),
        ("*/5 9-17 * * 1-5", "every 5 minutes from 09:00 to 17:59, every weekday"),
        ("0 * * * *", "every hour, on the hour"),
        ("15 */3 * * *", "every 3 hours, at 15 minutes past the hour"),
        ("0 9-17 * * 1-5", "every hour from 09:00 to 17:00, every weekday"),
        ("30 2 1,15 * *", "on the 1st and 15th of every month at 02:30"),
        ("0 0 1-7 * *", "on the 1st to the 7th of every month at 00:00"),
        ("0 0 L * *", "on the last day of every month at 00:00"),
        ("0 18 * * 5L", "on the last Friday of every month at 18:00"),
        ("0 9 * * 1#2", "on the 2nd Monday of every month at 09:00"),
        ("5 4 * jan,jul *", "every day in January and July at 04:05"),
        ("0 0 1 1 *", "on the 1st of January at 00:00"),
        ("0 0 1 * 1", "at 00:00, on the 1st of every month and every Monday"),
        ("@daily", "every day at 00:00"),
        ("@hourly", "every hour, on the hour"),
        ("@weekly", "every Sunday at 00:00"),
        ("@monthly", "on the 1st of every month at 00:00"),
        ("0 25 * * *", "on its schedule"),
        ("ninety seconds", "on its schedule"),
    ],
)
def test_a_schedule_reads_as_a_person_says_it(every: str, said: str) -> None:
    assert spoken.cron(every) == said


def test_a_jobs_and_a_flows_schedule_name_their_zone() -> None:
    assert schedules.parse("0 6 * * 1-5", "America/New_York").said() == (
        "every weekday at 06:00 (America/New_York)"
    )
    assert (
        schedules.in_words("0 6 * * mon Europe/Berlin") == "every Monday at 06:00 (Europe/Berlin)"
    )
    assert (
        schedules.in_words("0 6 * * mon Berlin") == "0 6 * * mon Berlin"
    )  # unreadable: as written
    assert schedules.read("90 seconds").said() == "every 90 seconds"


@given(st.text(max_size=60))
def test_any_text_is_said_without_raising(text: str) -> None:
    said = spoken.cron(text)
    assert isinstance(said, str) and said.strip() == said and said


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    """One cron field over ``low..high``: a star, a step, a value, a range, or a list."""
    value = st.integers(low, high)
    part = st.one_of(
        value.map(str),
        st.tuples(value, value).map(lambda ab: f"{min(ab)}-{max(ab)}"),
        st.tuples(value, value, st.integers(1, 12)).map(
            lambda abn: f"{min(abn[:2])}-{max(abn[:2])}/{abn[2]}"
        ),
    )
    return st.one_of(
        st.just("*"),
        st.integers(1, 30).map(lambda n: f"*/{n}"),
        st.lists(part, min_size=1, max_size=4).map(",".join),
    )


FIELDS = st.tuples(_field(0, 59), _field(0, 23), _field(1, 28), _field(1, 12), _field(0, 6))
SYNTAX = re.compile(r"[*/#]|\d+-\d+|\d,\d")


@given(FIELDS)
def test_any_cron_fields_the_schedule_reads_are_a_sentence_in_words(
    fields: tuple[str, ...],
) -> None:
    every = " ".join(fields)
    schedules.parse(every)  # the schedule reads them
    said = spoken.cron(every)
    assert said != spoken.UNSAID, every
    assert not SYNTAX.search(said), (every, said)
    assert said.startswith(("every ", "on the ", "at ")), (every, said)
