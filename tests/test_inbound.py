"""Signed callbacks over HTTP, as a payment processor sends them to a shop: applied once
in one transaction, refused with a status alone, answering a flow that waits for the
payment; on SQLite and on PostgreSQL, through the ASGI app mounted in a Starlette app."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from paying import SECRET, SECRET_ENV, SIGNATURE, TIMESTAMP, Shop, body, payment, signed

from flowrunner import CommandContext, CommandRefused, RunStatus

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NOTHING = {"payments": 0, "paid": 0, "events": 0, "receipts": 0}
REFUSED = {**NOTHING, "receipts": 1}  # a refusal: its receipt, which keeps it, and nothing else


@pytest.fixture
def shop(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> Shop:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    shop = Shop(engine, START)
    shop.order(7)
    return shop


def test_a_settled_payment_answers_the_order_waiting_for_it(shop: Shop) -> None:
    [run] = shop.driver.runs(7)
    assert run.status == RunStatus.WAITING and run.waiting is not None

    assert shop.post(body("evt_1", 7)) == 204

    # The command's write, the order marked paid, the event and the receipt: together.
    assert shop.counts() == {"payments": 1, "paid": 1, "events": 1, "receipts": 1}
    with shop.engine.connect() as conn:
        row = conn.execute(sa.select(payment)).mappings().one()
    assert row["principal"] == "payment-processor"
    assert row["receipt"] == "inbound:shop_order:payment_settled:evt_1"
    # The worker runs: the waiting step has its answer and the run goes on to the end.
    shop.driver.run_until_idle()
    assert shop.driver.runs(7)[0].status == RunStatus.DONE
    assert shop.status(7) == "shipping"


def test_the_same_bytes_sent_again_replay_the_one_write(shop: Shop) -> None:
    content = body("evt_2", 7)
    assert shop.post(content) == 204
    shop.driver.advance("1 minute")
    # A retry: the same body, signed again a minute later.
    assert shop.post(content) == 204
    assert shop.post(content) == 204
    assert shop.counts() == {"payments": 1, "paid": 1, "events": 1, "receipts": 1}


def test_the_same_key_with_another_body_is_refused_and_writes_nothing(shop: Shop) -> None:
    assert shop.post(body("evt_3", 7, "120.00")) == 204
    before = shop.counts()

    assert shop.post(body("evt_3", 7, "999.00")) == 409

    assert shop.counts() == before
    with shop.engine.connect() as conn:
        amounts = conn.execute(sa.select(payment.c.amount)).scalars().all()
    assert [str(a) for a in amounts] == ["120.00"]


@pytest.mark.parametrize(
    ("signed_ago", "status"),
    [
        (timedelta(minutes=5), 204),  # as old as the window allows
        (timedelta(minutes=5, seconds=1), 401),  # a second older
        (-timedelta(minutes=5), 204),  # from a sender's clock five minutes ahead
        (-timedelta(minutes=5, seconds=1), 401),  # a second further ahead
    ],
    ids=["5-min-old", "5-min-1-s-old", "5-min-ahead", "5-min-1-s-ahead"],
)
def test_a_callback_signed_at_the_window_edges(
    shop: Shop, signed_ago: timedelta, status: int
) -> None:
    assert shop.post(body("evt_4", 7), at=shop.driver.now - signed_ago) == status
    assert shop.counts()["receipts"] == (1 if status == 204 else 0)


def test_a_callback_signed_with_another_secret_is_refused(shop: Shop) -> None:
    assert shop.post(body("evt_5", 7), secret="not-the-secret") == 401
    assert shop.counts() == NOTHING


def test_a_body_changed_on_the_way_is_refused(shop: Shop) -> None:
    headers = signed(body("evt_6", 7, "1.00"), shop.driver.now)
    assert shop.post(body("evt_6", 7, "1000.00"), headers=headers) == 401
    assert shop.counts() == NOTHING


@pytest.mark.parametrize("left_out", [SIGNATURE, TIMESTAMP])
def test_a_callback_without_its_signature_or_time_is_refused(shop: Shop, left_out: str) -> None:
    content = body("evt_7", 7)
    headers = {k: v for k, v in signed(content, shop.driver.now).items() if k != left_out}
    assert shop.post(content, headers=headers) == 401
    assert shop.counts() == NOTHING


def test_without_the_secret_variable_every_callback_is_refused_in_one_log_line(
    shop: Shop, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    content = body("evt_8", 7)
    headers = signed(content, shop.driver.now)
    monkeypatch.delenv(SECRET_ENV)
    with caplog.at_level(logging.INFO, logger="flowrunner.inbound"):
        assert shop.post(content, headers=headers) == 401
    [line] = [r.getMessage() for r in caplog.records if r.name == "flowrunner.inbound"]
    assert line == (
        "inbound payment_settled: refused a callback (401): the environment variable "
        "PAYMENT_CALLBACK_SECRET is not set"
    )
    assert shop.counts() == NOTHING
    # Read at each request: once it is set, the sender's retry goes through.
    monkeypatch.setenv(SECRET_ENV, SECRET)
    assert shop.post(content, headers=headers) == 204


def test_what_is_logged_never_holds_the_secret_the_signature_or_the_body(
    shop: Shop, caplog: pytest.LogCaptureFixture
) -> None:
    content = body("evt_9", 7, note="card 4111 1111 1111 1111")
    headers = signed(content, shop.driver.now)
    with caplog.at_level(logging.DEBUG):
        assert shop.post(content, headers=headers) == 204
        assert shop.post(content, headers=headers, secret="x") == 204  # headers as given
        assert shop.post(body("evt_9", 7, "3.00"), headers=headers) == 401
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "inbound payment_settled" in logged
    for private in (SECRET, headers[SIGNATURE], "4111", '"amount"'):
        assert private not in logged


def test_an_unknown_inbound_is_404_and_another_method_405(shop: Shop) -> None:
    content = body("evt_10", 7)
    assert shop.post(content, name="payment_refunded") == 404
    assert shop.client.get("/api/inbound/payment_settled").status_code == 405
    assert shop.client.get("/api/inbound/payment_settled").headers["allow"] == "POST"
    assert shop.client.post("/api/inbound/", content=content).status_code == 404
    assert shop.client.post("/api/inbound/payment_settled/x", content=content).status_code == 404
    assert shop.counts() == NOTHING


def test_a_body_past_256_kb_is_413_and_one_at_the_limit_is_read(shop: Shop) -> None:
    small = body("evt_11", 7)
    at_limit = small[:-1] + b" " * (256 * 1024 - len(small)) + b"}"
    assert len(at_limit) == 256 * 1024
    assert shop.post(at_limit + b" ") == 413
    assert shop.counts() == NOTHING
    assert shop.post(at_limit) == 204


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b'{"id": "evt_12", "order": 7',  # cut short
        b'{"id": "evt_12", "order": 7, "amount": NaN}',
        '{"id": "evt_12", "order": 7, "amount": "1"}'.encode("utf-16"),
        b'{"order": 7, "amount": "1.00"}',  # key(body) fails: no id
        b'{"id": {"nested": 1}, "order": 7, "amount": "1.00"}',  # an id that is no id
        b'{"id": "evt_12", "amount": "1.00"}',  # input(body) fails: no order
        b'["evt_12", 7]',
        b'{"id": "evt_12", "order": 404, "amount": "1.00"}',  # the event names no order
        b'{"id": "evt_12", "order": "seven", "amount": "1.00"}',
    ],
    ids=[
        "text",
        "cut",
        "nan",
        "utf16",
        "no-key",
        "bad-key",
        "no-input",
        "list",
        "no-record",
        "bad-record",
    ],
)
def test_a_signed_body_that_cannot_be_used_is_400_and_writes_nothing(
    shop: Shop, content: bytes
) -> None:
    assert shop.post(content) == 400
    assert shop.counts() == NOTHING


def test_a_command_that_refuses_is_409_and_keeps_only_its_receipt(shop: Shop) -> None:
    assert shop.post(body("evt_13", 7, "0.00")) == 409
    assert shop.counts() == REFUSED
    assert shop.driver.runs(7)[0].status == RunStatus.WAITING


def test_a_failing_command_is_503_and_the_sender_s_retry_is_applied(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    ledger_up = False

    def settle_payment(ctx: CommandContext) -> None:
        ctx.conn.execute(
            sa.insert(payment).values(
                order_id=7, amount=1, receipt=ctx.idempotency_key, principal=ctx.principal
            )
        )
        if not ledger_up:
            raise ConnectionError("the ledger service did not answer")

    shop = Shop(engine, START, commands={"settle_payment": settle_payment})
    shop.order(7)
    content = body("evt_14", 7)
    assert shop.post(content) == 503
    assert shop.counts() == NOTHING  # its insert rolled back with the rest
    ledger_up = True
    assert shop.post(content) == 204
    assert shop.counts() == {"payments": 1, "paid": 0, "events": 1, "receipts": 1}


def test_a_principal_no_longer_granted_the_command_is_refused(shop: Shop) -> None:
    from paying import GRANTS

    GRANTS["payment-processor"].discard("settle_payment")
    try:
        assert shop.post(body("evt_15", 7)) == 409
    finally:
        GRANTS["payment-processor"].add("settle_payment")
    assert shop.counts() == REFUSED
    # A refusal is for good: the same delivery sent again is answered from its receipt.
    assert shop.post(body("evt_15", 7)) == 409
    assert shop.counts() == REFUSED


def test_runner_receive_serves_any_web_framework(shop: Shop) -> None:
    content = body("evt_16", 7)
    received = shop.runner.receive("payment_settled", signed(content, shop.driver.now), content)
    assert (received.status, received.reason) == (204, "delivery 'evt_16' applied (event 1)")
    again = shop.runner.receive("payment_settled", signed(content, shop.driver.now), content)
    assert (again.status, again.reason) == (204, "delivery 'evt_16' replayed: the same body again")


def test_a_refused_callback_is_said_in_a_sentence_the_sender_never_sees(shop: Shop) -> None:
    content = body("evt_17", 7)
    headers = signed(content, shop.driver.now - timedelta(hours=1))
    received = shop.runner.receive("payment_settled", headers, content)
    assert (received.status, received.reason) == (
        401,
        "the timestamp is further than 5 minutes from now",
    )


def test_a_command_s_context_names_the_inbound(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    seen: list[CommandContext] = []

    def settle_payment(ctx: CommandContext) -> dict[str, str]:
        seen.append(ctx)
        return {"ok": "yes"}

    shop = Shop(engine, START, commands={"settle_payment": settle_payment})
    shop.order(7)
    assert shop.post(body("evt_18", 7, "5.00")) == 204
    [ctx] = seen
    assert ctx.inbound == "payment_settled"
    assert ctx.principal == "payment-processor"
    assert ctx.inputs == {"order": 7, "amount": "5.00"}
    assert ctx.idempotency_key == "inbound:shop_order:payment_settled:evt_18"
    assert ctx.now == shop.driver.now and ctx.record == {} and ctx.tenant is None


def test_a_command_refusing_raises_nothing_at_the_server(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)

    def settle_payment(ctx: CommandContext) -> None:
        raise CommandRefused("the order was cancelled")

    shop = Shop(engine, START, commands={"settle_payment": settle_payment})
    shop.order(7)
    assert shop.post(body("evt_19", 7)) == 409
    assert shop.counts() == REFUSED


def test_the_same_bytes_sent_at_once_by_several_senders_are_applied_once(shop: Shop) -> None:
    content = body("evt_20", 7)
    headers = signed(content, shop.driver.now)
    together = threading.Barrier(6)
    answers: list[int] = []

    def deliver() -> None:
        together.wait(timeout=30)
        answers.append(shop.runner.receive("payment_settled", headers, content).status)

    senders = [threading.Thread(target=deliver) for _ in range(6)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(timeout=60)
    assert answers == [204] * 6
    assert shop.counts() == {"payments": 1, "paid": 1, "events": 1, "receipts": 1}


def test_a_fault_of_flowrunner_s_own_is_500_in_one_line_never_raised(
    shop: Shop, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="flowrunner.inbound"):
        received = shop.runner.receive("payment_settled", {}, "text, not bytes")  # type: ignore[arg-type]
    assert received.status == 500
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("inbound payment_settled: the callback could not be handled: TypeError")
    assert shop.counts() == NOTHING
