"""An answer link's token: what it says comes back whole under its secret, and nothing
else does — not a token changed in any one character, not one signed with another
secret, not garbage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from flowrunner.foundations import answer_tokens as tokens

SECRET = b"the runner's links secret, 32 by"
OTHER = b"another runner's secret, 32 byte"

_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=tokens.MAX_ANSWER
)
_ids = st.integers(min_value=1, max_value=2**63 - 1)
_moments = st.integers(min_value=0, max_value=4_102_444_800).map(
    lambda s: datetime.fromtimestamp(s, UTC)
)
claims = st.builds(
    tokens.Claims,
    run_id=_ids,
    step_id=st.integers(min_value=1, max_value=2**63 - 1).map(str),
    position=st.integers(min_value=0, max_value=10_000),
    pass_=st.integers(min_value=1, max_value=1000),
    answer=_text,
    person=_text,
    expires=_moments,
    link_id=st.just(None).map(lambda _: tokens.new_link_id()),
    tenant=st.none() | _text,
)


@given(claims)
def test_a_token_says_what_it_was_signed_with(said: tokens.Claims) -> None:
    assert tokens.verify(tokens.sign(said, SECRET), SECRET) == said


@given(claims, st.data())
def test_a_token_changed_in_any_character_is_refused(
    said: tokens.Claims, data: st.DataObject
) -> None:
    token = tokens.sign(said, SECRET)
    at = data.draw(st.integers(min_value=0, max_value=len(token) - 1), label="at")
    instead = data.draw(st.characters().filter(lambda c: c != token[at]), label="instead")
    changed = token[:at] + instead + token[at + 1 :]
    assert tokens.verify(changed, SECRET) is None


@given(claims, st.data())
def test_a_token_cut_or_lengthened_is_refused(said: tokens.Claims, data: st.DataObject) -> None:
    token = tokens.sign(said, SECRET)
    cut = data.draw(st.integers(min_value=0, max_value=len(token) - 1), label="cut")
    tail = data.draw(st.text(min_size=1, max_size=5), label="tail")
    assert tokens.verify(token[:cut], SECRET) is None
    assert tokens.verify(token + tail, SECRET) is None


@given(claims)
def test_a_token_never_verifies_under_another_secret(said: tokens.Claims) -> None:
    assert tokens.verify(tokens.sign(said, SECRET), OTHER) is None


@given(st.text(max_size=300) | st.binary(max_size=50) | st.integers() | st.none())
def test_garbage_is_refused_not_raised(garbage: object) -> None:
    assert tokens.verify(garbage, SECRET) is None


def test_a_link_expires_at_its_moment() -> None:
    at = datetime(2026, 3, 9, 9, tzinfo=UTC)
    said = tokens.Claims(1, "5", 1, 1, "approved", "ann", at, tokens.new_link_id())
    back = tokens.verify(tokens.sign(said, SECRET), SECRET)
    assert back is not None
    assert not back.expired(at - timedelta(seconds=1))
    assert back.expired(at)


def test_each_link_has_its_own_random_id() -> None:
    made = {tokens.new_link_id() for _ in range(1000)}
    assert len(made) == 1000
    assert all(len(link_id) == 16 for link_id in made)


def test_a_secret_too_short_to_sign_is_refused_with_a_sentence() -> None:
    assert tokens.check_secret("short") == (
        "the links secret must be at least 16 bytes (use 32 random bytes: secrets.token_bytes(32))"
    )
    assert tokens.check_secret("a" * 32) == b"a" * 32
