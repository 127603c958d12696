"""``flowrunner demo`` as a newcomer meets it: it leaves no folder behind unless asked to
keep one, its tables are as wide as the terminal (unwrapped without one), and it ends
with three things to try next — command lines that parse, and run on what it kept."""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_docs_cli import parses

from flowrunner.cli import cli, demo

# A history line of the support desk's story, folded at 80 columns.
LONG_LINE = "Told bob (assignee): This ticket is due in four hours."


def suggested(output: str) -> list[list[str]]:
    """The command lines the demo ends with, as arguments."""
    tail = output.split("Next, try:")[1]
    return [shlex.split(line)[1:] for line in re.findall(r"^ {3}(flowrunner .+)$", tail, re.M)]


def test_without_dir_it_leaves_no_folder_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("COLUMNS", raising=False)
    result = CliRunner().invoke(cli, ["demo", "--only", "tickets"])
    assert result.exit_code == 0, result.output
    assert list(tmp_path.iterdir()) == []
    assert "The databases are in" not in result.output
    # No terminal: the tables are not folded at 80 columns.
    assert any(LONG_LINE in line for line in result.output.splitlines())
    # A run still open says where it waits, in the sentence the console and runs show.
    assert "   Waits at Give them two more days (position 4) until Mon 9 Mar 18:00\n" in (
        result.output
    )
    lines = suggested(result.output)
    assert len(lines) == 3 and lines[0] == ["demo", "--dir", "demo"]
    for args in lines:
        parses(args)


def test_with_dir_its_next_steps_run_on_what_it_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["demo", "--only", "tickets", "--dir", "kept"])
    assert result.exit_code == 0, result.output
    assert "The databases are in kept" in result.output
    lines = suggested(result.output)
    assert [args[0] for args in lines] == ["console", "diagram", "runs"]
    for args in lines:
        parses(args)
    for args in lines[1:]:  # the diagram and the runs: the console would serve forever
        ran = CliRunner().invoke(cli, args)
        assert ran.exit_code == 0, (args, ran.output)
    assert (tmp_path / "flow.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_its_width_is_the_terminals(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_terminal(fd: int) -> os.terminal_size:
        raise OSError("not a terminal")

    monkeypatch.setenv("COLUMNS", "123")
    assert demo.width() == 123
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((97, 30)))
    assert demo.width() == 97
    monkeypatch.setattr(os, "get_terminal_size", no_terminal)
    assert demo.width() == demo.UNWRAPPED
