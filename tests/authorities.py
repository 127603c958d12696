"""A help desk that declares who runs what: roles, principals, and the parts that run as
them — a flow kind, a kind with its own principal, a timer, a job and a code workflow.
The command line loads it as ``tests.authorities:runner`` (so it imports only the
package); ``widened`` is the same desk after someone granted the mailer one more command.

Every command writes who ran it into ``called``, so a test sees the principal each ran as.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from flowrunner import (
    At,
    FlowBinding,
    FlowRunner,
    Job,
    Jobs,
    Kind,
    Manual,
    Principal,
    Role,
    Workflows,
    flow_runner,
    tables,
)
from flowrunner.engine import commands
from flowrunner.foundations import sqltypes

metadata = sa.MetaData()
ticket = sa.Table(
    "ticket",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("status", sa.String(20), nullable=False, server_default="open"),
    sa.Column("due_at", sqltypes.UTCDateTime(), nullable=True),
)
called = sa.Table(
    "called",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("command", sa.String(40), nullable=False),
    sa.Column("principal", sa.String(40), nullable=False),
)
binding = FlowBinding(
    resource="ticket",
    flows_table="ticket_flow",
    steps_table="ticket_flow_step",
    kinds={
        "ask": Kind(command="request_approval"),
        "mail": Kind(command="send_mail", run_as="service-bot"),
    },
    set_columns=["status"],
    at=[At(column="due_at", command="escalate")],
)
tables.for_binding(metadata, binding)


def _command(name: str) -> commands.Command:
    def run(ctx: commands.CommandContext) -> Mapping[str, Any]:
        ctx.conn.execute(sa.insert(called).values(command=name, principal=ctx.principal))
        return {"by": ctx.principal}

    run.__name__ = name
    return run


COMMANDS = {
    name: _command(name)
    for name in ("request_approval", "send_mail", "escalate", "close_stale", "delete_ticket")
}


def roles(*, widen: bool = False) -> list[Role]:
    mailer = ["send_mail", "delete_ticket"] if widen else ["send_mail"]
    return [
        Role("automation", commands=["request_approval"], service=True),
        Role("mailer", commands=mailer, service=True),
        Role("clock", commands=["close_stale", "escalate"], service=True),
        Role("support", commands=["*"]),
        Role("ops-flows", operations=["workflows", "deliveries"]),
        Role("ops-jobs", operations=["jobs"]),
    ]


PRINCIPALS = [
    Principal("automation", roles=["automation"]),
    Principal("service-bot", roles=["mailer"]),
    Principal("clock", roles=["clock"]),
    Principal("sam", roles=["support"]),
    Principal("olga", roles=["ops-flows"]),
    Principal("jo", roles=["ops-jobs"]),
]

workflows = Workflows()


@workflows.define(start=Manual(), run_as="service-bot")
async def chase(w: Any, start: Any) -> Any:
    await w.run("mail", "send_mail")
    return await w.run("ask", "request_approval")  # not the mailer's to call


JOBS = {"nightly": Job(every="0 6 * * *", command="close_stale", run_as="clock")}


def build(engine: sa.Engine, *, widen: bool = False, **options: Any) -> FlowRunner:
    """The desk's runner on ``engine`` (its tables made if missing), its job mounted."""
    metadata.create_all(engine)
    desk = flow_runner(
        binding,
        engine,
        commands=COMMANDS,
        run_as="automation",
        roles=roles(widen=widen),
        principals=PRINCIPALS,
        workflows=workflows,
        **options,
    )
    Jobs(desk, JOBS)
    return desk


def runner(url: str) -> FlowRunner:
    return build(sa.create_engine(url), check_schema=False)


def widened(url: str) -> FlowRunner:
    return build(sa.create_engine(url), widen=True, check_schema=False)


def reader(request: Any) -> Any:
    """The console's reader, named by the ``x-desk-user`` header (a browser test's stand-in
    for the application's sign-in): their roles are their declared principal's."""
    from flowrunner.web.console import Principal as Reader

    name = request.headers.get("x-desk-user")
    return Reader(name) if name else None
