"""History lines as sentences: every code the engine writes has one, in the flow's words.

Pure: each line here is what the interpreter, the worker or an operator writes, put into
words by ``flowrunner.history.flows``. The whole histories of the sample apps are in
test_histories.py.
"""

from __future__ import annotations

import ast as pyast
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from query_strategies import conditions

import flowrunner
from flowrunner.flows import snapshot
from flowrunner.history import flows
from flowrunner.query import ast

PACKAGE = Path(flowrunner.__file__).parent


@dataclass(frozen=True)
class Line:
    what: str
    detail: object
    kind: str | None = None
    position: int | None = None
    title: str | None = None


SNAP = snapshot.FlowSnapshot.build(
    {"id": 1, "name": "Big orders", "start": "created"},
    [
        {"id": 1, "position": 20, "kind": "branch", "title": "Rejected?", "condition": "x"},
        {"id": 2, "position": 60, "kind": "notify", "title": "Tell the requester"},
    ],
)

# One line of each code as the engine writes it, and its sentence: the documented table
# (docs/engine.md shows these).
# A timer's line (``flowrunner.timers``): its column, instant and command.
TIMER = {"column": "warn_at", "instant": "2026-03-03T09:00:00+00:00", "command": "warn_sla"}

SENTENCES: dict[str, list[tuple[str | None, dict[str, Any], str]]] = {
    "started": [("approval", {}, "Started Manager approval")],
    "set": [
        ("set", {"field": "status", "value": "approved"}, "Set status to approved"),
        ("set", {"field": "approver", "value": None}, "Emptied approver"),
        (
            "set",
            {"field": "due_at", "value": "2026-03-03T09:00:00+00:00"},
            "Set due_at to Tue 3 Mar 09:00",
        ),
    ],
    "notice": [
        (
            "notify",
            {"audience": "requester", "recipient": "ann", "message": "Your order was approved"},
            "Told ann (requester): Your order was approved",
        ),
        ("notify", {"audience": "requester"}, "Told the requester"),
    ],
    "undeliverable": [
        (
            "notify",
            {"audience": "requester", "column": "requester_id", "why": "the order names nobody"},
            "Could not tell the requester: the order names nobody",
        ),
        (
            "notify",
            {"audience": "requester", "to": "requester_id", "why": "empty", "message": "Hi"},
            "Could not tell the requester: the record's requester_id is empty",
        ),
    ],
    "condition": [
        (
            "branch",
            {"condition": "status = rejected", "held": False, "goto": 60},
            "Status is not rejected: went on at Tell the requester",
        ),
        (
            "branch",
            {"condition": "status not in (rejected, withdrawn)", "held": True},
            "Went on: status is neither rejected nor withdrawn",
        ),
        (
            "branch",
            {"condition": "status = approved", "held": False, "goto": None},
            "Status is not approved: ended here",
        ),
        (
            "approval",
            {
                "outcome": "condition",
                "condition": "event.decision = rejected or status = withdrawn",
                "held_by": ["status = 'withdrawn'"],
            },
            "Stopped waiting: status is withdrawn",
        ),
        (
            "approval",
            {
                "outcome": "condition",
                "condition": "event.decision = rejected or status = withdrawn",
                "held_by": ["event.decision = rejected"],
                "who": "bob",
            },
            "Stopped waiting: bob rejected it",
        ),
        (
            "approval",
            {"outcome": "condition", "held_by": ["event.amount > 10000"], "who": "bob"},
            "Stopped waiting: the amount is more than 10,000",
        ),
    ],
    "waiting": [
        (
            "approval",
            {
                "event": "po.decided",
                "asked": 3,
                "names": ["ann", "bob", "cara"],
                "needed": 3,
                "until": "2026-03-09T09:00:00+00:00",
            },
            "Asked ann, bob and cara for approval (all 3 must answer by Mon 9 Mar 09:00)",
        ),
        (
            "approval",
            {"event": "po.decided", "asked": 5, "names": [], "needed": 3, "until": None},
            "Asked 5 people for approval (3 of 5 must answer)",
        ),
        (
            "until",
            {"until": "2026-03-03T08:00:00+00:00", "field": "due_at", "offset": "-1 hour"},
            "Waiting until Tue 3 Mar 08:00 (due_at − 1 hour)",
        ),
        (
            "until",
            {"until": None, "field": "due_at", "offset": None},
            "Waiting while due_at is empty",
        ),
        (
            "wait",
            {"until": "2026-03-04T09:00:00+00:00", "duration": "2 days"},
            "Waiting 2 days, until Wed 4 Mar 09:00",
        ),
        (
            "waitFor",
            {"event": "ticket.replied", "until": "2026-03-05T09:00:00+00:00"},
            "Waiting for the ticket replied event until Thu 5 Mar 09:00",
        ),
    ],
    "command": [
        ("send", {"command": "send_purchase_order", "attempt": 1}, "Sent to supplier"),
        (
            "send",
            {"command": "send_purchase_order", "attempt": 2},
            "Sent to supplier again (2nd attempt)",
        ),
        ("notify", {"command": "notify_team", "attempt": 1}, "Ran the notify step"),
        (
            "approval",
            {"command": "request_approval", "attempt": 1, "asks": True},
            "Asked for Manager approval",
        ),
    ],
    "retry": [
        (
            "send",
            {"attempt": 1, "error": "gateway down", "again_at": "2026-03-02T09:10:00+00:00"},
            "Attempt 1 failed (gateway down); trying again at Mon 2 Mar 09:10",
        ),
        ("send", {"by": "operator"}, "Will run again: an operator retried the step"),
    ],
    "reminder": [
        (
            "approval",
            {"reminder": 2, "to": ["bob", "cara"]},
            "Reminding bob and cara (2nd reminder)",
        )
    ],
    "reminded": [
        (
            "approval",
            {"reminder": 2, "to": ["bob", "cara"]},
            "Reminded bob and cara (2nd reminder)",
        ),
        (
            "approval",
            {"reminder": 3, "to": []},
            "Reminded those who have not answered (3rd reminder)",
        ),
    ],
    "reminder_failed": [
        (
            "approval",
            {"reminder": 1, "to": ["bob"], "error": "mail down"},
            "Could not remind bob (1st reminder): mail down",
        )
    ],
    "answered": [
        (
            "approval",
            {
                "who": "bob",
                "answer": {"decision": "approved"},
                "again": False,
                "counted": True,
                "received": 2,
                "needed": 3,
                "waiting_for": ["cara"],
            },
            "bob approved (2 of 3; waiting for cara)",
        ),
        (
            "approval",
            {
                "who": "ann",
                "answer": {"decision": "yes"},
                "again": True,
                "counted": True,
                "received": 1,
                "needed": 3,
                "waiting_for": [],
            },
            "ann answered decision yes again (1 of 3)",
        ),
        (
            "approval",
            {
                "who": "zed",
                "answer": {},
                "again": False,
                "counted": True,
                "received": 1,
                "needed": None,
                "waiting_for": [],
            },
            "zed answered (1 so far)",
        ),
        (
            "approval",
            {"who": "mallory", "answer": {}, "counted": False, "asked": False},
            "mallory answered but was not asked: not counted",
        ),
    ],
    "arrived": [
        (
            "approval",
            {"event": "po.decided", "event_id": 7, "by": "approver", "counted": False},
            "A po decided event named no approver: not counted",
        ),
        (
            "approval",
            {"event": "po.decided", "event_id": 8, "received": 1, "needed": 2, "waiting_for": []},
            "The po decided event arrived (1 of 2)",
        ),
        (
            "waitFor",
            {"outcome": "arrived", "event": "ticket.replied"},
            "The ticket replied event arrived",
        ),
    ],
    "timed_out": [
        (
            "subflow",
            {"outcome": "timed_out", "flow": "Credit check", "run": 12, "duration": "3 days"},
            "Gave up after 3 days: subflow Credit check (run 12) had not ended",
        ),
        (
            "approval",
            {
                "outcome": "timed_out",
                "duration": "1 week",
                "received": 1,
                "needed": 2,
                "waiting_for": ["ctl"],
            },
            "Gave up after 1 week: 1 of 2 answered; no answer from ctl",
        ),
        (
            "waitFor",
            {"outcome": "timed_out", "event": "ticket.replied", "duration": "3 days"},
            "Gave up after 3 days: no ticket replied event came",
        ),
    ],
    "done": [
        (
            "subflow",
            {"outcome": "subflow_done", "flow": "Credit check", "run": 12, "status": "done"},
            "Subflow Credit check ended — went on",
        ),
        (
            "until",
            {
                "outcome": "done",
                "until": "2026-03-03T08:00:00+00:00",
                "field": "due_at",
                "offset": "-1 hour",
            },
            "Waited until Tue 3 Mar 08:00 (due_at − 1 hour)",
        ),
        (
            "approval",
            {"outcome": "complete", "received": 3, "needed": 3},
            "Got the answers it needed (3 of 3)",
        ),
        ("set", {"outcome": "done"}, "Finished the set step"),
        (
            "approval",
            {"outcome": "stopped", "why": "Send to supplier failed"},
            "Stopped: Send to supplier failed",
        ),
    ],
    "cancel": [
        (
            "approval",
            {"command": "close_approval_requests", "why": "the wait gave up"},
            "Stopped waiting (the wait gave up): withdrawing the Manager approval requests",
        )
    ],
    "cancel_done": [
        (
            "approval",
            {"command": "close_approval_requests"},
            "Withdrew the Manager approval requests",
        )
    ],
    "cancel_failed": [
        (
            "approval",
            {"command": "close_approval_requests", "error": "service down"},
            "Could not withdraw the Manager approval requests: service down",
        )
    ],
    "subflow": [
        (
            "subflow",
            {"flow": "Credit check", "run": 12, "until": None},
            "Started subflow Credit check (run 12)",
        ),
        (
            "subflow",
            {
                "flow": "Credit check",
                "run": 12,
                "record": "7",
                "until": "2026-03-05T09:00:00+00:00",
            },
            "Started subflow Credit check (run 12) on record 7; gives up at Thu 5 Mar 09:00",
        ),
    ],
    "subflow_cancelled": [
        (
            "subflow",
            {"flow": "Credit check", "run": 12, "why": "the wait gave up"},
            "Cancelled subflow Credit check (run 12): the wait gave up",
        )
    ],
    "failed": [
        (
            "send",
            {"code": "command.refused", "message": "the command refused: account closed"},
            "Send to supplier failed: the command refused: account closed",
        ),
        (
            "send",
            {
                "code": "command.refused",
                "message": "the command refused: the supplier refused: order on hold",
                "failure": "the supplier refused: order on hold",
                "attempts": 1,
                "on_failure": 60,
            },
            "Send to supplier failed (the supplier refused: order on hold) — "
            "went on at Tell the requester",
        ),
        (
            "send",
            {
                "code": "command.failed",
                "message": "the command failed 5 times: ConnectionError: gateway down",
                "failure": "ConnectionError: gateway down",
                "attempts": 5,
                "on_failure": 60,
            },
            "Send to supplier failed 5 times (ConnectionError: gateway down) — "
            "went on at Tell the requester",
        ),
        (
            "send",
            {
                "code": "command.failed",
                "message": "the command failed once: TimeoutError",
                "failure": "TimeoutError",
                "attempts": 1,
            },
            "Send to supplier failed once: TimeoutError",
        ),
    ],
    "escalated": [
        (
            "approval",
            {
                "audience": "manager",
                "after": "2 days",
                "recipient": "mia",
                "message": "Manager approval has waited 2 days and still waits for ann.",
            },
            "Escalated to mia (manager) after 2 days: "
            "Manager approval has waited 2 days and still waits for ann.",
        ),
        (
            "waitFor",
            {
                "audience": "manager",
                "after": "1 day",
                "recipient": None,
                "to": "approver",
                "why": "empty",
                "message": "Reply has waited 1 day and still waits for the ticket replied event.",
            },
            "Could not escalate to the manager after 1 day: the record's approver is empty",
        ),
    ],
    "ended": [
        (
            None,
            {"status": "done", "reason": "the flow ended after its last step"},
            "Run done: the flow ended after its last step",
        ),
        (
            None,
            {"status": "cancelled", "reason": "cancelled by olga: merged"},
            "Run cancelled by olga: merged",
        ),
        (
            None,
            {
                "status": "failed",
                "reason": "step 'Send to supplier' (send, position 80) failed: "
                "the command refused: the order is on hold",
            },
            "Run failed: Send to supplier failed: the command refused: the order is on hold",
        ),
    ],
    "cancelled": [(None, {"by": "olga", "reason": "merged"}, "olga cancelled the run: merged")],
    "retried": [
        (None, {"by": "olga"}, "olga retried the run"),
        (
            None,
            {"by": "olga", "reason": "supplier is back"},
            "olga retried the run: supplier is back",
        ),
    ],
    "redriven": [
        (None, {"by": "olga"}, "olga redrove the run: it is due again now"),
        (
            None,
            {"by": "olga", "reason": "worker host lost"},
            "olga redrove the run: it is due again now (worker host lost)",
        ),
    ],
    "restarted": [
        (
            None,
            {"by": "olga", "restarted_as": 9, "reason": "released"},
            "olga restarted the run as run 9: released",
        )
    ],
    "moved": [
        (
            None,
            {"by": "olga", "flow": "Big orders", "from": 1, "to": 2},
            "olga moved the run from version 1 to version 2",
        )
    ],
    "job_planned": [
        (
            "job",
            {"event": "po.decided", "run_at": "2026-03-03T09:00:00+00:00", "key": "7"},
            "Planned by the po decided event for Tue 3 Mar 09:00 (key 7)",
        )
    ],
    "job_scheduled": [
        (
            "job",
            {
                "every": "0 6 * * 1-5",
                "timezone": "America/New_York",
                "first": "2026-03-09T10:00:00+00:00",
            },
            "Scheduled every weekday at 06:00 (America/New_York); first slot Mon 9 Mar 06:00",
        ),
        (
            "job",
            {
                "every": "90 seconds",
                "timezone": "UTC",
                "first": "2026-03-09T10:01:30+00:00",
                "interval": True,
            },
            "Scheduled every 90 seconds; first slot Mon 9 Mar 10:01",
        ),
    ],
    "schedule_started": [
        (
            "schedule",
            {"slot": "2026-03-09T05:00:00+00:00", "timezone": "Europe/Berlin"},
            "Started by the Monday 06:00 schedule",
        )
    ],
    "schedule_slot": [
        (
            "schedule",
            {
                "slot": "2026-03-09T05:00:00+00:00",
                "timezone": "Europe/Berlin",
                "started": 1234,
                "missed_from": "2026-03-02T05:00:00+00:00",
            },
            "Started 1,234 runs for the Monday 06:00 slot (Mon 9 Mar 06:00); the slots "
            "missed from Mon 2 Mar 06:00 were skipped",
        ),
        (
            "schedule",
            {
                "slot": "2026-03-09T05:00:00+00:00",
                "timezone": "Europe/Berlin",
                "started": 0,
                "problem": "its condition can no longer be read against the records",
            },
            "Started no run for the Monday 06:00 slot (Mon 9 Mar 06:00): its condition can "
            "no longer be read against the records",
        ),
        (
            "schedule",
            {
                "slot": "2026-03-09T05:00:00+00:00",
                "timezone": "Europe/Berlin",
                "started": 2000,
                "problem": "the flow is inactive",
            },
            "Started 2,000 runs for the Monday 06:00 slot (Mon 9 Mar 06:00), then stopped: "
            "the flow is inactive",
        ),
    ],
    "job_ran": [
        (
            "job",
            {
                "command": "close_stale_orders",
                "slot": "2026-03-10T10:00:00+00:00",
                "timezone": "America/New_York",
                "missed_from": "2026-03-03T11:00:00+00:00",
            },
            "Ran close stale orders for the slot Tue 10 Mar 06:00; the slots missed from "
            "Tue 3 Mar 06:00 were skipped",
        ),
        ("job", {"command": "remind_buyer", "attempt": 3}, "Ran remind buyer (attempt 3)"),
        ("job", {"command": "close", "by": "olga"}, "olga ran close by hand"),
    ],
    "job_failed": [
        (
            "job",
            {
                "command": "close_stale_orders",
                "slot": "2026-03-02T11:00:00+00:00",
                "timezone": "America/New_York",
                "error": "quotes down",
            },
            "Close stale orders failed for the slot Mon 2 Mar 06:00 (quotes down); the job "
            "waits for its next slot",
        ),
        (
            "job",
            {"command": "close", "by": "olga", "error": "quotes down"},
            "olga ran close by hand: it failed (quotes down)",
        ),
    ],
    "job_skipped": [
        (
            "job",
            {
                "missed_from": "2026-03-03T11:00:00+00:00",
                "missed_to": "2026-03-10T10:00:00+00:00",
                "next": "2026-03-11T10:00:00+00:00",
                "timezone": "America/New_York",
            },
            "Skipped the slots Tue 3 Mar 06:00 to Tue 10 Mar 06:00, as no worker served or "
            "the job was paused; the job runs next at Wed 11 Mar 06:00",
        ),
        (
            "job",
            {
                "overlapped_from": "2026-03-02T09:01:00+00:00",
                "overlapped_to": "2026-03-02T09:01:00+00:00",
                "timezone": "UTC",
            },
            "Skipped the slot Mon 2 Mar 09:01, which came while the last one ran",
        ),
    ],
    "job_started": [
        (
            "job",
            {"run": 12, "slot": "2026-03-02T09:00:00+00:00", "timezone": "UTC"},
            "Started run 12 for the slot Mon 2 Mar 09:00, beside any slot still running",
        )
    ],
    "job_already": [
        (
            "job",
            {"command": "close", "slot": "2026-03-02T09:00:00+00:00", "timezone": "UTC"},
            "The slot Mon 2 Mar 09:00 had run already: close did not run again",
        )
    ],
    "job_tenants": [
        (
            "job",
            {"tenants": ["acme", "beta"], "slot": "2026-03-02T09:00:00+00:00"},
            "Started the job for tenants acme, beta from the slot Mon 2 Mar 09:00",
        )
    ],
    "job_parked": [
        (
            "job",
            {"slot": "2026-03-02T09:00:00+00:00"},
            "The job is paused: the slot Mon 2 Mar 09:00 waits until it is resumed",
        )
    ],
    "job_paused": [("job", {"by": "olga"}, "olga paused the job")],
    "job_resumed": [("job", {"by": "olga"}, "olga resumed the job")],
    "timer_fired": [
        (None, {**TIMER, "attempt": 1}, "warn_at passed (Tue 3 Mar 09:00): ran warn sla"),
        (
            None,
            {**TIMER, "attempt": 3},
            "warn_at passed (Tue 3 Mar 09:00): ran warn sla (attempt 3)",
        ),
        (
            None,
            {**TIMER, "already": True},
            "warn_at passed (Tue 3 Mar 09:00): warn sla had run for it already",
        ),
    ],
    "timer_moved": [
        (
            None,
            {**TIMER, "holds": "2026-03-04T09:00:00+00:00"},
            "warn_at no longer holds Tue 3 Mar 09:00 (it holds Wed 4 Mar 09:00): nothing to run",
        ),
        (
            None,
            {**TIMER, "holds": None},
            "warn_at no longer holds Tue 3 Mar 09:00 (it is empty): nothing to run",
        ),
    ],
    "timer_unmatched": [
        (
            None,
            {**TIMER, "when": "status = open"},
            "warn_at passed (Tue 3 Mar 09:00) but status is not open: warn sla did not run",
        )
    ],
    "timer_gone": [
        (
            None,
            {**TIMER, "resource": "tickets"},
            "warn_at passed (Tue 3 Mar 09:00) but the tickets record is gone: warn sla did not run",
        )
    ],
    "turn_waited": [
        (
            "send",
            {"limit": "kind 'send'", "ahead": 2, "again_at": "2026-03-02T09:10:00+00:00"},
            "Waiting its turn of kind 'send' (2 runs ahead); trying again at Mon 2 Mar 09:10 "
            "or when a turn frees",
        ),
        ("send", {"limit": "job 'mail'", "ahead": 0}, "Waiting its turn of job 'mail'"),
    ],
}

