"""``flowrunner runs retry --status failed --error gateway``: an operator retries every
run a filter matches from the command line — the count asked to confirm first (unless
``--yes``), each run journaled once under their name, the refused ones said with their
reasons, a summary at the end; the one-run forms keep working. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator

import gateway
import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result
from sizes import sized

from flowrunner import testing
from flowrunner.cli import cli

DOWN = sized(130, 300)  # more than one batch (bulk.BATCH, 100)


SMALL = 10


def mounted(url: str, down: int) -> Iterator[testing.FlowDriver]:
    engine = sa.create_engine(url)
    yield gateway.shop(engine, down=down)
    engine.dispose()
    while gateway.MOUNTED:
        gateway.MOUNTED.pop().dispose()


@pytest.fixture
def shop(database_url: str) -> Iterator[testing.FlowDriver]:
    """The shop with DOWN runs failed on the gateway."""
    yield from mounted(database_url, DOWN)


@pytest.fixture
def small(database_url: str) -> Iterator[testing.FlowDriver]:
    """The shop with SMALL runs failed on the gateway."""
    yield from mounted(database_url, SMALL)


def runs(url: str, *args: str, answer: str | None = None) -> Result:
    return CliRunner(env={"COLUMNS": "200"}).invoke(
        cli,
        ["runs", args[0], "--app", "gateway:app", "--database", url, "--tenant", "acme", *args[1:]],
        input=answer,
    )


def test_retrying_every_run_of_one_error_asks_for_the_count_then_retries_each_once(
    shop: testing.FlowDriver, database_url: str
) -> None:
    asked = ("retry", "--operator", "olga", "--status", "failed", "--error", "GATEWAY")
    declined = runs(database_url, *asked, answer="n\n")
    assert declined.exit_code == 1, declined.output
    assert f"Retry {DOWN} runs? [y/N]: n\nAborted!" in declined.stderr
    assert shop.runner.journal(tenant="acme").rows == ()
    done = runs(database_url, *asked, answer="y\n")
    assert done.exit_code == 0, done.output
    assert done.stdout == f"{DOWN} done, 0 refused\n"
    entries = shop.runner.journal(tenant="acme", limit=500).rows
    assert sorted(e.run_id or 0 for e in entries) == list(range(1, DOWN + 1))
    assert {(e.operator, e.action) for e in entries} == {("olga", "retry")}
    # Nothing failed with that error any more: nothing to ask.
    assert runs(database_url, *asked).stdout == "no run matches: nothing to retry\n"
    shop.run_until_idle()
    assert shop.runner.count_runs(tenant="acme")["failed"] == 2
    assert shop.runner.count_runs(tenant="globex")["failed"] == 3


def test_with_yes_nothing_is_asked_and_refusals_are_said(
    small: testing.FlowDriver, database_url: str
) -> None:
    new = small.runner.restart(9, operator="ann", tenant="acme")
    result = runs(
        database_url,
        "retry",
        "--operator",
        "olga",
        "--error",
        "gateway",
        "--status",
        "failed",
        "--yes",
    )
    assert result.exit_code == 1
    assert result.stdout == (
        f"refused: run 9 was restarted as run {new}; that run goes on\n"
        f"{SMALL - 1} done, 1 refused\n"
    )
    cancelled = runs(
        database_url, "cancel", "--operator", "olga", "--error", "ledger", "--yes", "--json"
    )
    assert cancelled.exit_code == 0, cancelled.output
    said = json.loads(cancelled.stdout)
    assert (said["counted"], said["done"], said["refused"]) == (2, 2, 0)
    assert [o["run"] for o in said["outcomes"]] == [SMALL + 2, SMALL + 1]


def test_the_one_run_forms_keep_working_and_a_filter_or_runs_is_needed(
    small: testing.FlowDriver, database_url: str
) -> None:
    one = runs(database_url, "retry", "3", "--operator", "olga")
    assert (one.exit_code, one.stdout) == (0, "run 3 retried: its failed step runs again\n")
    both = runs(database_url, "retry", "3", "--operator", "olga", "--status", "failed")
    assert both.exit_code == 2 and "name the runs, or give a filter, not both" in both.stderr
    neither = runs(database_url, "cancel", "--operator", "olga")
    assert neither.exit_code == 2 and "name the runs (RUN...), or give a filter" in neither.stderr
    dry = runs(database_url, "retry", "--operator", "olga", "--error", "ledger", "--dry-run")
    assert dry.stdout == "2 would be done, 0 refused\n"
    typo = runs(database_url, "retry", "--operator", "olga", "--status", "faild")
    assert typo.exit_code == 2 and "did you mean 'failed'?" in typo.stderr
    assert [e.run_id for e in small.runner.journal(tenant="acme")] == [3]
