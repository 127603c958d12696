"""``flowrunner authority lock`` and ``check`` on the help desk: the lock lists every kind,
timer, job and code workflow step with the principal it runs as and what it may call,
sorted and stable; once someone widens a grant, ``check`` fails (exit 1) with the
difference in sentences, and passes again once the widened grant is locked."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import forked
import pytest
from click.testing import CliRunner, Result

from flowrunner.authority import lock
from flowrunner.cli import cli

ROOT = Path(__file__).resolve().parent.parent
APP = "tests.authorities:runner"
WIDENED = "tests.authorities:widened"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'desk.db'}"


def authority(*args: str) -> Result:
    return CliRunner().invoke(cli, ["authority", *args], catch_exceptions=False)


def test_the_lock_lists_each_part_with_its_principal_sorted_and_stable(
    url: str, tmp_path: Path
) -> None:
    path = tmp_path / "authority.lock"
    written = authority("lock", "--app", APP, "--database", url, "--lock", str(path))
    assert written.exit_code == 0, written.output
    assert written.output == f"wrote {path}: 7 parts, each with what it may call\n"
    first = path.read_text()
    parts = [(e.part, e.runs_as, e.calls, e.may_call) for e in lock.read(first)]
    assert parts == [
        ("job nightly", "clock", ("close_stale",), ("close_stale", "escalate")),
        ("kind ask", "automation", ("request_approval",), ("request_approval",)),
        ("kind mail", "service-bot", ("send_mail",), ("send_mail",)),
        ("timer at due_at", "clock", ("escalate",), ("close_stale", "escalate")),
        (
            "workflow chase v1",
            "service-bot",
            ("request_approval", "send_mail"),
            ("send_mail",),
        ),
        ("workflow chase v1 step ask", "service-bot", ("request_approval",), ("send_mail",)),
        ("workflow chase v1 step mail", "service-bot", ("send_mail",), ("send_mail",)),
    ]
    assert 'name = "kind mail"\nruns_as = "service-bot"\n' in first
    authority("lock", "--app", APP, "--database", url, "--lock", str(path))
    assert path.read_text() == first  # the same grants write the same bytes


def test_check_fails_after_a_grant_is_widened_and_passes_after_lock(
    url: str, tmp_path: Path
) -> None:
    path = tmp_path / "authority.lock"
    authority("lock", "--app", APP, "--database", url, "--lock", str(path))
    agrees = authority("check", "--app", APP, "--database", url, "--lock", str(path))
    assert agrees.exit_code == 0
    assert agrees.output == f"{path} agrees with the application: 7 parts\n"

    # The mailer was granted delete_ticket: CI runs the real command, which fails.
    widened = forked.run(
        [
            sys.executable,
            "-m",
            "flowrunner",
            "authority",
            "check",
            "--app",
            WIDENED,
            "--database",
            url,
            "--lock",
            str(path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert widened.returncode == 1, widened.stderr
    said = widened.stdout.splitlines()
    assert said[0] == f"the application grants more or other than {path}:"
    assert (
        "  - kind mail runs as service-bot, which may now also call delete_ticket "
        "(authority.lock does not grant it)" in said
    )
    assert (
        "  - workflow chase v1 step mail runs as service-bot, which may now also call "
        "delete_ticket (authority.lock does not grant it)" in said
    )
    assert said[-1] == "review these, then run `flowrunner authority lock` to accept them"

    as_json = authority("check", "--app", WIDENED, "--database", url, "--lock", str(path), "--json")
    assert as_json.exit_code == 1

    relocked = authority("lock", "--app", WIDENED, "--database", url, "--lock", str(path))
    assert relocked.exit_code == 0
    again = authority("check", "--app", WIDENED, "--database", url, "--lock", str(path))
    assert again.exit_code == 0, again.output


def test_check_without_a_lock_says_how_to_write_one(url: str, tmp_path: Path) -> None:
    path = tmp_path / "authority.lock"
    missing = authority("check", "--app", APP, "--database", url, "--lock", str(path))
    assert missing.exit_code == 2
    assert f"there is no {path}: write it with `flowrunner authority lock`" in missing.output


def test_a_narrowed_or_removed_part_is_a_difference_too() -> None:
    locked = [
        lock.Entry("job purge", "clock", ("purge",), ("purge",)),
        lock.Entry("kind send", "bot", ("send",), ("send", "undo")),
    ]
    now = [
        lock.Entry("kind send", "bot", ("send",), ("send",)),
        lock.Entry("inbound paid", "payer", ("record_payment",), ("record_payment",)),
    ]
    assert lock.differences(locked, now) == [
        "inbound paid runs as payer, calling record_payment, which authority.lock does not "
        "list (it may call record_payment)",
        "authority.lock lists job purge as clock, which the application no longer has",
        "kind send runs as bot, which may no longer call undo (authority.lock still grants it)",
    ]


def test_a_lock_that_cannot_be_read_is_refused_with_a_sentence() -> None:
    with pytest.raises(lock.LockInvalid, match="write it again with `lock`"):
        lock.read("[[part]]\nname = 3\n")
    with pytest.raises(lock.LockInvalid, match="cannot be read"):
        lock.read("[[part\n")