# A code workflow's steps (flowrunner.workflows): one line per finished step.
T = "2026-03-03T09:00:00+00:00"
SENTENCES["workflow_step"] = [
    ("run", {"name": "assess", "target": "assess_late_fees"}, "Ran assess late fees (assess)"),
    (
        "run",
        {"name": "assess", "target": "assess_late_fees", "refused": "period closed"},
        "Assess late fees refused (assess): period closed",
    ),
    (
        "call",
        {"name": "request-check", "target": "credit", "request": "POST /checks"},
        "Called credit: POST /checks (request-check)",
    ),
    (
        "call",
        {"name": "request-check", "target": "credit", "refused": "POST /checks answered 422"},
        "Credit refused the call (request-check): POST /checks answered 422",
    ),
    (
        "wait_for",
        {"name": "result", "target": "credit.reported", "arrived": True, "at": T},
        "The credit reported event arrived (result)",
    ),
    (
        "wait_for",
        {"name": "result", "target": "credit.reported", "arrived": False, "at": T},
        "No credit reported event came by Tue 3 Mar 09:00 (result)",
    ),
    ("sleep", {"name": "grace", "at": T}, "Slept until Tue 3 Mar 09:00 (grace)"),
    ("until", {"name": "grace", "at": T}, "Waited until Tue 3 Mar 09:00 (grace)"),
    ("now", {"name": "checked", "at": T}, "Took the time: Tue 3 Mar 09:00 (checked)"),
    (
        "child",
        {"name": "credit", "target": "credit_check", "run": 12},
        "Credit check (run 12) done (credit)",
    ),
    (
        "child",
        {"name": "credit", "target": "credit_check", "run": 12, "refused": "child run 12 failed"},
        "Credit check failed (credit): child run 12 failed",
    ),
]
SENTENCES["workflow_waiting"] = [
    (
        "wait_for",
        {"name": "credit-result", "target": "credit.reported", "until": "2026-03-04T09:00:00Z"},
        "Waiting for the credit reported event until Wed 4 Mar 09:00 (credit-result)",
    ),
    ("sleep", {"name": "grace", "until": T}, "Sleeping until Tue 3 Mar 09:00 (grace)"),
    (
        "child",
        {"name": "credit", "target": "credit_check", "run": 12},
        "Started credit check as run 12; waiting for it to end (credit)",
    ),
]
# A code workflow's children and forks.
SENTENCES["started_as_child"] = [
    (
        None,
        {"workflow": "credit_check", "run": 7, "step": "credit"},
        "Started by run 7 at its step 'credit'",
    ),
]
SENTENCES["cancelled_with_parent"] = [
    (
        None,
        {"parent": 7, "reason": "cancelled by olga: withdrawn"},
        "Cancelled with its parent, run 7 (cancelled by olga: withdrawn)",
    ),
]
SENTENCES["forked"] = [
    (
        None,
        {"by": "olga", "step": "charge", "forked_as": 9, "reason": "card added"},
        "olga forked the run from 'charge' as run 9: card added",
    ),
]
SENTENCES["forked_from"] = [
    (
        None,
        {"by": "olga", "step": "charge", "run": 5, "kept": 2, "reason": "card added"},
        "Forked by olga from run 5 at 'charge' (2 steps before it kept as recorded): card added",
    ),
    (
        None,
        {"by": "olga", "step": "reserve", "run": 5, "kept": 0},
        "Forked by olga from run 5 at 'reserve' (0 steps before it kept as recorded)",
    ),
]
SENTENCES["diverged"] = [
    (
        None,
        {
            "message": "step 2 asked for run 'assess' (command assess_fees), but this run "
            "recorded sleep 'grace' there at version 1"
        },
        "Diverged: step 2 asked for run 'assess' (command assess_fees), but this run recorded "
        "sleep 'grace' there at version 1",
    )
]

