"""A workflow's ``call`` steps against a real HTTP service on 127.0.0.1: the answer's body
kept, one Idempotency-Key per step on every attempt, 5xx, 408, 429 and timeouts tried
again with backoff, a 4xx raised into the workflow as ``StepRefused``.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from provider import Provider, serving
from running import T0, mount

from flowrunner import errors, testing
from flowrunner.foundations import tls
from flowrunner.workflows import Connection, OnEvent, Workflows

TICKET = {"id": 1, "title": "Printer on fire", "requester_id": "ann"}


@pytest.fixture
def provider() -> Iterator[Provider]:
    with serving() as service:
        yield service


def desk(engine: sa.Engine, workflows: Workflows) -> testing.FlowDriver:
    driver = mount(engine, "tickets", flows="[]", workflows=workflows)
    driver.create(TICKET)
    return driver


def checking(provider: Provider, **retry: Any) -> Workflows:
    workflows = Workflows(connections={"checks": Connection(provider.url, timeout=0.5)})

    @workflows.define(start=OnEvent("ticket.replied"))
    async def check(w: Any, start: Any) -> Any:
        try:
            made = await w.call(
                "request-check",
                "checks",
                {"method": "POST", "path": "/checks", "body": {"ticket": start["ticket"]}},
                retry=retry or None,
            )
        except errors.StepRefused as refused:
            return {"refused": refused.status, "said": str(refused)}
        return made

    return workflows


def test_a_call_keeps_the_answers_body_and_sends_one_idempotency_key(
    any_engine: sa.Engine, provider: Provider
) -> None:
    driver = desk(any_engine, checking(provider))
    driver.emit("ticket.replied", {"ticket": 1})
    run = driver.runs(1)[0]
    assert (run.status, run.state["result"]) == ("done", {"id": "chk-1", "ticket": 1})
    assert [(r.method, r.path, r.key, r.body) for r in provider.received] == [
        ("POST", "/checks", f"run-{run.id}/request-check", {"ticket": 1})
    ]
    assert driver.history(run.id)[1].sentence == "Called checks: POST /checks (request-check)"


@pytest.mark.parametrize("status", [503, 500, 408, 429])
def test_a_busy_or_broken_service_is_called_again_with_backoff_and_the_same_key(
    any_engine: sa.Engine, provider: Provider, status: int
) -> None:
    provider.failures["/checks"] = [status, status]
    driver = desk(any_engine, checking(provider, attempts=4, backoff="30 seconds"))
    driver.emit("ticket.replied", {"ticket": 1})
    (waiting,) = driver.runs(1)[0].waiting
    assert (waiting.awaits.value, waiting.until) == ("retry", T0 + timedelta(seconds=30))
    driver.advance("29 seconds")
    assert len(provider.received) == 1  # not before its backoff
    driver.advance("2 minutes")  # 30 s, then 60 s
    run = driver.runs(1)[0]
    assert (run.status, run.state["result"]) == ("done", {"id": "chk-1", "ticket": 1})
    assert provider.sent_keys() == [f"run-{run.id}/request-check"] * 3
    said = [line.sentence for line in driver.history(run.id)]
    assert said[1] == (
        f"Attempt 1 failed (POST /checks answered {status}); trying again at Mon 2 Mar 09:00"
    )


def test_every_call_of_the_process_verifies_with_one_tls_context(
    sqlite_engine: sa.Engine, provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the certificate authorities costs about 20 ms: once a process, not a call."""
    made: list[ssl.SSLContext] = []
    create = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(create(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    provider.failures["/checks"] = [503, 503]
    driver = desk(sqlite_engine, checking(provider, attempts=4, backoff="30 seconds"))
    tls.for_http.cache_clear()
    try:
        driver.emit("ticket.replied", {"ticket": 1})
        driver.advance("2 minutes")
    finally:
        tls.for_http.cache_clear()  # the next test's calls make their own again
    assert driver.runs(1)[0].status == "done"
    assert len(provider.received) == 3
    assert len(made) == 1


def test_a_service_that_does_not_answer_in_time_is_called_again(
    any_engine: sa.Engine, provider: Provider
) -> None:
    provider.slow["/checks"] = 1.5
    driver = desk(any_engine, checking(provider))
    driver.emit("ticket.replied", {"ticket": 1})
    run = driver.runs(1)[0]
    assert run.status == "waiting"
    assert driver.history(run.id)[1].sentence.startswith(
        "Attempt 1 failed (no answer within 0.5 s)"
    )
    provider.slow.clear()
    driver.advance("10 seconds")
    assert driver.runs(1)[0].status == "done"


def test_a_4xx_is_raised_into_the_workflow_as_step_refused(
    any_engine: sa.Engine, provider: Provider
) -> None:
    provider.failures["/checks"] = [404]
    driver = desk(any_engine, checking(provider))
    driver.emit("ticket.replied", {"ticket": 1})
    run = driver.runs(1)[0]
    assert run.state["result"] == {
        "refused": 404,
        "said": 'POST /checks answered 404: {"error": "not now"}',
    }
    assert len(provider.received) == 1  # a refusal is not asked again
    assert driver.history(run.id)[1].sentence == (
        'Checks refused the call (request-check): POST /checks answered 404: {"error": "not now"}'
    )


def test_a_call_that_fails_on_every_attempt_fails_the_run_and_a_retry_calls_again(
    any_engine: sa.Engine, provider: Provider
) -> None:
    provider.failures["/checks"] = [503, 503, 503]
    driver = desk(any_engine, checking(provider, attempts=2, backoff="1 minute"))
    driver.emit("ticket.replied", {"ticket": 1})
    driver.advance("1 minute")
    run = driver.runs(1)[0]
    assert (run.status, run.reason) == (
        "failed",
        "step 'request-check' failed after 2 attempts: POST /checks answered 503",
    )
    driver.runner.retry(run.id, operator="olga")
    driver.run_until_idle()  # the third 503, then its backoff
    driver.advance("1 minute")
    assert driver.runs(1)[0].status == "done"
    assert provider.sent_keys() == [f"run-{run.id}/request-check"] * 4


def test_a_call_to_a_connection_nobody_declared_is_refused(any_engine: sa.Engine) -> None:
    workflows = Workflows()

    @workflows.define(start=OnEvent("ticket.replied"))
    async def lost(w: Any, start: Any) -> None:
        await w.call("ask", "nowhere", {"method": "GET", "path": "/"})

    driver = desk(any_engine, workflows)
    driver.emit("ticket.replied", {"ticket": 1})
    assert driver.runs(1)[0].reason == (
        "step 'ask' was refused: there is no connection 'nowhere' (connections: none)"
    )


def test_a_step_named_in_any_language_is_sent_with_its_key_percent_encoded(
    any_engine: sa.Engine, provider: Provider
) -> None:
    workflows = Workflows(connections={"checks": Connection(provider.url, timeout=0.5)})

    @workflows.define(start=OnEvent("ticket.replied"))
    async def check(w: Any, start: Any) -> Any:
        return await w.call("Überprüfung\x80", "checks", {"method": "POST", "path": "/checks"})

    driver = desk(any_engine, workflows)
    driver.emit("ticket.replied", {"ticket": 1})
    run = driver.runs(1)[0]
    assert run.status == "done", run.reason
    assert [r.key for r in provider.received] == [f"run-{run.id}/%C3%9Cberpr%C3%BCfung%C2%80"]


def test_a_header_http_cannot_carry_is_refused_where_the_body_asks(any_engine: sa.Engine) -> None:
    workflows = Workflows(connections={"checks": Connection("http://127.0.0.1:9")})

    @workflows.define(start=OnEvent("ticket.replied"))
    async def check(w: Any, start: Any) -> Any:
        return await w.call("ask", "checks", {"path": "/", "headers": {"X-Note": "café"}})

    driver = desk(any_engine, workflows)
    errors_before = driver.worker.stats.errors
    driver.emit("ticket.replied", {"ticket": 1})
    run = driver.runs(1)[0]
    assert run.status == "failed"
    assert "header 'X-Note' holds text an HTTP header cannot carry" in (run.reason or "")
    assert driver.worker.stats.errors == errors_before  # a refusal, not an engine error
