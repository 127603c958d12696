"""A lending desk whose loan applications run other flows as subflows.

A loan application (``application``) may name a guarantor: another application, whose
id its ``guarantor_id`` holds. The desk's flows:

- ``Open account`` (on created) runs ``Credit check`` on the application itself, then on
  its guarantor's, and opens the account; a credit check that fails puts the
  application on hold and tells the applicant why (its fault path).
- ``Credit check`` (manual) asks the bureau (the ``bureau`` kind's command, which
  refuses an applicant named ``Mallory``) and waits for its ``credit.decided`` answer.

Tests mount it with ``mount`` and drive it: the bureau answers with ``decide``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import migrated
import sqlalchemy as sa

from flowrunner import errors, tables, testing
from flowrunner.binding import FlowBinding, Kind, NotifyRule
from flowrunner.engine import commands
from flowrunner.flows import files
from flowrunner.runner import flow_runner

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

metadata = sa.MetaData()

application = sa.Table(
    "application",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applicant", sa.String(64), nullable=False),
    sa.Column("status", sa.String(32), nullable=False, server_default="new"),
    sa.Column("credit", sa.String(32)),
    sa.Column("guarantor_id", sa.Integer),
)

binding = FlowBinding(
    resource="application",
    flows_table="application_flow",
    steps_table="application_flow_step",
    events={"credit.decided": "application"},
    kinds={"bureau": Kind(command="ask_bureau")},
    set_columns=["status", "credit"],
    notify=[NotifyRule(audience="applicant", to="applicant")],
)

application_flow, application_flow_step = tables.for_binding(metadata, binding)

FLOWS = """
- name: Credit check
  start: manual
  steps:
    - {position: 10, kind: bureau, title: Ask the bureau}
    - {position: 20, kind: waitFor, title: Bureau answers, event: credit.decided}
    - {position: 30, kind: set, title: Checked, field: credit, value: checked}

- name: Open account
  start: created
  condition: guarantor_id is null
  steps:
    - {position: 10, kind: subflow, title: Check credit, value: Credit check,
       on_failure: 40}
    - {position: 20, kind: set, title: Open, field: status, value: open}
    - {position: 30, kind: branch, title: "Did the check fail?", condition: failure is not null}
    - {position: 40, kind: set, title: Hold, field: status, value: held}
    - {position: 50, kind: notify, title: Tell why, audience: applicant,
       message: "Your account is on hold: {failure}"}

- name: Open guaranteed account
  start: created
  condition: guarantor_id is not null
  steps:
    - {position: 10, kind: subflow, title: Check the guarantor, value: Credit check,
       field: guarantor_id, duration: 3 days}
    - {position: 20, kind: set, title: Open, field: status, value: open}
"""


def ask_bureau(ctx: commands.CommandContext) -> Mapping[str, Any] | None:
    """The bureau refuses to check Mallory."""
    if ctx.record.get("applicant") == "Mallory":
        raise errors.CommandRefused("the bureau will not check Mallory")
    return None


def mount(
    engine: sa.Engine,
    flows: str = FLOWS,
    *,
    publish: str = "on_save",
    record_label: str | None = None,
    **options: Any,
) -> testing.FlowDriver:
    """The desk's tables and the engine's on ``engine``, its flows imported, a driver;
    ``publish="explicit"``: its flows start only once published; ``record_label``: how
    people name an application."""
    metadata.create_all(engine)
    migrated.upgrade(engine)
    bound = FlowBinding(
        **{**binding.model_dump(), "publish": publish, "record_label": record_label}
    )
    runner = flow_runner(bound, engine, commands={"ask_bureau": ask_bureau}, **options)
    with runner.engine.begin() as conn:
        docs = files.loads_yaml(flows)
        files.import_flows(conn, runner.binding, runner.tables, docs, columns=runner.columns)
    return testing.FlowDriver(runner, start=T0)


def applicant(n: int, name: str = "Ann", guarantor: int | None = None) -> dict[str, Any]:
    return {"id": n, "applicant": name, "guarantor_id": guarantor}


def decide(driver: testing.FlowDriver, application_id: int) -> None:
    """The bureau answers about one application."""
    driver.emit("credit.decided", {"application": application_id})