CASES = [(code, *case) for code, cases in SENTENCES.items() for case in cases]
# The steps of the cases by their kinds, as the flow titles them (a line names its step).
TITLES = {"send": "Send to supplier", "approval": "Manager approval", "branch": "Rejected?"}


def titled(code: str, detail: object, kind: str | None) -> Line:
    """The line of a case, about the step of its kind (its title, at position 10)."""
    return Line(code, detail, kind, 10, TITLES.get(kind or ""))


@pytest.mark.parametrize(("code", "kind", "detail", "expected"), CASES)
def test_each_line_reads_as_a_sentence(
    code: str, kind: str | None, detail: dict[str, Any], expected: str
) -> None:
    assert flows.sentence(titled(code, detail, kind), SNAP) == expected


def test_every_code_has_its_sentences_here() -> None:
    assert set(SENTENCES) == flows.CODES


def test_the_engine_guide_shows_each_code_with_a_sentence_it_really_writes() -> None:
    guide = (PACKAGE.parent / "docs" / "engine.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| (.+?) \|$", guide, re.M))
    rows.pop("what")  # the table's heading
    assert set(rows) == flows.CODES
    for code, sentence in rows.items():
        assert sentence in [expected for _, _, expected in SENTENCES[code]], code


TitledLine = Line


