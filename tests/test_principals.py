"""Principals and roles, as a help desk declares them: what runs unattended holds service
roles alone, each command runs only for a principal granted it — checked at mount and on
every attempt — and each part runs as the principal it names. On SQLite and PostgreSQL
where a runner is mounted."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import authorities
import migrated
import pytest
import sqlalchemy as sa

from flowrunner import (
    BindingError,
    FlowBinding,
    Hmac,
    Inbound,
    Job,
    Jobs,
    Kind,
    Principal,
    Role,
    Workflows,
    flow_runner,
    tables,
    testing,
)
from flowrunner.authority import grants

START = datetime(2026, 3, 2, 9, tzinfo=UTC)


@pytest.fixture
def desk(any_engine: sa.Engine) -> testing.FlowDriver:
    migrated.upgrade(any_engine)
    return testing.FlowDriver(authorities.build(any_engine), start=START)


def mount(engine: sa.Engine, **changes: Any) -> Any:
    """The desk's runner mounted with some of its declarations changed."""
    authorities.metadata.create_all(engine)
    options: dict[str, Any] = {
        "commands": authorities.COMMANDS,
        "run_as": "automation",
        "roles": authorities.roles(),
        "principals": authorities.PRINCIPALS,
        "check_schema": False,
    }
    return flow_runner(authorities.binding, engine, **{**options, **changes})


def who_ran(engine: sa.Engine) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(authorities.called.c.command, authorities.called.c.principal).order_by(
                authorities.called.c.id
            )
        )
        return [(str(r.command), str(r.principal)) for r in rows]


# -- refused at mount, with a sentence ------------------------------------------------------


def test_a_runner_run_as_a_person_with_a_non_service_role_is_refused_at_mount(
    any_engine: sa.Engine,
) -> None:
    with pytest.raises(BindingError) as refused:
        mount(any_engine, run_as="olga")
    assert str(refused.value) == (
        "the runner runs as olga, but olga holds the role ops-flows, which is not a service "
        "role: what runs unattended holds service roles alone (Role(..., service=True))"
    )


def test_a_role_granting_every_command_is_refused_as_a_run_as_role(
    any_engine: sa.Engine,
) -> None:
    roles = [*authorities.roles(), Role("admin", commands=["*"], service=True)]
    principals = [*authorities.PRINCIPALS, Principal("root-bot", roles=["admin"])]
    with pytest.raises(BindingError) as refused:
        mount(any_engine, roles=roles, principals=principals, run_as="root-bot")
    assert "root-bot holds the role admin, which grants every command ('*')" in str(refused.value)


def test_a_kind_whose_principal_is_not_granted_its_command_is_refused_at_mount(
    any_engine: sa.Engine,
) -> None:
    roles = [r for r in authorities.roles() if r.name != "automation"]
    roles.append(Role("automation", commands=["send_mail"], service=True))
    with pytest.raises(BindingError) as refused:
        mount(any_engine, roles=roles)
    assert str(refused.value) == (
        "kind 'ask' runs command request_approval, but request_approval is not granted to "
        "automation (roles: automation): grant it to one of the principal's roles"
    )


def test_a_job_run_as_a_person_is_refused_at_mount(any_engine: sa.Engine) -> None:
    desk = mount(any_engine)
    with pytest.raises(BindingError) as refused:
        Jobs(desk, {"purge": Job(every="@daily", command="delete_ticket", run_as="sam")})
    assert str(refused.value).startswith(
        "job 'purge' runs as sam, but sam holds the role support, which is not a service role"
    )


def test_a_workflow_run_as_an_undeclared_principal_is_refused_at_mount(
    any_engine: sa.Engine,
) -> None:
    flows = Workflows()

    @flows.define(run_as="ghost")
    async def haunt(w: Any, start: Any) -> None:
        await w.run("boo", "send_mail")

    with pytest.raises(BindingError) as refused:
        mount(any_engine, workflows=flows)
    assert str(refused.value) == (
        "workflow 'haunt' runs as ghost, but ghost is not a declared principal (principals: "
        "automation, clock, jo, olga, sam, service-bot)"
    )


