"""The Operations room acts over a whole filter: runs failed because the gateway was down (130,
two batches; 300 in a long run and in the browser test) are one line of the failures grouped
by error, and "Retry all 130…" asks "Retry 130 runs?" before retrying each of them once,
journaled under the reader's name — posted twice, it retries none again. Another error's
runs and another tenant's are untouched; a run that moved on meanwhile is listed with its
sentence. The runs list's bulk menu chooses nothing until the reader does. On SQLite and
PostgreSQL."""

from __future__ import annotations

import html
import re

import gateway
import pytest
import sqlalchemy as sa
from console import console, refusal, text
from sizes import sized

from flowrunner import testing
from flowrunner.web.console import Principal

DOWN = sized(130, 300)  # more than one batch (bulk.BATCH, 100)
AMY = Principal("amy", tenant="acme", roles=frozenset({"operator"}))
RITA = Principal("rita", tenant="acme")


@pytest.fixture
def shop(any_engine: sa.Engine) -> testing.FlowDriver:
    return gateway.shop(any_engine, down=DOWN)


def groups(page: str) -> list[str]:
    return [
        text(m) for m in re.findall(r'<tr data-group="\d+" data-count="\d+">(.*?)</tr>', page, re.S)
    ]


def hidden(page: str) -> dict[str, str]:
    found = re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page)
    return {name: html.unescape(value) for name, value in found}


def test_retry_all_runs_of_one_error_in_one_confirmed_action(shop: testing.FlowDriver) -> None:
    ui = console(shop, AMY)
    room = ui.get("/ops").text
    assert groups(room) == [  # each error in the flow's words, its step by title
        f"{DOWN} failed Sync failed: the command refused: "
        f"the gateway refused: timeout Retry all {DOWN}…",
        "2 failed Sync failed: the command refused: the ledger is full Retry all 2…",
    ]
    error = f"step 'Sync' (sync, position 1) failed: the command refused: {gateway.DOWN}"
    asked = ui.post("/ops/act-all", {"action": "retry", "status": "failed", "error": error})
    assert asked.status_code == 200
    heading = re.search(r"<h1>(.*?)</h1>", asked.text)
    assert heading is not None and heading.group(1) == f"Retry {DOWN} runs?"
    confirm = hidden(asked.text)
    assert (confirm["count"], confirm["highest"]) == (str(DOWN), str(DOWN))
    assert shop.runner.journal(tenant="acme").rows == ()  # nothing done before the confirm
    done = ui.post("/ops/act-all", confirm)
    assert done.status_code == 200
    heading = re.search(r"<h1>(.*?)</h1>", done.text)
    assert heading is not None and heading.group(1) == f"Retry: {DOWN} done, 0 refused"
    again = ui.post("/ops/act-all", confirm)  # the confirmation posted twice
    heading = re.search(r"<h1>(.*?)</h1>", again.text)
    assert heading is not None
    assert heading.group(1) == f"Retry: 0 done, 0 refused, {DOWN} no longer matched"
    entries = shop.runner.journal(tenant="acme", limit=500).rows
    assert sorted(e.run_id or 0 for e in entries) == list(range(1, DOWN + 1))
    assert {(e.operator, e.action) for e in entries} == {("amy", "retry")}
    shop.run_until_idle()
    counts = shop.runner.count_runs(tenant="acme")
    assert (counts["done"], counts["failed"]) == (DOWN, 2)
    assert shop.runner.count_runs(tenant="globex")["failed"] == 3
    assert groups(ui.get("/ops").text) == [
        "2 failed Sync failed: the command refused: the ledger is full Retry all 2…"
    ]


def test_a_run_that_moved_on_meanwhile_is_listed_with_its_sentence(
    shop: testing.FlowDriver,
) -> None:
    ui = console(shop, AMY)
    asked = ui.post("/ops/act-all", {"action": "retry", "status": "failed", "error": "gateway"})
    new = shop.runner.restart(5, operator="ann", tenant="acme")
    done = ui.post("/ops/act-all", hidden(asked.text))
    refused = re.findall(r'<li data-run="(\d+)" class="refused">(.*?)</li>', done.text, re.S)
    assert [(run, text(said)) for run, said in refused] == [
        ("5", f"run 5 was restarted as run {new}; that run goes on")
    ]
    assert f"Retry: {DOWN - 1} done, 1 refused" in done.text


def test_what_cannot_be_done_is_refused_and_the_menus_choose_nothing(
    shop: testing.FlowDriver,
) -> None:
    ui = console(shop, AMY)
    room = ui.get("/ops", status="failed").text
    for menu in ("many-action", "all-action"):
        select = re.search(rf'<select id="{menu}" name="action" required>(.*?)</select>', room)
        assert select is not None, menu
        assert select.group(1).startswith('<option value="" selected>Choose an action…</option>')
    assert f"With all {DOWN + 2} runs this filter matches" in text(room)
    nothing = ui.post("/ops/act-all", {"status": "failed"})
    assert nothing.status_code == 422
    assert refusal(nothing.text) == "choose an action: cancel, retry, redrive, restart"
    none = ui.post("/ops/act-all", {"action": "retry", "error": "no such error"})
    assert none.status_code == 409
    assert "No run matches this filter: there is nothing to retry." in text(none.text)
    broken = ui.post("/ops/act-all", {"action": "retry", "status": "failled"})
    assert broken.status_code == 422 and "did you mean 'failed'?" in text(broken.text)
    forged = ui.post("/ops/act-all", {"action": "retry", "confirmed": "yes", "count": "3"})
    assert forged.status_code == 422
    assert "count the runs again" in text(forged.text)
    # Without the page's token, nothing is done.
    ui.token = "forged"
    assert ui.post("/ops/act-all", {"action": "retry"}).status_code == 403
    # A reader who may not retry is refused, and is shown no group's button.
    reader = console(shop, RITA)
    assert groups(reader.get("/ops").text) == []
    assert reader.post("/ops/act-all", {"action": "retry"}).status_code == 403
    assert shop.runner.journal(tenant="acme").rows == ()
