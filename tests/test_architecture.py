"""The architecture, enforced (docs/architecture.md draws it):

- every module has a layer and imports only its own layer and those below (``LAYERS``);
- no import closes a circle, wherever it stands, and only the surfaces import the facade;
- only the store speaks SQL, and the pure layers read no clock;
- no module reaches another's private names;
- the package's root stays small and its facade thin;
- the public API is ``__all__``, and the page names every layer and every module.

The source is read by ``source_facts``; the rules and their few exceptions are here.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from pathlib import Path

import pytest
import source_facts as facts

import flowrunner

PACKAGE = facts.PACKAGE
MODULES = facts.MODULES
PAGE = PACKAGE.parent / "docs" / "architecture.md"

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
        for pure in ("definitions", "context", "replay", "waits", "awaited")
    },
    "flowrunner.foundations.sanitize": ("flowrunner.store", "sqlalchemy"),
    "flowrunner.foundations.templates": ("flowrunner.store", "sqlalchemy"),
}


# The layers, lowest first (docs/architecture.md draws them, in a table naming the same
# entries): a module may import its own layer and the layers below it, never one above.
# Each entry is a module or a package; a module is in the layer of the longest entry
# naming it. A package that holds one program (flows/, jobs/, timers/, inbound/,
# workflows/) spans layers: its pure modules stand low, its running modules in the
# runner layer, each named where it stands.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundations",
        (
            "flowrunner.errors",
            "flowrunner.moved",
            "flowrunner.calendars",
            "flowrunner.foundations",
            "flowrunner.inbound.signing",
            "flowrunner.jobs.schedules",
        ),
    ),
    ("query language", ("flowrunner.query",)),
    (
        "rows and validation",
        (
            "flowrunner.binding",
            "flowrunner.engine.commands",
            "flowrunner.flows",
            "flowrunner.flows.column_facts",
            "flowrunner.flows.spelling",
            "flowrunner.flows.rows",
            "flowrunner.flows.loops",
            "flowrunner.flows.validation",
            "flowrunner.flows.snapshot",
            "flowrunner.flows.versions",
            "flowrunner.flows.trial.script",
            "flowrunner.flows.trial.plan",
            "flowrunner.jobs.spec",
            "flowrunner.jobs.catch_up",
            "flowrunner.timers.rules",
            "flowrunner.inbound",
            "flowrunner.inbound.endpoints",
            "flowrunner.inbound.mail",
            "flowrunner.delivery",
            "flowrunner.authority",
        ),
    ),
    (
        "interpreter",
        (
            "flowrunner.flows.interpreter",
            "flowrunner.history",
            "flowrunner.workflows",
            "flowrunner.workflows.definitions",
            "flowrunner.workflows.context",
            "flowrunner.workflows.replay",
            "flowrunner.workflows.waits",
        ),
    ),
    ("diagrams", ("flowrunner.diagrams",)),
    ("store", ("flowrunner.store", "flowrunner.alembic")),
    (
        "runner",
        (
            "flowrunner.runner",
            "flowrunner.testing",
            "flowrunner.tables",
            "flowrunner.engine",
            "flowrunner.flows.edits",
            "flowrunner.flows.orm_hook",
            "flowrunner.flows.files",
            "flowrunner.flows.starts",
            "flowrunner.flows.scheduled",
            "flowrunner.flows.editor",
            "flowrunner.flows.publishing",
            "flowrunner.flows.step",
            "flowrunner.flows.subflows",
            "flowrunner.flows.trial",
            "flowrunner.flows.trial.dry_run",
            "flowrunner.flows.trial.result",
            "flowrunner.jobs",
            "flowrunner.jobs.program",
            "flowrunner.jobs.steps",
            "flowrunner.jobs.runs",
            "flowrunner.timers",
            "flowrunner.timers.program",
            "flowrunner.inbound.receipt",
            "flowrunner.inbound.asgi",
            "flowrunner.inbound.mail_receipt",
            "flowrunner.inbound.answers",
            "flowrunner.workflows.program",
            "flowrunner.workflows.http_call",
            "flowrunner.workflows.starts",
            "flowrunner.workflows.actions",
            "flowrunner.workflows.children",
            "flowrunner.delivery.sending",
            "flowrunner.delivery.deliverer",
            "flowrunner.authority.gather",
        ),
    ),
    ("surfaces", ("flowrunner.cli", "flowrunner.web", "flowrunner.__main__")),
)

# (importer, imported) pairs that go up a layer on purpose, each with its reason.
UPWARD = {
    # FlowBinding.check(engine) is the apps' one-call check at startup: it asks the store
    # to read the tables (an import inside the method); the rest of binding judges only
    # the MetaData it is given.
    ("flowrunner.binding", "flowrunner.store"),
    ("flowrunner.binding", "flowrunner.store.app_tables"),
    # runner.console(...) is the one-line mount the console's users write: it imports the
    # console inside the method, so nothing below the surfaces needs Starlette or Jinja2
    # until it is called; the console depends on ``ConsoleRunner``, not on the facade.
    ("flowrunner.runner", "flowrunner.web.console"),
}


def _under(module: str, entry: str) -> bool:
    """Whether ``entry`` names ``module``: the module itself, or a package above it."""
    return module == entry or module.startswith(entry + ".")


@functools.cache
def entry_of(module: str) -> tuple[int, str] | None:
    """The layer of ``module`` and the entry placing it there: the longest entry naming
    it (a package may place some of its modules in another layer than itself)."""
    found = [(len(p), index, p) for index, (_, entries) in enumerate(LAYERS) for p in entries]
    naming = [(index, p) for _, index, p in sorted(found, reverse=True) if _under(module, p)]
    return naming[0] if naming else None


def layer_of(module: str) -> int | None:
    """The layer of ``module`` (an index into ``LAYERS``), or None when none names it."""
    placed = entry_of(module)
    return None if placed is None else placed[0]


def test_every_entry_names_a_module() -> None:
    """A module moved or removed leaves no entry behind, in the layers or the bans."""
    entries = [p for _, prefixes in LAYERS for p in prefixes]
    gone = sorted(name for name in [*entries, *FORBIDDEN] if not facts.is_module(name))
    assert not gone, f"these name no module of flowrunner any more: {gone}"
    twice = sorted(name for name, n in Counter(entries).items() if n > 1)
    assert not twice, f"these stand in more than one layer: {twice}"


@pytest.mark.parametrize("path", MODULES, ids=facts.module_name)
def test_every_module_has_a_layer_and_imports_only_downwards(path: Path) -> None:
    name = facts.module_name(path)
    if name == "flowrunner":
        return  # the public API gathers from every layer
    placed = entry_of(name)
    assert placed is not None, f"{name} belongs to no layer: add it to LAYERS (and the docs)"
    mine, entry = placed
    upward = sorted(
        imported
        for imported in facts.imports(path)
        if (layer_of(imported) or 0) > mine and (name, imported) not in UPWARD
    )
    where = LAYERS[mine][0] if entry == name else f"{LAYERS[mine][0]}, as part of {entry}"
    assert not upward, (
        f"{name} ({where}) must not import upwards: {upward}; if it belongs higher, "
        "place it there in LAYERS and docs/architecture.md"
    )


@pytest.mark.parametrize("path", MODULES, ids=facts.module_name)
def test_imports_flow_one_way(path: Path) -> None:
    name = facts.module_name(path)
    for prefix, forbidden in FORBIDDEN.items():
        if _under(name, prefix):
            bad = sorted(
                imported
                for imported in facts.imports(path)
                for banned in forbidden
                if _under(imported, banned)
            )
            assert not bad, f"{name} must not import {bad}"


# -- no circle, and the facade on top ------------------------------------------------


def test_no_import_closes_a_circle() -> None:
    """Every import counts — at the top, inside a function, under ``TYPE_CHECKING``: a
    module that needs another's types only stands on it all the same."""
    edges = facts.graph()
    found = facts.circles(edges)
    told = "\n".join(
        f"  {len(group)} modules: {', '.join(group)}\n"
        f"    for one: {' -> '.join(facts.way_round(edges, group))}"
        for group in found
    )
    assert not found, f"flowrunner's imports go round {len(found)} circle(s):\n{told}"


