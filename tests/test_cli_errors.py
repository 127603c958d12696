"""Every command refuses bad input the same way: ``Error: <sentence>`` on one line, exit 2;
an unexpected error is one line too, exit 1. In process, and once per command as a real
process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import forked
import migrated
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from flowrunner import cli as cli_mod
from flowrunner.cli import cli
from flowrunner.flows import files

ROOT = Path(__file__).resolve().parent.parent
APP = "fixtures.tickets.app:runner"
UNREACHABLE = "postgresql+psycopg://nobody@127.0.0.1:1/none"


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A migrated SQLite database the tickets app can use."""
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    engine = sa.create_engine(url)
    migrated.upgrade(engine)
    engine.dispose()
    return url


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stderr


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("Error: "), err
    return lines[0]


def bad_inputs(tmp_path: Path, url: str) -> list[tuple[list[str], str]]:
    broken_yaml = tmp_path / "broken.yaml"
    broken_yaml.write_text("flows: [", encoding="utf-8")
    not_text = tmp_path / "binary.csv"
    not_text.write_bytes(b"\xff\xfe\x00\x01")
    held = tmp_path / "held"
    held.mkdir()
    (held / "tickets.db").write_text("", encoding="utf-8")
    missing_dir = f"sqlite:///{tmp_path / 'no' / 'such' / 'x.db'}"
    start_where = ["flows", "start", "ticket", "--app", APP, "--database", url, "--where"]
    return [
        (["query", "status = 'open"], "Error: line 1, column 10: this text has no closing"),
        (["query", "due < now() + 99999999 years"], "is longer than a duration can be"),
        (["query", "at = 9999-12-31T23:59-14:00"], "is outside the calendar"),
        (["migrate", "up", "--database", missing_dir], "cannot use the database: unable to open"),
        (["migrate", "status", "--database", UNREACHABLE], "cannot use the database:"),
        (["migrate", "status", "--app", "no_such_module_zz:runner"], "cannot import"),
        (["flows", "import", str(broken_yaml), "--app", APP, "--database", url], "not readable"),
        (["flows", "import", str(not_text), "--app", APP, "--database", url], "is not UTF-8"),
        (["flows", "export", "--app", "nocolon", "--database", url], "must look like MODULE:ATTR"),
        (["flows", "export", "--app", APP, "--database", url, "-o", "/no/such/dir/x.yaml"], ""),
        (["flows", "validate", "--app", APP, "--database", UNREACHABLE], "cannot use the database"),
        (["flows", "validate", "--app", "os:path", "--database", url], "neither a FlowRunner"),
        (
            [*start_where, "x ="],
            "Error: --where: line 1, column 4: expected a value after '='",
        ),
        (
            [*start_where, "title = ٣"],
            "Error: --where: line 1, column 9: found '٣'",
        ),
        (
            [*start_where, "due_at < now() + 2 dayz"],
            "'2 dayz' is not a duration",
        ),
        (
            [*start_where, "due_at > 0001-01-01T00:00+01:00"],
            "is outside the calendar: in UTC it falls before 0001-01-01",
        ),
        (["flows", "start", "order", "--app", APP, "--database", url], "is mounted on 'ticket'"),
        (
            ["worker", "--app", APP, "--database", f"sqlite:///{tmp_path / 'new.db'}", "--once"],
            "flowrunner migrate up",
        ),
        (["demo", "--dir", str(held)], "already holds a demo"),
    ]


def test_every_command_refuses_bad_input_in_one_line(tmp_path: Path, url: str) -> None:
    for args, expected in bad_inputs(tmp_path, url):
        code, err = invoke(*args)
        assert code == 2, (args, err)
        if args[0] == "query" and "line 1" in err:
            # `query` shows the condition and a caret under the mistake after the line.
            err = err.splitlines()[0]
        assert expected in one_line(err), (args, err)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["query", "a = 1", "--record", "[" * 50_000], "--record: nests too deeply to read"),
        (["query", "a = 1", "--record", '{"a": ' + "1" * 5000 + "}"], "too long to read"),
        (["query", "a = 1", "--now", "9999-12-31T23:59-14:00"], "is not an ISO 8601 moment"),
        (["flows", "validate", "--app", APP, "--database", "not a url"], "is not a database URL"),
        (["migrate", "up", "--database", "nosuchdb://x"], "names no database SQLAlchemy knows"),
        (["flows", "import", "nowhere.yaml", "--app", APP], "does not exist"),
        (["worker", "--app", APP, "--poll", "soon"], "'soon' is not a valid float"),
    ],
)
def test_option_errors_are_one_line_too_with_where_the_help_is(
    args: list[str], message: str
) -> None:
    code, err = invoke(*args)
    assert code == 2
    line = one_line(err)
    assert message in line and "Traceback" not in err
    assert line.endswith(" --help')") and f"(see 'cli {args[0]}" in line


