"""``flowrunner authority lock`` and ``check``: who each part of the application runs as
and what it may call, written to ``authority.lock`` and compared with it (for CI: a
widened grant fails the check until someone reviews it and locks it again)."""

from __future__ import annotations

from pathlib import Path

import click

from flowrunner import cli as cli_mod
from flowrunner.authority import gather, lock

EXIT_STATUSES = """\b
Exit status: 0 done (check: the application grants what the lock says); 1 check found
grants that differ from the lock, or an unexpected error; 2 something given cannot be
used (an option, the app, the database, a lock file that cannot be read).
"""

APP = cli_mod.app_option(
    "The application's FlowRunner (with its jobs mounted), or a function returning one."
)
LOCK = click.option(
    "--lock",
    "lock_path",
    default=lock.FILE,
    show_default=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The lock file.",
)


@click.group(epilog=EXIT_STATUSES)
def authority() -> None:
    """Who each part of the app runs as and what it may call: lock it, check it in CI."""


@authority.command("lock", epilog=EXIT_STATUSES)
@APP
@cli_mod.jobs_option()
@cli_mod.database_option()
@LOCK
@cli_mod.json_option('Print {"lock", "parts"}: the file written and how many parts it lists.')
def lock_command(
    app_spec: str, jobs_spec: str | None, database: str | None, lock_path: Path, as_json: bool
) -> None:
    """Write the lock: each kind, job, timer, inbound endpoint and code workflow step with
    the principal it runs as and the commands it may call, sorted and stable.

    \b
    With --jobs, the server-only module's parts too (give it to check as well).

    \b
    Example:
      flowrunner authority lock --app myapp:runner --jobs myapp.server:SERVER
    """
    runner = cli_mod.load_runner(app_spec, database, check_schema=False)
    cli_mod.mount_jobs(runner, jobs_spec)  # the server-only parts are locked too
    entries = gather.entries(runner.mounted)
    lock_path.write_text(lock.text(entries), encoding="utf-8")
    if as_json:
        cli_mod.echo_json({"lock": str(lock_path), "parts": len(entries)})
        return
    click.echo(f"wrote {lock_path}: {len(entries)} parts, each with what it may call")


@authority.command("check", epilog=EXIT_STATUSES)
@APP
@cli_mod.jobs_option()
@cli_mod.database_option()
@LOCK
@cli_mod.json_option('Print {"lock", "agrees", "differences"}: each difference a sentence.')
def check_command(
    app_spec: str, jobs_spec: str | None, database: str | None, lock_path: Path, as_json: bool
) -> None:
    """Fail (exit 1) while the app grants more or other than the lock, each difference a
    sentence; review them, then run `flowrunner authority lock` again.

    \b
    Example (in CI):
      flowrunner authority check --app myapp:runner
    """
    try:
        content = lock_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise cli_mod.InputError(
            f"there is no {lock_path}: write it with `flowrunner authority lock`"
        ) from None
    try:
        locked = lock.read(content)
    except lock.LockInvalid as exc:
        raise cli_mod.InputError(str(exc)) from None
    runner = cli_mod.load_runner(app_spec, database, check_schema=False)
    cli_mod.mount_jobs(runner, jobs_spec)  # the server-only parts are locked too
    said = lock.differences(locked, gather.entries(runner.mounted))
    if as_json:
        cli_mod.echo_json({"lock": str(lock_path), "agrees": not said, "differences": said})
    elif said:
        click.echo(f"the application grants more or other than {lock_path}:")
        for sentence in said:
            click.echo(f"  - {sentence}")
        click.echo("review these, then run `flowrunner authority lock` to accept them")
    else:
        click.echo(f"{lock_path} agrees with the application: {len(locked)} parts")
    if said:
        raise SystemExit(1)
