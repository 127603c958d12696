"""The durable engine's pure core: run state, what happened, effects and the interpreter::

    step = interpret.advance(snapshot, state, happened, now, config)
    # apply step.effects and store step.state in one transaction

Nothing here touches a database, a clock or a thread.
"""

from __future__ import annotations

from flowrunner.flows.interpreter.config import InterpreterConfig, KindConfig
from flowrunner.flows.interpreter.effects import Effect, Log, Notify, RunCommand, SetField, Wake
from flowrunner.flows.interpreter.happened import CommandResult, EventIn, Happened
from flowrunner.flows.interpreter.interpret import Step, advance, retry_failed, start
from flowrunner.flows.interpreter.retry import RetryDecision, decide
from flowrunner.flows.interpreter.state import TRANSITIONS, IllegalMove, LaneState, RunState
from flowrunner.foundations.retry_policy import RetryPolicy

__all__ = [
    "TRANSITIONS",
    "CommandResult",
    "Effect",
    "EventIn",
    "Happened",
    "IllegalMove",
    "InterpreterConfig",
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
