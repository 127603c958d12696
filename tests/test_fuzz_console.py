"""Fuzzing the console: every route, every query field and form field it reads — ids,
dates, durations, filters, bulk selections, files, the sign-in — with values good and
bad, on a desk whose runs are in every state (``room.desk``). Whatever comes in, the
console answers with a page or a refusal and never with a 5xx, and no exception escapes
it. On SQLite and PostgreSQL.

Examples follow the hypothesis profile (moderate by default and in CI); for a long run
set ``FLOWRUNNER_FUZZ_EXAMPLES`` or run ``python bench/fuzz.py console``.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
import room
import sqlalchemy as sa
from fuzzing import Tally
from hypothesis import given
from hypothesis import strategies as st
from starlette.routing import Route
from starlette.testclient import TestClient
from test_fuzz_entry import fuzz

from flowrunner import testing
from flowrunner.engine import operations_room
from flowrunner.foundations import flow_columns
from flowrunner.web.console import csrf, flows_pages, ops_pages, rows_form

TOKEN = "a-long-and-secret-fuzz-token"

TALLY = Tally("by method and status")


# What an id, a date, a duration may be typed as: the edges of each rule and past them.
IDS = st.sampled_from(
    [
        "1",
        "2",
        "3",
        "5",
        "0",
        "-1",
        "007",
        "+3",
        " 4 ",
        "1e3",
        "3.0",
        "²",
        "٣",
        "1_000",
        str(2**31),
        str(2**63 - 1),
        str(2**63),
        "9" * 20,
        "9" * 400,
        "abc",
        "",
    ]
)
MOMENTS = st.sampled_from(
    [
        "2026-03-01",
        "2026-03-01T09:00",
        "2026-03-01T09:00+01:00",
        "2026-02-30",
        "0001-01-01T00:00+14:00",
        "9999-12-31T23:59-14:00",
        "yesterday",
    ]
)
DURATIONS = st.sampled_from(
    [
        "2d",
        "2 days",
        "30 minutes",
        "P1W",
        "PT",
        "-1 day",
        "1.5 hours",
        "0 seconds",
        "100 years",
        "99999999 years",
        "2 dayz",
        "9" * 400 + " days",
    ]
)
WORDS = st.sampled_from(
    [
        *operations_room.STATUSES,
        *ops_pages.NOTICE_STATES,
        "cancel",
        "retry",
        "redrive",
        "restart",
        "start",
        "created",
        "updated",
        "manual",
        "notify",
        "wait",
        "waitFor",
        "assign",
        "condition",
        "duration",
        "remind",
        "flow",
        "until",
        "yes",
        "on",
        "up",
        "down",
        "Listen",
        "LISTEN",
        "Quick",
        "Hand over",
        "status = open",
        "status = ",
        "requester",
        "ticket.replied",
        "bob answers after 2 days",
        # What PostgreSQL refuses in any text: a NUL, alone or in a name.
        "\x00",
        "Listen\x00",
        "status = '\x00'",
    ]
)
# Any text a browser can send (no lone surrogates: they are not UTF-8), NUL included.
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=24)
VALUES = st.one_of(IDS, MOMENTS, DURATIONS, WORDS, TEXT, st.integers().map(str))

QUERY_FIELDS = [
    *ops_pages.FILTERS,
    "before",
    "state",
    "id",
    "column",
    "kind",
    "text",
    "next",
    "token",
]
FORM_FIELDS = [
    "action",
    "run",
    "confirmed",
    "reason",
    "back",
    "flow",
    "by",
    "replace",
    "yaml",
    "token",
    "next",
    *rows_form.FLOW_FIELDS,
    *(c for c in flow_columns.STEP_COLUMNS if c not in ("id", "flow_id")),
    *flows_pages.TRY_FIELDS,
]
FILES = st.sampled_from(
    [
        "",
        "flows: [",
        "42",
        "[" * 300 + "]" * 300,
        "- {name: Fuzzed, start: manual, steps: [{position: 1, kind: wait, duration: 1 day}]}",
        "- {name: X, start: created, steps: [{position: ٣, kind: wait}]}",
        "- {id: 9223372036854775808, name: Y, start: manual}",
        'flow_name,position\n"x',
    ]
)


@pytest.fixture
def consoles(any_engine: sa.Engine) -> Iterator[dict[str, Any]]:
    """The desk's console as its token's reader sees it (editor and operator), signed in
    by a bearer, and the same console to a stranger; the routes to ask."""
    desk: testing.FlowDriver = room.desk(any_engine)
    app = desk.runner.console(token=TOKEN)
    reader = TestClient(app, follow_redirects=False)
    reader.headers["authorization"] = f"Bearer {TOKEN}"
    stranger = TestClient(app, follow_redirects=False)
    first = reader.get("/")
    found = re.search(r'name="csrf-token" content="([^"]+)"', first.text)
    assert found is not None
    routes = [
        (method, route.path)
        for route in app.routes
        if isinstance(route, Route)
        for method in sorted(route.methods or ())
        if method != "HEAD"
    ]
    yield {"reader": reader, "stranger": stranger, "csrf": found.group(1), "routes": routes}


def one_in(n: int) -> st.SearchStrategy[bool]:
    """True about once in ``n`` draws (a middle value: hypothesis favours the ends)."""
    return st.integers(1, n).map(lambda drawn: drawn == n // 2)


@st.composite
def requests(draw: st.DrawFn, routes: list[tuple[str, str]]) -> dict[str, Any]:
    """One request: a route with its path's ids filled in, query fields, a form."""
    method, template = draw(st.sampled_from(routes))
    path = re.sub(
        r"\{[a-z_]+\}",
        lambda _m: urllib.parse.quote(draw(IDS | WORDS | TEXT), safe=""),
        template,
    )
    query = draw(st.dictionaries(st.sampled_from(QUERY_FIELDS), VALUES, max_size=4))
    asked: dict[str, Any] = {"method": method, "path": path, "query": query}
    if method == "POST":
        form: dict[str, Any] = draw(
            st.dictionaries(st.sampled_from(FORM_FIELDS), VALUES, max_size=6)
        )
        if draw(st.booleans()):  # a bulk selection: runs ticked, good and bad
            form["run"] = draw(st.lists(IDS, max_size=5))
        if draw(one_in(10)) is False:  # mostly the page's own CSRF token
            form[csrf.FIELD] = "<csrf>"
        asked["form"] = form
        if template.endswith("/import") and draw(st.booleans()):
            asked["file"] = draw(FILES | TEXT)
    asked["stranger"] = draw(one_in(10))
    return asked


