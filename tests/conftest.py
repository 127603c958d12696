"""Shared fixtures: real SQLite files and a real PostgreSQL schema per test.

PostgreSQL tests run when FLOWRUNNER_TEST_POSTGRES_URL names a server, e.g.
``postgresql+psycopg://root@127.0.0.1:5432/test``; otherwise they skip with one line.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import fuzzing
import guides
import installed
import migrated
import pytest
import shared_compiles
import sqlalchemy as sa
import warm_connections
from hypothesis import HealthCheck, settings

from fixtures.purchase_orders import app as po
from flowrunner import tables

# How many examples a property test draws: a moderate count by default and in CI (which
# sets HYPOTHESIS_PROFILE=ci), thirty times that in a long run (HYPOTHESIS_PROFILE=long;
# "thorough" is its older name). Tests that set max_examples themselves keep their count.
MODERATE, LONG = 100, 3000
for _name, _examples in (("default", MODERATE), ("ci", MODERATE), ("long", LONG)):
    settings.register_profile(
        _name,
        max_examples=_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
settings.register_profile("thorough", settings.get_profile("long"))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Every engine of a test process compiles a statement once, not once per test.
shared_compiles.install()

PG_ENV = "FLOWRUNNER_TEST_POSTGRES_URL"
PG_SKIP = (
    f"PostgreSQL tests skipped: set {PG_ENV}=postgresql+psycopg://USER@HOST:5432/DB to run them"
)


def postgres_url() -> str | None:
    return os.environ.get(PG_ENV) or None


@pytest.fixture(scope="session")
def pg_url() -> str:
    url = postgres_url()
    if url is None:
        pytest.skip(PG_SKIP)
    return url


# The tests' own connections do not wait for the disk at each commit: SQLite's
# synchronous=OFF, PostgreSQL's synchronous_commit=off. What a test checks is what each
# transaction left, as every other connection sees it, never what survives a power cut;
# a process killed on purpose keeps its commits all the same (only a crash of the whole
# machine could lose them). Worker processes a test starts open their own connections,
# which wait as an application's do.
NO_DISK_WAITS = "-csynchronous_commit=off"


def _no_disk_waits(dbapi_connection: Any, _record: object) -> None:
    """SQLite's half of NO_DISK_WAITS, on each new connection of an engine."""
    dbapi_connection.execute("PRAGMA synchronous = OFF")


def _schema_engine(url: str | sa.URL, schema: str) -> sa.Engine:
    """An engine on ``schema``, its connections kept warm for the next test's engine."""
    options = f"-csearch_path={schema} {NO_DISK_WAITS}"
    made = sa.make_url(url)
    return sa.create_engine(made, creator=warm_connections.connector(made, schema, options))


# One engine per server for making and dropping the tests' schemas, kept for the whole
# test process: a new one per test opened a new server process each time, whose catalog
# caches start cold, for two statements.
_ADMINS: dict[str, sa.Engine] = {}


def _admin(url: str | sa.URL) -> sa.Engine:
    key = sa.make_url(url).render_as_string(hide_password=False)
    if key not in _ADMINS:
        _ADMINS[key] = sa.create_engine(key)
    return _ADMINS[key]


# Each PostgreSQL test makes and drops a schema, which leaves dead rows in the catalog
# (about 150 in pg_attribute a test). A server without autovacuum (the test machines'
# run without) keeps them, and every catalog read scans more as the suite goes on; so
# every VACUUM_EVERY schemas it drops, a test process vacuums the catalog tables that
# making and dropping tables churns (a plain VACUUM, which waits for no test's tables).
VACUUM_EVERY = 40
_CHURNED = ["pg_attribute", "pg_class", "pg_type", "pg_depend", "pg_constraint", "pg_attrdef"]
_dropped = itertools.count(1)


def _make_schema(admin: sa.Engine, prefix: str) -> str:
    """A new, empty schema's name (``prefix`` and a random suffix)."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    return schema


def _drop_schema(admin: sa.Engine, schema: str) -> None:
    """Drop a test's schema, its engine tables kept for the next test if they can be."""
    migrated.recycle(admin, schema)
    with admin.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    if next(_dropped) % VACUUM_EVERY == 0:
        with admin.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.exec_driver_sql("VACUUM " + ", ".join(f"pg_catalog.{t}" for t in _CHURNED))


@contextmanager
def _fresh_schema(url: str, prefix: str) -> Iterator[sa.Engine]:
    """A PostgreSQL engine whose search_path is a fresh schema, dropped afterwards."""
    admin = _admin(url)
    schema = _make_schema(admin, prefix)
    engine = _schema_engine(url, schema)
    try:
        yield engine
    finally:
        engine.dispose()
        _drop_schema(admin, schema)


@pytest.fixture(scope="session", autouse=True)
def _spare_engine_tables() -> Iterator[None]:
    """The engine's tables and connections kept for the next test (``migrated.recycle``,
    ``warm_connections``, the schemas' admin engines), dropped and closed at the end."""
    yield
    migrated.drop_spares()
    warm_connections.close_all()
    for admin in _ADMINS.values():
        admin.dispose()
    _ADMINS.clear()


