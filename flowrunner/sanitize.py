"""Making text and error details safe to store and log: one line, bounded, secrets masked.

Whatever a command raised, or a user typed, may end up in a run's error envelope,
its history or a log line. Everything written there goes through this module, so
that no stored message forges a log line (no newlines or control characters),
grows without bound, or keeps a card number, a social security number or a secret.

    >>> sanitize_text("card 4111 1111 1111 1111\\nnext line")
    'card [card ****1111] next line'
    >>> error_envelope("payment.refused", "token=abc123 was refused")
    {'code': 'payment.refused', 'message': 'token=[redacted] was refused', 'retryable': False}

Pure functions only: no I/O, no global state.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

REDACTED = "[redacted]"
DEFAULT_MAX_LEN = 1000
MESSAGE_MAX_LEN = 500
CODE_MAX_LEN = 100
# The whole envelope, as compact JSON, stays under this many characters.
ENVELOPE_MAX_CHARS = 4096
_MAX_DEPTH = 8
_MAX_ITEMS = 100

# A run of digit groups joined by single spaces or dashes: "4111 1111-1111 1111".
_DIGIT_RUN = re.compile(r"(?<!\d)\d+(?:[ -]\d+)*")
_GROUP = re.compile(r"\d+")
_SSN = re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])")

_SECRET_WORDS = (
    r"[\w.-]*?(?:(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key"
    r"|credentials?)[\w.-]*|auth(?:orization)?)"
)
# key=value, key: value, "key": "value" where the key names a secret. Keys start only
# where a run of key characters starts (not at every "." or "-" inside one), which
# keeps matching linear on text such as "a.a.a.a…".
_KEY_VALUE = re.compile(
    r"(?i)(?<![\w.-])(?P<key>[\"']?" + _SECRET_WORDS + r"[\"']?)(?P<sep>\s*[:=]\s*)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|(?:bearer\s+|basic\s+)?[^\s,;&\"']+)"
)
_AUTH_SCHEME = re.compile(r"(?i)\b(?P<scheme>bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
_URL_PASSWORD = re.compile(
    r"(?P<head>(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(?P<tail>@)"
)
# Token shapes that are secrets wherever they appear.
_TOKEN_SHAPES = re.compile(
    r"\b(?:"
    r"(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}"  # payment-provider keys
    r"|sk-[A-Za-z0-9_-]{16,}"  # API keys of the sk-... shape
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+"  # JSON web tokens
    r")"
)

# Field names whose values are never stored: matched inside the name ...
_SENSITIVE_PARTS = (
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "credential",
    "authorization",
    "cookie",
    "sessionid",
    "socialsecurity",
    "cardnumber",
    "creditcard",
    "cardno",
)
# ... or as a whole word of it (so "pin" but not "shipping", "pan" but not "company").
_SENSITIVE_WORDS = frozenset(
    {"ssn", "card", "pan", "pin", "cvv", "cvc", "cvv2", "pwd", "auth", "otp", "jwt", "iban"}
)
_CODE_CHARS = re.compile(r"[^A-Za-z0-9_.:-]+")
_SPACES = re.compile(" {2,}")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _mask_run(match: re.Match[str]) -> str:
    """Mask every stretch of whole groups in a digit run that is a Luhn-valid card number.

    Trying every stretch of groups (not just the whole run) catches a card followed
    by an unrelated number: "4111 1111 1111 1111 2 items".
    """
    run = match.group(0)
    groups = [(g.start(), g.end()) for g in _GROUP.finditer(run)]
    masked = [False] * len(groups)
    for first in range(len(groups)):
        digits = ""
        for last in range(first, len(groups)):
            start, end = groups[last]
            digits += run[start:end]
            if len(digits) > 19:
                break
            if len(digits) >= 13 and _luhn_ok(digits):
                for index in range(first, last + 1):
                    masked[index] = True
    if not any(masked):
        return run
    pieces: list[str] = []
    cursor = 0
    index = 0
    while index < len(groups):
        if not masked[index]:
            index += 1
            continue
        last = index
        while last + 1 < len(groups) and masked[last + 1]:
            last += 1
        start, end = groups[index][0], groups[last][1]
        digits = "".join(ch for ch in run[start:end] if ch.isdigit())
        pieces.append(run[cursor:start])
        # Brackets keep the last four apart from neighbouring digits, so masking twice
        # changes nothing.
        pieces.append(f"[card ****{digits[-4:]}]")
        cursor = end
        index = last + 1
    pieces.append(run[cursor:])
    return "".join(pieces)


def _mask_key_value(match: re.Match[str]) -> str:
    return f"{match.group('key')}{match.group('sep')}{REDACTED}"


def _one_line(text: str) -> str:
    """Control and separator characters become spaces, invisible format characters go."""
    if not text.isprintable():
        chars: list[str] = []
        for char in text:
            if char.isprintable():
                chars.append(char)
                continue
            category = unicodedata.category(char)
            if category == "Cc" or category.startswith("Z"):
                chars.append(" ")
            # Cf (bidi overrides, zero-width), Cs (lone surrogates), Co, Cn: dropped.
        text = "".join(chars)
    return _SPACES.sub(" ", text)


def mask_secrets(text: str) -> str:
    """Mask card numbers, US social security numbers and secrets in one line of text."""
    # Secrets first, so "token=4111..." reads "token=[redacted]" rather than half a card.
    text = _KEY_VALUE.sub(_mask_key_value, text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}{REDACTED}{m.group('tail')}", text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group('scheme')} {REDACTED}", text)
    text = _TOKEN_SHAPES.sub(REDACTED, text)
    text = _DIGIT_RUN.sub(_mask_run, text)
    return _SSN.sub("***-**-****", text)


def _as_text(value: object) -> str:
    try:
        return str(value)
    except Exception:  # a broken __str__, or an integer too long to print
        return f"<{type(value).__name__}>"


def sanitize_text(value: object, max_len: int = DEFAULT_MAX_LEN) -> str:
    """One line of at most ``max_len`` characters, with sensitive values masked.

    Newlines, tabs and other control characters become single spaces; card numbers
    (Luhn-valid, 13 to 19 digits), social security numbers, bearer tokens, API keys
    and ``password=...``-style secrets are masked; longer text ends in ``…``.
    """
    if max_len < 1:
        raise ValueError("max_len must be at least 1")
    text = value if isinstance(value, str) else _as_text(value)
    # Cut early so huge inputs cost little; the margin keeps a card number that
    # straddles max_len whole until it has been masked.
    text = text[: 2 * max_len + 64]
    text = mask_secrets(_one_line(text)).strip()
    if len(text) > max_len:
        text = text[: max_len - 1].rstrip() + "…"
    return text


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def is_sensitive_field(name: str) -> bool:
    """Whether a field of this name holds a secret or personal number (``api_key``, ``ssn``)."""
    words = _words(name)
    joined = "".join(words)
    return any(part in joined for part in _SENSITIVE_PARTS) or any(
        word in _SENSITIVE_WORDS for word in words
    )


def _card_field(name: str) -> bool:
    joined = "".join(_words(name))
    return any(part in joined for part in ("card", "pan")) and "pin" not in joined


def sanitize_value(value: Any, *, max_len: int = DEFAULT_MAX_LEN, _depth: int = 0) -> Any:
    """A JSON-safe copy of ``value`` with every string sanitized and nesting bounded."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if value.bit_length() > 64:
            return sanitize_text(value, max_len)
        # A card number may arrive as a plain integer.
        text = str(value)
        masked = mask_secrets(text)
        return value if masked == text else masked
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return sanitize_text(value, max_len)
    if isinstance(value, str):
        return sanitize_text(value, max_len)
    if _depth >= _MAX_DEPTH:
        return "…"
    if isinstance(value, Mapping):
        return sanitize_fields(value, max_len=max_len, _depth=_depth + 1)
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value)
        cleaned = [
            sanitize_value(item, max_len=max_len, _depth=_depth + 1) for item in items[:_MAX_ITEMS]
        ]
        if len(items) > _MAX_ITEMS:
            cleaned.append(f"… {len(items) - _MAX_ITEMS} more")
        return cleaned
    return sanitize_text(value, max_len)


