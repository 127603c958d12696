"""Five steps that each reach outside the database, on the support desk's tickets: used
by the checkpoint tests (tests/test_checkpoints.py) and their worker process
(crashing_worker.py).

The outside world is a file: each call writes a line to it (who was assigned, with the
idempotency key it came with) before it writes its mark on the ticket — as an email is
sent or an API called before the command's own database write. ``commands`` can kill
the process inside its ``crash_in``-th call, after the outside effect and before the
write, as a worker killed in the middle of a command.

The same five calls twice: a flow of five ``assign`` steps (rows), and a code workflow
of five ``w.run`` steps started by a reply to the ticket.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from flowrunner.engine import commands as commands_mod
from flowrunner.workflows import OnEvent, Workflows

CALLS = 5
KILLED = 3  # the exit code of a worker process killed inside a call

FLOW = "\n".join(
    [
        "- name: Five calls",
        "  start: created",
        "  steps:",
        *(
            f"    - {{position: {n}, kind: assign, title: Call {n}, assign_to: a{n}}}"
            for n in range(1, CALLS + 1)
        ),
    ]
)


def commands(outside: Path, crash_in: int | None = None) -> dict[str, commands_mod.Command]:
    """The tickets app's ``assign_ticket``, as a call to the outside world."""
    calls = {"n": 0}

    def assign_ticket(ctx: commands_mod.CommandContext) -> dict[str, Any]:
        who = str(ctx.inputs["assign_to"])
        with outside.open("a", encoding="utf-8") as sent:
            sent.write(f"{who} {ctx.idempotency_key}\n")
        calls["n"] += 1
        if calls["n"] == crash_in:
            os._exit(KILLED)  # killed inside the call: no rollback, no cleanup
        ctx.conn.execute(
            sa.text("UPDATE ticket SET title = title || :mark WHERE id = :id"),
            {"mark": f" +{who}", "id": int(str(ctx.record["id"]))},
        )
        return {"assigned": who}

    return {"assign_ticket": assign_ticket}


def workflows() -> Workflows:
    """A code workflow of five calls, started when a ticket's requester replies."""
    defined = Workflows()

    @defined.define(start=OnEvent("ticket.replied"))
    async def five_calls(w: Any, start: Mapping[str, Any]) -> None:
        for n in range(1, CALLS + 1):
            await w.run(f"call {n}", "assign_ticket", input={"assign_to": f"a{n}"})

    return defined


def sent(outside: Path) -> list[tuple[str, str]]:
    """The calls that reached the outside world, in order: (who, idempotency key)."""
    if not outside.exists():
        return []
    lines = outside.read_text(encoding="utf-8").splitlines()
    return [(who, key) for who, key in (line.split(" ", 1) for line in lines)]
