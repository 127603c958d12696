"""``flowrunner worker`` serves due runs; ``flows start`` starts records older than flows."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

import click

from flowrunner import cli as cli_mod
from flowrunner import errors


def _load(app: str, database: str | None) -> object:
    return cli_mod.load_runner(app, database)


@click.command()
@click.option("--app", "app_spec", required=True, help="MODULE:ATTR naming the FlowRunner.")
@cli_mod.database_option()
@click.option("--poll", default=1.0, show_default=True, help="Seconds to rest when idle.")
@click.option("--batch", default=1, show_default=True, help="Runs advanced per transaction.")
@click.option("--once", is_flag=True, help="Advance what is due now, then exit.")
def worker(app_spec: str, database: str | None, poll: float, batch: int, once: bool) -> None:
    """Serve due runs until stopped (SIGTERM or Ctrl-C stops it after the current step).

    Several workers may serve one PostgreSQL database; on SQLite, one host.
    """
    from flowrunner import worker as worker_mod
    from flowrunner.runner import FlowRunner

    runner = _load(app_spec, database)
    assert isinstance(runner, FlowRunner)
    # flowrunner's loggers hand every handler one sanitized line (flowrunner.logs).
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    serving = worker_mod.Worker(runner, batch=batch)
    if once:
        total = 0
        while claimed := serving.run_due():
            total += claimed
        click.echo(f"advanced {total} run(s)")
        return
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        click.echo(f"received signal {signum}; stopping after the current step", err=True)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    click.echo(f"worker {serving.owner} serving {runner.binding.resource}", err=True)
    serving.serve(stop, poll=poll)
    click.echo("worker stopped", err=True)


@click.command("start")
@click.argument("resource")
@click.option("--app", "app_spec", required=True, help="MODULE:ATTR naming the FlowRunner.")
@cli_mod.database_option()
@click.option(
    "--where", default=None, help="A condition choosing the records, e.g. 'status = open'."
)
@click.option("--flow", default=None, help="Start only this flow (name or id).")
@click.option("--tenant", default=None, help="The tenant whose records to start (tenant bindings).")
def start(
    resource: str,
    app_spec: str,
    database: str | None,
    where: str | None,
    flow: str | None,
    tenant: str | None,
) -> None:
    """Start flows on records that existed before them, as though each were just created.

    Running it again starts nothing new.
    """
    from rich.progress import Progress

    from flowrunner.runner import FlowRunner

    runner = _load(app_spec, database)
    assert isinstance(runner, FlowRunner)
    if resource != runner.binding.resource:
        raise cli_mod.InputError(
            f"the app's runner is mounted on {runner.binding.resource!r}, not {resource!r}"
        )
    if runner.binding.tenant and tenant is None:
        raise cli_mod.InputError("this binding has tenants: name one with --tenant")
    with Progress(transient=True) as progress:
        task = progress.add_task("starting flows", total=None)

        def report(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        try:
            started = runner.start_existing(where, flow=flow, tenant=tenant, progress=report)
        except errors.QueryError as exc:
            raise cli_mod.InputError(f"--where: {exc}") from exc
    click.echo(f"started {started} run(s)")
