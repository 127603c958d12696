"""No loop without a pause: a goto that can come round again without passing a step that
waits is refused — when a flow is judged whole, when one step is saved, moved or deleted
(Core and ORM, on SQLite and PostgreSQL), when a flow file is imported and when a run's
snapshot is loaded. The run-time loop bound stays as the last guard, and a run that hits
it has told a bounded number of notices."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from running import T0, mount, order
from sqlalchemy import orm
from test_saving import Flow, Step

from fixtures.purchase_orders import app as po
from flowrunner import errors, query, tables
from flowrunner.flows import edits, files, loops, orm_hook, validation
from flowrunner.store import operations as ops

BINDING = po.binding
COLUMNS = query.column_types(po.purchase_order)

# Steps by what they are; each takes its position.
WAIT = {"kind": "wait", "duration": "1 day", "title": "Pause"}
UNTIL = {"kind": "until", "field": "needed_by", "title": "Needed by"}
WAIT_FOR = {"kind": "waitFor", "event": "po.decided", "title": "Decision"}
APPROVAL = {"kind": "approval", "approver": "ann", "title": "Approval"}
SEND = {"kind": "send", "title": "Send"}
SET = {"kind": "set", "field": "priority", "value": "high", "title": "Raise"}
TELL = {"kind": "notify", "audience": "requester", "message": "Still open", "title": "Tell"}


def at(position: int, step: dict[str, Any]) -> dict[str, Any]:
    return {"position": position, **step}


def branch(position: int, goto: int | None, title: str = "Closed yet?") -> dict[str, Any]:
    row = {"position": position, "kind": "branch", "condition": "status = closed", "title": title}
    return row if goto is None else {**row, "goto": goto}


def judged(steps: list[dict[str, Any]]) -> list[str]:
    """The loop problems of a flow of ``steps``, as ``label: field: message`` lines."""
    flow = {"name": "Loops", "start": "created"}
    found = validation.errors_for_flow(BINDING, flow, steps, COLUMNS)
    assert all(e.code == "loop_without_wait" for _, errs in found for e in errs), found
    return [f"{label}: {e.field}: {e.message}" for label, errs in found for e in errs]


# -- the rule, on a whole flow ---------------------------------------------------------


@pytest.mark.parametrize("pause", [WAIT, UNTIL, WAIT_FOR, APPROVAL], ids=lambda s: s["kind"])
def test_a_loop_that_passes_a_step_that_waits_is_sound(pause: dict[str, Any]) -> None:
    assert judged([at(1, TELL), at(2, pause), branch(3, 1)]) == []


@pytest.mark.parametrize("busy", [SET, TELL, SEND], ids=lambda s: s["kind"])
def test_a_loop_with_nothing_that_waits_is_refused_naming_its_positions(
    busy: dict[str, Any],
) -> None:
    assert judged([at(1, busy), branch(2, 1)]) == [
        "flow 'Loops', step 'Closed yet?' (branch, position 2): goto: positions 1–2 loop "
        "with nothing that waits: add a wait inside the loop"
    ]


def test_a_branch_going_to_its_own_position_is_refused() -> None:
    assert judged([at(1, WAIT), branch(2, 2)]) == [
        "flow 'Loops', step 'Closed yet?' (branch, position 2): goto: position 2 goes to "
        "itself with nothing that waits: name another position in goto, or leave it empty"
    ]


def test_a_branch_that_ends_the_run_or_jumps_forward_is_no_loop() -> None:
    assert judged([at(1, SET), branch(2, None), at(3, TELL)]) == []
    assert judged([branch(1, 3), at(2, SET), at(3, TELL)]) == []


def test_a_waiting_lane_makes_its_position_pause_whatever_runs_beside_it() -> None:
    # The run leaves a position when every step there is done: the join waits.
    assert judged([at(1, TELL), at(1, WAIT_FOR), at(1, SEND), branch(2, 1)]) == []
    # Lanes that do not wait do not pause it, however many.
    assert judged([at(1, TELL), at(1, SEND), at(1, SET), branch(2, 1)]) == [
        "flow 'Loops', step 'Closed yet?' (branch, position 2): goto: positions 1–2 loop "
        "with nothing that waits: add a wait inside the loop"
    ]


def test_a_way_round_the_wait_through_another_branch_is_refused() -> None:
    # Position 1 skips the wait at 2 when its condition does not hold: 1 → 3 → 1.
    steps = [branch(1, 3, "Urgent?"), at(2, WAIT), branch(3, 1)]
    assert judged(steps) == [
        "flow 'Loops', step 'Closed yet?' (branch, position 3): goto: positions 1 and 3 "
        "loop with nothing that waits: add a wait inside the loop"
    ]
    # With the wait on every way round, it is sound.
    assert judged([branch(1, 3, "Urgent?"), at(2, SET), at(3, WAIT), branch(4, 1)]) == []


def test_nested_loops_each_need_a_pause() -> None:
    # Inner 2–3 waits at 2, outer 1–4 passes it too: sound.
    assert judged([at(1, TELL), at(2, WAIT), branch(3, 2, "Again?"), branch(4, 1)]) == []
    # The outer loop waits at 4, but the inner 2–3 can go round without it.
    steps = [at(1, TELL), at(2, SET), branch(3, 2, "Again?"), at(4, WAIT), branch(5, 1)]
    assert judged(steps) == [
        "flow 'Loops', step 'Again?' (branch, position 3): goto: positions 2–3 loop with "
        "nothing that waits: add a wait inside the loop"
    ]
    # Neither waits: one loop of 1–4, named on both branches that close it.
    steps = [at(1, TELL), at(2, SET), branch(3, 2, "Again?"), branch(4, 1)]
    assert [line.split(": ", 2)[2] for line in judged(steps)] == [
        "positions 1–4 loop with nothing that waits: add a wait inside the loop"
    ] * 2


def test_positions_are_named_as_the_flow_numbers_them() -> None:
    steps = [at(10, TELL), branch(20, 40, "Urgent?"), at(30, WAIT), at(40, SET), branch(50, 10)]
    assert [line.split(": ", 2)[2] for line in judged(steps)] == [
        "positions 10, 20, 40 and 50 loop with nothing that waits: add a wait inside the loop"
    ]


def test_a_kind_the_binding_does_not_know_is_not_blamed_twice() -> None:
    flow = {"name": "Loops", "start": "created"}
    steps = [at(1, {"kind": "fax"}), branch(2, 1)]
    found = validation.errors_for_flow(BINDING, flow, steps, COLUMNS)
    assert [e.code for _, errs in found for e in errs] == ["kind_unknown"]


def test_the_graph_alone() -> None:
    point, pause = loops.Point, loops.Point(waits=True)
    assert loops.find({}) == []
    assert loops.find({1: point(goto=1)}) == [loops.Loop((1,))]
    assert loops.find({1: pause, 2: point(goto=1)}) == []
    # Two separate loops, each named.
    found = loops.find({1: point(), 2: point(goto=1), 3: pause, 4: point(), 5: point(goto=4)})
    assert [loop.positions for loop in found] == [(1, 2), (4, 5)]


# -- saving one row at a time (Core), on SQLite and PostgreSQL -------------------------


@pytest.fixture
def engine(po_engine: sa.Engine) -> sa.Engine:
    return po_engine


def stored(engine: sa.Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        query_ = sa.select(po.po_flow_step).order_by(po.po_flow_step.c.id)
        return [dict(r) for r in conn.execute(query_).mappings()]


def follow_up(engine: sa.Engine, po_tables: tables.AppTables) -> tuple[int, dict[str, int]]:
    """Tell the requester (1), wait a day (2), still open? go back to 1 (3)."""
    ids: dict[str, int] = {}
    with engine.begin() as conn:
        flow_id = edits.save_flow(conn, BINDING, po_tables, {"name": "Chase", "start": "created"})
        for name, row in (("tell", at(1, TELL)), ("wait", at(2, WAIT)), ("branch", branch(3, 1))):
            ids[name] = edits.save_step(conn, BINDING, po_tables, {"flow_id": flow_id, **row})
    return flow_id, ids


def refused(engine: sa.Engine, write: Any) -> list[tuple[str, str, str]]:
    before = stored(engine)
    with pytest.raises(errors.RowInvalid) as caught, engine.begin() as conn:
        write(conn)
    assert stored(engine) == before
    return [(e.field, e.code, e.message) for e in caught.value.errors]


LOOP_1_2 = "positions 1–2 loop with nothing that waits: add a wait inside the loop"


def test_saving_the_goto_that_closes_a_loop_without_a_wait_is_refused(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    with engine.begin() as conn:
        flow_id = edits.save_flow(conn, BINDING, po_tables, {"name": "Nag", "start": "created"})
        edits.save_step(conn, BINDING, po_tables, {"flow_id": flow_id, **at(1, TELL)})
    row = {"flow_id": flow_id, **branch(2, 1)}
    assert refused(engine, lambda c: edits.save_step(c, BINDING, po_tables, row)) == [
        ("goto", "loop_without_wait", LOOP_1_2)
    ]
    self_loop = {"flow_id": flow_id, **branch(2, 2)}
    ((field, code, message),) = refused(
        engine, lambda c: edits.save_step(c, BINDING, po_tables, self_loop)
    )
    assert (field, code) == ("goto", "loop_without_wait")
    assert message.startswith("position 2 goes to itself with nothing that waits")


def test_turning_the_wait_into_something_that_does_not_wait_is_refused(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    _, ids = follow_up(engine, po_tables)
    change = {"kind": "send", "duration": None, "title": "Send"}
    assert refused(
        engine, lambda c: edits.update_step(c, BINDING, po_tables, ids["wait"], change)
    ) == [
        (
            "kind",
            "loop_without_wait",
            "positions 1–3 loop with nothing that waits: add a wait inside the loop",
        )
    ]
    # An approval waits for its answers: the loop still pauses.
    with engine.begin() as conn:
        approval = {"kind": "approval", "approver": "ann", "duration": None}
        edits.update_step(conn, BINDING, po_tables, ids["wait"], approval)


def test_deleting_or_moving_away_the_wait_of_a_loop_is_refused(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    flow_id, ids = follow_up(engine, po_tables)
    without = (
        "without this step at position 2, positions 1–3 loop with nothing that waits: "
        "keep a wait inside the loop"
    )
    wait = ids["wait"]
    assert refused(engine, lambda c: edits.delete_step(c, BINDING, po_tables, wait)) == [
        ("position", "loop_without_wait", without)
    ]
    moved = {"position": 4}
    assert refused(engine, lambda c: edits.update_step(c, BINDING, po_tables, wait, moved)) == [
        ("position", "loop_without_wait", without)
    ]
    # A second waiting step at position 2 keeps the loop pausing; then the first may go.
    with engine.begin() as conn:
        edits.save_step(conn, BINDING, po_tables, {"flow_id": flow_id, **at(2, WAIT_FOR)})
        edits.delete_step(conn, BINDING, po_tables, wait)
    assert sorted(s["kind"] for s in stored(engine)) == ["branch", "notify", "waitFor"]


def test_a_flow_that_loops_already_is_refused_only_an_edit_of_its_loop(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    # Rows written around validation (before this rule, or by hand).
    flow_id, ids = follow_up(engine, po_tables)
    with engine.begin() as conn:
        steps = po.po_flow_step
        conn.execute(sa.update(steps).where(steps.c.id == ids["wait"]).values(kind="send"))
        conn.execute(sa.update(steps).where(steps.c.id == ids["wait"]).values(duration=None))
        # An edit outside the loop is not held up by it ...
        edits.save_step(conn, BINDING, po_tables, {"flow_id": flow_id, **at(4, SET)})
    # ... one inside it is, and says what to do.
    change = {"message": "Still open, still"}
    assert refused(
        engine, lambda c: edits.update_step(c, BINDING, po_tables, ids["tell"], change)
    ) == [
        (
            "kind",
            "loop_without_wait",
            "positions 1–3 loop with nothing that waits: add a wait inside the loop",
        )
    ]
    # Adding a wait inside the loop mends it.
    with engine.begin() as conn:
        edits.save_step(conn, BINDING, po_tables, {"flow_id": flow_id, **at(2, WAIT)})
        edits.update_step(conn, BINDING, po_tables, ids["tell"], change)


# -- the ORM flush, on SQLite and PostgreSQL -------------------------------------------


@pytest.fixture
def session(engine: sa.Engine) -> Any:
    maker = orm.sessionmaker(engine)
    orm_hook.validate_on_flush(maker, BINDING)
    with maker() as session:
        yield session


def test_the_orm_refuses_a_flow_added_with_a_loop_that_never_waits(
    engine: sa.Engine, session: orm.Session
) -> None:
    flow = Flow(name="Nag", start="created")
    flow.steps = [Step(**at(1, TELL)), Step(**branch(2, 1))]
    session.add(flow)
    with pytest.raises(errors.RowInvalid) as caught:
        session.flush()
    assert [(e.field, e.code, e.message) for e in caught.value.errors] == [
        ("goto", "loop_without_wait", LOOP_1_2)
    ]
    assert caught.value.row == "flow 'Nag', step 'Closed yet?' (branch, position 2)"
    session.rollback()
    assert stored(engine) == []
    flow = Flow(name="Nag", start="created")
    flow.steps = [Step(**at(1, TELL)), Step(**at(1, WAIT)), Step(**branch(2, 1))]
    session.add(flow)
    session.commit()
    assert len(stored(engine)) == 3


def test_the_orm_refuses_deleting_the_wait_of_a_loop(
    engine: sa.Engine, po_tables: tables.AppTables, session: orm.Session
) -> None:
    _, ids = follow_up(engine, po_tables)
    session.delete(session.get(Step, ids["wait"]))
    with pytest.raises(errors.RowInvalid) as caught:
        session.flush()
    assert [e.code for e in caught.value.errors] == ["loop_without_wait"]
    session.rollback()
    wait = session.get(Step, ids["wait"])
    assert wait is not None
    wait.kind, wait.duration = "set", None
    wait.field, wait.value = "priority", "high"
    with pytest.raises(errors.RowInvalid, match="positions 1–3 loop with nothing that waits"):
        session.flush()
    session.rollback()
    assert [s["kind"] for s in stored(engine)] == ["notify", "wait", "branch"]


# -- flow files, and a run's snapshot --------------------------------------------------

NAG = """
- name: Nag
  start: created
  steps:
    - {position: 1, kind: notify, title: Tell, audience: requester, message: Still open}
    - {position: 2, kind: branch, title: "Closed yet?", condition: status = closed, goto: 1}
