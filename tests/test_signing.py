"""How a signed callback is judged (``flowrunner.inbound.signing``): pure, no database, no HTTP."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowrunner import BindingError, Hmac
from flowrunner.inbound.signing import MAX_BODY, check, too_large, values

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SECRET = b"whsec-test"
BODY = b'{"id":"evt_1","order":7}'
STAMPED = Hmac(
    secret_env="PAYMENT_CALLBACK_SECRET",
    header="X-Processor-Signature",
    timestamp_header="X-Processor-Timestamp",
    window="5 minutes",
)


def test_a_sender_signs_the_timestamp_a_dot_and_the_raw_body() -> None:
    headers = STAMPED.sign(SECRET, BODY, NOW)
    stamp = str(int(NOW.timestamp()))
    expected = hmac.new(SECRET, f"{stamp}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert headers == {"x-processor-timestamp": stamp, "x-processor-signature": expected}
    assert check(STAMPED, SECRET, headers, BODY, NOW) is None


def test_header_names_are_read_in_any_case_and_from_asgi_pairs() -> None:
    headers = STAMPED.sign(SECRET, BODY, NOW)
    shouted = {name.upper(): value for name, value in headers.items()}
    assert check(STAMPED, SECRET, shouted, BODY, NOW) is None
    pairs = [(name.encode(), value.encode()) for name, value in headers.items()]
    assert check(STAMPED, SECRET, pairs, BODY, NOW) is None


def test_hex_in_capitals_is_the_same_signature() -> None:
    headers = STAMPED.sign(SECRET, BODY, NOW)
    headers["x-processor-signature"] = headers["x-processor-signature"].upper()
    assert check(STAMPED, SECRET, headers, BODY, NOW) is None


def test_base64_with_a_prefix_as_github_writes_it() -> None:
    spec = Hmac(secret_env="HOOK_SECRET", header="x-hub-signature-256", prefix="sha256=")
    assert spec.template == "{body}"
    hexed = spec.sign(SECRET, BODY, NOW)["x-hub-signature-256"]
    assert hexed == "sha256=" + hmac.new(SECRET, BODY, hashlib.sha256).hexdigest()
    b64 = Hmac(secret_env="HOOK_SECRET", header="x-sig", encoding="base64", algorithm="sha512")
    sent = b64.sign(SECRET, BODY, NOW)["x-sig"]
    assert base64.b64decode(sent) == hmac.new(SECRET, BODY, hashlib.sha512).digest()
    assert check(b64, SECRET, {"x-sig": sent}, BODY, NOW) is None
    # Without its prefix, or in the other encoding, it is not the signature.
    assert check(spec, SECRET, {"x-hub-signature-256": hexed[7:]}, BODY, NOW) is not None
    assert check(b64, SECRET, {"x-sig": hexed[7:]}, BODY, NOW) is not None


def test_a_template_of_its_own_with_braces_written_twice() -> None:
    spec = Hmac(
        secret_env="S",
        header="x-sig",
        timestamp_header="x-time",
        signed="v0:{timestamp}:{{literal}}:{body}",
    )
    assert spec.message(b"B", "12") == b"v0:12:{literal}:B"


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({}, "no single x-processor-signature header"),
        ({"x-processor-signature": "00"}, "no single x-processor-timestamp header"),
        (
            {"x-processor-signature": "00", "x-processor-timestamp": "soon"},
            "the timestamp is not a whole number of seconds",
        ),
        (
            {"x-processor-signature": "zz", "x-processor-timestamp": "1772442000"},
            "the signature is not hex after ''",
        ),
        (
            {"x-processor-signature": "00" * 32, "x-processor-timestamp": "1772442000"},
            "the signature does not match",
        ),
    ],
)
def test_what_is_wrong_is_said_in_a_sentence(headers: dict[str, str], why: str) -> None:
    assert check(STAMPED, SECRET, headers, BODY, NOW) == why


def test_a_header_sent_twice_is_refused() -> None:
    headers = STAMPED.sign(SECRET, BODY, NOW)
    pairs = [*headers.items(), ("x-processor-signature", headers["x-processor-signature"])]
    assert check(STAMPED, SECRET, pairs, BODY, NOW) == "no single x-processor-signature header"
    assert values(pairs, "X-PROCESSOR-SIGNATURE") == [headers["x-processor-signature"]] * 2


@pytest.mark.parametrize("seconds", [-301, -300, 0, 300, 301])
def test_the_window_holds_both_ways_to_the_second(seconds: int) -> None:
    headers = STAMPED.sign(SECRET, BODY, NOW + timedelta(seconds=seconds))
    why = check(STAMPED, SECRET, headers, BODY, NOW)
    if abs(seconds) <= 300:
        assert why is None
    else:
        assert why == "the timestamp is further than 5 minutes from now"


def test_the_size_limit_is_256_kb() -> None:
    assert MAX_BODY == 262144
    assert not too_large(MAX_BODY) and too_large(MAX_BODY + 1)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"secret_env": "s3cr3t value!"}, "never the secret itself"),
        ({"header": "x sig"}, "is not a header name"),
        ({"encoding": "base32"}, "encoding 'base32' is not one of hex, base64"),
        ({"algorithm": "md5"}, "algorithm 'md5' is not one of"),
        ({"signed": "{body}{body}"}, "holds {body} twice"),
        ({"signed": "{timestamp}"}, "must hold the {body}"),
        ({"signed": "{id}.{body}"}, "may hold {timestamp} and {body} only"),
        ({"signed": "{body!r}"}, "may hold {timestamp} and {body} only"),
        ({"signed": "{timestamp}.{body}"}, "an unsigned time could be changed"),
        ({"timestamp_header": "x-time", "signed": "{body}"}, "an unsigned time could be"),
        ({"timestamp_header": "x-sig"}, "need two headers"),
        ({"timestamp_header": "x-time", "window": "2 days"}, "a day at most"),
        ({"timestamp_header": "x-time", "window": "1 month"}, "minutes, hours or days"),
        ({"timestamp_header": "x-time", "window": "soon"}, "Hmac: window:"),
        ({"prefix": "sha256=\n"}, "printable text"),
        ({"signed": []}, "signed is a text such as '{timestamp}.{body}'"),
        ({"signed": ["{body}"]}, "signed is a text such as"),
    ],
)
def test_a_declaration_that_cannot_work_is_refused_when_made(
    options: dict[str, Any], message: str
) -> None:
    declared = {"secret_env": "HOOK_SECRET", "header": "x-sig", **options}
    with pytest.raises(BindingError, match=None) as refused:
        Hmac(**declared)
    assert message in str(refused.value)


# -- the space of requests -----------------------------------------------------------------

printable = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=80)


@given(signature=printable, stamp=st.integers(0, 10**12), content=st.binary(max_size=300))
def test_a_signature_not_made_with_the_secret_never_passes(
    signature: str, stamp: int, content: bytes
) -> None:
    headers = {"x-processor-signature": signature, "x-processor-timestamp": str(stamp)}
    assert check(STAMPED, SECRET, headers, content, NOW) is not None


@given(content=st.binary(max_size=300), flip=st.integers(0, 10**6), seconds=st.integers(-299, 299))
def test_a_signed_body_passes_and_any_byte_changed_fails(
    content: bytes, flip: int, seconds: int
) -> None:
    at = NOW + timedelta(seconds=seconds)
    headers = STAMPED.sign(SECRET, content, at)
    assert check(STAMPED, SECRET, headers, content, NOW) is None
    changed = bytearray(content + b"!")
    changed[flip % len(changed)] ^= 0x01
    assert check(STAMPED, SECRET, headers, bytes(changed), NOW) == "the signature does not match"


@given(seconds=st.integers(-(10**6), 10**6))
def test_the_time_passes_exactly_within_the_window(seconds: int) -> None:
    headers = STAMPED.sign(SECRET, BODY, NOW + timedelta(seconds=seconds))
    assert (check(STAMPED, SECRET, headers, BODY, NOW) is None) == (abs(seconds) <= 300)
