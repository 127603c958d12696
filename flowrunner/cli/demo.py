"""``flowrunner demo``: the two sample apps, end to end, on an embedded SQLite file.

It sets up the support-desk and purchase-order apps from ``fixtures/``, imports their
flows, creates records, moves a test clock through waits, SLA dates, approvals,
reminders and branches, and prints each run's history. Everything runs through the
real engine and database; only the clock is moved by hand.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flowrunner import testing
from flowrunner.flows import files
from flowrunner.foundations import shapes
from flowrunner.foundations.shapes import RecordId
from flowrunner.history import flows, runs
from flowrunner.runner import FlowRunner
from flowrunner.store import app_tables, migrate

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday morning


def fixtures_dir() -> Path:
    """The sample apps: beside the package in a checkout, inside it in a wheel."""
    here = Path(__file__).resolve().parent.parent  # the package, above cli/
    for candidate in (here / "fixtures", here.parent / "fixtures"):
        if (candidate / "tickets" / "app.py").exists():
            return candidate
    raise FileNotFoundError("the sample apps (fixtures/) are not installed with this copy")


def load_fixture(name: str) -> ModuleType:
    """Import ``fixtures/<name>/app.py`` by path, without putting fixtures on sys.path."""
    path = fixtures_dir() / name / "app.py"
    module_name = f"flowrunner_demo_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def prepare(app: ModuleType, url: str) -> FlowRunner:
    """Create the app's tables and the engine's, mount its runner, import its flows."""
    engine = sa.create_engine(url)
    app_tables.create_declared(engine, app.metadata)
    migrate.upgrade(engine)
    engine.dispose()
    runner: FlowRunner = app.runner(url)
    with runner.engine.begin() as conn:
        files.import_flows(
            conn,
            runner.binding,
            runner.tables,
            files.read_file(app.FLOWS_FILE),
            columns=runner.columns,
        )
    return runner


class Story:
    """Prints what happens as the clock moves."""

    def __init__(self, console: Console, driver: testing.FlowDriver) -> None:
        self.console = console
        self.driver = driver

    def say(self, text: str) -> None:
        stamp = self.driver.now.strftime("%a %d %b %H:%M")
        self.console.print(f"[dim]{stamp}[/dim]  {text}")

    def wait(self, by: str) -> None:
        self.driver.advance(by)
        self.say(f"[italic]… {by} later[/italic]")

    def runs(self, record_id: RecordId, label: str) -> None:
        for run in self.driver.runs(record_id):
            table = Table(
                title=f"{label} — run {run.id}: {run.flow_name} ({run.status})",
                title_justify="left",
                show_edge=False,
                pad_edge=False,
            )
            table.add_column("when", style="dim", no_wrap=True)
            table.add_column("pos", justify="right")
            table.add_column("step")
            table.add_column("what happened", overflow="fold")
            zone = self.driver.runner.config.timezone
            for line in self.driver.history(run.id):
                if line.what in ("started", "done"):
                    continue  # every step has them: the other lines say what it did
                table.add_row(
                    flows.when(line.due_at or line.at, zone),
                    "" if line.position is None else str(line.position),
                    line.title or line.kind or "",
                    escape(line.sentence),
                )
            self.console.print(table)
            for waiting in run.waiting:
                self.console.print(f"   {escape(flows.waiting_sentence(waiting, zone))}")
            if run.reason:
                self.console.print(f"   [bold]ended:[/bold] {escape(runs.reason(run.reason))}")
            self.console.print()

    def end(self) -> None:
        """The outbox, then the scene's database closed."""
        self.notices()
        self.driver.runner.engine.dispose()

    def notices(self) -> None:
        table = Table(title="Notices written (the outbox)", title_justify="left", show_edge=False)
        for column in ("run", "to", "email", "title"):
            table.add_column(column)
        for notice in self.driver.notices():
            table.add_row(
                str(notice.run_id),
                f"{notice.audience}: {notice.recipient or 'nobody'}",
                "yes" if notice.email else "",
                notice.title if notice.deliverable else f"undeliverable: {notice.problem}",
            )
        self.console.print(table)
        self.console.print()


def _scene(console: Console, directory: Path, name: str, title: str) -> Story:
    """The sample app ``name`` mounted on its own SQLite file, its story begun."""
    runner = prepare(load_fixture(name), f"sqlite:///{directory / f'{name}.db'}")
    console.rule(title)
    return Story(console, testing.FlowDriver(runner, start=START))


def tickets(console: Console, directory: Path) -> None:
    story = _scene(
        console, directory, "tickets", "Support desk: SLA warnings, escalation, follow-ups"
    )
    driver = story.driver
    due = START + timedelta(hours=8)
    driver.create(_ticket(1, "Printer on fire", "ann", "bob", due))
    driver.create(_ticket(2, "VPN drops every hour", "carl", "dina", due))
    story.say("tickets 1 and 2 opened, both due at 17:00; each starts its SLA flow")
    story.wait("4 hours")
    story.say("13:00 — four hours before due: the assignees were warned")
    driver.update(1, status="resolved")
    story.say("ticket 1 resolved")
    story.wait("5 hours")
    story.say("ticket 2 passed its due date still open: priority raised, requester told")
    driver.update(2, status="waiting")
    story.say("ticket 2 now waits for the requester: the follow-up flow starts")
    story.wait("3 days")
    story.say("no reply in three days")
    story.wait("2 days")
    story.runs(1, "Ticket 1")
    story.runs(2, "Ticket 2")
    story.end()


