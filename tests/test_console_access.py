"""Who reads the console, and what they may read, edit and do: the application's function
from a request to a principal, or a bearer token; CSRF on every form; the hooks
``can_read``, ``can_edit`` and ``can_operate`` (a step the reader may not read is not in
the HTML at all); the console mounted in a FastAPI app under a path. On SQLite and
PostgreSQL where a database is involved."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from console import (
    BOTH,
    EDITOR,
    OPERATOR,
    READER,
    Session,
    as_,
    console,
    diagram_titles,
    refusal,
    said,
    text,
)
from fastapi import FastAPI
from running import decide, mount, order
from starlette.testclient import TestClient

from flowrunner import BindingError, testing
from flowrunner.engine import operations_room
from flowrunner.store import flow_rows
from flowrunner.web.console import Principal

TOKEN = "a-long-and-secret-token"


@pytest.fixture
def driver(any_engine: sa.Engine) -> testing.FlowDriver:
    return mount(any_engine, "purchase_orders")


def flow_id(driver: testing.FlowDriver, name: str) -> int:
    with driver.runner.engine.connect() as conn:
        found = flow_rows.flow_by_name_or_id(conn, driver.runner.tables, name)
    assert found is not None
    return int(found["id"])


# -- who reads -------------------------------------------------------------------------


def test_a_console_that_does_not_know_who_reads_it_is_refused(
    driver: testing.FlowDriver,
) -> None:
    with pytest.raises(BindingError, match="must know who reads it"):
        driver.runner.console()
    with pytest.raises(BindingError, match="not both"):
        driver.runner.console(principal=as_(BOTH), token=TOKEN)


def test_the_token_is_typed_once_into_a_sign_in_page_and_kept_as_a_strict_http_only_cookie(
    driver: testing.FlowDriver,
) -> None:
    client = TestClient(driver.runner.console(token=TOKEN), follow_redirects=False)
    refused = client.get("/ops?status=failed")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Bearer realm="flowrunner console"'
    assert "this console needs its token" in text(refused.text)
    assert '<form id="signin" class="grid" method="post" action="/signin">' in refused.text
    assert 'name="next" value="/ops?status=failed"' in refused.text
    assert TOKEN not in refused.text
    assert client.get("/", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200

    # The token in an address is never taken, even the right one: it says why.
    in_address = client.get(f"/ops?status=failed&token={TOKEN}")
    assert in_address.status_code == 401 and "set-cookie" not in in_address.headers
    assert "A token in the address is not taken" in text(in_address.text)
    assert TOKEN not in in_address.text  # nor written back into the page's form

    wrong = client.post("/signin", data={"token": "wrong", "next": "/ops"})
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    assert "that is not this console's token" in text(wrong.text)

    kept = client.post("/signin", data={"token": TOKEN, "next": "/ops?status=failed"})
    assert kept.status_code == 303
    assert kept.headers["location"] == "/ops?status=failed"
    cookie = kept.headers["set-cookie"]
    assert cookie.startswith("flowrunner_console=") and TOKEN not in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    page = client.get("/ops?status=failed")
    assert page.status_code == 200  # the cookie does now
    assert client.get("/signin").headers["location"] == "/"  # signed in already

    # Signing out forgets the cookie.
    csrf = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
    assert csrf is not None
    out = client.post("/signout", data={"csrf": csrf.group(1)})
    assert (out.status_code, out.headers["location"]) == (303, "/signin")
    assert 'flowrunner_console=""' in out.headers["set-cookie"]
    client.cookies.delete("flowrunner_console")
    assert client.get("/").status_code == 401


@pytest.mark.parametrize(
    "elsewhere", ["https://evil.example/", "//evil.example/x", "/\\evil.example", "ops", "/a\nb"]
)
def test_signing_in_goes_on_only_to_a_page_of_the_console(
    driver: testing.FlowDriver, elsewhere: str
) -> None:
    client = TestClient(driver.runner.console(token=TOKEN), follow_redirects=False)
    kept = client.post("/signin", data={"token": TOKEN, "next": elsewhere})
    assert (kept.status_code, kept.headers["location"]) == (303, "/")


def test_a_console_of_the_applications_own_login_has_no_sign_in(
    driver: testing.FlowDriver,
) -> None:
    client = TestClient(driver.runner.console(principal=as_(BOTH)), follow_redirects=False)
    assert client.get("/signin").status_code == 303
    assert client.post("/signin", data={"token": TOKEN}).status_code == 303
    assert "set-cookie" not in client.post("/signin", data={"token": TOKEN}).headers


def test_what_the_token_reader_does_is_journaled_with_the_operators_name(
    driver: testing.FlowDriver,
) -> None:
    ui = Session(driver.runner.console(token=TOKEN, operator="night shift"))
    ui.client.headers["authorization"] = f"Bearer {TOKEN}"
    driver.create(order(1))
    [run] = driver.runs(1)
    ui.get(f"/run/{run.id}")
    assert ui.post(f"/run/{run.id}/cancel", {"confirmed": "yes"}).status_code == 303
    [entry] = driver.runner.journal()
    assert operations_room.journal_sentence(entry) == (
        "night shift cancelled run 1 (purchase_order 1)"
    )


def test_a_stranger_is_refused_and_an_async_function_may_say_who_reads(
    driver: testing.FlowDriver,
) -> None:
    stranger = TestClient(driver.runner.console(principal=as_(None)))
    page = stranger.get("/")
    assert page.status_code == 401
    assert "the application does not know who you are" in text(page.text)

    async def current_user(request: Any) -> Principal | None:
        name = request.headers.get("x-user")
        return Principal(name, roles=frozenset({"editor"})) if name else None

    client = TestClient(driver.runner.console(principal=current_user))
    assert client.get("/").status_code == 401
    assert "bea" in client.get("/", headers={"x-user": "bea"}).text


# -- forms -----------------------------------------------------------------------------


def test_a_form_not_sent_from_the_consoles_own_page_is_refused(
    driver: testing.FlowDriver,
) -> None:
    ui = console(driver, EDITOR)
    ui.get("/")
    made = {"name": "Forged", "start": "manual"}
    bare = ui.client.post("/flows", data=made)
    assert bare.status_code == 403
    assert "reload the page and try again" in text(bare.text)
    # Another session's token is not this one's.
    other = console(driver, EDITOR)
    other.get("/")
    assert ui.client.post("/flows", data={**made, "csrf": other.token}).status_code == 403
    # A cookie whose nonce was changed fails its signature.
    nonce, _, signature = ui.client.cookies["flowrunner_csrf"].partition(".")
    changed = ("y" if nonce[0] == "x" else "x") + nonce[1:]  # never the nonce it was
    ui.client.cookies.set("flowrunner_csrf", f"{changed}.{signature}")
    assert ui.client.post("/flows", data={**made, "csrf": changed}).status_code == 403
    with driver.runner.engine.connect() as conn:
        names = [f["name"] for f in flow_rows.all_flows(conn, driver.runner.tables)]
    assert "Forged" not in names
    # The page's own token, in the form or in the header, is taken.
    ui = console(driver, EDITOR)
    ui.get("/")
    header = {"x-csrf-token": ui.token}
    assert ui.client.post("/flows", data=made, headers=header).status_code == 303


def test_every_answer_forbids_what_the_console_never_does(driver: testing.FlowDriver) -> None:
    page = console(driver).get("/")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'self'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-store"
    cookie = page.headers["set-cookie"]
    assert "flowrunner_csrf=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert not re.search(r'(src|href)="https?://', page.text)  # nothing from elsewhere


def test_a_database_that_fails_under_a_page_is_the_consoles_page_and_one_masked_log_line(
    driver: testing.FlowDriver, caplog: pytest.LogCaptureFixture
) -> None:
    """The engine's tables go away under a reader (a restore gone wrong): the reader gets
    the console's own page with its sentence, the server's log one line saying why —
    not a traceback quoting the statement and the values it was sent with."""
    session = console(driver)
    assert session.get("/").status_code == 200
    engine = driver.runner.engine
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE flowrunner_runs RENAME TO flowrunner_runs_away")
    try:
        with caplog.at_level(logging.DEBUG, logger="flowrunner.web.console"):
            page = session.get("/")
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE flowrunner_runs_away RENAME TO flowrunner_runs")
    sqlite = engine.dialect.name == "sqlite"
    assert page.status_code == (503 if sqlite else 500)  # the database, or something else
    assert refusal(page.text) == (
        "the workflow engine cannot answer this request now; the server's log says why"
    )
    lines = [r.getMessage() for r in caplog.records if r.name == "flowrunner.web.console"]
    assert lines[0].startswith(f"answered {page.status_code} to GET /: ")
    assert ("no such table: flowrunner_runs" if sqlite else "does not exist") in lines[0]
    assert lines[1].startswith("where it failed: ")
    assert not any(
        "SELECT" in line or "purchase_order" in line or "parameters" in line or "\n" in line
        for line in lines
    )
    assert session.get("/").status_code == 200  # and it answers again


# -- the hooks -------------------------------------------------------------------------


def test_a_reader_without_roles_reads_but_neither_edits_nor_acts(
    driver: testing.FlowDriver,
) -> None:
    driver.create(order(1))
    ui = console(driver, READER)
    big = flow_id(driver, "Big orders")
    page = ui.get(f"/flow/{big}")
    assert page.status_code == 200 and "Manager approval" in page.text
    assert 'id="flow"' not in page.text and 'id="new-step"' not in page.text
    assert "You may read this flow" in text(page.text)
    assert 'id="new-flow"' not in ui.get("/").text
    refused = ui.post(f"/flow/{big}", {"name": "Mine"})
    assert refused.status_code == 403
    assert refusal(refused.text) == "rita may not edit 'Big orders'"
    assert ui.post("/flows", {"name": "X", "start": "manual"}).status_code == 403

    record = ui.get("/record/1")
    assert "Start a flow" not in record.text
    assert ui.post("/record/1/start", {"flow": "Resend"}).status_code == 403
    run_page = ui.get("/run/1")
    assert "Cancel…" not in run_page.text
    assert ui.post("/run/1/cancel", {"confirmed": "yes"}).status_code == 403
    assert driver.runs(1)[0].status == "waiting"
    assert driver.runner.journal().rows == ()


def test_the_applications_hooks_decide_flow_by_flow_and_action_by_action(
    driver: testing.FlowDriver,
) -> None:
    def can_edit(principal: Principal, flow: Mapping[str, Any]) -> bool:
        return str(flow.get("name", "")).startswith("Small")

    def can_operate(principal: Principal, action: str, run: Any) -> bool:
        return action == "retry"

    ui = console(driver, READER, can_edit=can_edit, can_operate=can_operate)
    assert 'id="flow"' in ui.get(f"/flow/{flow_id(driver, 'Small orders')}").text
    assert 'id="flow"' not in ui.get(f"/flow/{flow_id(driver, 'Big orders')}").text
    driver.create(order(1))
    page = ui.get("/run/1")
    assert "Retry…" in page.text and "Cancel…" not in page.text
    assert ui.post("/run/1/cancel").status_code == 403


# -- a reader who may not read some steps --------------------------------------------------

HIDDEN = ("Finance approval", "Tell the requester")


def can_read(principal: Principal, step: Mapping[str, Any]) -> bool:
    return step.get("title") not in HIDDEN


def test_steps_the_reader_may_not_read_are_nowhere_in_the_html(
    driver: testing.FlowDriver,
) -> None:
    driver.create(order(1))  # waits for the manager and finance
    decide(driver, 1, "manager@example.com")
    for approver in ("cfo@example.com", "controller@example.com"):
        decide(driver, 1, approver)
    [run] = driver.runs(1)
    assert run.status == "done"
    assert any(n.message.startswith("Your order was approved") for n in driver.notices(run.id))
    # The hidden steps' titles, their approvers, the message of the hidden notify step.
    secrets = (
        "Finance approval",
        "cfo@example.com",
        "controller@example.com",
        "Tell the requester<",
        "Tell the requester:",
        "goes to the supplier now",
    )
    ui = console(driver, BOTH, can_read=can_read)
    big = flow_id(driver, "Big orders")
    pages = {
        "flow": ui.get(f"/flow/{big}").text,
        "record": ui.get("/record/1").text,
        "run": ui.get(f"/run/{run.id}").text,
        "ops": ui.get("/ops").text,
        "notices": ui.get("/ops/notices").text,
        "export": ui.get("/export.yaml").text,
    }
    for name, page in pages.items():
        for secret in secrets:
            assert secret not in page, (name, secret)
    assert "Manager approval" in pages["flow"] and "Manager approval" in pages["run"]
    for name in ("flow", "record", "run"):
        titles = diagram_titles(pages[name])
        assert "Manager approval" in titles and not set(HIDDEN) & set(titles), name
    assert pages["export"].startswith("# Left out, having steps you may not read: Big orders")
    assert "Small orders" in yaml.safe_load(pages["export"].split("\n", 1)[1])["flows"][0]["name"]
    assert ui.get(f"/flow/{big}/export.yaml").status_code == 403
    assert ui.post(f"/flow/{big}/try", {"record": "1"}).status_code == 403
    finance = next(
        s
        for s in flow_rows.steps_of_flow(driver.runner.engine.connect(), driver.runner.tables, big)
        if s["title"] == "Finance approval"
    )
    assert ui.post(f"/flow/{big}/step/{finance['id']}", {"title": "x"}).status_code == 404

    # The same pages, read by someone who may read everything, do show them.
    everything = console(driver, BOTH)
    assert "Finance approval" in everything.get(f"/run/{run.id}").text


def test_a_waiting_run_says_where_it_waits_only_at_steps_the_reader_may_read(
    driver: testing.FlowDriver,
) -> None:
    driver.create(order(1))
    ui = console(driver, BOTH, can_read=can_read)
    record = ui.get("/record/1").text
    assert "Waits at Manager approval (position 10) for the po decided event" in text(record)
    assert "Finance" not in record
    ops = ui.get("/ops").text
    assert "Waits at Manager approval" in text(ops) and "Finance" not in ops


# -- mounted in an application ------------------------------------------------------------


def test_mounted_in_a_fastapi_app_every_link_form_and_cookie_stays_under_its_path(
    driver: testing.FlowDriver,
) -> None:
    app = FastAPI()
    app.mount("/flows", driver.runner.console(principal=as_(EDITOR)))
    ui = Session(app, root="/flows")
    page = ui.get("/")
    assert page.status_code == 200
    assert 'href="/flows/static/console.css"' in page.text
    assert f'href="/flows/flow/{flow_id(driver, "Resend")}"' in page.text
    assert 'action="/flows/flows"' in page.text
    assert "Path=/flows" in page.headers["set-cookie"]
    assert ui.client.get("/flows/static/console.css").status_code == 200
    created = ui.post("/flows", {"name": "Mounted", "start": "manual"})
    assert created.status_code == 303
    assert created.headers["location"].startswith("/flows/flow/")
    assert said(ui.follow(created).text) == "Flow 'Mounted' created."
    assert ui.client.get("/elsewhere").status_code == 404  # the app's own space is its own


def test_a_token_console_mounted_under_a_path_keeps_its_cookie_there(
    driver: testing.FlowDriver,
) -> None:
    app = FastAPI()
    app.mount("/ops-console", driver.runner.console(token=TOKEN))
    client = TestClient(app, follow_redirects=False)
    asked = client.get("/ops-console/ops")
    assert asked.status_code == 401
    assert 'action="/ops-console/signin"' in asked.text
    assert 'name="next" value="/ops-console/ops"' in asked.text
    kept = client.post("/ops-console/signin", data={"token": TOKEN, "next": "/ops-console/ops"})
    assert kept.status_code == 303 and kept.headers["location"] == "/ops-console/ops"
    assert "Path=/ops-console" in kept.headers["set-cookie"]
    assert client.get("/ops-console/ops").status_code == 200
    # Only a page of this console: the app's own pages beside it are not.
    elsewhere = client.post("/ops-console/signin", data={"token": TOKEN, "next": "/admin"})
    assert elsewhere.headers["location"] == "/ops-console/"


@pytest.mark.parametrize("who", [OPERATOR, EDITOR])
def test_each_page_answers_whoever_reads_it(driver: testing.FlowDriver, who: Principal) -> None:
    driver.create(order(1))
    ui = console(driver, who)
    for path in (
        "/",
        f"/flow/{flow_id(driver, 'Big orders')}",
        "/record/1",
        "/run/1",
        "/ops",
        "/ops/journal",
        "/ops/notices",
        "/export.yaml",
    ):
        assert ui.get(path).status_code == 200, path
