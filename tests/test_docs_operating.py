"""docs/operating.md is true: its command line parses, its tables name the metrics a
worker serves, every alert rule it recommends reads metrics that exist, and its traces
example, run from the wheel, prints the spans it shows."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import sqlalchemy as sa
import yaml
from guides import run_guide
from installed import Installed
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
    lines = [line for shell in blocks("sh") for line in shell.strip().splitlines()]
    assert any(line.startswith("flowrunner ") for line in lines)
    for line in lines:
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


@pytest.mark.slow
def test_the_traces_example_runs_and_prints_the_spans_the_guide_shows(wheel: Installed) -> None:
    guide = run_guide("operating.md", blocks=1, module="operating_guide", python=wheel.python)
    shown = re.search(r"prints, for each invoice.*?\n\n```\n(.*?)```", guide.text, flags=re.S)
    assert shown is not None
    lines = shown.group(1).strip().splitlines()
    assert guide.printed.strip().splitlines() == lines
    guide.check(lines, at_least=4)