def ask(consoles: dict[str, Any], asked: dict[str, Any]) -> Any:
    client: TestClient = consoles["stranger" if asked["stranger"] else "reader"]
    params = asked["query"] or None
    if asked["method"] == "GET":
        return client.get(asked["path"], params=params)
    form = {
        name: (consoles["csrf"] if value == "<csrf>" else value)
        for name, value in asked["form"].items()
    }
    files = None
    if "file" in asked:
        files = {"file": ("flows.yaml", asked["file"].encode(), "application/x-yaml")}
    return client.post(asked["path"], params=params, data=form, files=files)


@fuzz(0.5)
@given(data=st.data())
def test_every_route_and_field_is_answered_without_a_server_error(
    consoles: dict[str, Any], data: st.DataObject
) -> None:
    asked = data.draw(requests(consoles["routes"]))
    answer = ask(consoles, asked)  # an exception escaping the console fails here
    TALLY[f"{asked['method']} {answer.status_code}"] += 1
    assert answer.status_code < 500, (asked, answer.status_code, answer.text[:2000])
    if asked["stranger"] and not answer.is_redirect and answer.status_code not in (404, 405):
        # Not signed in: the sign-in page (or its refusal, of a form past its size too),
        # never a page of runs.
        assert answer.status_code in (200, 400, 401, 403), (asked, answer.status_code)
    assert TOKEN not in answer.text


def test_the_routes_fuzzed_are_every_route_of_the_console(consoles: dict[str, Any]) -> None:
    paths = {path for _method, path in consoles["routes"]}
    assert {"/ops", "/ops/act", "/run/{run_id}/{action}", "/flow/{flow_id}/try"} <= paths
    assert {"/signin", "/signout", "/import", "/check", "/record/{record_id}/start"} <= paths
    assert len(consoles["routes"]) >= 22


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/ops", {"flow": "Listen\x00"}),
        ("/ops", {"flow": str(2**31)}),  # past the flows table's 32-bit ids: a name
        ("/ops", {"record": "\x00"}),
        ("/ops", {"status": "\x00"}),
        ("/ops/notices", {"state": "\x00"}),
        ("/record/%00", {}),
        ("/record", {"id": "\x00"}),
        ("/check", {"column": "condition", "text": "status = '\x00'"}),
    ],
)
def test_what_a_database_cannot_hold_is_refused_before_it_is_asked(
    consoles: dict[str, Any], path: str, query: dict[str, str]
) -> None:
    answer = consoles["reader"].get(path, params=query)
    assert answer.status_code < 500
