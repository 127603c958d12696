"""The console's step editor offers a step's fault path and escalation as it offers every
column its kind reads (the columns list drives it): a send shows ``on_failure``, a
waiting approval ``escalate`` and ``escalate_to`` too, each refusal beside its field.
On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from console import EDITOR, Session, console, errors_beside, field_value
from running import mount
from test_runs_faults import BINDING, FLOWS, supplier

from flowrunner import testing
from flowrunner.store import flow_rows


@pytest.fixture
def driver(any_engine: sa.Engine) -> testing.FlowDriver:
    return mount(
        any_engine,
        "purchase_orders",
        flows=FLOWS,
        binding=BINDING,
        commands={"send_purchase_order": supplier},
    )


def flow_and_steps(driver: testing.FlowDriver, name: str) -> tuple[int, list[dict[str, Any]]]:
    with driver.runner.engine.connect() as conn:
        found = flow_rows.flow_by_name_or_id(conn, driver.runner.tables, name)
        assert found is not None
        return int(found["id"]), flow_rows.steps_of_flow(conn, driver.runner.tables, found["id"])


def test_the_step_forms_show_the_new_columns_of_their_kinds(driver: testing.FlowDriver) -> None:
    ui: Session = console(driver, EDITOR)
    flow, [send, *_] = flow_and_steps(driver, "Send or say why")
    page = ui.get(f"/flow/{flow}").text
    assert field_value(page, f"step-{send['id']}", "on_failure") == "40"
    assert field_value(page, f"step-{send['id']}", "escalate") is None  # a send does not wait
    big, [approval, *_] = flow_and_steps(driver, "Big orders")
    page = ui.get(f"/flow/{big}").text
    form = f"step-{approval['id']}"
    assert field_value(page, form, "escalate") == "2 days"
    assert field_value(page, form, "escalate_to") == "manager"
    assert 'id="dl-escalate_to"><option value="requester"><option value="manager">' in page


def test_a_refused_fault_path_or_escalation_is_said_beside_its_field(
    driver: testing.FlowDriver,
) -> None:
    ui: Session = console(driver, EDITOR)
    flow, [send, *_] = flow_and_steps(driver, "Send or say why")
    page = ui.post(
        f"/flow/{flow}/step/{send['id']}",
        {"position": "10", "kind": "send", "title": "Send to supplier", "on_failure": "99"},
    )
    assert page.status_code == 422
    assert errors_beside(page.text, f"step-{send['id']}", "on_failure") == [
        "there is no step at position 99 in this flow to go to if it fails"
    ]
    big, [approval, *_] = flow_and_steps(driver, "Big orders")
    page = ui.post(
        f"/flow/{big}/step/{approval['id']}",
        {
            "position": "10",
            "kind": "approval",
            "approver": "cfo@example.com",
            "escalate": "",
            "escalate_to": "boss",
        },
    )
    assert page.status_code == 422
    form = f"step-{approval['id']}"
    assert errors_beside(page.text, form, "escalate") == [
        "a step that escalates to boss needs 'escalate': how long it waits before it tells "
        "them, e.g. 2 days"
    ]
    assert errors_beside(page.text, form, "escalate_to") == [
        "'boss' is not an audience of the notify rules (requester, manager)"
    ]
