"""``flowrunner runs``: the Operations room on the command line — runs across records,
one run in full, the operators' actions on many runs, the journal and the outbox.

The same questions and the same actions as the console's, with the same refusals
(``flowrunner.engine.operations_room``): an action is done run by run, each in its own
transaction, and each run it does not apply to is refused with its reason on a line of
its own while the others go on.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING

import click

from flowrunner import cli as cli_mod
from flowrunner.cli import deliveries_cmd, fork_cmd, versions_cmd
from flowrunner.engine import actions, bulk, operations_room, record_names
from flowrunner.engine.operations import RunQuery
from flowrunner.foundations import shapes
from flowrunner.history import flows
from flowrunner.history import runs as run_words
from flowrunner.store import events, listing

if TYPE_CHECKING:
    from rich.table import Table

    from flowrunner.runner import FlowRunner
    from flowrunner.store import operations as ops

EXIT_STATUSES = """\b
Exit status: 0 done; 1 a verdict (an action refused for some run: each said on its own
line, the others done) or an unexpected error; 2 something given cannot be used (an
option, a filter, the app, the database, a run id that is not a number).
"""

APP = cli_mod.app_option()
DATABASE = cli_mod.database_option()
TENANT = click.option(
    "--tenant",
    default=None,
    metavar="TENANT",
    help="Whose runs (required when the app's records belong to tenants).",
)
LIMIT = click.option(
    "--limit",
    type=click.IntRange(1, listing.MAX_LIMIT),
    default=operations_room.DEFAULT_LIMIT,
    show_default=True,
    help="How many to show.",
)
BEFORE = click.option(
    "--before",
    "before_id",
    type=cli_mod.Id(),
    default=None,
    metavar="ID",
    help="Show those older than this id: the next page, as the last one said.",
)


@click.group(epilog=EXIT_STATUSES)
def runs() -> None:
    """Runs across records: list, show, cancel, retry, redrive, restart, move to another
    version of their flow, fork a code workflow's run; the journal, the notices outbox and
    the signed callbacks received and refused."""


# -- list --------------------------------------------------------------------------------


@runs.command("list", epilog=EXIT_STATUSES)
@APP
@DATABASE
@TENANT
@click.option(
    "--status",
    "status",
    multiple=True,
    metavar="STATUS",
    help="running, waiting, done, failed, cancelled, or stuck (not ended, held by no worker, "
    "its work missed for --stuck-after); again for several.",
)
@click.option("--flow", default=None, metavar="NAME", help="A flow's name (in any case) or id.")
@click.option("--record", default=None, metavar="ID", help="One record's runs.")
@click.option(
    "--older-than", default=None, metavar="DURATION", help="Started longer ago: 2d, '3 hours'."
)
@click.option("--newer-than", default=None, metavar="DURATION", help="Started more recently.")
@click.option(
    "--stuck-after",
    default=None,
    metavar="DURATION",
    help="How long due work may go unclaimed, or a lease stay run out, before a run is "
    "stuck (default 15 minutes).",
)
@LIMIT
@BEFORE
@cli_mod.json_option('Print {"runs": [...], "next_before"} as one JSON document.')
def list_(
    app_spec: str,
    database: str | None,
    tenant: str | None,
    status: tuple[str, ...],
    flow: str | None,
    record: str | None,
    older_than: str | None,
    newer_than: str | None,
    stuck_after: str | None,
    limit: int,
    before_id: int | None,
    as_json: bool,
) -> None:
    """Runs across records, newest first: where each waits and for what.

    \b
    Examples:
      flowrunner runs list --app myapp:runner --status failed --older-than 2d
      flowrunner runs list --app myapp:runner --status stuck --flow 'big orders'
    """
    runner = cli_mod.load_runner(app_spec, database)
    page = runner.list_runs(
        status=status or None,
        flow=flow,
        record=record,
        older_than=older_than,
        newer_than=newer_than,
        stuck_after=stuck_after,
        tenant=tenant,
        before_id=before_id,
        limit=limit,
    )
    tz = runner.config.timezone
    if as_json:
        documents = [run_document(run, tz) for run in page]
        for document in documents:
            document["stuck"] = document["id"] in page.stuck
        cli_mod.echo_json({"runs": documents, "next_before": page.next_before})
        return
    if not page.rows:
        click.echo("no runs" + (" on this page" if before_id else ""))
        return
    now = runner.clock()
    # Each record as people name it (the binding's record_label), where it has a name.
    names = runner.operations.record_names([run.record_id for run in page], tenant=tenant)
    record_column = runner.binding.resource_label
    table = _table("run", "flow", record_column, "status", "where it stands", "started")
    for run in page:
        ago = operations_room.age(now - run.started_at)
        table.add_row(
            str(run.id),
            run.flow_name,
            names.get(run.record_id, run.record_id),
            f"{run.status}, stuck" if run.id in page.stuck else str(run.status),
            operations_room.where_it_stands(run, tz),
            f"{flows.when(run.started_at, tz)} ({ago} ago)",
        )
    _print(table)
    if page.next_before is not None:
        click.echo(f"more: --before {page.next_before}")


# -- show --------------------------------------------------------------------------------


@runs.command("show", epilog=EXIT_STATUSES)
@click.argument("run_id", metavar="RUN")
@APP
@DATABASE
@TENANT
@cli_mod.json_option('Print {"run", "history": [...]} as one JSON document.')
def show(
    run_id: str, app_spec: str, database: str | None, tenant: str | None, as_json: bool
) -> None:
    """One run: its record and flow, where it waits, why it failed, its history in words."""
    runner = cli_mod.load_runner(app_spec, database)
    run = runner.get_run(run_id, tenant=tenant)
    lines = runner.history(run.id, tenant=tenant)
    tz = runner.config.timezone
    if as_json:
        shown = run_document(run, tz)
        shown["stuck"] = operations_room.is_stuck(runner.mounted, run)
        cli_mod.echo_json(
            {
                "run": shown,
                "history": [
                    {
                        "id": line.id,
                        "at": line.at,
                        "due_at": line.due_at,
                        "position": line.position,
                        "title": line.title,
                        "kind": line.kind,
                        "what": line.what,
                        "sentence": line.sentence,
                        "detail": line.detail,
                    }
                    for line in lines
                ],
            }
        )
        return
    names = runner.operations.record_names([run.record_id], tenant=tenant)
    record = record_names.named(runner.mounted, names, run.record_id)
    stuck = operations_room.is_stuck(runner.mounted, run)
    status = f"{run.status}, stuck: no worker has taken its work" if stuck else str(run.status)
    click.echo(f"Run {run.id}: {run.flow_name} on {record} — {status}")
    started = f"{flows.when(run.started_at, tz)}"
    if run.started_by:
        started += f" by {run.started_by}"
    rows = [("started", started)]
    if run.ended_at is not None:
        rows.append(("ended", flows.when(run.ended_at, tz)))
    rows += [("waits", flows.waiting_sentence(w, tz)) for w in run.waiting]
    if run.reason:
        rows.append(("why", run_words.reason(run.reason)))
    if run.error:
        if run.status == "failed":
            rows.append(("retrying", run_words.retrying(run.error) or ""))
        shown = run_words.shown_error(run.error)
        rows += [(f"error {name}", _plain(value)) for name, value in shown.items()]
    if run.restarted_as is not None:
        rows.append(("restarted as", f"run {run.restarted_as}"))
    if run.tenant is not None:
        rows.append(("tenant", run.tenant))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        click.echo(f"  {name:<{width}}  {value}")
    click.echo("History:")
    for line in lines:
        # The step by its title, where the sentence does not name it already.
        where = f"{line.title}: " if line.title and line.title not in line.sentence else ""
        click.echo(f"  {flows.when(line.at, tz)}  {where}{line.sentence}")


# -- the actions -------------------------------------------------------------------------


FILTER_EXAMPLES = {
    actions.Action.CANCEL: "--status waiting --flow 'big orders' --older-than 30d",
    actions.Action.RETRY: "--status failed --error gateway",
    actions.Action.REDRIVE: "--status stuck",
    actions.Action.RESTART: "--status failed --error 'ledger is full' --flow Sync",
}


def _action(action: actions.Action, summary: str) -> click.Command:
    verb = action.value
    help_text = f"""{summary}

    Name the runs (RUN...), or act on every run a filter matches (--status, --flow,
    --error, --record, --older-than, --newer-than): the runs are counted first and you are
    asked to confirm the count ("{verb.capitalize()} 300 runs?") unless --yes; then each
    run is acted on by itself, a batch at a time, journaled under --operator. A run the
    action does not apply to any more is refused with its reason; the others go on.

    \b
    Examples:
      flowrunner runs {verb} 12 14 --app myapp:runner --operator olga
      flowrunner runs {verb} --app myapp:runner --operator olga {FILTER_EXAMPLES[action]}
      flowrunner runs {verb} --app myapp:runner --operator olga {FILTER_EXAMPLES[action]} --yes
    """

    @runs.command(verb, help=help_text, epilog=EXIT_STATUSES)
    @click.argument("run_ids", metavar="[RUN...]", nargs=-1)
    @APP
    @DATABASE
    @TENANT
    @click.option(
        "--operator", required=True, metavar="NAME", help="Who acts: written to the journal."
    )
    @click.option("--reason", default="", metavar="TEXT", help="Why, for the journal.")
    @click.option(
        "--status",
        "status",
        multiple=True,
        metavar="STATUS",
        help="Act on the runs of this status (as runs list takes it); again for several.",
    )
    @click.option("--flow", default=None, metavar="NAME", help="... of this flow (name or id).")
    @click.option(
        "--error",
        default=None,
        metavar="TEXT",
        help="... whose error (the reason they failed or ended) holds this text, in any case.",
    )
    @click.option("--record", default=None, metavar="ID", help="... of one record.")
    @click.option("--older-than", default=None, metavar="DURATION", help="... started longer ago.")
    @click.option(
        "--newer-than", default=None, metavar="DURATION", help="... started more recently."
    )
    @click.option(
        "--yes", "-y", "yes", is_flag=True, help="With a filter: act without asking to confirm."
    )
    @click.option(
        "--dry-run", is_flag=True, help="Say what would be done and what refused; keep nothing."
    )
    @cli_mod.json_option(
        'Print {"action", "dry_run", "done", "refused", "outcomes": [{"run", "done", '
        '"code", "refusal", "restarted_as", "sentence"}]} as one JSON document (with a '
        'filter, also "counted" and "no_longer_matched").'
    )
    def command(
        run_ids: tuple[str, ...],
        app_spec: str,
        database: str | None,
        tenant: str | None,
        operator: str,
        reason: str,
        status: tuple[str, ...],
        flow: str | None,
        error: str | None,
        record: str | None,
        older_than: str | None,
        newer_than: str | None,
        yes: bool,
        dry_run: bool,
        as_json: bool,
    ) -> None:
        query = RunQuery(
            status=status or None,
            flow=flow,
            error=error,
            record=record,
            older_than=older_than,
            newer_than=newer_than,
        )
        filtered = query != RunQuery()
        if run_ids and filtered:
            raise click.UsageError("name the runs, or give a filter, not both")
        if not run_ids and not filtered:
            raise click.UsageError(
                "name the runs (RUN...), or give a filter: --status, --flow, --error, "
                "--record, --older-than, --newer-than"
            )
        runner = cli_mod.load_runner(app_spec, database)
        if run_ids:
            outcomes = runner.act(
                action, run_ids, operator=operator, reason=reason, tenant=tenant, dry_run=dry_run
            )
            names = {} if as_json else _run_names(runner, outcomes, tenant)
            _report(action, outcomes, dry_run, as_json, names=names)
            return
        _act_on_filter(runner, action, query, operator, reason, tenant, yes, dry_run, as_json)

    return command


def _act_on_filter(
    runner: FlowRunner,
    action: actions.Action,
    query: RunQuery,
    operator: str,
    reason: str,
    tenant: str | None,
    yes: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Count what the filter matches, confirm the count, act a batch at a time."""
    counted = runner.operations.count_matching(action, query, tenant=tenant)
    if not counted.count:
        if as_json:
            _report(action, [], dry_run, as_json, counted=0, no_longer=0)
        else:
            click.echo(f"no run matches: nothing to {action}")
        return
    asked = f"{action.value.capitalize()} {counted.count} run{'s' if counted.count != 1 else ''}?"
    if not (yes or dry_run):
        click.confirm(asked, abort=True, err=True)
    acted = _with_progress(runner, counted, query, operator, reason, tenant, dry_run, as_json)
    if as_json:
        _report(
            action,
            acted.outcomes,
            dry_run,
            as_json,
            counted=counted.count,
            no_longer=acted.moved_on,
        )
        return
    names = _run_names(runner, acted.refused, tenant)
    for outcome in acted.refused:
        click.echo(f"refused: {_about(outcome, names)}")
    click.echo(acted.summary)
    if acted.refused:
        sys.exit(1)


