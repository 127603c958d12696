"""The optional libraries, each with the extra that installs it, and the one way to
import one: ``require``, which fails with the extra to install in one line.

    extras.require("fastapi", what="flowrunner.web")
    # errors.ExtraMissing: flowrunner.web needs fastapi, which is not installed:
    # pip install 'flowrunner[web]'

Where the import is written out (for its types), ``explained`` turns its failure into
the same error::

    try:
        import httpx
    except ModuleNotFoundError as exc:
        raise extras.explained(exc, what="w.call") from None
"""

from __future__ import annotations

import importlib
from types import ModuleType

from flowrunner import errors

# A top-level module -> the extra of pyproject.toml that installs it.
EXTRAS = {
    "fastapi": "web",
    "starlette": "console",
    "jinja2": "console",
    "multipart": "console",
    "python_multipart": "console",
    "uvicorn": "console",
    "httpx": "workflows",
    "psycopg": "postgres",
    "prometheus_client": "metrics",
    "opentelemetry": "traces",
}


def require(module: str, *, what: str) -> ModuleType:
    """Import ``module`` (one of ``EXTRAS``) for ``what``, or raise ``errors.ExtraMissing``
    naming the extra that installs it."""
    assert module.split(".")[0] in EXTRAS, module
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise explained(exc, what=what) from None


def explained(exc: ModuleNotFoundError, *, what: str) -> ModuleNotFoundError:
    """``errors.ExtraMissing`` for ``exc`` when what was missing is one of ``EXTRAS``;
    otherwise ``exc`` itself (something a library lacks: its own error says what)."""
    extra = missing(exc)
    if extra is None:
        return exc
    return errors.ExtraMissing(what, module=str(exc.name), extra=extra)


def missing(exc: ImportError) -> str | None:
    """The extra that would have avoided ``exc``, when what was missing is one of ours.

    >>> missing(ModuleNotFoundError("No module named 'uvicorn'", name="uvicorn"))
    'console'
    >>> missing(ModuleNotFoundError("No module named 'left_pad'", name="left_pad")) is None
    True
    """
    name = getattr(exc, "name", None)
    return None if not name else EXTRAS.get(name.split(".")[0])
