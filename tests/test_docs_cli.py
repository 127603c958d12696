"""docs/command-line.md and the README's command lines are real: each parses as the
command it names, and each example prints what the page says it prints."""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from running import mount, ticket

from flowrunner.cli import cli

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "command-line.md"
README = ROOT / "README.md"

# The page's application: a desk bound to desk.db, whose assign command refuses.
MYAPP = """\
import sqlalchemy as sa

from fixtures.tickets import app as tickets
from flowrunner import errors
from flowrunner.runner import flow_runner


def refuse(ctx):
    raise errors.CommandRefused("the desk said no")


runner = flow_runner(
    tickets.binding,
    sa.create_engine("sqlite:///desk.db"),
    commands={**tickets.COMMANDS, "assign_ticket": refuse},
)
"""

FLOWS = """
- name: Tell
  start: created
  condition: status = open
  steps:
    - {position: 1, kind: notify, title: Tell, audience: requester, message: Hello}
- name: Hand over
  start: created
  condition: status = handover
  steps:
    - {position: 1, kind: assign, title: Hand over, assign_to: triage}
"""


def command_lines(path: Path) -> list[list[str]]:
    """Each `flowrunner ...` line of the page's sh blocks, as arguments."""
    blocks = re.findall(r"```sh\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)
    lines = [line for block in blocks for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("flowrunner ")]


def parses(args: list[str]) -> None:
    """Parse ``args`` as the command they name, as click would, without running it."""
    ctx = click.Context(cli, info_name="flowrunner")
    command: click.Command = cli
    rest = list(args)
    while isinstance(command, click.Group):
        found = command.get_command(ctx, rest[0])
        assert found is not None, args
        ctx = click.Context(found, info_name=rest[0], parent=ctx)
        command, rest = found, rest[1:]
    command.make_context(ctx.info_name, rest, parent=ctx.parent)


def test_every_command_line_shown_parses() -> None:
    shown = command_lines(DOC)
    assert len(shown) >= 3
    for args in shown:
        parses(args)
    in_text = re.findall(r"`flowrunner ([^`]+)`", DOC.read_text(encoding="utf-8"))
    names = {" ".join(shlex.split(text)[:1]) for text in in_text}
    assert names >= {"query", "migrate", "flows", "worker", "prune", "runs", "demo"}


def test_the_readme_points_here_and_names_every_command() -> None:
    text = README.read_text(encoding="utf-8")
    assert "[docs/command-line.md](docs/command-line.md)" in text
    for command in ("query", "migrate", "flows", "worker", "prune", "runs", "demo"):
        assert f"`flowrunner {command}" in text, command


@pytest.fixture
def desk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The page's folder: myapp.py, and desk.db with five runs due (one will fail)."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'desk.db'}")
    driver = mount(engine, "tickets", flows=FLOWS)
    for n in range(1, 6):
        driver.create({**ticket(n), "status": "handover" if n == 5 else "open"}, run=False)
    engine.dispose()
    (tmp_path / "myapp.py").write_text(MYAPP, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("myapp", None)


def claims(sentence: str) -> tuple[list[str], int | None]:
    """What a "prints `...` and `...`, and exits 1." sentence says: the quoted outputs
    (up to the sentence's end, outside quotes) and the exit status, if it names one."""
    quoted: list[str] = []
    parts = sentence.split("`")
    for n, part in enumerate(parts):
        if n % 2:
            quoted.append(part)
        elif n and re.search(r"\.(\s|$)", part):
            exits = re.search(r"exits (\d)", part)
            return quoted, None if exits is None else int(exits.group(1))
    return quoted, None


def test_each_example_prints_what_the_page_says(desk: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    examples = re.findall(r"```sh\n(flowrunner [^\n]+)\n```\n\nprints (.+?)\n\n", text, re.S)
    assert len(examples) == 6
    for line, sentence in examples:
        result = CliRunner().invoke(cli, shlex.split(line)[1:])
        said, status = claims(sentence)
        assert said, sentence
        for claim in said:
            assert claim in result.stdout + result.stderr, (line, claim, result.output)
        if status is not None:
            assert result.exit_code == status, (line, result.output)
