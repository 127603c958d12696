"""Code workflows as an application declares them: the body, its start, principal, version.

::

    workflows = Workflows(connections={"credit-provider": Connection("https://...")})

    @workflows.define(start=OnEvent("rent.posted", key=lambda e: e["period"]),
                      run_as="rent-poster")
    async def late_fees(w, start):
        await w.until("grace", start["grace_ends"])
        await w.run("assess", "assess_late_fees", input={"period": start["period"]})

``Workflows(limits={"scoring": Limit(concurrency=3, rate="10/minute")})`` names limits
a ``run`` step takes a turn of (``w.run(..., limit="scoring")``).

A runner mounts the registry (``flow_runner(..., workflows=workflows)``). Several
versions of one workflow may be registered side by side: a run keeps the version it
started on, a new start takes the highest.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from flowrunner import errors
from flowrunner.foundations import limits as limits_mod
from flowrunner.foundations import payloads, shapes
from flowrunner.workflows import context

Body = Callable[[context.Context, Any], Coroutine[Any, Any, Any]]
Key = Callable[[shapes.Payload], object]


@dataclass(frozen=True)
class OnEvent:
    """Start a run when ``event`` (one of the binding's events) is emitted, once per
    ``key(payload)`` (default: once per record the event names): a re-sent event
    starts nothing new, nor does one whose key is None. The run is on the event's
    record, and is given its payload."""

    event: str
    key: Key | None = None


@dataclass(frozen=True)
class Manual:
    """Start a run only when asked: ``runner.start_workflow(name, input, operator=...)``."""


@dataclass(frozen=True)
class Connection:
    """An HTTP service ``w.call`` reaches: its base URL, headers sent on every request
    (an API key read from your settings), and how long one attempt may take."""

    base_url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 10.0


@dataclass(frozen=True)
class Definition:
    """One version of one workflow."""

    name: str
    version: int
    start: OnEvent | Manual
    run_as: str | None
    """The principal its ``run`` steps run as (None: the runner's)."""
    body: Body


def _word(name: object) -> bool:
    """A name as a workflow's or a principal's: text of 1 to 200 characters, no spaces
    around it, that text columns hold."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= 200
        and name == name.strip()
        and payloads.text_problem(name) is None
    )


class Workflows:
    """The code workflows an application defines, by name and version."""

    def __init__(
        self,
        *,
        connections: Mapping[str, Connection] | None = None,
        limits: Mapping[str, limits_mod.Limit] | None = None,
    ) -> None:
        self.connections: dict[str, Connection] = dict(connections or {})
        self.limits: dict[str, limits_mod.Limit] = {}
        for name, limit in (limits or {}).items():
            if not _word(name):
                raise errors.BindingError(
                    f"a workflows' limit is named by a word such as 'scoring', not {name!r}"
                )
            if not isinstance(limit, limits_mod.Limit):
                raise errors.BindingError(
                    f"the workflows' limit {name!r} is a Limit(concurrency=..., rate=...), "
                    f"not {type(limit).__name__}"
                )
            self.limits[name] = limit
        self._defined: dict[tuple[str, int], Definition] = {}

    def define(
        self,
        *,
        start: OnEvent | Manual | None = None,
        run_as: str | None = None,
        version: int = 1,
        name: str | None = None,
    ) -> Callable[[Body], Body]:
        """Register an ``async def body(w, start)`` (named after the function unless
        ``name`` says) as ``version`` of its workflow. ``BindingError`` for a body that
        is not ``async def``, a version below 1, or a name and version defined twice."""

        def register(body: Body) -> Body:
            if not inspect.iscoroutinefunction(body):
                raise errors.BindingError(
                    f"workflow {getattr(body, '__name__', body)!r} must be an async def "
                    "taking (w, start)"
                )
            called = name or body.__name__
            # The name and the principal are kept in text columns (the runs' flow and who
            # started them): words of text they can hold.
            if not _word(called):
                raise errors.BindingError(
                    f"a workflow's name is a word such as 'late_fees', not {called!r}"
                )
            if run_as is not None and not _word(run_as):
                raise errors.BindingError(
                    f"workflow {called!r}: run_as names the principal its steps run as, "
                    f"not {run_as!r}"
                )
            if not isinstance(version, int) or isinstance(version, bool) or version < 1:
                raise errors.BindingError(f"workflow {called!r}: a version is a whole number >= 1")
            if (called, version) in self._defined:
                raise errors.BindingError(f"workflow {called!r} version {version} is defined twice")
            chosen = start if start is not None else Manual()
            if not isinstance(chosen, OnEvent | Manual):
                raise errors.BindingError(
                    f"workflow {called!r}: start is OnEvent(...) or Manual(), not {chosen!r}"
                )
            if isinstance(chosen, OnEvent):
                if not isinstance(chosen.event, str) or not chosen.event.strip():
                    raise errors.BindingError(
                        f"workflow {called!r}: OnEvent names one of the binding's events, "
                        f"not {chosen.event!r}"
                    )
                if chosen.key is not None and not callable(chosen.key):
                    raise errors.BindingError(
                        f"workflow {called!r}: OnEvent's key is a function of the payload"
                    )
            self._defined[(called, version)] = Definition(called, version, chosen, run_as, body)
            return body

        return register

    def find(self, name: str, version: int) -> Definition | None:
        """The definition a run of ``name`` at ``version`` executes, if registered."""
        return self._defined.get((name, version))

    def latest(self, name: str) -> Definition | None:
        """The highest registered version of ``name`` (what a new start takes)."""
        versions = [d for (n, _), d in self._defined.items() if n == name]
        return max(versions, key=lambda d: d.version) if versions else None

    def names(self) -> list[str]:
        return sorted({name for name, _ in self._defined})

    def definitions(self) -> list[Definition]:
        """Every registered version of every workflow, by name then version."""
        return [self._defined[key] for key in sorted(self._defined)]

    def started_by(self, event: str) -> list[Definition]:
        """The latest version of each workflow that ``event`` starts."""
        found = []
        for name in self.names():
            latest = self.latest(name)
            if (
                latest is not None
                and isinstance(latest.start, OnEvent)
                and latest.start.event == event
            ):
                found.append(latest)
        return found

    def events(self) -> set[str]:
        """Every event some workflow starts on (checked against the binding at mount)."""
        return {d.start.event for d in self._defined.values() if isinstance(d.start, OnEvent)}
