"""Fuzzing every entry point: whatever comes in, the answer is flowrunner's own error.

- ``parse`` over random text and over random timestamp and duration literals raises only
  ``QueryError``; what parses evaluates and compiles to SQL at any ``now``, the calendar's
  ends included, and Python and SQLite agree there;
- row saves with random ids, positions, gotos, durations, conditions and values succeed
  or raise only ``RowInvalid`` (SQLite and PostgreSQL);
- every CLI command, driven in process, exits 0, 1 or 2 within a second, no traceback.

Examples follow the hypothesis profile (``HYPOTHESIS_PROFILE=ci``); for a longer run set
``FLOWRUNNER_FUZZ_EXAMPLES`` or run ``python bench/fuzz.py``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import migrated
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.purchase_orders import app as po
from flowrunner import errors, query, tables
from flowrunner.cli import cli
from flowrunner.flows import edits
from flowrunner.foundations import durations, sqltypes

ROOT = Path(__file__).resolve().parent.parent
F = TypeVar("F", bound=Callable[..., Any])


def fuzz(share: float = 1.0) -> Callable[[F], F]:
    """Hypothesis settings: ``share`` of the profile's examples, or FLOWRUNNER_FUZZ_EXAMPLES."""
    wanted = os.environ.get("FLOWRUNNER_FUZZ_EXAMPLES")
    examples = int(wanted) if wanted else max(10, int(settings().max_examples * share))
    decorate: Callable[[F], F] = settings(
        max_examples=examples,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    return decorate


# -- the query language -------------------------------------------------------------------

COLUMNS = {
    "status": "text",
    "amount": "number",
    "flag": "boolean",
    "due": "date",
    "at": "timestamp",
}
ENDS = [
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(1, 1, 1, 5, tzinfo=timezone(timedelta(hours=14))),
    datetime(40, 1, 1, tzinfo=UTC),
    datetime(2025, 6, 1, 12, tzinfo=UTC),
    datetime(9960, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(9999, 12, 31, 20, tzinfo=timezone(timedelta(hours=-3))),
    datetime(9999, 12, 31, 23),
]
nows = st.one_of(st.sampled_from(ENDS), st.datetimes(timezones=st.just(UTC)))

TOKENS = [
    "status",
    "amount",
    "due",
    "at",
    "flag",
    "event.x",
    "=",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "in",
    "not",
    "and",
    "or",
    "is",
    "null",
    "contains",
    "starts",
    "with",
    "(",
    ")",
    ",",
    "'open'",
    '"it\'s"',
    "1",
    "-2.5",
    "1e5",
    "٣",
    "true",
    "FALSE",
    "now()",
    "today()",
    "+",
    "-",
    "2 days",
    "P1D",
    "PT30M",
    "99999999 years",
    "100 years",
    "1.5 hours",
    "2025-01-01",
    "0000-01-01",
    "9999-12-31",
    "2025-02-30",
    "2025-01-01T10:00Z",
    "9999-12-31T23:59-14:00",
    "0001-01-01T00:00+01:00",
    "\\",
    "'",
    "\n",
    "\x00",
]
soup = st.lists(
    st.one_of(st.sampled_from(TOKENS), st.text(max_size=4)), min_size=1, max_size=12
).map(" ".join)


@st.composite
def timestamp_texts(draw: st.DrawFn) -> str:
    """Date-and-time literals near and past the calendar's ends, and some not dates at all."""
    year = draw(st.sampled_from([0, 1, 2, 1970, 2025, 9998, 9999]) | st.integers(0, 9999))
    parts = [f"{year:04d}", f"{draw(st.integers(0, 13)):02d}", f"{draw(st.integers(0, 32)):02d}"]
    text = "-".join(parts)
    if draw(st.booleans()):
        text += draw(st.sampled_from("Tt ")) + f"{draw(st.integers(0, 25)):02d}:"
        text += f"{draw(st.integers(0, 61)):02d}"
        if draw(st.booleans()):
            text += f":{draw(st.integers(0, 61)):02d}"
            if draw(st.booleans()):
                text += "." + str(draw(st.integers(0, 999999)))
        offset = draw(
            st.sampled_from(["", "Z", "z"])
            | st.builds(
                lambda sign, h, m, colon: f"{sign}{h:02d}{':' if colon else ''}{m:02d}",
                st.sampled_from("+-"),
                st.integers(0, 25),
                st.integers(0, 61),
                st.booleans(),
            )
        )
        text += offset
    return text


UNITS = [
    "s",
    "sec",
    "minutes",
    "h",
    "hours",
    "d",
    "days",
    "w",
    "weeks",
    "mo",
    "months",
    "y",
    "years",
    "dayz",
    "",
]


@st.composite
def duration_texts(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        parts = [
            f"{draw(st.integers(0, 10**12))}{draw(st.sampled_from(['', '.5', '.25']))}"
            f"{draw(st.sampled_from(['', ' ']))}{draw(st.sampled_from(UNITS))}"
            for _ in range(draw(st.integers(1, 3)))
        ]
        text = draw(st.sampled_from([" ", ", ", " and "])).join(parts)
    else:
        fields = "".join(
            f"{draw(st.integers(0, 10**10))}{unit}"
            for unit in draw(st.lists(st.sampled_from("YMWD"), max_size=3, unique=True))
        )
        time_part = "".join(
            f"{draw(st.integers(0, 10**10))}{unit}"
            for unit in draw(st.lists(st.sampled_from("HMS"), max_size=3, unique=True))
        )
        text = "P" + fields + ("T" + time_part if time_part or draw(st.booleans()) else "")
    return draw(st.sampled_from(["", "-", "+", "- "])) + text


RECORD_VALUES = st.one_of(
    st.none(),
    st.sampled_from(["open", "", "٣", "1e5", "9999-12-31T23:59-14:00", "2025-06-01"]),
    st.integers(-(10**20), 10**20),
    st.floats(),
    st.decimals(),
    st.booleans(),
    st.dates(),
    st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-14))])),
    st.datetimes(),
    st.lists(st.integers(), max_size=2),
)
records = st.dictionaries(st.sampled_from([*COLUMNS, "x"]), RECORD_VALUES, max_size=6)
TABLE = sa.Table(
    "fuzz_records",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("status", sa.String()),
    sa.Column("amount", sa.Numeric()),
    sa.Column("flag", sa.Boolean()),
    sa.Column("due", sa.Date()),
    sa.Column("at", sqltypes.UTCDateTime()),
)


