"""A scheduled flow as people see it: the console's flow page says its schedule and next
slots, a new one is made there with its schedule (a bad one refused beside the field),
and ``flowrunner flows list`` shows each flow's next slots where it shows the flows."""

from __future__ import annotations

import itertools
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import migrated
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from console import EDITOR, console, errors_beside, text
from running import T0, mount

from fixtures.purchase_orders import app as po
from flowrunner import tables
from flowrunner.cli import cli
from flowrunner.flows import files
from flowrunner.store import flow_rows

MONDAYS = """
- name: Monday review
  start: schedule
  schedule: 0 6 * * mon Europe/Berlin
  condition: amount > 10000
  steps:
    - {position: 1, kind: notify, title: Tell, audience: requester, message: Still open.}
"""


def test_the_flow_page_shows_the_schedule_and_its_next_slots(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=MONDAYS)
    ui = console(driver, EDITOR)
    with any_engine.connect() as conn:
        flow = flow_rows.flow_by_name_or_id(conn, driver.runner.tables, "Monday review")
    assert flow is not None
    page = ui.get(f"/flow/{flow['id']}").text
    lede = text(re.search(r'<p class="lede">(.*?)</p>', page, re.S).group(1))  # type: ignore[union-attr]
    assert re.sub(r" ([,.])", r"\1", lede) == (
        "Starts on a schedule: every Monday at 06:00 (Europe/Berlin), if amount > 10000. Active."
    )
    slots = text(re.search(r'<p id="next-slots"[^>]*>(.*?)</p>', page, re.S).group(1))  # type: ignore[union-attr]
    # T0 is Monday 2 March, 09:00 UTC: the next Mondays at six in Berlin.
    assert slots == (
        "Next slots: Mon 9 Mar 06:00, Mon 16 Mar 06:00, Mon 23 Mar 06:00 (Europe/Berlin)."
    )
    assert driver.now == T0


def test_a_new_scheduled_flow_is_made_on_the_console_and_a_bad_schedule_refused(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders", flows="[]")
    ui = console(driver, EDITOR)
    refused = ui.post(
        "/flows", {"name": "Nightly", "start": "schedule", "schedule": "0 25 * * * UTC"}
    )
    assert refused.status_code == 422
    assert errors_beside(refused.text, "new-flow", "schedule") == [
        "the schedule '0 25 * * *' cannot be read: Bad hour"
    ]
    made = ui.post("/flows", {"name": "Nightly", "start": "schedule", "schedule": "@daily UTC"})
    assert made.status_code == 303
    with any_engine.connect() as conn:
        flow = flow_rows.flow_by_name_or_id(conn, driver.runner.tables, "Nightly")
    assert flow is not None and flow["schedule"] == "@daily UTC"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'orders.db'}"
    engine = sa.create_engine(url)
    po.metadata.create_all(engine)
    migrated.upgrade(engine)
    found = tables.reflect(engine, po.binding)
    with engine.begin() as conn:
        files.import_flows(conn, po.binding, found, files.loads_yaml(MONDAYS))
    engine.dispose()
    return url


def test_flows_list_shows_each_scheduled_flows_next_slots(url: str) -> None:
    app = "fixtures.purchase_orders.app:runner"
    before = datetime.now(UTC)
    result = CliRunner().invoke(cli, ["flows", "list", "--app", app, "--database", url, "--json"])
    assert result.exit_code == 0, result.output
    (shown,) = json.loads(result.stdout)["flows"]
    assert (shown["name"], shown["schedule"], shown["timezone"]) == (
        "Monday review",
        "0 6 * * mon",
        "Europe/Berlin",
    )
    slots = [datetime.fromisoformat(s) for s in shown["next_slots"]]
    berlin = [s.astimezone(ZoneInfo("Europe/Berlin")) for s in slots]
    assert len(slots) == 3 and slots[0] > before
    assert all((b.weekday(), b.hour, b.minute) == (0, 6, 0) for b in berlin)
    assert all(timedelta(days=6) < b - a < timedelta(days=8) for a, b in itertools.pairwise(slots))

    result = CliRunner().invoke(cli, ["flows", "list", "--app", app, "--database", url])
    assert result.exit_code == 0, result.output
    header, line = result.stdout.splitlines()
    assert header.split() == ["flow", "starts", "condition", "active", "next", "slots"]
    cells = re.split(r"\s{2,}", line)
    assert cells[:4] == [
        "Monday review",
        "every Monday at 06:00 (Europe/Berlin)",
        "amount > 10000",
        "yes",
    ]
    assert re.fullmatch(r"Mon \d+ \w+ 06:00, Mon \d+ \w+ 06:00, Mon \d+ \w+ 06:00", cells[4])
