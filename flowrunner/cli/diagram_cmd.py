"""``flowrunner diagram``: draw a flow, or a record's run over its flow, as HTML, SVG or Mermaid."""

from __future__ import annotations

from pathlib import Path

import click

from flowrunner import cli as cli_mod
from flowrunner import diagrams


@click.command(epilog=cli_mod.EXIT_STATUSES)
@click.argument("flow")
@cli_mod.app_option()
@cli_mod.database_option()
@click.option(
    "--run",
    "run_id",
    default=None,
    metavar="RUN",
    help="Draw this run of the flow over the steps it started with.",
)
@click.option(
    "--format",
    "format_",
    type=click.Choice(diagrams.FORMATS),
    default="html",
    show_default=True,
    help="A self-contained HTML page, a standalone SVG, or Mermaid text for Markdown.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Write the diagram to this file instead of standard output.",
)
@click.option("--tenant", default=None, help="The tenant whose flow it is (tenant bindings).")
def diagram(
    flow: str,
    app_spec: str,
    database: str | None,
    run_id: str | None,
    format_: str,
    output: Path | None,
    tenant: str | None,
) -> None:
    """Draw FLOW (its name or id): each position a column, its steps as lanes.

    With --run, draw that run over the steps it started with: what is done and
    when, where it waits and for what, what is ahead. An unknown flow or run is
    exit status 2.

    \b
    Examples:
      flowrunner diagram "Big orders" --app myapp:runner -o big-orders.html
      flowrunner diagram "Big orders" --app myapp:runner --run 7 --format svg
      flowrunner diagram "Big orders" --app myapp:runner --format mermaid
    """
    runner = cli_mod.load_runner(app_spec, database)
    with runner.engine.connect() as conn:
        drawn = runner.diagram(conn, flow, run=run_id, tenant=tenant)
    text = drawn.render(format_)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)