def test_a_fault_path_names_the_step_that_failed_by_its_title() -> None:
    detail = {"code": "command.refused", "failure": "on hold", "attempts": 1, "on_failure": 60}
    line = TitledLine("failed", detail, "send", 80, title="Send to supplier")
    assert flows.sentence(line, SNAP) == (
        "Send to supplier failed (on hold) — went on at Tell the requester"
    )
    tried = TitledLine("escalated", {"audience": "manager", "recipient": "mia"}, "approval")
    assert flows.sentence(tried, tried=True) == "Would escalate to mia (manager)"


def codes_written(path: Path) -> set[str]:
    """The history codes a module writes: the first argument of ``log``/``line``/``LogLine``,
    ``what=``, ``finish``'s fourth argument, and texts assigned to ``what``."""
    found: set[str] = set()
    tree = pyast.parse(path.read_text(encoding="utf-8"))

    def text(node: pyast.expr | None) -> None:
        if isinstance(node, pyast.Constant) and isinstance(node.value, str):
            found.add(node.value)

    for node in pyast.walk(tree):
        if isinstance(node, pyast.Call):
            name = node.func.attr if isinstance(node.func, pyast.Attribute) else None
            name = name or (node.func.id if isinstance(node.func, pyast.Name) else None)
            if name in ("log", "line", "LogLine") and node.args:
                text(node.args[0])
            if name == "finish" and len(node.args) > 3:
                text(node.args[3])
            for keyword in node.keywords:
                if keyword.arg == "what":
                    text(keyword.value)
        elif isinstance(node, pyast.Assign):
            for target in node.targets:
                if isinstance(target, pyast.Name) and target.id == "what":
                    text(node.value)
        elif isinstance(node, pyast.arguments):
            names = [a.arg for a in node.args[-len(node.defaults) :]] if node.defaults else []
            for arg, default in zip(names, node.defaults, strict=True):
                if arg == "what":
                    text(default)
    return found


