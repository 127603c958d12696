"""Sanitizing text, fields and error envelopes: one line, bounded, secrets masked."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowrunner import sanitize

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
    assert sanitize.sanitize_value(42) == 42


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


@given(st.text(max_size=200))
def test_sanitizing_twice_changes_nothing(text: str) -> None:
    once = sanitize.sanitize_text(text)
    assert sanitize.sanitize_text(once) == once


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
