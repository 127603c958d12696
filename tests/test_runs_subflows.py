"""Subflows, as a lending desk states them (``tests/lending.py``).

- Opening an account runs "Credit check" on the application as a subflow: the account
  waits until the check is done, then opens.
- A guaranteed account runs "Credit check" on its guarantor's application (``field:
  guarantor_id``): the check is a run on the guarantor's record.
- A check that fails (the bureau refuses Mallory) fails the step: the account takes its
  fault path — put on hold, the applicant told why; without a fault path the run fails.
  A check an operator cancels fails the step the same way.
- Cancelling the account's run cancels the check it waits for; a check that takes longer
  than the step's duration is given up and cancelled, and the account goes on.
- A subflow that names no manual flow, or that would start its own flow again (directly
  or through another), is refused when it is saved, with a sentence naming the chain.

Everything through the real engine, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import lending
import pytest
import sqlalchemy as sa
from running import stored
from sqlalchemy import orm
from test_saving import Flow, Step

from fixtures.purchase_orders import app as po
from flowrunner import errors, testing
from flowrunner.flows import files, orm_hook
from flowrunner.history import flows as history


@pytest.fixture
def driver(any_engine: sa.Engine) -> testing.FlowDriver:
    return lending.mount(any_engine)


def parent(run: Any) -> dict[str, Any]:
    """What a child run's snapshot says of its parent (empty for a run with none)."""
    found = run.snapshot.get("parent")
    return found if isinstance(found, dict) else {}


def runs(driver: testing.FlowDriver, record: int) -> dict[str, Any]:
    """The record's runs by flow name (one each)."""
    return {run.flow_name: run for run in driver.runs(record)}


def said(driver: testing.FlowDriver, run_id: int) -> list[str]:
    return [f"{line.title or 'run'}: {line.sentence}" for line in driver.history(run_id)]


def test_an_account_waits_for_its_credit_check_then_opens(driver: testing.FlowDriver) -> None:
    driver.create(lending.applicant(1))
    found = runs(driver, 1)
    account, check = found["Open account"], found["Credit check"]
    assert account.status == "waiting" and check.status == "waiting"
    assert parent(check) == {"run": account.id, "step": "Check credit", "step_id": 4}
    assert check.started_by == f"run {account.id}"
    [waits] = account.waiting
    assert history.waiting_sentence(waits) == (
        f"Waits at Check credit (position 10) for subflow Credit check (run {check.id}) to end"
    )
    assert stored(driver, 1)["status"] == "new"

    lending.decide(driver, 1)
    found = runs(driver, 1)
    assert found["Credit check"].status == "done"
    assert found["Open account"].status == "done"
    assert (stored(driver, 1)["status"], stored(driver, 1)["credit"]) == ("open", "checked")
    assert said(driver, account.id)[:3] == [
        "Check credit: Started Check credit",
        f"Check credit: Started subflow Credit check (run {check.id})",
        "Check credit: Subflow Credit check ended — went on",
    ]
    assert said(driver, check.id)[0] == "run: Started by run 1 at its step 'Check credit'"


def test_a_guaranteed_account_checks_its_guarantors_credit(driver: testing.FlowDriver) -> None:
    driver.create(lending.applicant(1, "Gus"))  # the guarantor's own account, and check
    driver.create(lending.applicant(2, "Ann", guarantor=1))
    [account] = driver.runs(2)
    assert account.flow_name == "Open guaranteed account" and account.status == "waiting"
    checks = [run for run in driver.runs(1) if run.flow_name == "Credit check"]
    assert len(checks) == 2
    [check] = [run for run in checks if parent(run).get("run") == account.id]
    assert check.record_id == "1"
    assert said(driver, account.id)[1].startswith(
        f"Check the guarantor: Started subflow Credit check (run {check.id}) on record 1; "
        "gives up at"
    )

    lending.decide(driver, 1)  # the bureau answers about the guarantor: both checks end
    assert {run.status for run in driver.runs(1)} == {"done"}
    assert runs(driver, 2)["Open guaranteed account"].status == "done"
    assert stored(driver, 2)["status"] == "open"
    assert stored(driver, 2)["credit"] is None  # the check ran on the guarantor
    assert stored(driver, 1)["credit"] == "checked"


