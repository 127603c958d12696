"""Replies by mail, on SQLite and PostgreSQL: a purchase order asks ann for her approval
in an e-mail (sent through the binding's SMTP channel to a real mail server on
127.0.0.1), whose Reply-To is a reply address; ann replies "Approve", her mail provider
posts the reply, signed, to the mail inbound, and the order goes on.

The same reply again changes nothing; a reply from another sender, to a forged address,
badly signed, signed too long ago, or saying no answer is each refused with a sentence,
and writes nothing."""

from __future__ import annotations

import email
import email.message
import email.policy
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st
from receivers import Mailbox, mail_server
from running import app, mount, order
from starlette.testclient import TestClient

from flowrunner import CommandContext, FlowBinding, Hmac, MailInbound, errors, testing
from flowrunner.delivery import Smtp, channels, sending
from flowrunner.foundations import reply_tokens
from flowrunner.inbound import mail
from flowrunner.store import engine_tables

LINKS_SECRET = b"orders-links-secret-of-32-bytes!"
MAIL_SECRET = "mail-hook-s3cret"
MAILBOX = "approvals@orders.example.com"
PEOPLE = {"ann": "ann@example.com", "bob": "bob@example.com"}
SIGNING = Hmac(
    secret_env="ORDERS_MAIL_SECRET",
    header="x-mail-signature",
    timestamp_header="x-mail-timestamp",
    window="5 minutes",
)
REPLIES = MailInbound(name="mail", verify=SIGNING, mailbox=MAILBOX)

APPROVE = """
- name: Approve
  start: created
  steps:
    - {position: 1, kind: approval, title: Manager approval, approver: ann}
    - {position: 2, kind: set, title: Approved, field: status, value: approved}
"""


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    with mail_server() as box:
        yield box


@pytest.fixture
def orders(engine: sa.Engine, mailbox: Mailbox) -> Iterator[testing.FlowDriver]:
    """The purchase orders app, asking its approvers by mail with a reply address."""
    os.environ[SIGNING.secret_env] = MAIL_SECRET
    module = app("purchase_orders")
    declared = {name: getattr(module.binding, name) for name in FlowBinding.model_fields}
    declared["channels"] = {
        "mail": Smtp(host=mailbox.host, port=mailbox.port, sender="orders@orders.example.com")
    }
    binding = FlowBinding(**declared)

    def request_approval(ctx: CommandContext) -> Any:
        asked = module.request_approval(ctx)
        for approver in asked["asked"]:
            reply_to = driver.runner.reply_address(
                ctx, person=approver, email=PEOPLE[approver], mailbox=MAILBOX
            )
            message = channels.Message(
                notice_id=ctx.run_id,
                channel="mail",
                key=str(ctx.run_id),
                audience="approver",
                recipient=PEOPLE[approver],
                title=f"{ctx.record['number']} needs your approval",
                text="Reply with Approve or Reject on the first line.\n",
                run_id=ctx.run_id,
                tenant=ctx.tenant,
                written_at=driver.now,
                attempt=1,
                reply_to=reply_to,
            )
            sending.send(binding.channels["mail"], message, now=driver.now)
        return asked

    driver = mount(
        engine,
        "purchase_orders",
        binding=binding,
        flows=APPROVE,
        commands={"request_approval": request_approval},
        inbound=[REPLIES],
        links_secret=LINKS_SECRET,
    )
    yield driver
    del os.environ[SIGNING.secret_env]


@pytest.fixture
def client(orders: testing.FlowDriver) -> TestClient:
    return TestClient(orders.runner.inbound_app())


def asked(mailbox: Mailbox) -> email.message.EmailMessage:
    [message] = mailbox.received
    return message


def reply_to(
    message: email.message.EmailMessage,
    text: str = "Approve\n\nThanks, Ann",
    *,
    sender: str = "Ann Example <ann@example.com>",
    to: str | None = None,
    message_id: str = "<reply-1@example.com>",
) -> bytes:
    """The reply ann's mail client writes: to the Reply-To, quoting the question."""
    reply = email.message.EmailMessage(policy=email.policy.default)
    reply["From"] = sender
    reply["To"] = to or str(message["Reply-To"])
    reply["Subject"] = f"Re: {message['Subject']}"
    reply["Message-ID"] = message_id
    reply["In-Reply-To"] = str(message["Message-ID"])
    quoted = "".join(f"> {line}\n" for line in message.get_content().splitlines())
    reply.set_content(f"{text}\n\nOn Mon, orders wrote:\n{quoted}")
    return reply.as_bytes()


def post(
    client: TestClient,
    orders: testing.FlowDriver,
    body: bytes,
    *,
    content_type: str = "message/rfc822",
    secret: str = MAIL_SECRET,
    ago: timedelta = timedelta(0),
) -> tuple[int, str]:
    """The provider posts a reply, signed at the runner's time (less ``ago``)."""
    headers = SIGNING.sign(secret, body, orders.now - ago)
    answer = client.post("/mail", content=body, headers={**headers, "content-type": content_type})
    return answer.status_code, answer.text.strip()


