"""Sanitizing text, fields and error envelopes: one line, bounded, secrets masked."""

from __future__ import annotations

import enum
import json
import re
import unicodedata
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import assume, given
from hypothesis import strategies as st

from flowrunner.foundations import sanitize

VISA = "4111111111111111"


def luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def card_numbers() -> st.SearchStrategy[str]:
    """Luhn-valid numbers of 13 to 19 digits (the check digit computed)."""

    def finish(body: str) -> str:
        for check in "0123456789":
            if luhn_valid(body + check):
                return body + check
        raise AssertionError("unreachable")

    return st.text("0123456789", min_size=12, max_size=18).map(finish)


def grouped(number: str, separator: str, size: int) -> str:
    return separator.join(number[i : i + size] for i in range(0, len(number), size))


def has_control(text: str) -> bool:
    return any(
        unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"} or ch in "\n\r\t" for ch in text
    )


# -- examples ----------------------------------------------------------------------------


def test_newlines_and_controls_become_single_spaces() -> None:
    assert sanitize.sanitize_text("a\nb\r\nc\td\x00e\u2028f") == "a b c d e f"
    assert sanitize.sanitize_text("bidi\u202eevil zero\u200bwidth") == "bidievil zerowidth"


def test_card_numbers_are_masked_keeping_the_last_four() -> None:
    assert sanitize.sanitize_text(f"paid with {VISA}") == "paid with [card ****1111]"
    assert sanitize.sanitize_text("4111 1111 1111 1111 4 items") == "[card ****1111] 4 items"
    assert sanitize.sanitize_text("4111-1111-1111-1111") == "[card ****1111]"


def test_numbers_that_are_not_cards_are_kept() -> None:
    assert sanitize.sanitize_text("order 4111111111111112") == "order 4111111111111112"
    assert sanitize.sanitize_text("on 2026-11-30 at 12:00") == "on 2026-11-30 at 12:00"
    assert sanitize.sanitize_text("call +1 555-123-4567") == "call +1 555-123-4567"


def test_ssn_and_secrets_are_masked() -> None:
    text = (
        "ssn 123-45-6789 password=hunter2 Authorization: Bearer abc.def.ghi "
        'postgresql://app:s3cret@db/prod {"api_key": "k-123"} AKIAABCDEFGHIJKLMNOP'
    )
    cleaned = sanitize.sanitize_text(text)
    for secret in ("6789", "hunter2", "abc.def.ghi", "s3cret", "k-123", "AKIAABCDEFGHIJKLMNOP"):
        assert secret not in cleaned
    assert "password=[redacted]" in cleaned
    assert "postgresql://app:[redacted]@db/prod" in cleaned
    assert "***-**-****" in cleaned


def test_ordinary_words_that_look_like_secret_names_are_kept() -> None:
    assert sanitize.sanitize_text("author: Bob, tokens left 3") == "author: Bob, tokens left 3"


def test_long_text_is_cut_with_an_ellipsis() -> None:
    cleaned = sanitize.sanitize_text("x" * 5000, max_len=100)
    assert len(cleaned) == 100
    assert cleaned.endswith("…")


def test_anything_becomes_text() -> None:
    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert sanitize.sanitize_text(Broken()) == "<Broken>"
    assert sanitize.sanitize_text(12) == "12"


def test_sensitive_fields_are_redacted_and_values_cleaned() -> None:
    fields = {
        "password": "hunter2",
        "apiKey": "abc",
        "card_number": VISA,
        "ssn": "123-45-6789",
        "note": "hi\nthere",
        "shipping": "fast",
        "company": "ACME",
        "nested": {"client_secret": "x", "items": [1, VISA, {"pin": 1234}]},
        "amount": 12.5,
        "missing_token": None,
    }
    assert sanitize.sanitize_fields(fields) == {
        "password": "[redacted]",
        "apiKey": "[redacted]",
        "card_number": "****1111",
        "ssn": "[redacted]",
        "note": "hi there",
        "shipping": "fast",
        "company": "ACME",
        "nested": {
            "client_secret": "[redacted]",
            "items": [1, "[card ****1111]", {"pin": "[redacted]"}],
        },
        "amount": 12.5,
        "missing_token": None,
    }