def test_a_failed_credit_check_puts_the_account_on_hold_and_says_why(
    driver: testing.FlowDriver,
) -> None:
    driver.create(lending.applicant(3, "Mallory"))
    found = runs(driver, 3)
    check, account = found["Credit check"], found["Open account"]
    assert check.status == "failed"
    assert account.status == "done"
    assert stored(driver, 3)["status"] == "held"
    why = (
        f"subflow Credit check (run {check.id}) failed: step 'Ask the bureau' "
        "(bureau, position 10) failed: the command refused: the bureau will not check Mallory"
    )
    [notice] = driver.notices(account.id)
    assert notice.message == f"Your account is on hold: {why}"
    assert said(driver, account.id)[2] == (
        f"Check credit: Check credit failed ({why}) — went on at Hold"
    )


def test_a_failed_check_without_a_fault_path_fails_the_account(
    driver: testing.FlowDriver,
) -> None:
    driver.create(lending.applicant(1, "Mallory"))
    driver.create(lending.applicant(2, "Ann", guarantor=1))
    [account] = driver.runs(2)
    assert account.status == "failed"
    assert "Check the guarantor" in str(account.reason)
    assert "the bureau will not check Mallory" in str(account.reason)
    assert stored(driver, 2)["status"] == "new"


def test_a_check_an_operator_cancels_fails_the_step(driver: testing.FlowDriver) -> None:
    driver.create(lending.applicant(1))
    check = runs(driver, 1)["Credit check"]
    driver.runner.cancel(check.id, operator="olga", reason="wrong bureau")
    driver.run_until_idle()
    found = runs(driver, 1)
    assert found["Credit check"].status == "cancelled"
    assert found["Open account"].status == "done"
    assert stored(driver, 1)["status"] == "held"
    [notice] = driver.notices(found["Open account"].id)
    assert notice.message == (
        f"Your account is on hold: subflow Credit check (run {check.id}) was cancelled: "
        "cancelled by olga: wrong bureau"
    )


def test_cancelling_the_account_cancels_its_check(driver: testing.FlowDriver) -> None:
    driver.create(lending.applicant(1))
    account = runs(driver, 1)["Open account"]
    driver.runner.cancel(account.id, operator="olga", reason="withdrawn")
    driver.run_until_idle()
    found = runs(driver, 1)
    assert found["Open account"].status == "cancelled"
    check = found["Credit check"]
    assert check.status == "cancelled"
    assert check.reason == (
        f"cancelled with its parent, run {account.id} (cancelled by olga: withdrawn)"
    )
    assert f"run: Cancelled with its parent, run {account.id} (cancelled by olga: withdrawn)" in (
        said(driver, check.id)
    )
    assert f"Check credit: Cancelled subflow Credit check (run {check.id}): " in "".join(
        said(driver, account.id)
    )
    lending.decide(driver, 1)  # the bureau's late answer changes nothing
    assert stored(driver, 1)["status"] == "new"
    assert driver.next_due() is None


def test_a_check_that_takes_too_long_is_given_up_and_cancelled(
    driver: testing.FlowDriver,
) -> None:
    driver.create(lending.applicant(1, "Gus"))
    driver.create(lending.applicant(2, "Ann", guarantor=1))
    [account] = driver.runs(2)
    driver.advance("3 days")
    assert runs(driver, 2)["Open guaranteed account"].status == "done"
    assert stored(driver, 2)["status"] == "open"
    [check] = [r for r in driver.runs(1) if parent(r).get("run") == account.id]
    assert check.status == "cancelled"
    lines = said(driver, account.id)
    assert (
        f"Check the guarantor: Gave up after 3 days: subflow Credit check (run {check.id}) "
        "had not ended"
    ) in lines
    assert (
        f"Check the guarantor: Cancelled subflow Credit check (run {check.id}): the wait gave up"
    ) in lines


# -- refused on save -----------------------------------------------------------------------


def step(flow_id: object, position: int, name: str, **more: Any) -> dict[str, Any]:
    return {"flow_id": flow_id, "position": position, "kind": "subflow", "value": name, **more}


def test_a_subflow_cycle_is_refused_with_the_chain(driver: testing.FlowDriver) -> None:
    runner = driver.runner
    with runner.engine.begin() as conn:
        fraud = runner.save_flow(conn, {"name": "Fraud check", "start": "manual"})
        check = runner.save_flow(conn, {"name": "Deep check", "start": "manual"})
        runner.save_step(conn, step(fraud, 10, "Deep check", title="Go deeper"))
    with runner.engine.begin() as conn, pytest.raises(errors.RowInvalid) as refused:
        runner.save_step(conn, step(check, 10, "fraud check", title="Back again"))
    [problem] = refused.value.errors
    assert (problem.field, problem.code) == ("value", "subflow_cycle")
    assert problem.message == (
        "a subflow may not start its own flow again, directly or through others: "
        "Deep check → Fraud check → Deep check"
    )
    with runner.engine.begin() as conn, pytest.raises(errors.RowInvalid) as refused:
        runner.save_step(conn, step(check, 10, "Deep check", title="Itself"))
    assert refused.value.errors[0].message.endswith(": Deep check → Deep check")