WRITERS = [
    *sorted((PACKAGE / "flows" / "interpreter").glob("*.py")),
    PACKAGE / "engine" / "actions.py",
    PACKAGE / "engine" / "worker.py",
    PACKAGE / "jobs" / "program.py",
    PACKAGE / "flows" / "scheduled.py",
    PACKAGE / "jobs" / "runs.py",
    PACKAGE / "jobs" / "steps.py",
    PACKAGE / "workflows" / "program.py",
    PACKAGE / "workflows" / "children.py",
    PACKAGE / "workflows" / "actions.py",
    PACKAGE / "timers" / "program.py",
    PACKAGE / "store" / "flow_versions.py",
]
# Codes a sentence is ready for that this tree does not write yet, each with its reason.
NOT_WRITTEN_HERE: dict[str, str] = {}


def test_every_code_the_engine_writes_has_a_sentence() -> None:
    written = set().union(*(codes_written(path) for path in WRITERS))
    assert written, "the scan found no history codes: it no longer reads the writers"
    assert written <= flows.CODES, f"codes without a sentence: {written - flows.CODES}"
    assert flows.CODES - written <= set(NOT_WRITTEN_HERE)


@pytest.mark.parametrize(("code", "kind", "detail", "expected"), CASES)
def test_no_sentence_shows_its_code(
    code: str, kind: str | None, detail: dict[str, Any], expected: str
) -> None:
    said = flows.sentence(titled(code, detail, kind), SNAP)
    assert "_" not in code or code not in said
    assert said != flows.sentence(titled(code, "", kind), SNAP) or said in (
        "Started Manager approval",
        "Finished the set step",
        "Done",
    ), "a line with its details reads like one without"