def _use(condition: query.Condition, record: dict[str, Any], now: datetime) -> None:
    """What a parsed condition must do without an exception at any ``now``."""
    assert isinstance(condition.matches(record, now), bool)
    assert isinstance(condition.matches(record, now, event=record), bool)
    condition.to_sql(TABLE, now).compile(dialect=sa.dialects.sqlite.dialect())


@fuzz()
@given(text=soup, typed=st.booleans(), event=st.booleans(), record=records, now=nows)
def test_parse_random_text(
    text: str, typed: bool, event: bool, record: dict[str, Any], now: datetime
) -> None:
    try:
        condition = query.parse(text, COLUMNS if typed else None, event=event)
    except errors.QueryError as error:
        assert error.line >= 1 and error.column >= 1
        return
    if typed and not event:
        _use(condition, record, now)


@fuzz()
@given(
    column=st.sampled_from(["at", "due", "status"]),
    op=st.sampled_from(["=", "!=", "<", ">=", "in"]),
    literal=timestamp_texts(),
    quoted=st.booleans(),
    typed=st.booleans(),
    record=records,
    now=nows,
)
def test_parse_random_timestamps(
    column: str,
    op: str,
    literal: str,
    quoted: bool,
    typed: bool,
    record: dict[str, Any],
    now: datetime,
) -> None:
    value = f"'{literal}'" if quoted else literal
    text = f"{column} {op} ({value})" if op == "in" else f"{column} {op} {value}"
    try:
        condition = query.parse(text, COLUMNS if typed else None)
    except errors.QueryError:
        return
    if typed:
        _use(condition, record, now)
    for kind in (None, "timestamp", "date", "text"):
        with contextlib.suppress(errors.QueryError):
            query.parse_value(value, kind).resolve(now)


@fuzz()
@given(
    text=duration_texts(),
    signed=st.booleans(),
    moment=nows,
    zone=st.sampled_from([None, UTC, timezone(timedelta(hours=5))]),
)
def test_durations(text: str, signed: bool, moment: datetime, zone: Any) -> None:
    try:
        duration = durations.parse_duration(text, allow_sign=signed)
    except errors.DurationError:
        return
    with contextlib.suppress(errors.DurationError):
        duration.add_to(moment, zone)


