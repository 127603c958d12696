"""Parsing: canonical text round trip, error messages, limits, type checks and robustness."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import query_strategies as qs
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from flowrunner import errors, query
from flowrunner.foundations import sqltypes
from flowrunner.query import ast, check

COLUMNS = {
    "status": "text",
    "title": "text",
    "amount": "number",
    "flag": "boolean",
    "due": "date",
    "at": "timestamp",
}


# --- round trip -----------------------------------------------------------------------


@given(qs.conditions)
def test_canonical_text_round_trips(node: ast.Node) -> None:
    condition = query.Condition(node)
    again = query.parse(str(condition))
    assert again == condition
    assert str(again) == str(condition)


@given(qs.conditions)
def test_canonical_text_round_trips_with_columns(node: ast.Node) -> None:
    condition = query.parse(str(node), qs.table())
    assert condition == query.Condition(node)
    assert query.parse(str(condition), qs.table()) == condition


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("status = open", "status = 'open'"),
        ("STATUS = Open AND amount >= 10.50", "STATUS = 'Open' and amount >= 10.50"),
        ("a = 1 and (b = 2 and c = 3)", "a = 1 and b = 2 and c = 3"),
        ("(a = 1 or b = 2) and c = 3", "(a = 1 or b = 2) and c = 3"),
        ("a = 1 or b = 2 and c = 3", "a = 1 or b = 2 and c = 3"),
        ("NOT a = 1 and b = 2", "not a = 1 and b = 2"),
        ("not (a = 1 and b = 2)", "not (a = 1 and b = 2)"),
        ('region in (EU, "US")', "region in ('EU', 'US')"),
        ("x NOT IN (1, -2.5)", "x not in (1, -2.5)"),
        ("x is NOT null", "x is not null"),
        ("t Contains 'it''s'", None),
        ('t starts   with "it\'s"', "t starts with 'it\\'s'"),
        ("d < now() + 2 days", "d < now() + 2 days"),
        ("d < today() - 1 day 4 hours", "d < today() - 1 day 4 hours"),
        ("d < now() + P1M", "d < now() + 1 month"),
        ("d < now() + 0 minutes", "d < now()"),
        ("d = 2024-01-05", "d = 2024-01-05"),
        ("d = 2024-01-05T10:00+02:00", "d = 2024-01-05T08:00:00Z"),
        ("flag = TRUE", "flag = true"),
        ("msg = 'line\\nbreak'", "msg = 'line\\nbreak'"),
    ],
)
def test_canonical_forms(text: str, canonical: str | None) -> None:
    if canonical is None:
        with pytest.raises(errors.QueryError):
            query.parse(text)
        return
    assert str(query.parse(text)) == canonical
    assert query.parse(canonical) == query.parse(text)


def test_parse_is_cached_by_text_and_columns() -> None:
    assert query.parse("status = open") is query.parse("status = open")
    assert query.parse("status = open", COLUMNS) is query.parse("status = open", dict(COLUMNS))
    assert query.parse("status = open", COLUMNS) is not query.parse("status = open")


def test_columns_and_event_fields() -> None:
    c = query.parse("a = 1 and (event.decision = no or not b is null) or c in (x)", event=True)
    assert c.columns == {"a", "b", "c"}
    assert c.event_fields == {"decision"}


# --- error messages -------------------------------------------------------------------

ERRORS = [
    ("status = ", 1, 9, "expected a value after '=', found end of text"),
    ("status =", 1, 9, "expected a value after '=', found end of text"),
    (
        "status",
        1,
        7,
        "expected an operator such as =, !=, <, >, in, is null, contains or "
        "starts with after 'status', found end of text",
    ),
    ("status = 'open", 1, 10, "this text has no closing quote — end it with '"),
    ('status = "open', 1, 10, 'this text has no closing quote — end it with "'),
    ("region in ()", 1, 12, "a list cannot be empty — write e.g. (a, b)"),
    (
        "region in (EU, US",
        1,
        18,
        "the list is not closed — expected ',' or ')' after 'US', found end of text",
    ),
    ("region in EU", 1, 11, "'in' needs a list in parentheses, e.g. (a, b), found 'EU'"),
    ("(a = 1", 1, 7, "a '(' is not closed — expected ')' after '1', found end of text"),
    ("a = 1)", 1, 6, "found ')' without a matching '(' — expected 'and' or 'or'"),
    ("a == 1", 1, 3, "'==' is not an operator — write '='"),
    ("a = = 1", 1, 5, "found '=' where a value was expected"),
    ("a <> 1", 1, 3, "'<>' is not an operator — write '!='"),
    ("a => 1", 1, 3, "'=>' is not an operator — write '>='"),
    ("a =< 1", 1, 3, "'=<' is not an operator — write '<='"),
    ("a !== 1", 1, 3, "'!==' is not an operator — write '!='"),
    ("a << 1", 1, 4, "found '<' where a value was expected"),
    ("a = 1 && b = 2", 1, 7, "'&&' is not a word of conditions — write 'and'"),
    ("a = 1 || b = 2", 1, 7, "'||' is not a word of conditions — write 'or'"),
    ("a = 1 | b = 2", 1, 7, "'|' is not a word of conditions — write 'or'"),
    ("a like 'x%'", 1, 3, "'like' is not an operator — use 'contains' or 'starts with'"),
    ("a LIKE x", 1, 3, "'like' is not an operator — use 'contains' or 'starts with'"),
    ("n between 1 and 5", 1, 3, "'between' is not an operator — write e.g. n >= 1 and n <= 5"),
    ("t does not contain x", 1, 3, "to say 'does not contain', write not t contains …"),
    ("t not contains x", 1, 7, "'not' goes before the column: write not t contains …"),
    (
        "a = 1 or\n  t Not starts with x",
        2,
        9,
        "'not' goes before the column: write not t starts with …",
    ),
    (
        "a is open",
        1,
        6,
        "found 'open' where 'null' was expected — 'is' only tests for null; "
        "compare a value with '='",
    ),
    (
        "a is not open",
        1,
        10,
        "found 'open' where 'null' was expected — 'is' only tests for null; "
        "compare a value with '!='",
    ),
    (
        "d < now - 2 days",
        1,
        9,
        "expected '(' after 'now', found '-' — write now(), e.g. now() - 2 days",
    ),
    (
        "d < Today + 1 week",
        1,
        11,
        "expected '(' after 'Today', found '+' — write today(), e.g. today() + 2 days",
    ),
    (
        "a = 'it''s'",
        1,
        9,
        "a text ends at its second ' — to put ' inside it, write \\', or enclose the text in \"",
    ),
    (
        'a = "x""y"',
        1,
        8,
        'a text ends at its second " — to put " inside it, write \\", or enclose the text in \'',
    ),
    ("a = 'x' 'y'", 1, 9, "found ''y'' where 'and', 'or' or ')' was expected"),
    (
        "amount > and",
        1,
        10,
        "found 'and' where a value was expected — to mean the text, write 'and' in quotes",
    ),
    ("a = 1 b = 2", 1, 7, "found 'b' where 'and', 'or' or ')' was expected"),
    ("a = 1 and", 1, 10, "expected a column name after 'and', found end of text"),
    ("not", 1, 4, "expected a column name after 'not', found end of text"),
    ("a is", 1, 5, "expected 'null' after 'is', found end of text"),
    ("a is nul", 1, 6, "found 'nul' where 'null' was expected"),
    ("a starts x", 1, 10, "found 'x' where 'with' was expected"),
    ("a = ;", 1, 5, "found ';' where a value was expected"),
    ("a = now", 1, 8, "expected '(' after 'now', found end of text"),
    ("d < now() +", 1, 12, "expected a duration after '+', found end of text"),
    (
        "d < now() + 2 dayz",
        1,
        15,
        "'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'",
    ),
    ("a = null", 1, 3, "null cannot be compared with '=' — write 'a is null'"),
    ("a != null", 1, 3, "null cannot be compared with '!=' — write 'a is not null'"),
    ("a in (x, null)", 1, 10, "a list cannot hold null — add 'or … is null' instead"),
    ("a in (x, now())", 1, 10, "a list holds plain values, not now()"),
    ("a in (x, 1)", 1, 10, "a list holds values of one kind: 'x' is text, 1 is not"),
    ("a < true", 1, 5, "'<' does not order true and false — use = or !="),
    ("a.b = 1", 1, 1, "'a.b' is not a column — a dotted name can only be event.<field>"),
    ("event.x = 1", 1, 1, "event fields can only be used in a wait's condition"),
    (
        "a = 12345678901234567",
        1,
        5,
        "'12345678901234567' has more than 15 significant digits, more than can be compared",
    ),
    ("d = 2024-02-30", 1, 5, "'2024-02-30' is not a date of the calendar"),
    ("a = 1 and\n  b = ", 2, 6, "expected a value after '=', found end of text"),
    (
        "a = 1 or\n  b ! 2",
        2,
        5,
        "found '!' where an operator such as =, !=, <, >, in, is "
        "null, contains or starts with was expected",
    ),
    ("", 1, 1, "a condition is empty"),
]


@pytest.mark.parametrize(("text", "line", "column", "message"), ERRORS)
def test_error_messages(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(errors.QueryError) as caught:
        query.parse(text)
    error = caught.value
    assert (error.line, error.column, error.message) == (line, column, message)
    assert str(error) == f"line {line}, column {column}: {message}"
    assert error.text == text


TYPE_ERRORS = [
    (
        "stauts = open",
        1,
        1,
        "unknown column 'stauts' — did you mean 'status'? The columns "
        "are: amount, at, due, flag, status, title",
    ),
    (
        "nope is null",
        1,
        1,
        "unknown column 'nope' — the columns are: amount, at, due, flag, status, title",
    ),
    ("amount = abc", 1, 10, "'amount' holds a number, and 'abc' is not a number"),
    ("amount > 'x'", 1, 10, "'amount' holds a number, and 'x' is not a number"),
    ("amount contains 1", 1, 1, "'contains' looks inside text, and 'amount' holds a number"),
    ("due starts with 2", 1, 1, "'starts with' looks inside text, and 'due' holds a date"),
    ("flag < true", 1, 1, "'<' does not order true and false — use = or !="),
    ("flag = maybe", 1, 8, "'flag' holds true or false, and 'maybe' is not true or false"),
    (
        "due < now()",
        1,
        7,
        "'due' is a date, and now() is a moment — compare it with today(), e.g. today() + 2 days",
    ),
    (
        "at = 'yesterday'",
        1,
        6,
        "'at' holds a date and time, and 'yesterday' is not a date and time",
    ),
    ("status = true", 1, 10, "'status' holds text, and true is not text"),
    ("status < today()", 1, 10, "'status' holds text, not a date"),
    ("amount in (1, x)", 1, 15, "'amount' holds a number, and 'x' is not a number"),
]


@pytest.mark.parametrize(("text", "line", "column", "message"), TYPE_ERRORS)
def test_type_errors_with_known_columns(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(errors.QueryError) as caught:
        query.parse(text, COLUMNS)
    assert (caught.value.line, caught.value.column, caught.value.message) == (
        line,
        column,
        message,
    )


def test_values_are_fitted_to_known_columns() -> None:
    c = query.parse("amount = '12.50' and status in (3, x) and at > 2024-01-05", COLUMNS)
    assert str(c) == "amount = 12.50 and status in ('3', 'x') and at > 2024-01-05T00:00:00Z"
    assert query.parse("due < today() + 2 days and at < today()", COLUMNS).columns == {"due", "at"}


def test_columns_from_a_table_and_sqlalchemy_types() -> None:
    table = sa.Table(
        "po",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("status", sa.Enum("open", "closed", name="st")),
        sa.Column("at", sqltypes.UTCDateTime()),
        sa.Column("blob", sa.LargeBinary),
    )
    assert query.column_types(table) == {
        "id": query.ColumnType.NUMBER,
        "status": query.ColumnType.TEXT,
        "at": query.ColumnType.TIMESTAMP,
    }
    with pytest.raises(errors.QueryError, match="unknown column 'blob'"):
        query.parse("blob is null", table)
    with pytest.raises(errors.BindingError):
        query.column_types({"blob": sa.LargeBinary()})
    with pytest.raises(errors.BindingError):
        query.column_types({"x": "money"})
    assert query.column_types({"n": sa.Float, "d": sa.Date()}) == {
        "n": query.ColumnType.NUMBER,
        "d": query.ColumnType.DATE,
    }


# --- limits and robustness ------------------------------------------------------------


def test_too_long_is_refused() -> None:
    text = "a = 1 and " * 400 + "a = 1"
    with pytest.raises(errors.QueryError, match="longer than 4000 characters"):
        query.parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "(" * 2000 + "a = 1" + ")" * 2000,
        "not " * 900 + "a = 1",
        "".join(f"(a = {i} or " for i in range(300)) + "a = 1" + ")" * 300,
    ],
)
def test_deep_nesting_is_refused_or_flattened(text: str) -> None:
    try:
        condition = query.parse(text[:4000])
    except errors.QueryError as exc:
        assert "nests too deeply" in exc.message or "longer" in exc.message or exc.line >= 1
    else:
        assert condition.node.depth <= ast.MAX_DEPTH


def test_deep_nesting_message() -> None:
    with pytest.raises(errors.QueryError, match=r"nests too deeply \(more than 32 levels\)"):
        query.parse("not " * 40 + "a = 1")
    nested = "".join(f"(a = {i} and " if i % 2 else f"(a = {i} or " for i in range(40))
    with pytest.raises(errors.QueryError, match="nests too deeply"):
        query.parse(nested + "a = 1" + ")" * 40)


def test_parentheses_alone_do_not_nest() -> None:
    assert str(query.parse("(" * 300 + "a = 1" + ")" * 300)) == "a = 1"


def test_long_flat_conditions_are_fine() -> None:
    text = " and ".join(f"a{i} = {i}" for i in range(250))
    condition = query.parse(text)
    assert condition.matches({f"a{i}": i for i in range(250)})


def test_huge_lists_are_refused() -> None:
    assert query.parse("a in (" + ", ".join(["1"] * 500) + ")").matches({"a": 1})
    with pytest.raises(errors.QueryError, match="a list holds at most 500 values"):
        query.parse("a in (" + ", ".join(["1"] * 501) + ")")


_WORDS = [" and ", " or ", " not ", " in ", " is ", "null", "now()", "today()", " days"]
_WORDS += [" contains ", " starts with ", "event.", "true"]
_alphabet = st.sampled_from([*"abz_ =!<>()',\".-+0123456789\n\t\\é日", *_WORDS])


@given(st.one_of(st.text(max_size=200), st.lists(_alphabet, max_size=40).map("".join)))
def test_arbitrary_text_parses_or_raises_query_error(text: str) -> None:
    try:
        condition = query.parse(text, event=True)
    except errors.QueryError as exc:
        assert exc.line >= 1 and exc.column >= 1
        assert str(exc).startswith(f"line {exc.line}, column {exc.column}: ")
    else:
        assert query.parse(str(condition), event=True) == condition


@given(
    st.one_of(st.text(max_size=60), st.lists(_alphabet, max_size=8).map("".join)),
    st.sampled_from([None, *query.ColumnType]),
)
def test_arbitrary_values_parse_or_raise_query_error(
    text: str, column_type: query.ColumnType | None
) -> None:
    try:
        value = query.parse_value(text, column_type)
    except errors.QueryError:
        return
    resolved = value.resolve(NOW)
    if column_type is not None and resolved is not None:
        assert query.coerce(resolved, column_type) == resolved


@st.composite
def _mutated(draw: st.DrawFn) -> str:
    text = str(draw(qs.conditions))
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        char = draw(st.one_of(st.characters(), _alphabet))
        if action == "insert":
            text = text[:position] + char + text[position:]
        elif action == "delete":
            text = text[:position] + text[position + 1 :]
        else:
            text = text[:position] + char + text[position + 1 :]
    return text


@given(_mutated())
def test_mutated_conditions_parse_or_raise_query_error(text: str) -> None:
    for columns in (None, COLUMNS):
        try:
            condition = query.parse(text, columns)
        except errors.QueryError:
            continue
        condition.matches({"status": "open", "amount": 3})


# --- values ---------------------------------------------------------------------------

NOW = datetime(2025, 1, 31, 22, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "column_type", "value"),
    [
        ("'open'", None, "open"),
        ("open", "text", "open"),
        ("42", "number", 42),
        ("-0.50", "number", Decimal("-0.50")),
        ("'12'", "number", 12),
        ("7", "text", "7"),
        ("true", "boolean", True),
        ("null", "date", None),
        ("2024-05-01", "date", date(2024, 5, 1)),
        ("'2024-05-01'", "timestamp", datetime(2024, 5, 1, tzinfo=UTC)),
        ("now()", None, NOW),
        ("now() - 2 hours", "timestamp", NOW - timedelta(hours=2)),
        ("today()", "date", date(2025, 1, 31)),
        ("today() + 1 month", "date", date(2025, 2, 28)),
        ("today() + 4 hours", "timestamp", datetime(2025, 1, 31, 4, tzinfo=UTC)),
        ("today()", "timestamp", datetime(2025, 1, 31, tzinfo=UTC)),
        ("today() + 1 day", None, date(2025, 2, 1)),
    ],
)
def test_parse_value(text: str, column_type: str | None, value: object) -> None:
    assert query.parse_value(text, column_type).resolve(NOW) == value


@pytest.mark.parametrize(
    ("text", "column_type", "message"),
    [
        ("abc", "number", "the field holds a number, and 'abc' is not a number"),
        ("now()", "date", "the field is a date, and now() is a moment"),
        ("a = 1", None, "found '=' where"),
        ("", None, "a value is empty"),
        ("today() + 2 dayz", "date", "'2 dayz' is not a duration"),
    ],
)
def test_parse_value_errors(text: str, column_type: str | None, message: str) -> None:
    with pytest.raises(errors.QueryError) as caught:
        query.parse_value(text, column_type)
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("value", "column_type", "expected"),
    [
        (0.1, "number", Decimal("0.1")),
        (True, "number", None),
        ("12.5", "number", Decimal("12.5")),
        (1, "boolean", True),
        ("false", "boolean", False),
        (datetime(2024, 1, 1, 12), "timestamp", datetime(2024, 1, 1, 12, tzinfo=UTC)),
        ("2024-01-01T12:00:00+01:00", "timestamp", datetime(2024, 1, 1, 11, tzinfo=UTC)),
        (date(2024, 1, 1), "timestamp", datetime(2024, 1, 1, tzinfo=UTC)),
        ("2024-01-01", "date", date(2024, 1, 1)),
        (5, "text", None),
        (None, "text", None),
    ],
)
def test_coerce(value: object, column_type: str, expected: object) -> None:
    assert query.coerce(value, query.ColumnType(column_type)) == expected


def test_check_is_idempotent() -> None:
    c = query.parse("amount = '12' and at < today()", COLUMNS)
    again = check.check(c.node, query.column_types(COLUMNS))
    assert again == c.node
