"""A flow's versions on the command line: ``flowrunner flows publish|versions|compare|
rollback FLOW`` and ``flowrunner runs move --flow FLOW --from N [--to M] [--dry-run]``.

Each says what it did in a sentence (``--json``: one JSON document); a refusal — a flow
or version that does not exist, nothing to publish, a draft that cannot be — is one
line and exit status 2; a move that refused some runs exits 1 after listing them.
"""

from __future__ import annotations

import sys

import click

from flowrunner import cli as cli_mod
from flowrunner.store import dialects

APP = click.option(
    "--app",
    "app_spec",
    required=True,
    metavar="MODULE:ATTR",
    help="The application's FlowRunner, or a function returning one.",
)
DATABASE = cli_mod.database_option()
TENANT = click.option(
    "--tenant",
    default=None,
    metavar="TENANT",
    help="Whose flow (required when the app's flows belong to tenants).",
)
BY = click.option("--by", required=True, metavar="NAME", help="Who does it: kept with the version.")
NOTE = click.option("--note", default="", metavar="TEXT", help="Why: kept with the version.")


def _when(moment: object) -> str:
    return str(getattr(moment, "isoformat", lambda **_: moment)(timespec="minutes"))


@click.command("publish", epilog=cli_mod.EXIT_STATUSES)
@click.argument("flow", metavar="FLOW")
@APP
@DATABASE
@TENANT
@BY
@NOTE
@cli_mod.json_option('Print {"flow", "version", "published_at", "by", "note"} as JSON.')
def publish(
    flow: str,
    app_spec: str,
    database: str | None,
    tenant: str | None,
    by: str,
    note: str,
    as_json: bool,
) -> None:
    """Publish FLOW's rows (its draft) as its next version, checked whole first."""
    runner = cli_mod.load_runner(app_spec, database)
    with dialects.begin(runner.engine) as conn:
        version = runner.publish(conn, flow, by=by, note=note, tenant=tenant)
    if as_json:
        cli_mod.echo_json(
            {
                "flow": flow,
                "version": version.number,
                "published_at": version.published_at,
                "by": version.published_by,
                "note": version.note,
            }
        )
        return
    click.echo(f"published version {version.number} of {flow}")


@click.command("versions", epilog=cli_mod.EXIT_STATUSES)
@click.argument("flow", metavar="FLOW")
@APP
@DATABASE
@TENANT
@cli_mod.json_option(
    'Print {"flow", "versions": [{"version", "published_at", "by", "note", "digest", '
    '"waiting"}]} as JSON.'
)
def versions(
    flow: str, app_spec: str, database: str | None, tenant: str | None, as_json: bool
) -> None:
    """List FLOW's published versions: when, by whom, why, and the runs open on each."""
    runner = cli_mod.load_runner(app_spec, database)
    found = runner.versions(flow, tenant=tenant)
    if as_json:
        cli_mod.echo_json(
            {
                "flow": flow,
                "versions": [
                    {
                        "version": v.number,
                        "published_at": v.published_at,
                        "by": v.published_by,
                        "note": v.note,
                        "digest": v.digest,
                        "waiting": v.waiting,
                    }
                    for v in found
                ],
            }
        )
        return
    if not found:
        click.echo(f"{flow} has no published version")
        return
    for v in found:
        who = v.published_by or "a save"
        note = f" — {v.note}" if v.note else ""
        click.echo(
            f"version {v.number}  {_when(v.published_at)}  by {who}{note}  "
            f"({v.waiting} open run{'s' if v.waiting != 1 else ''})"
        )