# The modules that may import the facade (``flowrunner.runner``): the package's
# ``__init__``, which hands it out, and the surfaces, which hold an application's runner.
# Everything below them is given a ``Mounted`` (``flowrunner.engine.mounted``), never the
# runner. (That the facade imports no surface is the layers' rule: it is below them.)
FACADE = "flowrunner.runner"
FACADE_USERS = ("flowrunner.testing", "flowrunner.cli", "flowrunner.web")


def test_only_the_surfaces_import_the_facade() -> None:
    reaching = sorted(
        name
        for name, imported in facts.graph().items()
        if FACADE in imported
        and name != "flowrunner"
        and not any(_under(name, user) for user in FACADE_USERS)
    )
    assert not reaching, (
        f"{len(reaching)} modules import {FACADE}; hand them a Mounted instead: {reaching}"
    )


# FastAPI is an extra (``flowrunner[web]``): only the module apps import for it needs it.
WEB_ONLY = ("fastapi", "starlette", "httpx")


# A workflow's ``call`` step is an HTTP client: httpx, imported when the first call is
# made (an extra too, ``flowrunner[workflows]``).
HTTPX_ALLOWED = {"flowrunner.workflows.http_call"}


@pytest.mark.parametrize("path", MODULES, ids=facts.module_name)
def test_only_flowrunner_web_imports_fastapi(path: Path) -> None:
    name = facts.module_name(path)
    if _under(name, "flowrunner.web"):
        return
    if name in HTTPX_ALLOWED:
        bad = sorted(i for i in facts.imports(path) if i.split(".")[0] in ("fastapi", "starlette"))
        assert not bad, f"{name} imports {bad}"
        return
    bad = sorted(i for i in facts.imports(path) if i.split(".")[0] in WEB_ONLY)
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


