"""A record's page shows the record itself — the columns its binding names
(``record_columns``), or by default its key, the columns people know it by, those flows
set and those their conditions read — each only to a reader ``can_read`` lets see it; and
for each step of its runs what went in and what came out. People find a record by what
they know it by (``record_search``: ``PO-1``), in the header's search and the
Operations room's record filter, their tenant's records only. On SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
import sqlalchemy as sa
from console import OPERATOR, Session, as_, console, text
from running import mount, order

from fixtures.purchase_orders import app as po
from flowrunner import FlowBinding, FlowRunner, errors, flow_runner, tables, testing
from flowrunner.store import dialects, migrate
from flowrunner.web.console import Principal


@pytest.fixture
def driver(any_engine: sa.Engine) -> testing.FlowDriver:
    return mount(any_engine, "purchase_orders")


def values_shown(page: str) -> dict[str, str]:
    """The record's columns on its page, as the reader reads them."""
    return {
        name: text(value)
        for name, value in re.findall(
            r'<div data-column="(\w+)"><dt>\w+</dt> <dd>(.*?)</dd></div>', page, re.S
        )
    }


def test_a_records_page_shows_its_key_its_number_what_flows_set_and_what_they_test(
    driver: testing.FlowDriver,
) -> None:
    driver.create({**order(1), "amount": 25000})
    page = console(driver, OPERATOR).get("/record/1").text
    # The key, the number people know it by, the columns flows set (status, priority)
    # and those the conditions of its runs read (Big orders: amount > 10000).
    assert values_shown(page) == {
        "id": "1",
        "number": "PO-1",
        "status": "open",
        "priority": "normal",
        "amount": "25000.00",
    }


def test_the_binding_names_the_columns_and_can_read_hides_one(
    any_engine: sa.Engine,
) -> None:
    binding = po.binding.model_copy(
        update={"record_columns": ("number", "requester_id", "amount", "needed_by")}
    )
    driver = mount(any_engine, "purchase_orders", binding=binding)
    driver.create({**order(1), "requester_id": "<b>ann</b>"})

    def can_read(principal: Principal, row: Mapping[str, Any]) -> bool:
        # What an order costs is the finance team's business.
        return "finance" in principal.roles or row.get("column") != "amount"

    olga = console(driver, OPERATOR, can_read=can_read)
    page = olga.get("/record/1").text
    assert values_shown(page) == {
        "number": "PO-1",
        "requester_id": "<b>ann</b>",
        "needed_by": "—",
    }
    assert "&lt;b&gt;ann&lt;/b&gt;" in page  # escaped, as every text is
    assert 'data-column="amount"' not in page
    fin = Principal("fin", roles=frozenset({"operator", "finance"}))
    shown = values_shown(console(driver, fin, can_read=can_read).get("/record/1").text)
    assert shown["amount"] == "25000.00"


def test_record_columns_are_checked_against_the_table(any_engine: sa.Engine) -> None:
    po.metadata.create_all(any_engine)
    binding = po.binding.model_copy(update={"record_columns": ("number", "colour")})
    with pytest.raises(errors.BindingError) as refused:
        binding.check(any_engine)
    assert str(refused.value) == (
        "the resource table 'purchase_order' has no column 'colour', "
        "which a record's page shows (record_columns)"
    )
    with pytest.raises(errors.BindingError, match="a record column is listed twice"):
        FlowBinding(
            resource="r", flows_table="f", steps_table="s", record_search=["number", "number"]
        )


def test_each_step_says_what_went_in_and_what_came_out(driver: testing.FlowDriver) -> None:
    driver.create(order(1))
    page = console(driver, OPERATOR).get("/record/1").text
    steps = re.search(r'<details class="steps-io">(.*?)</details>', page, re.S)
    assert steps is not None
    said = text(steps.group(1))
    # The approval step took its approvers in; its command answered whom it asked.
    assert "Manager approval (position 10) In approver : manager@example.com" in said
    assert 'Out pass-1 : {"asked": ["manager@example.com"]}' in said