def test_a_card_number_as_an_integer_is_masked() -> None:
    assert sanitize.sanitize_value(int(VISA)) == "[card ****1111]"
    assert sanitize.sanitize_value(-int(VISA)) == "-[card ****1111]"
    assert sanitize.sanitize_value(42) == 42
    assert sanitize.sanitize_value(10**12 - 1) == 10**12 - 1


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1) | card_numbers().map(int))
def test_a_whole_number_is_masked_as_its_digits_are(value: int) -> None:
    text = str(value)
    masked = sanitize.mask_secrets(text)
    assert sanitize.sanitize_value(value) == (value if masked == text else masked)


def test_a_subclass_of_text_is_sanitized_as_the_text_it_holds() -> None:
    """Exact types are told first; a str enum, as a value or a field's name, is still
    taken as the text it holds, whether that text was seen before or not."""

    class Shade(enum.StrEnum):
        DARK = "password=hunter2"
        LIGHT = "token=abc"

    assert sanitize.sanitize_text("password=hunter2") == "password=[redacted]"  # remembered
    assert sanitize.sanitize_value(Shade.DARK) == "password=[redacted]"
    assert sanitize.sanitize_value(Shade.LIGHT) == "token=[redacted]"
    assert sanitize.sanitize_fields({Shade.DARK: 1, Shade.LIGHT: [2]}) == {
        "password=[redacted]": "[redacted]",
        "token=[redacted]": "[redacted]",
    }


def test_error_envelope_shape() -> None:
    envelope = sanitize.error_envelope(
        "payment refused!\n", "card 4111111111111111\nrefused", details={"token": "t"}
    )
    assert envelope == {
        "code": "payment_refused",
        "message": "card [card ****1111] refused",
        "retryable": False,
        "details": {"token": "[redacted]"},
    }


def test_error_envelope_drops_details_that_are_too_big() -> None:
    details = {f"field{i}": "v" * 400 for i in range(50)}
    envelope = sanitize.error_envelope("big", "too much", details=details, retryable=True)
    assert "details" not in envelope
    assert envelope["details_truncated"] is True
    assert envelope["retryable"] is True


def test_error_from_exception() -> None:
    envelope = sanitize.error_from_exception(ValueError("bad password=xyz"))
    assert envelope == {
        "code": "ValueError",
        "message": "bad password=[redacted]",
        "retryable": False,
    }


def test_max_len_must_be_positive() -> None:
    with pytest.raises(ValueError):
        sanitize.sanitize_text("x", max_len=0)


# -- properties --------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=30,
)


@given(st.text(), st.integers(min_value=1, max_value=300))
def test_any_text_becomes_one_bounded_line(text: str, max_len: int) -> None:
    cleaned = sanitize.sanitize_text(text, max_len=max_len)
    assert len(cleaned) <= max_len
    assert not has_control(cleaned)
    cleaned.encode("utf-8")  # no lone surrogates


@given(st.text(), card_numbers(), st.sampled_from(["", " ", "-"]), st.text())
def test_card_numbers_never_survive(before: str, card: str, separator: str, after: str) -> None:
    written = grouped(card, separator, 4) if separator else card
    cleaned = sanitize.sanitize_text(f"{before} paid: {written}. {after}", max_len=10_000)
    assert f"[card ****{card[-4:]}]" in cleaned
    assert written not in cleaned or written in before + after


@given(st.uuids(), st.sampled_from(["run ", "id=", "(", ""]), st.sampled_from(["", ".", " ok"]))
def test_a_uuid_is_an_id_never_a_card(value: uuid.UUID, before: str, after: str) -> None:
    # One UUID in about 300 has digit groups at its end that pass the card check.
    text = f"{before}{value}{after}"
    assert sanitize.sanitize_text(text) == text
    assert sanitize.sanitize_text(f"{text} card 4111 1111 1111 1111") == (
        f"{text} card [card ****1111]"
    )


