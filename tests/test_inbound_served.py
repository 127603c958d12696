"""What a sender found from outside, over HTTP to the served app (uvicorn on 127.0.0.1),
on SQLite and PostgreSQL:

- a signed body the database could not keep — ``\\u0000`` or a lone surrogate in a value
  or a name at any depth, a number past 64 bits or past a float's range, nesting past
  32 levels, bytes that are not UTF-8 — is a 400 when it is read, every time it is sent,
  and the command never sees it (it was a 503, sent again for ever);
- a refused command is kept with its receipt: the same bytes sent again are answered
  409 from it, and the command does not run again;
- an inbound whose secret variable is unset stops what would serve it at startup, in
  one line naming the variable: ``inbound_app()``, ``flowrunner console``, a worker.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import forked
import pytest
import sqlalchemy as sa
from paying import SECRET, SECRET_ENV, Shop, body, payment, post, served, signed

from flowrunner import BindingError, CommandContext, CommandRefused
from flowrunner.engine import worker

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NOTHING = {"payments": 0, "paid": 0, "events": 0, "receipts": 0}
REFUSED = {**NOTHING, "receipts": 1}

pytest.importorskip("uvicorn")


class Counted:
    """The shop's command, counting its calls; it refuses (409) what ``refuse`` says."""

    def __init__(self) -> None:
        self.calls = 0
        self.refuse: str | None = None
        self.answer: dict[str, Any] = {"settled": True}

    def __call__(self, ctx: CommandContext) -> Mapping[str, Any]:
        self.calls += 1
        ctx.conn.execute(
            sa.insert(payment).values(
                order_id=7, amount=1, receipt=ctx.idempotency_key, principal=ctx.principal
            )
        )
        if self.refuse is not None:
            raise CommandRefused(self.refuse)
        return self.answer


@pytest.fixture
def command() -> Counted:
    return Counted()


@pytest.fixture
def shop(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch, command: Counted) -> Shop:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    shop = Shop(engine, START, commands={"settle_payment": command})
    shop.order(7)
    return shop


@pytest.fixture
def url(shop: Shop) -> Iterator[str]:
    with served(shop.runner.inbound_app()) as base:
        yield f"{base}/payment_settled"


def send(shop: Shop, url: str, content: bytes) -> int:
    return post(url, content, signed(content, shop.driver.now))


def _deep(levels: int, inner: bytes = b'"x"') -> bytes:
    return (
        b'{"id":"evt_d","order":7,"amount":"1.00","x":'
        + b"[" * levels
        + inner
        + b"]" * levels
        + b"}"
    )


UNKEEPABLE = {
    "NUL in a value": rb'{"id":"evt_1","order":7,"amount":"1.00","note":"paid\u0000"}',
    "NUL in a name": rb'{"id":"evt_1","order":7,"amount":"1.00","a\u0000":1}',
    "NUL deep in a list": _deep(10, rb'{"k":"\u0000"}'),
    "a lone surrogate": rb'{"id":"evt_1","order":7,"amount":"1.00","note":"\ud800"}',
    "a lone low surrogate in a name": rb'{"id":"evt_1","order":7,"amount":"1.00","x":{"\udfff":1}}',
    "a surrogate pair's first half": rb'{"id":"evt_1","order":7,"amount":"\ud83d"}',
    "a whole number past 64 bits": b'{"id":"evt_1","order":18446744073709551616,"amount":"1"}',
    "a whole number of 5,000 digits": b'{"id":"evt_1","order":7,"amount":' + b"9" * 5000 + b"}",
    "a number past a float's range": b'{"id":"evt_1","order":7,"amount":"1","x":1e400}',
    "a negative one": b'{"id":"evt_1","order":7,"amount":"1","x":-1e999}',
    "NaN": b'{"id":"evt_1","order":7,"amount":"1","x":NaN}',
    "nesting past 32 levels": _deep(40),
    "nesting past the parser's limit": _deep(100_000),
    "bytes that are not UTF-8": b'{"id":"evt_1","order":7,"amount":"\xff"}',
    "a surrogate written in UTF-8": b'{"id":"evt_1","order":7,"amount":"\xed\xa0\x80"}',
    "a byte-order mark": b'\xef\xbb\xbf{"id":"evt_1","order":7,"amount":"1.00"}',
}


@pytest.mark.parametrize("content", UNKEEPABLE.values(), ids=UNKEEPABLE.keys())
def test_a_body_the_database_could_not_keep_is_400_each_time_and_never_reaches_the_command(
    shop: Shop, url: str, command: Counted, content: bytes
) -> None:
    assert send(shop, url, content) == 400
    assert send(shop, url, content) == 400  # sent again: the same answer, no 503
    assert command.calls == 0
    assert shop.counts() == NOTHING


