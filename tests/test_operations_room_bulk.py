"""One action over everything a filter matches: runs failed because the gateway was down (130
of them, two batches; 300 in a long run and in the browser test) are one line of the
failures grouped by error, and one confirmed action retries them all — each run journaled
once, under the operator's name — while the runs of another error, and another tenant's, are
left alone. On SQLite and PostgreSQL."""

from __future__ import annotations

import gateway
import pytest
import room
import sqlalchemy as sa
from sizes import sized

from flowrunner import RowInvalid, RunQuery, testing

DOWN = sized(130, 300)  # more than one batch (bulk.BATCH, 100)


@pytest.fixture
def shop(any_engine: sa.Engine) -> testing.FlowDriver:
    return gateway.shop(any_engine, down=DOWN)


def test_runs_failed_for_one_error_are_one_line_with_their_count(shop: testing.FlowDriver) -> None:
    groups = shop.runner.error_groups(tenant="acme")
    assert [(g.status, g.error.rsplit(": ", 2)[-2:], g.count) for g in groups] == [
        ("failed", ["the gateway refused", "timeout"], DOWN),
        ("failed", ["the command refused", "the ledger is full"], 2),
    ]
    assert groups[0].newest_id == DOWN
    assert [
        (g.count, gateway.DOWN in g.error) for g in shop.runner.error_groups(tenant="globex")
    ] == [(3, True)]
    # The other filters narrow the groups: acme's runs of flow Sync started at once.
    assert shop.runner.error_groups(tenant="acme", query=RunQuery(record=1))[0].count == 1


