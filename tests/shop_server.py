"""What only the shop's workers run, kept out of its web app: a refund callback from the
processor and a nightly count of the orders, with their commands (``ServerParts``).

    flowrunner worker --app tests.paying:runner --jobs tests.shop_server:SERVER

(Imported as tests.shop_server by the command line's --jobs: only the package's own
modules here, no helper of the tests' folder.)
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from flowrunner import CommandContext, Hmac, Inbound, Job, ServerParts

refund = sa.Table(
    "shop_refund",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("order_id", sa.Integer, nullable=False),
    sa.Column("receipt", sa.String(300), nullable=False),
)


def note_refund(ctx: CommandContext) -> dict[str, Any]:
    refund.create(ctx.conn, checkfirst=True)
    ctx.conn.execute(
        sa.insert(refund).values(
            order_id=int(str(ctx.inputs["order"])), receipt=ctx.idempotency_key
        )
    )
    return {"refunded": True}


def count_orders(ctx: CommandContext) -> dict[str, Any]:
    return {"counted": True}


REFUND_ISSUED = Inbound(
    name="refund_issued",
    verify=Hmac(secret_env="PAYMENT_CALLBACK_SECRET", header="x-processor-signature"),
    run_as="payment-processor",
    command="note_refund",
    key=lambda body: body["id"],
    input=lambda body: {"order": body["order"]},
)

SERVER = ServerParts(
    commands={"note_refund": note_refund, "count_orders": count_orders},
    jobs={"nightly_count": Job(command="count_orders", run_as="bookkeeper", every="0 2 * * *")},
    inbound=[REFUND_ISSUED],
)


def server() -> ServerParts:
    """The same parts, from a function (``--jobs tests.shop_server:server``)."""
    return SERVER
