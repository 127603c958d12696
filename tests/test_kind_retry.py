"""A kind's own retry policy and timeout: checked on the binding, used by the interpreter
and the worker (SQLite and PostgreSQL), and a timed-out attempt retried, then failed."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from running import T0, app, count, mount
from test_interpreter_driver import KINDS, Sim, config, failing

from flowrunner import BindingError, FlowBinding, Kind, RetryPolicy, testing
from flowrunner.engine import commands
from flowrunner.flows.interpreter.config import KindConfig

PO = app("purchase_orders")
POLICY = RetryPolicy(max_attempts=3, base=timedelta(seconds=5))

FLOWS = """
- name: Send
  start: created
  condition: amount > 1000
  steps:
    - {position: 1, kind: send, title: Send to supplier}
- name: Ship
  start: created
  condition: amount <= 1000
  steps:
    - {position: 1, kind: ship, title: Ship it}
"""


def binding(**send: Any) -> FlowBinding:
    """The purchasing binding with ``send`` given ``send``'s options and a plain ``ship``."""
    kinds = dict(PO.binding.kinds)
    kinds["send"] = Kind(command="send_purchase_order", **send)
    kinds["ship"] = Kind(command="ship_order")
    return FlowBinding(**{**PO.binding.model_dump(exclude={"kinds"}), "kinds": kinds})


def order(n: int, amount: int = 25000) -> dict[str, Any]:
    return {"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": amount}


def mount_timed(engine: sa.Engine, handlers: Mapping[str, commands.Command]) -> testing.FlowDriver:
    """The flows on the binding whose ``send`` retries by ``POLICY`` and times out after
    30 seconds, the ``handlers`` over the app's commands."""
    return mount(
        engine,
        "purchase_orders",
        flows=FLOWS,
        binding=binding(retry=POLICY, timeout="30 seconds"),
        commands=handlers,
    )


def own_write(ctx: commands.CommandContext) -> None:
    """A command's own database write, kept only with the attempt that made it."""
    ctx.conn.execute(
        sa.insert(PO.approval_reminder).values(
            order_id=ctx.record["id"], run_id=ctx.run_id, reminder=ctx.attempt
        )
    )


# -- the binding ------------------------------------------------------------------------


def test_a_kind_carries_its_retry_policy_and_timeout_into_the_interpreter(
    sqlite_engine: sa.Engine,
) -> None:
    driver = mount_timed(sqlite_engine, {"ship_order": lambda ctx: None})
    cfg = driver.runner.config
    assert cfg.kinds["send"].retry is POLICY
    assert cfg.kinds["send"].timeout == timedelta(seconds=30)
    assert cfg.kinds["ship"].retry is None and cfg.kinds["ship"].timeout is None
    assert cfg.retry_for("send") is POLICY
    assert cfg.retry_for("ship") is cfg.retry == RetryPolicy()


@pytest.mark.parametrize(
    ("timeout", "message"),
    [
        ("0 seconds", "'0 seconds' must be longer than zero"),
        ("1 month", "'1 month' must be given in days or less, not months or years"),
        ("2 dayz", "'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'"),
        ("-5 seconds", "cannot have a sign here"),
    ],
)
def test_a_kind_timeout_must_be_a_positive_length_of_time(timeout: str, message: str) -> None:
    with pytest.raises(BindingError) as refused:
        Kind(command="send", timeout=timeout)
    assert str(refused.value).startswith("Kind: timeout: ")
    assert message in str(refused.value)


def test_a_kind_timeout_may_be_written_in_any_duration_form() -> None:
    assert Kind(command="send", timeout="1 day").timeout_delta == timedelta(days=1)
    assert Kind(command="send", timeout="PT90S").timeout_delta == timedelta(seconds=90)
    assert Kind(command="send", timeout="1 hour 30 minutes").timeout_delta == timedelta(minutes=90)
    assert Kind(command="send").timeout_delta is None


def test_a_retry_policy_refuses_what_cannot_work() -> None:
    with pytest.raises(ValueError, match="max_attempts of at least 1"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="cannot be negative"):
        RetryPolicy(base=timedelta(seconds=-1))
    with pytest.raises(ValueError, match="factor must be at least 1"):
        RetryPolicy(factor=0.5)
    with pytest.raises(BindingError, match=r"retry: .*max_attempts of at least 1"):
        Kind(command="send", retry={"max_attempts": 0})  # type: ignore[arg-type]
    with pytest.raises(BindingError, match="retry"):
        Kind(command="send", retry=3)  # type: ignore[arg-type]


# -- the interpreter (pure) --------------------------------------------------------------


def test_the_interpreter_retries_a_kind_by_its_own_policy() -> None:
    own = RetryPolicy(max_attempts=2, base=timedelta(minutes=1))
    kinds = {**KINDS, "send": KindConfig(name="send", command="send_purchase_order", retry=own)}
    sim = Sim(
        [{"position": 1, "kind": "send"}],
        cfg=config(kinds=kinds),  # the runner's policy: 3 attempts, 10 s apart at first
        handlers={"send_purchase_order": failing()},
    )
    sim.run()
    assert sim.wake == T0 + timedelta(minutes=1)
    sim.to_wake().run()
    assert sim.status == "failed"
    assert [c.attempt for c in sim.commands] == [1, 2]
    assert sim.reason is not None and "failed 2 times" in sim.reason


# -- the worker ----------------------------------------------------------------------------


