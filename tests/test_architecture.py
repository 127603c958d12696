"""The architecture, enforced: imports flow one way, only the store speaks SQL, and the
public API is what it says.

query → rows/validation → snapshot → interpreter (pure) → store → worker/runner/CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import flowrunner

PACKAGE = Path(flowrunner.__file__).parent

# module prefix -> what it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "flowrunner.query": (
        "flowrunner.binding",
        "flowrunner.flows.rows",
        "flowrunner.flows.validation",
        "flowrunner.flows.interpreter",
        "flowrunner.store",
        "flowrunner.runner",
        "flowrunner.engine.worker",
        "flowrunner.cli",
    ),
    "flowrunner.foundations.durations": (
        "flowrunner.query",
        "flowrunner.flows.interpreter",
        "flowrunner.store",
    ),
    "flowrunner.flows.snapshot": (
        "flowrunner.flows.interpreter",
        "flowrunner.store",
        "flowrunner.runner",
    ),
    # The interpreter is pure: no SQL, no storage, no clock-owning modules.
    "flowrunner.flows.interpreter": (
        "sqlalchemy",
        "flowrunner.store",
        "flowrunner.runner",
        "flowrunner.engine.worker",
        "flowrunner.cli",
        "flowrunner.flows.edits",
        "flowrunner.flows.orm_hook",
        "time",
        "threading",
    ),
    # Sentences are made from what the history holds: nothing stored, no clock.
    "flowrunner.history.flows": (
        "sqlalchemy",
        "flowrunner.store",
        "flowrunner.runner",
        "flowrunner.engine.worker",
        "time",
    ),
    "flowrunner.history.words": (
        "sqlalchemy",
        "flowrunner.store",
        "flowrunner.runner",
        "flowrunner.engine.worker",
        "time",
    ),
    "flowrunner.history.programs": (
        "sqlalchemy",
        "flowrunner.store",
        "flowrunner.runner",
        "flowrunner.engine.worker",
        "time",
    ),
    # Diagrams are pure: drawn from a snapshot and a run's state and history, read by others.
    "flowrunner.diagrams": (
        "sqlalchemy",
        "flowrunner.store",
        "flowrunner.runner",
        "flowrunner.engine.worker",
        "flowrunner.cli",
        "time",
        "threading",
    ),
    "flowrunner.store": (
        "flowrunner.runner",
        "flowrunner.engine.worker",
        "flowrunner.cli",
        "flowrunner.flows.edits",
        "flowrunner.flows.orm_hook",
        "flowrunner.flows.files",
    ),
    # A code workflow's declaration, context and replay are pure, as the interpreter is.
    **{
        f"flowrunner.workflows.{pure}": (
            "sqlalchemy",
            "flowrunner.store",
            "flowrunner.runner",
            "flowrunner.engine.worker",
            "time",
            "threading",
        )
        for pure in ("defining", "context", "replay", "seeing")
    },
    "flowrunner.foundations.sanitize": ("flowrunner.store", "sqlalchemy"),
    "flowrunner.foundations.templates": ("flowrunner.store", "sqlalchemy"),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from package import module`` imports the module (and runs the package's
            # ``__init__``, which the package's own layer answers for); ``from module
            # import name`` imports the module.
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            modules = [name for name in names if _is_module(name)]
            found.update(modules)
            if len(modules) < len(names) or not node.module.startswith("flowrunner"):
                found.add(node.module)
            found.update(names)
    return found


def _is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package of flowrunner."""
    if not dotted.startswith("flowrunner."):
        return False
    path = PACKAGE.joinpath(*dotted.split(".")[1:])
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


MODULES = sorted(PACKAGE.rglob("*.py"))


