"""``--json``: every command that prints data prints it as one JSON document on standard
output, for scripts; what goes wrong stays one line on standard error."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click
import forked
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from running import ticket

from fixtures.tickets import app as tickets
from flowrunner.cli import SUBCOMMANDS, LazyGroup, cli
from flowrunner.store import migrate

ROOT = Path(__file__).resolve().parent.parent
APP = "fixtures.tickets.app:runner"
FLOWS = str(tickets.FLOWS_FILE)
# Commands that print no data: the demo tells a story; the console serves web pages.
NO_DATA = {"demo", "console"}
# Commands whose output is a document in the format asked for (--format), not data.
DOCUMENTS = {"diagram"}


def document(*args: str, code: int = 0) -> Any:
    """The one JSON document the command printed, its exit status checked."""
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)  # the whole of it: one document, nothing else


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'desk.db'}"


def _commands(group: click.Group, ctx: click.Context, prefix: str = "") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            found.update(_commands(command, ctx, f"{prefix}{name} "))
        else:
            found[f"{prefix}{name}"] = command
    return found


def test_every_command_that_prints_data_takes_json() -> None:
    assert isinstance(cli, LazyGroup)
    commands = _commands(cli, click.Context(cli))
    assert set(SUBCOMMANDS) <= {name.split()[0] for name in commands}
    assert sorted(commands) == [
        "authority check",
        "authority lock",
        "console",
        "deliver",
        "demo",
        "diagram",
        "flows compare",
        "flows export",
        "flows import",
        "flows list",
        "flows publish",
        "flows rollback",
        "flows start",
        "flows validate",
        "flows versions",
        "jobs backfill",
        "jobs list",
        "jobs pause",
        "jobs resume",
        "jobs run",
        "migrate status",
        "migrate up",
        "prune",
        "query",
        "runs cancel",
        "runs deliveries",
        "runs fork",
        "runs journal",
        "runs list",
        "runs move",
        "runs notices",
        "runs redrive",
        "runs restart",
        "runs retry",
        "runs show",
        "worker",
    ]
    for name, command in commands.items():
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert ("--json" in options) is (name not in NO_DATA | DOCUMENTS), name
        if name in DOCUMENTS:
            assert "--format" in options, name


def test_query() -> None:
    found = document(
        "query",
        "amount > 1000.50 and due < now() + 2 days",
        "--record",
        '{"amount": 1500, "due": "2026-03-02T09:00:00Z"}',
        "--now",
        "2026-03-01T09:00:00Z",
        "--json",
    )
    assert found == {
        "condition": "amount > 1000.50 and due < now() + 2 days",
        "dialect": "sqlite",
        "sql": "SELECT * FROM records WHERE (records.amount IS NOT NULL AND records.amount > ? "
        "AND records.due IS NOT NULL AND records.due < ?)",
        # A moment is ISO 8601; a number, a number.
        "parameters": {"param_1": 1000.5, "param_2": "2026-03-03T09:00:00+00:00"},
        "matches": True,
    }
    assert document("query", "status = open", "--json")["matches"] is None


def test_migrate_up_and_status(url: str) -> None:
    head = migrate.head()
    before = document("migrate", "status", "--database", url, "--json")
    assert before["current"] is None and before["head"] == head
    assert before["is_current"] is False and before["pending"][-1] == head
    assert before["database"] == url
    up = document("migrate", "up", "--database", url, "--json")
    assert up == {"database": url, "from": None, "to": head, "applied": before["pending"]}
    again = document("migrate", "up", "--app", APP, "--database", url, "--json")
    assert again == {"database": url, "from": head, "to": head, "applied": []}
    after = document("migrate", "status", "--app", APP, "--database", url, "--json")
    assert after["is_current"] is True and after["pending"] == []
    assert after["description"] == f"the flowrunner tables are current (revision {head})"


def test_flows_import_export_validate(url: str, tmp_path: Path) -> None:
    document("migrate", "up", "--database", url, "--json")
    app = ["--app", APP, "--database", url]
    imported = document("flows", "import", FLOWS, *app, "--json")
    assert imported["imported"] == len(imported["created"]) == 3
    assert imported["replaced"] == [] and imported["steps"] > 3

    refused = document("flows", "import", FLOWS, *app, "--json", code=1)
    assert {row["field"] for row in refused["refused"]} == {"name"}
    assert refused["refused"][0]["message"].startswith("there is already a flow named")

    exported = document("flows", "export", *app, "--json")
    assert [flow["name"] for flow in exported["flows"]] == imported["created"]
    assert all(flow["steps"] for flow in exported["flows"])

    # A JSON file exported is a file `flows import` reads: into another desk, the same flows.
    saved = tmp_path / "flows.json"
    result = CliRunner().invoke(cli, ["flows", "export", *app, "-o", str(saved)])
    assert result.exit_code == 0 and json.loads(saved.read_text(encoding="utf-8")) == exported
    other = f"sqlite:///{tmp_path / 'other.db'}"
    document("migrate", "up", "--database", other, "--json")
    again = document("flows", "import", str(saved), "--app", APP, "--database", other, "--json")
    assert again["created"] == imported["created"] and again["steps"] == imported["steps"]

    checked = document("flows", "validate", *app, "--json")
    assert checked == {
        "flows": 3,
        "steps": imported["steps"],
        "sound": True,
        "broken": [],
        "warnings": [],
    }

    clash = CliRunner().invoke(cli, ["flows", "export", *app, "--json", "--format", "csv"])
    assert clash.exit_code == 2 and "--json and --format csv disagree" in clash.stderr


def test_flows_start_and_worker_once(url: str) -> None:
    document("migrate", "up", "--database", url, "--json")
    engine = sa.create_engine(url)
    tickets.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(tickets.ticket), [ticket(n) for n in (1, 2)])
    engine.dispose()
    app = ["--app", APP, "--database", url]
    document("flows", "import", FLOWS, *app, "--json")
    started = document("flows", "start", "ticket", *app, "--where", "status = open", "--json")
    assert started == {"started": 2, "armed": 0}
    served = document("worker", *app, "--once", "--json", "--log-level", "error")
    assert served.pop("seconds") >= 0
    assert served == {
        "database": url,
        "resource": "ticket",
        "claimed": 2,
        "advanced": 2,
        "failed": 0,
        "refused": 0,
        "errors": 0,
        "handed_back": 0,
    }


def test_a_refusal_stays_one_line_on_standard_error(url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["query", "status = 'open", "--json"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("Error: line 1, column 10")
    broken = tmp_path / "flows.json"
    broken.write_text('{"flows": [\n  {"name": "x",}\n]}', encoding="utf-8")
    result = CliRunner().invoke(cli, ["flows", "import", str(broken), "--app", APP, "--json"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == "Error: the file is not readable JSON at line 2\n"


@pytest.mark.slow
def test_json_from_a_real_process(url: str) -> None:
    done = forked.run(
        [sys.executable, "-m", "flowrunner", "migrate", "status", "--database", url, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["current"] is None