def test_what_is_said_names_the_field_in_one_sentence(shop: Shop) -> None:
    content = UNKEEPABLE["NUL deep in a list"]
    received = shop.runner.receive("payment_settled", signed(content, shop.driver.now), content)
    assert received.status == 400
    assert received.reason == (
        "the body's field 'x[0][0][0][0][0][0][0][0][0][0].k' contains the character \\x00, "
        "which cannot be stored: send text without it"
    )


def test_a_name_given_twice_counts_once_with_its_last_value(
    shop: Shop, url: str, command: Counted
) -> None:
    content = b'{"id":"evt_a","order":7,"amount":"1.00","id":"evt_b"}'
    assert send(shop, url, content) == 204
    with shop.engine.connect() as conn:
        kept = conn.execute(sa.select(payment.c.receipt)).scalar_one()
    assert kept == "inbound:shop_order:payment_settled:evt_b"
    assert command.calls == 1


def test_a_refusal_is_kept_and_the_same_bytes_sent_again_are_answered_409_without_running(
    shop: Shop, url: str, command: Counted
) -> None:
    command.refuse = "the order was cancelled"
    content = body("evt_r", 7)
    assert send(shop, url, content) == 409
    assert shop.counts() == REFUSED  # the command's insert undone; its receipt kept
    for _ in range(3):
        assert send(shop, url, content) == 409
    assert command.calls == 1
    # The same key with another body: a conflict, as for an applied one; nothing runs.
    assert send(shop, url, body("evt_r", 7, "1.00")) == 409
    assert command.calls == 1
    # Even once the command would take it: a refusal is for good.
    command.refuse = None
    assert send(shop, url, content) == 409
    assert (command.calls, shop.counts()) == (1, REFUSED)
    replayed = shop.runner.receive("payment_settled", signed(content, shop.driver.now), content)
    assert replayed.reason == (
        "delivery 'evt_r' replayed: refused before (command 'settle_payment' refused: the "
        "order was cancelled)"
    )


def test_an_answer_that_cannot_be_kept_is_a_refusal_kept_too(
    shop: Shop, url: str, command: Counted
) -> None:
    command.answer = {"note": "\x00"}
    content = body("evt_n", 7)
    assert send(shop, url, content) == 409
    assert send(shop, url, content) == 409
    assert (command.calls, shop.counts()) == (1, REFUSED)


def test_resent_at_once_a_refusal_runs_the_command_once(
    shop: Shop, url: str, command: Counted
) -> None:
    command.refuse = "no such order"
    content = body("evt_t", 7)
    together = threading.Barrier(5)
    answers: list[int] = []

    def deliver() -> None:
        together.wait(timeout=60)
        answers.append(send(shop, url, content))

    senders = [threading.Thread(target=deliver) for _ in range(5)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(timeout=120)
    assert answers == [409] * 5
    assert (command.calls, shop.counts()) == (1, REFUSED)


# -- the secret's variable, at startup ---------------------------------------------------------

UNSET = (
    "inbound payment_settled: the environment variable PAYMENT_CALLBACK_SECRET is not set: "
    "set it in the server's environment"
)


def test_the_inbound_app_and_a_serving_worker_refuse_to_start_without_the_secret(
    shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_ENV)
    with pytest.raises(BindingError) as refused:
        shop.runner.inbound_app()
    assert str(refused.value) == UNSET
    with pytest.raises(BindingError, match="PAYMENT_CALLBACK_SECRET is not set"):
        shop.runner.console(token="operator-token-of-16")
    stop = threading.Event()
    with pytest.raises(BindingError, match="PAYMENT_CALLBACK_SECRET is not set"):
        worker.Worker(shop.runner).serve(stop, poll=0.01)
    monkeypatch.setenv(SECRET_ENV, "")  # set, but to nothing: no secret either
    with pytest.raises(BindingError, match="PAYMENT_CALLBACK_SECRET is not set"):
        shop.runner.inbound_app()


@pytest.mark.parametrize(
    "command_line", [["console", "--token", "a-token-of-16-chars"], ["worker"]]
)
def test_the_command_line_stops_in_one_line_naming_the_variable(
    database_url: str, command_line: list[str]
) -> None:
    env = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    env["PYTHONPATH"] = str(ROOT)
    args = [*command_line, "--app", "tests.paying:runner", "--database", database_url]
    done = forked.run(
        [sys.executable, "-m", "flowrunner", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (2, f"Error: {UNSET}\n"), done.stderr
