"""A waiting step's mode is read one way: a mode validation accepts is one the interpreter
runs, with the same number of events to wait for, and nothing else is either."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fixtures.purchase_orders import app as po
from flowrunner import query
from flowrunner.flows import rows, snapshot
from flowrunner.flows.interpreter import reading
from flowrunner.foundations import modes

BINDING = po.binding
COLUMNS = query.column_types(po.purchase_order)


def _row(mode: Any) -> dict[str, Any]:
    return {"flow_id": 7, "position": 1, "kind": "approval", "approver": "ann", "mode": mode}


def validated(mode: Any) -> modes.Mode | None:
    """The mode validation reads, or None when it refuses the row's mode."""
    problems = rows.step_errors(BINDING, _row(mode), COLUMNS)
    assert all(p.field == "mode" for p in problems), problems
    if problems:
        return None
    step, _ = rows.read_step(BINDING, _row(mode))
    return modes.parse(step.mode)


def run(mode: Any) -> modes.Mode | None:
    """The mode the interpreter runs, or None when the step is broken by it."""
    snap = snapshot.FlowSnapshot.build(
        {"id": 7, "name": "f", "start": "created"}, [{"id": 1, **_row(mode)}]
    )
    try:
        return reading.mode(snap.steps[0])
    except reading.Broken as broken:
        assert broken.message.startswith("its mode cannot be read: "), broken.message
        return None


near = st.one_of(
    st.from_regex(r"\s*(any|all|[0-9+_-]{0,8} *%?|[0-9]{1,7})\s*", fullmatch=True),
    st.tuples(st.sampled_from(["any", "all", "All", "ANY", " all "]), st.booleans()).map(
        lambda t: t[0].swapcase() if t[1] else t[0]
    ),
    st.integers(-2, 1_000_001).map(str),
    st.integers(-2, 120).map(lambda n: f"{n}%"),
    st.text(st.characters(categories=["Nd", "Zs", "Po"]), max_size=4),
)
texts = st.one_of(st.text(max_size=10), near)


@given(texts)
@example("1_0")
@example("+2")
@example("٣")
@example("0")
@example("101%")
@example(" All ")
@example("60 %")
@example("1000000")
@example("999999")
@example("")
def test_validation_accepts_a_mode_iff_the_interpreter_runs_it_and_both_read_it_alike(
    text: str,
) -> None:
    saved, ran = validated(text), run(text)
    assert saved == ran
    if ran is not None and text.strip():
        assert text.strip().isascii()


@given(st.one_of(st.integers(-5, 2_000_000), st.booleans(), st.floats(allow_nan=False)))
def test_a_mode_typed_as_a_number_reads_alike_too(value: Any) -> None:
    assert validated(value) == run(value)


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("1_0", None),
        ("+2", None),
        ("-2", None),
        ("٣", None),  # an Arabic-Indic three: a digit to int(), not to a designer
        ("３", None),  # a fullwidth three
        ("0", None),
        ("0%", None),
        ("101%", None),
        ("1000000", None),
        ("2.0", None),
        ("most", None),
        (" All ", modes.Mode("all")),
        ("ANY", modes.ANY),
        (None, modes.ANY),
        ("   ", modes.ANY),
        ("2", modes.Mode("count", 2)),
        ("999999", modes.Mode("count", 999_999)),
        ("1%", modes.Mode("share", 1)),
        ("60%", modes.Mode("share", 60)),
        ("60 %", modes.Mode("share", 60)),
        ("100%", modes.Mode("share", 100)),
    ],
)
def test_the_cases(text: str | None, read: modes.Mode | None) -> None:
    if read is None:
        with pytest.raises(ValueError, match="is not a mode — write any, all"):
            modes.parse(text)
    else:
        assert modes.parse(text) == read
    assert validated(text) == run(text) == read


# (mode, how many its command asked, how many answers end the wait): for the mode here,
# and for a waiting step's run in the interpreter's scenario tests.
QUORUMS = [
    ("any", 0, 1),
    ("any", 3, 1),
    ("any", 5, 1),
    ("all", 0, 0),  # asking nobody leaves nothing to wait for
    ("all", 3, 3),
    ("2", 0, 2),
    ("2", 5, 2),
    ("3", 1, 3),
    ("60%", 0, 0),
    ("60%", 1, 1),
    ("60%", 5, 3),
    ("10%", 2, 1),
    ("100%", 0, 0),
    ("all", -1, 0),
]


@pytest.mark.parametrize(("mode", "asked", "needed"), QUORUMS)
def test_needed(mode: str, asked: int, needed: int) -> None:
    assert modes.parse(mode).needed(asked) == needed


@given(st.integers(0, 10_000), st.integers(1, 100))
def test_a_share_is_all_at_100_percent_and_never_more_than_asked(asked: int, share: int) -> None:
    assert modes.parse("100%").needed(asked) == modes.parse("all").needed(asked) == asked
    needed = modes.Mode("share", share).needed(asked)
    assert needed <= asked and (needed >= 1 or asked == 0)


@given(texts)
def test_a_mode_reads_back_from_its_own_words(text: str) -> None:
    try:
        mode = modes.parse(text)
    except ValueError:
        return
    assert modes.parse(str(mode)) == mode
