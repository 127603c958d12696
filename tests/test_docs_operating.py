"""docs/operating.md is true: its command line parses, its tables name the metrics a
worker serves, and every alert rule it recommends reads metrics that exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import sqlalchemy as sa
import yaml
from running import mount, ticket

from flowrunner.cli import cli
from flowrunner.engine import metrics, worker

DOC = Path(__file__).resolve().parent.parent / "docs" / "operating.md"
TEXT = DOC.read_text(encoding="utf-8")

FLOWS = """
- name: Hand over
  start: created
  steps:
    - {position: 1, kind: assign, title: Hand over, assign_to: triage}
    - {position: 2, kind: notify, title: Tell, audience: requester, message: handed over}
"""


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", TEXT, re.S)


def served(engine: sa.Engine) -> set[str]:
    """The names of the metrics a worker serves after a little work (a step, a command)."""
    driver = mount(engine, "tickets", flows=FLOWS)
    driver.create(ticket(1), run=False)
    serving = worker.Worker(driver.runner)
    gathered = metrics.Metrics(serving)
    serving.run_due()
    text = gathered.exposition().decode()
    names = set(re.findall(r"^(flowrunner_\w+)", text, re.M))
    for family in re.findall(r"^# TYPE (flowrunner_\w+) (?:counter|histogram)", text, re.M):
        names |= {family, f"{family}_total"}
    return names


def test_the_command_line_parses() -> None:
    [shell] = blocks("sh")
    for line in shell.strip().splitlines():
        words = shlex.split(line)
        if words[0] != "flowrunner":
            continue
        command = cli.get_command(click.Context(cli), words[1])
        assert command is not None
        command.make_context(words[1], words[2:])


@pytest.mark.parametrize("any_engine", ["sqlite"], indirect=True)
def test_the_tables_and_the_alerts_name_metrics_a_worker_serves(any_engine: sa.Engine) -> None:
    names = served(any_engine)
    tabled = set(re.findall(r"^\| `(flowrunner_\w+)", TEXT, re.M))
    assert tabled and tabled <= names, tabled - names
    rules = yaml.safe_load(blocks("yaml")[0])["groups"][0]["rules"]
    assert {"FlowrunnerRunsWaiting", "FlowrunnerFailureRate", "FlowrunnerStuckRuns"} <= {
        rule["alert"] for rule in rules
    }
    for rule in rules:
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        used = set(re.findall(r"flowrunner_\w+", rule["expr"]))
        assert used and used <= names, (rule["alert"], used - names)