# The layers, lowest first (docs/architecture.md draws them): a module may import its
# own layer and the layers below it, never one above.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundations",
        (
            "flowrunner.errors",
            "flowrunner.moved",
            "flowrunner.foundations",
            "flowrunner.foundations.sanitize",
            "flowrunner.foundations.logs",
            "flowrunner.foundations.sqltypes",
            "flowrunner.foundations.durations",
            "flowrunner.foundations.statuses",
            "flowrunner.foundations.modes",
            "flowrunner.foundations.templates",
            "flowrunner.foundations.retry_policy",
            "flowrunner.foundations.payloads",
            "flowrunner.inbound.signing",
            "flowrunner.jobs.schedules",
        ),
    ),
    ("query language", ("flowrunner.query",)),
    (
        "rows and validation",
        (
            "flowrunner.binding",
            "flowrunner.flows",
            "flowrunner.flows.column_facts",
            "flowrunner.flows.spelling",
            "flowrunner.flows.rows",
            "flowrunner.flows.loops",
            "flowrunner.flows.validation",
            "flowrunner.flows.snapshot",
            "flowrunner.engine.commands",
            "flowrunner.flows.trial.script",
            "flowrunner.flows.trial.plan",
            "flowrunner.jobs.spec",
            "flowrunner.timers.rules",
            "flowrunner.inbound",
        ),
    ),
    (
        "interpreter",
        (
            "flowrunner.flows.interpreter",
            "flowrunner.history",
            "flowrunner.history.flows",
            "flowrunner.history.words",
            "flowrunner.history.programs",
            # A code workflow's pure parts (its declaration, the ``w`` its body awaits,
            # the recorded steps and the replay rule, where an open run stands); the
            # parts that run it are the runner's, named below.
            "flowrunner.workflows",
        ),
    ),
    ("diagrams", ("flowrunner.diagrams",)),
    ("store", ("flowrunner.store",)),
    (
        "runner",
        (
            "flowrunner.tables",
            "flowrunner.engine",
            "flowrunner.flows.trial",
            "flowrunner.flows.edits",
            "flowrunner.flows.orm_hook",
            "flowrunner.flows.files",
            "flowrunner.flows.starts",
            "flowrunner.engine.actions",
            "flowrunner.engine.operations_room",
            "flowrunner.engine.worker",
            "flowrunner.engine.claimed",
            "flowrunner.flows.step",
            "flowrunner.timers",
            "flowrunner.runner",
            "flowrunner.testing",
            "flowrunner.cli.app_loader",
            "flowrunner.engine.heartbeat",
            "flowrunner.engine.async_engines",
            "flowrunner.engine.drawings",
            "flowrunner.flows.trial.dry_run",
            "flowrunner.flows.trial.result",
            "flowrunner.inbound.receipt",
            "flowrunner.inbound.asgi",
            "flowrunner.jobs",
            "flowrunner.workflows.program",
            "flowrunner.workflows.http_call",
            "flowrunner.workflows.starts",
            "flowrunner.workflows.actions",
        ),
    ),
    (
        "surfaces",
        ("flowrunner.cli", "flowrunner.cli.demo", "flowrunner.__main__", "flowrunner.web"),
    ),
)

# (importer, imported) pairs that go up a layer on purpose, each with its reason.
UPWARD = {
    # FlowBinding.check(engine) is the apps' one-call check at startup: it asks the store
    # to read the tables (an import inside the method); the rest of binding judges only
    # the MetaData it is given.
    ("flowrunner.binding", "flowrunner.store"),
    ("flowrunner.binding", "flowrunner.store.app_tables"),
    # runner.console(...) is the one-line mount the console's users write
    # (app.mount("/flows", runner.console(...))): it imports the console inside the
    # method, so nothing below the surfaces needs Starlette or Jinja2 until it is called.
    ("flowrunner.runner", "flowrunner.web"),
    ("flowrunner.runner", "flowrunner.web.console"),
}


def layer_of(module: str) -> int | None:
    """The layer of ``module``: that of the longest prefix naming it (a package may
    place some of its modules in another layer than itself)."""
    found: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (found is None or len(p) > found[1]):
                found = (index, len(p))
    return None if found is None else found[0]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module_name(p))
