"""``flowrunner query``: canonical form, SQL with separate parameters, the result, clean errors."""

from __future__ import annotations

import json
import sys

import forked
import pytest
from click.testing import CliRunner

from flowrunner.cli import cli


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["query", *args])
    return result.exit_code, result.stdout, result.stderr


def test_prints_canonical_form_sql_parameters_and_result() -> None:
    record = {"status": "open", "amount": 250, "due": "2025-01-02"}
    code, out, _ = _run(
        "STATUS = open AND amount > 100 and due < today() + 2 days",
        "--record",
        json.dumps({"STATUS": "open", **record}),
        "--now",
        "2025-01-01T00:00:00Z",
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "condition: STATUS = 'open' and amount > 100 and due < today() + 2 days"
    assert lines[1].startswith("sql (sqlite): SELECT * FROM records WHERE ")
    assert "'open'" not in lines[1] and "?" in lines[1]
    assert "  param_1 = 'open'" in lines
    assert "  param_3 = datetime.date(2025, 1, 3)" in lines
    assert lines[-1] == "matches: true"


def test_postgresql_sql_and_a_false_result() -> None:
    code, out, _ = _run(
        "title contains 'x' and title < m",
        "--sql",
        "postgresql",
        "--columns",
        '{"title": "text"}',
        "--record",
        '{"title": "no"}',
    )
    assert code == 0
    assert "strpos(records.title, %(param_1)s::VARCHAR) > 0" in out
    assert '(records.title COLLATE "C") < %(param_2)s::VARCHAR' in out
    assert out.splitlines()[-1] == "matches: false"


def test_no_record_means_no_result_line() -> None:
    code, out, _ = _run("a is null")
    assert code == 0
    assert "matches" not in out


def test_query_error_prints_message_and_caret() -> None:
    code, out, err = _run("status = 'open")
    assert code == 2
    assert out == ""
    assert err == (
        "Error: line 1, column 10: this text has no closing quote — end it with '\n"
        "status = 'open\n"
        "         ^\n"
    )


def test_type_error_against_columns() -> None:
    code, _, err = _run("amount = abc", "--columns", '{"amount": "number"}')
    assert code == 2
    assert "'amount' holds a number, and 'abc' is not a number" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["a = 1", "--record", "[1]"], "--record: must be a JSON object"),
        (["a = 1", "--record", "{"], "--record: is not JSON"),
        (["a = 1", "--columns", '{"a": "money"}'], "conditions know: text, number"),
        (["a = 1", "--now", "soon"], "'soon' is not an ISO 8601 moment"),
        (["a = 1", "--sql", "oracle"], "'oracle' is not one of"),
    ],
)
def test_bad_options_are_usage_errors(args: list[str], message: str) -> None:
    code, _, err = _run(*args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_event_payload() -> None:
    code, out, _ = _run("event.decision = no", "--event", '{"decision": "no"}', "--record", "{}")
    assert code == 0
    assert out.splitlines()[-1] == "matches: true"


@pytest.mark.slow
def test_the_installed_command() -> None:
    done = forked.run(
        [sys.executable, "-m", "flowrunner.cli", "query", "x = 'a", "--record", "{}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if "No module named flowrunner.cli.__main__" in done.stderr:
        done = forked.run(
            [sys.executable, "-c", "from flowrunner.cli import main; main()", "query", "x = 'a"],
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 2
    assert done.stderr.startswith("Error: line 1, column 5: this text has no closing quote")
    assert "Traceback" not in done.stderr
