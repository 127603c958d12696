"""``flowrunner jobs``: the jobs an app mounts beside its flows — list them, run one now.

``jobs list`` shows each job, when it runs (``on po.decided``, or its cron fields and
zone), its command and principal, and for a job at times its next and last slot.
``jobs run NAME`` runs a job at times now, once, as its principal, journaled with the
operator's name; it waits while a worker runs the job's slot (one at a time).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from flowrunner import cli as cli_mod
from flowrunner import errors
from flowrunner.history import flows
from flowrunner.jobs import schedules

if TYPE_CHECKING:
    from flowrunner.jobs.program import Jobs
    from flowrunner.runner import FlowRunner

EXIT_STATUSES = """\b
Exit status: 0 done; 1 a verdict (the job ran and its command failed) or an unexpected
error; 2 something given cannot be used (an option, the app, the database, a job name).
"""

APP = click.option(
    "--app",
    "app_spec",
    required=True,
    metavar="MODULE:ATTR",
    cls=cli_mod.FromEnvironment,
    envvar=cli_mod.APP_VARIABLE,
    show_envvar=True,
    help="The application's FlowRunner (with its jobs mounted), or a function returning one.",
)


@click.group(epilog=EXIT_STATUSES)
def jobs() -> None:
    """The app's jobs: list them, run one now."""


def _jobs(runner: FlowRunner) -> Jobs | None:
    from flowrunner.jobs.program import Jobs

    mounted = runner.jobs
    return mounted if isinstance(mounted, Jobs) else None


@jobs.command("list", epilog=EXIT_STATUSES)
@APP
@cli_mod.database_option()
@cli_mod.json_option(
    'Print {"jobs": [{"name", "when", "command", "run_as", "timezone", "run", "next_at", '
    '"last_slot"}]} as one JSON document.'
)
def list_(app_spec: str, database: str | None, as_json: bool) -> None:
    """Each job: when it runs, its command and principal; a job at times' next and last slot."""
    runner = cli_mod.load_runner(app_spec, database)
    mounted = _jobs(runner)
    shown = []
    if mounted is not None:
        mounted.prepare()  # each job at times has its run from now on
        shown = mounted.list()
    if as_json:
        cli_mod.echo_json(
            {
                "jobs": [
                    {
                        "name": job.name,
                        "when": job.when,
                        "command": job.command,
                        "run_as": job.run_as,
                        "timezone": job.timezone,
                        "run": job.run_id,
                        "next_at": job.next_at,
                        "last_slot": job.last_slot,
                    }
                    for job in shown
                ]
            }
        )
        return
    if not shown:
        click.echo("the app mounts no jobs")
        return
    rows = [("job", "when", "command", "as", "next", "last")]
    for job in shown:
        # A job at times' slots are shown on its own wall clock, as its history shows them.
        zone = None if job.timezone is None else schedules.zone(job.timezone)
        rows.append(
            (
                job.name,
                job.when,
                job.command,
                job.run_as,
                "-" if job.next_at is None else flows.when(job.next_at, zone),
                "-" if job.last_slot is None else flows.when(job.last_slot, zone),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


@jobs.command("run", epilog=EXIT_STATUSES)
@click.argument("name")
@APP
@cli_mod.database_option()
@click.option(
    "--operator", required=True, metavar="NAME", help="Who runs it: written to the journal."
)
@click.option(
    "--wait",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0, max=3600),
    help="Seconds to wait while a worker runs the job's slot.",
)
@cli_mod.json_option('Print {"job", "run", "ok", "error"} as one JSON document.')
def run(
    name: str, app_spec: str, database: str | None, operator: str, wait: float, as_json: bool
) -> None:
    """Run a job at times now, once, as its principal (journaled; its schedule goes on)."""
    runner = cli_mod.load_runner(app_spec, database)
    mounted = _jobs(runner)
    if mounted is None:
        raise errors.OperatorError(f"there is no job {name!r}: the app mounts no jobs")
    ran = mounted.run_now(name, operator=operator, wait=wait)
    if as_json:
        cli_mod.echo_json({"job": name, "run": ran.run_id, "ok": ran.ok, "error": ran.error})
    elif ran.ok:
        click.echo(f"ran job {name} (run {ran.run_id})")
    else:
        click.echo(f"job {name} failed (run {ran.run_id}): {ran.error}")
    if not ran.ok:
        sys.exit(1)
