"""A mounted runner's authority, gathered for its lock: each kind, timer, job, inbound
endpoint and code workflow (with the ``run`` steps its body names) as the principals
it runs as, the commands it names, and every command each principal may call."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

from flowrunner.authority import lock
from flowrunner.engine.mounted import Mounted
from flowrunner.timers import program as timers


def entries(mounted: Mounted) -> list[lock.Entry]:
    """Every part of the runner's application that runs a command, sorted."""
    return sorted(_parts(mounted))


def may_call(mounted: Mounted, principal: str) -> tuple[str, ...]:
    """The runner's commands ``principal`` may call (all of them without a check)."""
    allowed = mounted.authorize
    return tuple(sorted(c for c in mounted.commands if allowed is None or allowed(principal, c)))


def _parts(mounted: Mounted) -> Iterator[lock.Entry]:
    def entry(part: str, principal: str, calls: tuple[str, ...]) -> lock.Entry:
        return lock.Entry(part, principal, calls, may_call(mounted, principal))

    for name, kind in mounted.binding.kinds.items():
        calls = tuple(filter(None, (kind.command, kind.remind, kind.cancel)))
        for principal in mounted.principals_of(kind.run_as):
            yield entry(f"kind {name}", principal, calls)
    tenants = [None, *mounted.tenant_run_as]
    for timer in mounted.binding.at:
        for principal in dict.fromkeys(timers.runs_as(mounted, timer, t) for t in tenants):
            yield entry(f"timer at {timer.column}", principal, (timer.command,))
    jobs: dict[str, Any] = getattr(mounted.jobs, "jobs", None) or {}
    for name, job in jobs.items():
        yield entry(f"job {name}", job.run_as, (job.command,))
    for name, endpoint in mounted.inbound.items():
        calls = () if endpoint.command is None else (endpoint.command,)
        yield entry(f"inbound {name}", endpoint.run_as, calls)
    if mounted.workflows is not None:
        for definition in mounted.workflows.definitions():
            part = f"workflow {definition.name} v{definition.version}"
            for principal in mounted.principals_of(definition.run_as):
                steps = run_steps(definition.body)
                yield entry(part, principal, tuple(sorted(set(steps.values()))))
                for step, command in steps.items():
                    yield entry(f"{part} step {step}", principal, (command,))


def run_steps(body: Callable[..., Any]) -> dict[str, str]:
    """The ``run`` steps a workflow's body names in its source, as written
    (``w.run("post", "post_rent", ...)``): step name -> command. A step whose name or
    command is computed is not found; its workflow's line still says what it may call."""
    try:
        source = textwrap.dedent(inspect.getsource(body))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return {}
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "run"
            and len(node.args) >= 2
            and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args[:2])
        ):
            name, command = (a.value for a in node.args[:2] if isinstance(a, ast.Constant))
            found[str(name)] = str(command)
    return found