def sanitize_fields(
    fields: Mapping[Any, Any], *, max_len: int = DEFAULT_MAX_LEN, _depth: int = 0
) -> dict[str, Any]:
    """A JSON-safe copy of a mapping: sensitive fields redacted, every value sanitized.

    ``{"password": "hunter2", "card_number": "4111111111111111", "note": "hi\\n"}``
    becomes ``{"password": "[redacted]", "card_number": "****1111", "note": "hi"}``.
    """
    result: dict[str, Any] = {}
    for count, (raw_key, value) in enumerate(fields.items()):
        if count >= _MAX_ITEMS:
            result["…"] = f"{len(fields) - _MAX_ITEMS} more fields"
            break
        key = sanitize_text(raw_key, 100)
        if value is not None and is_sensitive_field(key):
            digits = "".join(ch for ch in str(value) if ch.isdigit())
            if _card_field(key) and len(digits) >= 8 and not isinstance(value, Mapping):
                result[key] = f"****{digits[-4:]}"
            else:
                result[key] = REDACTED
            continue
        result[key] = sanitize_value(value, max_len=max_len, _depth=_depth)
    return result


def _code(code: str) -> str:
    cleaned = _CODE_CHARS.sub("_", sanitize_text(code, CODE_MAX_LEN)).strip("_")
    return cleaned or "error"


def _size(envelope: Mapping[str, Any]) -> int:
    return len(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")))


def error_envelope(
    code: str,
    message: str,
    *,
    details: Mapping[str, Any] | None = None,
    retryable: bool = False,
) -> dict[str, Any]:
    """A sanitized, size-capped, JSON-safe description of an error, fit to store and log.

    ``code`` is a short machine name (``command.refused``); ``message`` one sentence.
    ``details`` are sanitized field by field and dropped (``details_truncated``) when
    they would push the envelope past ``ENVELOPE_MAX_CHARS``.
    """
    envelope: dict[str, Any] = {
        "code": _code(code),
        "message": sanitize_text(message, MESSAGE_MAX_LEN) or "error",
        "retryable": bool(retryable),
    }
    if details:
        envelope["details"] = sanitize_fields(details, max_len=MESSAGE_MAX_LEN)
        if _size(envelope) > ENVELOPE_MAX_CHARS:
            del envelope["details"]
            envelope["details_truncated"] = True
    return envelope


def error_from_exception(
    exc: BaseException,
    *,
    code: str | None = None,
    retryable: bool = False,
    details: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The envelope of an exception: its class name as the code unless one is given."""
    message = str(exc) or type(exc).__name__
    return error_envelope(code or type(exc).__name__, message, details=details, retryable=retryable)
