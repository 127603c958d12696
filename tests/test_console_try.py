"""Try it on a record, from a flow's page: the path the flow would take, the values it
would set, the notices and commands it would send — and the database exactly as it was,
every table compared row by row before and after, no command called. On SQLite and
PostgreSQL."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
import sqlalchemy as sa
from console import BOTH, console, errors_beside, text
from running import mount, order

from flowrunner import testing
from flowrunner.engine import commands
from flowrunner.store import flow_rows


def every_table(engine: sa.Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the database, in a stable order."""
    metadata = sa.MetaData()
    metadata.reflect(engine)
    with engine.connect() as conn:
        return {
            name: [tuple(row) for row in conn.execute(sa.select(table).order_by(*table.columns))]
            for name, table in sorted(metadata.tables.items())
        }


@pytest.fixture
def called() -> list[str]:
    return []


@pytest.fixture
def driver(any_engine: sa.Engine, called: list[str]) -> testing.FlowDriver:
    """The purchase-order app whose every command says it was called."""
    from running import app

    def spy(name: str) -> commands.Command:
        def command(ctx: commands.CommandContext) -> Any:
            called.append(name)
            return app("purchase_orders").COMMANDS[name](ctx)

        return command

    names = app("purchase_orders").COMMANDS
    return mount(any_engine, "purchase_orders", commands={n: spy(n) for n in names})


def test_a_try_shows_the_path_and_leaves_every_table_as_it_was(
    driver: testing.FlowDriver, called: list[str]
) -> None:
    driver.create(order(1))
    driver.run_until_idle()
    called.clear()
    ui = console(driver, BOTH)
    with driver.runner.engine.connect() as conn:
        big = flow_rows.flow_by_name_or_id(conn, driver.runner.tables, "Big orders")
    assert big is not None
    ui.get(f"/flow/{big['id']}")
    before = every_table(driver.runner.engine)

    page = ui.post(
        f"/flow/{big['id']}/try",
        {
            "record": "1",
            "answers": "manager@example.com rejects after 1 day",
            "until": "30 days",
        },
    )
    assert page.status_code == 200
    shown = text(page.text)
    assert re.search(r"Done on .*", shown)
    tried = page.text.split('class="tried"')[1]
    assert "Would run request_approval" in text(tried)
    assert "manager@example.com" in text(tried)
    assert every_table(driver.runner.engine) == before
    assert called == []


def test_a_try_that_cannot_run_says_why_beside_its_fields(driver: testing.FlowDriver) -> None:
    ui = console(driver, BOTH)
    with driver.runner.engine.connect() as conn:
        small = flow_rows.flow_by_name_or_id(conn, driver.runner.tables, "Small orders")
    assert small is not None
    path = f"/flow/{small['id']}/try"
    assert errors_beside(ui.post(path, {"record": ""}).text, "try", "record") == [
        "name the record to try the flow on"
    ]
    unknown = ui.post(path, {"record": "404"})
    assert unknown.status_code == 422
    assert errors_beside(unknown.text, "try", "record")[0].startswith("there is no")
    driver.create(order(1))
    bad = ui.post(path, {"record": "1", "until": "3 dayz"})
    assert errors_beside(bad.text, "try", "until") == [
        "'3 dayz' is not a duration — write e.g. '2 days' or '30 minutes'"
    ]
    lines = ui.post(path, {"record": "1", "answers": "status becomes sent\nbob juggles"})
    assert lines.status_code == 422
    assert any(
        e.startswith("line 2: ")
        for e in re.findall(r'<p class="error">(.*?)</p>', lines.text.split('id="try-answers"')[1])
    )


def test_a_designer_tries_an_edit_before_saving_it(
    driver: testing.FlowDriver, called: list[str]
) -> None:
    """Small orders, tried with their send step taken out: the try ends without sending,
    the saved rows stay as they were, and a bad edit is refused beside the rows."""
    driver.create(order(1))
    driver.run_until_idle()
    called.clear()
    ui = console(driver, BOTH)
    with driver.runner.engine.connect() as conn:
        small = flow_rows.flow_by_name_or_id(conn, driver.runner.tables, "Small orders")
        assert small is not None
        saved = flow_rows.steps_of_flow(conn, driver.runner.tables, small["id"])
    page = ui.get(f"/flow/{small['id']}")
    shown = re.search(r'<textarea id="try-rows"[^>]*>(.*?)</textarea>', page.text, re.S)
    assert shown is not None
    rows = html.unescape(shown.group(1))
    assert "Small orders" in rows and "send" in rows
    before = every_table(driver.runner.engine)

    as_saved = ui.post(f"/flow/{small['id']}/try", {"record": "1", "rows": rows})
    assert "Would run send_purchase_order" in text(as_saved.text.split('class="tried"')[1])

    # The send step is the last one: everything from its position on goes.
    without_send = re.split(r"^.*position: 2$", rows, flags=re.M)[0]
    assert "send" not in without_send
    edited = ui.post(f"/flow/{small['id']}/try", {"record": "1", "rows": without_send})
    assert edited.status_code == 200, text(edited.text)
    assert "send_purchase_order" not in text(edited.text.split('class="tried"')[1])

    broken = ui.post(f"/flow/{small['id']}/try", {"record": "1", "rows": "- name: [unclosed"})
    assert broken.status_code == 422
    assert errors_beside(broken.text, "try", "rows")[0].startswith("the rows cannot be read")
    assert every_table(driver.runner.engine) == before
    with driver.runner.engine.connect() as conn:
        assert flow_rows.steps_of_flow(conn, driver.runner.tables, small["id"]) == saved
    assert called == []
