"""A run at its head in words: why it ended, by its step's title, and whether retrying
can help — said once, as the cause of the failure says it, never as two flags that
disagree (the run's ``retryable False`` above its cause's ``retryable True``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from flowrunner.history import runs

TIMED_OUT: dict[str, Any] = {
    "code": "command.failed",
    "message": "step 'Send to supplier' (send, position 2) failed: timed out after 30 seconds",
    "retryable": False,
    "details": {
        "step_id": 4,
        "position": 2,
        "cause": {
            "code": "command_timed_out",
            "message": "timed out after 30 seconds",
            "retryable": True,
        },
    },
}
REFUSED: dict[str, Any] = {
    "code": "command.refused",
    "message": "step 'Send to supplier' (send, position 2) failed: the command refused: "
    "account closed",
    "retryable": False,
    "details": {"cause": {"code": "refused", "message": "account closed", "retryable": False}},
}


def test_a_step_in_a_reason_is_named_by_its_title_alone() -> None:
    said = runs.reason(
        "step 'Send to supplier' (send, position 2) failed: the gateway refused: timeout"
    )
    assert said == "Send to supplier failed: the gateway refused: timeout"
    assert runs.reason("step 'Ann's check' (approval, position 10) failed: x") == (
        "Ann's check failed: x"
    )
    assert runs.reason("cancelled by olga: merged") == "cancelled by olga: merged"
    assert runs.reason(None) == ""


def test_a_command_that_timed_out_can_be_retried_though_the_run_is_marked_otherwise() -> None:
    assert runs.retrying(TIMED_OUT) == "It can be retried: what it failed on may pass."
    assert runs.can_retry(TIMED_OUT)


def test_a_refusal_says_retrying_will_not_help_until_its_cause_is_put_right() -> None:
    assert runs.retrying(REFUSED) == (
        "Retrying will not help until what it failed on is put right: account closed."
    )
    assert not runs.can_retry(REFUSED)


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            {"code": "step.broken", "message": "it is broken", "retryable": False},
            "Retrying will not help until the step is put right in the flow.",
        ),
        (
            {"code": "engine_error", "message": "KeyError: 'x'", "retryable": False},
            "Retrying will not help until what it failed on is put right.",
        ),
        ({"code": "x", "message": "y", "retryable": True}, runs.RETRYABLE),
        (None, None),
    ],
)
def test_a_failure_without_a_cause_is_judged_by_its_own_envelope(
    error: dict[str, Any] | None, said: str | None
) -> None:
    assert runs.retrying(error) == said


def test_the_envelope_a_reader_sees_keeps_its_codes_and_says_retrying_nowhere() -> None:
    shown = runs.shown_error(TIMED_OUT)
    assert shown == {
        "code": "command.failed",
        "message": "Send to supplier failed: timed out after 30 seconds",
        "details": {
            "step_id": 4,
            "position": 2,
            "cause": {"code": "command_timed_out", "message": "timed out after 30 seconds"},
        },
    }
    assert TIMED_OUT["retryable"] is False  # the stored envelope is left as it was


GUIDE = Path(__file__).resolve().parent.parent / "docs" / "history.md"


def test_the_guide_shows_a_run_at_its_head_as_these_words_say_it() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("## A run at its head") : text.index("## A flow's steps")]
    rows = re.findall(r"^\| (?!stored|---)(.+?) \| (.+?) \|$", section, re.M)
    broken = {"code": "step.broken", "message": "it is broken", "retryable": False}
    assert [read for _, read in rows] == [
        runs.reason(TIMED_OUT["message"]),
        runs.retrying(TIMED_OUT),
        runs.retrying(REFUSED),
        runs.retrying(broken),
    ]
    assert rows[0][0] == f"reason {TIMED_OUT['message']}"