def events(orders: testing.FlowDriver) -> list[dict[str, Any]]:
    with orders.runner.engine.connect() as conn:
        rows = conn.execute(sa.select(engine_tables.events.c.payload)).scalars().all()
    return [dict(row) for row in rows]


def sentences(orders: testing.FlowDriver) -> list[str]:
    [run] = orders.runs(7)
    return [line.sentence for line in orders.history(run.id)]


def test_ann_approves_by_replying_to_the_mail_that_asked_her(
    orders: testing.FlowDriver, client: TestClient, mailbox: Mailbox
) -> None:
    orders.create(order(7))
    question = asked(mailbox)
    assert question["To"] == "ann@example.com"
    assert str(question["Reply-To"]).startswith("approvals+")
    assert str(question["Reply-To"]).endswith("@orders.example.com")

    assert post(client, orders, reply_to(question)) == (204, "")
    orders.run_until_idle()

    [run] = orders.runs(7)
    assert run.status == "done"
    assert orders.record(7)["status"] == "approved"  # type: ignore[index]
    assert "ann approved (1 of 1)" in sentences(orders)
    assert events(orders) == [{"order": 7, "approver": "ann", "decision": "approved"}]

    # The provider did not hear the answer and posts the same reply again.
    assert post(client, orders, reply_to(question)) == (204, "")
    orders.run_until_idle()
    assert len(events(orders)) == 1


def test_a_reply_saying_reject_in_its_subject_rejects(
    orders: testing.FlowDriver, client: TestClient, mailbox: Mailbox
) -> None:
    orders.create(order(7))
    question = asked(mailbox)
    reply = email.message.EmailMessage()
    reply["From"] = "ann@example.com"
    reply["To"] = str(question["Reply-To"])
    reply["Subject"] = "Reject"
    reply["Message-ID"] = "<reply-2@example.com>"
    reply.set_content("")
    assert post(client, orders, reply.as_bytes()) == (204, "")
    assert events(orders) == [{"order": 7, "approver": "ann", "decision": "rejected"}]


def test_the_provider_json_form_answers_as_the_raw_message_does(
    orders: testing.FlowDriver, client: TestClient, mailbox: Mailbox
) -> None:
    orders.create(order(7))
    question = asked(mailbox)
    posted = {
        "from": "Ann <ann@example.com>",
        "to": [str(question["Reply-To"])],
        "subject": f"Re: {question['Subject']}",
        "text": "yes, go ahead\n> Reply with Approve or Reject",
        "message_id": "<reply-3@example.com>",
        "in_reply_to": str(question["Message-ID"]),
    }
    body = json.dumps(posted).encode()
    assert post(client, orders, body, content_type="application/json") == (204, "")
    assert post(client, orders, body, content_type="application/json") == (204, "")
    changed = json.dumps({**posted, "text": "no"}).encode()
    status, said = post(client, orders, changed, content_type="application/json")
    assert status == 409
    assert said == (
        f"run {orders.runs(7)[0].id}: This reply was received before with another answer "
        "under its Message-ID."
    )
    orders.run_until_idle()
    assert orders.runs(7)[0].status == "done"
    assert events(orders) == [{"order": 7, "approver": "ann", "decision": "approved"}]


def test_refused_replies_say_why_and_write_nothing(
    orders: testing.FlowDriver, client: TestClient, mailbox: Mailbox
) -> None:
    orders.create(order(7))
    question = asked(mailbox)
    address = str(question["Reply-To"])
    token = reply_tokens.token_in(address, MAILBOX)
    assert token is not None
    forged = address.replace(token, token[:-1] + ("a" if token[-1] != "a" else "b"))

    refused = {
        "another sender": post(client, orders, reply_to(question, sender="bob@example.com")),
        "forged address": post(client, orders, reply_to(question, to=forged)),
        "no reply address": post(client, orders, reply_to(question, to=MAILBOX)),
        "bad signature": post(client, orders, reply_to(question), secret="a guess"),
        "signed too long ago": post(client, orders, reply_to(question), ago=timedelta(minutes=10)),
        "no answer": post(client, orders, reply_to(question, "Looks fine, but ask Bob")),
        "not a mail": post(client, orders, b"\x00\xff hello"),
    }
    assert refused == {
        "another sender": (
            403,
            "The reply comes from bob@example.com, but its reply address was given to "
            "ann at ann@example.com.",
        ),
        "forged address": (
            400,
            "The reply address is not valid: it was changed, or not made by this application.",
        ),
        "no reply address": (
            400,
            f"The reply is not addressed to a reply address of {MAILBOX}.",
        ),
        "bad signature": (401, "Refused unread: the signature does not match."),
        "signed too long ago": (401, refused["signed too long ago"][1]),
        "no answer": (
            400,
            "The reply says no answer: begin its first line with one of “Approve”, "
            "“Approved”, “Yes”, “Reject”, “Rejected”, “No”.",
        ),
        "not a mail": (400, refused["not a mail"][1]),
    }
    assert "5 minutes" in refused["signed too long ago"][1]
    assert refused["not a mail"][1].startswith("The reply cannot be read: ")
    assert events(orders) == []
    with orders.runner.engine.connect() as conn:
        kept = conn.execute(sa.select(engine_tables.idempotency.c.key)).scalars().all()
    assert not [key for key in kept if key.startswith("answer:")]
    orders.run_until_idle()
    assert orders.runs(7)[0].status == "waiting"