def test_an_inbound_endpoint_run_as_a_person_is_refused_at_mount(
    any_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESK_HOOK_KEY", "s3cret")
    verify = Hmac(secret_env="DESK_HOOK_KEY", header="x-signature")
    hook = Inbound(name="mailed", verify=verify, run_as="sam", key=str, command="send_mail")
    with pytest.raises(BindingError) as refused:
        mount(any_engine, inbound=[hook])
    assert str(refused.value).startswith(
        "inbound 'mailed' runs as sam, but sam holds the role support, which is not a service"
    )


def test_principals_and_the_applications_own_authorize_are_not_given_together(
    any_engine: sa.Engine,
) -> None:
    with pytest.raises(BindingError, match="roles and principals, or its own authorize"):
        mount(any_engine, authorize=lambda principal, command: True)


# -- each part runs as its principal, each attempt checked ----------------------------------


def test_each_part_runs_as_its_principal(desk: testing.FlowDriver) -> None:
    runner = desk.runner
    with runner.engine.begin() as conn:
        flow = runner.save_flow(conn, {"name": "Triage", "start": "created"})
        runner.save_step(conn, {"flow_id": flow, "position": 1, "kind": "ask", "title": "Ask"})
        runner.save_step(conn, {"flow_id": flow, "position": 2, "kind": "mail", "title": "Mail"})
    desk.create({"id": 1, "status": "open", "due_at": datetime(2026, 3, 3, tzinfo=UTC)})
    desk.advance("1 day")  # the timer on due_at fires; the nightly job's slot comes
    ran = who_ran(runner.engine)
    assert ran[:2] == [("request_approval", "automation"), ("send_mail", "service-bot")]
    # The runner's automation is not granted escalate: the first principal that is.
    assert ("escalate", "clock") in ran
    assert ("close_stale", "clock") in ran


def test_a_command_not_granted_is_refused_on_its_attempt_once_with_a_sentence(
    desk: testing.FlowDriver,
) -> None:
    desk.create({"id": 1, "status": "open"})
    run_id = desk.start_workflow("chase", {}, operator="olga", record=1)
    desk.run_until_idle()
    [run] = [r for r in desk.runs(1) if r.id == run_id]
    assert run.status == "failed"
    # The mailer's own command ran; the one not granted to it never did.
    assert who_ran(desk.runner.engine) == [("send_mail", "service-bot")]

    def refusals() -> list[str]:
        steps = [line for line in desk.runner.history(run_id) if line.what == "workflow_step"]
        return [line.sentence or "" for line in steps if "not granted" in (line.sentence or "")]

    assert refusals() == [
        "Request approval refused (ask): request_approval is not granted to service-bot "
        "(roles: mailer)"
    ]
    last = desk.runner.history(run_id)[-1].sentence
    assert last == (
        "Failed: step 'ask' was refused: request_approval is not granted to service-bot "
        "(roles: mailer)"
    )
    # A refusal is final: however long the worker goes on, no second attempt comes.
    desk.advance("1 day")
    assert len(refusals()) == 1
    ran = who_ran(desk.runner.engine)
    assert ("request_approval", "service-bot") not in ran
    assert ran.count(("send_mail", "service-bot")) == 1


# -- the pure part -------------------------------------------------------------------------


def test_a_role_naming_an_area_the_room_does_not_have_is_refused() -> None:
    with pytest.raises(BindingError) as refused:
        Role("ops", operations=["jobs", "billing"])
    assert str(refused.value) == (
        "role 'ops' names the area 'billing', which the Operations room does not have "
        "(areas: workflows, jobs, deliveries)"
    )


def test_a_principal_holding_an_undeclared_role_is_refused() -> None:
    with pytest.raises(BindingError) as refused:
        grants.Authority.declare([Role("mailer", ["send_mail"])], [Principal("bot", ["mail"])])
    assert str(refused.value) == (
        "principal 'bot' holds the role 'mail', which is not declared (roles: mailer)"
    )


def test_the_areas_a_readers_roles_open() -> None:
    authority = grants.Authority.declare(authorities.roles(), authorities.PRINCIPALS)
    assert authority.areas(["ops-flows"]) == {"workflows", "deliveries"}
    assert authority.areas(["ops-jobs", "unknown"]) == {"jobs"}
    assert authority.first_granted("escalate") == "clock"
    assert authority("sam", "delete_ticket") and not authority("olga", "send_mail")


# -- each tenant under its own service principal --------------------------------------------

tenant_metadata = sa.MetaData()
claim = sa.Table(
    "claim",
    tenant_metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("tenant_id", sa.String(20), nullable=False),
    sa.Column("status", sa.String(20), nullable=False, server_default="open"),
)
claims = FlowBinding(
    resource="claim",
    flows_table="claim_flow",
    steps_table="claim_flow_step",
    kinds={"ask": Kind(command="request_approval")},
    tenant="tenant_id",
)
tables.for_binding(tenant_metadata, claims)
TENANT_PRINCIPALS = [
    *authorities.PRINCIPALS,
    Principal("acme-bot", roles=["automation"]),
]


def test_each_tenants_runs_go_under_that_tenants_service_principal(
    any_engine: sa.Engine,
) -> None:
    migrated.upgrade(any_engine)
    tenant_metadata.create_all(any_engine)
    authorities.metadata.create_all(any_engine)  # where the commands write who ran them
    runner = flow_runner(
        claims,
        any_engine,
        commands=authorities.COMMANDS,
        roles=authorities.roles(),
        principals=TENANT_PRINCIPALS,
        tenant_run_as={"acme": "acme-bot"},
    )
    driver = testing.FlowDriver(runner, start=START)
    for tenant in ("acme", "globex"):
        with any_engine.begin() as conn:
            flow = runner.save_flow(conn, {"name": "Ask", "start": "created"}, tenant=tenant)
            runner.save_step(conn, {"flow_id": flow, "position": 1, "kind": "ask"}, tenant=tenant)
    driver.create({"id": 1, "tenant_id": "acme", "status": "open"})
    driver.create({"id": 2, "tenant_id": "globex", "status": "open"})
    assert who_ran(any_engine) == [
        ("request_approval", "acme-bot"),
        ("request_approval", "automation"),  # globex has none of its own: the runner's
    ]


def test_a_tenants_principal_with_a_non_service_role_is_refused_at_mount(
    any_engine: sa.Engine,
) -> None:
    tenant_metadata.create_all(any_engine)
    with pytest.raises(BindingError) as refused:
        flow_runner(
            claims,
            any_engine,
            commands=authorities.COMMANDS,
            roles=authorities.roles(),
            principals=TENANT_PRINCIPALS,
            tenant_run_as={"acme": "olga"},
            check_schema=False,
        )
    assert str(refused.value).startswith(
        "tenant acme runs as olga, but olga holds the role ops-flows, which is not a service role"
    )
