"""The Operations room's Deliveries page, as an operator reads the payment processor's
callbacks: received and refused, newest first, a page at a time, filtered to the refused
ones or to one endpoint; beside the notices outbox. Over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from console import Session, as_, refusal, rows, text
from paying import SECRET, SECRET_ENV, Shop, body

from flowrunner.web.console import Principal

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
OLGA = Principal("olga", roles=frozenset({"operator"}))


@pytest.fixture
def shop(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> Shop:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    shop = Shop(engine, START)
    shop.order(7)
    return shop


def session(shop: Shop) -> Session:
    return Session(shop.runner.console(principal=as_(OLGA)))


def cells(page: str, callback: str) -> dict[str, str]:
    """The row's cells as a person reads them, by their labels."""
    row = page.split(f'<tr data-callback="{callback}"', 1)[1].split("</tr>", 1)[0]
    return {
        label: text(cell)
        for label, cell in re.findall(r'<td data-label="([^"]+)">(.*?)</td>', row, re.S)
    }


def test_the_receipts_and_refusals_newest_first(shop: Shop) -> None:
    assert shop.post(body("evt_1", 7)) == 204
    shop.driver.advance("3 minutes")
    for _ in range(3):
        assert shop.post(body("evt_2", 7), secret="guessed") == 401
    assert shop.post(body("evt_3", 7), name="refund") == 404

    page = session(shop).get("/ops/deliveries")
    assert page.status_code == 200
    unknown, forged, received = rows(page.text, "callback")
    assert cells(page.text, received) == {
        "When": "Mon 2 Mar 09:00 UTC",
        "Endpoint": "payment_settled",
        "Sender's key": "evt_1",
        "Answer": "204 received",
        "Why": "delivery 'evt_1' applied (event 1)",
        "Event": "1",
    }
    assert cells(page.text, forged) == {
        "When": "Mon 2 Mar 09:03 UTC 3 times, the last Mon 2 Mar 09:03 UTC",
        "Endpoint": "payment_settled",
        "Sender's key": "not read",
        "Answer": "401 refused",
        "Why": "the signature does not match",
        "Event": "",
    }
    assert cells(page.text, unknown)["Endpoint"] == "no such inbound"
    # The tab beside the notices, and each page links to the other.
    assert 'aria-current="page">Deliveries</a>' in page.text
    assert 'href="/ops/notices"' in page.text
    assert 'href="/ops/deliveries"' in session(shop).get("/ops/notices").text


def test_only_the_refused_or_one_endpoint_a_page_at_a_time(shop: Shop) -> None:
    for number in range(30):
        assert shop.post(body(f"evt_{number}", 7)) == 204
    assert shop.post(b"[]", secret="guessed") == 401
    ui = session(shop)

    refused = ui.get("/ops/deliveries", shown="refused")
    assert len(rows(refused.text, "callback")) == 1
    assert 'data-answer="received"' not in refused.text

    first = ui.get("/ops/deliveries", shown="received", endpoint="payment_settled")
    assert len(rows(first.text, "callback")) == 25
    assert '<option value="payment_settled" selected>' in first.text
    older = first.text.split('<p class="pager"><a href="', 1)[1].split('"', 1)[0]
    assert "shown=received" in older and "endpoint=payment_settled" in older
    second = ui.get(older.replace("&amp;", "&"))
    assert len(rows(second.text, "callback")) == 5
    assert "evt_0" in second.text and "evt_29" not in second.text

    assert rows(ui.get("/ops/deliveries", endpoint="refund").text, "callback") == []
    wrong = ui.get("/ops/deliveries", shown="lost")
    assert wrong.status_code == 422
    assert refusal(wrong.text) == "show the callbacks refused or received, not 'lost'"
