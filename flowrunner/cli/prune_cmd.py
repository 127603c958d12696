"""``flowrunner prune``: delete the history no run and no operator needs any more."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from flowrunner import cli as cli_mod
from flowrunner import errors
from flowrunner.foundations import durations
from flowrunner.store import retention

if TYPE_CHECKING:
    from flowrunner.runner import FlowRunner

# What each count is, in the summary's words.
LABELS = {
    "runs": "ended runs",
    "history": "history lines",
    "notices": "delivered notices",
    "events": "events",
    "idempotency": "idempotency records",
    "callbacks": "callback answers",
}
STAGE_WORDS = {
    "runs": "ended runs",
    "events": "events",
    "idempotency": "idempotency records",
    "callbacks": "callback answers",
}


def _duration(_ctx: click.Context, param: click.Parameter, value: str) -> durations.Duration:
    """``--older-than`` as a duration: ``90d``, ``90 days``, ``6 months``, ``P3M``."""
    try:
        return durations.parse_duration(value)
    except errors.DurationError as exc:
        raise click.BadParameter(exc.message, param=param) from exc


@click.command(epilog=cli_mod.EXIT_STATUSES)
@cli_mod.app_option()
@cli_mod.database_option()
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="DURATION",
    callback=_duration,
    help="How old history must be to go: 90d, '90 days', '6 months', P3M (at least 1 hour).",
)
@click.option("--dry-run", is_flag=True, help="Count what would go; delete nothing.")
@click.option(
    "--batch",
    type=click.IntRange(1, retention.MAX_BATCH),
    default=retention.BATCH,
    show_default=True,
    help="Rows deleted per transaction.",
)
@click.option(
    "--include-failed",
    is_flag=True,
    help="Delete failed runs too (kept otherwise: an operator may still retry or restart them).",
)
@cli_mod.json_option(
    'Print {"dry_run", "before", "runs", "history", "notices", "events", "idempotency", '
    '"callbacks"} as one JSON document.'
)
def prune(
    app_spec: str,
    database: str | None,
    older_than: durations.Duration,
    dry_run: bool,
    batch: int,
    include_failed: bool,
    as_json: bool,
) -> None:
    """Delete the app's history older than --older-than, in short batches.

    \b
    Deletes:
      - the app's runs that ended done or cancelled before the cutoff (failed
        ones too with --include-failed), with their history lines and their
        notices, once every notice is delivered (or undeliverable) and nothing
        is left to do;
      - the app's events recorded before the cutoff that no run may still read;
      - completed idempotency records last written before the cutoff (of any
        resource: they name none);
      - the answers given to the app's signed callbacks before the cutoff.
    Keeps runs that have not ended, undelivered notices (and their runs),
    events a waiting run has not read, and the operator journal.

    Safe while workers run: each batch is its own short transaction.

    \b
    Example:
      flowrunner prune --app myapp:runner --older-than 90d --dry-run
    """
    runner = cli_mod.load_runner(app_spec, database)
    # A cutoff less than an hour back is refused (OperatorError): one line, exit status 2.
    pruned = _prune(runner, older_than, dry_run, include_failed, batch, as_json)
    before = None if pruned.before is None else pruned.before.isoformat(timespec="seconds")
    if as_json:
        summary = {"dry_run": pruned.dry_run, "before": before, **pruned.counts()}
        cli_mod.echo_json(summary)
        return
    verb = "would delete" if pruned.dry_run else "deleted"
    click.echo(f"{verb}, of what ended or happened before {before}:")
    width = max(len(label) for label in LABELS.values())
    for name, number in pruned.counts().items():
        click.echo(f"  {LABELS[name]:<{width}}  {number:>12,}")
    if pruned.dry_run:
        click.echo("nothing was deleted (dry run)")


def _prune(
    runner: FlowRunner,
    older_than: durations.Duration,
    dry_run: bool,
    include_failed: bool,
    batch: int,
    quiet: bool,
) -> retention.Pruned:
    """The prune under a progress bar on standard error (none with ``quiet``)."""
    from rich.console import Console
    from rich.progress import Progress
    from rich.progress import TaskID as Task

    console = Console(stderr=True)
    with Progress(console=console, transient=True, disable=quiet) as progress:
        tasks: dict[str, Task] = {}

        def report(stage: str, examined: int, total: int) -> None:
            if stage not in tasks:
                verb = "counting" if dry_run else "pruning"
                tasks[stage] = progress.add_task(f"{verb} {STAGE_WORDS[stage]}", total=total)
            if total == 0:  # an empty table: nothing to walk is all walked
                examined = total = 1
            progress.update(tasks[stage], completed=examined, total=total)

        return runner.prune(
            older_than=older_than,
            dry_run=dry_run,
            include_failed=include_failed,
            batch=batch,
            progress=report,
        )
