"""Answer links, through HTTP, on SQLite and PostgreSQL: a purchase order waits for its
manager's approval; the application mails ann an Approve and a Reject link.

Opening a link asks and changes nothing; pressing its button answers once, as ann; the
same link again, an expired one, a forged one and one for a step that no longer waits
are each refused with a page that says so."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import migrated
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from running import mount, order
from starlette.testclient import TestClient

from flowrunner import (
    CommandContext,
    FlowBinding,
    FlowRunner,
    Kind,
    errors,
    flow_runner,
    tables,
    testing,
    web,
)
from flowrunner.foundations import answer_tokens
from flowrunner.store import engine_tables

SECRET = b"orders-links-secret-of-32-bytes!"
BASE = "https://orders.example.com/answer"

APPROVE = """
- name: Approve
  start: created
  steps:
    - {position: 1, kind: approval, title: Manager approval, approver: ann}
    - {position: 2, kind: set, title: Approved, field: status, value: approved}
"""
# Both must approve: the step waits for ann and for bob.
BOTH = APPROVE.replace("approver: ann}", "approver: 'ann, bob', mode: all}")


@pytest.fixture
def orders(engine: sa.Engine) -> testing.FlowDriver:
    driver = mount(engine, "purchase_orders", flows=APPROVE, links_secret=SECRET)
    driver.create(order(7))
    return driver


@pytest.fixture
def client(orders: testing.FlowDriver) -> TestClient:
    return TestClient(web.answer_pages(orders.runner))


def path(link: str) -> str:
    assert link.startswith(BASE + "/")
    return link.removeprefix(BASE)


def link(orders: testing.FlowDriver, answer: str, *, person: str = "ann", days: int = 3) -> str:
    [run] = orders.runs(7)
    return orders.runner.answer_link(
        run.id, answer, person=person, expires=timedelta(days=days), base_url=BASE
    )


def status(orders: testing.FlowDriver) -> object:
    record = orders.record(7)
    assert record is not None
    return record["status"]


def events(orders: testing.FlowDriver) -> list[dict[str, object]]:
    table = engine_tables.events
    with orders.runner.engine.connect() as conn:
        rows = conn.execute(sa.select(table.c.payload).order_by(table.c.id)).all()
    return [row.payload for row in rows]


def test_opening_a_link_asks_and_changes_nothing(
    orders: testing.FlowDriver, client: TestClient
) -> None:
    approve = path(link(orders, "approved"))
    for _ in range(2):  # a mail scanner, then ann
        page = client.get(approve)
        assert page.status_code == 200
        assert "Approve PO-7 as ann?" in page.text
        assert '<button type="submit">Approve</button>' in page.text
        assert "Purchase orders · PO-7 · Manager approval" in page.text
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["cache-control"] == "no-store"
    assert events(orders) == []
    orders.run_until_idle()
    [run] = orders.runs(7)
    assert run.status == "waiting"


def test_pressing_approve_answers_once_as_ann_and_the_run_goes_on(
    orders: testing.FlowDriver, client: TestClient
) -> None:
    approve = path(link(orders, "approved"))
    answered = client.post(approve)
    assert answered.status_code == 200
    assert "Thank you: ann approved PO-7." in answered.text
    assert events(orders) == [{"order": 7, "approver": "ann", "decision": "approved"}]
    orders.run_until_idle()
    [run] = orders.runs(7)
    assert run.status == "done"
    assert status(orders) == "approved"
    sentences = [line.sentence for line in orders.history(run.id)]
    assert any(s.startswith("ann approved") for s in sentences), sentences

    again = client.post(approve)
    assert again.status_code == 409
    assert "This link has already been used." in again.text
    assert client.get(approve).status_code == 409
    assert len(events(orders)) == 1


def test_an_expired_link_is_refused_with_its_moment(
    orders: testing.FlowDriver, client: TestClient
) -> None:
    approve = path(link(orders, "approved", days=2))
    orders.advance("2 days")
    for page in (client.get(approve), client.post(approve)):
        assert page.status_code == 410
        assert "This link expired on Wed 4 Mar 09:00 UTC." in page.text
    assert events(orders) == []


def test_a_forged_or_garbled_link_is_refused(
    orders: testing.FlowDriver, client: TestClient
) -> None:
    token = path(link(orders, "approved")).lstrip("/")
    payload, signature = token.split(".")
    claims = answer_tokens.verify(token, SECRET)
    assert claims is not None
    as_boss = answer_tokens.sign(
        answer_tokens.Claims(**{**claims.__dict__, "person": "boss"}), b"x" * 32
    )
    flipped = payload[:-1] + ("A" if payload[-1] != "A" else "B")
    for forged in (f"{flipped}.{signature}", as_boss, "not-a-token", f"{payload}.", "a.b.c"):
        for page in (client.get(f"/{forged}"), client.post(f"/{forged}")):
            assert page.status_code == 400, forged
            assert "This link is not valid." in page.text
    assert events(orders) == []


def test_a_link_for_a_step_that_no_longer_waits_says_so(
    orders: testing.FlowDriver, client: TestClient
) -> None:
    reject = path(link(orders, "rejected"))
    [run] = orders.runs(7)
    orders.runner.cancel(run.id, operator="olga", reason="duplicate")
    for page in (client.get(reject), client.post(reject)):
        assert page.status_code == 409
        assert "Manager approval for PO-7 no longer waits for an answer." in page.text
    assert events(orders) == []


def test_approve_and_reject_links_answer_the_person_once(engine: sa.Engine) -> None:
    # mode all: the step waits for ann and bob; ann's second link finds her answered.
    orders = mount(engine, "purchase_orders", flows=BOTH, links_secret=SECRET)
    orders.create(order(7))
    client = TestClient(web.answer_pages(orders.runner))
    approve, reject = path(link(orders, "approved")), path(link(orders, "rejected"))
    assert client.post(approve).status_code == 200
    orders.run_until_idle()
    second = client.get(reject)
    assert second.status_code == 409
    assert "ann has already answered Manager approval for PO-7." in second.text
    assert client.post(reject).status_code == 409
    assert client.post(path(link(orders, "approved", person="bob"))).status_code == 200
    orders.run_until_idle()
    assert status(orders) == "approved"


def test_a_link_text_is_escaped(orders: testing.FlowDriver, client: TestClient) -> None:
    page = client.get(path(link(orders, "approved", person="<b>ann</b>")))
    assert "&lt;b&gt;ann&lt;/b&gt;" in page.text
    assert "<b>ann</b>" not in page.text


def test_making_a_link_is_refused_with_a_sentence(orders: testing.FlowDriver) -> None:
    [run] = orders.runs(7)
    runner = orders.runner
    with pytest.raises(errors.OperatorError, match="must expire later than now"):
        runner.answer_link(run.id, "approved", person="ann", expires=timedelta(0), base_url=BASE)
    with pytest.raises(errors.OperatorError, match="there is no run 999"):
        runner.answer_link(999, "approved", person="ann", expires=timedelta(days=1), base_url=BASE)
    with pytest.raises(errors.OperatorError, match="person must be one line"):
        runner.answer_link(run.id, "approved", person=" ", expires=timedelta(1), base_url=BASE)
    runner.cancel(run.id, operator="olga")
    with pytest.raises(errors.OperatorError, match="does not wait for an answer"):
        runner.answer_link(run.id, "approved", person="ann", expires=timedelta(1), base_url=BASE)


def test_a_runner_without_a_links_secret_makes_no_links(engine: sa.Engine) -> None:
    orders = mount(engine, "purchase_orders", flows=APPROVE)
    orders.create(order(7))
    [run] = orders.runs(7)
    with pytest.raises(errors.BindingError, match="has no links_secret"):
        orders.runner.answer_link(
            run.id, "approved", person="ann", expires=timedelta(days=1), base_url=BASE
        )
    with pytest.raises(errors.BindingError, match="at least 16 bytes"):
        mount(engine, "purchase_orders", flows="[]", links_secret="short")


def test_the_console_and_a_fastapi_app_serve_the_pages(orders: testing.FlowDriver) -> None:
    token = path(link(orders, "approved"))
    console = TestClient(orders.runner.console(token="operators-token"))
    assert "Approve PO-7 as ann?" in console.get(f"/answer{token}").text
    app = FastAPI()
    app.mount("/answer", web.answer_pages(orders.runner))
    assert TestClient(app).post(f"/answer{token}").status_code == 200
    assert console.post(f"/answer{token}").status_code == 409


# -- tenants: a link answers its own tenant's run, never another's -------------------------

mall = sa.MetaData()
sa.Table(
    "mall_order",
    mall,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("shop", sa.String(32), nullable=False),
    sa.Column("status", sa.String(32), nullable=False, server_default="open"),
)
MALL = FlowBinding(
    resource="mall_order",
    flows_table="mall_flow",
    steps_table="mall_flow_step",
    events={"order.checked": "order"},
    kinds={
        "check": Kind(
            command="ask_checker", wait_for="order.checked", by="checker", answer="verdict"
        )
    },
    set_columns=["status"],
    tenant="shop",
)
tables.for_binding(mall, MALL)


def test_a_link_answers_its_own_tenant_s_run_only(engine: sa.Engine) -> None:
    mall.create_all(engine)
    migrated.upgrade(engine)
    runner = flow_runner(
        MALL, engine, commands={"ask_checker": lambda ctx: None}, links_secret=SECRET
    )
    driver = testing.FlowDriver(runner)
    with engine.begin() as conn:
        for shop in ("acme", "globex"):
            flow = runner.save_flow(conn, {"name": "Check", "start": "created"}, tenant=shop)
            runner.save_step(conn, {"flow_id": flow, "position": 1, "kind": "check"}, tenant=shop)
    driver.create({"id": 1, "shop": "acme"})
    driver.create({"id": 2, "shop": "globex"})
    [acme_run] = driver.runs(1, tenant="acme")
    [globex_run] = driver.runs(2, tenant="globex")
    week = timedelta(days=7)
    with pytest.raises(errors.OperatorError, match="there is no run"):
        runner.answer_link(
            globex_run.id, "passed", person="cy", expires=week, base_url=BASE, tenant="acme"
        )
    made = runner.answer_link(
        acme_run.id, "passed", person="cy", expires=week, base_url=BASE, tenant="acme"
    )
    claims = answer_tokens.verify(path(made).lstrip("/"), SECRET)
    assert claims is not None and claims.tenant == "acme"

    client = TestClient(web.answer_pages(runner))
    assert "Answer “passed” 1 as cy?" in client.get(path(made)).text
    answered = client.post(path(made))
    assert answered.status_code == 200
    assert "Thank you: cy answered “passed” for 1." in answered.text
    with engine.connect() as conn:
        table = engine_tables.events
        kept = conn.execute(sa.select(table.c.tenant, table.c.record_id, table.c.payload)).all()
    assert [tuple(row) for row in kept] == [
        ("acme", "1", {"order": 1, "checker": "cy", "verdict": "passed", "shop": "acme"})
    ]
    driver.run_until_idle()
    assert driver.runs(1, tenant="acme")[0].status == "done"
    assert driver.runs(2, tenant="globex")[0].status == "waiting"


def test_the_command_that_asks_mails_its_own_approve_and_reject_links(engine: sa.Engine) -> None:
    mailed: list[dict[str, str]] = []

    def request_approval(ctx: CommandContext) -> dict[str, object]:
        links = {
            answer: ctx_runner[0].answer_link(
                ctx, answer, person="ann", expires=timedelta(days=3), base_url=BASE
            )
            for answer in ("approved", "rejected")
        }
        mailed.append(links)
        return {"asked": ["ann"]}

    ctx_runner: list[FlowRunner] = []
    orders = mount(
        engine,
        "purchase_orders",
        flows=APPROVE,
        links_secret=SECRET,
        commands={"request_approval": request_approval},
    )
    ctx_runner.append(orders.runner)
    orders.create(order(7))
    [links] = mailed
    client = TestClient(web.answer_pages(orders.runner))
    assert "Reject PO-7 as ann?" in client.get(path(links["rejected"])).text
    assert client.post(path(links["rejected"])).status_code == 200
    orders.run_until_idle()
    [run] = orders.runs(7)
    assert any(line.sentence.startswith("ann rejected") for line in orders.history(run.id))
    # The step answered, its other link finds nothing waiting.
    assert client.post(path(links["approved"])).status_code == 409


def test_two_presses_at_once_answer_once(orders: testing.FlowDriver) -> None:
    # ann double-clicks, or her phone and her laptop both send it: one answer, one refusal.
    token = path(link(orders, "approved")).lstrip("/")
    links = orders.runner.answers
    start = threading.Barrier(2)

    def press() -> str:
        start.wait(timeout=30)
        return links.answer(token).code

    with ThreadPoolExecutor(max_workers=2) as pool:
        codes = sorted(pool.map(lambda _: press(), range(2)))
    assert codes == ["answered", "used"]
    assert len(events(orders)) == 1


def test_each_press_is_one_log_line_without_the_token(
    orders: testing.FlowDriver, client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    approve = path(link(orders, "approved"))
    with caplog.at_level("INFO", logger="flowrunner.answers"):
        client.post(approve)
        client.post(approve)
    lines = [r.getMessage() for r in caplog.records if r.name == "flowrunner.answers"]
    assert [line.split(": ", 1)[1].split(" (")[0] for line in lines] == ["answered", "refused"]
    assert lines[1].endswith("refused (used)")
    token = approve.lstrip("/")
    assert not [line for line in lines if token in line or token.split(".")[1] in line]


def test_a_link_opened_while_the_database_fails_says_to_try_again_and_answers_nothing(
    orders: testing.FlowDriver, client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    """ann presses Approve while the database is away: a page says to try again later,
    nothing is answered, one log line says why without the token; the link works after."""
    approve = path(link(orders, "approved"))
    engine = orders.runner.engine
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE flowrunner_runs RENAME TO flowrunner_runs_away")
    try:
        with caplog.at_level("DEBUG", logger="flowrunner.web.link_pages"):
            opened, pressed = client.get(approve), client.post(approve)
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE flowrunner_runs_away RENAME TO flowrunner_runs")
    for page in (opened, pressed):
        assert page.status_code == 503
        assert "This answer cannot be taken right now. Try the link again in a few minutes." in (
            page.text
        )
        assert "Nothing was answered." in page.text
    lines = [r.getMessage() for r in caplog.records if r.name == "flowrunner.web.link_pages"]
    assert lines[0].startswith("an answer link's GET page answered 503: ")
    assert lines[2].startswith("an answer link's POST page answered 503: ")
    token = approve.lstrip("/")
    assert not [line for line in lines if token.split(".")[1] in line or "SELECT" in line]
    assert events(orders) == []
    assert client.post(approve).status_code == 200  # the same link, the database back
    assert events(orders) == [{"order": 7, "approver": "ann", "decision": "approved"}]
