"""Finding the application's runner from ``--app MODULE:ATTR`` on the command line."""

from __future__ import annotations

import contextvars
import inspect
import os
import pkgutil
import sys
from typing import TYPE_CHECKING

from flowrunner import errors

if TYPE_CHECKING:
    from flowrunner.runner import FlowRunner


# ``flowrunner migrate`` must load the app before the engine's tables exist, so the
# schema check a runner makes at mount is switched off while it loads.
check_schema_on_mount: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "check_schema_on_mount", default=True
)


def load_app(
    spec: str, *, database_url: str | None = None, check_schema: bool = True
) -> FlowRunner:
    """Import ``MODULE:ATTR``; ATTR is a FlowRunner or a factory returning one.

    A factory may take a ``url`` keyword: ``--database URL`` is passed to it.
    The current directory is importable, as with other Python tools' ``--app``.
    """
    token = check_schema_on_mount.set(check_schema)
    try:
        return _load(spec, database_url)
    finally:
        check_schema_on_mount.reset(token)


def _load(spec: str, database_url: str | None) -> FlowRunner:
    from flowrunner.runner import FlowRunner

    module_name, _, attr = spec.partition(":")
    malformed = errors.BindingError(
        f"--app must look like MODULE:ATTR, e.g. myapp.flows:runner; got {spec!r}"
    )
    if not module_name or not attr:
        raise malformed
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target = pkgutil.resolve_name(spec)
    except ValueError:  # not dotted Python names
        raise malformed from None
    except ModuleNotFoundError as exc:
        raise errors.BindingError(f"cannot import {module_name!r} named by --app: {exc}") from exc
    except AttributeError:
        if module_name not in sys.modules:
            raise  # raised while importing the module, not a missing ATTR
        raise errors.BindingError(f"module {module_name!r} has no attribute {attr!r}") from None
    if isinstance(target, FlowRunner):
        return target
    if callable(target):
        params = inspect.signature(target).parameters
        result = target(url=database_url) if "url" in params else target()
        if isinstance(result, FlowRunner):
            return result
    raise errors.BindingError(f"{spec} is neither a FlowRunner nor a function returning one")
