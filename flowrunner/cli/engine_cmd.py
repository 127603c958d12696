"""``flowrunner worker`` serves due runs; ``flows start`` starts records older than flows."""

from __future__ import annotations

import logging
import signal
import threading
from datetime import timedelta
from types import FrameType

import click

from flowrunner import cli as cli_mod
from flowrunner import durations, errors


def _load(app: str, database: str | None) -> object:
    return cli_mod.load_runner(app, database)


def _lease_time(_ctx: click.Context, param: click.Parameter, value: str) -> timedelta:
    """``--lease`` as a timedelta: ``30 seconds``, ``2 minutes``, ``PT45S``."""
    try:
        length = durations.parse_duration(value)
    except errors.DurationError as exc:
        raise click.BadParameter(str(exc), param=param) from exc
    if length.months or length.is_negative or length.is_zero:
        raise click.BadParameter(
            f"{value!r}: give a lease of some seconds, minutes or hours", param=param
        )
    return timedelta(days=length.days, seconds=length.seconds)


@click.command()
@click.option("--app", "app_spec", required=True, help="MODULE:ATTR naming the FlowRunner.")
@cli_mod.database_option()
@click.option(
    "--poll",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0.01, max=3600),
    help="Seconds to rest when idle (at most: on PostgreSQL new work wakes it at once).",
)
@click.option(
    "--batch",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Runs advanced per transaction.",
)
@click.option(
    "--claim",
    default=None,
    type=click.IntRange(min=1),
    help="Runs claimed at a time (default: as many as --batch). Claiming more holds the "
    "leases of runs that wait behind the others.",
)
@click.option(
    "--lease",
    default="30 seconds",
    show_default=True,
    metavar="DURATION",
    callback=_lease_time,
    help="How long another worker waits before taking over the runs of a worker that "
    "died; renewed while a long command runs.",
)
@click.option(
    "--listen/--no-listen",
    default=True,
    show_default=True,
    help="On PostgreSQL, wake at once when work falls due (LISTEN); --no-listen only polls "
    "(for a connection pooler that cannot listen).",
)
@click.option("--once", is_flag=True, help="Advance what is due now, then exit.")
def worker(
    app_spec: str,
    database: str | None,
    poll: float,
    batch: int,
    claim: int | None,
    lease: timedelta,
    listen: bool,
    once: bool,
) -> None:
    """Serve due runs until stopped (SIGTERM or Ctrl-C stops it after the current step).

    Several workers may serve one PostgreSQL database; on SQLite, one host. On PostgreSQL
    an idle worker wakes the moment a start, an event or an operator's action commits;
    --poll is the fallback for timers and reminders. A worker
    outlives its database's failures: it logs each one and tries again, waiting a little
    longer each time (up to 10 seconds).
    """
    from flowrunner import worker as worker_mod
    from flowrunner.runner import FlowRunner

    runner = _load(app_spec, database)
    assert isinstance(runner, FlowRunner)
    # flowrunner's loggers hand every handler one sanitized line (flowrunner.logs).
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    serving = worker_mod.Worker(runner, batch=batch, claim=claim, lease_ttl=lease)
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
    serving.serve(stop, poll=poll, listen=listen)
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
