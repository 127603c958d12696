"""FlowRunner: the application-facing facade mounted on one resource."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import sqlalchemy as sa

from flowrunner import binding as binding_mod
from flowrunner import commands as commands_mod

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class FlowRunner:
    """Runs the flows of one binding over its resource's records."""

    def __init__(
        self,
        binding: binding_mod.FlowBinding,
        engine: sa.Engine,
        *,
        commands: Mapping[str, commands_mod.Command] | None = None,
        run_as: str = "automation",
        clock: Clock = utc_now,
    ) -> None:
        self.binding = binding
        self.engine = engine
        self.commands = dict(commands or {})
        self.run_as = run_as
        self.clock = clock


def flow_runner(
    binding: binding_mod.FlowBinding,
    engine: sa.Engine,
    *,
    commands: Mapping[str, commands_mod.Command] | None = None,
    run_as: str = "automation",
    clock: Clock = utc_now,
) -> FlowRunner:
    """Mount a runner on the binding's resource."""
    return FlowRunner(binding, engine, commands=commands, run_as=run_as, clock=clock)