def sql_in(source: str) -> list[str]:
    """Where ``source`` builds, compiles, executes or reflects SQL: ``line N: what``."""
    tree = facts.parsed(source)
    aliases = facts.aliases(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        parts = (facts.dotted(node.func, aliases) or "").split(".")
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


OUTSIDE_STORE = [p for p in MODULES if STORE not in p.parents]


@pytest.mark.parametrize("path", OUTSIDE_STORE, ids=facts.relative)
def test_only_the_store_speaks_sql(path: Path) -> None:
    if facts.relative(path) in SQL_ALLOWED:
        pytest.skip(SQL_ALLOWED[facts.relative(path)])
    found = sql_in(path.read_text(encoding="utf-8"))
    assert not found, f"{facts.relative(path)} speaks SQL outside flowrunner/store/: {found}"


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


# -- the pure layers read no clock -------------------------------------------------

# Below the store, time comes in as a value (``now``): the runner's clock, which a test
# moves by hand. These layers never read one.
PURE_LAYERS = ("foundations", "query language", "rows and validation", "interpreter", "diagrams")
PURE = [
    p
    for p in MODULES
    if (layer := layer_of(facts.module_name(p))) is not None and LAYERS[layer][0] in PURE_LAYERS
]

# The clock reads a pure module may make, each with its reason. Keep it short.
CLOCK_ALLOWED: dict[str, tuple[tuple[str, ...], str]] = {
    "flowrunner/engine/commands.py": (
        ("datetime.datetime.now",),
        "the default of CommandContext.clock, for a context an application builds itself "
        "(testing its own command); a runner always hands its own clock",
    ),
    "flowrunner/query/condition.py": (
        ("datetime.datetime.now",),
        "the query language's public calls default a condition's now() to the wall clock "
        "(Condition.to_sql(table) without now=); the engine always passes its clock's",
    ),
    "flowrunner/query/evaluate.py": (
        ("datetime.datetime.now",),
        "the same default for Condition.matches(record) and evaluator() without now=",
    ),
}


@pytest.mark.parametrize("path", PURE, ids=facts.relative)
def test_the_pure_layers_read_no_clock(path: Path) -> None:
    found = facts.clock_reads(path.read_text(encoding="utf-8"))
    allowed = Counter(CLOCK_ALLOWED.get(facts.relative(path), ((), ""))[0])
    extra = Counter(clock for _, clock in found) - allowed
    told = [f"line {line}: {clock}" for line, clock in found]
    assert not extra, (
        f"{facts.relative(path)} reads a clock in a pure layer: {told}; take `now` (or a "
        "clock) from the caller"
    )


def test_each_clock_exception_is_still_needed() -> None:
    for name, (reads, _) in CLOCK_ALLOWED.items():
        path = PACKAGE.parent / name
        assert path in PURE, f"{name} is not in a pure layer: its exception can go"
        found = Counter(clock for _, clock in facts.clock_reads(path.read_text("utf-8")))
        assert not Counter(reads) - found, f"{name} no longer reads {reads}: drop its exception"


# -- no module reaches another's private names ---------------------------------------

# Private names of other libraries that flowrunner reads on purpose, each with its reason.
THIRD_PARTY_PRIVATE = {
    "_mapping": (
        "SQLAlchemy's Row._mapping, the public (documented) mapping view of a row; the "
        "underscore keeps it apart from the row's column names"
    ),
    "_has_events": (
        "SQLAlchemy's Connection._has_events: store/dialects asks it before sending a "
        "statement through the driver, as SQLAlchemy's own event points do, so that a "
        "listener on the connection still sees it; only the store knows SQLAlchemy's insides"
    ),
    "_get_running_loop": (
        "asyncio's say of which loop runs in this thread (in asyncio.events.__all__, as "
        "other event loops use it): workflows/awaited keeps it to put it back"
    ),
    "_set_running_loop": (
        "asyncio's way to say which loop runs in this thread (in asyncio.events.__all__, as "
        "other event loops use it): workflows/awaited gives a workflow's body one that "
        "refuses every use, so asyncio.sleep or gather fails with the workflow's sentence"
    ),
}


@pytest.mark.parametrize("path", MODULES, ids=facts.relative)
def test_no_module_reaches_another_modules_private_names(path: Path) -> None:
    found = [
        str(reach)
        for reach in facts.private_uses(path.read_text(encoding="utf-8"))
        if reach.name not in THIRD_PARTY_PRIVATE or reach.text.startswith("from flowrunner")
    ]
    assert not found, (
        f"{facts.relative(path)} reaches private names that are not its own: {found}; "
        "make the name public where it lives, or pass what it holds"
    )


def test_each_private_exception_is_still_needed() -> None:
    used = {reach.name for path in MODULES for reach in facts.private_uses(path.read_text("utf-8"))}
    assert not set(THIRD_PARTY_PRIVATE) - used, "drop the exceptions nothing reads any more"


# -- a small root, a thin facade -------------------------------------------------------

# The architecture reads from ``ls``: a few modules at the root, the rest in packages.
ROOT_MODULES_AT_MOST = 15
FACADE_LINES_AT_MOST = 500


def test_few_modules_stand_at_the_root() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= ROOT_MODULES_AT_MOST, (
        f"{len(root)} modules at flowrunner/'s root (at most {ROOT_MODULES_AT_MOST}): {root}"
    )


def test_the_facade_is_thin() -> None:
    lines = len((PACKAGE / "runner.py").read_text(encoding="utf-8").splitlines())
    assert lines <= FACADE_LINES_AT_MOST, (
        f"flowrunner/runner.py has {lines} lines (at most {FACADE_LINES_AT_MOST}): it "
        "delegates to services, each a module of its own"
    )


# -- the page ------------------------------------------------------------------------


def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


def _short(entry: str) -> str:
    """``flowrunner.flows.trial.script`` as the page names it: ``flows/trial/script``."""
    return entry.removeprefix("flowrunner.").replace(".", "/")


def _layer_table(text: str) -> dict[str, set[str]]:
    """The page's table of layers: each layer's name -> the entries its second cell names."""
    rows: dict[str, set[str]] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) > 2 and cells[0].strip("*") in dict(LAYERS):
            rows[cells[0].strip("*")] = {
                name.rstrip("/") for name in re.findall(r"`([^`]+)`", cells[1])
            }
    return rows


