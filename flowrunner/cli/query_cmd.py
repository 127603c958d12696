"""``flowrunner query``: try a condition — its canonical form, its SQL, its result on a record."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from flowrunner import cli as cli_mod
from flowrunner import errors
from flowrunner import query as ql  # `query` names the command here
from flowrunner.foundations import shapes
from flowrunner.query import ast
from flowrunner.query import types as types_mod
from flowrunner.store import condition_sql


def _json_object(text: str | None, option: str) -> shapes.JsonDict | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(
            f"is not JSON: {exc.msg} at column {exc.colno}", param_hint=option
        ) from None
    except RecursionError:
        raise click.BadParameter("nests too deeply to read", param_hint=option) from None
    except ValueError:  # a whole number of thousands of digits, which Python refuses to read
        raise click.BadParameter("holds a number too long to read", param_hint=option) from None
    if not isinstance(value, dict):
        raise click.BadParameter("must be a JSON object", param_hint=option)
    return value


def _guess(value: object) -> ql.ColumnType | None:
    """The type a record's JSON value most likely has, for a table to compile against."""
    if isinstance(value, bool):
        return ql.ColumnType.BOOLEAN
    if isinstance(value, int | float):
        return ql.ColumnType.NUMBER
    if isinstance(value, str):
        if len(value) == 10 and ql.coerce(value, ql.ColumnType.DATE) is not None:
            return ql.ColumnType.DATE
        if len(value) > 10 and ql.coerce(value, ql.ColumnType.TIMESTAMP) is not None:
            return ql.ColumnType.TIMESTAMP
        return ql.ColumnType.TEXT
    return None


def _columns(
    condition: ql.Condition, types: dict[str, ql.ColumnType], record: shapes.Row
) -> dict[str, ql.ColumnType]:
    """The columns to show the SQL over: those given, those of the record, those named."""
    names = dict(types)
    for name, value in record.items():
        guessed = _guess(value)
        if name not in names and guessed is not None:
            names[name] = guessed
    for node in ast.walk(condition.node):
        if isinstance(node, ast.Compare | ast.In) and node.left.scope == "record":
            names.setdefault(node.left.name, node.ctype or ql.ColumnType.TEXT)
        elif isinstance(node, ast.IsNull) and node.left.scope == "record":
            names.setdefault(node.left.name, ql.ColumnType.TEXT)
    return names


@click.command("query", epilog=cli_mod.EXIT_STATUSES)
@click.argument("condition")
@click.option(
    "--record", "record_json", help="A record as a JSON object, to test the condition on."
)
@click.option("--columns", "columns_json", help='Column types as JSON, e.g. {"amount": "number"}.')
@click.option("--event", "event_json", help="The latest event's payload as JSON (allows event.x).")
@click.option(
    "--sql",
    "dialect",
    type=click.Choice(condition_sql.DIALECTS),
    default="sqlite",
    show_default=True,
    help="The database to show the SQL for.",
)
@click.option("--now", "now_text", help="The moment now() means, ISO 8601 (default: the clock).")
@cli_mod.json_option(
    'Print {"condition", "dialect", "sql", "parameters", "matches"} as one JSON document '
    "(matches is null without --record)."
)
def query(
    condition: str,
    record_json: str | None,
    columns_json: str | None,
    event_json: str | None,
    dialect: str,
    now_text: str | None,
    as_json: bool,
) -> None:
    """Check CONDITION: print its canonical form, its SQL and, with --record, the result.

    A condition that cannot be read is exit status 2: "Error: line L, column C: ..."
    and the condition with a caret under the mistake. Dates and times lie in years 1
    to 9999 (UTC).

    \b
    Example:
      flowrunner query "amount > 1000 and status = open" \\
        --record '{"amount": 1500, "status": "open"}' --json
    """
    record = _json_object(record_json, "--record") or {}
    columns = _json_object(columns_json, "--columns")
    event = _json_object(event_json, "--event")
    now = datetime.now(UTC)
    if now_text is not None:
        moment = types_mod.to_timestamp(now_text)
        if moment is None:
            raise click.BadParameter(f"{now_text!r} is not an ISO 8601 moment", param_hint="--now")
        now = moment
    try:
        types = ql.column_types(columns) if columns is not None else {}
    except errors.BindingError as exc:
        raise click.BadParameter(str(exc), param_hint="--columns") from None
    try:
        parsed = ql.parse(condition, types or None, event=event is not None)
        sql, params = condition_sql.compiled(
            parsed, _columns(parsed, types, record), dialect, now=now, event=event
        )
    except errors.QueryError as exc:
        raise cli_mod.InputError(str(exc), detail=exc.context()) from None
    result = None if record_json is None else parsed.matches(record, now=now, event=event)
    if as_json:
        cli_mod.echo_json(
            {
                "condition": str(parsed),
                "dialect": dialect,
                "sql": " ".join(sql.split()),
                "parameters": params,
                "matches": result,
            }
        )
        return
    click.echo(f"condition: {parsed}")
    click.echo(f"sql ({dialect}): {' '.join(sql.split())}")
    if params:
        click.echo("parameters:")
        for name, value in params.items():
            click.echo(f"  {name} = {value!r}")
    if result is not None:
        click.echo(f"matches: {'true' if result else 'false'}")
