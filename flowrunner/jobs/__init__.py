"""Jobs: work an application declares in code, on an event or at times.

``spec`` holds the declarations (``Job``, ``Plan``), ``schedules`` the cron slots on a
zone's wall clock, and ``program`` mounts them on a runner and runs them (``Jobs``)."""

from __future__ import annotations

import warnings

_MODULES = frozenset(["program", "schedules", "spec"])


def __getattr__(name: str) -> object:
    """A name of the module ``flowrunner.jobs`` was before it became this package (now in
    ``flowrunner.jobs.program``), with a warning."""
    if name.startswith("__") or name in _MODULES:
        raise AttributeError(f"module 'flowrunner.jobs' has no attribute {name!r}")
    from flowrunner.jobs import program

    if not hasattr(program, name):
        raise AttributeError(f"module 'flowrunner.jobs' has no attribute {name!r}")
    warnings.warn(
        f"flowrunner.jobs.{name} is now flowrunner.jobs.program.{name}: import it from there",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(program, name)