@pytest.fixture
def pg_engine(pg_url: str) -> Iterator[sa.Engine]:
    """A PostgreSQL engine whose search_path is a fresh schema, dropped afterwards."""
    with _fresh_schema(pg_url, "t") as engine:
        yield engine


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database URL a guide's app may fill: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'orders.db'}"
        return
    pg_url: str = request.getfixturevalue("pg_url")
    admin = _admin(pg_url)
    schema = _make_schema(admin, "t")
    try:
        url = sa.make_url(pg_url).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        _drop_schema(admin, schema)


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[sa.Engine]:
    """A SQLite engine on a file in the test's own folder."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'test.db'}")
    sa.event.listen(engine, "connect", _no_disk_waits)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_engine(request: pytest.FixtureRequest) -> sa.Engine:
    """Each test using this runs once on SQLite and once on PostgreSQL."""
    name = "sqlite_engine" if request.param == "sqlite" else "pg_engine"
    engine: sa.Engine = request.getfixturevalue(name)
    return engine


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def module_engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[sa.Engine]:
    """One database a module's tests share, once on SQLite and once on PostgreSQL: for
    tests that only read (or only are refused) what a fixture built on it once."""
    if request.param == "sqlite":
        folder = tmp_path_factory.mktemp("module")
        engine = sa.create_engine(f"sqlite:///{folder / 'test.db'}")
        sa.event.listen(engine, "connect", _no_disk_waits)
        yield engine
        engine.dispose()
        return
    url: str = request.getfixturevalue("pg_url")
    with _fresh_schema(url, "m") as engine:
        yield engine


@pytest.fixture
def engine(any_engine: sa.Engine) -> sa.Engine:
    """``any_engine`` with the engine's own tables migrated in (a module may define its own)."""
    migrated.upgrade(any_engine)
    return any_engine


@pytest.fixture
def po_engine(any_engine: sa.Engine) -> sa.Engine:
    """``any_engine`` holding the purchase-order app's own tables (not the engine's)."""
    migrated.create(po.metadata, any_engine)
    return any_engine


@pytest.fixture
def po_tables(po_engine: sa.Engine) -> tables.AppTables:
    """The purchase-order app's flow tables, reflected from ``po_engine``."""
    return tables.reflect(po_engine, po.binding)


@pytest.fixture
def engines(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], sa.Engine]]:
    """Makes fresh, empty databases of the parametrized dialect."""
    made: list[tuple[sa.Engine, str | None]] = []
    dialect = request.param
    admin = None
    if dialect == "postgresql":
        url = request.getfixturevalue("pg_url")
        admin = _admin(url)

    def make() -> sa.Engine:
        if dialect == "sqlite":
            engine = sa.create_engine(f"sqlite:///{tmp_path / uuid.uuid4().hex}.db")
            sa.event.listen(engine, "connect", _no_disk_waits)
            made.append((engine, None))
            return engine
        assert admin is not None
        schema = _make_schema(admin, "c")
        engine = _schema_engine(admin.url, schema)
        engine.info_schema = schema  # type: ignore[attr-defined]
        made.append((engine, schema))
        return engine

    yield make
    for engine, schema in made:
        engine.dispose()
        if schema is not None and admin is not None:
            _drop_schema(admin, schema)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> installed.Installed:
    """flowrunner's wheel, installed with its extras in a fresh environment: built once per
    test run (pytest-xdist's workers share it)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's own folder, above each worker's
    return installed.installed(base / "installed-wheel")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (pyproject.toml): half as many test processes again as cores. A test
    spends a good part of its time waiting -- for the worker processes it starts, the
    browser, PostgreSQL -- and a third process fills the cores meanwhile (on 2 cores:
    the suite in 409 s with 3 processes, against 511 s with 2, one after the other on one
    machine; docs/performance.md). PYTEST_XDIST_AUTO_NUM_WORKERS still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    cores = len(os.sched_getaffinity(0))
    return cores + max(1, cores // 2)


# Why tests skipped, and how many for each reason: summed up in one line a reason.
_skipped: dict[str, int] = {}
_guides: list[tuple[str, int, int]] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A guide a test checked travels with its report (from pytest-xdist's workers too).

    A failure whose text holds a lone surrogate (a property test's drawn text) is told with
    it escaped: pytest-xdist sends reports as UTF-8, and would otherwise stop the whole run
    with an internal error in place of the failure."""
    report = yield
    if call.when == "call" and guides.CHECKED:
        report.user_properties.extend(("guide", checked) for checked in guides.CHECKED)
        guides.CHECKED.clear()
    if report.failed and not _utf8(str(report.longrepr)):
        report.longrepr = _escaped(str(report.longrepr))
    report.sections = [(title, _escaped(text)) for title, text in report.sections]
    return report


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escaped(text: str) -> str:
    """``text`` with what UTF-8 cannot hold written as ``\\udXXX``."""
    return text if _utf8(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _count_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
    reason = str(reason).removeprefix("Skipped: ")
    _skipped[reason] = _skipped.get(reason, 0) + 1


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A module that skips whole (the browser's) counts once."""
    if report.skipped:
        _count_skip(report)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _count_skip(report)
    for name, value in report.user_properties:
        if name == "guide" and report.passed:
            guide, blocks, claims = cast(tuple[str, int, int], value)
            _guides.append((f"{guide} {_param(report.nodeid)}".strip(), blocks, claims))


def _param(nodeid: str) -> str:
    return nodeid.partition("[")[2].rstrip("]")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line for each reason tests skipped (all PostgreSQL tests skipped: one line,
    saying how to run them); and the guides whose blocks ran from the wheel, with how many
    blocks and claims each; and, in a long fuzz run, what its inputs came to."""
    for reason, count in sorted(_skipped.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{count} skipped — {reason}")
    if _guides:
        terminalreporter.write_line(
            f"{len(_guides)} guide run(s) from the installed wheel (blocks, claims checked):"
        )
        for guide, blocks, claims in sorted(_guides):
            terminalreporter.write_line(f"  {guide:32} {blocks:3} blocks {claims:4} claims")
    if os.environ.get("FLOWRUNNER_FUZZ_TALLY"):  # bench/fuzz.py, in one process
        for tally in fuzzing.TALLIES:
            for line in tally.lines():
                terminalreporter.write_line(line)
            tally.clear()  # bench/fuzz.py runs each surface in turn, in this process
