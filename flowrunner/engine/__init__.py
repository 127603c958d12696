"""The durable engine's pure core: run state, what happened, effects and the interpreter.

    step = interpret.advance(snapshot, state, happened, now, config)
    # apply step.effects and store step.state in one transaction

Nothing here touches a database, a clock or a thread.
"""

from __future__ import annotations

from flowrunner.engine.config import EngineConfig, KindConfig, RetryPolicy
from flowrunner.engine.effects import Effect, Log, Notify, RunCommand, SetField, Wake
from flowrunner.engine.happened import CommandResult, EventIn, Happened
from flowrunner.engine.interpret import Step, advance, retry_failed, start
from flowrunner.engine.retry import RetryDecision, decide
from flowrunner.engine.state import TRANSITIONS, IllegalMove, LaneState, RunState

__all__ = [
    "TRANSITIONS",
    "CommandResult",
    "Effect",
    "EngineConfig",
    "EventIn",
    "Happened",
    "IllegalMove",
    "KindConfig",
    "LaneState",
    "Log",
    "Notify",
    "RetryDecision",
    "RetryPolicy",
    "RunCommand",
    "RunState",
    "SetField",
    "Step",
    "Wake",
    "advance",
    "decide",
    "retry_failed",
    "start",
]
