"""``flowrunner flows``: keep flows in files (import, export) and check the stored ones."""

from __future__ import annotations

import csv
import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flowrunner import cli as cli_mod
from flowrunner import flowfiles, starting, validate
from flowrunner.store import flow_rows

if TYPE_CHECKING:
    from flowrunner.runner import FlowRunner

# Subcommands of `flows` that live with other parts of the CLI, loaded when used:
# `flows start` starts runs for records that existed before their flows.
ELSEWHERE = {"start": "flowrunner.cli.engine_cmd:start"}


class FlowsGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *ELSEWHERE})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None or cmd_name not in ELSEWHERE:
            return found
        module_name, attr = ELSEWHERE[cmd_name].split(":")
        try:
            command: Any = getattr(importlib.import_module(module_name), attr)
        except (ModuleNotFoundError, AttributeError):
            return None
        return command if isinstance(command, click.Command) else None


def _runner(app: str, database: str | None) -> FlowRunner:
    return cli_mod.load_runner(app, database)


APP = click.option("--app", "app_spec", required=True, help="MODULE:ATTR naming the FlowRunner.")
DATABASE = cli_mod.database_option()


@click.group(cls=FlowsGroup, epilog=cli_mod.EXIT_STATUSES)
def flows() -> None:
    """Flows as files: import, export, and validate the stored rows."""


@flows.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@APP
@DATABASE
@click.option("--replace", is_flag=True, help="Replace stored flows that have the same name.")
def import_(file: Path, app_spec: str, database: str | None, replace: bool) -> None:
    """Import the flows of FILE (.yaml or .csv), all or nothing.

    A file that cannot be read is exit status 2; rows that do not validate are listed,
    nothing is imported, and the exit status is 1.
    """
    try:
        docs = flowfiles.read_file(file)
    except flowfiles.FileInvalid as exc:
        raise cli_mod.InputError(str(exc)) from None
    except UnicodeDecodeError:
        raise cli_mod.InputError(f"{file} is not UTF-8 text") from None
    except (csv.Error, RecursionError) as exc:
        reason = "it nests too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise cli_mod.InputError(f"{file} cannot be read: {reason}") from None
    runner = _runner(app_spec, database)
    try:
        with runner.engine.begin() as conn:
            result = flowfiles.import_flows(
                conn, runner.binding, runner.tables, docs, replace=replace, columns=runner.columns
            )
    except validate.RowsInvalid as exc:
        click.echo(f"{file}: refused, nothing was imported:", err=True)
        for label, found in exc.rows:
            for error in found:
                click.echo(f"  {label}: {error.field}: {error.message}", err=True)
        sys.exit(1)
    parts = []
    if result.created:
        parts.append("created " + ", ".join(result.created))
    if result.replaced:
        parts.append("replaced " + ", ".join(result.replaced))
    count = len(result.created) + len(result.replaced)
    click.echo(
        f"imported {count} flow(s), {result.steps} step(s)"
        + (": " if parts else "")
        + "; ".join(parts)
    )


@flows.command("export")
@APP
@DATABASE
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file (.yaml or .csv) instead of standard output.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["yaml", "csv"]),
    default=None,
    help="Defaults to the output file's suffix, else yaml.",
)
def export(app_spec: str, database: str | None, output: Path | None, fmt: str | None) -> None:
    """Write every stored flow and its steps as YAML (or CSV)."""
    runner = _runner(app_spec, database)
    with runner.engine.connect() as conn:
        docs = flowfiles.export_flows(conn, runner.binding, runner.tables)
    if fmt is None:
        fmt = "csv" if output is not None and output.suffix.lower() == ".csv" else "yaml"
    text = flowfiles.dumps_csv(docs, runner.binding) if fmt == "csv" else flowfiles.dumps_yaml(docs)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"exported {len(docs)} flow(s) to {output}", err=True)


@flows.command("validate")
@APP
@DATABASE
def validate_(app_spec: str, database: str | None) -> None:
    """Check every stored flow and step row against the binding; exit 1 if any is broken."""
    runner = _runner(app_spec, database)
    broken = 0
    steps = 0
    with runner.engine.connect() as conn:
        stored = flow_rows.all_flows(conn, runner.tables)
        for flow in stored:
            snap = starting.stored_snapshot(conn, runner.tables, flow["id"])
            steps += len(snap.steps)
            found = validate.sentences(snap, runner.binding, runner.columns)
            broken += bool(found)
            for sentence in found:
                click.echo(sentence, err=True)
    if broken:
        click.echo(f"{broken} of {len(stored)} flow(s) have broken rows", err=True)
        sys.exit(1)
    click.echo(f"{len(stored)} flow(s), {steps} step(s): all sound")
