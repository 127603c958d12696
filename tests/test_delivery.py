"""Notices delivered through the binding's channels, as a desk's workflow designer would
say each case: a mail server receives the requester's notice once, with a Message-ID
that stays the same; a webhook receiver that fails twice sees the same notice three
times and acts on it once; the application's own function is told; a receiver that
always fails leaves the notice failed for good, and an operator sends it again from the
console. Real servers on 127.0.0.1, the real engine on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import receivers
import sqlalchemy as sa
from console import OPERATOR, READER, Session, as_, console, said, text
from running import mount

from flowrunner import FlowRunner, errors, testing
from flowrunner.binding import FlowBinding, NotifyRule
from flowrunner.delivery import Deliver, Message, Smtp, Webhook, channels, deliverer
from flowrunner.foundations import retry_policy
from flowrunner.store import dialects
from flowrunner.store import operations as ops
from flowrunner.web.console import Principal

TELL = """
- name: Tell
  start: created
  steps:
    - {position: 1, kind: notify, title: Tell, audience: requester, message: "Ticket {id} is seen: https://desk.example.com/t/{id}"}
"""
# Three attempts, a minute apart at first: what the tests' backoff walks through.
THREE = retry_policy.RetryPolicy(max_attempts=3, base=timedelta(minutes=1), factor=2.0)


def desk(engine: sa.Engine, channel: Any, **options: Any) -> testing.FlowDriver:
    """The tickets app, its requester told through ``channel`` (named ``out``)."""
    from running import app

    base = app("tickets").binding
    values = {name: getattr(base, name) for name in FlowBinding.model_fields}
    values["notify"] = [
        NotifyRule(
            audience="requester", to="requester_id", title="{title}: {message}", channel="out"
        ),
        NotifyRule(audience="assignee", to="assignee"),
    ]
    values["channels"] = {"out": channel}
    values.update(options)
    return mount(engine, "tickets", flows=TELL, binding=FlowBinding(**values))


def ticket(driver: testing.FlowDriver, n: int, requester: str = "ann@example.com") -> int:
    """A ticket created; its notice written. Returns the notice's id."""
    driver.create({"id": n, "title": f"T{n}", "requester_id": requester, "status": "open"})
    [run] = driver.runs(n)
    [notice] = driver.notices(run.id)
    return notice.id


def notice(driver: testing.FlowDriver, notice_id: int) -> ops.NoticeRow:
    return driver.runner.operations.get_notice(notice_id)


def test_the_mail_server_receives_the_requesters_notice_once_with_its_message_id(
    any_engine: sa.Engine,
) -> None:
    with receivers.mail_server() as box:
        driver = desk(any_engine, Smtp(host=box.host, port=box.port, sender="desk@example.com"))
        told = ticket(driver, 1)
        assert notice(driver, told).state == "pending"
        assert driver.runner.deliver_due() == 1
        assert driver.runner.deliver_due() == 0  # sent: nothing more to do
        [mail] = box.received
        assert mail["Message-ID"] == f"<notice-{told}@example.com>"
        assert mail["To"] == "ann@example.com" and mail["From"] == "desk@example.com"
        assert mail["Subject"] == "T1: Ticket 1 is seen: https://desk.example.com/t/1"
        assert "https://desk.example.com/t/1" in mail.get_content()
    sent = notice(driver, told)
    assert (sent.state, sent.attempts, sent.sent_at) == ("delivered", 1, driver.now)
    # The application's own outbox reading leaves a channel's notices to the deliverer.
    assert driver.runner.notices(undelivered=True) == []


def test_a_mail_server_that_is_down_is_tried_again_with_the_same_message_id(
    any_engine: sa.Engine,
) -> None:
    with receivers.mail_server() as box:
        port = box.port
    # Nothing listens on the port now: the first attempt cannot connect.
    driver = desk(
        any_engine,
        Smtp(host="127.0.0.1", port=port, sender="desk@example.com"),
        delivery_retry=THREE,
    )
    told = ticket(driver, 1)
    driver.runner.deliver_due()
    waiting = notice(driver, told)
    assert (waiting.state, waiting.attempts) == ("pending", 1)
    assert waiting.last_error is not None and f"127.0.0.1:{port}" in waiting.last_error
    assert waiting.next_attempt_at == driver.now + timedelta(minutes=1)
    assert driver.runner.deliver_due() == 0  # not due before its backoff
    box = receivers.Mailbox(port=port)
    from aiosmtpd.controller import Controller

    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        driver.advance("1 minute")
        assert driver.runner.deliver_due() == 1
    finally:
        controller.stop()
    assert box.ids() == [f"<notice-{told}@example.com>"]
    assert (notice(driver, told).state, notice(driver, told).attempts) == ("delivered", 2)


