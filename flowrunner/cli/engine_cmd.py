"""``flowrunner worker`` serves due runs; ``flows start`` starts records older than flows.

The worker logs on standard error, one line a record (``flowrunner.foundations.logs``): each claim
at INFO (how many runs, whose, what became of them, how long), each run that failed at
ERROR, at the level ``--log-level`` names; ``--log-format json`` writes each as one JSON
object. ``--once`` shows a progress bar when standard error is a terminal (not with
JSON lines), and ends with a summary on standard output (``--json``: one JSON document).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from datetime import timedelta
from types import FrameType
from typing import TYPE_CHECKING

import click

from flowrunner import cli as cli_mod
from flowrunner import errors
from flowrunner.foundations import sanitize

if TYPE_CHECKING:
    from flowrunner.delivery import deliverer as deliverer_mod
    from flowrunner.engine import worker as worker_mod
    from flowrunner.runner import FlowRunner

LOG_LEVELS = ("debug", "info", "warning", "error")


def _load(app: str, database: str | None) -> object:
    return cli_mod.load_runner(app, database)


def _lease_time(_ctx: click.Context, param: click.Parameter, value: str) -> timedelta:
    """``--lease`` as a timedelta: ``30 seconds``, ``2 minutes``, ``PT45S``."""
    from flowrunner.foundations import durations

    try:
        length = durations.parse_duration(value)
    except errors.DurationError as exc:
        raise click.BadParameter(str(exc), param=param) from exc
    if length.months or length.is_negative or length.is_zero:
        raise click.BadParameter(
            f"{value!r}: give a lease of some seconds, minutes or hours", param=param
        )
    return timedelta(days=length.days, seconds=length.seconds)


@click.command(epilog=cli_mod.EXIT_STATUSES)
@cli_mod.app_option()
@cli_mod.jobs_option()
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
@click.option(
    "--deliver",
    "deliver",
    is_flag=True,
    help="Also send the notices due for delivery through the binding's channels, as "
    "flowrunner deliver does, beside the runs.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    default=None,
    metavar="PORT",
    help="Serve Prometheus metrics on http://HOST:PORT/metrics, with /healthz (alive) and "
    "/readyz (its database answers, its schema current). Needs the metrics extra: "
    "pip install 'flowrunner[metrics]'.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="The address the metrics listen on (0.0.0.0: every interface).",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="The least a log line must matter to be written: INFO shows each claim, "
    "ERROR only the runs that failed.",
)
@cli_mod.log_format_option()
@cli_mod.json_option(
    'Print the summary as one JSON document: {"database", "resource", "claimed", '
    '"advanced", "failed", "refused", "errors", "handed_back", "seconds"}.'
)
def worker(
    app_spec: str,
    jobs_spec: str | None,
    database: str | None,
    poll: float,
    batch: int,
    claim: int | None,
    lease: timedelta,
    listen: bool,
    once: bool,
    deliver: bool,
    metrics_port: int | None,
    metrics_host: str,
    log_level: str,
    log_format: str,
    as_json: bool,
) -> None:
    """Serve due runs until stopped (SIGTERM or Ctrl-C: it finishes the runs in hand).

    Stopped, it claims nothing more: the run in hand is advanced as far as it goes
    (until it waits or ends) and committed, the runs it claimed but did not start are
    handed back (another worker takes them at once, not when their leases run out; one
    log line says which), then it prints its summary and exits 0 — a deploy loses no
    work and leaves no lease to run out. A second signal stops it at once (it dies of
    the signal): the run in hand rolls back, and runs again elsewhere when its lease
    runs out.

    Several workers may serve one PostgreSQL database; on SQLite, one host. On PostgreSQL
    an idle worker wakes the moment a start, an event or an operator's action commits;
    --poll is the fallback for timers and reminders. A worker
    outlives its database's failures: it logs each one and tries again, waiting a little
    longer each time (up to 10 seconds).

    Log lines go to standard error: each claim at INFO (runs, tenants, what became of
    them, how long), each failed run at ERROR with its reason. With --once it advances
    what is due, with a progress bar when standard error is a terminal, and prints a
    summary; without, the summary follows the stop.
    """
    # What serving needs, imported when it serves (`worker --help` needs none of it).
    from flowrunner.cli import app_loader as app_mod
    from flowrunner.engine import worker as worker_mod
    from flowrunner.foundations import logs
    from flowrunner.runner import FlowRunner

    say = cli_mod.teller(log_format)
    if metrics_port is not None:
        if once:
            raise cli_mod.InputError("--metrics-port serves while the worker does: not with --once")
        from flowrunner.engine import metrics as metrics_mod

        metrics_mod.available()  # before the app loads: one line naming the extra
    with logs.to_stderr(log_level.upper(), log_format):
        runner = _load(app_spec, database)
        assert isinstance(runner, FlowRunner)
        cli_mod.mount_jobs(runner, jobs_spec)
        serving = worker_mod.Worker(runner, batch=batch, claim=claim, lease_ttl=lease)
        runner.mounted.require_secrets()  # before a line says it serves (exit 2 without)
        sending = None
        if deliver:
            from flowrunner.delivery import deliverer as deliverer_mod

            if not runner.binding.channels:
                raise cli_mod.InputError(
                    "--deliver: the binding names no channels: give it channels= and name "
                    "one in each notify rule's channel"
                )
            sending = deliverer_mod.Deliverer(runner)
        began = time.monotonic()
        if once:
            _advance_due(runner, serving, bar=log_format == "text")
            if sending is not None:
                sending.deliver_all()
            _summary(runner, serving, time.monotonic() - began, as_json, sending)
            return
        stop = threading.Event()

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            if stop.is_set():  # the second: at once, the step in hand rolls back
                say(f"received signal {signum} again; stopping at once")
                sys.stdout.flush()
                sys.stderr.flush()
                signal.signal(signum, signal.SIG_DFL)  # dies of it, as of an unhandled one
                os.kill(os.getpid(), signum)
            say(f"received signal {signum}; finishing the runs in hand, then stopping")
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        where = app_mod.shown(runner.engine.url)
        exposed = None
        if metrics_port is not None:
            try:
                exposed = metrics_mod.Metrics(serving).serve(metrics_port, metrics_host)
            except OSError as exc:
                raise cli_mod.InputError(
                    f"--metrics-port: cannot listen on {metrics_host}:{metrics_port} ({exc})"
                ) from exc
            say(f"metrics on http://{metrics_host}:{exposed.port}/metrics")
        say(f"worker {serving.owner} serving {runner.binding.resource} on {where}")
        beside = None
        died: list[BaseException] = []
        if sending is not None:
            # The deliverer serves in a thread of its own, stopped by the same signal: it
            # sends the notice in hand and hands back the rest, as the worker its runs.
            # Should it die, the worker stops with it (handing its runs back) and exits
            # saying why: never a worker that serves on without delivering.
            beside = threading.Thread(
                target=_deliver_beside, args=(sending, stop, poll, died), daemon=True
            )
            beside.start()
            say("delivering notices beside the runs")
        try:
            serving.serve(stop, poll=poll, listen=listen)
        finally:
            stop.set()
            if beside is not None:
                beside.join()
            if exposed is not None:
                exposed.close()
        if died:
            raise cli_mod.Unexpected(
                f"the deliverer stopped ({sanitize.describe_exception(died[0])}), "
                "so the worker stopped too: its runs were handed back"
            )
        say("worker stopped")
        _summary(runner, serving, time.monotonic() - began, as_json, sending)


def _deliver_beside(
    sending: deliverer_mod.Deliverer,
    stop: threading.Event,
    poll: float,
    died: list[BaseException],
) -> None:
    """The deliverer's thread: it serves until ``stop``; if it dies, it says why (``died``,
    an error line) and stops the worker."""
    from flowrunner.foundations import logs

    try:
        sending.serve(stop, poll=poll)
    except BaseException as exc:  # whatever ends the thread ends the worker too
        died.append(exc)
        logs.logger("flowrunner.cli").error(
            "the deliverer stopped (%s); stopping the worker", sanitize.describe_exception(exc)
        )
        stop.set()


def _advance_due(runner: FlowRunner, serving: worker_mod.Worker, *, bar: bool = True) -> None:
    """Advance every run due now, claim after claim, under a progress bar on a terminal
    (unless ``bar`` is False)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from flowrunner.store import operations as ops

    with runner.engine.connect() as conn:
        due = ops.due_count(conn, now=runner.clock(), resource=runner.binding.resource)
    console = Console(stderr=True)
    columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    shown = bar and console.is_terminal
    with Progress(*columns, console=console, disable=not shown) as progress:
        task = progress.add_task("advancing due runs", total=due)
        done = 0
        while claimed := serving.run_due():
            done += claimed
            # Runs fall due while others advance (a step that wakes another at once).
            progress.update(task, completed=done, total=max(due, done))