@fuzz()
@given(
    base=st.sampled_from(["now()", "today()"]),
    sign=st.sampled_from(["+", "-"]),
    duration=duration_texts(),
    column=st.sampled_from(["at", "due"]),
    op=st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
    record=records,
    now=nows,
)
def test_relative_moments_at_any_now(
    base: str,
    sign: str,
    duration: str,
    column: str,
    op: str,
    record: dict[str, Any],
    now: datetime,
) -> None:
    text = f"{column} {op} {base} {sign} {duration}"
    try:
        condition = query.parse(text, COLUMNS)
    except errors.QueryError:
        return
    _use(condition, record, now)
    try:
        query.parse_value(f"{base} {sign} {duration}", "timestamp").resolve(now)
    except errors.QueryError as error:
        assert "outside the calendar" in error.message


EDGE_ROWS: list[dict[str, Any]] = [
    {"id": 1, "due": date(1, 1, 1), "at": datetime(1, 1, 1, tzinfo=UTC)},
    {"id": 2, "due": date(9999, 12, 31), "at": datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)},
    {"id": 3, "due": date(2025, 6, 1), "at": datetime(2025, 6, 1, 12, tzinfo=UTC)},
    {"id": 4, "due": date(9998, 1, 1), "at": datetime(9998, 1, 1, tzinfo=UTC)},
    {"id": 5, "due": None, "at": None},
]


@pytest.fixture
def edge_engine(sqlite_engine: sa.Engine) -> sa.Engine:
    TABLE.metadata.create_all(sqlite_engine)
    with sqlite_engine.begin() as conn:
        conn.execute(TABLE.insert(), EDGE_ROWS)
    return sqlite_engine


@fuzz(0.5)
@given(
    base=st.sampled_from(["now()", "today()"]),
    sign=st.sampled_from(["+", "-"]),
    amount=st.integers(1, 100),
    unit=st.sampled_from(["days", "months", "years", "hours"]),
    column=st.sampled_from(["at", "due"]),
    op=st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
    negate=st.booleans(),
    now=nows,
)
def test_python_and_sqlite_agree_at_the_calendars_ends(
    edge_engine: sa.Engine,
    base: str,
    sign: str,
    amount: int,
    unit: str,
    column: str,
    op: str,
    negate: bool,
    now: datetime,
) -> None:
    text = f"{'not ' if negate else ''}{column} {op} {base} {sign} {amount} {unit}"
    try:
        condition = query.parse(text, TABLE)
    except errors.QueryError:
        return  # now() against a date column
    expected = [r["id"] for r in EDGE_ROWS if condition.matches(r, now)]
    statement = sa.select(TABLE.c.id).where(condition.to_sql(TABLE, now)).order_by("id")
    with edge_engine.connect() as conn:
        assert list(conn.execute(statement).scalars()) == expected, (text, now)


# -- row saves ----------------------------------------------------------------------------

ANY_VALUE = st.one_of(
    st.none(),
    st.integers(-(2**70), 2**70),
    st.sampled_from(["1", " 2 ", "٣", "+3", "007", "1_0", "-1", "2147483648", "", " ", "x"]),
    st.text(max_size=8),
    st.floats(),
    st.decimals(),
    st.booleans(),
    st.binary(max_size=3),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    st.dates(),
)
CONDITIONS = st.one_of(
    soup, st.sampled_from(["amount > 5", "needed_by < today() + 100 years", "status = ٣"])
)
STEP_VALUES = {
    "id": ANY_VALUE,
    "flow_id": ANY_VALUE,
    "position": ANY_VALUE,
    "goto": ANY_VALUE,
    "kind": st.sampled_from(
        ["set", "wait", "until", "branch", "waitFor", "notify", "approval", "send", "fax"]
    )
    | ANY_VALUE,
    "duration": duration_texts() | ANY_VALUE,
    "remind": duration_texts() | ANY_VALUE,
    "condition": CONDITIONS | ANY_VALUE,
    "field": st.sampled_from(["status", "priority", "needed_by", "amount"]) | ANY_VALUE,
    "value": st.one_of(soup, timestamp_texts(), st.sampled_from(["now() + 100 years", "'x'"]))
    | ANY_VALUE,
    "mode": st.sampled_from(["any", "all", "2", "60%", "٣", "120%"]) | ANY_VALUE,
    "event": st.sampled_from(["po.decided"]) | ANY_VALUE,
    "audience": st.sampled_from(["requester"]) | ANY_VALUE,
    "message": ANY_VALUE,
    "approver": ANY_VALUE,
    "title": ANY_VALUE,
}
FLOW_VALUES = {
    "id": ANY_VALUE,
    "name": ANY_VALUE,
    "start": st.sampled_from(["created", "updated", "manual"]) | ANY_VALUE,
    "condition": CONDITIONS | ANY_VALUE,
    "changes": st.sampled_from(["status", "amount"]) | ANY_VALUE,
    "active": ANY_VALUE,
}


