"""An inbound that cannot work is refused when it is declared or mounted, in one sentence."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
import sqlalchemy as sa
from paying import PAYMENT_SETTLED, SECRET, SECRET_ENV, VERIFY, mount

from flowrunner import BindingError, Inbound
from flowrunner.inbound.endpoints import read


def key(body: Any) -> Any:
    return body["id"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "payment settled"}, "must be letters, digits"),
        ({"name": "../admin"}, "must be letters, digits"),
        ({"verify": "PAYMENT_CALLBACK_SECRET"}, "verify is an Hmac"),
        ({"run_as": " "}, "run_as names the principal"),
        ({"key": "id"}, "key is a function of the body"),
        ({"input": {"order": 1}}, "input is a function of the body"),
        ({"command": None, "emit": None}, "runs a command, emits an event, or both"),
        ({"emit": None, "payload": key}, "payload needs emit"),
        ({"command": None, "emit": "order.paid", "input": key}, "input needs command"),
    ],
)
def test_a_declaration_that_cannot_work(options: dict[str, Any], message: str) -> None:
    given = {
        "name": "payment_settled",
        "verify": VERIFY,
        "run_as": "payment-processor",
        "key": key,
        "command": "settle_payment",
        **options,
    }
    with pytest.raises(BindingError) as refused:
        Inbound(**given)
    assert message in str(refused.value)


@pytest.mark.parametrize(
    ("inbound", "message"),
    [
        (
            dataclasses.replace(PAYMENT_SETTLED, command="settle"),
            "inbound 'payment_settled' runs command 'settle', but the runner was given no "
            "command of that name (commands: settle_payment)",
        ),
        (
            dataclasses.replace(PAYMENT_SETTLED, run_as="automation"),
            "principal 'automation' is not allowed to run command 'settle_payment', which "
            "inbound 'payment_settled' needs",
        ),
        (
            dataclasses.replace(PAYMENT_SETTLED, emit="order.refunded"),
            "inbound 'payment_settled' emits 'order.refunded', which is not one of the "
            "binding's events (events: order.paid)",
        ),
        (
            dataclasses.replace(PAYMENT_SETTLED, tenant=key),
            "inbound 'payment_settled' names a tenant, but shop_order records have none",
        ),
    ],
)
def test_an_inbound_that_does_not_fit_the_runner(
    sqlite_engine: sa.Engine, inbound: Inbound, message: str
) -> None:
    with pytest.raises(BindingError) as refused:
        mount(sqlite_engine, inbound=[inbound])
    assert str(refused.value) == message


def test_two_inbounds_of_one_name(sqlite_engine: sa.Engine) -> None:
    with pytest.raises(BindingError, match="inbound 'payment_settled' is declared twice"):
        mount(sqlite_engine, inbound=[PAYMENT_SETTLED, PAYMENT_SETTLED])


def test_a_secret_not_set_stops_serving_at_startup_and_a_runner_for_other_work_mounts(
    sqlite_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    with caplog.at_level(logging.WARNING, logger="flowrunner.inbound"):
        runner = mount(sqlite_engine)  # ``flowrunner runs list`` loads the same runner
    assert not caplog.records
    with pytest.raises(BindingError) as refused:
        runner.inbound_app()
    assert str(refused.value) == (
        "inbound payment_settled: the environment variable PAYMENT_CALLBACK_SECRET is not "
        "set: set it in the server's environment"
    )
    assert SECRET not in str(refused.value)
    monkeypatch.setenv(SECRET_ENV, SECRET)
    runner.inbound_app()


def test_the_body_is_read_only_through_the_inbound_s_functions() -> None:
    delivery = read(PAYMENT_SETTLED, b'{"id": 41, "order": 7, "amount": "9.50", "x": 1}')
    assert delivery.key == "41"  # a number is taken as its text
    assert delivery.inputs == {"order": 7, "amount": "9.50"}
    assert delivery.event == {"order": 7, "amount": "9.50"}
    assert delivery.fingerprint.startswith("sha256:")


def test_a_payload_of_none_emits_nothing() -> None:
    only_settled = dataclasses.replace(
        PAYMENT_SETTLED,
        payload=lambda body: {"order": body["order"]} if body["status"] == "settled" else None,
    )
    failed = read(only_settled, b'{"id": "e", "order": 7, "amount": "1", "status": "failed"}')
    assert failed.event is None
