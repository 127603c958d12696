"""``flowrunner runs``: an operator lists the desk's runs, reads one, acts on several and
reads the journal and the outbox, through click's runner and once as a real process."""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import desk
import forked
import pytest
import room
import sqlalchemy as sa
from click.testing import CliRunner, Result

from flowrunner import testing
from flowrunner.cli import cli

ROOT = Path(__file__).resolve().parent.parent
APP = "fixtures.tickets.app:runner"


@pytest.fixture
def url(tmp_path: Path) -> str:
    """The desk of ``room.desk`` in a file, its clock ending now: run 1 done, 2 waiting,
    3 failed, 4 cancelled, 5 stuck (due an hour ago)."""
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    engine = sa.create_engine(url)
    room.desk(engine, start=datetime.now(UTC) - timedelta(days=4, hours=1))
    engine.dispose()
    return url


def runs(url: str, *args: str) -> Result:
    return CliRunner(env={"COLUMNS": "200"}).invoke(
        cli, ["runs", args[0], "--app", APP, "--database", url, *args[1:]]
    )


def document(url: str, *args: str, code: int = 0) -> Any:
    result = runs(url, *args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def table(result: Result) -> list[list[str]]:
    """The rows of a printed table, each cell split on runs of two spaces or more."""
    assert result.exit_code == 0, result.output
    return [re.split(r"\s{2,}", line.strip()) for line in result.stdout.splitlines()]


def test_the_list_says_where_each_run_stands_newest_first(url: str) -> None:
    head, *rows = table(runs(url, "list"))
    assert head == ["run", "flow", "ticket", "status", "where it stands", "started"]
    assert [row[:5] for row in rows] == [
        ["5", "Listen", "5", "running, stuck", "due to start"],
        ["4", "Listen", "4", "cancelled", "cancelled by olga: duplicate"],
        [
            "3",
            "Hand over",
            "3",
            "failed",
            "Hand over failed: the command refused: the desk said no",
        ],
        ["2", "Listen", "2", "waiting", rows[3][4]],
        ["1", "Quick", "1", "done", "the flow ended after its last step"],
    ]
    assert rows[3][4].startswith(
        "Waits at Reply (position 2) for the ticket replied event; gives up at "
    )
    assert rows[0][5].endswith("(1h ago)") and rows[4][5].endswith("(4d 1h ago)")


def test_the_list_is_filtered_and_paged(url: str) -> None:
    def listed(*args: str) -> list[int]:
        return [run["id"] for run in document(url, "list", *args)["runs"]]

    assert listed("--status", "stuck") == [5]
    assert listed("--status", "failed", "--status", "STUCK") == [5, 3]
    assert listed("--flow", "listen", "--older-than", "2d") == [2]
    assert listed("--newer-than", "1 day 2 hours") == [5, 4]
    assert listed("--record", "3") == [3]
    first = document(url, "list", "--limit", "2")
    assert ([run["id"] for run in first["runs"]], first["next_before"]) == ([5, 4], 4)
    assert listed("--limit", "2", "--before", "4") == [3, 2]
    assert listed("--status", "stuck", "--stuck-after", "2h") == []

    paged = runs(url, "list", "--limit", "2")
    assert paged.stdout.splitlines()[-1] == "more: --before 4"
    assert runs(url, "list", "--status", "done", "--before", "1").stdout == (
        "no runs on this page\n"
    )


def test_a_run_in_json_carries_where_it_waits_and_its_failure_envelope(url: str) -> None:
    found = {run["id"]: run for run in document(url, "list")["runs"]}
    [waits] = found[2]["waiting"]
    assert (waits["title"], waits["awaits"], waits["event"]) == ("Reply", "event", "ticket.replied")
    assert waits["sentence"].startswith("Waits at Reply (position 2) for the ticket replied event")
    assert found[3]["error"]["code"] == "command.refused"
    assert found[3]["status"] == "failed" and found[3]["waiting"] == []
    assert set(found[3]) == {
        "id",
        "flow",
        "flow_id",
        "record",
        "tenant",
        "status",
        "started_at",
        "ended_at",
        "started_by",
        "start_key",
        "reason",
        "error",
        "restarted_as",
        "waiting",
        "stuck",
    }
    assert [run["id"] for run in found.values() if run["stuck"]] == [5]


def test_what_cannot_be_used_is_refused_in_one_line_with_exit_status_2(url: str) -> None:
    for args, said in (
        (
            ["list", "--status", "stuk", "--flow", "Lisen"],
            "Error: status: there is no status 'stuk' — did you mean 'stuck'? (statuses: "
            "running, waiting, done, failed, cancelled, stuck); flow: there is no flow "
            "'Lisen' — did you mean 'Listen'?",
        ),
        (
            ["list", "--older-than", "2 dayz"],
            "Error: older_than: '2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'",
        ),
        (["show", "99"], "Error: there is no run 99"),
        (
            ["cancel", "2", "two", "--operator", "olga"],
            "Error: there is no run 'two': a run's id is a whole number from 1 to "
            "9223372036854775807",
        ),
        (["cancel", "2", "--operator", " "], "Error: name the operator"),
    ):
        result = runs(url, *args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stdout == ""
        assert result.stderr.strip().startswith(said), (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    assert document(url, "list", "--status", "waiting")["runs"][0]["status"] == "waiting"


def test_show_tells_a_failed_runs_story_in_words(url: str) -> None:
    result = runs(url, "show", "3")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "Run 3: Hand over on ticket 3 — failed"
    said = dict(
        re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in lines[1 : lines.index("History:")]
    )
    assert said["error code"] == "command.refused"
    assert said["why"] == "Hand over failed: the command refused: the desk said no"
    # Whether a retry can help is said once, in words; the flags stay in the JSON.
    assert said["retrying"] == (
        "Retrying will not help until what it failed on is put right: the desk said no."
    )
    assert not [line for line in lines if "retryable" in line]
    error = document(url, "show", "3")["run"]["error"]
    assert (error["retryable"], error["details"]["cause"]["retryable"]) == (False, False)
    assert document(url, "show", "3")["run"]["reason"].startswith("step 'Hand over' (assign,")
    history = lines[lines.index("History:") + 1 :]
    assert [line.split("  ")[2] for line in history] == [
        "Started Warn",
        "Warn: Could not tell the assignee: the record's assignee is empty",
        "Finished Warn",
        "Started Hand over",
        "Hand over: Handed over",
        "Hand over failed: the command refused: the desk said no",
        "Run failed: Hand over failed: the command refused: the desk said no",
    ]
    assert "Handed over" in history[4] and "(position" not in history[4]

    shown = document(url, "show", "2")
    assert (shown["run"]["status"], shown["run"]["stuck"]) == ("waiting", False)
    assert document(url, "show", "5")["run"]["stuck"] is True
    stuck = runs(url, "show", "5")
    assert stuck.stdout.splitlines()[0] == (
        "Run 5: Listen on ticket 5 — running, stuck: no worker has taken its work"
    )
    assert [line["sentence"] for line in shown["history"]][:2] == [
        "Started Ask",
        "Told ann (requester): Any news",
    ]


def test_acting_on_several_runs_says_each_outcome_and_exits_1_when_any_was_refused(
    url: str,
) -> None:
    result = runs(url, "cancel", "1", "2", "99", "--operator", "olga", "--reason", "closing")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "refused: run 1 has already ended (done)",
        "run 2 cancelled",
        "refused: there is no run 99",
    ]
    done = runs(url, "redrive", "5", "--operator", "olga")
    assert (done.exit_code, done.stdout) == (0, "run 5 redriven: due now, its lease freed\n")

    restarted = document(url, "restart", "3", "4", "--operator", "bob", code=1)
    assert restarted == {
        "action": "restart",
        "dry_run": False,
        "done": 1,
        "refused": 1,
        "outcomes": [
            {
                "run": 3,
                "done": True,
                "code": None,
                "refusal": None,
                "restarted_as": 6,
                "sentence": "run 3 restarted as run 6",
            },
            {
                "run": 4,
                "done": False,
                "code": "run_not_failed",
                "refusal": "run 4 has not failed (cancelled); only a failed run is restarted",
                "restarted_as": None,
                "sentence": "run 4 has not failed (cancelled); only a failed run is restarted",
            },
        ],
    }


def test_a_dry_run_keeps_nothing(url: str) -> None:
    before = document(url, "list")
    result = runs(url, "retry", "3", "2", "--operator", "olga", "--dry-run")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "run 3 would be retried",
        "refused: run 2 has not failed (waiting)",
    ]
    assert document(url, "list") == before
    assert len(document(url, "journal")["entries"]) == 1


def test_the_journal_and_the_outbox(url: str) -> None:
    assert runs(url, "retry", "3", "--operator", "bob", "--reason", "desk is back").exit_code == 0
    lines = runs(url, "journal").stdout.splitlines()
    assert [line.split("  ", 1)[1] for line in lines] == [
        "bob retried run 3 (ticket 3): desk is back",
        "olga cancelled run 4 (ticket 4): duplicate",
    ]
    entries = document(url, "journal", "--action", "CANCEL")["entries"]
    assert [(e["operator"], e["action"], e["run"], e["detail"]) for e in entries] == [
        ("olga", "cancel", 4, {"reason": "duplicate"})
    ]
    assert document(url, "journal", "--operator", "nobody") == {"entries": [], "next_before": None}
    assert runs(url, "journal", "--run", "2").stdout == "no actions journaled\n"

    head, *rows = table(runs(url, "notices"))
    assert head == ["notice", "run", "state", "to", "message", "written"]
    assert [row[:5] for row in rows] == [
        ["4", "4", "pending", "ann (requester)", "T4: Any news"],
        ["3", "3", "undeliverable", "assignee", "the record's assignee is empty"],
        ["2", "2", "pending", "ann (requester)", "T2: Any news"],
        ["1", "1", "delivered", "ann (requester)", "T1: Seen."],
    ]
    pending = document(url, "notices", "--state", "pending")
    assert [(n["run"], n["state"]) for n in pending["notices"]] == [(4, "pending"), (2, "pending")]
    assert pending["next_before"] is None
    [nobody] = document(url, "notices", "--state", "Undeliverable")["notices"]
    assert (nobody["recipient"], nobody["problem"]) == (None, "the record's assignee is empty")
    assert runs(url, "notices", "--state", "sent").exit_code == 2


def test_help_says_what_each_command_does_and_what_the_exit_statuses_mean() -> None:
    result = CliRunner().invoke(cli, ["runs", "--help"])
    assert result.exit_code == 0
    for name in ("list", "show", "cancel", "retry", "redrive", "restart", "journal", "notices"):
        assert f"  {name} " in result.stdout, name
    for args in (["runs", "list"], ["runs", "cancel"]):
        shown = CliRunner().invoke(cli, [*args, "--help"]).stdout
        assert "Exit status: 0 done; 1 a verdict (an action refused for some run" in shown
    assert "--operator NAME" in CliRunner().invoke(cli, ["runs", "restart", "--help"]).stdout


@pytest.mark.slow
def test_an_operator_cancels_runs_from_a_real_shell(url: str) -> None:
    args = ["runs", "cancel", "2", "1", "--app", APP, "--database", url, "--operator", "olga"]
    done = forked.run(
        [sys.executable, "-m", "flowrunner", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "run 2 cancelled",
        "refused: run 1 has already ended (done)",
    ]
    assert "Traceback" not in done.stderr


def test_on_a_tenant_binding_each_command_names_the_tenant_and_sees_only_its_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    engine = sa.create_engine(url)
    mounted = desk.runner(engine)
    with engine.begin() as conn:
        for tenant in ("acme", "globex"):
            flow = mounted.save_flow(
                conn, {"name": "Triage", "start": "created", "tenant_id": tenant}
            )
            step = {"flow_id": flow, "position": 1, "kind": "waitFor", "event": "desk.replied"}
            mounted.save_step(conn, {**step, "tenant_id": tenant})
    driver = testing.FlowDriver(mounted)
    driver.create({"id": 1, "tenant_id": "acme", "status": "new"})
    driver.create({"id": 2, "tenant_id": "globex", "status": "new"})
    engine.dispose()
    (tmp_path / "shared_desk_zz.py").write_text(
        "import sqlalchemy as sa\nimport desk\n\n\n"
        "def runner(url=None):\n    return desk.runner(sa.create_engine(url))\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)

    def invoke(*args: str) -> Result:
        app = ["--app", "shared_desk_zz:runner", "--database", url]
        return CliRunner().invoke(cli, ["runs", args[0], *app, *args[1:]])

    refused = invoke("list")
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (
        "Error: desk_ticket records belong to tenants: name the tenant"
    )
    listed = json.loads(invoke("list", "--tenant", "acme", "--json").stdout)
    assert [(run["record"], run["tenant"]) for run in listed["runs"]] == [("1", "acme")]
    globex_run = json.loads(invoke("list", "--tenant", "globex", "--json").stdout)["runs"][0]
    cancelled = invoke("cancel", str(globex_run["id"]), "--tenant", "acme", "--operator", "ann")
    assert cancelled.exit_code == 1
    assert cancelled.stdout == f"refused: there is no run {globex_run['id']}\n"
    assert invoke("show", str(globex_run["id"]), "--tenant", "acme").exit_code == 2
    sys.modules.pop("shared_desk_zz", None)