def _with_progress(
    runner: FlowRunner,
    counted: bulk.Counted,
    query: RunQuery,
    operator: str,
    reason: str,
    tenant: str | None,
    dry_run: bool,
    as_json: bool,
) -> bulk.Acted:
    """The action over the filter, a progress bar on the standard error while it goes."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    shown = not as_json and counted.count > bulk.BATCH
    bar = Progress(
        TextColumn(f"{counted.action.value}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not shown,
    )
    with bar:
        task = bar.add_task(str(counted.action), total=counted.count)
        return runner.operations.act_on_matching(
            counted,
            query,
            operator=operator,
            reason=reason,
            tenant=tenant,
            dry_run=dry_run,
            progress=lambda n: bar.advance(task, n),
        )


def _run_names(
    runner: FlowRunner, outcomes: Sequence[actions.Outcome], tenant: str | None
) -> Mapping[int, str]:
    """The names of the records the outcomes' runs are about (``record_label``)."""
    return runner.operations.run_record_names([o.run_id for o in outcomes], tenant=tenant)


def _about(outcome: actions.Outcome, names: Mapping[int, str]) -> str:
    """An outcome's sentence, after its run's record where it has a name:
    ``PO-3299: run 12 cancelled``."""
    name = names.get(outcome.run_id)
    return f"{name}: {outcome.sentence}" if name else outcome.sentence