def test_a_reply_after_the_step_was_answered_or_after_its_address_expired(
    orders: testing.FlowDriver, client: TestClient, mailbox: Mailbox
) -> None:
    orders.create(order(7))
    question = asked(mailbox)
    assert post(client, orders, reply_to(question)) == (204, "")
    orders.run_until_idle()
    status, said = post(client, orders, reply_to(question, message_id="<reply-9@example.com>"))
    assert status == 409
    assert said.endswith("Manager approval for PO-7 no longer waits for an answer.")

    orders.create(order(8))
    late = mailbox.received[-1]
    orders.advance("15 days")
    status, said = post(client, orders, reply_to(late, message_id="<reply-10@example.com>"))
    assert status == 410
    assert "The reply address expired on " in said
    assert len(events(orders)) == 1


def test_a_reply_address_is_made_only_for_a_step_that_waits_for_an_answer(
    orders: testing.FlowDriver,
) -> None:
    orders.create(order(7))
    [run] = orders.runs(7)
    made = orders.runner.reply_address(run.id, person="ann@example.com", mailbox=MAILBOX)
    assert reply_tokens.token_in(made, MAILBOX)
    with pytest.raises(errors.OperatorError, match="needs the e-mail address"):
        orders.runner.reply_address(run.id, person="ann", mailbox=MAILBOX)
    with pytest.raises(errors.OperatorError, match="already holds a '\\+'"):
        orders.runner.reply_address(run.id, person="ann@example.com", mailbox="a+b@example.com")


def test_a_mail_inbound_is_declared_with_a_sentence_for_its_mistakes() -> None:
    with pytest.raises(errors.BindingError, match="mailbox 'approvals' is not an e-mail"):
        MailInbound(name="mail", verify=SIGNING, mailbox="approvals")
    with pytest.raises(errors.BindingError, match="'looks good' is not one word"):
        MailInbound(name="mail", verify=SIGNING, mailbox=MAILBOX, answers={"looks good": "ok"})
    said = MailInbound(
        name="mail", verify=SIGNING, mailbox=MAILBOX, answers={"OK": "approved", "Nope": "no"}
    )
    reply = mail.Reply("ann@example.com", (), "", "ok!", "", "")
    assert mail.answer_in(reply, said.answers) == "approved"


@fuzz(0.5)
@given(
    body=st.binary(max_size=2048),
    content_type=st.sampled_from(["message/rfc822", "application/json", "text/plain"]),
)
def test_any_bytes_as_a_message_are_answered_below_500(
    orders: testing.FlowDriver, client: TestClient, body: bytes, content_type: str
) -> None:
    status, said = post(client, orders, body, content_type=content_type)
    assert 400 <= status < 500, (status, said)
    assert said


@fuzz(0.5)
@given(
    headers=st.lists(
        st.tuples(
            st.sampled_from(["From", "To", "Cc", "Subject", "Message-ID", "Content-Type", "X"]),
            st.text(max_size=80),
        ),
        max_size=6,
    ),
    text=st.text(max_size=200),
)
def test_any_headers_and_text_are_read_or_refused_with_a_400(
    headers: list[tuple[str, str]], text: str
) -> None:
    raw = "".join(f"{name}: {value}\r\n" for name, value in headers) + "\r\n" + text
    try:
        reply = mail.read("message/rfc822", raw.encode("utf-8", "surrogatepass"))
    except errors.CallbackRejected as exc:
        assert exc.status_code == 400
    else:
        assert "@" in reply.sender
        mail.answer_in(reply, mail.ANSWERS)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@fuzz(0.5)
@given(
    fields=st.dictionaries(
        st.sampled_from(["from", "to", "cc", "subject", "text", "message_id", "in_reply_to"]),
        JSON_VALUES | st.emails().map(str),
    )
)
def test_any_provider_json_is_read_or_refused_with_a_400(fields: dict[str, Any]) -> None:
    try:
        reply = mail.read_json(json.dumps(fields).encode())
    except errors.CallbackRejected as exc:
        assert exc.status_code == 400
    else:
        assert "@" in reply.sender
        mail.answer_in(reply, mail.ANSWERS)
