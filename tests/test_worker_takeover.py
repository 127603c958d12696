"""A dead worker strands little: it claims only what it starts at once, under short leases
that the database's clock judges, and another worker takes its runs over when they end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import forked
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from running import SEND, app, count, mount, order

from flowrunner.cli import cli
from flowrunner.engine import commands, worker
from flowrunner.runner import flow_runner, utc_now
from flowrunner.store import dialects, engine_tables
from flowrunner.store import operations as ops

HERE = Path(__file__).parent
PO = app("purchase_orders")
SEND_COMMAND = "send_purchase_order"


def write(ctx: commands.CommandContext) -> None:
    """The send command: one row of its own per call that commits."""
    ctx.conn.execute(
        sa.insert(PO.approval_reminder).values(
            order_id=ctx.record["id"], run_id=ctx.run_id, reminder=1
        )
    )


def done(engine: sa.Engine) -> int:
    runs = engine_tables.runs
    with engine.connect() as conn:
        return int(
            conn.execute(sa.select(sa.func.count()).where(runs.c.status == "done")).scalar_one()
        )


def test_a_worker_claims_what_one_transaction_advances(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: write})
    for n in range(1, 8):
        driver.create(order(n), run=False)
    single = worker.Worker(driver.runner)
    assert (single.batch, single.claim, single.lease_ttl) == (1, 1, timedelta(seconds=30))
    assert single.run_due() == 1
    batched = worker.Worker(driver.runner, batch=3)
    assert batched.claim == 3 and batched.run_due() == 3
    ahead = worker.Worker(driver.runner, batch=1, claim=2)  # asked for: claims ahead
    assert ahead.run_due() == 2
    assert single.run_due(limit=5) == 1  # what is left
    assert done(any_engine) == 7 and count(any_engine, PO.approval_reminder) == 7


def test_a_worker_whose_clock_is_wrong_cannot_take_a_live_lease(pg_engine: sa.Engine) -> None:
    """On PostgreSQL the database's clock judges leases, not the worker's."""
    driver = mount(pg_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: write})
    driver.runner.clock = utc_now
    driver.create(order(1), run=False)
    lease = timedelta(seconds=30)
    [held] = ops.claim_due(pg_engine, now=utc_now(), owner="A", limit=1, ttl=lease)

    def an_hour_ahead() -> Any:
        return utc_now() + timedelta(hours=1)

    fast = flow_runner(
        PO.binding, pg_engine, commands={**PO.COMMANDS, SEND_COMMAND: write}, clock=an_hour_ahead
    )
    wrong = worker.Worker(fast, lease_ttl=lease)
    # By its clock the claim is long due and its lease long over: it takes nothing.
    assert wrong.run_due() == 0 and wrong.stats.advanced == 0
    name = ops.run_lease(held.run_id)
    with dialects.begin(pg_engine) as conn:
        assert ops.acquire_lease(conn, name=name, owner="B", now=an_hour_ahead(), ttl=lease) is None
        holder = ops.lease_holder(conn, name=name)
        assert holder is not None and holder[:2] == ("A", held.epoch)
        assert ops.lease_now(conn, an_hour_ahead()) < utc_now() + timedelta(minutes=1)
    # When the database's clock has passed the lease, anyone may take it.
    ops.age_leases(pg_engine, by=lease)
    with dialects.begin(pg_engine) as conn:
        assert ops.acquire_lease(conn, name=name, owner="B", now=utc_now(), ttl=lease) == 2
    assert count(pg_engine, PO.approval_reminder) == 0


LEASE = 4.0
POLL = 0.25
# How long a wait may go on before it fails, saying what it saw: generous, since a
# loaded machine may take its time; the test waits for what happens, never for a speed.
PATIENCE = 300.0


def _seen(engine: sa.Engine) -> str:
    """The runs' statuses and the leases held, for a wait that fails."""
    runs, leases = engine_tables.runs, engine_tables.leases
    with engine.connect() as conn:
        statuses = conn.execute(sa.select(runs.c.id, runs.c.status).order_by(runs.c.id)).all()
        held = conn.execute(sa.select(leases.c.name, leases.c.owner, leases.c.expires_at)).all()
    return f"runs {[tuple(row) for row in statuses]}; leases {[tuple(row) for row in held]}"