def _summary(
    runner: FlowRunner,
    serving: worker_mod.Worker,
    took: float,
    as_json: bool,
    sending: deliverer_mod.Deliverer | None = None,
) -> None:
    """What the worker did: one line, or one JSON document, on standard output (with
    ``--deliver``, a second line, or a ``delivery`` member, says what it sent)."""
    from flowrunner.cli import app_loader as app_mod

    stats = serving.stats
    sent = None if sending is None else sending.stats
    if as_json:
        document: dict[str, object] = {
            "database": app_mod.shown(runner.engine.url),
            "resource": runner.binding.resource,
            "claimed": stats.claimed,
            "advanced": stats.advanced,
            "failed": stats.failed,
            "refused": stats.refused,
            "errors": stats.errors,
            "handed_back": stats.handed_back,
            "seconds": round(took, 3),
        }
        if sent is not None:
            document["delivery"] = dataclasses.asdict(sent)
        cli_mod.echo_json(document)
        return
    click.echo(
        f"advanced {stats.advanced} run(s) of {stats.claimed} claimed ({stats.failed} failed); "
        f"{stats.refused} refused (lease taken over), {stats.errors} not advanced for an "
        f"error, {stats.handed_back} handed back, in {took:.2f} s"
    )
    if sent is not None:
        click.echo(
            f"sent {sent.sent} notice(s) of {sent.claimed} claimed; {sent.retried} to try "
            f"again, {sent.failed} failed for good, {sent.handed_back} handed back"
        )


