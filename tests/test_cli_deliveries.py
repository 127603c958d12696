"""``flowrunner runs deliveries``: the payment processor's callbacks as an operator asks
for them on the command line — all, the refused ones, one endpoint's, as JSON; on SQLite
and on PostgreSQL."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from paying import SECRET, SECRET_ENV, Shop, body

from flowrunner import FlowRunner
from flowrunner.cli import cli

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
APP = "tests.paying:runner"


@pytest.fixture
def url(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The shop paid once for order 7, and sent a forged callback twice."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    # The runners the commands load (as --app names them): their engines closed after.
    app = importlib.import_module(APP.partition(":")[0])
    loaded: list[FlowRunner] = []

    def runner(url: str | None = None) -> FlowRunner:
        loaded.append(app.mount(sa.create_engine(url or "sqlite://")))
        return loaded[-1]

    monkeypatch.setattr(app, "runner", runner)
    engine = sa.create_engine(database_url)
    shop = Shop(engine, START)
    shop.order(7)
    assert shop.post(body("evt_1", 7)) == 204
    shop.driver.advance("5 minutes")
    assert shop.post(body("evt_2", 7), secret="guessed") == 401
    assert shop.post(body("evt_3", 7), secret="guessed") == 401
    engine.dispose()
    yield database_url
    for made in loaded:
        made.engine.dispose()


def deliveries(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        cli, ["runs", "deliveries", "--app", APP, "--database", url, *args]
    )
    return result.exit_code, result.stdout, result.stderr


def test_the_receipts_and_refusals_newest_first(url: str) -> None:
    code, out, err = deliveries(url)
    assert (code, err) == (0, "")
    header, refused, received = out.splitlines()
    assert header.split() == ["at", "endpoint", "key", "answer", "reason", "event", "times"]
    # Two forged callbacks in one minute: one line, counted.
    assert refused.split()[-1] == "2" and "401 refused" in refused
    assert "the signature does not match" in refused
    assert "payment_settled" in received and "evt_1" in received
    assert "204 received" in received and "delivery 'evt_1' applied" in received


def test_only_the_refused_as_json(url: str) -> None:
    code, out, err = deliveries(url, "--refused", "--endpoint", "payment_settled", "--json")
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert document["next_before"] is None
    [refused] = document["deliveries"]
    assert refused["endpoint"] == "payment_settled"
    assert (refused["key"], refused["status"], refused["accepted"]) == (None, 401, False)
    assert (refused["reason"], refused["count"], refused["event"]) == (
        "the signature does not match",
        2,
        None,
    )
    assert datetime.fromisoformat(refused["at"]) == datetime(2026, 3, 2, 9, 5, tzinfo=UTC)


def test_pages_and_an_endpoint_with_nothing(url: str) -> None:
    code, out, _ = deliveries(url, "--limit", "1")
    assert code == 0
    assert out.splitlines()[-1].startswith("more: --before ")
    before = out.splitlines()[-1].split()[-1]
    code, out, _ = deliveries(url, "--before", before, "--json")
    assert [d["key"] for d in json.loads(out)["deliveries"]] == ["evt_1"]
    assert deliveries(url, "--endpoint", "refund")[:2] == (0, "no callbacks\n")
    code, _, err = deliveries(url, "--refused", "--accepted")
    assert code == 2 and "choose --refused or --accepted" in err