@given(st.text(max_size=200))
def test_sanitizing_twice_changes_nothing(text: str) -> None:
    once = sanitize.sanitize_text(text)
    assert sanitize.sanitize_text(once) == once


@given(st.dictionaries(st.text(max_size=20), json_values, max_size=8))
def test_fields_made_safe_are_kept_as_they_are_and_are_what_sanitizing_again_gives(
    fields: dict[str, Any],
) -> None:
    safe = sanitize.sanitize_fields(fields)
    assert sanitize.sanitize_value(safe) is safe
    # Handing them back is what sanitizing them again would give: nothing changes.
    assert sanitize.sanitize_fields(dict(safe)) == safe
    assert json.dumps(safe) == json.dumps(dict(safe))


def test_fields_made_safe_at_another_length_are_made_safe_again() -> None:
    short = sanitize.sanitize_fields({"note": "x" * 50}, max_len=20)
    assert type(short) is dict
    safe = sanitize.sanitize_fields({"note": "x" * 50})
    assert sanitize.sanitize_value(safe, max_len=20) == {"note": "x" * 19 + "…"}


@given(st.text(max_size=30), st.text(max_size=2000), json_values)
def test_envelopes_are_json_safe_and_bounded(code: str, message: str, details: Any) -> None:
    envelope = sanitize.error_envelope(
        code, message, details={"value": details, "note": message}, retryable=True
    )
    encoded = json.dumps(envelope, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    assert len(encoded) <= sanitize.ENVELOPE_MAX_CHARS
    assert "\n" not in envelope["message"]
    assert len(envelope["message"]) <= sanitize.MESSAGE_MAX_LEN
    assert re.fullmatch(r"[A-Za-z0-9_.:-]+", envelope["code"])


# -- secret shapes -----------------------------------------------------------------------

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        # URL passwords: holding "/" or "@", after an empty user, after an email as user
        ("postgresql://bob:p@ss/w0rd@db/x", "postgresql://bob:[redacted]@db/x"),
        (
            "postgresql+psycopg://bob:p@ss/w0rd@db:5432/x?sslmode=require",
            "postgresql+psycopg://bob:[redacted]@db:5432/x?sslmode=require",
        ),
        ("redis://:pw@host:6379/0", "redis://:[redacted]@host:6379/0"),
        ("HTTPS://u:pw@host/a?mail=a@b.c", "HTTPS://u:[redacted]@host/a?mail=a@b.c"),
        (
            "smtp://me@example.com:pw@mail.example.com",
            "smtp://me@example.com:[redacted]@mail.example.com",
        ),
        ("amqp://u:p?ss@mq/vhost", "amqp://u:[redacted]@mq/vhost"),
        ("x1postgresql://bob:pw@db", "x1postgresql://bob:[redacted]@db"),
        # query parameters, in a URL and as bare key=value text
        (
            "https://h/cb?password=a1&pass=b2&token=c3&access_token=d4&api_key=e5&secret=f6&page=2",
            "https://h/cb?password=[redacted]&pass=[redacted]&token=[redacted]"
            "&access_token=[redacted]&api_key=[redacted]&secret=[redacted]&page=2",
        ),
        (
            "retry with pass=b2 and db.pass: c3",
            "retry with pass=[redacted] and db.pass: [redacted]",
        ),
        ("X-Amz-Signature=abc123&sig=xyz", "X-Amz-Signature=[redacted]&sig=[redacted]"),
        (
            "session_id=s1; ssn: 123456789 pin=1234",
            "session_id=[redacted]; ssn: [redacted] pin=[redacted]",
        ),
        # AWS access key ids and secret keys
        ("keys AKIAIOSFODNN7EXAMPLE ASIAIOSFODNN7EXAMPLE", "keys [redacted] [redacted]"),
        (f"aws_secret_access_key {AWS_SECRET}", "aws_secret_access_key [redacted]"),
        (f"AWS secret key: {AWS_SECRET}.", "AWS secret key: [redacted]."),
        (f'AWS_SECRET_ACCESS_KEY="{AWS_SECRET}"', "AWS_SECRET_ACCESS_KEY=[redacted]"),
        (f"AKIAIOSFODNN7EXAMPLE:{AWS_SECRET}", "[redacted]:[redacted]"),
        # headers: every scheme's credentials, every cookie
        ("Authorization: Bearer abc.def-ghi", "Authorization: [redacted]"),
        ("authorization: Token abc123 later", "authorization: [redacted] later"),
        ('{"Authorization": "Digest u=1, r=2"}', '{"Authorization": [redacted]}'),
        ("Proxy-Authorization: Basic dXNlcjpwYXNz", "Proxy-Authorization: [redacted]"),
        ("Cookie: sessionid=abc; csrftoken=def; theme=dark", "Cookie: [redacted]"),
        ("then bearer eyJhbGciOi.eyJzdWIiOi.sig", "then bearer [redacted]"),
        # quoted values, with escaped quotes, or cut before their closing quote
        ('{"password": "ab\\"cd", "n": 1}', '{"password": [redacted], "n": 1}'),
        ("password='never closed and more", "password=[redacted]"),
        # other token shapes and private keys
        ("key AIzaSyA1234567890abcdefghijklmnopqrstuv", "key [redacted]"),
        ("glpat-abcdefghij0123456789 ok", "[redacted] ok"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIB\nAAKCAQEA\n-----END RSA PRIVATE KEY----- x",
            "[redacted] x",
        ),
        ("-----BEGIN PRIVATE KEY-----\nMIIEpAIB… (cut", "[redacted]"),
    ],
)
def test_secret_shapes_are_masked(text: str, masked: str) -> None:
    assert sanitize.sanitize_text(text) == masked
    assert sanitize.sanitize_text(masked) == masked


