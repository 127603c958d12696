"""The pure interpreter counts business time on the calendar its configuration gives:
no clock, no table — a holiday is in the calendar, or not. A step that counts business
time where no calendar was given breaks with a sentence."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from test_interpreter_driver import Sim, config

from flowrunner.calendars import Calendar
from flowrunner.foundations import statuses

DESK = Calendar("desk", "America/New_York", {"mon-fri": "09:00-17:00"})
# Friday 6 March 2026, 16:00 in New York; the clocks go forward that Sunday.
FRIDAY_4PM = datetime(2026, 3, 6, 21, 0, tzinfo=UTC)


def new_york(moment: datetime | None) -> str:
    assert moment is not None
    return moment.astimezone(DESK.tz).strftime("%a %d %b %H:%M")


def test_a_wait_of_business_hours_skips_the_weekend_and_follows_summer_time() -> None:
    sim = Sim(
        [
            {"position": 1, "kind": "wait", "title": "Desk hours", "duration": "4 business hours"},
            {"position": 2, "kind": "set", "field": "status", "value": "late"},
        ],
        cfg=config(calendar=DESK),
        now=FRIDAY_4PM,
    ).create()
    sim.run()
    assert new_york(sim.wake) == "Mon 09 Mar 12:00"
    sim.to_wake().run()
    assert sim.record is not None and sim.record["status"] == "late"


def test_an_until_offset_in_business_days_counts_from_the_records_date() -> None:
    sim = Sim(
        [{"position": 1, "kind": "until", "field": "due_at", "duration": "2 business days"}],
        record={"id": 1, "status": "open", "due_at": FRIDAY_4PM},
        cfg=config(calendar=DESK),
        now=datetime(2026, 3, 2, 12, 0, tzinfo=UTC),
    ).create()
    sim.run()
    assert new_york(sim.wake) == "Tue 10 Mar 16:00"


def test_reminders_every_business_day_and_a_give_up_after_three() -> None:
    sim = Sim(
        [
            {
                "position": 1,
                "kind": "approval",
                "approver": "ann",
                "remind": "1 business day",
                "duration": "3 business days",
            }
        ],
        cfg=config(calendar=DESK),
        now=FRIDAY_4PM,
    ).create()
    sim.run()
    assert new_york(sim.lane().next_remind_at) == "Mon 09 Mar 16:00"
    assert new_york(sim.lane().deadline) == "Wed 11 Mar 16:00"
    # A worker back after the weekend and two days sends only the latest reminder.
    sim.at(datetime(2026, 3, 10, 22, 0, tzinfo=UTC)).run()
    assert sim.reminders() == [2]
    assert new_york(sim.lane().next_remind_at) == "Wed 11 Mar 16:00"


def test_a_holiday_in_the_calendar_moves_a_waiting_steps_end_at_the_next_advance() -> None:
    sim = Sim(
        [{"position": 1, "kind": "wait", "title": "Two days", "duration": "2 business days"}],
        cfg=config(calendar=DESK),
        now=FRIDAY_4PM,
    ).create()
    sim.run()
    assert new_york(sim.wake) == "Tue 10 Mar 16:00"
    sim.cfg = dataclasses.replace(sim.cfg, calendar=DESK.with_holidays(["2026-03-09"]))
    sim.later(hours=1).run()
    assert new_york(sim.wake) == "Wed 11 Mar 16:00"
    assert sim.sentences("waiting")[-1] == "Waiting 2 business days, until Wed 11 Mar 20:00"


def test_business_time_without_a_calendar_breaks_the_step() -> None:
    sim = Sim([{"position": 1, "kind": "wait", "duration": "2 business days"}]).create()
    sim.run()
    assert sim.status == statuses.RunStatus.FAILED
    assert sim.reason is not None and sim.reason.endswith(
        "it counts business time (2 business days), but no calendar applies to its flow"
    )