def test_a_subflow_must_name_an_existing_manual_flow(driver: testing.FlowDriver) -> None:
    runner = driver.runner
    with runner.engine.begin() as conn:
        flow = runner.save_flow(conn, {"name": "Review", "start": "manual"})
    with runner.engine.begin() as conn, pytest.raises(errors.RowInvalid) as refused:
        runner.save_step(conn, step(flow, 10, "Credit chek"))
    [problem] = refused.value.errors
    assert problem.code == "subflow_unknown"
    assert problem.message == (
        "there is no flow named 'Credit chek' to run as a subflow (manual flows: Credit "
        "check, Review); did you mean 'Credit check'?"
    )
    with runner.engine.begin() as conn, pytest.raises(errors.RowInvalid) as refused:
        runner.save_step(conn, step(flow, 10, "Open account"))
    assert refused.value.errors[0].message == (
        "flow 'Open account' starts when a record is created; a subflow runs only a flow "
        "that starts manually"
    )
    with runner.engine.begin() as conn, pytest.raises(errors.RowInvalid) as refused:
        runner.save_step(conn, step(flow, 10, "Credit check", field="nothing"))
    assert refused.value.errors[0].code == "field_unknown"


def test_an_import_with_a_subflow_cycle_is_refused(driver: testing.FlowDriver) -> None:
    text = """
- name: Ping
  start: manual
  steps:
    - {position: 10, kind: subflow, title: To pong, value: Pong}
- name: Pong
  start: manual
  steps:
    - {position: 10, kind: subflow, title: To ping, value: Ping}
"""
    runner = driver.runner
    with runner.engine.begin() as conn, pytest.raises(errors.RowInvalid) as refused:
        files.import_flows(conn, runner.binding, runner.tables, files.loads_yaml(text))
    assert str(refused.value).splitlines() == [
        "flow 'Ping', step 'To pong' (subflow, position 10): value: a subflow may not start "
        "its own flow again, directly or through others: Ping → Pong → Ping",
        "flow 'Pong', step 'To ping' (subflow, position 10): value: a subflow may not start "
        "its own flow again, directly or through others: Pong → Ping → Pong",
    ]


def test_an_orm_flush_with_a_subflow_cycle_is_refused(po_engine: sa.Engine) -> None:
    """The ORM's writes are judged as a save is: the chain named."""

    made = orm.sessionmaker(po_engine)
    orm_hook.validate_on_flush(made, po.binding)
    with made() as session:
        first = Flow(name="First look", start="manual")
        second = Flow(name="Second look", start="manual")
        first.steps = [Step(position=1, kind="subflow", title="Look again", value="Second look")]
        session.add_all([first, second])
        session.commit()
        second.steps = [Step(position=1, kind="Subflow", title="Back", value="first look")]
        with pytest.raises(errors.RowInvalid) as refused:
            session.flush()
        [problem] = refused.value.errors
        assert problem.message.endswith(": Second look → First look → Second look")


def test_subflows_go_out_to_yaml_and_come_back(driver: testing.FlowDriver) -> None:
    runner = driver.runner
    with runner.engine.connect() as conn:
        text = files.dumps_yaml(files.export_flows(conn, runner.binding, runner.tables))
    assert (
        "  - position: 10\n    kind: subflow\n    title: Check the guarantor\n"
        "    duration: 3 days\n    field: guarantor_id\n    value: Credit check\n"
    ) in text
    with runner.engine.begin() as conn:
        done = files.import_flows(
            conn, runner.binding, runner.tables, files.loads_yaml(text), replace=True
        )
    assert sorted(done.replaced) == ["Credit check", "Open account", "Open guaranteed account"]
    with runner.engine.connect() as conn:
        again = files.dumps_yaml(files.export_flows(conn, runner.binding, runner.tables))
    assert again == text


