"""Whatever is posted to a signed endpoint — right, garbled or missing signatures, times
near and far, bodies of any shape and size, other names and methods — only the
documented statuses come back (never a 5xx), and nothing is written unless the answer is
204 (then one delivery at most) or a refusal (then its receipt alone); on SQLite and
PostgreSQL, over HTTP.

Signed bodies include what has broken servers: nesting at and past every limit, numbers
of any size, a name given twice, bytes that are not UTF-8, ``\\u0000`` and lone
surrogates in values and names at any depth. ``FLOWRUNNER_FUZZ_EXAMPLES`` (``python
bench/fuzz.py``) draws more examples than CI's moderate count."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from fuzzing import Tally, fuzz
from hypothesis import event, given
from hypothesis import strategies as st
from paying import SECRET, SECRET_ENV, SIGNATURE, TIMESTAMP, VERIFY, Shop

from flowrunner.inbound.receipt import STATUSES

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
# What a sender may be answered; 500 and 503 never (no fault here, no failing command).
DOCUMENTED = {204, 400, 401, 404, 405, 409, 413}
LIMIT = 256 * 1024
TALLY = Tally("by status answered")


@pytest.fixture
def shop(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> Shop:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    shop = Shop(engine, START)
    shop.order(7)
    shop.order(8)
    return shop


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


ODD_TEXTS = [
    r"\u0000",
    r"a\u0000b",
    r"\ud800",
    r"\udfff",
    r"x\udbff",
    r"\ud83d\ude00",  # a whole pair: text, and kept
    r"\ud83d",
    r"\u0000\ud800",
    "\u00e9",
    r"\\u0000",  # an escaped backslash: the text \u0000, which is fine
]
NUMBERS = [
    "0",
    "-0",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "1" * 40,
    "1" * 4300,
    "1" * 4301,
    "1e400",
    "-1e400",
    "1e-400",
    "1.7976931348623157e308",
    "123456789012345678901234567890.5",
    "0.1e1",
    "1E+2",
]


def _name_of(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(["id", "order", "amount", "note", "x", *ODD_TEXTS]))


def _odd_value(draw: st.DrawFn, depth: int) -> str:
    """A JSON value as text, nesting ``depth`` deep, with odd texts and numbers in it."""
    kind = draw(st.sampled_from(["text", "number", "list", "object"] if depth else ["text"]))
    if kind == "text":
        return '"' + draw(st.sampled_from([*ODD_TEXTS, "plain"])) + '"'
    if kind == "number":
        return draw(st.sampled_from(NUMBERS))
    items = [_odd_value(draw, depth - 1) for _ in range(draw(st.integers(0, 2)))]
    if kind == "list":
        return "[" + ",".join(items) + "]"
    return "{" + ",".join(f'"{_name_of(draw)}":{item}' for item in items) + "}"


@st.composite
def odd_bodies(draw: st.DrawFn) -> bytes:
    """A payment with what has broken servers in it, written as raw JSON text."""
    fields = [
        '"id":"' + draw(st.sampled_from([f"evt_odd_{n}" for n in range(6)] + ODD_TEXTS)) + '"',
        '"order":' + draw(st.sampled_from(["7", '"7"', *NUMBERS])),
        '"amount":' + draw(st.sampled_from(['"1.00"', '"0.01"', *NUMBERS])),
    ]
    kind = draw(st.sampled_from(["deep", "odd", "twice", "bytes", "numbers"]))
    if kind == "deep":
        depth = draw(st.sampled_from([30, 31, 32, 33, 100, 1000, 60_000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"x":', "}")]))
        fields.append('"x":' + opener * depth + '"\\u0000"' * draw(st.booleans()) + closer * depth)
    elif kind == "odd":
        fields.append(f'"{_name_of(draw)}":' + _odd_value(draw, draw(st.integers(0, 6))))
    elif kind == "twice":
        fields += draw(st.lists(st.sampled_from([*fields, '"id":"evt_twice"']), max_size=3))
    elif kind == "numbers":
        fields.append(
            '"x":[' + ",".join(draw(st.lists(st.sampled_from(NUMBERS), max_size=4))) + "]"
        )
    content = ("{" + ",".join(draw(st.permutations(fields))) + "}").encode("utf-8")
    if kind == "bytes":  # a byte changed or put in: often no longer UTF-8
        spot = draw(st.integers(0, len(content)))
        odd = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf"]))
        content = content[:spot] + odd + content[spot + draw(st.integers(0, 1)) :]
    return content


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """A callback's body: a payment (often a re-sent one), any JSON, bytes, sizes at the
    limit, or a payment with what has broken servers in it."""
    kind = draw(st.sampled_from(["payment"] * 4 + ["json", "bytes", "size"] + ["odd"] * 3))
    if kind == "odd":
        return draw(odd_bodies())
    if kind == "payment":
        fields: dict[str, Any] = {
            # Few ids, so that deliveries are sent again, with their body or another.
            "id": draw(st.sampled_from([*(f"evt_{n}" for n in range(12)), 41])),
            "order": draw(st.sampled_from([7, 8, 7, 8, "7", 404, "x", None])),
            "amount": draw(st.sampled_from(["120.00", "9.99", 3, "0", "-5", "1e400", "abc", None])),
        }
        if draw(st.booleans()):
            fields["note"] = draw(json_values)
        return json.dumps(fields, separators=(",", ":")).encode()
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    size = draw(st.integers(LIMIT - 2, LIMIT + 2))
    return b'{"id":"evt_big","order":7,"amount":"1.00"}'.ljust(size, b" ")


@st.composite
def requests(draw: st.DrawFn, now: datetime) -> tuple[str, str, bytes, dict[str, str]]:
    """A method, an inbound's name, a body and the headers sent with it."""
    content = draw(bodies())
    at = now + timedelta(seconds=draw(st.integers(-400, 400)))
    secret = draw(st.sampled_from([SECRET] * 4 + ["not-the-secret"]))
    headers = VERIFY.sign(secret, content, at)
    garble = draw(st.sampled_from(["none"] * 6 + ["signature", "timestamp", "drop", "random"]))
    if garble == "signature":
        sent = headers[SIGNATURE]
        spot = draw(st.integers(0, len(sent) - 1))
        headers[SIGNATURE] = sent[:spot] + draw(st.sampled_from("0f Z=")) + sent[spot + 1 :]
    elif garble == "timestamp":
        headers[TIMESTAMP] = draw(st.sampled_from(["", "-1", "1e9", "99999999999999", "now"]))
    elif garble == "drop":
        del headers[draw(st.sampled_from([SIGNATURE, TIMESTAMP]))]
    elif garble == "random":
        headers[SIGNATURE] = draw(st.text(st.characters(min_codepoint=33, max_codepoint=126)))
    name = draw(st.sampled_from(["payment_settled"] * 18 + ["payment_refunded", "PAYMENT_SETTLED"]))
    method = draw(st.sampled_from(["POST"] * 19 + ["PUT"]))
    return method, name, content, headers


def test_every_status_answered_is_documented() -> None:
    assert DOCUMENTED - {405} | {500, 503} == set(STATUSES)


@fuzz(1.5)
@given(data=st.data())
def test_only_documented_statuses_and_nothing_written_unless_204(
    shop: Shop, data: st.DataObject
) -> None:
    method, name, content, headers = data.draw(requests(shop.driver.now))
    before = shop.counts()
    answer = shop.client.request(method, f"/api/inbound/{name}", content=content, headers=headers)
    after = shop.counts()
    event(f"answered {answer.status_code}")  # --hypothesis-show-statistics shows the spread
    TALLY[f"answered {answer.status_code}"] += 1
    assert answer.content == b""
    assert answer.status_code in DOCUMENTED
    if answer.status_code == 409:
        # A conflict writes nothing; a refusal, its receipt alone (which keeps it).
        assert after in (before, {**before, "receipts": before["receipts"] + 1})
    elif answer.status_code != 204:
        assert after == before
    else:
        # One delivery applied — its payment, event and receipt together — or replayed.
        grew = {what: after[what] - before[what] for what in ("payments", "events", "receipts")}
        assert grew in ({"payments": 0, "events": 0, "receipts": 0}, dict.fromkeys(grew, 1))
