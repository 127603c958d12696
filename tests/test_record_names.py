"""A record is named as its people name it, wherever a reader meets it: the binding's
``record_label`` (``"{number}"`` → ``PO-9``) on a run's page, in the Operations room, on
an action's confirmation, in ``flowrunner runs show`` and ``runs list``, and in a history
line that names another record (a subflow on the guarantor's application). The ids stay
in the typed fields and the JSON output."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import forked
import lending
import pytest
import sqlalchemy as sa
from console import OPERATOR, console, text
from running import mount

from flowrunner import testing

ROOT = Path(__file__).resolve().parent.parent
APP = "fixtures.purchase_orders.app:runner"
# An order on hold: sending it to the supplier is refused, and its run fails.
ON_HOLD = {"id": 9, "number": "PO-9", "requester_id": "ann", "amount": 50, "priority": "hold"}


@pytest.fixture
def shop(database_url: str) -> Iterator[tuple[testing.FlowDriver, str]]:
    """The purchase-order app (``record_label="{number}"``), its order PO-9 failed."""
    engine = sa.create_engine(database_url)
    driver = mount(engine, "purchase_orders")
    driver.create(ON_HOLD)
    yield driver, database_url
    engine.dispose()


def runs(url: str, *args: str) -> str:
    """``flowrunner runs ...`` in a shell of its own (its engine closed with it)."""
    done = forked.run(
        [sys.executable, "-m", "flowrunner", "runs", *args, "--app", APP, "--database", url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return str(done.stdout)


def test_the_run_of_order_po_9_is_named_po_9_on_the_console(
    shop: tuple[testing.FlowDriver, str],
) -> None:
    driver, _url = shop
    [run] = driver.runs(9)
    assert run.status == "failed" and run.record_id == "9"
    ui = console(driver, OPERATOR)

    page = ui.get(f"/run/{run.id}").text
    crumbs = re.search(r'<p class="crumbs">(.*?)</p>', page, re.S)
    assert crumbs is not None and text(crumbs.group(1)) == "PO-9 ›"
    assert 'href="/record/9"' in crumbs.group(1)  # the address keeps its key

    room = ui.get("/ops").text
    row = re.search(rf'<tr data-run="{run.id}"[^>]*>(.*?)</tr>', room, re.S)
    assert row is not None
    record = re.search(r'<td data-label="Record">(.*?)</td>', row.group(1), re.S)
    assert record is not None and text(record.group(1)) == "PO-9"

    asked = ui.post(f"/run/{run.id}/retry").text
    assert f"Run {run.id} · {run.flow_name} on PO-9 · failed" in text(asked)


def test_an_order_without_a_number_is_named_by_the_resources_label_and_its_id(
    shop: tuple[testing.FlowDriver, str],
) -> None:
    driver, _url = shop
    driver.create({**ON_HOLD, "id": 10, "number": ""})
    [run] = driver.runs(10)
    assert driver.runner.operations.record_names(["9", "10", "404"]) == {"9": "PO-9"}
    page = console(driver, OPERATOR).get(f"/run/{run.id}").text
    crumbs = re.search(r'<p class="crumbs">(.*?)</p>', page, re.S)
    assert crumbs is not None and text(crumbs.group(1)) == "Purchase orders 10 ›"


def test_the_command_line_names_the_order_by_its_number_and_keeps_its_id_in_json(
    shop: tuple[testing.FlowDriver, str],
) -> None:
    driver, url = shop
    [run] = driver.runs(9)
    shown = runs(url, "show", str(run.id)).splitlines()
    assert shown[0] == f"Run {run.id}: {run.flow_name} on PO-9 — failed"
    head, *rows = [re.split(r"\s{2,}", line.strip()) for line in runs(url, "list").splitlines()]
    assert head[:3] == ["run", "flow", "Purchase orders"]
    assert [row[:3] for row in rows] == [[str(run.id), run.flow_name, "PO-9"]]
    listed = json.loads(runs(url, "list", "--json"))["runs"]
    assert [found["record"] for found in listed] == ["9"]


def test_a_subflow_on_the_guarantors_application_names_it_as_people_do(
    any_engine: sa.Engine,
) -> None:
    driver = lending.mount(any_engine, record_label="{applicant}'s application")
    driver.create(lending.applicant(1, "Gus"))
    driver.create(lending.applicant(2, "Ann", guarantor=1))
    [account] = driver.runs(2)
    [check] = [
        run
        for run in driver.runs(1)
        if run.flow_name == "Credit check" and f"run {account.id}" == run.started_by
    ]
    [line] = [line for line in driver.history(account.id) if line.what == "subflow"]
    assert line.sentence.startswith(
        f"Started subflow Credit check (run {check.id}) on Gus's application; gives up at"
    )
    assert isinstance(line.detail, dict) and line.detail["record"] == "1"  # for programs


def test_an_action_on_many_runs_names_each_runs_order_by_its_number(
    shop: tuple[testing.FlowDriver, str],
) -> None:
    driver, url = shop
    driver.create({**ON_HOLD, "id": 10, "number": "PO-10"})
    failed = sorted(run.id for record in (9, 10) for run in driver.runs(record))
    done = runs(url, "retry", *map(str, failed), "--operator", "olga", "--dry-run")
    assert done.splitlines() == [
        f"PO-9: run {failed[0]} would be retried",
        f"PO-10: run {failed[1]} would be retried",
    ]
    ui = console(driver, OPERATOR)
    page = ui.post(
        "/ops/act",
        {"action": "cancel", "run": [str(run_id) for run_id in failed], "confirmed": "yes"},
    ).text
    said = [text(m) for m in re.findall(r'<li data-run="\d+"[^>]*>(.*?)</li>', page, re.S)]
    assert said == [
        f"PO-9: run {failed[0]} cancelled",
        f"PO-10: run {failed[1]} cancelled",
    ]
