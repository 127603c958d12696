"""Timers on a record's date column (``At``): which timers a change arms and their keys
(``rules``, pure), and the program that fires them (``program``)."""

from __future__ import annotations

import warnings

_MODULES = frozenset(["program", "rules"])


def __getattr__(name: str) -> object:
    """A name of the module ``flowrunner.timers`` was before it became this package (now in
    ``flowrunner.timers.program``), with a warning."""
    if name.startswith("__") or name in _MODULES:
        raise AttributeError(f"module 'flowrunner.timers' has no attribute {name!r}")
    from flowrunner.timers import program

    if not hasattr(program, name):
        raise AttributeError(f"module 'flowrunner.timers' has no attribute {name!r}")
    warnings.warn(
        f"flowrunner.timers.{name} is now flowrunner.timers.program.{name}: import it from there",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(program, name)