def test_a_webhook_that_fails_twice_acts_on_the_notice_once(
    any_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESK_HOOK_SECRET", receivers.SECRET)
    hook_spec = Webhook(url="http://127.0.0.1:1/", secret_env="DESK_HOOK_SECRET").signing
    with receivers.webhook_receiver(hook_spec) as hooks:
        hooks.failures = [500, 500]
        driver = desk(any_engine, Webhook(url=hooks.url, secret_env="DESK_HOOK_SECRET"))
        told = ticket(driver, 7)
        driver.runner.deliver_due()
        assert notice(driver, told).last_error == "the webhook answered 500"
        driver.advance("30 seconds")
        driver.runner.deliver_due()
        driver.advance("90 seconds")
        driver.runner.deliver_due()
        assert hooks.keys() == [str(told)] * 3
        assert [r.signed for r in hooks.received] == [None, None, None]
        assert list(hooks.accepted) == [str(told)]
        body = hooks.accepted[str(told)]
    assert body["id"] == told and body["recipient"] == "ann@example.com"
    assert body["message"] == "Ticket 7 is seen: https://desk.example.com/t/7"
    sent = notice(driver, told)
    assert (sent.state, sent.attempts, sent.last_error) == ("delivered", 3, None)


def test_the_applications_function_is_told_and_a_failure_is_tried_again(
    any_engine: sa.Engine,
) -> None:
    told: list[Message] = []
    failures = [RuntimeError("chat is down, token=abc123")]

    def post_to_chat(message: Message) -> None:
        if failures:
            raise failures.pop()
        told.append(message)

    driver = desk(any_engine, Deliver(post_to_chat))
    first = ticket(driver, 1)
    driver.runner.deliver_due()
    failed_once = notice(driver, first)
    # Sanitized: the token the exception carried is masked.
    assert failed_once.last_error == (
        "the application's function failed: RuntimeError: chat is down, token=[redacted]"
    )
    driver.advance("30 seconds")
    driver.runner.deliver_due()
    [message] = told
    assert (message.notice_id, message.key, message.attempt) == (first, str(first), 2)
    assert (message.recipient, message.title) == (
        "ann@example.com",
        "T1: Ticket 1 is seen: https://desk.example.com/t/1",
    )


def test_a_refusal_fails_the_notice_at_once(any_engine: sa.Engine) -> None:
    def refuse(message: Message) -> None:
        raise errors.CommandRefused("ann left the company")

    driver = desk(any_engine, Deliver(refuse))
    told = ticket(driver, 1)
    driver.runner.deliver_due()
    failed = notice(driver, told)
    assert (failed.state, failed.attempts) == ("failed", 1)
    assert failed.last_error == "the application refused it: ann left the company"


def test_a_receiver_that_always_fails_is_given_up_on_then_sent_again_from_the_console(
    any_engine: sa.Engine,
) -> None:
    with receivers.webhook_receiver() as hooks:
        hooks.always = 503
        driver = desk(any_engine, Webhook(url=hooks.url), delivery_retry=THREE)
        told = ticket(driver, 3)
        for _ in range(5):
            driver.runner.deliver_due()
            driver.advance("10 minutes")
        failed = notice(driver, told)
        assert (failed.state, failed.attempts) == ("failed", 3)
        assert len(hooks.received) == 3

        ui = console(driver, OPERATOR)
        page = ui.get("/ops/notices", state="failed")
        assert page.status_code == 200
        row = _row(page.text, told)
        assert 'data-state="failed"' in row
        assert "failed" in text(row) and "3 attempts" in text(row)
        assert "the webhook answered 503" in text(row)
        assert "Send again" in row
        # The tabs say what a notice does: waiting, sent, failed.
        assert [w for w in ("waiting", "sent", "failed") if f">{w}</a>" in page.text] == [
            "waiting",
            "sent",
            "failed",
        ]
        # A reader who may not retry sees no button and is refused the action.
        reader = console(driver, READER)
        assert "Send again" not in _row(reader.get("/ops/notices").text, told)
        assert reader.post(f"/ops/notices/{told}/retry").status_code == 403
        # Without the page's CSRF token the action is refused.
        forged = Session(ui.client.app)
        forged.token = "forged"
        assert forged.post(f"/ops/notices/{told}/retry").status_code == 403

        hooks.always = None
        done = ui.post(f"/ops/notices/{told}/retry")
        assert done.status_code == 303
        after = ui.follow(done)
        assert said(after.text) == f"Notice {told} will be sent again through out."
        assert 'data-state="pending"' in _row(after.text, told)
        again = notice(driver, told)
        assert (again.state, again.attempts, again.failed_at) == ("pending", 0, None)
        assert driver.runner.deliver_due() == 1
        assert list(hooks.accepted) == [str(told)]
    assert notice(driver, told).state == "delivered"
    # Sent once more is refused with why; the journal names the operator.
    refused = ui.post(f"/ops/notices/{told}/retry")
    assert refused.status_code == 409
    assert f"notice {told} is delivered" in text(refused.text)
    journal = text(ui.get("/ops/journal").text)
    assert f"olga sent notice {told} again" in journal


def _row(page: str, notice_id: int) -> str:
    start = page.index(f'<tr data-notice="{notice_id}"')
    return page[start : page.index("</tr>", start)]


def test_a_notice_without_an_address_fails_for_good_with_a_sentence(
    any_engine: sa.Engine,
) -> None:
    with receivers.mail_server() as box:
        driver = desk(any_engine, Smtp(host=box.host, port=box.port, sender="desk@example.com"))
        told = ticket(driver, 1, requester="ann")
        driver.runner.deliver_due()
        assert box.received == []
    failed = notice(driver, told)
    assert failed.state == "failed"
    assert failed.last_error == (
        "the recipient 'ann' is not an e-mail address: the notify rule's column must hold one"
    )


def test_a_deliverer_that_died_mid_send_leaves_the_notice_to_another_with_the_same_id(
    any_engine: sa.Engine,
) -> None:
    told: list[Message] = []
    driver = desk(any_engine, Deliver(told.append))
    first = ticket(driver, 1)
    engine, now = driver.runner.engine, driver.now
    # A deliverer claims the notice, then dies before it records anything.
    with dialects.begin(engine) as conn:
        [dead] = ops.claim_notices(
            conn, resource="ticket", now=now, until=now + timedelta(minutes=2), limit=5
        )
    assert driver.runner.deliver_due() == 0  # held: nobody else takes it meanwhile
    driver.advance("2 minutes")
    assert driver.runner.deliver_due() == 1
    [message] = told
    assert (message.notice_id, message.attempt) == (first, 2)
    # The dead deliverer's late word changes nothing: its claim ran out.
    with dialects.begin(engine) as conn:
        assert not ops.record_failure(conn, dead, error="late", retry_at=None, at=driver.now)
        assert not ops.record_sent(conn, dead, at=driver.now)
    assert notice(driver, first).state == "delivered"


def test_two_deliverers_at_once_send_each_notice_once(any_engine: sa.Engine) -> None:
    told: list[int] = []
    lock = threading.Lock()

    def record(message: Message) -> None:
        with lock:
            told.append(message.notice_id)

    driver = desk(any_engine, Deliver(record))
    written = [ticket(driver, n) for n in range(1, 21)]
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def serve() -> None:
        try:
            start.wait(timeout=10)
            deliverer.Deliverer(driver.runner, batch=3).deliver_all()
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=serve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert sorted(told) == sorted(written)


def test_a_stopped_deliverer_sends_the_notice_in_hand_and_hands_back_the_rest(
    any_engine: sa.Engine,
) -> None:
    stop = threading.Event()
    told: list[int] = []

    def record_then_stop(message: Message) -> None:
        told.append(message.notice_id)
        stop.set()  # SIGTERM arrives while the first notice is being sent

    driver = desk(any_engine, Deliver(record_then_stop))
    first, second, third = (ticket(driver, n) for n in (1, 2, 3))
    serving = deliverer.Deliverer(driver.runner, batch=10)
    serving.serve(stop, poll=0.01)
    assert told == [first]
    assert (serving.stats.sent, serving.stats.handed_back) == (1, 2)
    for handed in (second, third):
        back = notice(driver, handed)
        assert (back.state, back.attempts, back.next_attempt_at) == ("pending", 0, driver.now)


def test_channels_are_checked_when_the_binding_is_made() -> None:
    with pytest.raises(errors.BindingError, match="did you mean 'mail'"):
        FlowBinding(
            resource="ticket",
            flows_table="f",
            steps_table="s",
            channels={"mail": Smtp(host="127.0.0.1", sender="desk@example.com")},
            notify=[NotifyRule(audience="requester", to="requester_id", channel="mial")],
        )
    with pytest.raises(errors.BindingError, match=r"is not a flowrunner\.delivery Smtp"):
        FlowBinding(
            resource="ticket",
            flows_table="f",
            steps_table="s",
            channels={"mail": "smtp://x"},  # type: ignore[dict-item]
        )
    with pytest.raises(errors.BindingError, match="is not an e-mail address"):
        Smtp(host="127.0.0.1", sender="the desk")
    with pytest.raises(errors.BindingError, match="never the secret itself"):
        Webhook(url="https://example.com/hook", secret_env="s3cr3t value")
    with pytest.raises(errors.BindingError, match="is not an http"):
        Webhook(url="ftp://example.com/hook")
    with pytest.raises(errors.BindingError, match="is not a function"):
        Deliver("send_it")  # type: ignore[arg-type]


def test_the_backoff_grows_until_the_attempts_are_spent() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 3, 2, tzinfo=UTC)
    waits = [channels.next_attempt(THREE, n, now) for n in (1, 2, 3)]
    assert waits == [now + timedelta(minutes=1), now + timedelta(minutes=2), None]
    assert channels.next_attempt(THREE, 1, now, final=True) is None