def _report(
    action: actions.Action,
    outcomes: Sequence[actions.Outcome],
    dry_run: bool,
    as_json: bool,
    *,
    names: Mapping[int, str] | None = None,
    **counts: int,
) -> None:
    refused = [outcome for outcome in outcomes if not outcome.done]
    if as_json:
        counted = (
            {"counted": counts["counted"], "no_longer_matched": counts["no_longer"]}
            if counts
            else {}
        )
        cli_mod.echo_json(
            {
                **counted,
                "action": str(action),
                "dry_run": dry_run,
                "done": len(outcomes) - len(refused),
                "refused": len(refused),
                "outcomes": [
                    {
                        "run": outcome.run_id,
                        "done": outcome.done,
                        "code": outcome.code,
                        "refusal": outcome.refusal,
                        "restarted_as": outcome.restarted_as,
                        "sentence": outcome.sentence,
                    }
                    for outcome in outcomes
                ],
            }
        )
    else:
        for outcome in outcomes:
            said = _about(outcome, names or {})
            click.echo(said if outcome.done else f"refused: {said}")
    if refused:
        sys.exit(1)


_action(actions.Action.CANCEL, "Cancel each RUN that has not ended.")
_action(actions.Action.RETRY, "Run each failed RUN's failed step again.")
_action(
    actions.Action.REDRIVE,
    "Make each RUN that has not ended due now and free its lease (a stuck run goes on).",
)
_action(
    actions.Action.RESTART,
    "Start each failed RUN's flow again as a new run on the same record.",
)


