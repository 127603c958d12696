"""The inbound endpoints as an ASGI application: mounted in FastAPI and in the console,
served by a real uvicorn on 127.0.0.1, and spoken to in ASGI messages where a client
would not send what is tested (a Content-Length past the limit, a body that never ends)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, MutableMapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from paying import SECRET, SECRET_ENV, Shop, body, counts, mount, signed

from flowrunner import FlowRunner
from flowrunner.runner import utc_now

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def shop(sqlite_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> Shop:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    shop = Shop(sqlite_engine, START)
    shop.order(7)
    return shop


# -- in ASGI messages --------------------------------------------------------------------


class Exchange:
    """One request to the app in ASGI messages: what it was sent, how much it read."""

    def __init__(
        self, chunks: Iterator[bytes], headers: list[tuple[bytes, bytes]], *, whole: bool = True
    ) -> None:
        self.chunks = chunks
        self.headers = headers
        self.whole = whole  # False: the sender leaves after its last chunk
        self.reads = 0
        self.sent: list[dict[str, Any]] = []
        self._next = next(chunks, None)

    async def receive(self) -> dict[str, Any]:
        self.reads += 1
        chunk, self._next = self._next, next(self.chunks, None)
        if chunk is None:
            return {"type": "http.disconnect"}
        more = self._next is not None or not self.whole
        return {"type": "http.request", "body": chunk, "more_body": more}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(dict(message))

    def run(self, runner: FlowRunner, path: str = "/payment_settled", **scope: Any) -> int | None:
        full = {
            "type": "http",
            "method": "POST",
            "path": path,
            "root_path": "",
            "headers": self.headers,
            **scope,
        }
        asyncio.run(runner.inbound_app()(full, self.receive, self.send))
        if not self.sent:
            return None
        assert self.sent[-1] == {"type": "http.response.body", "body": b""}
        status: int = self.sent[0]["status"]
        return status


def endless() -> Iterator[bytes]:
    while True:
        yield b" " * 65536


def test_a_content_length_past_the_limit_is_refused_before_a_byte_is_read(
    shop: Shop, caplog: pytest.LogCaptureFixture
) -> None:
    exchange = Exchange(endless(), [(b"content-length", b"262145")])
    with caplog.at_level(logging.INFO, logger="flowrunner.inbound"):
        assert exchange.run(shop.runner) == 413
    assert exchange.reads == 0
    assert [r.getMessage() for r in caplog.records] == [
        "inbound payment_settled: refused a callback (413): its Content-Length is past 256 KB"
    ]


def test_a_body_without_a_length_is_read_no_further_than_the_limit(shop: Shop) -> None:
    exchange = Exchange(endless(), [(b"transfer-encoding", b"chunked")])
    assert exchange.run(shop.runner) == 413
    assert exchange.reads == 5  # 4 × 64 KB is the limit; the fifth chunk is past it
    assert shop.counts()["receipts"] == 0


@pytest.mark.parametrize("length", [b"12x", b"-1", b"", "\u00b2".encode("latin-1")])
def test_a_content_length_that_is_no_number_is_400(shop: Shop, length: bytes) -> None:
    assert Exchange(endless(), [(b"content-length", length)]).run(shop.runner) == 400


def test_a_sender_that_leaves_mid_body_gets_no_answer_and_nothing_is_done(shop: Shop) -> None:
    content = body("evt_1", 7)
    headers = [(k.encode(), v.encode()) for k, v in signed(content, shop.driver.now).items()]
    exchange = Exchange(iter([content[:10]]), headers, whole=False)
    assert exchange.run(shop.runner) is None
    assert shop.counts()["receipts"] == 0


def test_the_path_is_read_under_a_root_path_or_without_it(shop: Shop) -> None:
    content = body("evt_2", 7)
    headers = [(k.encode(), v.encode()) for k, v in signed(content, shop.driver.now).items()]
    whole = Exchange(iter([content]), headers)
    assert whole.run(shop.runner, "/hooks/payment_settled", root_path="/hooks") == 204
    again = Exchange(iter([content]), headers)  # a server that took the root path off
    assert again.run(shop.runner, "/payment_settled", root_path="/hooks") == 204
    assert Exchange(iter([content]), headers).run(shop.runner, "/hookspayment_settled") == 404


def test_it_answers_a_server_s_lifespan_when_served_alone(shop: Shop) -> None:
    said: list[str] = []
    asked = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive() -> dict[str, Any]:
        return next(asked)

    async def send(message: MutableMapping[str, Any]) -> None:
        said.append(message["type"])

    asyncio.run(shop.runner.inbound_app()({"type": "lifespan"}, receive, send))
    assert said == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


# -- mounted ---------------------------------------------------------------------------------


def test_mounted_in_a_fastapi_app(shop: Shop) -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    app = FastAPI()
    app.mount("/api/inbound", shop.runner.inbound_app())
    client = TestClient(app)
    content = body("evt_3", 7)
    answer = client.post(
        "/api/inbound/payment_settled", content=content, headers=signed(content, shop.driver.now)
    )
    assert (answer.status_code, answer.content) == (204, b"")
    assert client.post("/api/inbound/payment_settled", content=content).status_code == 401


def test_the_console_serves_the_callbacks_before_sign_in(shop: Shop) -> None:
    from starlette.testclient import TestClient

    console = TestClient(shop.runner.console(token="operator-token"))
    assert console.get("/").status_code == 401  # the pages need the operator's token
    content = body("evt_4", 7)
    headers = signed(content, shop.driver.now)
    answer = console.post("/inbound/payment_settled", content=content, headers=headers)
    assert (answer.status_code, answer.content) == (204, b"")
    assert console.post("/inbound/payment_refunded", content=content).status_code == 404
    assert shop.counts()["receipts"] == 1


# -- served by uvicorn -----------------------------------------------------------------------


def test_served_alone_by_uvicorn_on_127_0_0_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("uvicorn")
    from paying import post, served

    monkeypatch.setenv(SECRET_ENV, SECRET)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    runner = mount(engine)  # the wall clock: the sender signs at the real now
    with served(runner.inbound_app()) as base:
        url = f"{base}/payment_settled"
        with engine.begin() as conn:
            runner.record_created(conn, _order(conn, runner))
        content = body("evt_5", 7)
        headers = signed(content, utc_now())
        assert post(url, content, headers) == 204
        assert post(url, content, headers) == 204  # replayed
        assert (
            post(url, body("evt_5", 7, "1.00"), signed(body("evt_5", 7, "1.00"), utc_now())) == 409
        )
        assert post(url, b"x" * (256 * 1024 + 1), headers) == 413
        assert post(url, content, {**headers, "x-processor-signature": "00"}) == 401
        assert post(f"{base}/nothing", content, headers) == 404
    assert counts(engine) == {"payments": 1, "paid": 1, "events": 1, "receipts": 1}
    engine.dispose()


def _order(conn: sa.Connection, runner: FlowRunner) -> dict[str, Any]:
    from decimal import Decimal

    from paying import shop_order

    conn.execute(sa.insert(shop_order).values(id=7, number="PO-7", amount=Decimal("120.00")))
    return {"id": 7, "number": "PO-7", "amount": Decimal("120.00"), "status": "open"}
