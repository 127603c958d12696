"""The ``flowrunner`` command line: one group, each subcommand in its own module.

Every command refuses what it cannot use the same way, here and nowhere else: exit
status 2 and one line, ``Error: <sentence>`` — for a bad ``--app``, database URL, file,
condition, duration or option, an unreachable database, or any ``FlowrunnerError``.
Exit status 1 is a verdict the command reached (``flows validate`` found broken rows,
``flows import`` refused rows, ``migrate status --check`` found the tables behind) or a
bug: an unexpected error, also one line (``FLOWRUNNER_TRACEBACK=1`` shows where).

Every command that prints data takes ``--json``: one JSON document on standard output
(``echo_json``), whatever else goes to standard error. ``--database`` is the database a
command acts on, or it is refused (``flowrunner.cli.app_loader.load_app``): never another one.
"""

from __future__ import annotations

import datetime as dt
import decimal
import importlib
import json
import os
import shlex
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import click

if TYPE_CHECKING:
    from flowrunner.runner import FlowRunner

# name -> "module:attribute"; loaded only when the subcommand is used, so
# `flowrunner --help` stays fast and one broken subcommand cannot break the rest.
SUBCOMMANDS = {
    "query": "flowrunner.cli.query_cmd:query",
    "flows": "flowrunner.cli.flows_cmd:flows",
    "migrate": "flowrunner.cli.migrate_cmd:migrate",
    "worker": "flowrunner.cli.engine_cmd:worker",
    "deliver": "flowrunner.cli.deliver_cmd:deliver",
    "demo": "flowrunner.cli.demo_cmd:demo",
    "prune": "flowrunner.cli.prune_cmd:prune",
    "console": "flowrunner.cli.console_cmd:console",
    "diagram": "flowrunner.cli.diagram_cmd:diagram",
    "runs": "flowrunner.cli.runs_cmd:runs",
    "jobs": "flowrunner.cli.jobs_cmd:jobs",
    "authority": "flowrunner.cli.authority_cmd:authority",
}
# name -> the command's own short help (the first sentence of its docstring), which
# `flowrunner --help` lists without importing the command (a test keeps them equal).
SUMMARIES = {
    "authority": "Who each part of the app runs as and what it may call: lock it, check it in CI.",
    "console": "Serve the web console of the app's runner: flows, records' runs, Operations.",
    "deliver": "Send the app's notices through its channels until stopped (SIGTERM or Ctrl-C).",
    "demo": "Run the support-desk and purchase-order sample apps through the real engine.",
    "diagram": "Draw FLOW (its name or id): each position a column, its steps as lanes.",
    "flows": (
        "Flows as files: import, export, list and validate the stored rows (a scheduled flow "
        "with its next slots); a flow's versions: publish, list, compare, roll back."
    ),
    "jobs": "The app's jobs: list them, run one now, pause, resume, backfill.",
    "migrate": "Create or move flowrunner's own tables (forward-only migrations).",
    "prune": "Delete the app's history older than --older-than, in short batches.",
    "query": "Check CONDITION: print its canonical form, its SQL and, with --record, the result.",
    "runs": (
        "Runs across records: list, show, cancel, retry, redrive, restart, move to another "
        "version of their flow, fork a code workflow's run; the journal, the notices outbox "
        "and the signed callbacks received and refused."
    ),
    "worker": "Serve due runs until stopped (SIGTERM or Ctrl-C: it finishes the runs in hand).",
}

TRACEBACK_VARIABLE = "FLOWRUNNER_TRACEBACK"
# Where --app and --database come from when they are not typed: a deployment sets them
# once for every command.
APP_VARIABLE = "FLOWRUNNER_APP"
DATABASE_VARIABLE = "FLOWRUNNER_DATABASE_URL"