"""


def test_an_import_with_a_loop_that_never_waits_is_refused_whole(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    with pytest.raises(validation.RowsInvalid) as caught, engine.begin() as conn:
        files.import_flows(conn, BINDING, po_tables, files.loads_yaml(NAG))
    assert str(caught.value) == (
        "flow 'Nag', step 'Closed yet?' (branch, position 2): goto: " + LOOP_1_2
    )
    assert stored(engine) == []


def test_a_run_of_a_flow_written_around_validation_fails_at_start_naming_the_loop(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders", flows="[]")
    tables_ = driver.runner.tables
    with any_engine.begin() as conn:
        key = conn.execute(
            sa.insert(tables_.flows).values(name="Nag", start="created", active=True)
        ).inserted_primary_key
        assert key is not None
        flow_id = key[0]
        for row in (at(1, TELL), branch(2, 1)):
            conn.execute(sa.insert(tables_.steps).values(flow_id=flow_id, **row))
    driver.create(order(1))
    (run,) = driver.runs(1)
    assert run.status == "failed"
    assert run.reason == "flow 'Nag', step 'Closed yet?' (branch, position 2): " + LOOP_1_2
    assert driver.notices(run.id) == []


# -- the run-time bound, the last guard -------------------------------------------------

# The until step waits — but its date has passed, so each time round it ends at once.
PAST_DUE = """
- name: Overdue
  start: created
  steps:
    - {position: 1, kind: until, title: Needed by, field: needed_by}
    - {position: 2, kind: notify, title: Tell, audience: requester, message: Overdue}
    - {position: 3, kind: branch, title: "Closed yet?", condition: status = closed, goto: 1}
"""


@pytest.mark.parametrize(("bound", "notices"), [(30, 10), (100, 33)])
def test_a_run_that_hits_the_loop_bound_has_told_a_bounded_number_of_notices(
    any_engine: sa.Engine, bound: int, notices: int
) -> None:
    driver = mount(any_engine, "purchase_orders", flows=PAST_DUE, max_moves=bound)
    driver.create({**order(1), "needed_by": T0.date()})
    (run,) = driver.runs(1)
    assert run.status == "failed"
    assert run.reason == (
        f"the run went through more than {bound} steps; a goto at position 3 may loop forever"
    )
    # Each time round enters three positions and tells once, at the second: the run
    # entered at most ``bound`` positions, so it told at most one notice per position.
    told = driver.notices(run.id)
    assert len(told) == notices <= bound
    assert {(n.pass_, n.message) for n in told} == {(k, "Overdue") for k in range(1, notices + 1)}
    driver.advance("30 days")
    assert len(driver.notices(run.id)) == len(told)
    with any_engine.connect() as conn:
        assert ops.next_due(conn, resource="purchase_order") is None