def test_every_module_has_a_layer_and_imports_only_downwards(path: Path) -> None:
    name = _module_name(path)
    if name == "flowrunner":
        return  # the public API gathers from every layer
    mine = layer_of(name)
    assert mine is not None, f"{name} belongs to no layer: add it to LAYERS (and the docs)"
    upward = sorted(
        imported
        for imported in _imports(path)
        if (layer_of(imported) or 0) > mine and (name, imported) not in UPWARD
    )
    assert not upward, f"{name} ({LAYERS[mine][0]}) must not import upwards: {upward}"


def test_the_documented_layers_are_the_enforced_ones() -> None:
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    for layer, prefixes in LAYERS:
        assert layer in text, f"docs/architecture.md does not name the layer {layer!r}"
        for prefix in prefixes:
            short = prefix.removeprefix("flowrunner.").replace(".", "/")
            assert short in text, f"docs/architecture.md does not place {prefix}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module_name(p))
def test_imports_flow_one_way(path: Path) -> None:
    name = _module_name(path)
    for prefix, forbidden in FORBIDDEN.items():
        if name == prefix or name.startswith(prefix + "."):
            bad = sorted(
                imported
                for imported in _imports(path)
                for banned in forbidden
                if imported == banned or imported.startswith(banned + ".")
            )
            assert not bad, f"{name} must not import {bad}"


# FastAPI is an extra (``flowrunner[web]``): only the module apps import for it needs it.
WEB_ONLY = ("fastapi", "starlette", "httpx")


# A workflow's ``call`` step is an HTTP client: httpx, imported when the first call is
# made (an extra too, ``flowrunner[workflows]``).
HTTPX_ALLOWED = {"flowrunner.workflows.http_call"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module_name(p))
def test_only_flowrunner_web_imports_fastapi(path: Path) -> None:
    name = _module_name(path)
    if name == "flowrunner.web" or name.startswith("flowrunner.web."):
        return
    if name in HTTPX_ALLOWED:
        bad = sorted(i for i in _imports(path) if i.split(".")[0] in ("fastapi", "starlette"))
        assert not bad, f"{name} imports {bad}"
        return
    bad = sorted(i for i in _imports(path) if i.split(".")[0] in WEB_ONLY)
    assert not bad, f"{name} imports {bad}: only flowrunner.web may (pip install 'flowrunner[web]')"


# -- only the store speaks SQL -------------------------------------------------------

# Every statement, table, reflection and compilation lives in flowrunner/store/ (its
# migrations included). Elsewhere a module hands the store what to do and gets rows back.
STORE = PACKAGE / "store"

# SQLAlchemy names that build statements, SQL text, tables or reflections, or compile
# for a dialect: calling anything under them (``sa.select``, ``sa.func.count``,
# ``sqlalchemy.dialects.sqlite.dialect``, a ``select`` imported by name) is SQL.
SQL_NAMES = frozenset(
    {
        "select",
        "insert",
        "update",
        "delete",
        "text",
        "table",
        "column",
        "literal_column",
        "exists",
        "union",
        "union_all",
        "values",
        "func",
        "Table",
        "MetaData",
        "Column",
        "Index",
        "ForeignKey",
        "UniqueConstraint",
        "PrimaryKeyConstraint",
        "CheckConstraint",
        "DDL",
        "schema",
        "inspect",
        "compiles",
        "dialects",
    }
)
# Methods that send SQL, whatever they are called on (a connection, a session, a MetaData).
SQL_METHODS = frozenset(
    {"execute", "exec_driver_sql", "scalar", "scalars", "query", "create_all", "drop_all"}
)
# ``table.insert()`` and friends: a statement from a Table, called without arguments
# (``dict.update`` and ``list.insert`` always take some).
STATEMENT_METHODS = frozenset({"select", "insert", "update", "delete"})

