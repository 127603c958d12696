"""A flow's versions in the console, as an editor and an operator use them: the draft's
changes named on the flow's page, publish with a note, compare two versions, roll back
after confirming, and the waiting runs of an old version moved — the dry run first."""

from __future__ import annotations

import re

import sqlalchemy as sa
from console import BOTH, EDITOR, READER, console, said, text
from running import ticket
from test_versions import desk, edit, publish

from flowrunner import testing


def follow_up(engine: sa.Engine) -> tuple[testing.FlowDriver, int]:
    """The desk's "Follow up" published once, two tickets waiting on it, the draft edited."""
    driver = desk(engine)
    publish(driver, "first")
    driver.create(ticket(1))
    driver.create(ticket(2))
    edit(driver, "Requester replies", duration="10 days")
    (run,) = driver.runs(1)
    return driver, int(str(run.flow_id))


def test_an_editor_sees_what_the_draft_changes_and_publishes_it_with_a_note(
    any_engine: sa.Engine,
) -> None:
    driver, flow = follow_up(any_engine)
    session = console(driver, BOTH)
    page = session.get(f"/flow/{flow}")
    banner = re.search(r'<p id="flow-version"[^>]*>(.*?)</p>', page.text, re.S)
    assert banner is not None
    assert text(banner.group(1)).startswith("1 change not published: runs start on version 1.")

    versions = session.get(f"/flow/{flow}/versions")
    assert "Step 1 &#39;Requester replies&#39;: duration 30 days → 10 days" in versions.text
    done = session.follow(session.post(f"/flow/{flow}/publish", {"note": "a shorter wait"}))
    assert said(done.text) == "Published version 2."
    rows = re.findall(r'<tr data-version="(\d+)">(.*?)</tr>', done.text, re.S)
    assert [number for number, _ in rows] == ["2", "1"]  # the latest first
    assert "ada a shorter wait 0" in text(rows[0][1])  # by whom, the note, no open run yet
    assert "The rows are version 2." in text(done.text)

    compared = session.get(f"/flow/{flow}/compare", a="1", b="2")
    assert compared.status_code == 200
    assert text(compared.text).count("Requester replies") >= 3  # the sentence, two diagrams
    assert "duration 30 days → 10 days" in text(compared.text)


def test_a_roll_back_is_confirmed_first_and_publishes_the_old_rows(any_engine: sa.Engine) -> None:
    driver, flow = follow_up(any_engine)
    session = console(driver, BOTH)
    session.post(f"/flow/{flow}/publish", {"note": "shorter"})
    asked = session.get(f"/flow/{flow}/rollback", to="1")
    assert "Roll back Follow up to version 1?" in text(asked.text)
    assert "duration 10 days → 30 days" in text(asked.text)
    assert [v.number for v in driver.runner.versions("Follow up")] == [1, 2]  # not yet
    done = session.follow(
        session.post(f"/flow/{flow}/rollback", {"to": "1", "confirmed": "yes", "note": "oops"})
    )
    assert said(done.text) == "Published version 3: the rows of version 1."
    assert [(v.number, v.note) for v in driver.runner.versions("Follow up")][-1] == (3, "oops")


def test_moving_runs_shows_the_dry_run_first(any_engine: sa.Engine) -> None:
    driver, flow = follow_up(any_engine)
    session = console(driver, BOTH)
    session.post(f"/flow/{flow}/publish", {"note": "shorter"})
    dry = session.get(f"/flow/{flow}/move", **{"from": "1"})
    assert "2 runs would move, 0 stay as they are." in text(dry.text)
    assert [v.waiting for v in driver.runner.versions("Follow up")] == [2, 0]
    done = session.post(f"/flow/{flow}/move", {"from": "1", "confirmed": "yes"})
    assert "2 runs moved, 0 stay as they are." in text(done.text)
    assert [v.waiting for v in driver.runner.versions("Follow up")] == [0, 2]


def test_only_editors_publish_and_only_operators_move(any_engine: sa.Engine) -> None:
    driver, flow = follow_up(any_engine)
    reader = console(driver, READER)
    page = reader.get(f"/flow/{flow}/versions")
    assert page.status_code == 200 and 'id="publish"' not in page.text
    refused = reader.post(f"/flow/{flow}/publish", {"note": "sneaky"})
    assert refused.status_code == 403
    assert [v.number for v in driver.runner.versions("Follow up")] == [1]
    editor = console(driver, EDITOR)
    assert editor.get(f"/flow/{flow}/move", **{"from": "1"}).status_code == 403
    bad = editor.get(f"/flow/{flow}/compare", a="one")
    assert bad.status_code == 422 and "a must be a version number" in text(bad.text)