# A desk shared by tenants, each ticket's requester told through the application's chat.
CREW_FLOWS = """
flows:
  - name: Tell
    start: created
    steps:
      - {position: 1, kind: notify, title: Tell, audience: requester, message: Seen.}
"""


def test_each_tenant_sees_and_sends_again_only_its_own_failed_notices(
    any_engine: sa.Engine,
) -> None:
    from migrated import upgrade

    from flowrunner import flow_runner, tables

    def chat_is_down(message: Message) -> None:
        raise errors.CommandRefused("the chat refused it")

    binding = FlowBinding(
        resource="crew_ticket",
        flows_table="crew_flow",
        steps_table="crew_flow_step",
        tenant="tenant_id",
        notify=[NotifyRule(audience="requester", to="requester", channel="chat")],
        channels={"chat": Deliver(chat_is_down)},
    )
    crew = sa.MetaData()
    crew_ticket = sa.Table(
        "crew_ticket",
        crew,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("requester", sa.String(64)),
    )
    tables.for_binding(crew, binding)
    crew.create_all(any_engine)
    upgrade(any_engine)
    runner = flow_runner(binding, any_engine)
    acme = Principal("amy", tenant="acme", roles=frozenset({"editor", "operator"}))
    globex = Principal("gus", tenant="globex", roles=frozenset({"editor", "operator"}))
    acme_ui, globex_ui = (console_of(runner, who) for who in (acme, globex))
    for ui in (acme_ui, globex_ui):
        assert ui.post("/import", {"yaml": CREW_FLOWS}).status_code == 303
    for n, tenant in ((1, "acme"), (2, "globex")):
        with dialects.begin(any_engine) as conn:
            record = {"id": n, "tenant_id": tenant, "requester": f"r{n}"}
            conn.execute(crew_ticket.insert().values(**record))
            runner.record_created(conn, record)
    runner.run_due()
    runner.deliver_due()
    [acme_notice] = runner.notices(tenant="acme")
    [globex_notice] = runner.notices(tenant="globex")
    assert (acme_notice.state, globex_notice.state) == ("failed", "failed")

    page = acme_ui.get("/ops/notices", state="failed").text
    assert f'data-notice="{acme_notice.id}"' in page
    assert f'data-notice="{globex_notice.id}"' not in page
    assert acme_ui.post(f"/ops/notices/{globex_notice.id}/retry").status_code == 404
    assert runner.operations.get_notice(globex_notice.id, tenant="globex").state == "failed"
    with pytest.raises(errors.OperatorError, match=f"there is no notice {globex_notice.id}"):
        runner.retry_notice(globex_notice.id, operator="amy", tenant="acme")
    assert acme_ui.post(f"/ops/notices/{acme_notice.id}/retry").status_code == 303
    assert runner.operations.get_notice(acme_notice.id, tenant="acme").state == "pending"


def console_of(runner: FlowRunner, who: Principal) -> Session:
    return Session(runner.console(principal=as_(who)))
