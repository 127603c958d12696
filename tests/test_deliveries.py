"""What each signed callback was answered, as an operator reads it afterwards: the
payment processor's receipts and the refusals (forged, unknown, replayed with another
body), with the sender's key, the answer and the time; a flood of refusals folding into
a row a minute; pruned with the rest of the history. On SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from paying import SECRET, SECRET_ENV, Shop, body

from flowrunner.store import engine_tables

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def shop(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> Shop:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    shop = Shop(engine, START)
    shop.order(7)
    shop.order(8)
    return shop


def test_a_receipt_and_a_forged_callback_are_listed_newest_first(shop: Shop) -> None:
    assert shop.post(body("evt_1", 7)) == 204
    shop.driver.advance("2 minutes")
    assert shop.post(body("evt_2", 8), secret="not-the-secret") == 401

    forged, receipt = shop.runner.operations.deliveries()
    assert (receipt.endpoint, receipt.key, receipt.status, receipt.accepted) == (
        "payment_settled",
        "evt_1",
        204,
        True,
    )
    assert receipt.reason.startswith("delivery 'evt_1' applied (event ")
    assert receipt.event_id is not None and receipt.at == START and receipt.count == 1
    # Refused before its body was read: no key, and the reason the processor would need.
    assert (forged.endpoint, forged.key, forged.status, forged.accepted) == (
        "payment_settled",
        None,
        401,
        False,
    )
    assert forged.reason == "the signature does not match"
    assert forged.at == START + timedelta(minutes=2)


def test_no_body_header_or_secret_is_kept(shop: Shop) -> None:
    content = body("evt_9", 7, card="4111111111111111", note="call me at secret-door")
    assert shop.post(content, secret="wrong") == 401
    assert shop.post(content) == 204
    with shop.engine.connect() as conn:
        rows = conn.execute(sa.select(engine_tables.callbacks)).mappings().all()
    kept = repr([dict(row) for row in rows])
    for never in (SECRET, "wrong", "4111111111111111", "secret-door", "x-processor"):
        assert never not in kept


def test_a_flood_of_forged_callbacks_adds_one_row_a_minute(shop: Shop) -> None:
    for _ in range(60):
        assert shop.post(body("evt_x", 7), secret="guess") == 401
    for name in ("admin", "wp-login.php", "payment_settled2", "x" * 90):
        assert shop.post(body("evt_x", 7), name=name) == 404
    shop.driver.advance("1 minute")
    assert shop.post(body("evt_x", 7), secret="guess") == 401

    later, unknown, flood = shop.runner.operations.deliveries()
    assert (flood.status, flood.count, flood.at, flood.last_at) == (401, 60, START, START)
    # A stranger's path is not kept: every unknown name is one row.
    assert (unknown.endpoint, unknown.status, unknown.count) == (None, 404, 4)
    assert unknown.reason == "there is no inbound of that name"
    assert (later.status, later.count, later.at) == (401, 1, START + timedelta(minutes=1))


def test_a_replay_and_another_body_under_the_same_key_are_said(shop: Shop) -> None:
    assert shop.post(body("evt_3", 7, "120.00")) == 204
    assert shop.post(body("evt_3", 7, "120.00")) == 204
    assert shop.post(body("evt_3", 7, "999.00")) == 409

    other, replay, first = shop.runner.operations.deliveries()
    assert [row.key for row in (other, replay, first)] == ["evt_3"] * 3
    assert first.event_id is not None and replay.event_id is None
    assert replay.reason == "delivery 'evt_3' replayed: the same body again"
    assert (other.status, other.reason) == (
        409,
        "delivery 'evt_3' was received before with another body",
    )


def test_refusals_receipts_one_endpoint_and_pages(shop: Shop) -> None:
    for number in range(5):
        assert shop.post(body(f"evt_{number}", 7)) == 204
    assert shop.post(b"{", secret="nope") == 401
    assert shop.post(b"not json") == 400
    operations = shop.runner.operations

    refused = operations.deliveries(refused=True)
    assert [row.status for row in refused] == [400, 401]
    assert refused.rows[0].reason == "the body is not JSON (JSONDecodeError)"
    assert [row.key for row in operations.deliveries(refused=False)] == [
        f"evt_{n}" for n in (4, 3, 2, 1, 0)
    ]
    assert len(operations.deliveries(endpoint="payment_settled")) == 7

    first = operations.deliveries(refused=False, limit=2)
    assert [row.key for row in first] == ["evt_4", "evt_3"]
    second = operations.deliveries(refused=False, limit=2, before_id=first.next_before)
    assert [row.key for row in second] == ["evt_2", "evt_1"]

    assert operations.deliveries(endpoint="refund").rows == ()
    assert operations.delivery_endpoints() == ["payment_settled"]


def test_a_prune_deletes_the_answers_older_than_its_cutoff(shop: Shop) -> None:
    assert shop.post(body("evt_old", 7)) == 204
    assert shop.post(b"{}", secret="nope") == 401
    shop.driver.advance("100 days")
    assert shop.post(body("evt_new", 8)) == 204

    pruned = shop.runner.operations.prune(older_than="90d", dry_run=True)
    assert pruned.callbacks == 2
    assert len(shop.runner.operations.deliveries()) == 3
    assert shop.runner.operations.prune(older_than="90d").callbacks == 2
    assert [row.key for row in shop.runner.operations.deliveries()] == ["evt_new"]