@pytest.mark.slow
def test_a_killed_workers_runs_are_taken_over_when_its_leases_end(
    any_engine: sa.Engine, tmp_path: Path
) -> None:
    """A worker process is SIGKILLed while it holds two leases (one run's command blocks,
    the other waits its turn in the same claim); another worker, serving meanwhile,
    finishes both once the leases end, each command committed once. How long that took
    is printed, never asserted: the leases end by the database's clock, and a loaded
    machine may take its time after that."""
    driver = mount(any_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: write})
    driver.runner.clock = utc_now  # the processes' clock
    driver.create(order(1), run=False)
    driver.create(order(2), run=False)
    env = {
        **os.environ,
        "FAULT_DB": any_engine.url.render_as_string(hide_password=False),
        "FAULT_LEASE": str(LEASE),
        "FAULT_POLL": str(POLL),
        "FAULT_BATCH": "2",
        "FAULT_BLOCK": str(tmp_path),
    }
    if not dialects.is_sqlite(any_engine):
        with any_engine.connect() as conn:
            schema = conn.execute(sa.text("select current_schema()")).scalar_one()
        env["FAULT_OPTIONS"] = f"-csearch_path={schema}"
    doomed = forked.popen(
        [sys.executable, str(HERE / "faulty_worker.py")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        began = time.monotonic()
        while not list(tmp_path.glob("started-*")):
            assert doomed.poll() is None, doomed.communicate()[1]
            if time.monotonic() - began > PATIENCE:
                pytest.fail(f"the worker never started its command: {_seen(any_engine)}")
            time.sleep(0.02)
        # Holding both leases (on PostgreSQL its heartbeat renews them meanwhile).
        time.sleep(LEASE / 2)
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.communicate(timeout=PATIENCE)
    killed = time.monotonic()
    assert done(any_engine) == 0

    heir = worker.Worker(driver.runner, lease_ttl=timedelta(seconds=LEASE))
    stop = threading.Event()
    serving = threading.Thread(target=heir.serve, args=(stop,), kwargs={"poll": POLL})
    serving.start()
    try:
        while done(any_engine) < 2:
            assert serving.is_alive(), "the heir stopped serving"
            if time.monotonic() - killed > PATIENCE:
                pytest.fail(f"not taken over {PATIENCE:.0f} s after the kill: {_seen(any_engine)}")
            time.sleep(0.02)
        waited = time.monotonic() - killed
    finally:
        stop.set()
        serving.join(PATIENCE)
    assert done(any_engine) == 2
    # The dead worker's own write rolled back with it; the heir's committed once each.
    with any_engine.connect() as conn:
        rows = conn.execute(sa.select(PO.approval_reminder.c.order_id)).scalars().all()
    assert sorted(rows) == [1, 2]
    assert heir.stats.advanced == 2
    print(f"\ntaken over {waited:.2f} s after the kill (lease {LEASE} s, poll {POLL} s)")


def test_the_worker_command_takes_its_lease_claim_and_batch() -> None:
    shown = CliRunner().invoke(cli, ["worker", "--help"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert "--lease DURATION" in text and "[default: 30 seconds]" in text
    assert "--claim" in text and "as many as --batch" in text
    assert "--batch" in text and "Runs advanced per transaction" in text
    for bad in ("soon", "1 month", "0 seconds"):
        refused = CliRunner().invoke(cli, ["worker", "--app", "x:y", "--lease", bad])
        assert refused.exit_code == 2 and "--lease" in refused.output, refused.output