runs.add_command(versions_cmd.move)
runs.add_command(fork_cmd.fork)
runs.add_command(deliveries_cmd.deliveries)


# -- the journal and the outbox ----------------------------------------------------------


@runs.command("journal", epilog=EXIT_STATUSES)
@APP
@DATABASE
@TENANT
@click.option("--run", "run_id", default=None, metavar="RUN", help="Actions on one run.")
@click.option("--operator", default=None, metavar="NAME", help="One operator's actions.")
@click.option(
    "--action",
    type=click.Choice([*actions.Action, "start"], case_sensitive=False),
    default=None,
    help="One kind of action.",
)
@LIMIT
@BEFORE
@cli_mod.json_option('Print {"entries": [...], "next_before"} as one JSON document.')
def journal(
    app_spec: str,
    database: str | None,
    tenant: str | None,
    run_id: str | None,
    operator: str | None,
    action: str | None,
    limit: int,
    before_id: int | None,
    as_json: bool,
) -> None:
    """What operators did to the app's runs, newest first."""
    runner = cli_mod.load_runner(app_spec, database)
    page = runner.journal(
        run_id=run_id,
        operator=operator,
        action=None if action is None else action.lower(),
        tenant=tenant,
        before_id=before_id,
        limit=limit,
    )
    if as_json:
        entries = [
            {
                "id": entry.id,
                "at": entry.at,
                "operator": entry.operator,
                "action": entry.action,
                "run": entry.run_id,
                "record": entry.record_id,
                "tenant": entry.tenant,
                "detail": entry.detail,
                "sentence": operations_room.journal_sentence(entry),
            }
            for entry in page
        ]
        cli_mod.echo_json({"entries": entries, "next_before": page.next_before})
        return
    if not page.rows:
        click.echo("no actions journaled")
        return
    tz = runner.config.timezone
    for entry in page:
        said = operations_room.journal_sentence(entry)
        click.echo(f"{flows.when(entry.at, tz)}  {said}")
    if page.next_before is not None:
        click.echo(f"more: --before {page.next_before}")


