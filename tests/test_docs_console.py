"""docs/console.md runs, in order, as one program — a FastAPI app mounting the console,
tried with Starlette's TestClient — from flowrunner's wheel, and prints what it says, once
on SQLite and once on PostgreSQL; its command lines parse, its pictures are there, and the
pages it lists are the console's routes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from guides import run_guide, said_pairs
from installed import Installed
from test_docs_cli import command_lines, parses

from flowrunner.web.console import (
    deliveries_pages,
    flows_pages,
    jobs_pages,
    ops_pages,
    record_pages,
    runs_pages,
)

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "console.md"


@pytest.mark.slow
def test_the_console_guide_runs_and_prints_what_it_says(
    database_url: str, wheel: Installed
) -> None:
    guide = run_guide(
        "console.md",
        blocks=7,
        module="console_guide",
        own_module=True,
        python=wheel.python,
        env={"ORDERS_DATABASE_URL": database_url},
    )
    guide.check(said_pairs(guide.text), at_least=7)


def test_its_command_lines_parse() -> None:
    shown = command_lines(DOC)
    assert len(shown) >= 3
    for args in shown:
        assert args[0] == "console"
        parses(args)


def test_its_pictures_are_there() -> None:
    pictures = re.findall(r"!\[[^\]]*\]\((images/[^)]+\.png)\)", DOC.read_text(encoding="utf-8"))
    assert len(pictures) >= 10
    for picture in pictures:
        path = DOC.parent / picture
        assert path.is_file(), picture
        assert path.stat().st_size < 250_000, f"{picture} is too big for the docs"


def test_the_pages_it_lists_are_the_consoles() -> None:
    listed = re.findall(r"^\| [A-Za-z ]+ \| `(/[^`]*)` \|", DOC.read_text(encoding="utf-8"), re.M)
    routes = {
        re.sub(r"\{[a-z_]+\}", "ID", path)
        for module in (
            flows_pages,
            record_pages,
            runs_pages,
            ops_pages,
            jobs_pages,
            deliveries_pages,
        )
        for method, path, _handler in module.ROUTES
        if method == "GET"
    }
    assert listed and set(listed) <= routes, set(listed) - routes
