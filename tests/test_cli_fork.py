"""``flowrunner runs fork``: an operator forks an order's fulfilment from 'charge' on the
command line, once the card is on file; ``runs show`` tells the fork's story, and a child
run's. Through click's runner, on a SQLite file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ordering
import pytest
from click.testing import CliRunner, Result

from flowrunner import testing
from flowrunner.cli import cli

APP = "ordering:runner"


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    """Order 1 (ann) whose fulfilment (run 1) failed at its charge: no card on file. Its
    credit check is run 2."""
    ordering.BUREAU.clear()
    ordering.BUREAU["ann"] = 720
    ordering.CARDS.clear()
    url = f"sqlite:///{tmp_path / 'orders.db'}"
    runner = ordering.runner(url)
    driver = testing.FlowDriver(runner)
    driver.create(ordering.purchase_order(1, "ann"))
    run_id = runner.start_workflow("fulfil", {"customer": "ann"}, operator="olga", record=1)
    driver.advance("1 hour")
    assert (run_id, runner.get_run(run_id).status) == (1, "failed")
    runner.engine.dispose()
    yield url
    ordering.BUREAU.clear()
    ordering.CARDS.clear()


def runs(url: str, *args: str) -> Result:
    return CliRunner(env={"COLUMNS": "200"}).invoke(
        cli, ["runs", args[0], "--app", APP, "--database", url, *args[1:]]
    )


def test_an_operator_forks_a_run_from_a_step_and_show_tells_both_stories(url: str) -> None:
    ordering.CARDS["ann"] = "visa-4242"
    forked = runs(url, "fork", "1", "--from", "charge", "--operator", "olga", "--reason", "card")
    assert forked.exit_code == 0, forked.output
    assert forked.stdout == "run 1 forked from 'charge' as run 3\n"

    shown = runs(url, "show", "3")
    assert shown.exit_code == 0, shown.output
    assert "Run 3: fulfil on PO-1 — running" in shown.stdout
    assert "by olga" in shown.stdout
    assert (
        "Forked by olga from run 1 at 'charge' (2 steps before it kept as recorded): card"
        in shown.stdout
    )
    old = runs(url, "show", "1").stdout
    assert "olga forked the run from 'charge' as run 3: card" in old
    child = runs(url, "show", "2").stdout
    assert "Run 2: credit_check on PO-1 — done" in child
    assert "by run 1" in child and "Started by run 1 at its step 'credit_check'" in child
    journal = runs(url, "journal").stdout
    assert "olga forked run 1 (purchase_order 1) from 'charge' as run 3: card" in journal

    again = runs(url, "fork", "1", "--from", "reserve", "--operator", "olga", "--json")
    assert again.exit_code == 0, again.output
    document: dict[str, Any] = json.loads(again.stdout)
    assert document == {
        "run": 1,
        "from": "reserve",
        "forked_as": 4,
        "sentence": "run 1 forked from 'reserve' as run 4",
    }


def test_what_cannot_be_forked_is_refused_in_one_line_with_exit_status_2(url: str) -> None:
    never = runs(url, "fork", "1", "--from", "ship", "--operator", "olga")
    assert never.exit_code == 2
    assert never.stderr == (
        "Error: run 1 never reached a step 'ship': it cannot be forked there "
        "(its steps: 'reserve', 'credit_check', 'charge')\n"
    )
    assert runs(url, "fork", "one", "--from", "ship", "--operator", "olga").exit_code == 2
    missing = runs(url, "fork", "1", "--from", "charge")
    assert missing.exit_code == 2 and "--operator" in missing.stderr
    listed = CliRunner().invoke(cli, ["runs", "--help"]).stdout
    assert "fork" in listed
