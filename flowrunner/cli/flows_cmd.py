"""``flowrunner flows``: keep flows in files (import, export) and check the stored ones."""

from __future__ import annotations

import csv
import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flowrunner import cli as cli_mod
from flowrunner.flows import files, scheduled, starts, validation
from flowrunner.history import flows as history
from flowrunner.jobs import schedules
from flowrunner.store import flow_rows

if TYPE_CHECKING:
    from flowrunner.runner import FlowRunner

# Subcommands of `flows` that live with other parts of the CLI, loaded when used:
# `flows start` starts runs for records that existed before their flows; a flow's
# versions (`publish`, `versions`, `compare`, `rollback`).
ELSEWHERE = {
    "start": "flowrunner.cli.engine_cmd:start",
    "publish": "flowrunner.cli.versions_cmd:publish",
    "versions": "flowrunner.cli.versions_cmd:versions",
    "compare": "flowrunner.cli.versions_cmd:compare",
    "rollback": "flowrunner.cli.versions_cmd:rollback",
}


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


APP = cli_mod.app_option()
DATABASE = cli_mod.database_option()


@click.group(cls=FlowsGroup, epilog=cli_mod.EXIT_STATUSES)
def flows() -> None:
    """Flows as files: import, export, list and validate the stored rows (a scheduled
    flow with its next slots); a flow's versions: publish, list, compare, roll back."""


@flows.command("import", epilog=cli_mod.EXIT_STATUSES)
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@APP
@DATABASE
@click.option(
    "--replace",
    is_flag=True,
    help="Replace stored flows that have the same name (each keeps its id and versions).",
)
@click.option(
    "--publish",
    is_flag=True,
    help="Publish each imported flow as its next version (else the rows are its draft).",
)
@click.option("--by", default=None, metavar="NAME", help="Who publishes (with --publish).")
@click.option("--note", default="", metavar="TEXT", help="Why (with --publish).")
@cli_mod.json_option(
    'Print {"imported", "steps", "created", "replaced", "published"} as JSON; refused rows '
    'as {"refused": [{"row", "field", "message"}]}.'
)
def import_(
    file: Path,
    app_spec: str,
    database: str | None,
    replace: bool,
    publish: bool,
    by: str | None,
    note: str,
    as_json: bool,
) -> None:
    """Import the flows of FILE (.yaml, .json or .csv), all or nothing.

    A file that cannot be read is exit status 2; rows that do not validate are listed,
    nothing is imported, and the exit status is 1. With --publish each imported flow is
    published as its next version in the same transaction (one that cannot be refuses
    the whole import).
    """
    if publish and not by:
        raise click.UsageError("--publish needs --by NAME: who publishes")
    try:
        docs = files.read_file(file)
    except files.FileInvalid as exc:
        raise cli_mod.InputError(str(exc)) from None
    except UnicodeDecodeError:
        # A spreadsheet's plain "CSV" is in the computer's own encoding, not UTF-8.
        spreadsheet = str(file).lower().endswith(".csv")
        how = ' (a spreadsheet saves it so as "CSV UTF-8")' if spreadsheet else ""
        raise cli_mod.InputError(f"{file} is not UTF-8 text: save it as UTF-8{how}") from None
    except (csv.Error, RecursionError) as exc:
        reason = "it nests too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise cli_mod.InputError(f"{file} cannot be read: {reason}") from None
    runner = _runner(app_spec, database)
    try:
        with runner.engine.begin() as conn:
            result = files.import_flows(
                conn, runner.binding, runner.tables, docs, replace=replace, columns=runner.columns
            )
            published = (
                _publish_all(runner, conn, [*result.created, *result.replaced], str(by), note)
                if publish
                else {}
            )
    except validation.RowsInvalid as exc:
        if as_json:
            refused = [
                {"row": label, "field": error.field, "message": error.message}
                for label, found in exc.rows
                for error in found
            ]
            cli_mod.echo_json({"refused": refused})
            sys.exit(1)
        click.echo(f"{file}: refused, nothing was imported:", err=True)
        for label, found in exc.rows:
            for error in found:
                click.echo(f"  {label}: {error.field}: {error.message}", err=True)
        sys.exit(1)
    count = len(result.created) + len(result.replaced)
    if as_json:
        cli_mod.echo_json(
            {
                "imported": count,
                "steps": result.steps,
                "created": result.created,
                "replaced": result.replaced,
                "published": published,
            }
        )
        return
    parts = []
    if result.created:
        parts.append("created " + ", ".join(result.created))
    if result.replaced:
        parts.append("replaced " + ", ".join(result.replaced))
    if published:
        parts.append(
            "published " + ", ".join(f"{name} as version {n}" for name, n in published.items())
        )
    click.echo(
        f"imported {count} flow(s), {result.steps} step(s)"
        + (": " if parts else "")
        + "; ".join(parts)
    )


def _publish_all(
    runner: FlowRunner, conn: Any, names: list[str], by: str, note: str
) -> dict[str, int]:
    """Publish each named flow; the version each became (one the same as its latest
    version already is left as it is)."""
    from flowrunner import errors

    published = {}
    for name in names:
        try:
            published[name] = runner.publish(conn, name, by=by, note=note).number
        except errors.OperatorError as exc:
            if exc.code != "nothing_to_publish":
                raise
    return published