def _rows(values: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=values)


@pytest.fixture
def po_store(any_engine: sa.Engine) -> Iterator[tuple[sa.Engine, tables.AppTables, int]]:
    po.metadata.create_all(any_engine)
    po_tables = tables.reflect(any_engine, po.binding)
    with any_engine.begin() as conn:
        flow_id = edits.save_flow(
            conn, po.binding, po_tables, {"name": "Stored", "start": "created"}
        )
        edits.save_step(
            conn,
            po.binding,
            po_tables,
            {"flow_id": flow_id, "position": 1, "kind": "wait", "duration": "1 day"},
        )
    yield any_engine, po_tables, int(flow_id)


def _save(engine: sa.Engine, save: Callable[[sa.Connection], object]) -> None:
    with engine.connect() as conn:
        transaction = conn.begin()
        try:
            save(conn)
        except errors.RowInvalid as refused:
            assert refused.errors and all(e.field and e.message for e in refused.errors)
            assert refused.to_json()
        finally:
            transaction.rollback()


@fuzz(0.5)
@given(row=_rows(STEP_VALUES), known_flow=st.sampled_from(["int", "text", "random"]))
def test_step_saves(
    po_store: tuple[sa.Engine, tables.AppTables, int], row: dict[str, Any], known_flow: str
) -> None:
    engine, po_tables, flow_id = po_store
    if known_flow != "random":
        row["flow_id"] = flow_id if known_flow == "int" else str(flow_id)
    _save(engine, lambda conn: edits.save_step(conn, po.binding, po_tables, row))


@fuzz(0.5)
@given(row=_rows(FLOW_VALUES), update=st.booleans(), changes=_rows(FLOW_VALUES))
def test_flow_saves(
    po_store: tuple[sa.Engine, tables.AppTables, int],
    row: dict[str, Any],
    update: bool,
    changes: dict[str, Any],
) -> None:
    engine, po_tables, flow_id = po_store
    if update:
        _save(engine, lambda conn: edits.update_flow(conn, po.binding, po_tables, flow_id, changes))
    else:
        _save(engine, lambda conn: edits.save_flow(conn, po.binding, po_tables, row))


# -- the command line ---------------------------------------------------------------------

APP = "fixtures.tickets.app:runner"


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Any]:
    """Databases, files and folders, good and bad, for the commands to be given."""
    good = f"sqlite:///{tmp_path / 'good.db'}"
    engine = sa.create_engine(good)
    migrated.upgrade(engine)
    engine.dispose()
    files = {
        "flows.yaml": (ROOT / "fixtures" / "tickets" / "flows.yaml").read_text(encoding="utf-8"),
        "broken.yaml": "flows: [",
        "scalar.yaml": "42",
        "deep.yaml": "[" * 500 + "]" * 500,
        "rows.yaml": "- {name: X, start: created, steps: [{position: ٣, kind: wait}]}",
        "ids.yaml": "- {id: x, name: Y, start: manual, condition: 'due_at < now() + 1 day'}",
        "bad.csv": 'flow_name,position\n"x',
        "empty.csv": "",
        "wide.csv": "flow_name,position,kind\nA,1,wait,extra,more\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00")
    held = tmp_path / "held"
    held.mkdir()
    (held / "x.db").write_text("", encoding="utf-8")
    return {
        "databases": [
            good,
            f"sqlite:///{tmp_path / 'fresh.db'}",
            f"sqlite:///{tmp_path / 'no' / 'dir' / 'x.db'}",
            "nosuchdb://x",
            "not a url",
            "postgresql+psycopg://nobody@127.0.0.1:1/none",
        ],
        "files": [str(tmp_path / n) for n in [*files, "binary.yaml", "missing.yaml"]]
        + [str(tmp_path)],
        "outputs": [
            str(tmp_path / "out.yaml"),
            str(tmp_path / "out.csv"),
            "/no/such/dir/x",
            str(tmp_path),
        ],
        "held": str(held),
        "file": str(tmp_path / "flows.yaml"),
    }


WORDS = st.text(st.characters(exclude_characters=":\x00"), max_size=8)
APPS = st.sampled_from(
    [
        APP,
        "nocolon",
        ":x",
        "fixtures.nowhere:runner",
        "os:path",
        "fixtures.tickets.app:nope",
        "fixtures.purchase_orders.app:runner",
    ]
)
JSON = st.sampled_from(['{"status": "open"}', "[1]", "{", "[" * 3000, '{"a": 1e999}', "null"])