@click.command("compare", epilog=cli_mod.EXIT_STATUSES)
@click.argument("flow", metavar="FLOW")
@click.argument("before", metavar="A")
@click.argument("after", metavar="B", default="draft")
@APP
@DATABASE
@TENANT
@cli_mod.json_option(
    'Print {"flow", "from", "to", "changes": [{"what", "step", "position", "title", '
    '"fields": [{"name", "before", "after"}], "sentence"}]} as JSON.'
)
def compare(
    flow: str,
    before: str,
    after: str,
    app_spec: str,
    database: str | None,
    tenant: str | None,
    as_json: bool,
) -> None:
    """Say what changes from version A to version B of FLOW (B: a number, or "draft",
    the rows as they are — the default)."""
    runner = cli_mod.load_runner(app_spec, database)
    found = runner.compare(flow, before, after, tenant=tenant)
    if as_json:
        cli_mod.echo_json(
            {
                "flow": found.flow,
                "from": found.before,
                "to": found.after,
                "changes": [
                    {
                        "what": c.what,
                        "step": c.step_id,
                        "position": c.position,
                        "title": c.title,
                        "fields": [
                            {"name": f.name, "before": f.before, "after": f.after} for f in c.fields
                        ],
                        "sentence": c.sentence,
                    }
                    for c in found.changes
                ],
            }
        )
        return
    if not found.changes:
        click.echo(f"{before} and {after} of {found.flow} are the same")
    for sentence in found.sentences:
        click.echo(sentence)


@click.command("rollback", epilog=cli_mod.EXIT_STATUSES)
@click.argument("flow", metavar="FLOW")
@click.argument("to", metavar="VERSION", type=click.IntRange(1))
@APP
@DATABASE
@TENANT
@BY
@NOTE
@cli_mod.json_option('Print {"flow", "version", "rolled_back_to", "note"} as JSON.')
def rollback(
    flow: str,
    to: int,
    app_spec: str,
    database: str | None,
    tenant: str | None,
    by: str,
    note: str,
    as_json: bool,
) -> None:
    """Publish VERSION's rows of FLOW again as its next version; its rows follow."""
    runner = cli_mod.load_runner(app_spec, database)
    with dialects.begin(runner.engine) as conn:
        version = runner.roll_back(conn, flow, to, by=by, note=note, tenant=tenant)
    if as_json:
        cli_mod.echo_json(
            {"flow": flow, "version": version.number, "rolled_back_to": to, "note": version.note}
        )
        return
    click.echo(f"published version {version.number} of {flow}: the rows of version {to}")


@click.command("move", epilog=cli_mod.EXIT_STATUSES)
@click.option("--flow", required=True, metavar="FLOW", help="The flow whose runs move.")
@click.option(
    "--from",
    "from_version",
    required=True,
    type=click.IntRange(1),
    metavar="N",
    help="The version the runs started on.",
)
@click.option(
    "--to",
    "to_version",
    default=None,
    type=click.IntRange(1),
    metavar="M",
    help="The version they move to (default: the latest).",
)
@APP
@DATABASE
@TENANT
@BY
@click.option("--dry-run", is_flag=True, help="Say what would move and what not; move nothing.")
@cli_mod.json_option(
    'Print {"flow", "from", "to", "dry_run", "moved", "refused", "outcomes": [{"run", '
    '"moved", "sentence"}]} as JSON.'
)
def move(
    flow: str,
    from_version: int,
    to_version: int | None,
    app_spec: str,
    database: str | None,
    tenant: str | None,
    by: str,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Move the open runs of FLOW's version N to version M where the steps they wait at
    are still there; the others stay, each with the sentence saying why."""
    runner = cli_mod.load_runner(app_spec, database)
    outcomes = runner.move_runs(
        flow,
        from_version=from_version,
        to_version=to_version,
        by=by,
        dry_run=dry_run,
        tenant=tenant,
    )
    refused = [o for o in outcomes if not o.moved]
    if as_json:
        cli_mod.echo_json(
            {
                "flow": flow,
                "from": from_version,
                "to": to_version,
                "dry_run": dry_run,
                "moved": len(outcomes) - len(refused),
                "refused": len(refused),
                "outcomes": [
                    {"run": o.run_id, "moved": o.moved, "sentence": o.sentence} for o in outcomes
                ],
            }
        )
    else:
        for outcome in outcomes:
            click.echo(outcome.sentence if outcome.moved else f"refused: {outcome.sentence}")
        verb = "would move" if dry_run else "moved"
        click.echo(f"{len(outcomes) - len(refused)} {verb}, {len(refused)} refused")
    if refused:
        sys.exit(1)