# Modules outside the store that may build SQL, each with the reason. Keep it short.
SQL_ALLOWED = {
    "flowrunner/query/sql.py": (
        "the query language's SQL backend: it builds the boolean WHERE clause of a "
        "condition (and how each database spells contains, starts with and code-point "
        "order) over a table the store hands it; never a statement, never executed. The "
        "query package sits below the store and must not import it."
    ),
}


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> the dotted name it was imported as (``sa`` -> ``sqlalchemy``)."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                found[alias.asname or root] = alias.name if alias.asname else root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([aliases.get(node.id, node.id), *reversed(parts)])


def sql_in(source: str) -> list[str]:
    """Where ``source`` builds, compiles, executes or reflects SQL: ``line N: what``."""
    tree = ast.parse(source)
    aliases = _aliases(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        parts = (_dotted(node.func, aliases) or "").split(".")
        what = None
        if parts[0] == "sqlalchemy" and SQL_NAMES.intersection(parts[1:]):
            what = f"{'.'.join(parts)}(...)"
        if what is None and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method in SQL_METHODS:
                what = f".{method}(...)"
            elif method in STATEMENT_METHODS and not node.args and not node.keywords:
                what = f".{method}()"
            elif method == "compile" and any(k.arg == "dialect" for k in node.keywords):
                what = ".compile(dialect=...)"
        if what is None and any(k.arg == "autoload_with" for k in node.keywords):
            what = "autoload_with="
        if what is not None:
            found.append((node.lineno, what))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


OUTSIDE_STORE = [p for p in MODULES if STORE not in p.parents]


@pytest.mark.parametrize("path", OUTSIDE_STORE, ids=_relative)
def test_only_the_store_speaks_sql(path: Path) -> None:
    if _relative(path) in SQL_ALLOWED:
        pytest.skip(SQL_ALLOWED[_relative(path)])
    found = sql_in(path.read_text(encoding="utf-8"))
    assert not found, f"{_relative(path)} speaks SQL outside flowrunner/store/: {found}"


def test_each_sql_exception_is_still_needed() -> None:
    for name in SQL_ALLOWED:
        path = PACKAGE.parent / name
        assert sql_in(path.read_text(encoding="utf-8")), f"{name} no longer needs its exception"


@pytest.mark.parametrize(
    "source",
    [
        "import sqlalchemy as sa\nsa.select(t).where(t.c.id == 1)",
        "import sqlalchemy\nsqlalchemy.func.count()",
        "from sqlalchemy import text\ntext('DELETE FROM po')",
        "from sqlalchemy.sql import expression as e\ne.update(t)",
        "import sqlalchemy as sa\nsa.Table('po', sa.MetaData(), autoload_with=engine)",
        "import sqlalchemy as sa\nsa.inspect(engine).get_columns('po')",
        "t.insert().values(id=1)",
        "conn.execute(statement)",
        "conn.exec_driver_sql('VACUUM')",
        "session.scalar(q)",
        "metadata.create_all(engine)",
        "statement.compile(dialect=d)",
        "from sqlalchemy.ext.compiler import compiles\n@compiles(X)\ndef f(e, c): ...",
    ],
)
def test_the_sql_check_catches_sql(source: str) -> None:
    assert sql_in(source)


def test_the_sql_check_lets_plain_python_pass() -> None:
    source = (
        "import re\n"
        "import sqlalchemy as sa\n"
        "from sqlalchemy import orm\n"
        "def f(table: sa.Table, values: dict) -> None:\n"
        "    isinstance(table, sa.Table)\n"
        "    values.update({'a': 1})\n"
        "    re.compile('x')\n"
        "    sa.create_engine('sqlite://')\n"
        "    sa.Boolean()\n"
        "    orm.object_mapper(values)\n"
        "    store.insert_flow(conn, tables, values)\n"
    )
    assert sql_in(source) == []


# -- the public API --------------------------------------------------------------------


def test_public_api_is_exactly_all() -> None:
    public = {name for name in dir(flowrunner) if not name.startswith("_")} - {"annotations"}
    modules = {name for name in public if type(getattr(flowrunner, name)).__name__ == "module"}
    assert public - modules == set(flowrunner.__all__)
    for name in flowrunner.__all__:
        assert getattr(flowrunner, name) is not None
