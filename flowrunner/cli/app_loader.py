"""Finding the application's runner from ``--app MODULE:ATTR`` on the command line, and
what only the server runs beside it from ``--jobs MODULE:ATTR`` (``ServerParts``).

With ``--database URL`` too, the command acts on that database or on none: a function
taking ``url`` builds the runner on it; a runner already bound to an engine is used only
when its database is that one (``same_database``), and refused with both URLs named
otherwise, so that no command acts on another database than the one typed.
"""

from __future__ import annotations

import inspect
import os
import pkgutil
import sys
from typing import TYPE_CHECKING

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.engine import mounted
from flowrunner.foundations import extras

if TYPE_CHECKING:
    from flowrunner.engine.server_parts import ServerParts
    from flowrunner.runner import FlowRunner


check_schema_on_mount = mounted.check_schema_on_mount


def load_app(
    spec: str, *, database_url: str | None = None, check_schema: bool = True
) -> FlowRunner:
    """Import ``MODULE:ATTR``; ATTR is a FlowRunner or a factory returning one.

    A factory may take a ``url`` keyword: ``--database URL`` is passed to it, and the
    runner it returns must be on that database. Given ``database_url``, a runner ATTR
    (or one from a factory without ``url``) must already be on it: otherwise a
    ``BindingError`` names both databases, their passwords hidden. The current
    directory is importable, as with other Python tools' ``--app``.
    """
    token = check_schema_on_mount.set(check_schema)
    try:
        runner, took_url = _load(spec, database_url)
    finally:
        check_schema_on_mount.reset(token)
    if database_url is not None and not same_database(runner.engine.url, database_url):
        raise errors.BindingError(_disagree(spec, runner.engine.url, database_url, took_url))
    return runner


def same_database(a: str | sa.URL, b: str | sa.URL) -> bool:
    """Whether two URLs name one database, however each is written.

    The driver and the password do not choose the database; a SQLite file is compared
    by its full path (relative to the current directory, as SQLite opens it), a
    server's port by its default where none is written. Anything else that differs
    (host, user, database, query options) counts: when in doubt, two databases.

    >>> same_database("postgresql+psycopg://ann:secret@db/app", "postgresql://ann@db:5432/app")
    True
    >>> same_database("sqlite:///app.db", "sqlite:///other.db")
    False
    """
    return _identity(sa.make_url(a)) == _identity(sa.make_url(b))


# The port a server listens on when a URL names none.
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "mssql": 1433}


def _identity(url: sa.URL) -> tuple[object, ...]:
    backend = url.get_backend_name()
    if backend == "sqlite":
        name = url.database or ":memory:"
        if name != ":memory:" and not url.query.get("uri"):
            name = os.path.realpath(name)
        return (backend, name)
    return (
        backend,
        (url.host or "").lower(),
        url.port or _DEFAULT_PORTS.get(backend),
        url.username,
        url.database,
        tuple(sorted((k, str(v)) for k, v in url.query.items())),
    )


def _disagree(spec: str, bound: sa.URL, given: str, took_url: bool | None) -> str:
    """The sentence refusing ``--database`` for an app whose runner is on another one."""
    on = shown(bound)
    typed = shown(given)
    attr = spec.partition(":")[2]
    if took_url:
        return (
            f"--app {spec} was given --database {typed} but returned a runner on {on}; "
            "build the runner's engine from the url it is given"
        )
    name = attr.rpartition(".")[2]
    if took_url is None:
        found = f"is a runner bound to {on}"
        fix = f"make {attr} a function taking url (def {name}(url=None))"
    else:
        found = f"takes no url and returns a runner bound to {on}"
        fix = f"give {attr} a url parameter (def {name}(url=None))"
    return (
        f"--app {spec} {found}, not to --database {typed}; leave out --database, "
        f"or {fix} so that --database chooses the database"
    )


def shown(url: str | sa.URL) -> str:
    """A database URL as it may be shown: its password hidden.

    >>> shown("postgresql://ann:secret@db/app")
    'postgresql://ann:***@db/app'
    """
    return sa.make_url(url).render_as_string(hide_password=True)


def _load(spec: str, database_url: str | None) -> tuple[FlowRunner, bool | None]:
    """The runner, and whether a factory was given the URL (None: ATTR is a runner)."""
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
        if extras.missing(exc) is not None:  # the app needs an extra (its database driver)
            raise extras.explained(exc, what=f"--app {spec}") from None
        raise errors.BindingError(f"cannot import {module_name!r} named by --app: {exc}") from exc
    except AttributeError:
        if module_name not in sys.modules:
            raise  # raised while importing the module, not a missing ATTR
        raise errors.BindingError(f"module {module_name!r} has no attribute {attr!r}") from None
    if isinstance(target, FlowRunner):
        return target, None
    if callable(target):
        takes_url = "url" in inspect.signature(target).parameters
        result = target(url=database_url) if takes_url else target()
        if isinstance(result, FlowRunner):
            return result, takes_url
    raise errors.BindingError(f"{spec} is neither a FlowRunner nor a function returning one")


def load_server_parts(spec: str) -> ServerParts:
    """Import ``--jobs MODULE:ATTR``: what only the server runs beside the app (a
    ``ServerParts``, or a function taking nothing that returns one); ``BindingError``
    saying what is wrong otherwise."""
    from flowrunner.engine.server_parts import ServerParts

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise errors.BindingError(
            f"--jobs must look like MODULE:ATTR, e.g. myapp.server:SERVER; got {spec!r}"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target = pkgutil.resolve_name(spec)
    except ValueError:
        raise errors.BindingError(
            f"--jobs must look like MODULE:ATTR, e.g. myapp.server:SERVER; got {spec!r}"
        ) from None
    except ModuleNotFoundError as exc:
        if extras.missing(exc) is not None:
            raise extras.explained(exc, what=f"--jobs {spec}") from None
        raise errors.BindingError(f"cannot import {module_name!r} named by --jobs: {exc}") from exc
    except AttributeError:
        if module_name not in sys.modules:
            raise
        raise errors.BindingError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(target, ServerParts) and callable(target):
        target = target()
    if not isinstance(target, ServerParts):
        raise errors.BindingError(
            f"--jobs {spec} is neither ServerParts(...) nor a function returning it"
        )
    return target
