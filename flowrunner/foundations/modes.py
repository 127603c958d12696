"""A waiting step's ``mode``: how many events end the wait, read one way for everyone.

Validation (``flowrunner.flows.rows``) and execution (``flowrunner.flows.interpreter``) both read
a mode here, so a mode that saves is a mode that runs, and it waits for the same
number of events.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

COUNT_MAX = 999_999
# ASCII digits only: ``re``'s ``\d`` and ``int()`` would also take ``٣`` or ``1_0``.
_COUNT = re.compile(r"[0-9]{1,6}")
_SHARE = re.compile(r"([0-9]{1,3}) *%")


@dataclass(frozen=True)
class Mode:
    """How many events end a waiting step: ``any``, ``all``, a count or a share.

    >>> parse("60%").needed(5)
    3
    """

    how: Literal["any", "all", "count", "share"]
    number: int = 1

    def needed(self, asked: int) -> int:
        """The events that end the wait, given how many the command asked.

        ``any`` needs one event and a count its number, however many were asked;
        ``all`` and a share count those asked, so asking nobody leaves nothing to
        wait for (``100%`` always means the same as ``all``).
        """
        asked = max(0, asked)
        if self.how == "any":
            return 1
        if self.how == "all":
            return asked
        if self.how == "count":
            return self.number
        return math.ceil(asked * self.number / 100)

    def __str__(self) -> str:
        if self.how == "count":
            return str(self.number)
        if self.how == "share":
            return f"{self.number}%"
        return self.how


ANY = Mode("any")


def parse(text: str | None) -> Mode:
    """The mode ``text`` says; empty is ``any``. ValueError with a sentence otherwise.

    Reads ``any`` and ``all`` in any case, a count of 1 to 999999 events in ASCII
    digits, or a share of 1% to 100% of those asked; spaces around it do not matter.

    >>> parse(" All "), parse("2"), parse("60%")
    (Mode(how='all', number=1), Mode(how='count', number=2), Mode(how='share', number=60))
    """
    word = "" if text is None else text.strip().lower()
    if not word:
        return ANY
    if word == "any":
        return ANY
    if word == "all":
        return Mode("all")
    if _COUNT.fullmatch(word) and 1 <= int(word) <= COUNT_MAX:
        return Mode("count", int(word))
    share = _SHARE.fullmatch(word)
    if share and 1 <= int(share.group(1)) <= 100:
        return Mode("share", int(share.group(1)))
    raise ValueError(
        f"'{text}' is not a mode — write any, all, a number of events like 2, or a share like 60%"
    )