def test_the_documented_layers_are_the_enforced_ones() -> None:
    text = _page()
    table = _layer_table(text)
    for layer, prefixes in LAYERS:
        assert layer in text, f"docs/architecture.md does not name the layer {layer!r}"
        assert layer in table, f"docs/architecture.md's table of layers has no row {layer!r}"
        enforced = {_short(p) for p in prefixes}
        assert table[layer] == enforced, (
            f"docs/architecture.md places in {layer!r} what LAYERS does not: "
            f"missing {sorted(enforced - table[layer])}, extra {sorted(table[layer] - enforced)}"
        )


# Module files the page names by their folder alone, each with the reason.
NAMED_BY_FOLDER = {
    "flowrunner/store/migrations/versions/": (
        "one file per revision, each saying what it changes; the page names the folder"
    ),
}


def _named_on_the_page(text: str) -> dict[str, set[str]]:
    """Each package's section (``### `flows/trial/` …``, the root's ``### `flowrunner/` …``)
    -> the names its tables' first cells give (``| `dry_run` | …``)."""
    found: dict[str, set[str]] = {}
    section: set[str] | None = None
    for line in text.splitlines():
        if line.startswith("#"):
            folder = re.match(r"#+ `([\w/]*/)`", line)
            section = None if folder is None else found.setdefault(folder[1], set())
        elif section is not None and line.startswith("| `"):
            section.update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return found


