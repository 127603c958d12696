"""What web payloads carry — Decimal, date, datetime, UUID, enums, pydantic models — is
welcome in events and in commands' answers, kept as the JSON FastAPI would answer with
(``flowrunner.foundations.payloads``), and read back by conditions; what cannot be stored is refused
with a sentence, an event with the HTTP status that fits. On SQLite and PostgreSQL."""

from __future__ import annotations

import enum
import math
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pydantic
import pytest
import sqlalchemy as sa
from running import mount, order, stored

from flowrunner import EventRejected
from flowrunner.engine import commands
from flowrunner.store import engine_tables
from flowrunner.store import operations as ops


class Decision(enum.StrEnum):
    APPROVED = "approved"
    REJECTED = "rejected"


class Verdict(enum.Enum):
    """A plain enum: its value is what is kept, not ``Verdict.NO``."""

    NO = "no"


class DecisionBody(pydantic.BaseModel):
    """What the purchasing app's decision endpoint receives."""

    order: int
    approver: str
    decision: Decision
    counter_offer: Decimal | None = None
    deliver_by: date | None = None
    decided_at: datetime
    request: uuid.UUID


REQUEST = uuid.UUID("3f6c1a52-8b1e-4d7a-9f3e-2b5c7d9e1a4b")

# Three approvers must all approve; one rejection — or a counter-offer over 20000 — ends
# the wait at once.
APPROVE = """
- name: Approve
  start: created
  steps:
    - position: 1
      kind: approval
      title: Approvals
      approver: mia, bob, cy
      mode: all
      condition: event.decision = rejected or event.counter_offer > 20000
    - {position: 2, kind: set, title: Decided, field: status, value: decided}
"""


def events(engine: sa.Engine, record: str) -> list[ops.EventRow]:
    with engine.connect() as conn:
        return ops.events_after(conn, resource="purchase_order", record_id=record)


def decision(**fields: Any) -> dict[str, Any]:
    body = DecisionBody(
        order=1,
        approver="mia",
        decided_at=datetime(2026, 3, 2, 10, 15),
        request=REQUEST,
        **fields,
    )
    return body.model_dump()  # Python values: Decimal, date, datetime, UUID, the enum


def test_a_decision_model_dumped_as_it_came_is_emitted_kept_as_json_and_read_by_conditions(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders", flows=APPROVE)
    driver.create(order(1))
    [run] = driver.runs(1)
    driver.emit(
        "po.decided",
        decision(
            decision=Decision.APPROVED,
            counter_offer=Decimal("1250.50"),
            deliver_by=date(2026, 4, 1),
        ),
    )
    assert stored(driver, 1)["status"] == "open", "bob and cy have not answered; 1250.50 is small"
    [event] = events(any_engine, "1")
    assert event.payload == {
        "order": 1,
        "approver": "mia",
        "decision": "approved",
        "counter_offer": "1250.50",
        "deliver_by": "2026-04-01",
        "decided_at": "2026-03-02T10:15:00Z",
        "request": str(REQUEST),
    }
    # The counter-offer, kept as its text with every digit, is still a number to a condition.
    driver.emit(
        "po.decided",
        decision(decision=Decision.APPROVED, counter_offer=Decimal("25000.00"))
        | {"approver": "bob"},
    )
    assert stored(driver, 1)["status"] == "decided", "cy has not answered, but the offer is big"
    assert driver.runs(1)[0].id == run.id


def test_an_enum_decision_ends_the_wait_as_its_value_would(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=APPROVE)
    driver.create(order(1))
    driver.emit("po.decided", decision(decision=Decision.REJECTED))
    assert stored(driver, 1)["status"] == "decided", "one rejection ends the wait"
    assert events(any_engine, "1")[0].payload["decision"] == "rejected"
    driver.create(order(2))
    driver.emit("po.decided", {"order": 2, "approver": "mia", "decision": Verdict.NO})
    assert events(any_engine, "2")[0].payload["decision"] == "no"


@pytest.mark.parametrize(
    ("name", "payload", "status", "code", "sentence"),
    [
        ("po.decidd", {"order": 1}, 404, "event_unknown", "there is no event 'po.decidd'"),
        ("po.decided", {"order": 99}, 404, "record_unknown", "names purchase_order 99"),
        ("po.decided", {"order": 1, "counter_offer": Decimal("NaN")}, 422, "event_rejected",
         "field 'counter_offer' is NaN, which cannot be stored"),
        ("po.decided", {"order": 1, "scan": b"%PDF"}, 422, "event_rejected",
         "field 'scan' is of type bytes"),
        ("po.decided", {"order": "007"}, 422, "event_rejected", "cannot be a purchase_order key"),
        ("po.decided", {"approver": "mia"}, 422, "event_rejected", "must name its purchase_order"),
    ],
)  # fmt: skip
def test_an_event_refused_says_why_with_the_status_that_fits(
    any_engine: sa.Engine, name: str, payload: dict[str, Any], status: int, code: str, sentence: str
) -> None:
    driver = mount(any_engine, "purchase_orders", flows=APPROVE)
    driver.create(order(1))
    with pytest.raises(EventRejected, match=sentence) as refused:
        driver.emit(name, payload)
    assert (refused.value.status_code, refused.value.code) == (status, code)
    assert refused.value.to_dict() == {"detail": str(refused.value), "code": code}
    assert events(any_engine, "1") == []


SEND = """
- name: Send
  start: created
  steps:
    - {position: 1, kind: send, title: Send to supplier}
"""


def test_a_command_may_answer_with_web_values_and_they_are_kept_as_json(
    any_engine: sa.Engine,
) -> None:
    def send(ctx: commands.CommandContext) -> dict[str, Any]:
        assert isinstance(ctx.record["amount"], Decimal)  # the record's own values, as read
        return {
            "total": ctx.record["amount"],
            "ships_on": date(2026, 3, 9),
            "confirmation": REQUEST,
            "verdict": Verdict.NO,
            "at": datetime(2026, 3, 2, 9, 0, tzinfo=UTC),
        }

    driver = mount(
        any_engine, "purchase_orders", flows=SEND, commands={"send_purchase_order": send}
    )
    driver.create(order(1))
    [run] = driver.runs(1)
    assert run.status == "done"
    ledger = engine_tables.idempotency
    with any_engine.connect() as conn:
        [kept] = conn.execute(
            sa.select(ledger.c.result).where(ledger.c.key.startswith(f"run-{run.id}/"))
        ).scalars()
    assert kept == {
        "total": "25000.00",
        "ships_on": "2026-03-09",
        "confirmation": str(REQUEST),
        "verdict": "no",
        "at": "2026-03-02T09:00:00Z",
    }


def test_a_command_answering_what_cannot_be_stored_fails_its_step_with_a_sentence(
    any_engine: sa.Engine,
) -> None:
    attempts: list[int] = []

    def send(ctx: commands.CommandContext) -> dict[str, Any]:
        attempts.append(ctx.attempt)
        return {"total": math.nan}

    driver = mount(
        any_engine, "purchase_orders", flows=SEND, commands={"send_purchase_order": send}
    )
    driver.create(order(1))
    driver.advance("1 day")
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert "command 'send_purchase_order' answered what cannot be stored" in str(run.reason)
    assert "field 'total' is NaN" in str(run.reason)
    assert attempts == [1], "the same answer would come again: it is not retried"
    assert stored(driver, 1)["status"] == "open"
