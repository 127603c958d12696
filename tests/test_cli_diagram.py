"""``flowrunner diagram FLOW --app MODULE:ATTR [--run RUN] [--format ...] [-o FILE]``."""

from __future__ import annotations

from pathlib import Path

import migrated
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from running import T0

from fixtures.purchase_orders import app as po
from flowrunner import testing
from flowrunner.cli import cli
from flowrunner.flows import files

APP = "fixtures.purchase_orders.app:runner"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'orders.db'}"


@pytest.fixture
def driver(url: str) -> testing.FlowDriver:
    """The purchase-order app on ``url``, its flows imported, one big order waiting."""
    engine = sa.create_engine(url)
    po.metadata.create_all(engine)
    migrated.upgrade(engine)
    runner = po.runner(url)
    with runner.engine.begin() as conn:
        docs = files.read_file(po.FLOWS_FILE)
        files.import_flows(conn, runner.binding, runner.tables, docs, columns=runner.columns)
    found = testing.FlowDriver(runner, start=T0)
    found.create({"id": 1, "number": "PO-1", "requester_id": "ann", "amount": 25000})
    return found


def diagram(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["diagram", *args])
    return result.exit_code, result.stdout, result.stderr


def test_a_flow_is_drawn_in_each_format(driver: testing.FlowDriver, url: str) -> None:
    with driver.runner.engine.connect() as conn:
        drawn = driver.runner.diagram(conn, "Big orders")
    code, out, _ = diagram("Big orders", "--app", APP, "--database", url)
    assert code == 0 and out == drawn.html()  # HTML unless told otherwise
    code, out, _ = diagram("Big orders", "--app", APP, "--database", url, "--format", "mermaid")
    assert code == 0 and out == drawn.mermaid()
    code, out, _ = diagram("Big orders", "--app", APP, "--database", url, "--format", "svg")
    assert code == 0 and out == drawn.svg()


def test_a_run_is_drawn_to_a_file(driver: testing.FlowDriver, url: str, tmp_path: Path) -> None:
    run = driver.runs(1)[0].id
    target = tmp_path / "run.svg"
    code, out, err = diagram(
        "Big orders", "--app", APP, "--database", url, "--run", str(run), "--format", "svg"
    )
    assert code == 0 and "Waiting for the po decided event" in out
    code, out, err = diagram(
        "Big orders", "--app", APP, "--database", url, "--run", str(run), "-o", str(target)
    )
    assert code == 0 and out == "" and err.strip() == f"wrote {target}"
    with driver.runner.engine.connect() as conn:
        assert (
            target.read_text(encoding="utf-8")
            == driver.runner.diagram(conn, "Big orders", run=run).html()
        )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["Big order"], "Error: there is no flow 'Big order' — did you mean 'Big orders'?"),
        (["Big orders", "--run", "99"], "Error: there is no run 99"),
        (
            ["Small orders", "--run", "1"],
            "Error: run 1 is a run of flow 'Big orders', not of 'Small orders'",
        ),
    ],
)
def test_an_unknown_flow_or_run_is_one_line_and_exit_status_2(
    driver: testing.FlowDriver, url: str, args: list[str], said: str
) -> None:
    code, out, err = diagram(*args, "--app", APP, "--database", url)
    assert (code, out, err.strip()) == (2, "", said)


def test_an_unknown_format_is_a_usage_error(url: str) -> None:
    code, _, err = diagram("Big orders", "--app", APP, "--database", url, "--format", "png")
    assert code == 2 and "'png' is not one of 'html', 'svg', 'mermaid'" in err
