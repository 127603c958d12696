"""Where the modules of earlier releases went: their old names still import, with a warning.

The package was laid out by program (``flows/``, ``jobs/``, ``timers/``, ``inbound/``,
``workflows/``) beside the shared engine (``engine/``, ``store/``, ``history/``) and its
``foundations/``. An application that imported a module by its old name
(``from flowrunner import flowfiles``, ``import flowrunner.saving``) gets the same module
object under its new name and a ``DeprecationWarning`` naming it::

    >>> import importlib, sys, warnings
    >>> _ = sys.modules.pop("flowrunner.saving", None)  # as in a process that never did
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     saving = importlib.import_module("flowrunner.saving")
    >>> saving.__name__
    'flowrunner.flows.edits'
    >>> str(caught[0].message)
    'flowrunner.saving is now flowrunner.flows.edits: import it by its new name'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable
from types import ModuleType

# old name -> new name, both under ``flowrunner.``
MOVED: dict[str, str] = {
    "sanitize": "foundations.sanitize",
    "logs": "foundations.logs",
    "sqltypes": "foundations.sqltypes",
    "durations": "foundations.durations",
    "statuses": "foundations.statuses",
    "modes": "foundations.modes",
    "templates": "foundations.templates",
    "retry_policy": "foundations.retry_policy",
    "payloads": "foundations.payloads",
    "rows": "flows.rows",
    "validate": "flows.validation",
    "loops": "flows.loops",
    "snapshot": "flows.snapshot",
    "column_facts": "flows.column_facts",
    "spelling": "flows.spelling",
    "saving": "flows.edits",
    "orm_hook": "flows.orm_hook",
    "flowfiles": "flows.files",
    "starting": "flows.starts",
    "flow_step": "flows.step",
    "trying": "flows.trial.dry_run",
    "try_result": "flows.trial.result",
    "try_script": "flows.trial.script",
    "try_plan": "flows.trial.plan",
    "interpreter.standing": "flows.interpreter.waits",
    "interpreter": "flows.interpreter",
    "history_text": "history.flows",
    "history_programs": "history.programs",
    "history_words": "history.words",
    "jobs_spec": "jobs.spec",
    "schedules": "jobs.schedules",
    "at_timers": "timers.rules",
    "signing": "inbound.signing",
    "receiving": "inbound.receipt",
    "inbound_app": "inbound.asgi",
    "workflows.defining": "workflows.definitions",
    "workflows.seeing": "workflows.waits",
    "workflows.advancing": "workflows.program",
    "workflows.calling": "workflows.http_call",
    "workflows.launching": "workflows.starts",
    "workflows.steering": "workflows.actions",
    "worker": "engine.worker",
    "stepping": "engine.claimed",
    "heartbeat": "engine.heartbeat",
    "commands": "engine.commands",
    "operating": "engine.actions",
    "operations_room": "engine.operations_room",
    "drawing": "engine.drawings",
    "async_apps": "engine.async_engines",
    "app": "cli.app_loader",
    "demo": "cli.demo",
}


def new_name(old: str) -> str | None:
    """The module ``old`` (a full dotted name) is now, or None when it did not move.

    >>> new_name("flowrunner.interpreter.lanes")
    'flowrunner.flows.interpreter.lanes'
    >>> new_name("flowrunner.runner") is None
    True
    """
    name = old.removeprefix("flowrunner.")
    if name == old:
        return None
    for before, after in MOVED.items():
        if name == before or name.startswith(before + "."):
            return "flowrunner." + after + name[len(before) :]
    return None


class _OldNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module name and loads it as the module under its new name."""

    def find_spec(
        self,
        fullname: str,
        path: object = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if new_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = new_name(spec.name)
        assert new is not None
        warnings.warn(
            f"{spec.name} is now {new}: import it by its new name",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The module was executed under its new name; nothing is left to do."""


def names_now_in(package: str, module: str) -> Callable[[str], object]:
    """A package's ``__getattr__`` for the names of the module it was before it became a
    package (``flowrunner.jobs.Jobs`` is now ``flowrunner.jobs.program.Jobs``): each
    found in ``module``, with a warning; its own submodules are not looked up there.
    """

    def names(name: str) -> object:
        missing = AttributeError(f"module {package!r} has no attribute {name!r}")
        if name.startswith("__") or importlib.util.find_spec(f"{package}.{name}") is not None:
            raise missing  # a submodule: the import system loads it
        home = importlib.import_module(f"{package}.{module}")
        if not hasattr(home, name):
            raise missing
        warnings.warn(
            f"{package}.{name} is now {package}.{module}.{name}: import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(home, name)

    return names


def install() -> None:
    """Let the old names import (once per process)."""
    if not any(isinstance(finder, _OldNames) for finder in sys.meta_path):
        sys.meta_path.append(_OldNames())