# -- older lines and odd details --------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "detail", "expected"),
    [
        ("notice", "requester", "Told the requester"),
        ("cancelled", "cancelled by olga: merged", "Cancelled by olga: merged"),
        ("retried", "by olga", "Retried by olga"),
        ("restarted", "restarted as run 9 by olga", "Restarted as run 9 by olga"),
        ("done", "complete", "Done"),
        ("failed", "the snapshot no longer loads", "Failed: the snapshot no longer loads"),
        ("answered", "ann answered (1 of 3)", "Answered: ann answered (1 of 3)"),
        ("reminder_failed", "reminder 1: mail down", "A reminder failed: reminder 1: mail down"),
        ("timed_out", "", "Gave up"),
        ("something_new", "it happened", "Something new: it happened"),
        ("waiting", None, "Waiting"),
        ("answered", ["not", "a", "mapping"], "Answered: ['not', 'a', 'mapping']"),
    ],
)
def test_older_text_details_still_read(code: str, detail: object, expected: str) -> None:
    assert flows.sentence(Line(code, detail)) == expected


def test_missing_fields_never_break_a_sentence() -> None:
    for code in flows.CODES:
        for kind in (None, "approval", "wait", "until", "waitFor", "branch", "notify"):
            said = flows.sentence(Line(code, {}, kind, 1))
            assert said and "\n" not in said and "None" not in said, (code, kind, said)


