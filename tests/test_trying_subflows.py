"""Trying a flow whose steps run subflows, as the lending desk would (``tests/lending.py``).

A try follows a subflow: the flow it runs is tried too, from the moment the step starts
it, on its record, its steps named ``Credit check › Ask the bureau`` in the path — no
command runs, nothing leaves the try. The script answers the subflow's steps as it
answers the flow's, and a refusal it scripts fails the subflow, so the flow takes its
fault path.
"""

from __future__ import annotations

import lending
import pytest
import sqlalchemy as sa

from flowrunner import testing


@pytest.fixture
def driver(any_engine: sa.Engine) -> testing.FlowDriver:
    found = lending.mount(any_engine)
    found.create(lending.applicant(1), run=False)
    found.create(lending.applicant(2, "Gus"), run=False)
    return found


def test_a_try_follows_the_credit_check_and_opens_the_account(
    driver: testing.FlowDriver,
) -> None:
    tried = driver.runner.try_flow(
        "Open account", None, 1, answers="credit.decided arrives after 1 day"
    )
    assert tried.path == (
        "Check credit (10)",
        "Credit check › Ask the bureau (10)",
        "Credit check › Bureau answers (20)",
        "Credit check › Checked (30)",
        "Open (20)",
        "Did the check fail? (30)",
    )
    said = [f"{line.step}: {line.sentence}" for line in tried.lines]
    assert said[:3] == [
        "Check credit: Started Check credit",
        "Check credit: Would start subflow Credit check",
        "Credit check › Ask the bureau: Started Ask the bureau",
    ]
    assert "Check credit: Subflow Credit check ended — went on" in said
    assert [c.sentence for c in tried.commands] == ["Would run ask_bureau"]
    assert [(v.step, v.field, v.after) for v in tried.values] == [
        ("Credit check › Checked", "credit", "checked"),
        ("Open", "status", "open"),
    ]
    assert (
        tried.end.sentence
        == "Done on Tue 3 Mar 09:00: failure is empty, so the run ended at Did the check fail?"
    )
    assert driver.record(1) == {**lending.applicant(1), "status": "new", "credit": None}
    assert [run.flow_name for run in driver.runs(1)] == ["Open account"]  # not started


def test_a_refusal_the_script_says_fails_the_check_and_the_account_goes_on_hold(
    driver: testing.FlowDriver,
) -> None:
    tried = driver.runner.try_flow(
        "Open account", None, 1, answers="ask_bureau refuses because no credit file"
    )
    [notice] = tried.notices
    assert notice.step == "Tell why"
    assert notice.message.startswith("Your account is on hold: subflow Credit check (run 1) ")
    assert notice.message.endswith("the command refused: no credit file")
    assert tried.end.status == "done"


def test_a_guaranteed_account_tries_the_check_on_the_guarantor_and_gives_up(
    driver: testing.FlowDriver,
) -> None:
    driver.create(lending.applicant(3, "Ann", guarantor=2), run=False)
    tried = driver.runner.try_flow("Open guaranteed account", None, 3, until="5 days")
    said = [f"{line.step}: {line.sentence}" for line in tried.lines]
    assert said[1].startswith(
        "Check the guarantor: Would start subflow Credit check on record 2; gives up at"
    )
    assert (
        "Check the guarantor: Gave up after 3 days: subflow Credit check (run 1) had not ended"
        in said
    )
    assert tried.end.status == "done"
