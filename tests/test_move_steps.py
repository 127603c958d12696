"""Moving a step up or down its flow (``saving.moved``, what the console's ↑ and ↓ do):
a step alone at its position trades places with the steps beside it, one sharing its
position gets a position of its own, and every goto follows the steps it named — for
any flow (hypothesis)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from flowrunner.flows import edits

Step = dict[str, Any]


@st.composite
def flows(draw: st.DrawFn) -> list[Step]:
    """Steps at distinct positions (one to three sharing each), some with a goto."""
    positions = sorted(draw(st.sets(st.integers(0, 200), min_size=1, max_size=7)))
    steps: list[Step] = []
    for position in positions:
        for _ in range(draw(st.integers(1, 3))):
            goto = draw(st.none() | st.sampled_from(positions))
            steps.append({"id": len(steps) + 1, "position": position, "goto": goto})
    return steps


def applied(steps: Sequence[Step], changed: Sequence[Step]) -> list[Step]:
    by_id = {s["id"]: s for s in changed}
    return [dict(by_id.get(s["id"], s)) for s in steps]


def groups(steps: Sequence[Mapping[str, Any]]) -> list[set[int]]:
    """The steps' ids grouped by position, in the order of the positions."""
    found: dict[int, set[int]] = {}
    for step in sorted(steps, key=lambda s: (s["position"], s["id"])):
        found.setdefault(step["position"], set()).add(step["id"])
    return [found[p] for p in sorted(found)]


def named(steps: Sequence[Mapping[str, Any]], step: Mapping[str, Any]) -> set[int]:
    """The ids of the steps ``step``'s goto names (empty: no goto)."""
    goto = step.get("goto")
    return {s["id"] for s in steps if goto is not None and s["position"] == goto}


@given(flows(), st.data(), st.sampled_from([-1, 1]))
def test_a_step_moves_one_place_and_every_goto_follows_its_steps(
    steps: list[Step], data: st.DataObject, by: int
) -> None:
    step = data.draw(st.sampled_from(steps))
    after = applied(steps, edits.moved(steps, step["id"], by))
    before_groups, after_groups = groups(steps), groups(after)
    home = next(g for g in before_groups if step["id"] in g)
    at = before_groups.index(home)
    if len(home) > 1:
        # It leaves its group for a position of its own, just before or after it.
        rest = home - {step["id"]}
        expected = [*before_groups[:at], rest, *before_groups[at + 1 :]]
        expected.insert(at if by < 0 else at + 1, {step["id"]})
    elif 0 <= at + by < len(before_groups):
        expected = list(before_groups)
        expected[at], expected[at + by] = expected[at + by], expected[at]
    else:
        expected = before_groups  # first (or last) already: nothing moves
    assert after_groups == expected
    # The numbers: the same ones while the count of positions stays, else 10, 20, ...
    numbers = sorted({s["position"] for s in after})
    if len(after_groups) == len(before_groups):
        assert numbers == sorted({s["position"] for s in steps})
    else:
        assert numbers == [10 * (i + 1) for i in range(len(after_groups))]
    # Each goto names the same steps as before (less the moved one, if it left them).
    left = {step["id"]} if len(home) > 1 else set()
    for old, new in zip(steps, after, strict=True):
        assert named(after, new) == named(steps, old) - left


@given(flows(), st.data())
def test_a_step_alone_moved_up_then_down_is_where_it_was(
    steps: list[Step], data: st.DataObject
) -> None:
    alone = [s for s in steps if sum(t["position"] == s["position"] for t in steps) == 1]
    if not alone:
        return
    step = data.draw(st.sampled_from(alone))
    up = applied(steps, edits.moved(steps, step["id"], -1))
    back = applied(up, edits.moved(up, step["id"], 1))
    if up != steps:  # it was not first already
        assert back == steps