@pytest.mark.parametrize(
    "text",
    [
        "mail user@example.com or bob.smith+tag@mail.example.co.uk",
        "see https://example.com/a/b?page=2&sort=name#top",
        "postgresql://bob@db:5432/app and redis://cache:6379/0",
        "compass=north passenger: 3 bypass=on",
        "git sha 3f786850e387550fdab836ed7e6dc881de23001b",
        "a key: order-123, the pass through step 2",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert sanitize.sanitize_text(text) == text


def test_a_secret_cut_at_the_scan_window_is_not_shown_in_part() -> None:
    # The first 2064 characters (2 * 1000 + 64) end inside the URL's password, after
    # "p@ss/": masking them alone would show "ss/". Masking the long password before it
    # pulls that forward into view; what is kept is what a longer stretch agrees with.
    url = "postgresql://bob:p@ss/w0rd@db/x"
    text = "password=" + "x" * 2032 + f" {url} " + "y" * 3000
    assert sanitize.sanitize_text(text) == "password=[redacted] postgresql://bob:[redacted]@"
    # Text that the longer stretch holds whole is masked whole.
    whole = "password=" + "x" * 2032 + f" {url} more"
    assert sanitize.sanitize_text(whole) == (
        "password=[redacted] postgresql://bob:[redacted]@db/x more"
    )


def test_exception_text_leaves_out_the_statement_and_its_values() -> None:
    engine = sa.create_engine("sqlite://")
    with engine.connect() as conn, pytest.raises(sa.exc.OperationalError) as raised:
        conn.execute(sa.text("UPDATE nowhere SET note = :note"), {"note": "Jane's private note"})
    engine.dispose()
    assert "Jane" in str(raised.value)  # SQLAlchemy's own text quotes the value
    assert sanitize.describe_exception(raised.value) == "OperationalError: no such table: nowhere"
    # A driver's later lines quote the row: PostgreSQL's DETAIL.
    duplicate = sa.exc.IntegrityError(
        "INSERT INTO person (email) VALUES (%(email)s)",
        {"email": "jane@example.com"},
        Exception(
            'duplicate key value violates unique constraint "person_email"\n'
            "DETAIL:  Key (email)=(jane@example.com) already exists."
        ),
    )
    assert sanitize.exception_text(duplicate) == (
        'duplicate key value violates unique constraint "person_email"'
    )
    envelope = sanitize.error_from_exception(duplicate)
    assert "jane" not in json.dumps(envelope)


def test_describe_exception_is_one_masked_line() -> None:
    exc = RuntimeError("could not reach postgresql://bob:p@ss/w0rd@db/x\n  token=abc123\n")
    assert sanitize.describe_exception(exc) == (
        "RuntimeError: could not reach postgresql://bob:[redacted]@db/x token=[redacted]"
    )
    assert sanitize.describe_exception(RuntimeError()) == "RuntimeError"


# -- secrets never survive ---------------------------------------------------------------

SECRET_CHARS = st.text(
    st.sampled_from("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"),
    min_size=8,
    max_size=24,
)


@st.composite
def secrets_in_shapes(draw: st.DrawFn) -> tuple[str, str]:
    """(text carrying a secret, the secret), the secret written in one of the masked shapes."""
    secret = draw(SECRET_CHARS)
    punctuated = draw(st.sampled_from(["", "/", "@", "/x@", "@@", "/@/"])).join(
        [secret[:4], secret[4:]]
    )
    aws_secret = (secret * 5)[:40]
    shapes = [
        (f"postgresql://bob:{punctuated}@db.internal:5432/app", punctuated),
        (f"redis://:{punctuated}@cache/0", punctuated),
        (f"https://api.example.com/v1?user=ann&password={secret}&page=2", secret),
        (f"https://api.example.com/cb?access_token={secret}", secret),
        (f"pass={secret}", secret),
        (f"token: {secret}", secret),
        (f'"api_key": "{secret}"', secret),
        (f"secret={secret}", secret),
        (f"Authorization: Bearer {secret}", secret),
        (f"authorization: Token {secret}", secret),
        (f"Cookie: sid={secret}; theme=dark", secret),
        ("AKIA" + (secret.upper() * 3)[:16], "AKIA" + (secret.upper() * 3)[:16]),
        ("ASIA" + (secret.upper() * 3)[:16], "ASIA" + (secret.upper() * 3)[:16]),
        (f"aws_secret_access_key {aws_secret}", aws_secret),
        (f"AKIAIOSFODNN7EXAMPLE:{aws_secret}", aws_secret),
    ]
    return draw(st.sampled_from(shapes))


@given(
    st.text(max_size=300),
    secrets_in_shapes(),
    st.sampled_from([" ", "\n", "\r\n", "\t"]),
    st.text(max_size=300),
)
def test_no_secret_survives_in_any_text(
    before: str, written: tuple[str, str], gap: str, after: str
) -> None:
    """Any text around a secret, parted from it by white space (a newline too), as an
    exception's message or a log argument would put it."""
    text, secret = written
    # Only a secret that is not also part of the words around it can be looked for.
    assume(secret not in before + after + text.replace(secret, ""))
    cleaned = sanitize.sanitize_text(f"{before}{gap}{text}{gap}{after}", max_len=2000)
    assert secret not in cleaned
    assert "\n" not in cleaned and "\r" not in cleaned


@given(
    st.integers(min_value=0, max_value=3000),
    secrets_in_shapes(),
    st.integers(min_value=20, max_value=400),
)
def test_no_secret_survives_a_cut(filler: int, written: tuple[str, str], max_len: int) -> None:
    text, secret = written
    # Only a secret whose start is not also part of the words around it can be looked for.
    assume(secret[:6] not in "password=" + text.replace(secret, ""))
    # A long secret before it shrinks when masked, pulling what comes after forward.
    cleaned = sanitize.sanitize_text(
        f"password={'z' * filler} {text} " + "q " * 2000, max_len=max_len
    )
    assert secret[:6] not in cleaned
