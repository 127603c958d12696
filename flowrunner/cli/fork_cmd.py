"""``flowrunner runs fork RUN --from STEP --operator NAME``: a code workflow's run forked
from a named step — a new run that replays the steps before it as recorded and does the
rest anew.

It says the new run in a sentence (``--json``: one JSON document); a refusal — a step
the run never reached, a run of a flow from rows, a workflow version the app no longer
has — is one line and exit status 2.
"""

from __future__ import annotations

import click

from flowrunner import cli as cli_mod


@click.command("fork", epilog=cli_mod.EXIT_STATUSES)
@click.argument("run_id", metavar="RUN")
@click.option(
    "--from",
    "from_step",
    required=True,
    metavar="STEP",
    help="The step the new run does anew, and every step after it; those before it are "
    "replayed as recorded.",
)
@click.option(
    "--app",
    "app_spec",
    required=True,
    metavar="MODULE:ATTR",
    help="The application's FlowRunner, or a function returning one.",
)
@cli_mod.database_option()
@click.option(
    "--tenant",
    default=None,
    metavar="TENANT",
    help="Whose run (required when the app's records belong to tenants).",
)
@click.option(
    "--operator", required=True, metavar="NAME", help="Who forks: written to the journal."
)
@click.option(
    "--reason", default="", metavar="TEXT", help="Why, for the journal and the histories."
)
@cli_mod.json_option('Print {"run", "from", "forked_as", "sentence"} as one JSON document.')
def fork(
    run_id: str,
    from_step: str,
    app_spec: str,
    database: str | None,
    tenant: str | None,
    operator: str,
    reason: str,
    as_json: bool,
) -> None:
    """Fork the code workflow's RUN from STEP: a new run of the same version, on the same
    record and start, replays the steps before STEP (nothing called again) and runs STEP
    and the rest anew.

    \b
    Example:
      flowrunner runs fork 12 --from charge --operator olga --app myapp:runner
    """
    runner = cli_mod.load_runner(app_spec, database)
    new_id = runner.fork(
        run_id, from_step=from_step, operator=operator, reason=reason, tenant=tenant
    )
    sentence = f"run {run_id} forked from {from_step!r} as run {new_id}"
    if as_json:
        cli_mod.echo_json(
            {
                "run": runner.mounted.run_id(run_id),
                "from": from_step,
                "forked_as": new_id,
                "sentence": sentence,
            }
        )
        return
    click.echo(sentence)
