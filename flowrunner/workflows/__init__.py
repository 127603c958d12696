"""Code workflows: an ``async def`` whose named steps are durable, on the flows' engine.

A run of a code workflow is a run like a flow's — the same table, due-work index,
leases, history and operators' actions — whose stored snapshot names the program
``workflow``. ``definitions`` is what an application declares, ``context`` the ``w`` a
body awaits, ``replay`` the recorded steps and the rule that replays them (all pure);
``starts`` starts runs, ``program`` is the worker's step, ``http_call`` the HTTP call of
a ``call`` step, ``children`` the child runs of ``child`` steps, ``actions`` the
operators' actions on such runs (retry, restart, fork). See docs/workflows.md.
"""

from __future__ import annotations

from flowrunner.workflows.context import Context
from flowrunner.workflows.definitions import Connection, Definition, Manual, OnEvent, Workflows

__all__ = ["Connection", "Context", "Definition", "Manual", "OnEvent", "Workflows"]
