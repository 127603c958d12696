"""A run at its head, in words: why it ended, its step named by title as the history
names it, and whether retrying it can help, said once from its failure envelope.

The console's run page and ``flowrunner runs show`` / ``runs list`` read these; the run's
typed fields (``reason``, ``error`` with its ``code`` and ``retryable`` flags) stay as
the engine wrote them, for programs. Pure: no SQL, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# How the engine names a step in a run's reason: ``step 'Send' (send, position 2)``.
_STEP = re.compile(r"step '(?P<title>.*?)' \([\w.-]+, position -?\d+\)")

RETRYABLE = "It can be retried: what it failed on may pass."


def reason(text: str | None) -> str:
    """A run's reason in the flow's words: a step by its title alone.

    >>> reason("step 'Send to supplier' (send, position 2) failed: the gateway refused")
    'Send to supplier failed: the gateway refused'
    >>> reason("the flow ended after its last step")
    'the flow ended after its last step'
    """
    if not text:
        return ""
    return _STEP.sub(lambda found: found.group("title"), text)


def cause_of(error: Mapping[str, object] | None) -> Mapping[str, object] | None:
    """What the failed step's command said, as its envelope: the run's ``details.cause``."""
    details = error.get("details") if error else None
    cause = details.get("cause") if isinstance(details, Mapping) else None
    return cause if isinstance(cause, Mapping) else None


def can_retry(error: Mapping[str, object] | None) -> bool:
    """Whether retrying the failed run may help: what its command failed with says so
    (a time-out, a service away), else the run's own envelope."""
    cause = cause_of(error)
    if cause is not None and "retryable" in cause:
        return bool(cause["retryable"])
    return bool(error.get("retryable")) if error else False


def retrying(error: Mapping[str, object] | None) -> str | None:
    """Whether retrying a failed run can help, in one sentence (None without a failure).

    >>> retrying({"code": "command.refused", "message": "...", "retryable": False,
    ...           "details": {"cause": {"message": "account closed", "retryable": False}}})
    'Retrying will not help until what it failed on is put right: account closed.'
    >>> retrying({"code": "command.failed", "retryable": False,
    ...           "details": {"cause": {"message": "timed out", "retryable": True}}})
    'It can be retried: what it failed on may pass.'
    """
    if not error:
        return None
    if can_retry(error):
        return RETRYABLE
    if error.get("code") == "step.broken":
        return "Retrying will not help until the step is put right in the flow."
    cause = cause_of(error)
    said = cause.get("message") if cause is not None else None
    if isinstance(said, str) and said.strip():
        return f"Retrying will not help until what it failed on is put right: {_stop(said)}"
    return "Retrying will not help until what it failed on is put right."


def shown_error(error: Mapping[str, object]) -> dict[str, object]:
    """A failure envelope as a reader is shown it: its ``message`` in the flow's words,
    without the ``retryable`` flags (``retrying`` says it once); every code kept."""
    shown: dict[str, object] = {}
    for name, value in error.items():
        if name == "retryable":
            continue
        if isinstance(value, Mapping):
            shown[name] = shown_error(value)
        elif name == "message" and isinstance(value, str):
            shown[name] = reason(value)
        else:
            shown[name] = value
    return shown


def _stop(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else f"{text}."