def test_times_are_shown_on_the_bindings_wall_clock() -> None:
    line = Line("waiting", {"until": "2026-03-29T08:00:00+00:00", "duration": "1 day"}, "wait")
    assert flows.sentence(line) == "Waiting 1 day, until Sun 29 Mar 08:00"
    berlin = ZoneInfo("Europe/Berlin")  # summer time starts that night: UTC+2
    assert flows.sentence(line, tz=berlin) == "Waiting 1 day, until Sun 29 Mar 10:00"
    assert flows.when(datetime(2026, 3, 28, 8, tzinfo=UTC), berlin) == "Sat 28 Mar 09:00"
    assert flows.when(datetime(2026, 12, 31, 23, 30)) == "Thu 31 Dec 23:30"  # naive: UTC


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ([], ""),
        (["ann"], "ann"),
        (["ann", "bob"], "ann and bob"),
        (["a", "b", "c", "d", "e", "f"], "a, b, c, d, e and f"),
        (["a", "b", "c", "d", "e", "f", "g", "h"], "a, b, c, d, e and 3 more"),
    ],
)
def test_names_are_listed_as_people_write_them(names: list[str], expected: str) -> None:
    assert flows.listed(names) == expected


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (101, "101st"),
        (111, "111th"),
    ],
)
def test_reminders_are_counted_in_ordinals(number: int, expected: str) -> None:
    assert flows.ordinal(number) == expected


