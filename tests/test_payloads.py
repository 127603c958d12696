"""The payload rule (``flowrunner.foundations.payloads``): what the store can keep, the rest refused
with a sentence naming the field — never a ``RecursionError`` or ``TypeError``."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import pydantic
import pydantic_core
import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowrunner.foundations import payloads


def nested(depth: int) -> dict[str, Any]:
    """A payload ``depth`` containers deep (the payload itself is the first)."""
    inner: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        inner = {"x": inner}
    return inner


def test_plain_data_is_kept_as_it_is() -> None:
    payload = {
        "order": 7,
        "decision": "approved",
        "ratio": 0.25,
        "urgent": True,
        "note": None,
        "lines": [{"qty": 2}, {"qty": -1}],
        "": "an empty name is a name",
        "unicode": "naïve ✓ 日本",
        "edges": [payloads.MIN_INT, payloads.MAX_INT, -0.0, 1e308, 5e-324],
    }
    assert payloads.plain(payload) == payload
    assert json.loads(json.dumps(payloads.plain(payload))) == payload


def test_what_web_payloads_carry_is_taken_unambiguously() -> None:
    moment = datetime(2026, 3, 2, 9, 30, tzinfo=timezone(timedelta(hours=2)))
    kept = payloads.plain({"at": moment, "naive": datetime(2026, 3, 2, 9, 30), "t": (1, 2)})
    assert kept == {
        "at": "2026-03-02T09:30:00+02:00",
        "naive": "2026-03-02T09:30:00Z",  # naive means UTC
        "t": [1, 2],
    }
    assert payloads.plain({"at": datetime(2026, 1, 1, tzinfo=UTC)}) == {
        "at": "2026-01-01T00:00:00Z"
    }


class Decision(enum.Enum):
    APPROVED = "approved"
    REJECTED = "rejected"


class Level(enum.IntEnum):
    HIGH = 3


class Line(pydantic.BaseModel):
    sku: str
    price: Decimal
    due: date


@dataclasses.dataclass
class Signed:
    by: uuid.UUID
    at: datetime


def test_decimals_dates_uuids_enums_and_models_are_kept_as_json_would_carry_them() -> None:
    approver = uuid.UUID("8c4d4d4e-9c4b-4f7e-a1b2-c3d4e5f6a7b8")
    payload = {
        "order": 7,
        "amount": Decimal("1234.50"),
        "needed_by": date(2026, 4, 1),
        "decided_at": datetime(2026, 3, 2, 9, 30),
        "at": time(9, 30),
        "took": timedelta(hours=1, minutes=30),
        "approver": approver,
        "decision": Decision.APPROVED,
        "level": Level.HIGH,
        "lines": [Line(sku="A-1", price=Decimal("9.90"), due=date(2026, 4, 1))],
        "signed": Signed(by=approver, at=datetime(2026, 3, 2, 9, 30, tzinfo=UTC)),
    }
    kept = payloads.plain(payload)
    assert kept == {
        "order": 7,
        "amount": "1234.50",  # every digit kept: a float would not
        "needed_by": "2026-04-01",
        "decided_at": "2026-03-02T09:30:00Z",
        "at": "09:30:00",
        "took": "PT1H30M",
        "approver": "8c4d4d4e-9c4b-4f7e-a1b2-c3d4e5f6a7b8",
        "decision": "approved",
        "level": 3,
        "lines": [{"sku": "A-1", "price": "9.90", "due": "2026-04-01"}],
        "signed": {"by": "8c4d4d4e-9c4b-4f7e-a1b2-c3d4e5f6a7b8", "at": "2026-03-02T09:30:00Z"},
    }
    assert type(kept["level"]) is int and type(kept["decision"]) is str
    # What a FastAPI app answers for the same values is what the store keeps.
    assert json.loads(json.dumps(kept)) == pydantic_core.to_jsonable_python(
        {**payload, "decided_at": datetime(2026, 3, 2, 9, 30, tzinfo=UTC)}
    )


def test_nesting_up_to_the_limit_is_kept_beyond_it_refused() -> None:
    assert payloads.plain(nested(payloads.MAX_DEPTH)) == nested(payloads.MAX_DEPTH)
    with pytest.raises(payloads.NotPlain, match="deeper than 32 levels"):
        payloads.plain(nested(payloads.MAX_DEPTH + 1))
    in_lists: Any = 1
    for _ in range(payloads.MAX_DEPTH - 1):
        in_lists = [in_lists]
    assert payloads.plain({"x": in_lists}) == {"x": in_lists}
    with pytest.raises(payloads.NotPlain, match="deeper than 32 levels"):
        payloads.plain({"x": [in_lists]})


def test_a_payload_that_holds_itself_is_refused_not_a_recursion_error() -> None:
    loop: dict[str, Any] = {"order": 7}
    loop["self"] = loop
    with pytest.raises(payloads.NotPlain, match="deeper than 32 levels"):
        payloads.plain(loop)
    items: list[Any] = []
    items.append(items)
    with pytest.raises(payloads.NotPlain, match="deeper than 32 levels"):
        payloads.plain({"items": items})


@dataclasses.dataclass
class Reading:
    value: float


class Odd(enum.Enum):
    WHAT = object()  # an enum whose value is no data


class Level2(enum.IntEnum):
    HUGE = 2**70


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"price": math.nan}, "field 'price' is NaN, which cannot be stored: send a finite"),
        ({"price": math.inf}, "field 'price' is infinite"),
        ({"price": -math.inf}, "field 'price' is infinite"),
        ({"n": 2**63}, "field 'n' is a whole number beyond"),
        ({"n": -(2**63) - 1}, "field 'n' is a whole number beyond"),
        ({"n": 10**5000}, "field 'n' is a whole number beyond"),
        ({"note": "a\x00b"}, "field 'note' contains the character \\\\x00"),
        ({"note": "a\ud800b"}, "field 'note' contains a lone surrogate"),
        ({"a\x00": 1}, "has a name that contains the character \\\\x00"),
        ({1: "one"}, "has the name 1, which is not text"),
        ({None: "none"}, "has the name None, which is not text"),
        ({"lines": [{"qty": math.nan}]}, "field 'lines\\[0\\].qty' is NaN"),
        ({"a": {"b": {2: 1}}}, "field 'a.b' has the name 2"),
        ({"d": Decimal("NaN")}, "field 'd' is NaN, which cannot be stored"),
        ({"d": Decimal("sNaN")}, "field 'd' is NaN, which cannot be stored"),
        ({"d": Decimal("-Infinity")}, "field 'd' is infinite"),
        ({"b": b"\x00"}, "field 'b' is of type bytes .* not plain data: send text"),
        ({"b": bytearray(b"ab")}, "field 'b' is of type bytearray"),
        ({"s": {1, 2}}, "field 's' is of type set"),
        ({"s": frozenset({"a"})}, "field 's' is of type frozenset"),
        ({"o": object()}, "field 'o' is of type object"),
        ({"e": Odd.WHAT}, "field 'e' is of type Odd"),
        ({"m": Reading(value=math.nan)}, "field 'm.value' is NaN"),
        ({"m": [Line.model_construct(sku="\x00")]}, "field 'm\\[0\\].sku' contains"),
        ({"big": Level2.HUGE}, "field 'big' is a whole number beyond"),
        ({"x": "y" * 10_000, "o": object()}, "field 'o'"),
    ],
)
def test_what_cannot_be_stored_is_refused_naming_the_field(
    payload: dict[Any, Any], message: str
) -> None:
    with pytest.raises(payloads.NotPlain, match=message) as refused:
        payloads.plain(payload)
    assert len(str(refused.value)) < 300, "a message quotes a value, never all of it"
    assert "\n" not in str(refused.value)


def test_a_payload_must_be_a_mapping() -> None:
    with pytest.raises(payloads.NotPlain, match="the payload must be a mapping"):
        payloads.plain([("order", 7)])  # type: ignore[arg-type]


TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]))
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(payloads.MIN_INT, payloads.MAX_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(TEXT, JSON, max_size=5))
def test_any_plain_json_within_the_limits_is_kept_unchanged(payload: dict[str, Any]) -> None:
    assert payloads.plain(payload) == payload


WEB_VALUES = st.one_of(
    st.decimals(allow_nan=False, allow_infinity=False),
    st.dates(),
    st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5))])),
    st.times(),
    st.timedeltas(),
    st.uuids(),
    st.sampled_from(list(Decision) + list(Level)),
)
WEB = st.recursive(
    JSON | WEB_VALUES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=12,
)


@given(st.dictionaries(TEXT, WEB, max_size=5))
def test_web_values_are_kept_as_pydantic_and_fastapi_write_them(payload: dict[str, Any]) -> None:
    kept = payloads.plain(payload)
    assert kept == pydantic_core.to_jsonable_python(payload)
    assert json.loads(json.dumps(kept, allow_nan=False)) == kept
    assert payloads.plain(kept) == kept, "what is kept is kept unchanged a second time"
