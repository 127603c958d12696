"""What the runner and the test driver hand back about runs are the typed rows exported
from ``flowrunner``, read on SQLite and PostgreSQL.
"""

from __future__ import annotations

import sqlalchemy as sa
from running import T0, mount

import flowrunner

FLOWS = """
- name: Tell
  start: created
  steps:
    - {position: 1, kind: set, title: Mark, field: priority, value: high}
    - {position: 2, kind: notify, title: Tell, audience: requester, message: Hello}
"""


def ticket(n: int) -> dict[str, object]:
    return {"id": n, "title": f"T{n}", "requester_id": "ann", "due_at": T0}


def test_runs_history_and_notices_are_the_exported_rows(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=FLOWS)
    driver.create(ticket(1))
    runs = driver.runs(1)
    assert runs == driver.runner.runs("1")
    [run] = runs
    assert isinstance(run, flowrunner.RunRow)
    assert (run.record_id, run.flow_name, run.status, run.ended) == ("1", "Tell", "done", True)
    history = driver.history(run.id)
    assert history and all(isinstance(line, flowrunner.LogRow) for line in history)
    assert history == driver.runner.history(run.id)
    [notice] = driver.runner.notices()
    assert isinstance(notice, flowrunner.NoticeRow)
    assert (notice.run_id, notice.audience, notice.delivered_at) == (run.id, "requester", None)
    assert driver.notices(run.id) == [notice]
