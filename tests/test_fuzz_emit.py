"""``emit`` under random payloads: each call is stored or refused with ``EventRejected``
(never a driver error, ``RecursionError`` or ``TypeError``), and the caller's
transaction goes on after a refusal — on PostgreSQL too, where an error the engine let
reach the server would abort it. On SQLite and PostgreSQL. What each call does is
checked, never how fast: a loaded machine may take its time.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from running import app, mount

from flowrunner import EventRejected, testing
from flowrunner.store import operations as ops

PO = app("purchase_orders")

# Each example is a few round trips on a real database: bounded in CI (and by default),
# the long profile's count when asked for.
_PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
EXAMPLES = (
    _PROFILE.max_examples
    if os.environ.get("HYPOTHESIS_PROFILE") in ("long", "thorough")
    else min(_PROFILE.max_examples, 300)
)

FLOWS = """
- name: Approve
  start: created
  steps:
    - {position: 1, kind: approval, title: Approval, approver: "a, b, c", mode: all}
"""

# Ways to name order 1, most of them wrong.
KEYS = st.one_of(
    st.sampled_from([1, "1", 2, "2"]),
    st.sampled_from(["01", " 1", "1 ", "+1", "1_0", "١", "１", "1.0", "", "-0", "1\x00", "\ud800"]),
    st.integers(),
    st.sampled_from([2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**40]),
    st.booleans(),
    st.floats(),
    st.none(),
    st.text(max_size=4),
    st.binary(max_size=2),
    st.lists(st.integers(0, 3), max_size=2),
    st.decimals(),
)
# Names of fields: text mostly, but anything hashable a Python caller might send.
NAMES = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["\x00", "a\x00", "\ud800", "order", "approver"]),
    st.integers(),
    st.none(),
    st.booleans(),
    st.floats(),
    st.tuples(st.integers(0, 2)),
)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**30, 10**400]),
    st.floats(),  # NaN and the infinities included
    st.text(max_size=8),
    st.sampled_from(["\x00", "a\x00b", "\ud800", "x\udfff", "\n", "'; DROP TABLE po; --"]),
    st.datetimes(timezones=st.sampled_from([None, UTC])),
    st.dates(),
    st.decimals(),
    st.uuids(),
    st.binary(max_size=4),
    st.frozensets(st.integers(0, 3), max_size=2),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(NAMES, inner, max_size=3)
    ),
    max_leaves=12,
)


def nested(depth: int) -> dict[str, Any]:
    inner: dict[str, Any] = {"order": 1}
    for _ in range(depth - 1):
        inner = {"order": 1, "x": inner}
    return inner


def with_order(order: Any, extra: dict[Any, Any]) -> dict[Any, Any]:
    return {**extra, "order": order}


PAYLOADS = st.one_of(
    st.builds(with_order, KEYS, st.dictionaries(NAMES, VALUES, max_size=4)),
    st.builds(lambda extra: {**extra, "order": 1}, st.dictionaries(NAMES, VALUES, max_size=4)),
    st.dictionaries(NAMES, VALUES, max_size=3),  # mostly without the record's field
    st.integers(28, 40).map(nested),
    st.one_of(st.none(), st.text(max_size=3), st.lists(st.integers(), max_size=2)),
)
EVENT_NAMES = st.one_of(
    st.just("po.decided"),
    st.just("po.decided"),
    st.sampled_from(["po.unknown", "", "PO.DECIDED", "po.decided\x00"]),
    st.none(),
    st.integers(),
)


def _reminders(conn: sa.Connection) -> int:
    table = PO.approval_reminder
    return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def test_emit_stores_or_refuses_and_the_transaction_goes_on(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=FLOWS)
    driver.create({"id": 1, "number": "PO-1", "requester_id": "ann", "amount": 500}, run=False)
    outcomes = {"stored": 0, "refused": 0}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,  # a few round trips on a database: as long as the machine needs
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(name=EVENT_NAMES, payload=PAYLOADS)
    def emit_once(name: Any, payload: Any) -> None:
        outcomes[_emit_in_a_transaction(driver, name, payload)] += 1

    emit_once()
    assert outcomes["refused"] > 0
    if EXAMPLES >= 50:
        assert outcomes["stored"] > 0, outcomes


def _emit_in_a_transaction(driver: testing.FlowDriver, name: Any, payload: Any) -> str:
    """Emit inside the application's transaction, then use that transaction and commit it."""
    engine = driver.runner.engine
    with engine.connect() as conn:
        with conn.begin():
            before = _reminders(conn)
            try:
                driver.runner.emit(conn, name, payload)
                outcome = "stored"
            except EventRejected as refused:
                message = str(refused)
                assert message and "\n" not in message and len(message) < 400, message
                outcome = "refused"
            # The application's transaction goes on: a read and a real write, then commit.
            assert conn.execute(sa.select(sa.literal(1))).scalar_one() == 1
            conn.execute(
                sa.insert(PO.approval_reminder).values(order_id=1, run_id=0, reminder=before + 1)
            )
        assert _reminders(conn) == before + 1
        conn.commit()
    return outcome


def test_a_naive_datetime_is_stored_as_utc(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=FLOWS)
    driver.create({"id": 1, "number": "PO-1", "requester_id": "ann", "amount": 500}, run=False)
    driver.emit("po.decided", {"order": "1", "at": datetime(2026, 1, 2, 3, 4)}, run=False)
    with any_engine.connect() as conn:
        [event] = ops.events_after(conn, resource="purchase_order", record_id="1")
    assert event.payload == {"order": "1", "at": "2026-01-02T03:04:00Z"}
