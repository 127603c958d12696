"""What only the server runs, kept out of the web app: ``ServerParts``.

An application's jobs, signed-callback endpoints and code workflows (and the commands
only they run) may need what its web app should never import — a provider's SDK, a
heavy client, credentials read at import. They go in a module of their own, named to
the worker beside the app::

    # shop/server.py — imported by workers only
    SERVER = ServerParts(
        commands={"close_books": close_books},
        jobs={"nightly_close": Job(command="close_books", run_as="bookkeeper", every="0 2 * * *")},
        inbound=[PAYMENT_SETTLED],
        workflows=WORKFLOWS,
    )

    flowrunner worker --app shop.flows:runner --jobs shop.server:SERVER

``mount`` mounts them on the runner, checked as if the runner had been built with them
(``BindingError``). The console and the app's own web app load ``--app`` alone, so they
never import the module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from flowrunner import errors
from flowrunner.engine import commands as commands_mod
from flowrunner.engine.mounted import Mounted
from flowrunner.inbound import endpoints
from flowrunner.jobs import program as jobs_program
from flowrunner.jobs import spec
from flowrunner.workflows import definitions


@dataclass(frozen=True, kw_only=True)
class ServerParts:
    """The jobs, inbound endpoints and code workflows a server runs beside an app's
    runner, with the commands only they run. Each is optional; ``job_tenants`` is
    ``Jobs(..., tenants=...)``."""

    commands: Mapping[str, commands_mod.Command] = field(default_factory=dict)
    jobs: Mapping[str, spec.Job] = field(default_factory=dict)
    inbound: Sequence[endpoints.Inbound] = ()
    workflows: definitions.Workflows | None = None
    job_tenants: jobs_program.ActiveTenants | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.commands, Mapping) or not isinstance(self.jobs, Mapping):
            raise errors.BindingError("ServerParts: commands and jobs are mappings by name")
        if isinstance(self.inbound, str | bytes) or not isinstance(self.inbound, Sequence):
            raise errors.BindingError("ServerParts: inbound is a list of Inbound(...)")
        if self.workflows is not None and not isinstance(self.workflows, definitions.Workflows):
            raise errors.BindingError("ServerParts: workflows is a Workflows(...)")


class Mounts(Protocol):
    """What takes server parts: a runner (its context, and how it mounts workflows)."""

    @property
    def mounted(self) -> Mounted: ...

    def mount_workflows(self, workflows: definitions.Workflows) -> None: ...


def mount(runner: Mounts, parts: ServerParts) -> None:
    """Mount ``parts`` on ``runner``: commands first (what the rest runs), then the
    inbound endpoints, the code workflows and the jobs."""
    if not isinstance(parts, ServerParts):
        raise errors.BindingError(
            f"a server-only module gives ServerParts(...), not a {type(parts).__name__}"
        )
    mounted = runner.mounted
    mounted.add_commands(parts.commands)
    mounted.add_inbound(parts.inbound)
    if parts.workflows is not None:
        if mounted.workflows is not None:
            raise errors.BindingError(
                "the app's runner has code workflows already: give them in one place"
            )
        runner.mount_workflows(parts.workflows)
    if parts.jobs:
        jobs_program.Jobs(mounted, parts.jobs, tenants=parts.job_tenants)


__all__ = ["ServerParts", "mount"]
