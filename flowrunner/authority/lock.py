"""The authority lock: every part of an application that runs a command — each kind,
job, timer, inbound endpoint, code workflow and its ``run`` steps — with the principal it
runs as, the commands it names and every command that principal may call, as sorted,
stable text (``authority.lock``), and what differs from it in sentences. Pure: no I/O.

    entries = [Entry("kind approval", "automation", ("request_approval",),
                     ("request_approval", "send_order"))]
    locked = read(text(entries))        # the same entries back
    differences(locked, entries)        # [] — nothing granted beyond the lock
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections.abc import Iterable, Sequence

FILE = "authority.lock"

HEADER = """\
# authority.lock: who each part of the application runs as, and what it may call.
# Written by `flowrunner authority lock`; `flowrunner authority check` fails while the
# application grants more or other than this file, so a widened grant is reviewed.
"""


class LockInvalid(ValueError):
    """A lock file that cannot be read: a sentence naming what is wrong."""


@dataclasses.dataclass(frozen=True, order=True)
class Entry:
    """One part of the application (``"kind approval"``, ``"job nightly"``, ``"timer at
    due_at"``, ``"inbound paid"``, ``"workflow late_fees"``, ``"workflow late_fees step
    post"``) as one principal: the commands it names (``calls``) and those the
    principal may call (``may_call``)."""

    part: str
    runs_as: str
    calls: tuple[str, ...] = ()
    may_call: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "calls", tuple(sorted(set(self.calls))))
        object.__setattr__(self, "may_call", tuple(sorted(set(self.may_call))))

    @property
    def key(self) -> tuple[str, str]:
        return (self.part, self.runs_as)


def _string(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, but for DEL, which TOML escapes."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007F")


def _strings(values: Sequence[str]) -> str:
    return "[" + ", ".join(_string(value) for value in values) + "]"


def text(entries: Iterable[Entry]) -> str:
    """The lock's text: the header, then each entry as a TOML ``[[part]]`` table, sorted
    by part and principal, so the same grants always write the same bytes.

    >>> nightly = Entry("job nightly", "clock", ("close",), ("close",))
    >>> print(text([nightly]), end="")  # doctest: +ELLIPSIS
    # authority.lock: ...
    ...
    [[part]]
    name = "job nightly"
    runs_as = "clock"
    calls = ["close"]
    may_call = ["close"]
    """
    blocks = [HEADER]
    for entry in sorted(set(entries)):
        blocks.append(
            "[[part]]\n"
            f"name = {_string(entry.part)}\n"
            f"runs_as = {_string(entry.runs_as)}\n"
            f"calls = {_strings(entry.calls)}\n"
            f"may_call = {_strings(entry.may_call)}\n"
        )
    return "\n".join(blocks)


def read(content: str) -> list[Entry]:
    """The entries a lock's text holds; ``LockInvalid`` with a sentence when it is not one."""
    try:
        found = tomllib.loads(content)
    except tomllib.TOMLDecodeError as exc:
        raise LockInvalid(f"{FILE} cannot be read ({exc}): write it again with `lock`") from None
    parts = found.get("part", [])
    if not isinstance(parts, list) or set(found) - {"part"}:
        raise LockInvalid(f"{FILE} holds only [[part]] tables: write it again with `lock`")
    entries = []
    for number, part in enumerate(parts, start=1):
        name, runs_as = part.get("name"), part.get("runs_as")
        calls, may_call = part.get("calls", []), part.get("may_call", [])
        if (
            not isinstance(name, str)
            or not isinstance(runs_as, str)
            or not _texts(calls)
            or not _texts(may_call)
            or set(part) - {"name", "runs_as", "calls", "may_call"}
        ):
            raise LockInvalid(
                f"{FILE}: part {number} needs a name, runs_as, and calls and may_call as "
                "lists of names: write it again with `lock`"
            )
        entries.append(Entry(name, runs_as, tuple(calls), tuple(may_call)))
    return entries


def _texts(values: object) -> bool:
    return isinstance(values, list) and all(isinstance(value, str) for value in values)


def _listed(names: Iterable[str]) -> str:
    return ", ".join(names)


def differences(locked: Iterable[Entry], now: Iterable[Entry]) -> list[str]:
    """What the application grants now beyond or besides the lock, one sentence each, in
    the lock's order; empty when they agree.

    >>> old = [Entry("kind send", "bot", ("send",), ("send",))]
    >>> differences(old, [Entry("kind send", "bot", ("send",), ("delete", "send"))])
    ['kind send runs as bot, which may now also call delete (authority.lock does not grant it)']
    """
    before = {entry.key: entry for entry in locked}
    after = {entry.key: entry for entry in now}
    said: list[str] = []
    for key in sorted(before.keys() | after.keys()):
        part, principal = key
        old, new = before.get(key), after.get(key)
        if old is None and new is not None:
            calling = f", calling {_listed(new.calls)}" if new.calls else ""
            said.append(
                f"{part} runs as {principal}{calling}, which {FILE} does not list "
                f"(it may call {_listed(new.may_call) or 'nothing'})"
            )
        elif new is None and old is not None:
            said.append(f"{FILE} lists {part} as {principal}, which the application no longer has")
        elif old is not None and new is not None:
            said += _changed(part, principal, old, new)
    return said


def _changed(part: str, principal: str, old: Entry, new: Entry) -> list[str]:
    said = []
    wider = [name for name in new.may_call if name not in old.may_call]
    narrower = [name for name in old.may_call if name not in new.may_call]
    called = [name for name in new.calls if name not in old.calls]
    dropped = [name for name in old.calls if name not in new.calls]
    if wider:
        said.append(
            f"{part} runs as {principal}, which may now also call {_listed(wider)} "
            f"({FILE} does not grant it)"
        )
    if narrower:
        said.append(
            f"{part} runs as {principal}, which may no longer call {_listed(narrower)} "
            f"({FILE} still grants it)"
        )
    if called:
        said.append(f"{part} now calls {_listed(called)}, which {FILE} does not list")
    if dropped:
        said.append(f"{part} no longer calls {_listed(dropped)}, which {FILE} lists")
    return said