class FromEnvironment(click.Option):
    """An option that may come from an environment variable (``envvar``, shown in the
    help): an error about its value names the variable only when the value came from it,
    so a typed option's errors read as they always have."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        source = ctx.get_parameter_source(self.name) if ctx and self.name else None
        if source is click.core.ParameterSource.ENVIRONMENT:
            return super().get_error_hint(ctx)
        return click.Parameter.get_error_hint(self, ctx)


EXIT_STATUSES = """\b
Exit status: 0 done; 1 a verdict (broken rows, tables behind) or an unexpected error;
2 something given cannot be used (an option, a file, the app, the database).
"""


class InputError(click.ClickException):
    """What the user gave cannot be used: ``Error: <sentence>`` on one line, exit status 2.

    ``detail`` lines (a caret under a condition's mistake) follow the sentence where a
    command's job is to show them.
    """

    exit_code = 2

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(_one_line(message))
        self.detail = detail

    def show(self, file: Any = None) -> None:
        super().show(file)
        if self.detail:
            click.echo(self.detail, err=file is None, file=file)


class Unexpected(click.ClickException):
    """An error no input explains (a bug): one line, exit status 1."""

    exit_code = 1


def _one_line(message: str) -> str:
    return "; ".join(line.strip() for line in str(message).splitlines() if line.strip())


def refusal(exc: Exception) -> click.ClickException:
    """The one-line exit for an exception escaping a command.

    flowrunner's own errors, SQLAlchemy's URL and connection errors, the operating
    system's (a missing file, a folder not writable) and an optional library not
    installed (the extra to install named) are about what was given: exit 2. Anything
    else is unexpected: exit 1, the exception's type and message on one line.
    """
    from flowrunner import errors
    from flowrunner.foundations import extras

    if isinstance(exc, errors.FlowrunnerError):
        return InputError(str(exc))
    if isinstance(exc, ModuleNotFoundError) and extras.missing(exc) is not None:
        return InputError(str(extras.explained(exc, what="flowrunner")))
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return InputError(f"{where}{exc.strerror or exc}")
    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is not None:
        if isinstance(exc, sa_exc.ArgumentError | sa_exc.NoSuchModuleError):
            return InputError(f"cannot use the database: {exc}")
        if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError):
            return InputError(f"cannot use the database: {_reason(exc)}")
    return Unexpected(
        f"unexpected {type(exc).__name__}: {_one_line(str(exc)) or 'no message'} "
        f"(set {TRACEBACK_VARIABLE}=1 to see where)"
    )


def _reason(exc: Any) -> str:
    """The driver's own first line, without SQLAlchemy's statement and background link."""
    orig = getattr(exc, "orig", None)
    lines = str(orig if orig is not None else exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _usage_line(exc: click.UsageError) -> click.ClickException:
    """A usage error (an unknown option, a value an option's type refuses) as every
    other refusal: one line, exit status 2, with where the command's help is. A group
    called without its command still shows its help."""
    if isinstance(exc, _HELP_SHOWN):
        return exc
    path = exc.ctx.command_path if exc.ctx is not None else "flowrunner"
    return InputError(f"{exc.format_message().rstrip('.')} (see '{path} --help')")


# Click 8.2 and later say "no command given" by showing the group's help (exit 2).
_HELP_SHOWN: tuple[type[click.UsageError], ...] = tuple(
    kind
    for kind in (getattr(click.exceptions, "NoArgsIsHelpError", None),)
    if isinstance(kind, type)
)


class Id(click.ParamType):  # type: ignore[type-arg]  # generic in click 8.2+
    """An id on the command line (``--before``, a run): ``flowrunner.foundations.ids``'
    one rule, a whole number from 1 to 2**63 - 1, as the console and the API read it."""

    name = "id"

    def __init__(self, what: str = "row") -> None:
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from flowrunner.foundations import ids

        try:
            return ids.read(value, self.what)
        except ids.NotAnId as exc:
            self.fail(str(exc), param, ctx)


def _refused(exc: Exception) -> NoReturn:
    if os.environ.get(TRACEBACK_VARIABLE):
        raise exc
    raise refusal(exc) from exc


class LazyGroup(click.Group):
    """The root group: loads subcommands when used, and turns every error into one line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their short help, as click lists them, none of them imported."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        # A stand-in per command, shortened as click shortens the command's own help.
        rows = [
            (name, click.Command(name, help=SUMMARIES[name]).get_short_help_str(limit))
            for name in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise _usage_line(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _usage_line(exc) from exc
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            _refused(exc)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                return None
            raise
        command: Any = getattr(module, attr)
        assert isinstance(command, click.Command)
        return command


def database_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--database``: a URL SQLAlchemy can use, checked before anything connects.

    The value stays text (an app's factory takes it as written); a malformed URL, an
    unknown database or a driver that is not installed is a usage error naming the
    option, with any password hidden.
    """
    if value is None:
        return None
    import sqlalchemy as sa

    try:
        url = sa.engine.make_url(value)
    except (sa.exc.ArgumentError, ValueError):
        raise click.BadParameter(
            "is not a database URL — write e.g. sqlite:///app.db or "
            "postgresql+psycopg://user@host/db",
            ctx,
            param,
        ) from None
    shown = url.render_as_string(hide_password=True)
    try:
        dialect = url.get_dialect()
    except sa.exc.NoSuchModuleError:
        message = f"{shown!r} names no database SQLAlchemy knows"
        raise click.BadParameter(message, ctx, param) from None
    try:
        # Dialects written before SQLAlchemy 2 may lack it; their driver loads at connect.
        getattr(dialect, "import_dbapi", lambda: None)()
    except ImportError as exc:
        raise click.BadParameter(_no_driver(url, shown, exc), ctx, param) from None
    return value


def _no_driver(url: Any, shown: str, exc: ImportError) -> str:
    """What to install (or write) for a database URL whose driver is not installed."""
    if url.get_backend_name() == "postgresql":
        if url.get_driver_name() == "psycopg":
            return (
                f"{shown!r} needs psycopg, which is not installed: "
                "pip install 'flowrunner[postgres]'"
            )
        return (
            f"{shown!r} needs {url.get_driver_name()}, which is not installed; flowrunner's "
            "postgres extra brings psycopg: write postgresql+psycopg://… and "
            "pip install 'flowrunner[postgres]'"
        )
    return f"{shown!r} needs a database driver that is not installed ({exc})"


DATABASE_HELP = (
    "The database to act on, e.g. sqlite:///app.db. Handed to --app when it is a function "
    "taking url; an app's runner already bound to another database is refused, never "
    "used instead."
)


APP_HELP = "The application's FlowRunner, or a function returning one."


def app_option(help: str = APP_HELP) -> Callable[..., Any]:
    """``--app MODULE:ATTR``, or ``FLOWRUNNER_APP`` when it is not typed: the application's
    runner, loaded by ``app_loader`` when the command runs."""
    return click.option(
        "--app",
        "app_spec",
        required=True,
        metavar="MODULE:ATTR",
        cls=FromEnvironment,
        envvar=APP_VARIABLE,
        show_envvar=True,
        help=help,
    )


def database_option(help: str = DATABASE_HELP) -> Callable[..., Any]:
    """``--database URL``, or ``FLOWRUNNER_DATABASE_URL`` when it is not typed, checked as a
    URL before the command runs."""
    return click.option(
        "--database",
        cls=FromEnvironment,
        default=None,
        metavar="URL",
        envvar=DATABASE_VARIABLE,
        show_envvar=True,
        callback=database_url,
        help=help,
    )


def log_format_option() -> Callable[..., Any]:
    """``--log-format text|json``: the log lines on standard error as ``time LEVEL logger
    message`` text, or one JSON object a line (``flowrunner.foundations.logs.JsonLines``)."""
    return click.option(
        "--log-format",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="Write the log lines as text, or as one JSON object a line (time, level, "
        "logger, message), sanitized alike.",
    )


def teller(log_format: str) -> Callable[[str], None]:
    """How a command that logs says what it does on standard error: a plain line, or
    (``--log-format json``) a log record, so that every line there is one JSON object."""
    if log_format == "json":
        from flowrunner.foundations import logs

        return logs.logger("flowrunner.cli").info
    return lambda line: click.echo(line, err=True)


def json_option(
    help: str = "Print one JSON document on standard output instead of text.",
) -> Callable[..., Any]:
    """``--json``: the command's data as one JSON document (``echo_json``)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def echo_json(document: object) -> None:
    """Print ``document`` as one line of JSON on standard output.

    Moments and dates are ISO 8601 text; a decimal number is a JSON number when one
    holds it exactly, else text: never rounded.
    """
    click.echo(json.dumps(document, ensure_ascii=False, default=_plain))


def _plain(value: object) -> object:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        number = float(value)
        return number if decimal.Decimal(repr(number)) == value else str(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def load_runner(spec: str, database: str | None, *, check_schema: bool = True) -> FlowRunner:
    """The app's runner named by ``--app``; whatever goes wrong loading it is exit 2.

    An error the app's own code raises while it is imported or built (a syntax error, a
    factory that fails) is the app's, not flowrunner's: it is named in one line.
    """
    from flowrunner import errors
    from flowrunner.cli import app_loader

    try:
        return app_loader.load_app(spec, database_url=database, check_schema=check_schema)
    except errors.SchemaOutdated as exc:
        # The command to run, with what this one was given.
        from flowrunner.store import migrate

        told = str(exc).replace(migrate.UP_COMMAND, up_command(spec, database))
        raise errors.SchemaOutdated(told) from exc
    except errors.FlowrunnerError:
        raise
    except Exception as exc:
        found = refusal(exc)
        if isinstance(found, InputError):
            raise found from exc
        if os.environ.get(TRACEBACK_VARIABLE):
            raise
        raise InputError(
            f"cannot load --app {spec}: {type(exc).__name__}: {_one_line(str(exc))}"
        ) from exc


def up_command(spec: str | None, database: str | None) -> str:
    """The ``flowrunner migrate up`` for what a command was given: its ``--app`` and
    ``--database`` (a password hidden), quoted for a shell; ``--app MODULE:ATTR`` when
    it was given neither."""
    from flowrunner.store import migrate

    if spec is None and database is None:
        return migrate.UP_COMMAND
    words = ["flowrunner", "migrate", "up"]
    if spec is not None:
        words += ["--app", spec]
    if database is not None:
        import sqlalchemy as sa

        words += ["--database", sa.engine.make_url(database).render_as_string(hide_password=True)]
    return shlex.join(words)


def jobs_option() -> Callable[..., Any]:
    """``--jobs MODULE:ATTR``: what only the server runs (``ServerParts``), loaded beside
    ``--app`` by the commands that serve; the web app and the console never import it."""
    return click.option(
        "--jobs",
        "jobs_spec",
        default=None,
        metavar="MODULE:ATTR",
        help="A server-only module's ServerParts (jobs, inbound endpoints, code workflows "
        "and their commands), mounted on the app's runner here and never imported by "
        "its web app.",
    )


def mount_jobs(runner: FlowRunner, spec: str | None) -> None:
    """Mount ``--jobs MODULE:ATTR`` on ``runner`` (nothing without it); whatever goes
    wrong loading it is exit 2, in one line."""
    if spec is None:
        return
    from flowrunner import errors
    from flowrunner.cli import app_loader

    try:
        runner.mount_server(app_loader.load_server_parts(spec))
    except errors.FlowrunnerError:
        raise
    except Exception as exc:
        if os.environ.get(TRACEBACK_VARIABLE):
            raise
        raise InputError(
            f"cannot load --jobs {spec}: {type(exc).__name__}: {_one_line(str(exc))}"
        ) from exc


@click.group(cls=LazyGroup, epilog=EXIT_STATUSES)
@click.version_option(package_name="flowrunner")
def cli() -> None:
    """flowrunner: workflows that business users edit as rows, run durably over records."""


def main() -> None:
    cli()
