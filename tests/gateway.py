"""A shop whose orders each belong to a tenant and are synced to a payment gateway, for the
tests of acting over a whole filter: the gateway goes down and hundreds of runs fail for
one reason, a few for another.

Each order's ``note`` says how its sync goes: ``down`` — the gateway refuses with a
timeout; ``full`` — the ledger refuses (another error); ``secret`` — the gateway refuses
saying a token and a card number; anything else — synced.
"""

from __future__ import annotations

from collections.abc import Iterable

import migrated
import sqlalchemy as sa
from running import T0

from flowrunner import FlowRunner, errors, flow_runner, tables, testing
from flowrunner.binding import FlowBinding, Kind
from flowrunner.engine import commands
from flowrunner.store import dialects

DOWN = "the gateway refused: timeout"
FULL = "the ledger is full"

metadata = sa.MetaData()
order = sa.Table(
    "shop_order",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("tenant_id", sa.String(32), nullable=False),
    sa.Column("status", sa.String(32)),
    sa.Column("note", sa.String(32)),
)
BINDING = FlowBinding(
    resource="shop_order",
    flows_table="shop_flow",
    steps_table="shop_flow_step",
    kinds={"sync": Kind(command="sync_order")},
    set_columns=["status"],
    tenant="tenant_id",
)
tables.for_binding(metadata, BINDING)

GATEWAY = {"up": True}
"""Whether the gateway answers (a test brings it back up before retrying)."""


def sync_order(ctx: commands.CommandContext) -> None:
    note = ctx.record.get("note")
    if note == "down" and not GATEWAY["up"]:
        raise errors.CommandRefused(DOWN)
    if note == "full":
        raise errors.CommandRefused(FULL)
    if note == "secret":
        raise errors.CommandRefused("the gateway refused token=abc123 for card 4111 1111 1111 1111")


def runner(engine: sa.Engine) -> FlowRunner:
    """The shop's tables and the engine's, a runner, and a flow ``Sync`` for each tenant."""
    metadata.create_all(engine)
    migrated.upgrade(engine)
    mounted = flow_runner(BINDING, engine, commands={"sync_order": sync_order})
    with engine.begin() as conn:
        for tenant in ("acme", "globex"):
            flow = mounted.save_flow(
                conn, {"name": "Sync", "start": "created", "tenant_id": tenant}
            )
            mounted.save_step(
                conn,
                {
                    "flow_id": flow,
                    "position": 1,
                    "kind": "sync",
                    "title": "Sync",
                    "tenant_id": tenant,
                },
            )
    return mounted


def shop(
    engine: sa.Engine, *, down: int, full: int = 2, other_tenant: int = 3
) -> testing.FlowDriver:
    """Orders 1..``down`` of acme fail on the gateway being down, the next ``full`` of acme
    on a full ledger, the next ``other_tenant`` of globex on the gateway too; then the
    gateway comes back up. One run each, failed, a minute apart from the first."""
    GATEWAY["up"] = False
    driver = testing.FlowDriver(runner(engine), start=T0)
    plan: list[tuple[str, str]] = [
        *(("acme", "down") for _ in range(down)),
        *(("acme", "full") for _ in range(full)),
        *(("globex", "down") for _ in range(other_tenant)),
    ]
    add(driver, enumerate(plan, start=1))
    driver.run_until_idle()
    GATEWAY["up"] = True
    return driver


def add(driver: testing.FlowDriver, orders: Iterable[tuple[int, tuple[str, str]]]) -> None:
    """Insert the orders and start their runs, in one transaction (the worker runs them)."""
    runner = driver.runner
    with dialects.begin(runner.engine) as conn:
        for n, (tenant, note) in orders:
            record = {"id": n, "tenant_id": tenant, "status": "new", "note": note}
            conn.execute(order.insert().values(**record))
            runner.record_created(conn, record)


def app(url: str) -> FlowRunner:
    """The shop's runner on ``url``, as ``flowrunner runs --app gateway:app`` mounts it (its
    engine kept in ``MOUNTED``, for the test to close)."""
    engine = sa.create_engine(url)
    MOUNTED.append(engine)
    return flow_runner(BINDING, engine, commands={"sync_order": sync_order})


MOUNTED: list[sa.Engine] = []
"""The engines ``app`` made."""
