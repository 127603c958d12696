"""``flowrunner runs deliveries``: what each signed callback was answered, newest first.

The receipts and the refusals of the app's inbound endpoints, as the Operations room's
Deliveries page lists them (``runner.operations.deliveries``): when, which endpoint, the
sender's delivery key, the status answered and why, the event emitted; answers alike in
one minute on one line, counted. ``--refused`` keeps to the refusals, ``--endpoint`` to
one endpoint; ``--json`` prints one document.
"""

from __future__ import annotations

import click

from flowrunner import cli as cli_mod
from flowrunner.engine import operations_room
from flowrunner.history import flows
from flowrunner.store import listing


@click.command("deliveries", epilog=cli_mod.EXIT_STATUSES)
@cli_mod.app_option()
@cli_mod.database_option()
@click.option(
    "--tenant",
    default=None,
    metavar="TENANT",
    help="Whose callbacks (required when the app's records belong to tenants).",
)
@click.option(
    "--no-tenant",
    is_flag=True,
    help="On an app whose records belong to tenants: the callbacks refused before their "
    "body named one (forged, too large), instead of a tenant's.",
)
@click.option("--refused", is_flag=True, help="Only the callbacks refused.")
@click.option("--accepted", is_flag=True, help="Only the callbacks received.")
@click.option("--endpoint", default=None, metavar="NAME", help="One inbound endpoint's.")
@click.option(
    "--limit",
    type=click.IntRange(1, listing.MAX_LIMIT),
    default=operations_room.DEFAULT_LIMIT,
    show_default=True,
    help="How many to show.",
)
@click.option(
    "--before",
    "before_id",
    type=cli_mod.Id(),
    default=None,
    metavar="ID",
    help="Show those older than this id: the next page, as the last one said.",
)
@cli_mod.json_option('Print {"deliveries": [...], "next_before"} as one JSON document.')
def deliveries(
    app_spec: str,
    database: str | None,
    tenant: str | None,
    no_tenant: bool,
    refused: bool,
    accepted: bool,
    endpoint: str | None,
    limit: int,
    before_id: int | None,
    as_json: bool,
) -> None:
    """The signed callbacks received and refused, newest first: the endpoint, the
    sender's key, the answer and why.

    \b
    Examples:
      flowrunner runs deliveries --app myapp:runner
      flowrunner runs deliveries --app myapp:runner --refused --endpoint payment_settled
    """
    if refused and accepted:
        raise click.UsageError("choose --refused or --accepted, or neither for both")
    runner = cli_mod.load_runner(app_spec, database)
    page = runner.operations.deliveries(
        refused=True if refused else False if accepted else None,
        endpoint=endpoint,
        tenant=tenant,
        no_tenant=no_tenant,
        before_id=before_id,
        limit=limit,
    )
    tz = runner.config.timezone
    if as_json:
        documents = [
            {
                "id": row.id,
                "endpoint": row.endpoint,
                "key": row.key,
                "status": row.status,
                "accepted": row.accepted,
                "reason": row.reason,
                "event": row.event_id,
                "count": row.count,
                "at": row.at,
                "last_at": row.last_at,
                "tenant": row.tenant,
            }
            for row in page
        ]
        cli_mod.echo_json({"deliveries": documents, "next_before": page.next_before})
        return
    if not page.rows:
        click.echo("no callbacks")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for name in ("at", "endpoint", "key", "answer", "reason", "event", "times"):
        table.add_column(name, overflow="fold")
    for row in page:
        table.add_row(
            flows.when(row.at, tz),
            row.endpoint or "(no such inbound)",
            row.key or "",
            f"{row.status} {'received' if row.accepted else 'refused'}",
            row.reason,
            "" if row.event_id is None else str(row.event_id),
            # Answers alike within the minute: one line, counted.
            str(row.count),
        )
    Console(soft_wrap=False, highlight=False).print(table)
    if page.next_before is not None:
        click.echo(f"more: --before {page.next_before}")
