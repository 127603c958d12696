"""The replay rule, pure: a body asking again for the steps a run recorded gets each one's
stored result back, in order; one asking for another step at a recorded place — another
name, kind or target — is found diverged there, with a sentence naming both steps."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from flowrunner.workflows import replay

T = datetime(2026, 3, 2, 9, tzinfo=UTC)

asks = st.lists(
    st.builds(
        replay.Ask,
        name=st.text("abcdef-", min_size=1, max_size=6),
        kind=st.sampled_from(replay.KINDS),
        target=st.one_of(st.none(), st.sampled_from(["assess", "credit", "po.decided"])),
    ),
    min_size=1,
    max_size=8,
    unique_by=lambda ask: ask.name,
)


def recorded(steps: list[replay.Ask]) -> replay.Recording:
    rec = replay.Recording()
    for n, ask in enumerate(steps):
        rec.finish(ask, {"n": n}, T, None)
    return rec


@given(asks)
def test_the_same_body_replays_every_recorded_step_with_its_result(steps: list[replay.Ask]) -> None:
    rec = recorded(steps)
    for n, ask in enumerate(steps):
        judged = replay.replay(rec, n, ask, 1)
        assert isinstance(judged, replay.Replayed)
        assert judged.step.result == {"n": n}
    assert replay.replay(rec, len(steps), replay.Ask("next", replay.NOW), 1) == replay.Fresh(None)
    assert replay.ended_early(rec, len(steps), 1) is None


@given(asks, st.data())
def test_another_step_at_a_recorded_place_is_diverged_there(
    steps: list[replay.Ask], data: st.DataObject
) -> None:
    rec = recorded(steps)
    at = data.draw(st.integers(0, len(steps) - 1))
    was = steps[at]
    changed = data.draw(
        st.sampled_from(
            [
                replay.Ask(was.name + "x", was.kind, was.target),
                replay.Ask(was.name, next(k for k in replay.KINDS if k != was.kind), was.target),
                replay.Ask(was.name, was.kind, "other" if was.target != "other" else None),
            ]
        )
    )
    for n in range(at):
        assert isinstance(replay.replay(rec, n, steps[n], 3), replay.Replayed)
    judged = replay.replay(rec, at, changed, 3)
    assert isinstance(judged, replay.Diverged)
    if judged.code == "workflow_diverged":
        assert judged.sentence == (
            f"step {at + 1} asked for {changed.words()}, but this run recorded "
            f"{was.words()} there at version 3"
        )
    else:  # the new name is an earlier step's
        assert judged.code == "step_name_repeated" and changed.name in judged.sentence
    early = replay.ended_early(rec, at, 3)
    assert early is not None and f"before step {at + 1}, {was.words()}" in early.sentence


@given(asks)
def test_the_recording_keeps_its_steps_through_json(steps: list[replay.Ask]) -> None:
    rec = recorded(steps)
    rec.pending = replay.Pending("wait", replay.SLEEP, None, T.isoformat(), T.isoformat(), 2)
    assert replay.Recording.from_dict(rec.to_dict()) == rec