def test_every_module_is_named_on_the_page() -> None:
    """Each module in its package's section, by name; each package by its section."""
    sections = _named_on_the_page(_page())
    missing = []
    for path in MODULES:
        where = facts.relative(path)
        if any(where.startswith(folder) for folder in NAMED_BY_FOLDER):
            continue
        folder = (
            "flowrunner/"
            if path.parent == PACKAGE
            else f"{path.parent.relative_to(PACKAGE).as_posix()}/"
        )
        if path.name == "__init__.py" and path.parent != PACKAGE:
            if folder not in sections:
                missing.append(f"{where} (a section `{folder}`)")
        elif path.stem not in sections.get(folder, set()):
            missing.append(f"{where} (`{path.stem}` in the section `{folder}`)")
    for folder in NAMED_BY_FOLDER:
        parent, name = folder.removeprefix("flowrunner/").rstrip("/").rsplit("/", 1)
        if f"{name}/" not in sections.get(f"{parent}/", set()):
            missing.append(f"{folder} (`{name}/` in the section `{parent}/`)")
    assert not missing, f"docs/architecture.md does not name: {missing}"


# -- the public API --------------------------------------------------------------------


def test_public_api_is_exactly_all() -> None:
    public = {name for name in dir(flowrunner) if not name.startswith("_")} - {"annotations"}
    modules = {name for name in public if type(getattr(flowrunner, name)).__name__ == "module"}
    assert public - modules == set(flowrunner.__all__)
    for name in flowrunner.__all__:
        assert getattr(flowrunner, name) is not None