@st.composite
def command_lines(draw: st.DrawFn, places: dict[str, Any]) -> list[str]:
    """The arguments of one command, from pools of good and bad values and random words."""
    app = ["--app", draw(APPS | WORDS)] if draw(st.integers(0, 9)) else []
    database = ["--database", draw(st.sampled_from(places["databases"]) | WORDS)]
    command = draw(
        st.sampled_from(
            ["query", "migrate", "import", "export", "validate", "start", "worker", "demo", "other"]
        )
    )
    if command == "query":
        args = ["query", draw(soup | st.text(max_size=20))]
        for option, values in (
            ("--record", JSON),
            ("--columns", JSON | st.just('{"amount": "number", "due_at": "timestamp"}')),
            ("--event", JSON),
            ("--now", st.sampled_from(["9990-01-01T00:00Z", "soon"]) | timestamp_texts()),
            ("--sql", st.sampled_from(["sqlite", "postgresql", "oracle"])),
        ):
            if draw(st.booleans()):
                args += [option, draw(values)]
        return args
    if command == "migrate":
        target = draw(st.sampled_from([app + database, app, database, []]))
        action = draw(st.sampled_from([["up"], ["status"], ["status", "--check"], ["down"]]))
        return ["migrate", *action, *target]
    if command == "import":
        file = draw(st.sampled_from(places["files"]) | WORDS)
        replace = ["--replace"] if draw(st.booleans()) else []
        return ["flows", "import", file, *app, *database, *replace]
    if command == "export":
        output = ["-o", draw(st.sampled_from(places["outputs"]))] if draw(st.booleans()) else []
        fmt = (
            ["--format", draw(st.sampled_from(["yaml", "csv", "xml"]))]
            if draw(st.booleans())
            else []
        )
        return ["flows", "export", *app, *database, *output, *fmt]
    if command == "validate":
        return ["flows", "validate", *app, *database]
    if command == "start":
        resource = draw(st.sampled_from(["ticket", "order"]) | WORDS)
        args = ["flows", "start", resource, *app, *database]
        if draw(st.booleans()):
            args += ["--where", draw(soup | st.sampled_from(["status = open", "due_at < now()"]))]
        if draw(st.booleans()):
            args += ["--flow", draw(WORDS)]
        if draw(st.booleans()):
            args += ["--tenant", draw(WORDS)]
        return args
    if command == "worker":
        # Always --once: without it a worker given good arguments serves until stopped.
        args = ["worker", *app, *database, "--once"]
        if draw(st.booleans()):
            args += ["--batch", draw(st.sampled_from(["1", "0", "-3", "x"]))]
        if draw(st.booleans()):
            args += ["--poll", draw(st.sampled_from(["0", "-1", "nan", "soon"]))]
        return args
    if command == "demo":
        # Only refusals: the demo itself runs both sample apps, which takes a while.
        return [
            "demo",
            *draw(
                st.sampled_from(
                    [
                        ["--only", "x"],
                        ["--dir", places["held"]],
                        ["--dir", places["file"]],
                        ["--bogus"],
                    ]
                )
            ),
        ]
    return draw(st.lists(WORDS, max_size=3))


_warm: list[bool] = []


def _invoke(args: list[str]) -> tuple[int, str, float]:
    started = time.perf_counter()
    result = CliRunner().invoke(cli, args)
    elapsed = time.perf_counter() - started
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{args}: {result.exception!r}") from result.exception
    return result.exit_code, result.stdout + result.stderr, elapsed


@fuzz(0.5)
@given(data=st.data())
def test_every_command_line(
    places: dict[str, Any], data: st.DataObject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    if not _warm:  # the first load of an app imports its modules: not a command's time
        _invoke(["flows", "validate", "--app", APP, "--database", places["databases"][0]])
        _warm.append(True)
    args = data.draw(command_lines(places))
    code, output, elapsed = _invoke(args)
    assert code in (0, 1, 2), (args, code, output)
    assert "Traceback" not in output, (args, output)
    if code == 2:  # a refusal, or a group given no command (which shows its help)
        assert "Error: " in output or output.startswith("Usage: "), (args, output)
    if elapsed >= 1.0:
        # A busy machine can stall any one call; a hang stalls every one.
        elapsed = min(elapsed, _invoke(args)[2])
    assert elapsed < 1.0, (args, elapsed)