@runs.command("notices", epilog=EXIT_STATUSES)
@APP
@DATABASE
@TENANT
@click.option(
    "--state",
    type=click.Choice(list(events.NoticeState), case_sensitive=False),
    default=None,
    help="pending (to deliver), delivered, failed (every attempt of its channel failed), or "
    "undeliverable (nobody to tell); all without.",
)
@click.option("--run", "run_id", default=None, metavar="RUN", help="One run's notices.")
@LIMIT
@BEFORE
@cli_mod.json_option('Print {"notices": [...], "next_before"} as one JSON document.')
def notices(
    app_spec: str,
    database: str | None,
    tenant: str | None,
    state: str | None,
    run_id: str | None,
    limit: int,
    before_id: int | None,
    as_json: bool,
) -> None:
    """The notices outbox, newest first: what notify steps wrote, and where each stands."""
    runner = cli_mod.load_runner(app_spec, database)
    page = runner.outbox(state, run_id=run_id, tenant=tenant, before_id=before_id, limit=limit)
    tz = runner.config.timezone
    if as_json:
        documents = [
            {
                "id": notice.id,
                "run": notice.run_id,
                "state": notice.state,
                "audience": notice.audience,
                "recipient": notice.recipient,
                "title": notice.title,
                "message": notice.message,
                "email": notice.email,
                "at": notice.at,
                "delivered_at": notice.delivered_at,
                "problem": notice.problem,
                "tenant": notice.tenant,
                "channel": notice.channel,
                "attempts": notice.attempts,
                "next_attempt_at": notice.next_attempt_at,
                "last_error": notice.last_error,
                "sent_at": notice.sent_at,
                "failed_at": notice.failed_at,
            }
            for notice in page
        ]
        cli_mod.echo_json({"notices": documents, "next_before": page.next_before})
        return
    if not page.rows:
        click.echo("no notices")
        return
    table = _table("notice", "run", "state", "to", "message", "written")
    for notice in page:
        to = f"{notice.recipient} ({notice.audience})" if notice.recipient else notice.audience
        message = notice.problem if notice.problem else (notice.title or notice.message)
        if notice.last_error and notice.delivered_at is None:
            message = f"{message} ({notice.attempts} attempt(s): {notice.last_error})"
        table.add_row(
            str(notice.id),
            str(notice.run_id),
            str(notice.state),
            to,
            message,
            flows.when(notice.at, tz),
        )
    _print(table)
    if page.next_before is not None:
        click.echo(f"more: --before {page.next_before}")


# -- words and documents -----------------------------------------------------------------


def run_document(run: ops.RunRow, tz: tzinfo | None) -> shapes.JsonDict:
    """A run as JSON shows it (its snapshot and raw state left out)."""
    return {
        "id": run.id,
        "flow": run.flow_name,
        "flow_id": run.flow_id,
        "record": run.record_id,
        "tenant": run.tenant,
        "status": run.status,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "started_by": run.started_by,
        "start_key": run.start_key,
        "reason": run.reason,
        "error": run.error,
        "restarted_as": run.restarted_as,
        "waiting": [
            {
                "position": w.position,
                "step_id": w.step_id,
                "title": w.title,
                "kind": w.kind,
                "awaits": w.awaits,
                "event": w.event,
                "until": w.until,
                "asked": w.asked,
                "needed": w.needed,
                "received": w.received,
                "answered": list(w.answered),
                "subflow": w.subflow,
                "child": w.child,
                "sentence": flows.waiting_sentence(w, tz),
            }
            for w in run.waiting
        ],
    }


def _plain(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(
            f"{k}: ({_plain(v)})" if isinstance(v, dict) else f"{k}: {_plain(v)}"
            for k, v in value.items()
        )
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _table(*columns: str) -> Table:
    from rich.table import Table

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for name in columns:
        table.add_column(name, overflow="fold")
    return table


def _print(table: Table) -> None:
    from rich.console import Console

    Console(soft_wrap=False, highlight=False).print(table)
