"""Making text and error details safe to store and log: one line, bounded, secrets masked.

Whatever a command raised, or a user typed, may end up in a run's error envelope,
its history or a log line. Everything written there goes through this module, so
that no stored message forges a log line (no newlines or control characters),
grows without bound, or keeps a card number, a social security number or a secret.

    >>> sanitize_text("card 4111 1111 1111 1111\\nnext line")
    'card [card ****1111] next line'
    >>> error_envelope("payment.refused", "token=abc123 was refused")
    {'code': 'payment.refused', 'message': 'token=[redacted] was refused', 'retryable': False}

Pure functions only: no I/O. The only state is two bounded memos: texts that had
nothing to mask (``mask_secrets``), so a clean text seen again — a step's title, a
history line's detail — costs a lookup, holding no text that had a secret in it; and
which field names are sensitive.
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from flowrunner.foundations import shapes

REDACTED = "[redacted]"
# A card field's value as sanitize_fields leaves it: its last four digits.
_MASKED_CARD = re.compile(r"\*\*\*\*\d{4}")
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
# A UUID is an id, not a card: its digit groups (``…-8b64-158311678543``) are never masked.
_UUID = re.compile(
    r"(?<![0-9A-Fa-f-])[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-"
    r"[0-9A-Fa-f]{12}(?![0-9A-Fa-f-])"
)
_SSN = re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])")

# Key names that say their value is a secret: anywhere in the key ("db_password",
# "X-Auth-Token", "client_secret") ...
_SECRET_WORDS = (
    r"[\w.-]*?(?:(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|credentials?|signature|session[_-]?id)[\w.-]*|auth(?:orization)?)"
    # ... or as the key's last word only: "pass" and "db.pass", never "compass" or
    # "passenger"; "sig" for signed URLs; personal numbers written as key=value.
    r"|(?:[\w.-]*[_.-])?(?:pass|pw|sig|ssn|pin|cvv2?|cvc|otp)"
)
# A value in quotes may hold spaces and escaped quotes, and runs to the end of the text
# when its closing quote is missing (the text was cut there). A value masked already is
# taken as it is, so masking twice changes nothing ("{"password": [redacted]}").
_QUOTED_OR_MASKED = r"\[redacted\]|\"(?:[^\"\\]|\\.)*(?:\"|$)|'(?:[^'\\]|\\.)*(?:'|$)"
# key=value, key: value, "key": "value" where the key names a secret: in bare text and
# in a URL's query (?password=…&token=…). Keys start only where a run of key characters
# starts (not at every "." or "-" inside one), which keeps matching linear on text such
# as "a.a.a.a…".
_KEY_VALUE = re.compile(
    r"(?i)(?<![\w.-])(?P<key>[\"']?(?:" + _SECRET_WORDS + r")[\"']?)(?P<sep>\s*[:=]\s*)"
    # A value is never itself the name of the next secret ("password= token: abc" and
    # "password= aws_secret_access_key abc…" mask abc).
    r"(?P<value>(?![\"']?(?:" + _SECRET_WORDS + r")[\"']?\s*[:=]|aws\w*secret\w*\s)"
    r"(?:" + _QUOTED_OR_MASKED + r"|"
    r"(?:bearer\s+|basic\s+)?[^\s,;&\"']+))"
)
# An Authorization header's value is a scheme and its credentials, whatever the scheme
# ("Token …", "Digest …", "AWS4-HMAC-SHA256 Credential=…"): both go.
_AUTH_HEADER = re.compile(
    r"(?i)(?<![\w.-])(?P<key>[\"']?(?:proxy-)?authorization[\"']?)(?P<sep>\s*[:=]\s*)"
    r"(?P<value>" + _QUOTED_OR_MASKED + r"|(?:[a-z][\w-]*\s+)?[^\s,;&\"']+)"
)
# A cookie header carries sessions: every name=value pair of it goes.
_COOKIE_HEADER = re.compile(
    r"(?i)(?<![\w.-])(?P<key>(?:set-)?cookie)(?P<sep>\s*:\s*)"
    r"(?P<value>[^\s;,]+(?:\s*;\s*[^\s;,]+)*)"
)
_AUTH_SCHEME = re.compile(r"(?i)\b(?P<scheme>bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
# scheme://user:password@host, the user possibly empty (redis://:pw@host) and the
# password possibly holding "/" or "@" unencoded (postgresql://bob:p@ss/w0rd@db/x). The
# host follows the last "@" before the query or fragment — or, when the password holds
# a "?" or "#" too, the last "@" of the whole URL. Where a path after a port holds an
# "@" (http://host:8080/@me) too much is masked: that is the safe mistake. Matching
# starts at "://", whatever comes before it.
_URL_PASSWORD = re.compile(r"(?P<head>://[^\s:/?#]*:)(?:[^\s?#]+|\S+)(?P<tail>@)")
# AWS secret keys are 40 base64 characters, recognisable after a key that names them
# (aws_secret_access_key, AWS_SECRET_KEY, "aws secret") or after their access key id
# ("AKIA…:wJalr…"); "key = value" is already masked by _KEY_VALUE.
_AWS_SECRET = re.compile(
    r"(?i)(?P<key>\baws[\w\s.-]{0,30}?secret[\w\s.-]{0,30}?|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b)"
    r"(?P<sep>[^A-Za-z0-9/+]{1,8})[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)
# A PEM private key, to its end line or, cut short, to the end of the text.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|$)",
    re.S,
)
# Token shapes that are secrets wherever they appear.
_TOKEN_SHAPES = re.compile(
    r"\b(?:"
    r"(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}"  # payment-provider keys
    r"|sk-[A-Za-z0-9_-]{16,}"  # API keys of the sk-... shape
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|npm_[A-Za-z0-9]{36}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids, long-lived and temporary
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"  # SendGrid
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
# How many digits a card number has; a whole number of fewer than the least, the
# smallest of which is ``_SHORTEST_CARD``, holds nothing ``mask_secrets`` would mask.
_CARD_MIN_DIGITS = 13
_CARD_MAX_DIGITS = 19
_SHORTEST_CARD = 10 ** (_CARD_MIN_DIGITS - 1)
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
            if len(digits) > _CARD_MAX_DIGITS:
                break
            if len(digits) >= _CARD_MIN_DIGITS and _luhn_ok(digits):
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


def _keep_key(match: re.Match[str]) -> str:
    return f"{match.group('key')}{match.group('sep')}{REDACTED}"


# Texts ``mask_secrets`` left as they were, up to this length and this many (then it
# starts again): masking them again is a lookup.
_CLEAN: set[str] = set()
_CLEAN_LENGTH = 300
_CLEAN_COUNT = 4096


def mask_secrets(text: str) -> str:
    """Mask card numbers, US social security numbers and secrets in one line of text."""
    if text in _CLEAN:
        return text
    masked = _mask(text)
    if masked == text and len(text) <= _CLEAN_LENGTH:
        if len(_CLEAN) >= _CLEAN_COUNT:
            _CLEAN.clear()
        _CLEAN.add(text)
    return masked


def _mask(text: str) -> str:
    text = _PRIVATE_KEY.sub(REDACTED, text)
    # Whole headers before their parts: "Cookie: sid=…; csrftoken=…" goes as one.
    text = _AUTH_HEADER.sub(_keep_key, text)
    text = _COOKIE_HEADER.sub(_keep_key, text)
    # Secrets before numbers, so "token=4111..." reads "token=[redacted]" rather than
    # half a card; an AWS secret before its access key id is masked, which names it.
    text = _KEY_VALUE.sub(_keep_key, text)
    text = _AWS_SECRET.sub(_keep_key, text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}{REDACTED}{m.group('tail')}", text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group('scheme')} {REDACTED}", text)
    text = _TOKEN_SHAPES.sub(REDACTED, text)
    text = _masked_cards(text)
    return _SSN.sub("***-**-****", text)


def _masked_cards(text: str) -> str:
    """Mask card numbers everywhere but inside UUIDs.

    >>> _masked_cards("run 164a5efc-2291-4a4a-ab64-158311678543 card 4111-1111-1111-1111")
    'run 164a5efc-2291-4a4a-ab64-158311678543 card [card ****1111]'
    """
    if "-" not in text or not _UUID.search(text):
        return _DIGIT_RUN.sub(_mask_run, text)
    pieces: list[str] = []
    cursor = 0
    for found in _UUID.finditer(text):
        pieces.append(_DIGIT_RUN.sub(_mask_run, text[cursor : found.start()]))
        pieces.append(found.group(0))
        cursor = found.end()
    pieces.append(_DIGIT_RUN.sub(_mask_run, text[cursor:]))
    return "".join(pieces)


def _as_text(value: object) -> str:
    try:
        return str(value)
    except Exception:  # a broken __str__, or an integer too long to print
        return f"<{type(value).__name__}>"


def _masked_start(text: str, window: int) -> str:
    """The start of ``text`` as one masked line: its first ``window`` characters, or less.

    A secret cut at the window's edge is not seen whole ("postgresql://bob:p@ss/w0" keeps
    "ss/w0"), and masking a long secret before it may pull it forward into what is
    kept. Masking twice the window sees it whole: only the start on which both agree
    is kept. (A secret longer than the window itself is beyond this check.) Text that
    the longer stretch holds whole is masked whole.
    """
    first = mask_secrets(_one_line(text[:window]))
    if len(text) <= window:
        return first
    second = mask_secrets(_one_line(text[: 2 * window]))
    if len(text) <= 2 * window:
        return second
    agree = next(
        (i for i, (x, y) in enumerate(zip(first, second, strict=False)) if x != y),
        min(len(first), len(second)),
    )
    return first[:agree]


def sanitize_text(value: object, max_len: int = DEFAULT_MAX_LEN) -> str:
    """One line of at most ``max_len`` characters, with sensitive values masked.

    Newlines, tabs and other control characters become single spaces; card numbers
    (Luhn-valid, 13 to 19 digits), social security numbers, URL passwords,
    ``password=...``-style pairs and query parameters, ``Authorization`` and ``Cookie``
    headers, bearer tokens, AWS keys, private keys and API key shapes are masked;
    longer text ends in ``…``.

    >>> sanitize_text("connect postgresql://bob:p@ss/w0rd@db/x?token=abc\\nfailed")
    'connect postgresql://bob:[redacted]@db/x?token=[redacted] failed'
    """
    memo = (value, max_len) if type(value) is str and len(value) <= _CLEAN_LENGTH else None
    if memo is not None:
        # A short text sanitized before (a history line's words, a step's title): a lookup.
        done = _SANITIZED.get(memo)
        if done is not None:
            return done
    if max_len < 1:
        raise ValueError("max_len must be at least 1")
    text = value if isinstance(value, str) else _as_text(value)
    # Cut early so huge inputs cost little; the margin keeps a card number that
    # straddles max_len whole until it has been masked.
    text = _masked_start(text, 2 * max_len + 64).strip()
    if len(text) > max_len:
        text = text[: max_len - 1].rstrip() + "…"
    if memo is not None:
        if len(_SANITIZED) >= _CLEAN_COUNT:
            _SANITIZED.clear()
        _SANITIZED[memo] = text
    return text


# Short texts ``sanitize_text`` did, by (text, max_len), up to ``_CLEAN_COUNT`` of them
# (then it starts again).
_SANITIZED: dict[tuple[str, int], str] = {}


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


@functools.lru_cache(maxsize=1024)
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


class Sanitized(shapes.JsonDict):
    """Fields ``sanitize_fields`` made safe at the default length: ``sanitize_value``
    hands them back as they are. A history line's detail the interpreter made safe is
    written without being made safe a second time (nobody changes it in between)."""

    __slots__ = ()


def sanitize_value(value: Any, *, max_len: int = DEFAULT_MAX_LEN, _depth: int = 0) -> object:
    """A JSON-safe copy of ``value`` with every string sanitized and nesting bounded."""
    kind = type(value)
    if kind is Sanitized and max_len == DEFAULT_MAX_LEN and _depth == 0:
        return value
    # The kinds a history line's detail holds, told by their exact type first (a
    # subclass, a str enum say, takes the checks below): the same outcome, sooner. A
    # text sanitized before is looked up in ``sanitize_text``'s memo without calling it.
    if kind is str:
        done = _SANITIZED.get((value, max_len))
        return sanitize_text(value, max_len) if done is None else done
    if value is None or kind is bool:
        return value
    if kind is int and -_SHORTEST_CARD < value < _SHORTEST_CARD:
        return value  # too few digits for a card number, and digits are all it has
    if kind is dict and _depth < _MAX_DEPTH:
        return sanitize_fields(value, max_len=max_len, _depth=_depth + 1)
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
    fields: Mapping[Any, object], *, max_len: int = DEFAULT_MAX_LEN, _depth: int = 0
) -> shapes.JsonDict:
    """A JSON-safe copy of a mapping: sensitive fields redacted, every value sanitized.

    ``{"password": "hunter2", "card_number": "4111111111111111", "note": "hi\\n"}``
    becomes ``{"password": "[redacted]", "card_number": "****1111", "note": "hi"}``.
    """
    result: shapes.JsonDict = Sanitized() if max_len == DEFAULT_MAX_LEN and _depth == 0 else {}
    for count, (raw_key, value) in enumerate(fields.items()):
        if count >= _MAX_ITEMS:
            result["…"] = f"{len(fields) - _MAX_ITEMS} more fields"
            break
        key = (type(raw_key) is str and _SANITIZED.get((raw_key, 100))) or sanitize_text(
            raw_key, 100
        )
        if value is not None and is_sensitive_field(key):
            digits = "".join(ch for ch in str(value) if ch.isdigit())
            if _card_field(key) and _MASKED_CARD.fullmatch(str(value)):
                result[key] = str(value)  # masked already: masking twice changes nothing
            elif _card_field(key) and len(digits) >= 8 and not isinstance(value, Mapping):
                result[key] = f"****{digits[-4:]}"
            else:
                result[key] = REDACTED
            continue
        result[key] = sanitize_value(value, max_len=max_len, _depth=_depth)
    return result


def _code(code: str) -> str:
    cleaned = _CODE_CHARS.sub("_", sanitize_text(code, CODE_MAX_LEN)).strip("_")
    return cleaned or "error"


def _size(envelope: Mapping[str, object]) -> int:
    return len(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")))


def error_envelope(
    code: str,
    message: str,
    *,
    details: Mapping[str, object] | None = None,
    retryable: bool = False,
) -> shapes.JsonDict:
    """A sanitized, size-capped, JSON-safe description of an error, fit to store and log.

    ``code`` is a short machine name (``command.refused``); ``message`` one sentence.
    ``details`` are sanitized field by field and dropped (``details_truncated``) when
    they would push the envelope past ``ENVELOPE_MAX_CHARS``.
    """
    envelope: shapes.JsonDict = {
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


def _database_error(exc: BaseException) -> tuple[BaseException, str] | None:
    """A SQLAlchemy statement error's driver error and the first line of its message.

    SQLAlchemy's own text of such an error quotes the statement and its bound values —
    a record's data — and the driver's later lines do too (PostgreSQL's ``DETAIL: Key
    (email)=(…)``, ``LINE 1: …``). Recognised by its attributes, so that this module
    needs no SQLAlchemy.
    """
    if not hasattr(exc, "statement") or not hasattr(exc, "orig"):
        return None
    orig = exc.orig
    if isinstance(orig, BaseException):
        exc, text = orig, _as_text(orig)
    else:
        first = exc.args[0] if exc.args else ""
        text = first if isinstance(first, str) else ""
    return exc, (text.strip().splitlines() or [""])[0]


def exception_text(exc: BaseException) -> str:
    """What an exception says, as one masked line: no SQL, no bound values.

    >>> exception_text(ValueError("bad\\npassword=hunter2"))
    'bad password=[redacted]'
    """
    found = _database_error(exc)
    return sanitize_text(found[1] if found is not None else _as_text(exc), MESSAGE_MAX_LEN)


def describe_exception(exc: BaseException) -> str:
    """An exception as one masked line, ``ExcType: what it says``, fit for a log line.

    A database error is named by the driver's error, SQLAlchemy's wrapper and the
    statement it quotes left out.

    >>> describe_exception(KeyError("token=abc"))
    "KeyError: 'token=[redacted]'"
    """
    found = _database_error(exc)
    kind = type(exc if found is None else found[0]).__name__
    text = exception_text(exc)
    return sanitize_text(f"{kind}: {text}" if text else kind, MESSAGE_MAX_LEN)


def error_from_exception(
    exc: BaseException,
    *,
    code: str | None = None,
    retryable: bool = False,
    details: Mapping[str, object] | None = None,
) -> shapes.JsonDict:
    """The envelope of an exception: its class name as the code unless one is given."""
    message = exception_text(exc) or type(exc).__name__
    return error_envelope(code or type(exc).__name__, message, details=details, retryable=retryable)
