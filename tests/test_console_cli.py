"""``flowrunner console`` refuses to start without a reader it can name: no token (and no
application function) is one line and exit status 2, before anything is served or
loaded; so is a token too short to be a lock, or a --principal that is not there. (It
serving, with a token, on 127.0.0.1: the browser tests.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from flowrunner.cli import cli
from flowrunner.cli.console_cmd import _loopback

APP = "fixtures.purchase_orders.app:runner"


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["console", *args], env=env)
    return result.exit_code, result.stderr.strip()


def test_without_a_token_or_the_apps_function_it_refuses_to_start(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'shop.db'}"
    code, said = run("--app", APP, "--database", database, env={"FLOWRUNNER_CONSOLE_TOKEN": ""})
    assert code == 2
    assert said == (
        "Error: the console must know who reads it: give --token (or set "
        "FLOWRUNNER_CONSOLE_TOKEN), or --principal MODULE:ATTR, the application's function "
        "from a request to a Principal"
    )
    assert not (tmp_path / "shop.db").exists()  # the app was not even loaded


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (["--token", "short"], "Error: a token has at least 16 characters: it is the only lock"),
        (
            ["--token", "a-long-enough-token", "--principal", "tests.nowhere:who"],
            "Error: give --token or --principal, not both",
        ),
        (
            ["--principal", "fixtures.purchase_orders.app:nobody"],
            "Error: --principal fixtures.purchase_orders.app:nobody: cannot find it",
        ),
        (
            ["--principal", "fixtures.purchase_orders.app:COMMANDS"],
            "Error: --principal fixtures.purchase_orders.app:COMMANDS is not a function from "
            "a request to a Principal",
        ),
    ],
)
def test_what_cannot_be_used_is_one_line(args: list[str], refusal: str) -> None:
    code, said = run("--app", APP, *args)
    assert code == 2
    assert said.startswith(refusal)
    assert "\n" not in said


def test_the_token_may_come_from_the_environment() -> None:
    # A short one from the environment is refused as a short option is: it was read.
    code, said = run("--app", APP, env={"FLOWRUNNER_CONSOLE_TOKEN": "short"})
    assert (code, said) == (2, "Error: a token has at least 16 characters: it is the only lock")


def test_it_listens_on_this_machine_unless_told_otherwise() -> None:
    command = cli.get_command(None, "console")  # type: ignore[arg-type]
    assert command is not None
    host = next(p for p in command.params if p.name == "host")
    assert host.default == "127.0.0.1"
    assert _loopback("127.0.0.1") and _loopback("::1") and _loopback("localhost")
    assert not _loopback("0.0.0.0") and not _loopback("example.com")