@flows.command("export", epilog=cli_mod.EXIT_STATUSES)
@APP
@DATABASE
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file (.yaml, .json or .csv) instead of standard output.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["yaml", "json", "csv"]),
    default=None,
    help="Defaults to the output file's suffix, else yaml.",
)
@cli_mod.json_option('The same as --format json: {"flows": [...]}, as `flows import` reads it.')
def export(
    app_spec: str, database: str | None, output: Path | None, fmt: str | None, as_json: bool
) -> None:
    """Write every stored flow and its steps as YAML (or JSON, or CSV)."""
    if as_json:
        if fmt not in (None, "json"):
            raise click.UsageError(f"--json and --format {fmt} disagree: give one of them")
        fmt = "json"
    runner = _runner(app_spec, database)
    with runner.engine.connect() as conn:
        docs = files.export_flows(conn, runner.binding, runner.tables)
    if fmt is None:
        suffix = output.suffix.lower() if output is not None else ""
        fmt = {".csv": "csv", ".json": "json"}.get(suffix, "yaml")
    if fmt == "csv":
        text = files.dumps_csv(docs, runner.binding)
    else:
        text = files.dumps_json(docs) if fmt == "json" else files.dumps_yaml(docs)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"exported {len(docs)} flow(s) to {output}", err=True)


@flows.command("list", epilog=cli_mod.EXIT_STATUSES)
@APP
@DATABASE
@click.option(
    "--slots",
    default=3,
    show_default=True,
    type=click.IntRange(min=0, max=50),
    help="How many of a scheduled flow's next slots to show.",
)
@cli_mod.json_option(
    'Print {"flows": [{"id", "name", "tenant", "start", "schedule", "timezone", "condition", '
    '"active", "next_slots"}]} as one JSON document (the slots in UTC).'
)
def list_(app_spec: str, database: str | None, slots: int, as_json: bool) -> None:
    """Each stored flow: when it starts, its condition, whether it is active, and a
    scheduled flow's next slots (on its own wall clock)."""
    runner = _runner(app_spec, database)
    now = runner.clock()
    with runner.engine.connect() as conn:
        stored = flow_rows.all_flows(conn, runner.tables)
    tenant = runner.binding.tenant
    shown = []
    for flow in stored:
        found = scheduled.schedule_of(flow)
        shown.append(
            {
                "id": flow["id"],
                "name": flow["name"],
                "tenant": None if tenant is None else flow.get(tenant),
                "start": flow["start"],
                "schedule": None if found is None else found.every,
                "timezone": None if found is None else found.timezone,
                "condition": flow.get("condition") or None,
                "active": flow.get("active") not in (False, 0),
                "next_slots": scheduled.next_slots(flow, now, slots),
            }
        )
    if as_json:
        cli_mod.echo_json({"flows": shown})
        return
    if not shown:
        click.echo("no flows are stored")
        return
    rows = [("flow", "starts", "condition", "active", "next slots")]
    for line in shown:
        starts_on = str(line["start"])
        zone = None
        if line["schedule"] is not None:
            starts_on = schedules.parse(str(line["schedule"]), str(line["timezone"])).said()
            zone = schedules.zone(str(line["timezone"]))
        next_at = line["next_slots"]
        assert isinstance(next_at, list)
        rows.append(
            (
                str(line["name"]) + ("" if line["tenant"] is None else f" [{line['tenant']}]"),
                starts_on,
                str(line["condition"] or "-"),
                "yes" if line["active"] else "no",
                ", ".join(history.when(slot, zone) for slot in next_at) or "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


@flows.command("validate", epilog=cli_mod.EXIT_STATUSES)
@APP
@DATABASE
@cli_mod.json_option(
    'Print {"flows", "steps", "sound", "broken": [{"flow", "problems": [...]}], "warnings"} '
    "as JSON."
)
def validate_(app_spec: str, database: str | None, as_json: bool) -> None:
    """Check every stored flow and step row against the binding; exit 1 if any is broken.

    Events something waits for that nothing records are warned of ([api-event-unknown]).
    """
    runner = _runner(app_spec, database)
    steps = 0
    problems: list[tuple[str, list[str]]] = []  # (flow, its sentences) per broken flow
    with runner.engine.connect() as conn:
        stored = flow_rows.all_flows(conn, runner.tables)
        for flow in stored:
            snap = starts.stored_snapshot(conn, runner.tables, flow["id"])
            steps += len(snap.steps)
            found = validation.sentences(snap, runner.binding, runner.columns)
            if found:
                problems.append((snap.flow.name, found))
    broken = len(problems)
    warnings = runner.event_warnings()  # what would wait for ever: said, not refused
    if as_json:
        cli_mod.echo_json(
            {
                "flows": len(stored),
                "steps": steps,
                "sound": not broken,
                "broken": [{"flow": name, "problems": found} for name, found in problems],
                "warnings": warnings,
            }
        )
        if broken:
            sys.exit(1)
        return
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    for _, found in problems:
        for sentence in found:
            click.echo(sentence, err=True)
    if broken:
        click.echo(f"{broken} of {len(stored)} flow(s) have broken rows", err=True)
        sys.exit(1)
    click.echo(f"{len(stored)} flow(s), {steps} step(s): all sound")
