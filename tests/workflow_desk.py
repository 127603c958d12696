"""A code workflow with every kind of durable step, on the support desk's tickets: used by
the crash-injection tests (in-process, and a worker process killed at a point).

``handle`` runs when a ticket's requester replies: it marks the ticket (a command,
exactly once), asks the checks service for a check (an HTTP call, at least once, one
Idempotency-Key), waits up to a day for the check's answer (a reply about the ticket
that answers the case), rests an hour (a timer), then finishes the ticket (a command).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from flowrunner.engine import commands
from flowrunner.workflows import Connection, OnEvent, Workflows


def _append(ctx: commands.CommandContext, mark: str) -> None:
    ctx.conn.execute(
        sa.text("UPDATE ticket SET title = title || :mark WHERE id = :id"),
        {"mark": mark, "id": int(str(ctx.record["id"]))},
    )


def mark(ctx: commands.CommandContext) -> dict[str, Any]:
    _append(ctx, f" +mark({ctx.inputs['case']})")
    return {"marked": ctx.inputs["case"]}


def finish(ctx: commands.CommandContext) -> None:
    _append(ctx, f" +finish({ctx.inputs['check']},{ctx.inputs['answered']})")


COMMANDS = {"mark": mark, "finish": finish}


def workflows(checks_url: str) -> Workflows:
    """The desk's workflows, calling the checks service at ``checks_url``."""
    defined = Workflows(connections={"checks": Connection(checks_url, timeout=5.0)})

    # A reply that opens a case starts a run; an answer to a case (no "case") starts none.
    @defined.define(start=OnEvent("ticket.replied", key=lambda e: e.get("case")), run_as="desk")
    async def handle(w: Any, start: Mapping[str, Any]) -> dict[str, Any]:
        await w.run("mark", "mark", input={"case": start["case"]})
        check = await w.call(
            "check",
            "checks",
            {"method": "POST", "path": "/checks", "body": {"case": start["case"]}},
            retry={"attempts": 3, "backoff": "1 minute"},
        )
        answer = await w.wait_for(
            "answer",
            "ticket.replied",
            match=lambda e: e.get("answers") == start["case"],
            timeout="1 day",
        )
        await w.sleep("rest", "1 hour")
        answered = answer is not None
        await w.run("finish", "finish", input={"check": check["case"], "answered": answered})
        return {"case": start["case"], "answered": answered}

    return defined