# -- conditions in words ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "held", "otherwise"),
    [
        ("status = rejected", "status is rejected", "status is not rejected"),
        ("status != resolved", "status is not resolved", "status is resolved"),
        ("amount > 10000", "amount is more than 10,000", "amount is at most 10,000"),
        ("amount <= 5", "amount is at most 5", "amount is more than 5"),
        ("status in (a, b, c)", "status is a, b or c", "status is none of a, b, c"),
        ("status not in (a)", "status is not a", "status is a"),
        ("approver is null", "approver is empty", "approver is not empty"),
        ("title contains urgent", "title contains urgent", "title does not contain urgent"),
        (
            "title starts with 'RE: '",
            "title starts with 'RE: '",
            "title does not start with 'RE: '",
        ),
        ("not (status = open)", "status is not open", "status is open"),
        (
            "status = open and (priority = high or amount > 5)",
            "status is open and (priority is high or amount is more than 5)",
            "status is not open or priority is not high and amount is at most 5",
        ),
        (
            "due_at < now() - 2 days",
            "due_at is before 2 days ago",
            "due_at is on or after 2 days ago",
        ),
        (
            "event.decision = rejected",
            "the decision is rejected",
            "the decision is not rejected",
        ),
        ("flag = true", "flag is true", "flag is not true"),
        (
            "this is ( not a condition",
            "this is ( not a condition",
            "not (this is ( not a condition)",
        ),
    ],
)
def test_a_condition_reads_in_words_either_way(condition: str, held: str, otherwise: str) -> None:
    assert flows.condition_words(condition) == held
    assert flows.condition_words(condition, negated=True) == otherwise


def test_a_text_ending_in_a_newline_keeps_its_quotes_and_stays_one_line() -> None:
    # Found by the property below: a word followed by a newline once read as a bare word.
    assert flows.condition_words("status = '0\n'") == "status is '0\\n'"


@given(conditions)
def test_any_condition_reads_as_one_line_either_way(node: ast.Node) -> None:
    text = str(node)
    held = flows.condition_words(text)
    otherwise = flows.condition_words(text, negated=True)
    for words in (held, otherwise):
        assert words and "\n" not in words and not words.startswith("not (")
    # Saying "not" of a condition reads as the condition said the other way.
    assert flows.condition_words(str(ast.Not(node)), negated=True) == held
    assert flows.condition_words(str(ast.Not(node))) == otherwise


SEND = "Send to supplier"


@pytest.mark.parametrize(
    ("line", "ran", "tried"),
    [
        (
            Line("command", {"command": "send_purchase_order", "attempt": 1}, "send", 2, SEND),
            "Sent to supplier",
            "Would send to supplier",
        ),
        (
            Line("command", {"command": "send_purchase_order", "attempt": 2}, "send", 2, SEND),
            "Sent to supplier again (2nd attempt)",
            "Would send to supplier again (2nd attempt)",
        ),
        (
            Line(
                "command",
                {"command": "request_approval", "asks": True},
                "approval",
                1,
                "Manager approval",
            ),
            "Asked for Manager approval",
            "Would ask for Manager approval",
        ),
        (
            Line("command", {"command": "check_credit"}, "check", 1, "Credit check"),
            "Ran Credit check",
            "Would run Credit check",
        ),
        (
            Line("notice", {"audience": "requester", "recipient": "ann", "message": "Sent."}),
            "Told ann (requester): Sent.",
            "Would tell ann (requester): Sent.",
        ),
        (
            Line("reminded", {"reminder": 2, "to": ["bob"]}, kind="approval"),
            "Reminded bob (2nd reminder)",
            "Would remind bob (2nd reminder)",
        ),
        (
            Line("cancel", {"why": "the wait gave up", "command": "close"}, "approval"),
            "Stopped waiting (the wait gave up): withdrawing the approval requests",
            "Stopped waiting (the wait gave up): would withdraw the approval requests",
        ),
        (
            Line("cancel_done", {"command": "close"}, "approval"),
            "Withdrew the approval requests",
            "Would withdraw the approval requests",
        ),
        (Line("set", {"field": "status", "value": "sent"}), "Set status to sent", None),
    ],
)
def test_in_a_try_what_would_leave_the_system_reads_would(
    line: Line, ran: str, tried: str | None
) -> None:
    assert flows.sentence(line) == ran
    # A try runs no command and sends no notice; the rest reads the same.
    assert flows.sentence(line, tried=True) == (tried or ran)