def test_a_group_given_no_command_shows_its_help() -> None:
    code, err = invoke("runs")
    assert code == 2
    assert err.startswith("Usage: ") and "Commands:" in err


def test_a_condition_past_the_calendar_at_now_is_decided(url: str) -> None:
    code, _ = invoke(
        "query",
        "due < now() + 100 years",
        "--now",
        "9990-01-01T00:00:00Z",
        "--record",
        '{"due": "2025-01-01T00:00:00Z"}',
    )
    assert code == 0


def test_verdicts_are_exit_status_1(tmp_path: Path, url: str) -> None:
    bad_rows = tmp_path / "rows.yaml"
    bad_rows.write_text(
        "- name: Broken\n  start: created\n  steps:\n"
        "    - {position: ٣, kind: wait, duration: 99999999 years}\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        cli, ["flows", "import", str(bad_rows), "--app", APP, "--database", url]
    )
    assert result.exit_code == 1
    assert result.stderr.splitlines()[1:] == [
        "  flow 'Broken', step (wait, position ٣): position: '٣' is not a whole number",
        "  flow 'Broken', step (wait, position ٣): duration: "
        "'99999999 years' is longer than a duration can be (100 years)",
    ]
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert invoke("migrate", "status", "--database", fresh, "--check")[0] == 1


def test_an_unexpected_error_is_one_line_and_exit_1(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(files, "export_flows", broken)
    code, err = invoke("flows", "export", "--app", APP, "--database", url)
    assert code == 1
    assert one_line(err) == (
        "Error: unexpected ZeroDivisionError: division by zero; second line "
        f"(set {cli_mod.TRACEBACK_VARIABLE}=1 to see where)"
    )
    monkeypatch.setenv(cli_mod.TRACEBACK_VARIABLE, "1")
    with pytest.raises(ZeroDivisionError):
        invoke("flows", "export", "--app", APP, "--database", url)


def test_an_app_that_fails_to_load_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "boom_app_zz.py").write_text("raise RuntimeError('no config')\n")
    (tmp_path / "factory_app_zz.py").write_text(
        "def runner(url=None):\n    raise KeyError('DATABASE_URL')\n"
    )
    monkeypatch.chdir(tmp_path)
    code, err = invoke("flows", "validate", "--app", "boom_app_zz:runner")
    assert (code, one_line(err)) == (
        2,
        "Error: cannot load --app boom_app_zz:runner: RuntimeError: no config",
    )
    code, err = invoke("worker", "--app", "factory_app_zz:runner", "--once")
    assert (code, one_line(err)) == (
        2,
        "Error: cannot load --app factory_app_zz:runner: KeyError: 'DATABASE_URL'",
    )


def test_help_says_what_the_exit_statuses_mean() -> None:
    for args in ([], ["flows"], ["migrate"], ["query"]):
        result = CliRunner().invoke(cli, [*args, "--help"])
        assert result.exit_code == 0
        assert "Exit status: 0 done; 1 a verdict" in result.stdout


# -- the same, as real processes ---------------------------------------------------------------


def _process(args: list[str]) -> subprocess.CompletedProcess[str]:
    return forked.run(
        [sys.executable, "-m", "flowrunner", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


@pytest.mark.slow
def test_one_real_process_per_command(tmp_path: Path, url: str) -> None:
    cases = bad_inputs(tmp_path, url)
    one_per_command: dict[str, tuple[list[str], str]] = {}
    for args, expected in cases:
        command = " ".join(args[:2]) if args[0] in ("flows", "migrate") else args[0]
        one_per_command.setdefault(command, (args, expected))
    assert sorted(one_per_command) == [
        "demo",
        "flows export",
        "flows import",
        "flows start",
        "flows validate",
        "migrate status",
        "migrate up",
        "query",
        "worker",
    ]
    for args, expected in one_per_command.values():
        done = _process(args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stdout + done.stderr
        first = done.stderr.splitlines()[0]
        assert first.startswith("Error: ") and expected in first, (args, done.stderr)
        if args[0] != "query":
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
