"""The words a business user reads in a run's history: the flow's own, never an engineer's.

Every sentence the history can say (each code the engine writes, with the examples of
``test_history_text.SENTENCES``) is read for what a business user should never meet: a
command's name, query syntax, a digest, a code. docs/history.md shows them all, and the
purchase-order approval reads whole, as its requester's manager would read it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from query_strategies import conditions
from running import decide, mount
from test_history_text import CASES, PACKAGE, SENTENCES, SNAP, WRITERS, codes_written, titled

from flowrunner.history import flows
from flowrunner.query import ast, words

GUIDE = PACKAGE.parent / "docs" / "history.md"

# What only engineers write: comparison operators, a field of the latest event, a call.
QUERY_SYNTAX = re.compile(r"!=|>=|<=|[=<>]|\bevent\.|\w\(\)")
# A run of hex digits as digests show (``c185408a``): letters and digits mixed, 7 or more.
DIGEST = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,}\b")
ALL_CODES = frozenset(flows.CODES)
# A schedule's cron fields (``0 6 * * 1-5``, ``*/15 * * * *``): a star among fields.
CRON = re.compile(r"(?:^|\s)\*(?:/\d+)?(?=\s|$)")


def engineers_words(code: str, detail: dict[str, Any], said: str) -> list[str]:
    """What in ``said`` only an engineer would write, each as a short complaint."""
    found = []
    for key in ("command", "code"):
        name = detail.get(key)
        # A name written for programs (``send_purchase_order``); ``close`` is a word too.
        if isinstance(name, str) and re.search(r"[_.]", name) and name in said:
            found.append(f"the {key} {name!r}")
    for key in ("event", "target"):
        name = detail.get(key)
        # An event as programs name it (``po.decided``): a sentence says it in words.
        if isinstance(name, str) and "." in name and name in said:
            found.append(f"the event name {name!r}")
    if CRON.search(said):
        found.append(f"cron fields {CRON.search(said)}")
    if QUERY_SYNTAX.search(said):
        found.append(f"query syntax {QUERY_SYNTAX.search(said)}")
    if DIGEST.search(said):
        found.append(f"a digest {DIGEST.search(said)}")
    found += [f"the code {c!r}" for c in ALL_CODES if "_" in c and c in said]
    return found


def test_every_code_the_engine_writes_has_examples_to_read() -> None:
    written = set().union(*(codes_written(path) for path in WRITERS))
    assert written and written <= set(SENTENCES), written - set(SENTENCES)


@pytest.mark.parametrize(("code", "kind", "detail", "expected"), CASES)
def test_no_sentence_says_what_only_an_engineer_writes(
    code: str, kind: str | None, detail: dict[str, Any], expected: str
) -> None:
    said = flows.sentence(titled(code, detail, kind), SNAP)
    tried = flows.sentence(titled(code, detail, kind), SNAP, tried=True)
    assert engineers_words(code, detail, said) == []
    assert engineers_words(code, detail, tried) == []


def test_the_check_finds_what_it_looks_for() -> None:
    detail = {"command": "send_purchase_order", "code": "command.refused"}
    assert len(engineers_words("command", detail, "Ran send_purchase_order")) == 1
    assert engineers_words("failed", detail, "failed: command.refused") == [
        "the code 'command.refused'"
    ]
    assert engineers_words("x", {}, "Stopped waiting: event.decision = rejected")
    assert engineers_words("x", {}, "Moved to version (c185408a)")
    assert engineers_words("x", {}, "Sent: timer_fired")
    assert engineers_words("x", {}, "Scheduled 0 6 * * 1-5 (UTC)")
    assert engineers_words("x", {}, "Scheduled */15 * * * * (UTC)")
    assert engineers_words("x", {"event": "po.decided"}, "po.decided arrived (1 of 2)")
    assert engineers_words("x", {"event": "po.decided"}, "The po decided event arrived") == []
    assert engineers_words("x", {}, "Sent to supplier on Mon 2 Mar 09:00 (PO-1001)") == []


@pytest.mark.parametrize(
    ("count", "said"),
    [(1, "failed once"), (2, "failed twice"), (3, "failed 3 times"), (1200, "failed 1,200 times")],
)
def test_a_count_reads_in_grammar(count: int, said: str) -> None:
    detail = {"code": "command.failed", "failure": "gateway down", "attempts": count}
    line = titled("failed", detail, "send")
    assert flows.sentence(line) == f"Send to supplier {said}: gateway down"


# -- the guide's table ----------------------------------------------------------------------


def test_the_guide_shows_every_sentence_the_history_can_say() -> None:
    rows = re.findall(r"^\| `([a-z_]+)` \| (.+?) \|$", GUIDE.read_text(encoding="utf-8"), re.M)
    shown: dict[str, list[str]] = {}
    for code, sentence in rows:
        shown.setdefault(code, []).append(sentence.replace("\\|", "|"))
    assert set(shown) == ALL_CODES
    for code, cases in SENTENCES.items():
        assert shown[code] == [expected for _, _, expected in cases], code


# -- a condition in words -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "said"),
    [
        ("status = rejected", "status is rejected"),
        ("amount > 10000", "amount is more than 10,000"),
        ("amount >= 10000.50", "amount is at least 10,000.50"),
        ("event.decision = rejected", "the decision is rejected"),
        ("event.cost_centre is null", "the cost centre is empty"),
        ("due_at < now() - 2 days", "due_at is before 2 days ago"),
        ("due <= today() + 1 day", "due is on or before 1 day after today"),
        ("due > 2026-03-01", "due is after 2026-03-01"),
    ],
)
def test_a_condition_reads_as_english(condition: str, said: str) -> None:
    assert words.describe(condition) == said


def test_a_column_reads_as_the_label_the_binding_gives_it() -> None:
    labels = {"amount": "the amount", "requester_id": "the requester"}
    said = words.describe("amount > 10000 and requester_id is null", labels=labels)
    assert said == "the amount is more than 10,000 and the requester is empty"


@given(conditions)
def test_any_condition_reads_without_operator_syntax(node: ast.Node) -> None:
    for negated in (False, True):
        # Constants shown as a word: what is left is the phrase's own words.
        said = words.phrase(node, negated=negated, value=lambda _: "x")
        said = re.sub(r"'(?:[^']|'')*'", "x", said)  # quoted text is the record's, not syntax
        assert said and "\n" not in said
        assert not QUERY_SYNTAX.search(said), said


# -- the purchase-order approval, whole -----------------------------------------------------


def order(order_id: int) -> dict[str, Any]:
    number = f"PO-{1000 + order_id}"
    return {"id": order_id, "number": number, "requester_id": "ann", "amount": 25000}


def test_a_rejected_purchase_order_reads_as_its_approvers_would_tell_it(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders")
    driver.create(order(1))
    driver.advance("1 day")  # a day without answers: each approver is reminded once
    decide(driver, 1, "manager@example.com")
    decide(driver, 1, "controller@example.com", "rejected")
    [run] = driver.runs(1)
    said = [line.sentence for line in driver.history(run.id)]
    assert said == [
        "Started Manager approval",
        "Asked for Manager approval",
        "Started Finance approval",
        "Asked for Finance approval",
        "Asked manager@example.com for approval (must answer by Mon 9 Mar 09:00)",
        "Asked cfo@example.com and controller@example.com for approval "
        "(both must answer by Mon 9 Mar 09:00)",
        "Reminded manager@example.com (1st reminder)",
        "Reminded cfo@example.com and controller@example.com (1st reminder)",
        "manager@example.com approved (1 of 1)",
        "Got the answers it needed (1 of 1)",
        "manager@example.com approved but was not asked: not counted",
        "controller@example.com rejected (1 of 2; waiting for cfo@example.com)",
        "Stopped waiting: controller@example.com rejected it",
        "Withdrawing the Finance approval requests",
        "Started Undecided after a week?",
        "Status is not open: went on at Rejected?",
        "Finished Undecided after a week?",
        "Started Rejected?",
        "Went on: status is rejected",
        "Finished Rejected?",
        "Started Tell the requester it was rejected",
        "Told ann (requester): Your order was rejected.",
        "Finished Tell the requester it was rejected",
        "Started Approved?",
        "Status is not approved: ended here",
        "Finished Approved?",
        "Run done: status is not approved, so the run ended at Approved?",
        "Withdrew the Finance approval requests",
    ]
    assert run.status == "done" and "fail" not in (run.reason or "")