def test_retrying_every_run_of_one_error_retries_each_once_under_the_operators_name(
    shop: testing.FlowDriver,
) -> None:
    runner = shop.runner
    asked = RunQuery(status="failed", error="GATEWAY refused")
    counted = runner.operations.count_matching("retry", asked, tenant="acme")
    assert (counted.count, counted.highest_id) == (DOWN, DOWN)
    told: list[int] = []
    acted = runner.operations.act_on_matching(
        counted, asked, operator="olga", reason="gateway back", tenant="acme", progress=told.append
    )
    assert (acted.done, acted.refused, acted.summary) == (DOWN, [], f"{DOWN} done, 0 refused")
    assert sum(told) == DOWN and len(told) == -(-DOWN // 100)
    shop.run_until_idle()
    assert runner.count_runs(tenant="acme")["done"] == DOWN
    assert runner.count_runs(tenant="acme")["failed"] == 2  # the ledger's runs, untouched
    assert runner.count_runs(tenant="globex")["failed"] == 3  # another tenant's, untouched
    entries = runner.journal(tenant="acme", limit=500).rows
    assert len(entries) == DOWN
    assert {(e.operator, e.action) for e in entries} == {("olga", "retry")}
    assert sorted(e.run_id or 0 for e in entries) == list(range(1, DOWN + 1))
    assert runner.journal(tenant="globex").rows == ()


def test_a_confirmation_posted_twice_retries_each_run_once(shop: testing.FlowDriver) -> None:
    runner = shop.runner
    asked = RunQuery(status="failed", error=gateway.DOWN)
    counted = runner.operations.count_matching("retry", asked, tenant="acme")
    runner.operations.act_on_matching(counted, asked, operator="olga", tenant="acme")
    # Before the worker runs them, and after it failed them again: the same confirmation
    # acts on none of them.
    again = runner.operations.act_on_matching(counted, asked, operator="olga", tenant="acme")
    assert (again.done, again.summary) == (0, f"0 done, 0 refused, {DOWN} no longer matched")
    gateway.GATEWAY["up"] = False
    shop.run_until_idle()
    assert runner.count_runs(tenant="acme")["failed"] == DOWN + 2
    again = runner.operations.act_on_matching(counted, asked, operator="olga", tenant="acme")
    assert again.done == 0
    assert len(runner.journal(tenant="acme", limit=500)) == DOWN
    # A new confirmation counts them again.
    recounted = runner.operations.count_matching("retry", asked, tenant="acme")
    assert recounted.count == DOWN


def test_a_run_that_moved_on_meanwhile_is_refused_with_its_sentence(
    shop: testing.FlowDriver,
) -> None:
    runner = shop.runner
    asked = RunQuery(status="failed", error="gateway")
    counted = runner.operations.count_matching("retry", asked, tenant="acme")
    # Between the count and the action: ann restarts run 7, and order 999 fails too.
    new = runner.restart(7, operator="ann", tenant="acme")
    gateway.GATEWAY["up"] = False
    gateway.add(shop, [(999, ("acme", "down"))])
    shop.run_until_idle()
    gateway.GATEWAY["up"] = True
    acted = runner.operations.act_on_matching(counted, asked, operator="olga", tenant="acme")
    assert [(o.run_id, o.code, o.sentence) for o in acted.refused] == [
        (7, "run_restarted", f"run 7 was restarted as run {new}; that run goes on")
    ]
    assert acted.done == DOWN - 1
    assert acted.summary == f"{DOWN - 1} done, 1 refused"
    assert runner.get_run(new, tenant="acme").status == "failed"  # started after the count


def test_cancelling_what_a_filter_matches_and_a_dry_run(shop: testing.FlowDriver) -> None:
    runner = shop.runner
    asked = RunQuery(error="ledger")
    counted = runner.operations.count_matching("Cancel", asked, tenant="acme")
    dry = runner.operations.act_on_matching(
        counted, asked, operator="olga", tenant="acme", dry_run=True
    )
    assert dry.summary == "2 would be done, 0 refused"
    assert runner.journal(tenant="acme").rows == ()
    flagged = runner.operations.act_on_matching(
        counted,
        asked,
        operator="olga",
        tenant="acme",
        allowed=lambda run: None if run.id % 2 else f"olga may not cancel run {run.id}",
    )
    assert [(o.run_id, o.code) for o in flagged.refused] == [(DOWN + 2, "not_allowed")]
    assert flagged.summary == "1 done, 1 refused"
    assert runner.get_run(DOWN + 1, tenant="acme").status == "cancelled"


def test_what_cannot_be_used_is_refused_before_anything_is_counted(
    any_engine: sa.Engine,
) -> None:
    shop = gateway.shop(any_engine, down=1)
    with pytest.raises(RowInvalid) as refused:
        shop.runner.operations.count_matching(
            "retry", RunQuery(status="broken", error="a\x00b"), tenant="acme"
        )
    assert [p.field for p in refused.value.errors] == ["status", "error"]
    assert "cannot be stored" in str(refused.value)
    with pytest.raises(Exception, match="there is no action 'retyr' — did you mean 'retry'"):
        shop.runner.operations.count_matching("retyr", RunQuery(), tenant="acme")


def test_an_error_is_grouped_as_stored_its_secrets_masked(any_engine: sa.Engine) -> None:
    shop = gateway.shop(any_engine, down=1, full=0, other_tenant=0)
    gateway.GATEWAY["up"] = False
    gateway.add(shop, [(2, ("acme", "secret")), (3, ("acme", "secret"))])
    shop.run_until_idle()
    gateway.GATEWAY["up"] = True
    groups = shop.runner.error_groups(tenant="acme")
    assert [(g.count, g.error.rsplit(": ", 1)[-1]) for g in groups] == [
        (2, "the gateway refused token=[redacted] for card [card ****1111]"),
        (1, "timeout"),
    ]
    assert shop.runner.list_runs(tenant="acme", error="abc123").rows == ()
    assert len(shop.runner.list_runs(tenant="acme", error="TOKEN=[redacted]").rows) == 2


def test_stuck_runs_are_grouped_too_and_redriven_all_at_once(any_engine: sa.Engine) -> None:
    desk = room.desk(any_engine)
    [stuck] = [g for g in desk.runner.error_groups() if g.status == "stuck"]
    assert (stuck.count, stuck.error, stuck.newest_id) == (1, "", 5)
    asked = RunQuery(status="stuck")
    counted = desk.runner.operations.count_matching("redrive", asked)
    acted = desk.runner.operations.act_on_matching(counted, asked, operator="olga")
    assert [o.sentence for o in acted.outcomes] == ["run 5 redriven: due now, its lease freed"]
    assert [g.status for g in desk.runner.error_groups()] == ["failed"]  # none stuck now
