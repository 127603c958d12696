"""A flow's versions on the command line: publish, list, compare, roll back, and move
waiting runs — the desk's "Follow up" flow on a file database, through click's runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result
from running import ticket
from test_versions import desk, edit

from flowrunner.cli import cli

APP = "fixtures.tickets.app:runner"


@pytest.fixture
def url(tmp_path: Path) -> str:
    """The desk with "Follow up" published once (version 1), two tickets' runs waiting on
    it, and the draft's wait shortened since."""
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    engine = sa.create_engine(url)
    driver = desk(engine, publish="on_save")
    driver.create(ticket(1))
    driver.create(ticket(2))
    edit(driver, "Requester replies", duration="10 days")
    engine.dispose()
    return url


def flowrunner(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--app", APP, "--database", url])


def document(url: str, *args: str, code: int = 0) -> Any:
    result = flowrunner(url, *args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def test_publish_list_compare_and_roll_back(url: str) -> None:
    said = flowrunner(url, "flows", "compare", "Follow up", "1")
    assert said.exit_code == 0, said.output
    assert said.stdout == "Step 1 'Requester replies': duration 30 days → 10 days\n"

    published = document(url, "flows", "publish", "Follow up", "--by", "olga", "--note", "shorter")
    assert (published["version"], published["by"], published["note"]) == (2, "olga", "shorter")
    again = flowrunner(url, "flows", "publish", "Follow up", "--by", "olga")
    assert again.exit_code == 2
    assert again.output.strip().splitlines() == [
        "Error: nothing to publish: flow 'Follow up' is as version 2 has it"
    ]

    listed = document(url, "flows", "versions", "Follow up")["versions"]
    assert [(v["version"], v["by"], v["waiting"]) for v in listed] == [(1, None, 2), (2, "olga", 0)]

    rolled = document(url, "flows", "rollback", "Follow up", "1", "--by", "olga")
    assert (rolled["version"], rolled["rolled_back_to"]) == (3, 1)
    assert document(url, "flows", "compare", "Follow up", "1")["changes"] == []

    unknown = flowrunner(url, "flows", "compare", "Follow up", "9")
    assert unknown.exit_code == 2
    assert "flow 'Follow up' has no version 9" in unknown.output


def test_moving_runs_says_each_run_and_a_dry_run_moves_nothing(url: str) -> None:
    document(url, "flows", "publish", "Follow up", "--by", "olga")
    dry = document(
        url, "runs", "move", "--flow", "Follow up", "--from", "1", "--by", "olga", "--dry-run"
    )
    assert (dry["moved"], dry["refused"], dry["dry_run"]) == (2, 0, True)
    waiting = [v["waiting"] for v in document(url, "flows", "versions", "Follow up")["versions"]]
    assert waiting == [2, 0]

    moved = flowrunner(url, "runs", "move", "--flow", "Follow up", "--from", "1", "--by", "olga")
    assert moved.exit_code == 0, moved.output
    assert moved.stdout.splitlines() == [
        "run 1 moved from version 1 to version 2",
        "run 2 moved from version 1 to version 2",
        "2 moved, 0 refused",
    ]
    waiting = [v["waiting"] for v in document(url, "flows", "versions", "Follow up")["versions"]]
    assert waiting == [0, 2]


def test_a_flows_file_carries_its_version_and_an_import_can_publish_it(
    url: str, tmp_path: Path
) -> None:
    document(url, "flows", "publish", "Follow up", "--by", "olga")
    exported = tmp_path / "flows.yaml"
    done = flowrunner(url, "flows", "export", "-o", str(exported))
    assert done.exit_code == 0, done.output
    text = exported.read_text()
    assert "version: 2" in text  # the rows are version 2, as published

    # Edited in the file, imported over the stored flow and published in one go.
    exported.write_text(text.replace("duration: 10 days", "duration: 3 days"))
    imported = document(
        url,
        "flows",
        "import",
        str(exported),
        "--replace",
        "--publish",
        "--by",
        "olga",
        "--note",
        "from the file",
    )
    assert (imported["replaced"], imported["published"]) == (["Follow up"], {"Follow up": 3})
    said = flowrunner(url, "flows", "compare", "Follow up", "2", "3")
    assert said.stdout == "Step 1 'Requester replies': duration 10 days → 3 days\n"
    # Its steps kept their ids, so the runs waiting on version 1 can move to it.
    moved = document(url, "runs", "move", "--flow", "Follow up", "--from", "1", "--by", "olga")
    assert (moved["moved"], moved["refused"]) == (2, 0)

    needs_by = flowrunner(url, "flows", "import", str(exported), "--replace", "--publish")
    assert needs_by.exit_code == 2 and "--publish needs --by NAME" in needs_by.output
