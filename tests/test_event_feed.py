"""The event feed: a program that reads the events itself pages through them with a
cursor, and misses none nor sees one twice while events are emitted.

A support desk's tickets belong to tenants; replies and closings are events. A reader
keeps the cursor each page gives and goes on from it. On PostgreSQL an event's id is
taken before its transaction commits, so a transaction that took a lower id can commit
after a higher one was read: the feed holds such an event back until it commits, never
skips it. Over HTTP, the same pages under the application's authentication. On SQLite
and PostgreSQL.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import migrated
import pytest
import sqlalchemy as sa
from fastapi import FastAPI, Header, HTTPException
from fastapi.testclient import TestClient

from flowrunner import (
    Event,
    EventPage,
    EventRejected,
    FlowBinding,
    FlowRunner,
    OperatorError,
    flow_runner,
    tables,
    web,
)
from flowrunner.store import dialects, engine_tables

binding = FlowBinding(
    resource="ticket",
    flows_table="ticket_flow",
    steps_table="ticket_flow_step",
    events={"ticket.replied": "ticket", "ticket.closed": Event(key="ticket", emitted=True)},
    tenant="tenant_id",
)
metadata = sa.MetaData()
ticket = sa.Table(
    "ticket",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("tenant_id", sa.String(20), nullable=False),
)
tables.for_binding(metadata, binding)

TICKETS = {n: ("acme" if n % 2 else "globex") for n in range(1, 9)}


@pytest.fixture
def runner(engine: sa.Engine) -> FlowRunner:
    metadata.create_all(engine)
    with engine.begin() as conn:
        for number, tenant in TICKETS.items():
            conn.execute(ticket.insert().values(id=number, tenant_id=tenant))
    return flow_runner(binding, engine)


def emit(conn: sa.Connection, runner: FlowRunner, name: str, number: int, **more: Any) -> int:
    payload = {"ticket": number, "tenant_id": TICKETS[number], **more}
    return runner.emit(conn, name, payload)


def settled(runner: FlowRunner, count: int, cursor: str | None = None, **options: Any) -> None:
    """Wait until ``count`` events after ``cursor`` are handed out. On a PostgreSQL server
    other programs share, their transactions in flight hold the feed back a moment."""
    stop = threading.Event()
    for _ in range(3000):
        if len(runner.events(cursor, limit=1000, **options).events) >= count:
            return
        stop.wait(0.01)
    raise AssertionError(f"{count} events did not settle within 30 seconds")


def read_all(runner: FlowRunner, tenant: str, **options: Any) -> Iterator[EventPage]:
    cursor = None
    while True:
        page = runner.events(cursor, tenant=tenant, **options)
        yield page
        if not page.events:
            return
        cursor = page.cursor


def test_a_reader_pages_through_its_tenants_events_in_order(runner: FlowRunner) -> None:
    with runner.engine.begin() as conn:
        ids = [emit(conn, runner, "ticket.replied", n, text=f"reply {n}") for n in (1, 2, 3)]
    with runner.engine.begin() as conn:
        ids += [emit(conn, runner, "ticket.closed", n) for n in (5, 1)]
    settled(runner, 4, tenant="acme")

    pages = list(read_all(runner, "acme", limit=2))
    assert [[e.id for e in page.events] for page in pages] == [
        [ids[0], ids[2]],
        [ids[3], ids[4]],
        [],
    ]
    first = pages[0].events[0]
    assert (first.name, first.record_id, first.tenant, first.payload["text"]) == (
        "ticket.replied",
        "1",
        "acme",
        "reply 1",
    )
    # An empty page hands back the cursor it was given: ask again later from there.
    assert pages[-1].cursor == pages[-2].cursor
    with runner.engine.begin() as conn:
        late = emit(conn, runner, "ticket.replied", 7)
    settled(runner, 1, pages[-1].cursor, tenant="acme")
    assert [e.id for e in runner.events(pages[-1].cursor, tenant="acme").events] == [late]

    closed = runner.events(None, tenant="acme", names=["ticket.closed"])
    assert [e.id for e in closed.events] == [ids[3], ids[4]]
    assert [e.id for e in runner.events(None, tenant="globex").events] == [ids[1]]


def test_what_the_feed_cannot_read_is_refused_with_a_sentence(runner: FlowRunner) -> None:
    with pytest.raises(EventRejected) as bad_cursor:
        runner.events("yesterday", tenant="acme")
    assert bad_cursor.value.status_code == 422 and bad_cursor.value.code == "cursor_invalid"
    assert str(bad_cursor.value) == (
        "'yesterday' is not a cursor of the event feed: pass the cursor a page gave, "
        "or none to start at the first event"
    )
    with pytest.raises(EventRejected, match="holds 1 to 1000 events, not 0"):
        runner.events(None, limit=0, tenant="acme")
    with pytest.raises(EventRejected) as unknown:
        runner.events(None, names=["ticket.repled"], tenant="acme")
    assert unknown.value.status_code == 404
    assert "there is no event 'ticket.repled'" in str(unknown.value)
    assert "did you mean 'ticket.replied'?" in str(unknown.value)
    with pytest.raises(OperatorError, match="ticket records belong to tenants: name the tenant"):
        runner.events(None)


@pytest.fixture
def pg_runner(pg_engine: sa.Engine) -> FlowRunner:
    migrated.upgrade(pg_engine)
    metadata.create_all(pg_engine)
    with pg_engine.begin() as conn:
        for number, tenant in TICKETS.items():
            conn.execute(ticket.insert().values(id=number, tenant_id=tenant))
    return flow_runner(binding, pg_engine)


def test_an_event_that_commits_after_a_later_one_is_held_back_not_skipped(
    pg_runner: FlowRunner,
) -> None:
    runner = pg_runner
    with runner.engine.connect() as first, runner.engine.connect() as second:
        first.begin()
        early = emit(first, runner, "ticket.replied", 1)  # takes the lower id…
        with second.begin():
            late = emit(second, runner, "ticket.replied", 3)  # …this commits first
        assert late > early
        # A reader going by ids would take `late` now and never see `early`.
        page = runner.events(None, tenant="acme")
        assert page.events == ()
        first.commit()
    settled(runner, 2, page.cursor, tenant="acme")
    assert [e.id for e in runner.events(page.cursor, tenant="acme").events] == [early, late]


def test_an_older_transaction_with_a_higher_id_is_handed_out_before_it(
    pg_runner: FlowRunner,
) -> None:
    runner = pg_runner
    with runner.engine.connect() as older, runner.engine.connect() as younger:
        older.begin()
        older.execute(ticket.update().where(ticket.c.id == 8).values(tenant_id="globex"))
        younger.begin()
        low = emit(younger, runner, "ticket.replied", 1)
        high = emit(older, runner, "ticket.replied", 3)
        older.commit()
        assert high > low
        settled(runner, 1, tenant="acme")
        page = runner.events(None, tenant="acme")  # the older transaction's event only
        assert [e.id for e in page.events] == [high]
        younger.commit()
    settled(runner, 1, page.cursor, tenant="acme")
    assert [e.id for e in runner.events(page.cursor, tenant="acme").events] == [low]


def test_two_readers_see_every_event_once_while_events_are_emitted(runner: FlowRunner) -> None:
    engine = runner.engine
    postgres = engine.dialect.name == "postgresql"
    rounds, emitters = 25, 3
    committed = threading.Semaphore(0)  # released by each emitter's commit
    problems: list[BaseException] = []

    held = threading.Event()  # the held event has its id: every other one's is higher
    if not postgres:
        held.set()

    def emitter(number: int) -> None:
        try:
            assert held.wait(timeout=60), "the holder did not emit"
            for round_ in range(rounds):
                with dialects.begin(engine) as conn:  # SQLite: queue for the write lock
                    emit(conn, runner, "ticket.replied", number, round=round_)
                    if round_ % 4 == 0:
                        emit(conn, runner, "ticket.closed", number, round=round_)
                committed.release()
        except BaseException as exc:  # pragma: no cover - reported below
            problems.append(exc)

    def holder() -> None:
        # On PostgreSQL: an event whose transaction took its id early and commits only
        # after ten later transactions have committed.
        try:
            with engine.begin() as conn:
                emit(conn, runner, "ticket.replied", 7, held=True)
                held.set()
                for _ in range(10):
                    assert committed.acquire(timeout=60), "the other emitters stopped"
        except BaseException as exc:  # pragma: no cover - reported below
            problems.append(exc)

    seen: dict[str, list[int]] = {"one": [], "two": []}

    expected = emitters * (rounds + len(range(0, rounds, 4))) + (1 if postgres else 0)
    asleep = threading.Event()  # never set: what the readers wait on between empty pages

    def reader(name: str) -> None:
        cursor = None
        try:
            for _ in range(20_000):  # about a minute of empty pages at most
                page = runner.events(cursor, limit=7, tenant="acme")
                seen[name].extend(e.id for e in page.events)
                cursor = page.cursor
                if len(seen[name]) >= expected:
                    seen[name].extend(e.id for e in runner.events(cursor, tenant="acme").events)
                    return
                if not page.events:
                    asleep.wait(0.003)  # nothing settled yet: ask again shortly
        except BaseException as exc:  # pragma: no cover - reported below
            problems.append(exc)

    writers = [threading.Thread(target=emitter, args=(n,)) for n in (1, 3, 5)[:emitters]]
    if postgres:
        writers.insert(0, threading.Thread(target=holder))
    readers = [threading.Thread(target=reader, args=(name,)) for name in seen]
    for thread in (*readers, *writers):
        thread.start()
    for thread in writers:
        thread.join(timeout=120)
    for thread in readers:
        thread.join(timeout=120)
    assert not problems, problems
    assert not any(t.is_alive() for t in (*readers, *writers))

    events = engine_tables.events
    with engine.connect() as conn:
        stored = conn.execute(
            sa.select(events.c.id).where(events.c.tenant == "acme").order_by(events.c.id)
        )
        everything = [row.id for row in stored]
    assert len(everything) == expected
    for name, ids in seen.items():
        assert len(ids) == len(set(ids)), f"reader {name} saw an event twice"
        assert sorted(ids) == everything, f"reader {name} missed an event"
    assert seen["one"] == seen["two"]  # one order for every reader
    if postgres:  # ten events with higher ids committed before the held one: not skipped
        with engine.connect() as conn:
            kept = conn.execute(sa.select(events.c.id, events.c.payload)).all()
        (held_id,) = [row.id for row in kept if row.payload.get("held")]
        assert held_id == everything[0] and held_id in seen["one"]


def reader_of(x_reader: str = Header(default="")) -> str:
    """The app's own rule: here a header; in a real app, the logged-in program's tenant."""
    if not x_reader:
        raise HTTPException(401, "log in first")
    return x_reader


def test_the_feed_over_http_is_the_applications_to_authorize(runner: FlowRunner) -> None:
    app = FastAPI()
    web.install(app)
    app.include_router(web.events_router(runner, tenant=reader_of))
    client = TestClient(app)
    with runner.engine.begin() as conn:
        first = emit(conn, runner, "ticket.replied", 1, text="Thanks")
        emit(conn, runner, "ticket.replied", 2)
        last = emit(conn, runner, "ticket.closed", 3)
    settled(runner, 2, tenant="acme")

    assert client.get("/events").status_code == 401
    page = client.get("/events", params={"limit": 1}, headers={"x-reader": "acme"}).json()
    assert [(e["id"], e["name"], e["record_id"], e["payload"]["text"]) for e in page["events"]] == [
        (first, "ticket.replied", "1", "Thanks")
    ]
    assert page["events"][0]["tenant"] == "acme" and page["events"][0]["at"]
    rest = client.get(
        "/events",
        params={"after": page["cursor"], "name": ["ticket.closed", "ticket.replied"]},
        headers={"x-reader": "acme"},
    ).json()
    assert [e["id"] for e in rest["events"]] == [last]
    bad = client.get("/events", params={"after": "x"}, headers={"x-reader": "acme"})
    assert bad.status_code == 422 and bad.json()["code"] == "cursor_invalid"
    with pytest.raises(Exception, match="give events_router"):
        web.events_router(runner)