def _ticket(
    ticket_id: int, title: str, requester: str, assignee: str, due: datetime
) -> shapes.RowDict:
    return {
        "id": ticket_id,
        "title": title,
        "requester_id": requester,
        "assignee": assignee,
        "due_at": due,
        "created_at": START,
    }


def purchase_orders(console: Console, directory: Path) -> None:
    story = _scene(
        console,
        directory,
        "purchase_orders",
        "Purchase orders: parallel approvals, reminders, a rejection short-cut",
    )
    driver = story.driver
    driver.create(_order(1, "PO-1001", 25000))
    driver.create(_order(2, "PO-1002", 40000))
    driver.create(_order(3, "PO-1003", 800))
    driver.create(_order(4, "PO-1004", 12000))
    story.say(
        "PO-1001, PO-1002 and PO-1004 (big) ask the manager and both finance approvers; "
        "PO-1003 (small) is approved and sent at once"
    )
    story.wait("1 day")
    story.say("a day without answers: each approver was reminded once")
    for approver in ("manager@example.com", "cfo@example.com", "controller@example.com"):
        _decide(driver, 1, approver, "approved")
    story.say("all three approved PO-1001: the app marks it approved, the flow sends it")
    story.wait("1 day")
    _decide(driver, 2, "cfo@example.com", "rejected")
    story.say(
        "the CFO rejected PO-1002: both approval waits end early (their condition reads "
        "the event), and the requester hears of the rejection"
    )
    story.wait("1 week")
    story.say("nobody answered PO-1004: after a week both waits gave up and it was rejected")
    for order_id, label in ((1, "PO-1001"), (2, "PO-1002"), (3, "PO-1003"), (4, "PO-1004")):
        story.runs(order_id, label)
    story.end()


def _order(order_id: int, number: str, amount: int) -> shapes.RowDict:
    return {
        "id": order_id,
        "number": number,
        "requester_id": "ann",
        "amount": amount,
        "created_at": START,
    }


def _decide(driver: testing.FlowDriver, order_id: int, approver: str, decision: str) -> None:
    """An approver answers through the app's own ``decide``: recorded on the order, then
    the ``po.decided`` event, in one transaction."""
    with driver.runner.engine.begin() as conn:
        load_fixture("purchase_orders").decide(driver.runner, conn, order_id, approver, decision)
    driver.run_until_idle()


SCENES: dict[str, Callable[[Console, Path], None]] = {
    "tickets": tickets,
    "purchase-orders": purchase_orders,
}


# The width of the demo's lines where no terminal says one (its output to a file or a
# pipe, nothing else a terminal): its widest table's, so that no line wraps.
UNWRAPPED = 160


def width() -> int:
    """The terminal's width (``COLUMNS``, or that of standard output, error or input), or
    ``UNWRAPPED`` where there is no terminal."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns):
        return int(columns)
    for stream in (sys.stdout, sys.stderr, sys.stdin):
        try:
            found = os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, ValueError, OSError):  # not a terminal
            continue
        if found:
            return found
    return UNWRAPPED


def run(
    directory: Path,
    *,
    only: str | None = None,
    console: Console | None = None,
    kept: bool = True,
) -> None:
    """Both sample apps' stories (``only`` one of them) on SQLite files in ``directory``,
    then three things to try next (``kept``: the files stay for them to use)."""
    console = console or Console(width=width())
    directory.mkdir(parents=True, exist_ok=True)
    for name, scene in SCENES.items():
        if only is None or only == name:
            scene(console, directory)
    if kept:
        console.print(f"The databases are in {directory}; look inside with any SQLite tool.")
    console.print()
    console.print("[bold]Next, try:[/bold]")
    shown = "tickets" if only == "tickets" else "purchase_orders"
    for number, (what, command) in enumerate(next_steps(directory if kept else None, shown), 1):
        console.print(f"{number}. {what}")
        console.print(f"   [cyan]{escape(command)}[/cyan]", soft_wrap=True)


# Each sample app: what it keeps, and the flow to draw.
SHOWN = {
    "purchase_orders": ("purchase orders", "Big orders"),
    "tickets": ("tickets", "SLA warning"),
}


def next_steps(kept: Path | None, name: str = "purchase_orders") -> list[tuple[str, str]]:
    """Three things to try after the demo, each a sentence and a command line: on the
    sample app ``name``'s database in ``kept``, or (None: it was not kept) in ``demo/``."""
    folder = kept if kept is not None else Path("demo")
    things, flow = SHOWN[name]
    app = f"--app {fixtures_module()}.{name}.app:runner"
    database = f"--database sqlite:///{folder / f'{name}.db'}"
    steps = (
        []
        if kept is not None
        else [
            ("Run it again, keeping its databases to look at:", f"flowrunner demo --dir {folder}")
        ]
    )
    steps += [
        (
            f"Open the {things} in the console, in your browser:",
            f"flowrunner console {app} {database} --token choose-a-long-token-here",
        ),
        (
            f"Draw the flow {flow!r}, as a page:",
            f'flowrunner diagram "{flow}" {app} {database} -o flow.html',
        ),
        (
            "See every run, where it waits and why it ended:",
            f"flowrunner runs list {app} {database}",
        ),
    ]
    return steps[:3]


def fixtures_module() -> str:
    """The sample apps' package: inside flowrunner when installed from its wheel, beside it
    in a source checkout."""
    package = Path(__file__).resolve().parent.parent
    return "flowrunner.fixtures" if fixtures_dir().parent == package else "fixtures"