def test_a_check_moved_to_a_new_version_still_wakes_its_account(
    driver: testing.FlowDriver,
) -> None:
    """A waiting check moved by an operator keeps its parent: its end still opens the account."""
    runner = driver.runner
    driver.create(lending.applicant(1))  # the check runs version 1, kept as it started
    with runner.engine.begin() as conn:
        check_flow = runner.tables.flows
        flow_id = conn.execute(
            sa.select(check_flow.c.id).where(check_flow.c.name == "Credit check")
        ).scalar_one()
        runner.save_step(
            conn,
            {
                "flow_id": flow_id,
                "position": 40,
                "kind": "set",
                "title": "Verified",
                "field": "status",
                "value": "verified",
            },
        )
        runner.publish(conn, "Credit check", by="olga")
    [moved] = runner.move_runs("Credit check", from_version=1, by="olga", dry_run=False)
    assert moved.moved
    lending.decide(driver, 1)
    found = runs(driver, 1)
    assert found["Credit check"].status == "done"
    assert found["Open account"].status == "done"
    assert parent(found["Credit check"]) == {
        "run": found["Open account"].id,
        "step": "Check credit",
        "step_id": 4,
    }


def test_a_retried_account_starts_its_check_again(driver: testing.FlowDriver) -> None:
    """The step failed with its check; an operator's retry starts a new check, once."""
    driver.create(lending.applicant(1, "Mallory"))
    driver.create(lending.applicant(2, "Ann", guarantor=1))
    [account] = driver.runs(2)
    assert account.status == "failed"
    driver.update(1, applicant="Mal")  # the bureau will check Mal
    driver.runner.retry(account.id, operator="olga")
    driver.run_until_idle()
    mine = sorted(
        (r for r in driver.runs(1) if parent(r).get("run") == account.id), key=lambda r: r.id
    )
    assert [r.status for r in mine] == ["failed", "waiting"]
    assert mine[1].start_key.endswith("/retry-1")
    lending.decide(driver, 1)
    assert runs(driver, 2)["Open guaranteed account"].status == "done"


def test_a_flow_another_runs_as_a_subflow_keeps_its_name_and_start(
    driver: testing.FlowDriver,
) -> None:
    runner = driver.runner
    with runner.engine.connect() as conn:
        flows = runner.tables.flows
        check = (
            conn.execute(sa.select(flows).where(flows.c.name == "Credit check")).mappings().one()
        )
    renamed = {**check, "name": "Credit review"}
    with runner.engine.begin() as conn, pytest.raises(errors.RowInvalid) as refused:
        runner.save_flow(conn, renamed)
    [problem] = refused.value.errors
    assert (problem.field, problem.code) == ("name", "subflow_in_use")
    assert problem.message == (
        "flow 'Open account' ('Check credit') and flow 'Open guaranteed account' ('Check the "
        "guarantor') run 'Credit check' as a subflow: it keeps its name and starts manually "
        "while it does"
    )
    with runner.engine.begin() as conn, pytest.raises(errors.RowInvalid) as refused:
        runner.save_flow(conn, {**check, "start": "created"})
    assert refused.value.errors[0].field == "start"
    with runner.engine.begin() as conn, pytest.raises(errors.RowInvalid) as refused:
        runner.delete_flow(conn, check["id"])
    assert refused.value.errors[0].message.endswith(
        "run this flow as a subflow; remove that step first"
    )
    with runner.engine.begin() as conn:  # its own words may change
        runner.save_flow(conn, {**check, "name": "CREDIT CHECK", "active": False})


def test_a_check_runs_its_flows_published_version(any_engine: sa.Engine) -> None:
    """Where flows are published explicitly, a check started as a subflow runs the
    latest published version of Credit check, not its draft."""
    driver = lending.mount(any_engine, publish="explicit")
    runner = driver.runner
    with runner.engine.begin() as conn:
        runner.publish(conn, "Open account", by="olga")
    driver.create(lending.applicant(1))
    [account] = driver.runs(1)  # nothing of Credit check is published yet: on hold
    assert stored(driver, 1)["status"] == "held"
    [notice] = driver.notices(account.id)
    assert notice.message == (
        "Your account is on hold: there is no active manual flow named 'Credit check' with a "
        "published version"
    )
    with runner.engine.begin() as conn:
        runner.publish(conn, "Credit check", by="olga")
        flows = runner.tables.flows
        check_id = conn.execute(
            sa.select(flows.c.id).where(flows.c.name == "Credit check")
        ).scalar_one()
        draft = {"flow_id": check_id, "position": 40, "kind": "set", "title": "Verified"}
        runner.save_step(conn, {**draft, "field": "status", "value": "verified"})
    driver.create(lending.applicant(2))
    check = runs(driver, 2)["Credit check"]
    assert [s["title"] for s in check.snapshot["steps"]] == [
        "Ask the bureau",
        "Bureau answers",
        "Checked",
    ]
    lending.decide(driver, 2)
    assert stored(driver, 2)["status"] == "open"  # the draft's Verified never ran