@click.command("start", epilog=cli_mod.EXIT_STATUSES)
@click.argument("resource")
@cli_mod.app_option()
@cli_mod.database_option()
@click.option(
    "--where", default=None, help="A condition choosing the records, e.g. 'status = open'."
)
@click.option("--flow", default=None, help="Start only this flow (name or id).")
@click.option("--tenant", default=None, help="The tenant whose records to start (tenant bindings).")
@cli_mod.json_option('Print {"started": N, "armed": M} as one JSON document.')
def start(
    resource: str,
    app_spec: str,
    database: str | None,
    where: str | None,
    flow: str | None,
    tenant: str | None,
    as_json: bool,
) -> None:
    """Start flows on records that existed before them, as though each were just created,
    and arm the binding's timers on their dates (not with --flow).

    Running it again starts and arms nothing new.
    """
    from rich.console import Console
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
    # On standard error, which leaves standard output to the count (or its JSON); on a
    # terminal only.
    console = Console(stderr=True)
    with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("starting flows", total=None)

        def report(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        try:
            started = runner.start_existing(where, flow=flow, tenant=tenant, progress=report)
            armed = 0
            if flow is None and runner.timers is not None:
                progress.update(task, description="arming timers", completed=0, total=None)
                armed = runner.arm_timers(where, tenant=tenant, progress=report)
        except errors.QueryError as exc:
            raise cli_mod.InputError(f"--where: {exc}") from exc
    if as_json:
        cli_mod.echo_json({"started": started, "armed": armed})
    else:
        click.echo(f"started {started} run(s)")
        if runner.timers is not None:
            click.echo(f"armed {armed} timer(s)")
