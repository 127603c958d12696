"""What an application's command receives when a step of its kind runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa


@dataclass(frozen=True)
class CommandContext:
    """The context an application command runs with.

    ``conn`` is the connection of the step's own transaction: what the command
    writes through it commits with the step, exactly once. Calls to outside
    systems should pass ``idempotency_key``, which is the same on every retry of
    this step's pass (they happen at least once).
    """

    record: Mapping[str, object]
    inputs: Mapping[str, object]
    conn: sa.Connection
    principal: str
    idempotency_key: str
    run_id: int
    flow_name: str
    step_title: str | None
    position: int
    attempt: int = 1
    reminder: int | None = None
    tenant: str | None = None
    # The runner's clock at this step: use it rather than the wall clock, so tests
    # that move the clock by hand see consistent times.
    now: datetime | None = None


# A command answers nothing, or a mapping such as {"asked": 3}.
Command = Callable[[CommandContext], Mapping[str, object] | None]
