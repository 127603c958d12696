"""``flowrunner jobs``: the jobs an app mounts beside its flows — list them, run one now,
pause and resume one, backfill a range of its slots.

``jobs list`` shows each job, when it runs (``on the po decided event``, or its schedule
in words and zone, or its interval), its command and principal, and for a job at times its next and
last slot (or who paused it). ``jobs run NAME`` runs a job at times now, once, as its
principal; ``jobs pause NAME`` stops its slots until ``jobs resume NAME``;
``jobs backfill NAME --from T1 --to T2`` runs each slot of the range once. Each is
journaled with the operator's name.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
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

APP = cli_mod.app_option(
    "The application's FlowRunner (with its jobs mounted), or a function returning one."
)


OPERATOR = click.option(
    "--operator", required=True, metavar="NAME", help="Who does it: written to the journal."
)
WAIT = click.option(
    "--wait",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0, max=3600),
    help="Seconds to wait while a worker runs the job's slot.",
)


@click.group(epilog=EXIT_STATUSES)
def jobs() -> None:
    """The app's jobs: list them, run one now, pause, resume, backfill.

    \b
    Examples:
      flowrunner jobs list --app myapp:runner
      flowrunner jobs pause nightly_close --app myapp:runner --operator olga
      flowrunner jobs backfill nightly_close --app myapp:runner --operator olga \\
          --from 2026-03-02T00:00 --to 2026-03-06T23:59
    """


def _jobs(runner: FlowRunner) -> Jobs | None:
    from flowrunner.jobs.program import Jobs

    mounted = runner.jobs
    return mounted if isinstance(mounted, Jobs) else None


@jobs.command("list", epilog=EXIT_STATUSES)
@APP
@cli_mod.database_option()
@cli_mod.json_option(
    'Print {"jobs": [{"name", "when", "command", "run_as", "timezone", "run", "next_at", '
    '"last_slot", "paused_by"}]} as one JSON document.'
)
def list_(app_spec: str, database: str | None, as_json: bool) -> None:
    """Each job: when it runs, its command and principal; a job at times' next and last
    slot ("paused by olga" while paused).

    \b
    Example:
      flowrunner jobs list --app myapp:runner
    """
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
                        "paused_by": job.paused_by,
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
                job.said or job.when,
                job.command,
                job.run_as,
                f"paused by {job.paused_by}"
                if job.paused_by is not None
                else "-"
                if job.next_at is None
                else flows.when(job.next_at, zone),
                "-" if job.last_slot is None else flows.when(job.last_slot, zone),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def _mounted(app_spec: str, database: str | None, name: str) -> Jobs:
    mounted = _jobs(cli_mod.load_runner(app_spec, database))
    if mounted is None:
        raise errors.OperatorError(f"there is no job {name!r}: the app mounts no jobs")
    return mounted


TENANT = click.option(
    "--tenant",
    metavar="TENANT",
    help="For a job that runs once per tenant: the tenant to run it for.",
)


@jobs.command("run", epilog=EXIT_STATUSES)
@click.argument("name")
@APP
@cli_mod.database_option()
@OPERATOR
@WAIT
@TENANT
@cli_mod.json_option('Print {"job", "run", "ok", "error"} as one JSON document.')
def run(
    name: str,
    app_spec: str,
    database: str | None,
    operator: str,
    wait: float,
    tenant: str | None,
    as_json: bool,
) -> None:
    """Run a job at times now, once, as its principal (journaled; its schedule goes on).

    \b
    Example:
      flowrunner jobs run nightly_close --app myapp:runner --operator olga
    """
    mounted = _mounted(app_spec, database, name)
    ran = mounted.run_now(name, operator=operator, wait=wait, tenant=tenant)
    if as_json:
        cli_mod.echo_json({"job": name, "run": ran.run_id, "ok": ran.ok, "error": ran.error})
    elif ran.ok:
        click.echo(f"ran job {name} (run {ran.run_id})")
    else:
        click.echo(f"job {name} failed (run {ran.run_id}): {ran.error}")
    if not ran.ok:
        sys.exit(1)


@jobs.command("pause", epilog=EXIT_STATUSES)
@click.argument("name")
@APP
@cli_mod.database_option()
@OPERATOR
@WAIT
@cli_mod.json_option('Print {"job", "paused", "entry"} as one JSON document.')
def pause(
    name: str, app_spec: str, database: str | None, operator: str, wait: float, as_json: bool
) -> None:
    """Pause a job at times: it runs no slot until resumed (journaled).

    A slot still running ends first (this waits for it). When the job is resumed, the
    slots missed meanwhile run as its catch_up says: the latest of them, all, or none.

    \b
    Example:
      flowrunner jobs pause nightly_close --app myapp:runner --operator olga
    """
    entry = _mounted(app_spec, database, name).pause(name, operator=operator, wait=wait)
    if as_json:
        cli_mod.echo_json({"job": name, "paused": True, "entry": entry})
    else:
        click.echo(f"paused job {name}: it runs no slot until resumed")


@jobs.command("resume", epilog=EXIT_STATUSES)
@click.argument("name")
@APP
@cli_mod.database_option()
@OPERATOR
@WAIT
@cli_mod.json_option('Print {"job", "paused", "entry"} as one JSON document.')
def resume(
    name: str, app_spec: str, database: str | None, operator: str, wait: float, as_json: bool
) -> None:
    """Resume a paused job at times (journaled): it is due at once, and the slots missed
    while it was paused run as its catch_up says.

    \b
    Example:
      flowrunner jobs resume nightly_close --app myapp:runner --operator olga
    """
    entry = _mounted(app_spec, database, name).resume(name, operator=operator, wait=wait)
    if as_json:
        cli_mod.echo_json({"job": name, "paused": False, "entry": entry})
    else:
        click.echo(f"resumed job {name}")


def _moment(value: str, option: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise cli_mod.InputError(
            f"{option} {value!r} is not a moment: write it as 2026-03-02T06:00 (UTC) or "
            "2026-03-02T06:00-05:00"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


@jobs.command("backfill", epilog=EXIT_STATUSES)
@click.argument("name")
@APP
@cli_mod.database_option()
@OPERATOR
@click.option(
    "--from",
    "start",
    required=True,
    metavar="MOMENT",
    help="The first moment of the range (ISO 8601; UTC unless it names its offset).",
)
@click.option(
    "--to",
    "end",
    required=True,
    metavar="MOMENT",
    help="The last moment of the range, included; not after now.",
)
@TENANT
@cli_mod.json_option(
    'Print {"job", "slots", "started", "ran_already", "entry"} as one JSON document.'
)
def backfill(
    name: str,
    app_spec: str,
    database: str | None,
    operator: str,
    start: str,
    end: str,
    tenant: str | None,
    as_json: bool,
) -> None:
    """Run each slot of a job at times from --from to --to once (journaled).

    Each slot gets a run of its own, due now: the app's workers run them. A slot that ran
    already, by the schedule or an earlier backfill, is not run again, so the same
    backfill given twice runs nothing more. A job that runs once per tenant is
    backfilled for each active tenant, or for --tenant alone.

    \b
    Example:
      flowrunner jobs backfill nightly_close --app myapp:runner --operator olga \\
          --from 2026-03-02T00:00 --to 2026-03-06T23:59
    """
    mounted = _mounted(app_spec, database, name)
    done = mounted.backfill(
        name,
        start=_moment(start, "--from"),
        end=_moment(end, "--to"),
        operator=operator,
        tenant=tenant,
    )
    if as_json:
        cli_mod.echo_json(
            {
                "job": name,
                "slots": done.slots,
                "started": done.started,
                "ran_already": done.ran_already,
                "entry": done.entry,
            }
        )
        return
    click.echo(
        f"backfilled job {name}: {len(done.slots)} slots, {len(done.started)} runs started, "
        f"{len(done.ran_already)} had run already"
    )