def test_an_order_is_found_by_its_number_in_any_case(driver: testing.FlowDriver) -> None:
    for n in (1, 2, 31):
        driver.create({**order(n), "number": f"PO-{n}" if n != 31 else "po-0031"})
    ui = console(driver, OPERATOR)
    found = ui.get("/record", id="po-2")
    assert (found.status_code, found.headers["location"]) == (303, "/record/2")
    found = ui.get("/record", id="PO-0031")
    assert found.headers["location"] == "/record/31"
    assert ui.get("/record", id="1").headers["location"] == "/record/1"  # its key too
    missing = ui.get("/record", id="PO-9' OR '1'='1")
    assert missing.status_code == 404
    assert "No purchase_order has the id or the number “PO-9&#39; OR &#39;1&#39;=&#39;1”" in (
        missing.text
    )
    assert ui.get("/record", id="PO-\x001").status_code == 404  # no column holds a NUL
    assert ui.get("/record/po-2").headers["location"] == "/record/2"  # an address as said
    # Two orders under one number (a typo): both listed, each leading to its page.
    driver.create({**order(4), "number": "PO-44"})
    driver.create({**order(5), "number": "po-44"})
    both = ui.get("/record", id="PO-44")
    assert both.status_code == 200
    assert re.findall(r'<li><a href="(/record/\d+)">', both.text) == ["/record/4", "/record/5"]
    assert "2 records found" in text(both.text)
    # The Operations room's record filter takes the number as well.
    room = ui.get("/ops", record="PO-2").text
    assert re.findall(r'<tr data-run="(\d+)"', room) == [str(driver.runs(2)[0].id)]


metadata = sa.MetaData()
claim = sa.Table(
    "claim",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("tenant_id", sa.String(32), nullable=False),
    sa.Column("number", sa.String(32), nullable=False),
    sa.Column("status", sa.String(32)),
)
CLAIMS = FlowBinding(
    resource="claim",
    flows_table="claim_flow",
    steps_table="claim_flow_step",
    set_columns=["status"],
    tenant="tenant_id",
    record_search=["number"],
)
tables.for_binding(metadata, CLAIMS)


@pytest.fixture
def claims(any_engine: sa.Engine) -> FlowRunner:
    metadata.create_all(any_engine)
    migrate.upgrade(any_engine)
    runner = flow_runner(CLAIMS, any_engine)
    with dialects.begin(any_engine) as conn:
        for n, tenant in ((1, "acme"), (2, "globex")):
            conn.execute(claim.insert().values(id=n, tenant_id=tenant, number="CL-7"))
    return runner


def test_a_tenant_finds_its_own_record_by_number_and_never_another_tenants(
    claims: FlowRunner,
) -> None:
    amy = Principal("amy", tenant="acme", roles=frozenset({"operator"}))
    gus = Principal("gus", tenant="globex", roles=frozenset({"operator"}))
    # Both tenants have a claim CL-7: each finds their own.
    assert (
        Session(claims.console(principal=as_(amy))).get("/record", id="cl-7").headers["location"]
        == "/record/1"
    )
    as_gus = Session(claims.console(principal=as_(gus)))
    assert as_gus.get("/record", id="CL-7").headers["location"] == "/record/2"
    assert as_gus.follow(as_gus.get("/record", id="1")).status_code == 404  # acme's key
    page = as_gus.get("/record/2").text
    assert values_shown(page) == {"id": "2", "number": "CL-7", "status": "—"}


def test_a_reader_who_may_not_read_the_step_a_run_waits_at_reads_what_it_waits_for(
    driver: testing.FlowDriver,
) -> None:
    driver.create(order(1))  # waits at two approvals for their approvers' decisions

    def can_read(principal: Principal, row: Mapping[str, Any]) -> bool:
        return not str(row.get("title") or "").endswith("approval")

    page = console(driver, OPERATOR, can_read=can_read).get("/record/1").text
    waits = re.findall(r"<li>(Waits at [^<]*)</li>", page)
    assert (
        waits
        == [
            "Waits at a step you may not read, for the po decided event; it gives up at "
            "Mon 9 Mar 09:00 UTC"
        ]
        * 2
    )
    for hidden in ("Manager approval", "Finance approval", "manager@example.com", "cfo@"):
        assert hidden not in page  # nor its input, nor its command's answer
    room = console(driver, OPERATOR, can_read=can_read).get("/ops").text
    stands = re.findall(r'<td data-label="Where it stands">([^<]*)</td>', room)
    assert stands == ["; ".join([waits[0]] * 2)]


def test_the_flows_list_counts_each_flows_runs_as_the_operations_room_does(
    driver: testing.FlowDriver,
) -> None:
    driver.create(order(1))  # Big orders: waits
    driver.create({**order(2), "amount": 50, "priority": "hold"})  # Small orders: fails
    ui = console(driver, OPERATOR)
    listed = ui.get("/").text
    counts = dict(
        re.findall(
            r'<tr data-flow="\d+">\s*<td data-label="Flow"><a [^>]*>([^<]*)</a>.*?'
            r'<td data-label="Runs" class="running">\s*(.*?)</td>',
            listed,
            re.S,
        )
    )
    assert text(counts["Small orders"]) == "failed 1"  # not "none": it failed
    assert text(counts["Big orders"]).startswith("waiting 1 — 1 on the current rows")
    assert text(counts["Resend"]) == "none"
    # Each count leads to the Operations room, which counts alike.
    room = ui.get("/ops", flow="Small orders", status="failed").text
    assert len(re.findall(r'<tr data-run="\d+"', room)) == 1