def drive(driver: testing.FlowDriver, rounds: int = 20) -> None:
    """Run what is due, then move the clock to the next due time (never back), repeatedly.

    The commands below move the clock themselves, as slow commands would.
    """
    for _ in range(rounds):
        driver.run_until_idle()
        due = driver.next_due()
        if due is None:
            return
        driver.now = max(driver.now, due)
    raise AssertionError("still due after every round")


def test_a_slow_command_times_out_and_is_retried_by_its_kinds_policy(
    any_engine: sa.Engine,
) -> None:
    seen: list[tuple[int, float | None, str]] = []
    driver: testing.FlowDriver

    def slow_send(ctx: commands.CommandContext) -> Mapping[str, Any]:
        seen.append((ctx.attempt, ctx.time_left(), ctx.idempotency_key))
        own_write(ctx)
        driver.now += timedelta(seconds=31)  # it took 31 seconds, and answered
        return {"sent": True}

    driver = mount_timed(
        any_engine, {"send_purchase_order": slow_send, "ship_order": lambda ctx: None}
    )
    driver.create(order(1), run=False)
    drive(driver)
    # Three attempts (the kind's policy, not the runner's five), each with 30 s to go.
    assert [(attempt, left) for attempt, left, _ in seen] == [(1, 30.0), (2, 30.0), (3, 30.0)]
    assert len({key for _, _, key in seen}) == 1
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert run.reason == (
        "step 'Send to supplier' (send, position 1) failed: "
        "the command failed 3 times: timed out after 30 seconds"
    )
    assert run.error is not None
    assert run.error["details"]["cause"]["code"] == "command_timed_out"  # type: ignore[index]
    # Backoff by the kind's policy: 5 s after the first attempt began, 10 s after the second.
    retries = [line for line in driver.history(run.id) if line.what == "retry"]
    assert [line.detail for line in retries] == [
        {
            "attempt": 1,
            "error": "timed out after 30 seconds",
            "again_at": (T0 + timedelta(seconds=5)).isoformat(),
        },
        {
            "attempt": 2,
            "error": "timed out after 30 seconds",
            "again_at": (T0 + timedelta(seconds=31 + 10)).isoformat(),
        },
    ]
    assert [line.sentence for line in retries] == [
        "Attempt 1 failed (timed out after 30 seconds); trying again at Mon 2 Mar 09:00",
        "Attempt 2 failed (timed out after 30 seconds); trying again at Mon 2 Mar 09:00",
    ]
    # Every late attempt was rolled back: its own database write never committed.
    assert count(any_engine, PO.approval_reminder) == 0


def test_a_kind_without_its_own_policy_follows_the_runners(any_engine: sa.Engine) -> None:
    seen: list[float | None] = []

    def down(ctx: commands.CommandContext) -> None:
        seen.append(ctx.time_left())
        raise ConnectionError("the carrier is down")

    driver = mount_timed(any_engine, {"ship_order": down})
    driver.create(order(2, amount=500))
    driver.advance("1 hour")
    [run] = driver.runs(2)
    assert run.status == "failed"
    assert seen == [None] * 5  # five attempts, no deadline
    assert run.reason is not None and "failed 5 times: ConnectionError" in run.reason


def test_a_command_that_answers_in_time_is_kept(any_engine: sa.Engine) -> None:
    driver: testing.FlowDriver

    def quick_enough(ctx: commands.CommandContext) -> None:
        driver.now += timedelta(seconds=29)
        own_write(ctx)

    driver = mount_timed(
        any_engine, {"send_purchase_order": quick_enough, "ship_order": lambda ctx: None}
    )
    driver.create(order(1))
    assert [r.status for r in driver.runs(1)] == ["done"]
    assert count(any_engine, PO.approval_reminder) == 1


# -- PostgreSQL cuts the command's statements at its deadline -------------------------------


def test_postgresql_cuts_a_commands_statement_at_its_timeout(pg_engine: sa.Engine) -> None:
    def sleepy(ctx: commands.CommandContext) -> None:
        ctx.conn.execute(sa.text("SELECT pg_sleep(30)"))

    driver = mount(
        pg_engine,
        "purchase_orders",
        flows=FLOWS,
        binding=binding(retry=RetryPolicy(max_attempts=1), timeout="1 second"),
        commands={"send_purchase_order": sleepy, "ship_order": lambda ctx: None},
    )
    driver.create(order(1))
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert run.reason is not None and "canceling statement due to statement timeout" in run.reason


def test_the_statement_timeout_is_put_back_after_the_command(pg_engine: sa.Engine) -> None:
    settings: list[str] = []

    def probe(ctx: commands.CommandContext) -> None:
        settings.append(ctx.conn.execute(sa.text("SHOW statement_timeout")).scalar_one())

    flows = """
- name: Both
  start: created
  steps:
    - {position: 1, kind: send, title: With a timeout}
    - {position: 2, kind: ship, title: Without one}
"""
    driver = mount(
        pg_engine,
        "purchase_orders",
        flows=flows,
        binding=binding(timeout="2 seconds"),
        commands={"send_purchase_order": probe, "ship_order": probe},
    )
    with pg_engine.connect() as conn:
        default = conn.execute(sa.text("SHOW statement_timeout")).scalar_one()
    driver.create(order(1))
    assert [r.status for r in driver.runs(1)] == ["done"]
    assert settings == ["2s", default]
