"""Traces: with an OpenTelemetry SDK tracer provider set by the application, each step a
worker takes is a span and each command attempt (or a code workflow's call) a child span,
carrying the run, program, flow, step, record, tenant and attempt; a failure is recorded
as its sanitized sentence, never with a secret; a call sends its span's ``traceparent``.
Without a provider nothing is traced, and a process that never imported OpenTelemetry
gets none imported by flowrunner. On SQLite and PostgreSQL, through the real worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import desk
import pytest
import sqlalchemy as sa
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once
from provider import Provider, serving
from running import T0, mount

from fixtures.purchase_orders import app as po
from fixtures.purchase_orders import scheduled
from flowrunner import Jobs, errors, testing
from flowrunner.engine import commands, tracing
from flowrunner.workflows import Connection, OnEvent, Workflows

ROOT = Path(__file__).resolve().parent.parent
APPROVERS = ("manager@example.com", "cfo@example.com", "controller@example.com")


def _forget_provider() -> None:
    # OpenTelemetry takes a process's tracer provider once; its own tests start afresh so.
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The application's tracer provider, exporting every span to memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _forget_provider()
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()
    _forget_provider()


def order(n: int, amount: int) -> dict[str, Any]:
    return {"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": amount}


def finished(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return list(exporter.get_finished_spans())


def named(spans: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def attributes(span: ReadableSpan, *names: str) -> tuple[object, ...]:
    assert span.attributes is not None
    return tuple(span.attributes.get(f"flowrunner.{name}") for name in names)


def everything_said(spans: Sequence[ReadableSpan]) -> str:
    """Every text the spans carry: names, attributes, statuses, events."""
    said = []
    for span in spans:
        said += [span.name, json.dumps(dict(span.attributes or {}), default=str)]
        said.append(span.status.description or "")
        for event in span.events:
            said += [event.name, json.dumps(dict(event.attributes or {}), default=str)]
    return "\n".join(said)


# -- a purchase order's run ------------------------------------------------------------


def test_a_big_orders_run_is_a_span_per_step_with_its_commands_as_children(
    any_engine: sa.Engine, spans: InMemorySpanExporter
) -> None:
    driver = mount(any_engine, "purchase_orders")
    driver.create(order(1, 25_000))
    [run] = driver.runs(1)
    with any_engine.begin() as conn:
        for approver in APPROVERS:
            po.decide(driver.runner, conn, 1, approver, "approved")
    driver.run_until_idle()
    assert driver.runs(1)[0].status == "done"

    got = finished(spans)
    asking, sending = named(got, "flow ")
    # The first step asks both approvals at once: two attempts of one command under it.
    assert asking.name == sending.name == "flow Big orders"
    assert asking.parent is None and sending.parent is None
    assert attributes(asking, "run_id", "program", "flow", "record", "step") == (
        run.id,
        "flow",
        "Big orders",
        "1",
        "Finance approval",
    )
    assert attributes(asking, "steps") == (("Manager approval", "Finance approval"),)
    asked = children(got, asking)
    assert [(s.name, *attributes(s, "step", "attempt", "outcome")) for s in asked] == [
        ("command request_approval", "Manager approval", 1, "ok"),
        ("command request_approval", "Finance approval", 1, "ok"),
    ]
    for span in asked:
        assert attributes(span, "run_id", "program", "flow", "record", "command") == (
            run.id,
            "flow",
            "Big orders",
            "1",
            "request_approval",
        )
        assert span.context is not None and asking.context is not None
        assert span.context.trace_id == asking.context.trace_id
        assert span.status.status_code == trace.StatusCode.UNSET
    # Once approved, the next step goes through the branches to the supplier.
    assert attributes(sending, "steps") == (
        (
            "Manager approval",
            "Finance approval",
            "Undecided after a week?",
            "Rejected?",
            "Approved?",
            "Tell the requester",
            "Send to supplier",
        ),
    )
    [sent] = children(got, sending)
    assert (sent.name, *attributes(sent, "step", "attempt", "outcome")) == (
        "command send_purchase_order",
        "Send to supplier",
        1,
        "ok",
    )
    assert attributes(sent, "tenant") == (None,)  # the binding has no tenants
    assert len(got) == 5


def test_a_failing_command_is_an_error_span_per_attempt_with_its_secret_masked(
    any_engine: sa.Engine, spans: InMemorySpanExporter
) -> None:
    def send(ctx: commands.CommandContext) -> None:
        raise RuntimeError("the supplier's gateway said: api_key=sk_live_4eC39HqLyjWDarjtT1 denied")

    driver = mount(any_engine, "purchase_orders", commands={"send_purchase_order": send})
    driver.create(order(1, 900))
    driver.advance("1 day")  # every attempt, with its backoff
    [run] = driver.runs(1)
    assert run.status == "failed"

    got = finished(spans)
    attempts = named(got, "command send_purchase_order")
    assert [attributes(s, "attempt", "outcome") for s in attempts] == [
        (n, "failed") for n in range(1, len(attempts) + 1)
    ]
    assert len(attempts) > 1  # tried again
    for span in attempts:
        assert span.status.status_code == trace.StatusCode.ERROR
        assert span.status.description == (
            "RuntimeError: the supplier's gateway said: api_key=[redacted] denied"
        )
        [event] = span.events
        assert event.name == "exception"
        assert dict(event.attributes or {}) == {
            "exception.type": "command_failed",
            "exception.message": span.status.description,
        }
    # The step that gave up failed the run: its span says why, in the same words.
    last = next(s for s in named(got, "flow ") if children(got, s) == [attempts[-1]])
    assert last.status.status_code == trace.StatusCode.ERROR
    assert "api_key=[redacted]" in str(last.status.description)
    assert "sk_live" not in everything_said(got)


def test_a_refused_command_fails_the_steps_span_with_the_sentence_masked(
    any_engine: sa.Engine, spans: InMemorySpanExporter
) -> None:
    def send(ctx: commands.CommandContext) -> None:
        raise errors.CommandRefused("the supplier refused the login password=hunter22")

    driver = mount(any_engine, "purchase_orders", commands={"send_purchase_order": send})
    driver.create(order(1, 900))
    [run] = driver.runs(1)
    assert run.status == "failed"
    got = finished(spans)
    [step] = named(got, "flow Small orders")
    [refused] = children(got, step)
    assert attributes(refused, "outcome", "attempt") == ("refused", 1)
    assert refused.status.description == "the supplier refused the login password=[redacted]"
    assert step.status.status_code == trace.StatusCode.ERROR
    assert step.status.description == (
        f"run {run.id} of flow 'Small orders' on purchase_order 1 failed: step 'Send to "
        "supplier' (send, position 2) failed: the command refused: the supplier refused the "
        "login password=[redacted]"
    )
    assert attributes(step, "steps") == (("Approve", "Send to supplier"),)
    assert "hunter22" not in everything_said(got)


def test_a_tenants_run_is_traced_with_its_tenant(
    any_engine: sa.Engine, spans: InMemorySpanExporter
) -> None:
    runner = desk.runner(any_engine)
    with any_engine.begin() as conn:
        flow = runner.save_flow(conn, {"name": "Triage", "start": "created", "tenant_id": "acme"})
        runner.save_step(
            conn,
            {
                "flow_id": flow,
                "position": 1,
                "kind": "set",
                "title": "Mark seen",
                "field": "status",
                "value": "seen",
            },
            tenant="acme",
        )
    driver = testing.FlowDriver(runner, start=T0)
    driver.create({"id": 7, "tenant_id": "acme", "status": "new"})
    [step] = finished(spans)
    assert (step.name, *attributes(step, "tenant", "record", "step")) == (
        "flow Triage",
        "acme",
        "7",
        "Mark seen",
    )


def test_a_job_on_an_event_is_traced_as_its_own_program(
    po_engine: sa.Engine, spans: InMemorySpanExporter
) -> None:
    scheduled.metadata.create_all(po_engine)
    driver = mount(
        po_engine,
        "purchase_orders",
        flows="[]",
        commands=scheduled.JOB_COMMANDS,
        authorize=scheduled.grants,
    )
    Jobs(driver.runner, {"remind_buyer": scheduled.JOBS["remind_buyer"]})
    driver.create(order(7, 900))
    driver.emit("po.decided", {"order": 7, "approver": "boss", "decision": "approved"})
    driver.advance("1 day")
    [run] = [r for r in driver.runs(7) if r.flow_id.startswith("job:")]
    assert run.status == "done"
    got = finished(spans)
    steps = named(got, "job remind_buyer")
    assert steps and all(attributes(s, "program", "record") == ("job", "7") for s in steps)
    [reminded] = named(got, "command remind_buyer")
    assert reminded.parent is not None
    assert attributes(reminded, "run_id", "program", "flow", "attempt", "outcome") == (
        run.id,
        "job",
        "remind_buyer",
        1,
        "ok",
    )


# -- a code workflow's call ------------------------------------------------------------


@pytest.fixture
def provider() -> Iterator[Provider]:
    with serving() as service:
        yield service


def test_a_workflows_call_sends_the_traceparent_of_its_span(
    any_engine: sa.Engine, spans: InMemorySpanExporter, provider: Provider
) -> None:
    workflows = Workflows(connections={"checks": Connection(provider.url, timeout=5)})

    @workflows.define(start=OnEvent("ticket.replied"))
    async def check(w: Any, start: Any) -> Any:
        return await w.call("request-check", "checks", {"method": "POST", "path": "/checks"})

    driver = mount(any_engine, "tickets", flows="[]", workflows=workflows)
    driver.create({"id": 1, "title": "Printer on fire", "requester_id": "ann"})
    driver.emit("ticket.replied", {"ticket": 1})
    assert driver.runs(1)[0].status == "done"

    got = finished(spans)
    [step] = named(got, "workflow check")
    [call] = children(got, step)
    assert call.name == "call checks" and call.kind == trace.SpanKind.CLIENT
    assert attributes(call, "program", "flow", "step", "attempt", "outcome", "connection") == (
        "workflow",
        "check",
        "request-check",
        1,
        "ok",
        "checks",
    )
    assert call.context is not None
    [received] = provider.received
    assert received.traceparent is not None
    version, trace_id, parent_id, flags = received.traceparent.split("-")
    assert (version, trace_id, parent_id) == (
        "00",
        f"{call.context.trace_id:032x}",
        f"{call.context.span_id:016x}",
    )
    assert int(flags, 16) & 1  # sampled


def test_a_traceparent_the_workflow_sets_itself_is_sent_instead(
    sqlite_engine: sa.Engine, spans: InMemorySpanExporter, provider: Provider
) -> None:
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    workflows = Workflows(connections={"checks": Connection(provider.url, timeout=5)})

    @workflows.define(start=OnEvent("ticket.replied"))
    async def check(w: Any, start: Any) -> Any:
        request = {"method": "POST", "path": "/checks", "headers": {"TraceParent": own}}
        return await w.call("request-check", "checks", request)

    driver = mount(sqlite_engine, "tickets", flows="[]", workflows=workflows)
    driver.create({"id": 1, "title": "Printer on fire", "requester_id": "ann"})
    driver.emit("ticket.replied", {"ticket": 1})
    assert driver.runs(1)[0].status == "done"
    assert [r.traceparent for r in provider.received] == [own]
    assert named(finished(spans), "call checks")  # traced all the same


# -- nothing traced --------------------------------------------------------------------


def test_without_a_tracer_provider_nothing_is_traced(any_engine: sa.Engine) -> None:
    _forget_provider()  # the API imported (this module does), no SDK provider set
    assert tracing.tracer() is None
    assert tracing.step(1) is tracing.QUIET_STEP
    assert tracing.headers() == {}
    driver = mount(any_engine, "purchase_orders")
    driver.create(order(1, 900))
    assert driver.runs(1)[0].status == "done"


OFF = """
import sys
from running import mount
import sqlalchemy as sa

driver = mount(sa.create_engine(sys.argv[1]), "purchase_orders")
driver.create({"id": 1, "number": "PO-1", "requester_id": "ann", "amount": 900})
assert driver.runs(1)[0].status == "done"
print(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"))
"""


# OpenTelemetry as though not installed: a finder ahead of all others finds none of it.
ABSENT = """
import sys
class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NotInstalled())
"""


@pytest.mark.parametrize("installed", [True, False], ids=["installed", "not-installed"])
def test_a_process_that_does_not_trace_imports_no_opentelemetry(
    tmp_path: Path, installed: bool
) -> None:
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    code = OFF if installed else ABSENT + OFF
    done = subprocess.run(
        [sys.executable, "-c", code, f"sqlite:///{tmp_path / 'orders.db'}"],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
